"""The pooling schedule: max / average pooling as te.compute.ops.max_pool2d_phased /
avg_pool2d_phased compute it (the input read directly, or a padded, for strides above the
codegen's dense loads phase-split, copy), with up to a chain of elementwise stages after
it (a fused epilogue).

(batch, channel) planes run in parallel; a plane's padded copy, where there is one, is
made just before its rows are pooled (an L2-sized buffer, the padding tested once per
input element); each output row is a vector of consecutive outputs. In the rows-first form
the window's rows are combined into a row buffer just before each output row (dense vector
loads), whose taps the row then reads at the stride; otherwise the window taps are vector
loads at the stride (unrolled around the vector, or one expression: a small max window's
tree of maxima). schedule_pool_nd: the pools over three (or more) spatial axes and a max
pool's indices, te.compute.ops.pool_nd's. Imports te.compute, te.schedule, te.errors and
micro_kernel.vector_lanes.
"""
from __future__ import annotations

from ..compute.ops.pool_nd import ND_INDEX_TAG, ND_MAX_TAG, ND_SUM_TAG
from ..compute.ops.pool_phased import MAX_TAG, PACK_TAG, ROWS_TAG, SUM_TAG
from ..compute.tensor import Tensor
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule
from .conv2d import producer_ops
from .micro_kernel import vector_lanes


# The rows-first form's row buffer is one vector operation up to this many vectors wide:
# LLVM splits it into registers and its tail into smaller vectors. Split by the vector
# width instead, its tail (the columns the output's last vector reads past the row) is a
# guarded scalar loop: on AMD Zen 4, ResNet's stem pool ran 1.2x and a 3x3 stride 1
# average over 28 x 28 2x slower than the unsplit rows (benchmarks/graph_pools.py).
MAX_ROW_VECTORS = 16


def _tagged(op, tag) -> bool:
    return tag in op.tag.split(",")


def _row(s, stage, lanes: int):
    """Split a stage's last axis by the vector width and vectorize the inner part."""
    x = s[stage].op.axis[-1]
    width = int(stage.output(0).shape[-1].value)
    xo, xi = s[stage].split(x, factor=max(1, min(lanes, width)))
    s[stage].vectorize(xi)
    return xo, xi


def schedule_pool2d(out: Tensor):
    """A schedule of `out`: a max_pool2d_phased / avg_pool2d_phased output, or elementwise
    stages over it (each reading the pool's output at its own index)."""
    if not isinstance(out, Tensor):
        raise ArgumentError(f"te.autotune.schedule_pool2d: out must be a te.Tensor (the "
                            f"pool's output or an elementwise stage over it), got "
                            f"{type(out).__name__}")
    found = producer_ops(out)
    pool = next((op for op in found if _tagged(op, MAX_TAG) or _tagged(op, SUM_TAG)), None)
    if pool is None or len(out.shape) != 4:
        raise ArgumentError(f"te.autotune.schedule_pool2d: out ('{out.op.name}') reads no "
                            f"4-d pooling stage (tags {MAX_TAG!r} or {SUM_TAG!r})")
    pack = next((op for op in found if _tagged(op, PACK_TAG)), None)
    rows = next((op for op in found if _tagged(op, ROWS_TAG)), None)
    s = create_schedule(out.op)
    lanes = vector_lanes(out.dtype)
    tree = not pool.reduce_axis   # a small max window: one expression of its taps
    for op in found[1:]:
        # the average's division, a tree max and any epilogue: computed as the output row
        # is written
        if op not in (pack, rows) and not op.reduce_axis:
            s[op].compute_inline()
    n, c, y, _ = s[out].op.axis
    plane = s[out].fuse(n, c)
    s[out].parallel(plane)
    xo, xi = _row(s, out.op, lanes)
    if rows is not None:   # the output row's window rows, combined just before it
        s[rows].compute_at(s[out], y)
        j = s[rows].op.axis[-1]
        if int(rows.output(0).shape[-1].value) > MAX_ROW_VECTORS * lanes:
            _, j = s[rows].split(j, factor=MAX_ROW_VECTORS * lanes)
        s[rows].vectorize(j)
    if not tree:
        ry, rx = s[pool].op.reduce_axis
        if pool is out.op:
            s[out].reorder(plane, y, xo, ry, rx, xi)
        else:
            s[pool].compute_at(s[out], y)
            pxo, pxi = _row(s, pool, lanes)
            s[pool].reorder(pxo, ry, rx, pxi)
        s[pool].unroll(ry)
        s[pool].unroll(rx)
    if pack is not None:
        s[pack].compute_at(s[out], plane)
        _row(s, pack, lanes)
    return s


def schedule_pool_nd(out: Tensor):
    """A schedule of `out`: a te.compute.ops.max_pool_nd / avg_pool_nd / max_pool_indices
    output (N, C, *spatial with two or more spatial axes), or elementwise stages over it.

    The planes of all but the last two output axes run in parallel; each output row is a
    vector of consecutive outputs with the window's taps looped around it, the pooling
    stage computed row by row where it is not the output; the padding, the average's
    division and any epilogue are inlined. The automatic space's register tile, with a
    vector of strided taps per output row segment, compiled up to 100x slower (8 s for a
    5 x 5 x 5 window) and ran up to 2x slower than this."""
    if not isinstance(out, Tensor):
        raise ArgumentError(f"te.autotune.schedule_pool_nd: out must be a te.Tensor (the "
                            f"pool's output or an elementwise stage over it), got "
                            f"{type(out).__name__}")
    found = producer_ops(out)
    tags = (ND_MAX_TAG, ND_SUM_TAG, ND_INDEX_TAG)
    pool = next((op for op in found if any(_tagged(op, t) for t in tags)), None)
    if pool is None or len(out.shape) < 4 or len(pool.output(0).shape) != len(out.shape):
        raise ArgumentError(f"te.autotune.schedule_pool_nd: out ('{out.op.name}') reads no "
                            f"pooling stage with two or more spatial axes (tags "
                            f"{', '.join(repr(t) for t in tags)})")
    if any(getattr(d, "value", None) is None for d in out.shape):
        raise ArgumentError(f"te.autotune.schedule_pool_nd: out ('{out.op.name}') must have "
                            f"a constant shape")
    s = create_schedule(out.op)
    for op in found[1:]:
        if op is not pool:
            s[op].compute_inline()
    axes = s[out].op.axis
    plane = s[out].fuse(*axes[:-2])
    s[out].parallel(plane)
    lanes = vector_lanes(out.dtype)
    xo, xi = _row(s, out.op, lanes)
    if pool is out.op:
        s[out].reorder(plane, axes[-2], xo, *s[pool].op.reduce_axis, xi)
    else:
        s[pool].compute_at(s[out], axes[-2])
        pxo, pxi = _row(s, pool, lanes)
        s[pool].reorder(pxo, *s[pool].op.reduce_axis, pxi)
    return s
