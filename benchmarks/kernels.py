"""Hand schedules of the non-GEMM benchmark kernels: conv2d and memory-bound row kernels.

Takes problem sizes; gives functions returning (schedule, argument tensors) for conv2d NCHW
(3x3 and 1x1), relu(x*a+b), softmax, layer norm and sum along the last axis, and a plain
copy (the bandwidth yardstick). Imports te only.
"""
from __future__ import annotations

import te
from te.compute.ops import nn

LANES = 16  # float32 lanes per vector op in the row kernels (one zmm or two ymm)


def conv2d(cin: int, cout: int, h: int, w: int, r: int, pad: int, fb: int = 8, xb: int = 8,
           yb: int = 2):
    """conv2d NCHW, batch 1: an fb x yb x xb register tile of the output (output channels
    unrolled, rows unrolled, columns as vectors) accumulates over (rc, ry, rx)."""
    X = te.placeholder((1, cin, h, w), name="X")
    W = te.placeholder((cout, cin, r, r), name="W")
    Y = nn.conv2d_nchw(X, W, padding=pad, name="Y")
    s = te.create_schedule(Y.op)
    if pad:
        P = Y.op.input_tensors[0]
        s[P].parallel(P.op.axis[1])
    YL = s.cache_write(Y, "local")
    n, f, y, x = Y.op.axis
    fo, fi = s[Y].split(f, factor=fb)
    yo, yi = s[Y].split(y, factor=yb)
    xo, xi = s[Y].split(x, factor=xb)
    s[Y].reorder(n, fo, yo, xo, fi, yi, xi)
    s[Y].parallel(s[Y].fuse(fo, yo))
    # Unrolled write-back: constant offsets into the local tile let LLVM keep it in
    # registers for the whole reduction (SROA), instead of a round trip through the stack.
    s[Y].unroll(fi)
    s[Y].unroll(yi)
    s[Y].vectorize(xi)
    s[YL].compute_at(s[Y], xo)
    n, f, y, x = s[YL].op.axis
    rc, ry, rx = s[YL].op.reduce_axis
    s[YL].reorder(rc, ry, rx, f, y, x)
    s[YL].unroll(ry)
    s[YL].unroll(rx)
    s[YL].unroll(f)
    s[YL].unroll(y)
    s[YL].vectorize(x)
    return s, [X, W, Y]


def _row_split(s, stage, axis):
    jo, ji = s[stage].split(axis, factor=LANES)
    s[stage].vectorize(ji)
    return jo, ji


def relu_affine(rows: int, cols: int):
    """relu(x * a + b) with per-column a, b: one fused, vectorized, parallel pass."""
    X = te.placeholder((rows, cols), name="X")
    a = te.placeholder((cols,), name="a")
    b = te.placeholder((cols,), name="b")
    Y = te.compute((rows, cols), lambda i, j: te.max(X[i, j] * a[j] + b[j], 0.0), name="Y")
    s = te.create_schedule(Y.op)
    _row_split(s, Y, Y.op.axis[1])
    s[Y].parallel(Y.op.axis[0])
    return s, [X, a, b, Y]


def copy(rows: int, cols: int):
    """Y = X: the bandwidth yardstick."""
    X = te.placeholder((rows, cols), name="X")
    Y = te.compute((rows, cols), lambda i, j: X[i, j], name="Y")
    s = te.create_schedule(Y.op)
    _row_split(s, Y, Y.op.axis[1])
    s[Y].parallel(Y.op.axis[0])
    return s, [X, Y]


def _lane_reduce(s, R, out, row):
    """Reduce along the last axis as LANES vector partial results (rfactor), computed at
    `row` of `out`; the final LANES -> 1 step is a short scalar loop."""
    jo, ji = s[R].split(R.op.reduce_axis[0], factor=LANES)
    RF = s.rfactor(R, ji, factor_axis=1)
    s[RF].compute_at(s[out], row)
    _lanes_inside(s, RF)
    s[R].compute_at(s[out], row)
    return RF


def _lanes_inside(s, RF):
    """The lane axis of an rfactor stage innermost (below its reduction loop), vectorized:
    each step of the reduction is one vector operation on LANES partial results."""
    lane = RF.op.axis[-1]
    s[RF].reorder(*RF.op.axis[:-1], *RF.op.reduce_axis, lane)
    s[RF].vectorize(lane)


def row_sum(rows: int, cols: int):
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    jo, ji = s[S].split(S.op.reduce_axis[0], factor=LANES)
    RF = s.rfactor(S, ji, factor_axis=1)
    s[RF].compute_at(s[S], S.op.axis[0])
    _lanes_inside(s, RF)
    s[S].parallel(S.op.axis[0])
    return s, [X, S]


def softmax(rows: int, cols: int):
    """Per row: max, exp into a row buffer with its sum, normalize; rows in parallel."""
    X = te.placeholder((rows, cols), name="X")
    Y = nn.softmax(X, name="Y")
    norm = Y
    expsum = norm.op.input_tensors[1] if len(norm.op.input_tensors) > 1 else None
    ex, expsum = [t for t in norm.op.input_tensors]
    maxelem = ex.op.input_tensors[1]
    s = te.create_schedule(Y.op)
    i, j = s[Y].op.axis
    s[Y].parallel(i)
    _row_split(s, Y, j)
    for R in (maxelem, expsum):
        _lane_reduce(s, R, Y, i)
    s[ex].compute_at(s[Y], i)
    _row_split(s, ex, ex.op.axis[1])
    return s, [X, Y]


def layernorm(rows: int, cols: int):
    """Per row: mean, variance, then the affine normalization; rows in parallel."""
    X = te.placeholder((rows, cols), name="X")
    g = te.placeholder((cols,), name="g")
    b = te.placeholder((cols,), name="b")
    Y = nn.layer_norm(X, g, b, name="Y")
    s = te.create_schedule(Y.op)
    ops = {t.op.name: t for t in s.outputs[0].input_tensors} if False else None
    stages = {st.name: st for st in s.stages}
    i, j = s[Y].op.axis
    s[Y].parallel(i)
    _row_split(s, Y, j)
    for name in ("Y_var", "Y_mean"):
        R = stages[name].op.output(0)
        _lane_reduce(s, R, Y, i)
    return s, [X, g, b, Y]
