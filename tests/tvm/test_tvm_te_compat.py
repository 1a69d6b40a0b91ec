"""TE spellings TVM's tutorials use: ranged thread axes, float extents from N / bn, outputs
whose shape is an expression, stages passed in the arguments though inlined or attached, and
CUDA's fast-math intrinsics in the emulator, Stage.set_scope; each checked against numpy on
random data."""
import numpy as np
import pytest

import te.tvm as tvm
import te.tvm.testing
from te.errors import ArgumentError, ComputeError, LoweringError, ScheduleError, ShapeError
from te.tvm import te

RNG = np.random.default_rng(4242)


def test_thread_axis_with_an_extent():
    A = te.placeholder((100,), name="A")
    B = te.compute((100,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], nparts=4)
    s[B].bind(bx, te.thread_axis((0, 4), "blockIdx.x"))
    s[B].bind(tx, te.thread_axis((0, 25), "threadIdx.x"))
    a = RNG.random(100).astype("float32")
    b = np.empty_like(a)
    tvm.build(s, [A, B], "cuda").emulator()(a, b)
    tvm.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    assert te.thread_axis("threadIdx.x").dom is None
    assert te.thread_axis((0, 8), "threadIdx.y", name="ty").var.name == "ty"
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], nparts=4)
    with pytest.raises(ScheduleError, match=r"^bind on stage 'B': loop 'i.inner' has extent 25 "
                                            r"but thread axis 'threadIdx.x' was declared with "
                                            r"extent 32$"):
        s[B].bind(tx, te.thread_axis((0, 32), "threadIdx.x"))
    with pytest.raises(ComputeError, match=r"^te.thread_axis: dom must be \(0, extent\) with an "
                                           r"integer extent, got \(1, 8\)$"):
        te.thread_axis((1, 8), "threadIdx.x")
    with pytest.raises(ComputeError, match=r"^te.thread_axis: tag must be one of "):
        te.thread_axis((0, 8), "warp.x")


def test_float_extents_that_are_whole_numbers():
    N, K, bn = 64, 24, 16
    B = te.placeholder((K, N), name="B")
    packed = te.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    assert [int(d) for d in packed.shape] == [4, 24, 16]
    s = te.create_schedule(packed.op)
    b = RNG.random((K, N)).astype("float32")
    out = tvm.nd.empty((4, K, bn), "float32")
    tvm.build(s, [B, packed])(tvm.nd.array(b), out)
    np.testing.assert_array_equal(out.numpy(), b.reshape(K, 4, bn).transpose(1, 0, 2))
    with pytest.raises(ShapeError, match=r"^te.compute: shape\[0\] must be an integer, got the "
                                         r"float 31.25 \(write an integer division such as "
                                         r"N // bn; TVM would truncate it to 31\)$"):
        te.compute((1000 / 32,), lambda i: B[0, i], name="C")
    with pytest.raises(ShapeError, match=r"^te.placeholder: shape\[1\] must be an integer, got "
                                         r"the float 0.5 "):
        te.placeholder((2, 0.5), name="P")


def test_output_whose_shape_is_an_expression():
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute((n - 2, n - 2), lambda i, j: te.sum(
        Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]), name="Output")
    s = te.create_schedule(Output.op)
    f = tvm.build(s, [Input, Filter, Output])
    for size in (3, 11):
        x = RNG.random((size, size)).astype("float32")
        w = RNG.random((3, 3)).astype("float32")
        out = tvm.nd.empty((size - 2, size - 2), "float32")
        f(tvm.nd.array(x), tvm.nd.array(w), out)
        m = size - 2
        want = sum(x[a:a + m, b:b + m] * w[a, b] for a in range(3) for b in range(3))
        tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-5)
    with pytest.raises(ArgumentError, match=r"^argument 'Output' shape\[1\]: expected 9 "
                                            r"\(n - 2 with n=11\), got 8$"):
        f(np.zeros((11, 11), "float32"), np.zeros((3, 3), "float32"),
          np.zeros((9, 8), "float32"))


def test_output_shape_expressions_survive_export(tmp_path):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n // 2 + 1,), lambda i: A[i * 2 - tvm.tir.indexdiv(i, n // 2 + 1)] * 2.0,
                   name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B])
    f.export_library(str(tmp_path / "half.so"))
    loaded = tvm.runtime.load_module(str(tmp_path / "half.so"))
    a = RNG.random(9).astype("float32")
    b = np.empty(5, "float32")
    loaded(a, b)
    tvm.testing.assert_allclose(b, a[::2] * 2, rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"^argument 'B' shape\[0\]: expected 5 "
                                            r"\(floordiv\(n, 2\) \+ 1 with n=9\), got 4$"):
        loaded(a, np.empty(4, "float32"))


def _chain(m):
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((m,), lambda i: B[i] * 2.0, name="C")
    return A, B, C


@pytest.mark.parametrize("where", ["axis", "split_outer", "split_inner"])
def test_attached_stage_passed_in_args_is_written_whole(where):
    m = te.var("m")
    A, B, C = _chain(m)
    s = te.create_schedule(C.op)
    if where == "axis":
        s[B].compute_at(s[C], C.op.axis[0])
    else:
        xo, xi = s[C].split(C.op.axis[0], factor=4)
        s[B].compute_at(s[C], xo if where == "split_outer" else xi)
    f = tvm.build(s, [A, B, C])
    for size in (1, 10, 16):
        a = RNG.random(size).astype("float32")
        b, c = np.full(size, np.nan, "float32"), np.empty(size, "float32")
        f(a, b, c)
        tvm.testing.assert_allclose(b, a + 1, rtol=1e-6)
        tvm.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_attached_stage_in_args_that_its_loop_does_not_cover_is_refused():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(LoweringError, match=r"^stage 'B' is passed in args but computed inside "
                                            r"loop 'i' of 'C', whose iterations do not provably "
                                            r"compute all of it, so part of the argument would "
                                            r"never be written; use compute_root for a tensor "
                                            r"you pass in args$"):
        tvm.build(s, [A, B, C])


def test_inlined_stage_passed_in_args_is_an_unwritten_parameter():
    A, B, C = _chain(12)
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert text.startswith("@main(A: float32[12], B: float32[12], C: float32[12])")
    assert "B[" not in text.split("{", 1)[1]            # as in TVM: nothing writes B
    f = tvm.build(s, [A, B, C])
    assert [arg.output for arg in f.signature.args] == [False, False, True]
    a = RNG.random(12).astype("float32")
    b = RNG.random(12).astype("float32")
    kept, c = b.copy(), np.empty(12, "float32")
    f(a, b, c)
    np.testing.assert_array_equal(b, kept)
    tvm.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_set_scope_shared_on_a_stage_computed_at_the_block_loop():
    # TVM code: a per-block row in shared memory, each thread reading another's element
    n, m = 4, 45
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, m - 1 - j] * 3.0, name="C")
    s = te.create_schedule(C.op)
    bx, tx = te.thread_axis("blockIdx.x"), te.thread_axis("threadIdx.x")
    s[C].bind(C.op.axis[0], bx)
    s[C].bind(C.op.axis[1], tx)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].set_scope("shared")
    s[B].bind(s[B].op.axis[1], tx)
    f = tvm.build(s, [A, C], "cuda")
    assert "__shared__ float B[45];" in f.imported_modules[0].get_source()
    a = RNG.random((n, m)).astype("float32")
    c = np.full((n, m), np.nan, "float32")
    f.emulator()(a, c)
    tvm.testing.assert_allclose(c, (a + 1)[:, ::-1] * 3, rtol=1e-6)
    # on a CPU the scope is an ordinary buffer of the function, as in TVM
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].set_scope("local")
    assert "allocate B[float32 * 45] scope=local {" in str(tvm.lower(s, [A, C],
                                                                     simple_mode=True))
    c = np.full((n, m), np.nan, "float32")
    tvm.build(s, [A, C], "llvm")(a, c)
    tvm.testing.assert_allclose(c, (a + 1)[:, ::-1] * 3, rtol=1e-6)


FAST = [("__expf", 1, np.exp), ("__logf", 1, np.log), ("__sinf", 1, np.sin),
        ("__cosf", 1, np.cos), ("__tanf", 1, np.tan), ("__log2f", 1, np.log2),
        ("__log10f", 1, np.log10), ("__exp10f", 1, lambda x: 10.0 ** x),
        ("__frcp_rn", 1, lambda x: 1 / x), ("__fsqrt_rn", 1, np.sqrt),
        ("__frsqrt_rn", 1, lambda x: 1 / np.sqrt(x)),
        ("__saturatef", 1, lambda x: np.clip(x - 0.7, 0, 1)),
        ("__powf", 2, np.power), ("__fdividef", 2, np.divide), ("__fdiv_rn", 2, np.divide),
        ("__fadd_rn", 2, np.add), ("__fmul_rn", 2, np.multiply),
        ("__fmaf_rn", 3, lambda x, y, z: x * y + z)]


@pytest.mark.parametrize("name,arity,reference", FAST, ids=[f[0] for f in FAST])
def test_emulator_runs_cuda_fast_math(name, arity, reference):
    n = te.var("n")
    X = [te.placeholder((n,), name=f"X{k}") for k in range(arity)]
    shift = (lambda v: v - 0.7) if name == "__saturatef" else (lambda v: v)
    B = te.compute((n,), lambda i: tvm.tir.call_pure_extern(
        "float32", name, shift(X[0][i]), *[x[i] for x in X[1:]]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [*X, B], "cuda")
    assert f"{name}(" in f.imported_modules[0].get_source()
    xs = [(RNG.random(70) + 0.25).astype("float32") for _ in range(arity)]
    out = np.empty(70, "float32")
    f.emulator()(*xs, out)
    tvm.testing.assert_allclose(out, reference(*xs).astype("float32"), rtol=1e-5, atol=1e-6)


def test_the_namespaces_are_ours_under_tvms_names():
    import runtime
    import te as te_package
    assert tvm.te.compute is te_package.compute and tvm.te.scan is te_package.scan
    assert tvm.te.extern is te_package.extern
    assert tvm.te.create_schedule is te_package.create_schedule
    assert tvm.tir.call_packed is te_package.call_packed
    assert tvm.tir.decl_buffer is te_package.decl_buffer
    assert tvm.tir.ir_builder is te_package.ir_builder
    assert tvm.register_func is runtime.register_func
    assert tvm.get_global_func is runtime.get_global_func
    assert tvm.runtime.load_module is runtime.load_module and tvm.nd.NDArray is runtime.NDArray
    with pytest.raises(ImportError, match=r"^cannot import name 'relay' from 'te.tvm'"):
        from te.tvm import relay  # noqa: F401
