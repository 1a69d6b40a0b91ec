"""te.compute.ops max_pool2d and avg_pool2d (count_include_pad False and True) against numpy.

Odd sizes, stride 2, asymmetric padding on every side, windows at the border that are mostly
padding, size-1 dims, int32 for max, dilated windows (a symbolic batch too); the default
schedule and the pad stage inlined or not, the sum stage attached, split/vectorize/parallel.
Imports te, te.compute.ops, numpy, helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-5)


def _pads(padding):
    if isinstance(padding, int):
        return (padding,) * 4
    return tuple(padding) if len(padding) == 4 else (padding[0], padding[1]) * 2


def _windows(x, kernel, stride, padding, fill, dilation=(1, 1)):
    """Every pooling window (its taps, dilation apart) as the last two axes, with padding as
    `fill`."""
    (kh, kw), (sh, sw) = kernel, (stride, stride) if isinstance(stride, int) else stride
    dh, dw = dilation
    top, left, bottom, right = _pads(padding)
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (top, bottom), (left, right)),
                constant_values=fill)
    extent = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    win = np.lib.stride_tricks.sliding_window_view(xp, extent, axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw]


def max_pool_ref(x, kernel, stride, padding, dilation=(1, 1)):
    return _windows(x, kernel, stride, padding, -np.inf, dilation).max(
        axis=(-2, -1)).astype(x.dtype)


def avg_pool_ref(x, kernel, stride, padding, count_include_pad, dilation=(1, 1)):
    total = _windows(x, kernel, stride, padding, 0.0, dilation).sum(axis=(-2, -1))
    if count_include_pad:
        count = kernel[0] * kernel[1]
    else:
        count = _windows(np.ones_like(x), kernel, stride, padding, 0.0, dilation).sum(
            axis=(-2, -1))
    return (total / count).astype(x.dtype)


POOL_CASES = [
    # (N, C, H, W), kernel, stride, padding
    ((1, 3, 7, 9), (3, 3), 1, 1),
    ((2, 2, 9, 8), (3, 2), 2, (1, 0, 2, 1)),
    ((1, 1, 13, 5), (2, 2), (2, 1), (1, 1)),
    ((1, 2, 1, 7), (1, 3), 1, (0, 2)),
    ((1, 1, 1, 1), (1, 1), 1, 0),
    ((1, 2, 4, 4), (4, 4), 3, (3, 0, 3, 0)),  # border windows that hold a single element
]


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_pool2d(case, dtype):
    shape, kernel, stride, padding = case
    X = te.placeholder(shape, dtype, name="X")
    Y = ops.max_pool2d(X, kernel, stride, padding)
    check(te.create_schedule(Y.op), [X], [Y],
          lambda x: max_pool_ref(x, kernel, stride, padding))


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool2d(case, count_include_pad):
    shape, kernel, stride, padding = case
    X = te.placeholder(shape, name="X")
    Y = ops.avg_pool2d(X, kernel, stride, padding, count_include_pad=count_include_pad)
    check(te.create_schedule(Y.op), [X], [Y],
          lambda x: avg_pool_ref(x, kernel, stride, padding, count_include_pad))


# (N, C, H, W), kernel, stride, padding, dilation
DILATED_CASES = [
    ((1, 2, 9, 11), (3, 3), 1, 0, (2, 2)),
    ((2, 2, 11, 10), (2, 3), (2, 1), (1, 2, 1, 0), (2, 3)),
    ((1, 3, 10, 17), (3, 2), (1, 3), (2, 1, 0, 1), (1, 3)),
    ((1, 1, 5, 6), (3, 3), 1, 2, (2, 2)),   # border windows that hold a single element
]


@pytest.mark.parametrize("case", DILATED_CASES, ids=str)
def test_dilated_max_pool2d(case):
    shape, kernel, stride, padding, dilation = case
    X = te.placeholder(shape, name="X")
    Y = ops.max_pool2d(X, kernel, stride, padding, dilation)
    check(te.create_schedule(Y.op), [X], [Y],
          lambda x: max_pool_ref(x, kernel, stride, padding, dilation))


@pytest.mark.parametrize("case", DILATED_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_dilated_avg_pool2d(case, count_include_pad):
    shape, kernel, stride, padding, dilation = case
    X = te.placeholder(shape, name="X")
    Y = ops.avg_pool2d(X, kernel, stride, padding, count_include_pad, dilation)
    check(te.create_schedule(Y.op), [X], [Y],
          lambda x: avg_pool_ref(x, kernel, stride, padding, count_include_pad, dilation))


def test_dilated_avg_pool2d_of_a_symbolic_batch():
    """The plain compute (the graph's form for symbolic shapes) with dilation, built once
    for any batch; the only-padding check skips the sizes that are not constant."""
    shape, kernel, stride, padding, dilation = DILATED_CASES[1]
    X = te.placeholder((te.var("n"),) + shape[1:], name="X")
    Y = ops.avg_pool2d(X, kernel, stride, padding, False, dilation)
    fn = te.build(te.create_schedule(Y.op), [X, Y])
    x = np.random.default_rng(4).standard_normal((3,) + shape[1:]).astype("float32")
    want = avg_pool_ref(x, kernel, stride, padding, False, dilation)
    got = np.zeros(want.shape, "float32")
    fn(x, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _stage(t, name):
    for inp in t.op.input_tensors:
        if inp.op.name == name:
            return inp
        found = _stage(inp, name) if hasattr(inp.op, "body") else None
        if found is not None:
            return found
    return None


def pool_pad_inline_vectorize(s, Y):
    s[_stage(Y, "pad_temp")].compute_inline()
    _, xi = s[Y].split(Y.op.axis[3], 4)
    s[Y].vectorize(xi)


def pool_pad_at_row_parallel(s, Y):
    """The pad stage attached at the row loop of its reader (the pool, or avg's sum)."""
    n, c, y, x = Y.op.axis
    s[Y].parallel(s[Y].fuse(n, c))
    total = _stage(Y, "pool_sum")
    reader = Y if total is None else total
    s[_stage(Y, "pad_temp")].compute_at(s[reader], reader.op.axis[2])


def pool_stages_attached(s, Y):
    """avg only: pad inlined into the sum, the sum attached at the output row."""
    total = _stage(Y, "pool_sum")
    s[_stage(Y, "pad_temp")].compute_inline()
    yo, _ = s[Y].split(Y.op.axis[2], 2)
    s[total].compute_at(s[Y], yo)
    s[Y].unroll(Y.op.axis[3])


@pytest.mark.parametrize("sched", [pool_pad_inline_vectorize, pool_pad_at_row_parallel],
                         ids=["pad_inline_vectorize", "pad_at_row_parallel"])
def test_max_pool2d_scheduled(sched):
    shape, kernel, stride, padding = POOL_CASES[1]
    X = te.placeholder(shape, name="X")
    Y = ops.max_pool2d(X, kernel, stride, padding)
    s = te.create_schedule(Y.op)
    sched(s, Y)
    check(s, [X], [Y], lambda x: max_pool_ref(x, kernel, stride, padding))


@pytest.mark.parametrize("sched", [pool_pad_inline_vectorize, pool_pad_at_row_parallel,
                                   pool_stages_attached],
                         ids=["pad_inline_vectorize", "pad_at_row_parallel", "stages_attached"])
def test_avg_pool2d_scheduled(sched):
    shape, kernel, stride, padding = POOL_CASES[1]
    X = te.placeholder(shape, name="X")
    Y = ops.avg_pool2d(X, kernel, stride, padding)
    s = te.create_schedule(Y.op)
    sched(s, Y)
    if sched is not pool_stages_attached:
        s[_stage(Y, "pool_sum")].compute_at(s[Y], Y.op.axis[2])
    check(s, [X], [Y], lambda x: avg_pool_ref(x, kernel, stride, padding, False))
