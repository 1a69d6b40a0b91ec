"""Target 'cuda': CUDA C from loop IR, checked against numpy by running it on the CPU.

No GPU here: CudaModule.emulator() compiles the generated source as C++ and runs it block by
block (a block's threads one after another, or as real threads meeting at a barrier when
the kernel has __syncthreads, over NaN-poisoned shared memory). Where nvcc is on PATH,
te.build also compiles the source to PTX, so the CUDA compiler checks every source too.
Random inputs, odd sizes, splits that do not divide, symbolic sizes; and the schedules
target 'cuda' refuses, with their messages.
"""
import shutil

import numpy as np
import pytest
from helpers import (bind, build_reference, np_softmax, rand_array, run_emulated,
                     schedule_softmax_rows, shared_matmul, softmax_graph)

import te
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc

HAS_NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="nvcc (CUDA toolkit) is not on PATH")


def _buffer(name, size=32, dtype="float32", scope="global"):
    """A flat buffer for a hand-made function."""
    return ir.Buffer(name, dtype, (E.const(size),), (E.const(1),), E.Var(name, "handle"),
                     scope=scope)


def test_elementwise_with_a_symbolic_size_and_a_tail_block():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.exp(A[i]) * B[i] - 0.5, name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 64)
    mod = te.build(s, [A, B, C], target="cuda")
    src = mod.get_source()
    assert 'extern "C" __global__ void __launch_bounds__(64) main_kernel0(' \
           'const float* __restrict__ A, const float* __restrict__ B, ' \
           'float* __restrict__ C, int n)' in src
    assert "const int i_outer = ((int)blockIdx.x);" in src
    assert "const int i_inner = ((int)threadIdx.x);" in src
    assert "te_floordiv" not in src   # the helpers come only where a kernel uses them
    for size in (1, 63, 64, 1000):
        a, b = rand_array((size,)), rand_array((size,))
        (c,) = run_emulated(mod, [a, b], [(size,)], ["float32"])
        np.testing.assert_allclose(c, np.exp(a) * b - 0.5, rtol=1e-6, atol=1e-6)
    (c,) = run_emulated(mod, [np.zeros(0, "float32")] * 2, [(0,)], ["float32"])  # no launch
    assert c.shape == (0,)


def test_matmul_2d_grid_local_accumulator_and_unrolled_k_matches_llvm():
    M, N, K = 67, 45, 33
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    by, bx, ty, tx = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    ko, ki = s[CL].split(CL.op.reduce_axis[0], factor=4)
    s[CL].unroll(ki)
    mod = te.build(s, [A, B, C], target="cuda")
    assert "float C_local[1];" in mod.get_source()
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    # the same computation, unscheduled, on the CPU
    s0 = te.create_schedule(C.op)
    want = np.zeros((M, N), "float32")
    build_reference(s0, [A, B, C])(a, b, want)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_softmax_as_four_kernels_with_device_temporaries():
    X, mx, ex, total, Y = softmax_graph(37, 29)
    s = te.create_schedule(Y.op)
    for T in (mx, total):
        bind(s, T, T.op.axis[0], 16)
    for T in (ex, Y):
        bind(s, T, s[T].fuse(*T.op.axis), 128)
    mod = te.build(s, [X, Y], target="cuda")
    assert [k.name for k in mod.kernels] == [f"main_kernel{k}" for k in range(4)]
    assert [t.name for t in mod.temporaries] == ["mx", "ex", "total"]
    x = rand_array((37, 29))
    (y,) = run_emulated(mod, [x], [(37, 29)], ["float32"])
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-6)


def test_one_row_per_thread_with_rfactor_compute_with_and_vectorized_loops():
    # the CPU row schedule, its rows spread over threads: vectorized loops stay loops
    graph = softmax_graph(50, 37)
    X, Y = graph[0], graph[-1]
    s = te.create_schedule(Y.op)
    ro, ri = s[Y].split(Y.op.axis[0], factor=8)
    s[Y].bind(ro, te.thread_axis("blockIdx.x"))
    s[Y].bind(ri, te.thread_axis("threadIdx.x"))
    schedule_softmax_rows(s, graph, ri, 8)
    s[Y].vectorize(Y.op.axis[1])
    mod = te.build(s, [X, Y], target="cuda")
    assert "#pragma unroll" in mod.get_source()
    x = rand_array((50, 37))
    (y,) = run_emulated(mod, [x], [(50, 37)], ["float32"])
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-6)


def test_integer_arithmetic_follows_te_semantics():
    n = 101
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.placeholder((n,), name="B", dtype="int32")
    outs = [
        te.compute((n,), lambda i: te.floordiv(A[i], B[i]), name="fdiv"),
        te.compute((n,), lambda i: te.floormod(A[i], B[i]), name="fmod"),
        te.compute((n,), lambda i: te.truncdiv(A[i], B[i]), name="tdiv"),
        te.compute((n,), lambda i: te.truncmod(A[i], B[i]), name="tmod"),
        te.compute((n,), lambda i: te.max(A[i], B[i]) - te.min(A[i], 3), name="mm"),
        te.compute((n,), lambda i: te.if_then_else(A[i] > 0, A[i] * 7, -A[i]), name="sel"),
        te.compute((n,), lambda i: (A[i] * 20).astype("int8") + 100, name="wrap8"),
        te.compute((n,), lambda i: (A[i].astype("float64") / 4).astype("int64"), name="f2i"),
    ]
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        bind(s, t, t.op.axis[0], 32)
    mod = te.build(s, [A, B] + outs, target="cuda")
    rng = np.random.default_rng(5)
    a = rng.integers(-50, 50, n).astype("int32")
    b = rng.integers(1, 9, n).astype("int32") * rng.choice([-1, 1], n).astype("int32")
    got = run_emulated(mod, [a, b], [(n,)] * len(outs), [t.dtype for t in outs])
    want_cpu = [np.zeros(n, t.dtype) for t in outs]
    build_reference(te.create_schedule([t.op for t in outs]), [A, B] + outs)(a, b, *want_cpu)
    trunc = (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)
    want = [a // b, a % b, trunc, a - trunc * b, np.maximum(a, b) - np.minimum(a, 3),
            np.where(a > 0, a * 7, -a), ((a * 20).astype("int8") + np.int8(100)),
            np.trunc(a / 4).astype("int64")]
    for t, g, w, cpu in zip(outs, got, want, want_cpu):
        np.testing.assert_array_equal(g, w, err_msg=t.name)
        np.testing.assert_array_equal(g, cpu, err_msg=t.name)


def test_float64_math_intrinsics():
    n = 77
    A = te.placeholder((n,), name="A", dtype="float64")
    C = te.compute((n,), lambda i: te.sqrt(te.abs(A[i])) + te.tanh(A[i]) * te.sigmoid(A[i])
                   + te.floor(A[i] * 3) + te.round(A[i] * 2.5) + te.rsqrt(A[i] * A[i] + 1),
                   name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 16)
    mod = te.build(s, [A, C], target="cuda")
    assert "sqrt(" in mod.get_source() and "sqrtf(" not in mod.get_source()
    a = rand_array((n,), "float64") * 3
    (c,) = run_emulated(mod, [a], [(n,)], ["float64"])
    want = (np.sqrt(np.abs(a)) + np.tanh(a) / (1 + np.exp(-a)) + np.floor(a * 3)
            + np.round(a * 2.5) + 1 / np.sqrt(a * a + 1))
    np.testing.assert_allclose(c, want, rtol=1e-12)


def test_loops_of_one_axis_with_different_extents_are_guarded():
    # a hand-made function: the two branches bind threadIdx.x with extents 32 and 48
    A, flag = _buffer("A", 48), _buffer("flag", 1, "int32")
    i, j = E.Var("i"), E.Var("j")
    body = ir.IfThenElse(
        ir.Load("int32", flag, E.const(0)) > 0,
        ir.For(i, E.const(0), E.const(32), ir.THREAD_BINDING,
               ir.Store(A, i, E.const(1.0, "float32")), thread_tag="threadIdx.x"),
        ir.For(j, E.const(0), E.const(48), ir.THREAD_BINDING,
               ir.Store(A, j, E.const(2.0, "float32")), thread_tag="threadIdx.x"))
    func = PrimFunc("branches", (flag, A), (), body, {"output_params": ("A",)})
    mod = te.build(func, target="cuda")
    assert "if (((int)threadIdx.x) < 32) {" in mod.get_source()
    for flag_value, want in ((1, [1.0] * 32 + [-5.0] * 16), (0, [2.0] * 48)):
        out = np.full(48, -5.0, "float32")
        mod.emulator()(np.array([flag_value], "int32"), out)
        np.testing.assert_array_equal(out, want)


@needs_nvcc
def test_ptx_is_compiled_for_the_requested_architecture():
    A = te.placeholder((300,), name="A")
    C = te.compute((300,), lambda i: A[i] * 2, name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 128)
    ptx = te.build(s, [A, C], target="cuda -arch=sm_80").get_source("ptx")
    assert ".target sm_80" in ptx and ".entry main_kernel0" in ptx


def _unbound():
    A = te.placeholder((100,), name="A")
    C = te.compute((100,), lambda i: A[i] + 1, name="C")
    return A, C, te.create_schedule(C.op)


def _nothing_bound():
    A, C, s = _unbound()
    return s, [A, C]


def _fill_wider_than_the_computing_threads():
    # 8x8 threads compute a tile, the 8x16 and 16x8 fills ask for 16x16: the computing
    # threads are guarded, and the barriers inside their loops would be too
    return _shared_matmul(32, 32, 32, 8, 16, True)


def test_a_block_level_fill_may_use_more_threads_than_the_computation():
    # 16 threads compute, the shared stage's fill (at the block loop, outside them) uses 32
    A = te.placeholder((64,), name="A")
    C = te.compute((64,), lambda i: A[i] + A[(i + 16) % 64], name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    bo, _ = bind(s, C, C.op.axis[0], 16)
    s[AS].compute_at(s[C], bo)
    s[AS].bind(s[AS].split(AS.op.axis[0], factor=32)[1], te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C], target="cuda")
    assert "if (((int)threadIdx.x) < 16) {" in mod.get_source()
    a = rand_array((64,))
    (c,) = run_emulated(mod, [a], [(64,)], ["float32"])
    np.testing.assert_allclose(c, a + np.roll(a, -16), rtol=1e-6)


def _fill_under_a_thread_condition():
    # hand-made: threads i < 16 fill S and read it reversed; the barrier would deadlock
    A, B, S = _buffer("A"), _buffer("B"), _buffer("S", scope="shared")
    i = E.Var("i")
    body = ir.For(i, E.const(0), E.const(32), ir.THREAD_BINDING, ir.Allocate(
        S, E.const(32), ir.IfThenElse(i < 16, ir.SeqStmt((
            ir.Store(S, i, ir.Load("float32", A, i)),
            ir.Store(B, i, ir.Load("float32", S, 15 - i)))))), thread_tag="threadIdx.x")
    return PrimFunc("divergent", (A, B), (), body), None


def _root_shared_stage():
    # a block fills only its own part, then reads others' (found by review)
    A, C, s = _unbound()
    s.cache_read(A, "shared", [C])
    bind(s, C, C.op.axis[0], 32)
    return s, [A, C]


def _shared_stage_spanning_blocks():
    A = te.placeholder((8, 64), name="A")
    C = te.compute((8, 64), lambda i, j: A[i, 63 - j] + 1, name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.y"))
    bind(s, C, C.op.axis[1], 16)
    s[AS].compute_at(s[C], C.op.axis[0])
    bind(s, AS, AS.op.axis[1], 16)    # its outer loop on blockIdx.x: other blocks' part
    return s, [A, C]


def _shared_stage_inside_another_fill():
    A = te.placeholder((64,), name="A")
    C = te.compute((64,), lambda i: A[i] * 2, name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    AS2 = s.cache_read(AS, "shared", [C])
    bo, _ = bind(s, C, C.op.axis[0], 32)
    s[AS2].compute_at(s[C], bo)
    o2, i2 = s[AS2].split(AS2.op.axis[0], factor=32)
    s[AS2].bind(i2, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[AS2], o2)
    return s, [A, C]


def _shared_reduction_run_by_every_thread():
    A = te.placeholder((16, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    C = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    CS = s.cache_write(C, "shared")
    bo, _ = bind(s, C, C.op.axis[0], 16)
    s[CS].compute_at(s[C], bo)
    return s, [A, C]


def _too_much_shared_memory():
    A = te.placeholder((64, 640), name="A")
    C = te.compute((64, 640), lambda i, j: A[i, 639 - j], name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    bo, _ = bind(s, C, C.op.axis[0], 32)
    s[AS].compute_at(s[C], bo)
    return s, [A, C]


def _local_stage_reusing_a_thread_axis():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2, name="B")
    C = te.compute((64,), lambda i: B[i] + 1, name="C")
    s = te.create_schedule(C.op)
    _, ti = bind(s, C, C.op.axis[0], 16)
    s[B].compute_at(s[C], ti)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    return s, [A, C]


def _parallel():
    A, C, s = _unbound()
    o, i = s[C].split(C.op.axis[0], factor=10)
    s[C].bind(o, te.thread_axis("blockIdx.x"))
    s[C].parallel(i)
    return s, [A, C]


def _too_many_threads():
    A = te.placeholder((64, 64), name="A")
    C = te.compute((64, 64), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.y"))
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    return s, [A, C]


def _threads_of_two_stages_in_one_kernel():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2, name="B")
    C = te.compute((64,), lambda i: B[63 - i] + 1, name="C")
    s = te.create_schedule(C.op)
    bo, _ = bind(s, C, C.op.axis[0], 64)
    s[B].compute_at(s[C], bo)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    return s, [A, C]


def _serial_stage_reading_threads_results():
    # found by review: D is computed by the block's threads; C, fused at the block loop
    # with serial loops, reads D's elements that other threads wrote
    A = te.placeholder((64,), name="A")
    D = te.compute((64,), lambda i: A[i] * 2, name="D")
    C = te.compute((64,), lambda i: D[(i // 16) * 16 + 15 - i % 16] + 1, name="C")
    s = te.create_schedule([D.op, C.op])
    s[D].bind(s[D].split(D.op.axis[0], factor=16)[1], te.thread_axis("threadIdx.x"))
    co, _ = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(co, te.thread_axis("blockIdx.x"))
    s[D].compute_with(s[C], co)
    return s, [A, D, C]


def _fills_fused_by_compute_with():
    # found by review: two shared fills in one loop, the second reading the first
    A = te.placeholder((64,), name="A")
    Q = te.compute((64,), lambda i: A[(i // 4) * 4 + 3 - i % 4] + 1, name="Q")
    C = te.compute((64,), lambda i: Q[i] * 3, name="C")
    s = te.create_schedule(C.op)
    AS, QS = s.cache_read(A, "shared", [Q]), s.cache_write(Q, "shared")
    s[Q].compute_inline()
    bo, _ = bind(s, C, C.op.axis[0], 16)
    splits = []
    for X in (AS, QS):
        s[X].compute_at(s[C], bo)
        splits.append(s[X].split(X.op.axis[0], factor=4))
        s[X].bind(splits[-1][1], te.thread_axis("threadIdx.x"))
    s[AS].compute_with(s[QS], splits[1][0])
    return s, [A, C]


def _two_thread_nests_in_one_serial_loop():
    # hand-made: for (t) { A[i] = t (threads i); B[j] = A[j] (threads j) }
    bufs = [_buffer("A"), _buffer("B")]
    t, i, j = E.Var("t"), E.Var("i"), E.Var("j")
    nests = [ir.For(i, E.const(0), E.const(32), ir.THREAD_BINDING,
                    ir.Store(bufs[0], i, t.astype("float32")), thread_tag="threadIdx.x"),
             ir.For(j, E.const(0), E.const(32), ir.THREAD_BINDING,
                    ir.Store(bufs[1], j, ir.Load("float32", bufs[0], 31 - j)),
                    thread_tag="threadIdx.x")]
    body = ir.For(t, E.const(0), E.const(4), ir.SERIAL, ir.SeqStmt(tuple(nests)))
    return PrimFunc("two_nests", tuple(bufs), (), body), None


def _extent_from_a_loop():
    A = te.placeholder((8, 8), name="A")
    C = te.compute((8, 8), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    return s, [A, C]


@pytest.mark.parametrize("make, message", [
    (_nothing_bound, r"^te.build: target 'cuda': stage 'C' has no loop bound to a GPU "
                     r"thread axis, so it would run on the host"),
    (_fill_wider_than_the_computing_threads,
     r"the barrier around shared stage 'A.shared' would sit under the guard of loop 'i.inner' "
     r"\(threadIdx.y\), which not every thread of the block reaches"),
    (_fill_under_a_thread_condition, r"the barrier around shared stage 'S' would sit under the "
                                     r"condition \(i < 16\), which not every thread of the "
                                     r"block reaches"),
    (_root_shared_stage, r"stage 'A.shared' has scope 'shared' but is computed at the root, "
                         r"outside every kernel; that memory exists per block"),
    (_shared_stage_spanning_blocks, r"shared stage 'A.shared' spans several blocks \(loop "
                                    r"'j.outer' inside it is bound to blockIdx.x\)"),
    (_shared_stage_inside_another_fill, r"shared stage 'A.shared' is computed inside the fill "
                                        r"of shared stage 'A.shared.shared'"),
    (_shared_reduction_run_by_every_thread, r"stage 'C.shared' is updated in place \(a "
                                            r"reduction\), and the threads along threadIdx.x "
                                            r"would all update the same elements at once"),
    (_too_much_shared_memory, r"kernel 'main_kernel0' needs 81920 bytes of shared memory per "
                              r"block; CUDA allows 49152"),
    (_local_stage_reusing_a_thread_axis, r"loop 'i' is bound to threadIdx.x inside loop "
                                         r"'i.inner', which is bound to it too \(only a stage "
                                         r"in shared memory may reuse a thread axis\)"),
    (_parallel, r"loop 'i.inner' is parallel; on a GPU, bind it to a thread axis instead"),
    (_too_many_threads, r"4096 threads per block \(threadIdx x, y, z = \[64, 64, 1\]\); CUDA "
                        r"allows at most 1024"),
    (_threads_of_two_stages_in_one_kernel, r"stage 'B' is stored per thread \(scope 'global' "
                                           r"inside a kernel\), but its loop 'i' bound to "
                                           r"threadIdx.x gives each thread only part of it"),
    (_two_thread_nests_in_one_serial_loop, r"stages 'A' and 'B' run in one kernel with loops "
                                           r"bound to GPU threads; the second would read the "
                                           r"first's results before other threads wrote them"),
    (_serial_stage_reading_threads_results, r"stages 'D' and 'C' run in one kernel with loops "
                                            r"bound to GPU threads; the second would read"),
    (_fills_fused_by_compute_with, r"shared stages 'A.shared' and 'Q.shared' are filled in one "
                                   r"loop \(compute_with\) and the second reads the first"),
])
def test_schedules_target_cuda_refuses_name_the_problem(make, message):
    s, args = make()
    with pytest.raises(te.BuildError, match=message):
        te.build(s, args, target="cuda")


def test_a_launch_extent_that_depends_on_a_loop_is_refused():
    # hand-made: the threads of row i are i + 1
    A = _buffer("A", 64)
    i, j = E.Var("i"), E.Var("j")
    body = ir.For(i, E.const(0), E.const(8), ir.SERIAL,
                  ir.For(j, E.const(0), i + 1, ir.THREAD_BINDING,
                         ir.Store(A, i * 8 + j, E.const(1.0, "float32")),
                         thread_tag="threadIdx.x"))
    func = PrimFunc("triangle", (A,), (), body, {"output_params": ("A",)})
    with pytest.raises(te.BuildError, match=r"the extent of the loop bound to threadIdx.x "
                                            r"depends on loop variable\(s\) i, but a launch's "
                                            r"size must be known before it starts"):
        te.build(func, target="cuda")


def _shared_matmul(M, N, K, tile, k_split, bind_fill):
    return shared_matmul(M, N, K, tile, k_split, fill="rows" if bind_fill else None)


def _barriers_and_fills(src):
    """The kernel's barriers ("sync") and stores to A_shared ("A") and B_shared ("B"), in
    the order of the source."""
    lines = [line.strip() for line in src.splitlines()]
    return ["sync" if line == "__syncthreads();" else line[0] for line in lines
            if line == "__syncthreads();" or line.startswith(("A_shared[", "B_shared["))]


@pytest.mark.parametrize("M, N, K, tile, k_split, bind_fill", [
    (64, 48, 32, 16, 16, True),      # the classic tutorial tiling, sizes that divide
    (37, 45, 33, 8, 8, True),        # tail blocks and a tail k step
    (37, 45, 33, 8, 4, False),       # every thread fetches the whole tile
])
def test_shared_memory_matmul_with_barriers(M, N, K, tile, k_split, bind_fill):
    s, args = _shared_matmul(M, N, K, tile, k_split, bind_fill)
    text = str(te.lower(s, args))
    assert f"allocate A.shared[float32 * {tile * k_split}] scope=shared" in text  # whole tile
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert f"__shared__ float A_shared[{tile * k_split}];" in src
    # one barrier before the two fills (the last step's readers are done with the tiles) and
    # one after them; none between: neither fill reads what the other writes
    assert _barriers_and_fills(src) == ["sync", "A", "B", "sync"]
    assert mod.kernels[0].uses_barriers
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_shared_stage_at_block_level_is_fetched_by_every_thread():
    A = te.placeholder((100,), name="A")
    C = te.compute((100,), lambda i: A[i] * A[99 - i], name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    bo, _ = bind(s, C, C.op.axis[0], 32)
    s[AS].compute_at(s[C], bo)
    mod = te.build(s, [A, C], target="cuda")
    a = rand_array((100,))
    (c,) = run_emulated(mod, [a], [(100,)], ["float32"])
    np.testing.assert_allclose(c, a * a[::-1], rtol=1e-6)


def test_one_stage_in_parts_inside_a_kernel_is_not_mistaken_for_two():
    # found by review: a partitioned loop (1000 = 15 * 64 + 40), and a reduction whose k loop
    # is outside the thread loop (init, then update), were refused as two stages
    A = te.placeholder((4, 1000), name="A")
    C = te.compute((4, 1000), lambda r, i: A[r, i] * 2, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(s[C].split(C.op.axis[1], factor=64)[1], te.thread_axis("threadIdx.x"))
    a = rand_array((4, 1000))
    (c,) = run_emulated(te.build(s, [A, C], target="cuda"), [a], [(4, 1000)], ["float32"])
    np.testing.assert_allclose(c, a * 2)
    k = te.reduce_axis((0, 30), name="k")
    R = te.compute((64,), lambda i: te.sum(A[i % 4, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    bo, ti = s[R].split(R.op.axis[0], factor=32)
    s[R].reorder(bo, k, ti)
    s[R].bind(bo, te.thread_axis("blockIdx.x"))
    s[R].bind(ti, te.thread_axis("threadIdx.x"))
    (r,) = run_emulated(te.build(s, [A, R], target="cuda"), [a], [(64,)], ["float32"])
    np.testing.assert_allclose(r, a[np.arange(64) % 4, :30].sum(1), rtol=1e-5)


def test_a_shared_tile_fetched_through_registers_gets_its_barriers():
    # found by review: the fill also stores to a per-thread stage inside it
    s, args = _shared_matmul(32, 32, 64, 8, 8, True)
    A, B, C = args
    AA = next(st.op.output(0) for st in s.stages if st.op.name == "A.shared")
    AL = s.cache_read(A, "local", [AA])
    s[AL].compute_at(s[AA], s[AA].leaf_iter_vars[-1])
    mod = te.build(s, args, target="cuda")
    assert _barriers_and_fills(mod.get_source()) == ["sync", "A", "B", "sync"]
    a, b = rand_array((32, 64)), rand_array((64, 32))
    (c,) = run_emulated(mod, [a, b], [(32, 32)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["and", "not", "try", "asm", "nullptr", "expf", "sqrt",
                                  "NAN", "INFINITY", "threadIdx", "__x", "pthread_t", "M_PI",
                                  "EOF", "INT32_MAX", "HUGE_VAL", "errno", "linux", "unix"])
def test_names_that_c_reserves_are_renamed(name):
    A = te.placeholder((40,), name=name)
    C = te.compute((40,), lambda i: te.exp(A[i]) + te.sqrt(te.abs(A[i])), name="C")
    s = te.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(o, te.thread_axis("blockIdx.x"))
    s[C].bind(i, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C], target="cuda")   # nvcc compiles it, where it is on PATH
    a = rand_array((40,))
    (c,) = run_emulated(mod, [a], [(40,)], ["float32"])
    np.testing.assert_allclose(c, np.exp(a) + np.sqrt(np.abs(a)), rtol=1e-6)


def test_the_emulator_poisons_shared_memory_no_thread_wrote():
    # hand-made: threads fill S[0:16] only, then read S[i + 16]
    A, B, S = _buffer("A"), _buffer("B"), _buffer("S", scope="shared")
    i = E.Var("i")
    body = ir.For(i, E.const(0), E.const(16), ir.THREAD_BINDING, ir.Allocate(
        S, E.const(32), ir.SeqStmt((
            ir.Store(S, i, ir.Load("float32", A, i)),
            ir.Store(B, i, ir.Load("float32", S, i + 16))))), thread_tag="threadIdx.x")
    mod = te.build(PrimFunc("half_filled", (A, B), (), body), target="cuda")
    out = np.zeros(32, "float32")
    for _ in range(2):    # the second call must not see the first call's values either
        mod.emulator()(rand_array((32,)), out)
        assert np.isnan(out[:16]).all()


@pytest.mark.parametrize("K, pipelined, unrolled", [(64, True, False), (60, True, False),
                                                    (500, False, False), (64, False, True)])
def test_shared_tiles_pipelined_with_a_tail_or_unrolled(K, pipelined, unrolled):
    # found by review: pipelining nests the two tiles' allocations (taken for a fill inside
    # a fill); a k tail and an unrolled k loop copied the allocations, which each took
    # shared memory (a 32 KiB pair of tiles was refused at K=500 and unrolled)
    s, args = _shared_matmul(32, 24, K, 8, 8, True)
    CL = next(st for st in s.stages if st.op.name == "C.local")
    ko = CL.leaf_iter_vars[-2]
    if pipelined:
        CL.pipeline(ko)
    if unrolled:
        CL.unroll(ko)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert src.count("__shared__") == 2      # once each, at the top of the kernel
    a, b = rand_array((32, K)), rand_array((K, 24))
    (c,) = run_emulated(mod, [a, b], [(32, 24)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_fill_reading_another_fill_gets_a_barrier_between_them():
    # found by review (pipelined): A.shared.shared is fetched from A.shared in the same step
    s, args = _shared_matmul(16, 16, 64, 8, 8, False)
    AA = next(st.op.output(0) for st in s.stages if st.op.name == "A.shared")
    CL = next(st for st in s.stages if st.op.name == "C.local")
    AAA = s.cache_read(AA, "shared", [CL.op.output(0)])
    s[AAA].compute_at(CL, CL.leaf_iter_vars[-2])
    for T in (AA, AAA):
        s[T].bind(s[T].op.axis[0], te.thread_axis("threadIdx.y"))
        s[T].bind(s[T].op.axis[1], te.thread_axis("threadIdx.x"))
    mod = te.build(s, args, target="cuda")
    lines = mod.get_source().splitlines()
    fill_aa = next(k for k, line in enumerate(lines) if "A_shared[" in line and "= A[" in line)
    fill_aaa = next(k for k, line in enumerate(lines) if "= A_shared[" in line)
    assert fill_aa < fill_aaa and "__syncthreads();" in "".join(lines[fill_aa:fill_aaa])
    a, b = rand_array((16, 64)), rand_array((64, 16))
    (c,) = run_emulated(mod, [a, b], [(16, 16)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_thread_dependent_bound_check_does_not_become_a_loop_bound():
    # found by review: loop partitioning turned the rows' bound check (M = 62) into a loop
    # whose trip count differs between threads, with a barrier inside
    M, N, K = 62, 16, 8
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    BS = s.cache_read(B, "shared", [C])
    by, rest = s[C].split(C.op.axis[0], factor=32)
    ty, io = s[C].split(rest, factor=4)
    s[C].reorder(by, ty, C.op.axis[1], io)
    for axis, tag in ((by, "blockIdx.x"), (ty, "threadIdx.y"), (C.op.axis[1], "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[BS].compute_at(s[C], io)
    s[BS].bind(BS.op.axis[0], te.thread_axis("threadIdx.y"))
    s[BS].bind(BS.op.axis[1], te.thread_axis("threadIdx.x"))
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(te.build(s, [A, B, C], target="cuda"), [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_stage_at_the_block_loop_with_serial_loops_is_computed_by_each_thread():
    # found by review: softmax's max and sum at the row's block loop were refused; each
    # thread computes its own copy of them (the per-row reductions), which is correct
    graph = softmax_graph(6, 70)
    X, mx, ex, total, Y = graph
    s = te.create_schedule(Y.op)
    s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
    s[Y].bind(s[Y].split(Y.op.axis[1], factor=32)[1], te.thread_axis("threadIdx.x"))
    s[ex].compute_inline()
    for T in (mx, total):
        s[T].compute_at(s[Y], Y.op.axis[0])
    x = rand_array((6, 70))
    (y,) = run_emulated(te.build(s, [X, Y], target="cuda"), [x], [(6, 70)], ["float32"])
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-6)


def test_an_unbound_outer_loop_runs_in_every_thread():
    # i is not bound: every thread walks it, writing its own column j
    s, args = _extent_from_a_loop()
    mod = te.build(s, args, target="cuda")
    a = rand_array((8, 8))
    (c,) = run_emulated(mod, [a], [(8, 8)], ["float32"])
    np.testing.assert_allclose(c, a + 1)


@pytest.mark.parametrize("target, message", [
    ("cuda -arch=80", r"^te.build: target option -arch: expected sm_XX such as sm_80, got "
                      r"'80'$"),
    ("cuda -mcpu=skylake", r"^te.build: unknown target option -mcpu for 'cuda' \(expected "
                           r"-arch, -fast-math\)$"),
])
def test_bad_cuda_target_options(target, message):
    A, C, s = _unbound()
    bind(s, C, C.op.axis[0], 32)
    with pytest.raises(te.BuildError, match=message):
        te.build(s, [A, C], target=target)


def test_a_function_lowered_for_the_cpu_with_vector_code_is_refused():
    A, C, s = _unbound()
    o, i = bind(s, C, C.op.axis[0], 20)
    io, ii = s[C].split(i, factor=4)
    s[C].vectorize(ii)
    with pytest.raises(te.BuildError, match=r"the function holds vector code \(lowered for "
                                            r"the CPU\)"):
        te.build(te.lower(s, [A, C]), target="cuda")
    a = rand_array((100,))
    (c,) = run_emulated(te.build(s, [A, C], target="cuda"), [a], [(100,)], ["float32"])
    np.testing.assert_allclose(c, a + 1)
