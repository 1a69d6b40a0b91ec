"""Target 'cuda': reductions whose reduction axis is bound to threadIdx (cross-thread
allreduce), checked against numpy in the CUDA emulator, compiled by nvcc where it is on PATH.

TVM's reduction tutorial's schedules written out here (rfactor then bind, and binding a
split reduction axis directly), sum / max / min / a tuple (argmax) reducer, extents that are
not multiples of 32 nor powers of two, several rows per block, and softmax and layernorm
with one block per row in one kernel; the emulator's warp shuffles against CUDA's
documented semantics; and the schedules refused, with their messages.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import np_softmax, rand_array, run_emulated, softmax_graph

import te
from runtime.cuda import CudaKernel
from runtime.cuda_emulator import EmulatorBackend
from te.lower.interp import run_func

HAS_NVCC = shutil.which("nvcc") is not None


def _rows_reduction(rows, cols, reducer, threads, rows_per_block, split, dtype="float32"):
    """B[i] = reducer over the columns of A[i, :], one group of `threads` threads per row;
    `split`: the reduction axis split by `threads` (each thread loops over the outer part),
    else bound whole."""
    A = te.placeholder((rows, cols), name="A", dtype=dtype)
    k = te.reduce_axis((0, cols), "k")
    B = te.compute((rows,), lambda i: reducer(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    if rows_per_block > 1:
        xo, xi = s[B].split(B.op.axis[0], factor=rows_per_block)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.y"))
    else:
        s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    if split:
        _, ki = s[B].split(k, factor=threads)
        s[B].bind(ki, te.thread_axis("threadIdx.x"))
    else:
        s[B].bind(k, te.thread_axis("threadIdx.x"))
    return s, A, B


def test_reduction_tutorial_rfactor_then_bind_as_written():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    lowered = te.lower(s, [A, B], target="cuda")
    assert "allreduce sum over threadIdx.x: B.red = (B.red_local[0]) {" in str(lowered)
    mod = te.build(s, [A, B], target="cuda")
    src = mod.get_source()
    # 32 rows of 16 threads: groups lie inside warps, so shuffles only, no shared memory
    assert "allreduce sum over threadIdx.x: 32 group(s) of 16 threads" in src
    assert src.count("__shfl_down_sync(") == 4 and "__shared__" not in src
    if HAS_NVCC:
        assert "shfl.sync.down" in mod.get_source("ptx")
    for rows, cols in ((7, 1000), (33, 33), (1, 1)):
        a = rand_array((rows, cols))
        (b,) = run_emulated(mod, [a], [(rows,)], ["float32"])
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)
        # read serially (te's interpreter), the same loop IR is an ordinary reduction
        want = np.full(rows, np.nan, "float32")
        run_func(lowered, [a, want])
        np.testing.assert_allclose(want, a.sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reducer, rows, cols, threads, rows_per_block, split, path", [
    (te.sum, 7, 1000, 1000, 1, False, "__shfl_down_sync"),   # 31 warps and 8 lanes
    (te.max, 7, 1000, 64, 1, True, "__shfl_xor_sync"),       # whole warps: butterfly
    (te.min, 7, 33, 33, 1, False, "__shared__"),              # a warp and one lane
    (te.sum, 7, 1, 1, 1, False, "red_acc0 = B[0]"),           # one thread: nothing to do
    (te.max, 5, 1000, 33, 4, True, "red_buf[red_tid / 33 * 2 +"),  # rows cross warps
    (te.min, 7, 100, 7, 5, True, "red_r + 4 < 7"),           # 7 is not a power of two
    (te.sum, 3, 77, 128, 2, True, "__shfl_xor_sync"),          # threads beyond the row
])
def test_sum_max_min_odd_extents_and_rows_per_block(reducer, rows, cols, threads,
                                                    rows_per_block, split, path):
    s, A, B = _rows_reduction(rows, cols, reducer, threads, rows_per_block, split)
    mod = te.build(s, [A, B], target="cuda")
    src = mod.get_source()
    assert path.replace("red_acc0 = B[0]", "red_acc0 = ") in src
    a = rand_array((rows, cols))
    (b,) = run_emulated(mod, [a], [(rows,)], ["float32"])
    want = {te.sum: np.sum, te.max: np.max, te.min: np.min}[reducer](a, axis=1)
    np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "float64"])
def test_integer_and_double_values_shuffle(dtype):
    s, A, B = _rows_reduction(5, 77, te.sum, 77, 1, False, dtype)
    mod = te.build(s, [A, B], target="cuda")
    if dtype == "int8":   # CUDA shuffles 32- and 64-bit values: narrower ones go as int
        assert "(signed char)__shfl_down_sync(red_mask, (int)red_acc0, 16)" in mod.get_source()
    a = rand_array((5, 77), dtype)
    (b,) = run_emulated(mod, [a], [(5,)], [dtype])
    np.testing.assert_array_equal(b, a.sum(axis=1, dtype=dtype)) if dtype == "int8" else \
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-12)


def test_init_joins_once():
    A = te.placeholder((6, 45), name="A")
    C0 = te.placeholder((6,), name="C0")
    k = te.reduce_axis((0, 45), "k")
    C = te.compute((6,), lambda i: te.max(A[i, k], axis=k, init=C0[i]), name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)   # C0's index: io * 4 + ii, guarded
    s[C].bind(io, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.y"))
    s[C].bind(k, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C0, C], target="cuda")
    a, c0 = rand_array((6, 45)), rand_array((6,))
    c0[:3] = 5.0   # above every value of A: the initial value wins
    (c,) = run_emulated(mod, [a, c0], [(6,)], ["float32"])
    np.testing.assert_array_equal(c, np.maximum(a.max(axis=1), c0))


def _argmax():
    def combine(x, y):
        index = te.if_then_else(y[1] > x[1], y[0],
                                te.if_then_else(y[1] == x[1], te.min(x[0], y[0]), x[0]))
        return index, te.max(x[1], y[1])
    return te.comm_reducer(combine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)),
                           name="argmax")


def test_tuple_reducer_argmax():
    rows, cols = 7, 333
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), "k")
    index, value = te.compute((rows,), lambda i: _argmax()((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(index.op)
    s[index].bind(index.op.axis[0], te.thread_axis("blockIdx.x"))
    _, ki = s[index].split(k, factor=96)
    s[index].bind(ki, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, index, value], target="cuda")
    a = rand_array((rows, cols))
    a[3, 10] = a[3, 200] = 9.0   # a tie: the first index wins
    got_index, got_value = run_emulated(mod, [a], [(rows,), (rows,)], ["int32", "float32"])
    np.testing.assert_array_equal(got_index, a.argmax(axis=1))
    np.testing.assert_array_equal(got_value, a.max(axis=1))


def _per_row(s, reduction, row, threads):
    """`reduction` computed in shared memory at loop `row` (one block per row), its
    reduction axis split by `threads` and bound to threadIdx.x."""
    shared = s.cache_write(reduction, "shared")
    s[reduction].compute_inline()
    s[shared].compute_at(s[row[0]], row[1])
    _, ki = s[shared].split(shared.op.reduce_axis[0], factor=threads)
    s[shared].bind(ki, te.thread_axis("threadIdx.x"))


def test_softmax_one_block_per_row_in_one_kernel():
    rows, cols, threads = 7, 1000, 128
    X, mx, ex, total, Y = softmax_graph(rows, cols)
    s = te.create_schedule(Y.op)
    s[ex].compute_inline()
    s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
    _, ji = s[Y].split(Y.op.axis[1], factor=threads)
    s[Y].bind(ji, te.thread_axis("threadIdx.x"))
    for reduction in (mx, total):
        _per_row(s, reduction, (Y, Y.op.axis[0]), threads)
    mod = te.build(s, [X, Y], target="cuda")
    src = mod.get_source()
    assert src.count("__global__") == 1 and src.count("allreduce") == 2
    x = rand_array((rows, cols)) * 4
    (y,) = run_emulated(mod, [x], [(rows, cols)], ["float32"])
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-6)
    # the memory oracle: rows read and written whole by consecutive threads; each block's
    # combined max and sum stored once, by its first thread
    report = mod.memory_report(blocks=None)
    assert report.coalesced
    for name in ("mx.shared", "total.shared"):
        store = report.find(name, "store")
        assert (store.requests, store.lanes) == (rows, rows)


def test_layernorm_one_block_per_row_with_a_tuple_reducer():
    rows, cols, threads, eps = 7, 1000, 96, 1e-5
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), "k")
    sum_sq = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                             lambda t0, t1: (te.const(0, t0), te.const(0, t1)), name="sum_sq")
    S1, S2 = te.compute((rows,), lambda i: sum_sq((X[i, k], X[i, k] * X[i, k]), axis=k),
                        name="S")
    Y = te.compute((rows, cols), lambda i, j: (X[i, j] - S1[i] / cols) * te.rsqrt(
        S2[i] / cols - (S1[i] / cols) * (S1[i] / cols) + eps), name="Y")
    s = te.create_schedule(Y.op)
    s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
    _, ji = s[Y].split(Y.op.axis[1], factor=threads)
    s[Y].bind(ji, te.thread_axis("threadIdx.x"))
    _per_row(s, S1, (Y, Y.op.axis[0]), threads)
    mod = te.build(s, [X, Y], target="cuda")
    x = rand_array((rows, cols)) + 0.25
    (y,) = run_emulated(mod, [x], [(rows, cols)], ["float32"])
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


# -- the emulator's shuffles ------------------------------------------------------------
SHUFFLES = """\
extern "C" __global__ void shuffles(int* out, int* bad) {
  int lane = threadIdx.x;
  out[lane] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
  out[32 + lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 5, 8);
  out[64 + lane] = __shfl_sync(0xffffffffu, lane * 10, 2, 16);
  out[96 + lane] = __shfl_up_sync(0xffffffffu, lane * 10, 1, 4);
}
extern "C" __global__ void bad_mask(int* out, int* bad) {
  out[threadIdx.x] = __shfl_down_sync(0x1u, 1, 1);
}
"""


def test_emulator_shuffles_follow_cuda_semantics():
    kernels = (CudaKernel("shuffles", (), True), CudaKernel("bad_mask", (), True))
    types = {"shuffles": ["int*", "int*"], "bad_mask": ["int*", "int*"]}
    backend = EmulatorBackend(SHUFFLES, kernels, types)
    out, unused = np.zeros(128, "int32"), np.zeros(1, "int32")
    backend.launch("shuffles", [out, unused], (1, 1, 1), (32, 1, 1))
    lane = np.arange(32)
    # down: lane + 3, own value past the warp; xor within segments of 8; from lane 2 of each
    # 16-lane segment; up by 1 within segments of 4, own value at a segment's start
    np.testing.assert_array_equal(out[:32], np.where(lane + 3 < 32, lane + 3, lane) * 10)
    np.testing.assert_array_equal(out[32:64], (lane ^ 5) * 10)
    np.testing.assert_array_equal(out[64:96], ((lane & ~15) + 2) * 10)
    np.testing.assert_array_equal(out[96:], np.where(lane % 4 >= 1, lane - 1, lane) * 10)
    with pytest.raises(RuntimeError, match="a warp shuffle's mask left out a lane that "
                                           "called it or named lanes the block does not have"):
        backend.launch("bad_mask", [out, unused], (1, 1, 1), (2, 1, 1))
    # the failure is that launch's: the next launch of a correct kernel runs
    out[:] = -1
    backend.launch("shuffles", [out, unused], (1, 1, 1), (32, 1, 1))
    np.testing.assert_array_equal(out[32:64], (lane ^ 5) * 10)


# -- refusals -----------------------------------------------------------------------------
def test_reduction_on_an_outer_thread_axis_is_refused():
    A = te.placeholder((8, 64), name="A")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    s[B].bind(k, te.thread_axis("threadIdx.y"))
    with pytest.raises(te.BuildError, match=r"the reduction of 'B' across threadIdx.y: the "
                       r"reduction must be bound to the block's innermost thread axes "
                       r"\(threadIdx.x\), and its data axes to the outer ones"):
        te.build(s, [A, B], target="cuda")


def test_symbolic_thread_extent_is_refused():
    m = te.var("m")
    A = te.placeholder((4, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"the launch extent of threadIdx.x must be a "
                       r"constant, got m; split the loop bound to it by a constant factor"):
        te.build(s, [A, B], target="cuda")


def test_reading_a_global_result_in_the_same_kernel_is_refused():
    X = te.placeholder((8, 64), name="X")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((8,), lambda i: te.sum(X[i, k], axis=k), name="B")
    Y = te.compute((8, 64), lambda i, j: X[i, j] - B[i], name="Y")
    s = te.create_schedule(Y.op)
    s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
    s[Y].bind(Y.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[Y], Y.op.axis[0])   # its first thread stores it, in global memory
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"stages 'B' and 'Y' run in one kernel with "
                       r"loops bound to GPU threads; the second would read the first's "
                       r"results before other threads wrote them"):
        te.build(s, [X, Y], target="cuda")


def test_combine_under_a_thread_guard_is_refused():
    X = te.placeholder((8, 64), name="X")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((8,), lambda i: te.sum(X[i, k], axis=k), name="B")
    Y = te.compute((8, 64), lambda i, j: X[i, j] - B[i], name="Y")
    s = te.create_schedule(Y.op)
    BS = s.cache_write(B, "shared")
    s[B].compute_inline()
    yo, yi = s[Y].split(Y.op.axis[0], factor=8)
    s[Y].bind(yo, te.thread_axis("blockIdx.x"))
    s[Y].bind(yi, te.thread_axis("threadIdx.y"))
    s[Y].bind(Y.op.axis[1], te.thread_axis("threadIdx.x"))
    s[BS].compute_at(s[Y], yo)
    bo, bi = s[BS].split(BS.op.axis[0], factor=4)   # 4 rows at a time on 8 threadIdx.y
    s[BS].bind(bi, te.thread_axis("threadIdx.y"))
    s[BS].bind(BS.op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"the reduction of 'B.shared' across threadIdx.x "
                       r"needs every thread of the block, but it sits under the guard of loop "
                       r"'i.c.inner' \(threadIdx.y\)"):
        te.build(s, [X, Y], target="cuda")


def test_schedule_errors():
    A = te.placeholder((8, 64), name="A")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=2)
    s[B].reorder(xo, k, xi)
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.LoweringError, match=r"stage 'B': its reduction loop is bound to a "
                       r"thread, so every data loop must come before the reduction loops, "
                       r"but 'i.inner' comes after 'k'; reorder it outward"):
        te.lower(s, [A, B], target="cuda")
    with pytest.raises(te.ScheduleError, match=r"set_store_predicate on stage 'B': predicate "
                       r"must be tx.var.equal\(0\) for a thread axis tx bound to a loop of "
                       r"this stage"):
        s[B].set_store_predicate(te.thread_axis("threadIdx.y").var.equal(0))
    C = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    tx = te.thread_axis("threadIdx.x")
    s[C].bind(C.op.axis[0], tx)
    s[C].set_store_predicate(tx.var.equal(0))
    with pytest.raises(te.LoweringError, match=r"stage 'C': set_store_predicate on threadIdx.x "
                       r"is supported only for a thread axis that a reduction axis of the "
                       r"stage is bound to"):
        te.lower(s, [A, C], target="cuda")


def test_shared_memory_across_warps_counts_against_the_limit():
    cols, threads = 12285, 945   # a row of 49140 bytes cached in shared memory, 30 warps
    X = te.placeholder((4, cols), name="X")
    k = te.reduce_axis((0, cols), "k")
    M = te.compute((4,), lambda i: te.max(X[i, k], axis=k), name="M")
    Y = te.compute((4, cols), lambda i, j: X[i, j] - M[i], name="Y")
    s = te.create_schedule(Y.op)
    XS = s.cache_read(X, "shared", [M])
    s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
    _, ji = s[Y].split(Y.op.axis[1], factor=threads)
    s[Y].bind(ji, te.thread_axis("threadIdx.x"))
    _per_row(s, M, (Y, Y.op.axis[0]), threads)
    s[XS].compute_at(s[Y], Y.op.axis[0])
    _, xi = s[XS].split(XS.op.axis[1], factor=threads)
    s[XS].bind(xi, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"the reduction of 'M.shared' across threadIdx.x: "
                       r"its 120 bytes of shared memory across warps and the kernel's 49144 "
                       r"exceed CUDA's 49152 per block; use smaller tiles"):
        te.build(s, [X, Y], target="cuda")


# -- the emulator from several Python threads ----------------------------------------------
_CONCURRENT = """
import threading, numpy as np, te
from test_cross_thread_reduction import _rows_reduction
from test_cuda_barriers import _cooperative_fetch_matmul
s, A, B = _rows_reduction(40, 300, te.sum, 64, 1, True)
s2, args = _cooperative_fetch_matmul(40, 24, 33, 8, 5)
cases = [(te.build(s, [A, B], target="cuda").emulator(), [(40, 300)], (40,),
          lambda a: a.sum(1)),   # shuffles: a block's threads as pthreads
         (te.build(s2, args, target="cuda").emulator(), [(40, 33), (33, 24)], (40, 24),
          lambda a, b: a @ b)]   # barriers only: a block's threads as fibers
bad = []
def work(seed, run, shapes, out_shape, want):
    rng = np.random.default_rng(seed)
    for _ in range(10):
        ins = [rng.standard_normal(x).astype(np.float32) for x in shapes]
        out = np.full(out_shape, np.nan, np.float32)
        run(*ins, out)
        if not np.allclose(out, want(*ins), rtol=1e-4, atol=1e-4):
            bad.append(seed)
for case in cases:
    threads = [threading.Thread(target=work, args=(k, *case)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(len(bad))
"""


def test_an_emulated_module_called_from_several_threads_at_once():
    """The emulator's kernels keep a launch's state in the library's globals (blockIdx,
    shared arrays, the barrier, the fibers): launches from several Python threads take
    turns, each right (they hung or mixed blocks)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, here,
                                                       os.path.dirname(os.path.dirname(here))]))
    done = subprocess.run([sys.executable, "-c", _CONCURRENT], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0"]
