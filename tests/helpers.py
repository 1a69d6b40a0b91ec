"""Shared test helpers: random inputs that are never all zeros, and build-run-compare.

Takes te schedules and numpy reference functions; gives rand_array(), run_kernel(),
check_schedule(), build_reference(), a softmax graph with its numpy reference and row
schedule, and for target 'cuda' bind() and run_emulated().
`import helpers` works in every test: pytest puts tests/ (the directory of the rootdir
conftest.py) on sys.path. Imports numpy and te.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

import te

_RNG = np.random.default_rng(20240601)


def rand_array(shape: Sequence[int], dtype: str = "float32", rng=None) -> np.ndarray:
    """Random values away from zero: floats in [0.5, 1.5) with random sign, ints in [-9, 9]."""
    rng = rng if rng is not None else _RNG
    shape = tuple(int(s) for s in shape)
    if np.dtype(dtype).kind == "f":
        sign = rng.choice(np.array([-1.0, 1.0]), size=shape)
        return (sign * rng.uniform(0.5, 1.5, size=shape)).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    lo = 0 if np.dtype(dtype).kind == "u" else -9
    return rng.integers(lo, 10, size=shape).astype(dtype)


def shape_of(t: te.Tensor, sizes: dict | None = None) -> tuple:
    """The concrete shape of tensor `t`, with te.var sizes looked up by name in `sizes`."""
    out = []
    for dim in t.shape:
        if isinstance(dim, te.Var):
            out.append(int(sizes[dim.name]))
        else:
            out.append(int(dim.value))
    return tuple(out)


def run_kernel(mod, inputs: Sequence[te.Tensor], outputs: Sequence[te.Tensor],
               sizes: dict | None = None, seed: int = 0) -> tuple[list, list]:
    """Call `mod` on random inputs and NaN-filled outputs; returns (input arrays, outputs)."""
    rng = np.random.default_rng(seed)
    ins = [rand_array(shape_of(t, sizes), t.dtype, rng) for t in inputs]
    outs = []
    for t in outputs:
        arr = np.empty(shape_of(t, sizes), t.dtype)
        arr.fill(np.nan if np.dtype(t.dtype).kind == "f" else 123)
        outs.append(arr)
    mod(*ins, *outs)
    return ins, outs


def build_reference(s, args: Sequence[te.Tensor]):
    """The build of a reference (unscheduled) kernel that other builds are compared with:
    bounds-checked, so that an access outside a buffer raises IndexError instead of reading
    stray memory into the expected values (or crashing the test run)."""
    return te.build(s, list(args), instrument_bound_checkers=True)


def check_schedule(s, inputs: Sequence[te.Tensor], outputs: Sequence[te.Tensor],
                   ref: Callable, rtol: float = 1e-5, atol: float = 1e-5,
                   sizes: dict | None = None, seed: int = 0) -> None:
    """Build `s`, run it on random inputs and compare every output with ref(*inputs)."""
    mod = te.build(s, list(inputs) + list(outputs))
    ins, outs = run_kernel(mod, inputs, outputs, sizes, seed)
    expected = ref(*ins)
    if not isinstance(expected, (list, tuple)):
        expected = [expected]
    assert len(expected) == len(outs)
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def softmax_graph(rows, cols) -> tuple:
    """(X, mx, ex, total, Y): softmax over the rows of X, one stage per step."""
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(X[i, k], axis=k), name="mx")
    ex = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, cols), name="k2")
    total = te.compute((rows,), lambda i: te.sum(ex[i, k2], axis=k2), name="total")
    Y = te.compute((rows, cols), lambda i, j: ex[i, j] / total[i], name="Y")
    return X, mx, ex, total, Y


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def schedule_softmax_rows(s, graph: tuple, row, lanes: int):
    """softmax_graph's stages computed at loop `row` of Y: the max, and the sum as `lanes`
    vector partial sums (rfactor) whose loop the exp pass shares (compute_with), each
    iteration computing `lanes` exps and adding them at once. Returns the partial sums'
    tensor."""
    X, mx, ex, total, Y = graph
    s[mx].compute_at(s[Y], row)
    ko, ki = s[total].split(total.op.reduce_axis[0], factor=lanes)
    rf = s.rfactor(total, ki, factor_axis=1)
    s[rf].compute_at(s[Y], row)
    s[rf].reorder(rf.op.axis[0], rf.op.reduce_axis[0], rf.op.axis[1])
    s[rf].vectorize(rf.op.axis[1])
    s[total].compute_at(s[Y], row)
    s[ex].compute_at(s[Y], row)
    eo, ei = s[ex].split(ex.op.axis[1], factor=lanes)
    s[ex].vectorize(ei)
    s[ex].compute_with(s[rf], rf.op.reduce_axis[0])
    return rf


# Target 'cuda' (tests/codegen/cuda and the lowering tests that run CUDA C in its emulator)
def bind(s, stage_tensor, axis, factor, outer="blockIdx.x", inner="threadIdx.x"):
    """Split `axis` of stage `stage_tensor` by `factor`; bind the outer part to `outer` and
    the inner to `inner`; gives (outer, inner)."""
    o, i = s[stage_tensor].split(axis, factor=factor)
    s[stage_tensor].bind(o, te.thread_axis(outer))
    s[stage_tensor].bind(i, te.thread_axis(inner))
    return o, i


def run_emulated(mod, inputs, out_shapes, out_dtypes):
    """The outputs of CUDA module `mod` run in its CPU emulator, each allocated poisoned
    (NaN, or 77 for integers) so that an element no thread wrote shows."""
    outs = [np.full(shape, np.nan if np.dtype(d).kind == "f" else 77, d)
            for shape, d in zip(out_shapes, out_dtypes)]
    mod.emulator()(*inputs, *outs)
    return outs


def shared_matmul(M, N, K, tile, k_split, fill="rows", dtype="float32", accumulate=None):
    """TVM's GPU GEMM schedule: tile x tile threads per block, one output each, A and B
    tiles in shared memory per k step of `k_split`, the sum in a local cache. `fill`: how
    the shared tiles are fetched: "rows" (tile axes bound to threadIdx.y/x), "cooperative"
    (the tile fused and split over the threads, TVM's cooperative fetch) or None (each
    thread fetches the whole tile). `accumulate`: the sum's dtype (default `dtype`)."""
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    acc = accumulate or dtype
    C = te.compute((M, N), lambda i, j: te.sum(
        A[i, k].astype(acc) * B[k, j].astype(acc), axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    by, bx, ty, tx = s[C].tile(C.op.axis[0], C.op.axis[1], tile, tile)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=k_split)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        if fill == "rows":
            s[T].bind(T.op.axis[0], te.thread_axis("threadIdx.y"))
            s[T].bind(T.op.axis[1], te.thread_axis("threadIdx.x"))
        elif fill == "cooperative":
            fo, fi = s[T].split(s[T].fuse(*s[T].op.axis), factor=tile)
            s[T].bind(fo, te.thread_axis("threadIdx.y"))
            s[T].bind(fi, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]
