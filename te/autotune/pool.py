"""The pooling schedule: max / average pooling over a phase-split padded input
(te.compute.ops.max_pool2d_phased / avg_pool2d_phased), with up to a chain of elementwise
stages after it (a fused epilogue).

(batch, channel) planes run in parallel; each plane's padded, phase-split copy is made
just before its rows are pooled (an L2-sized buffer, the padding tested once per input
element); each output row is computed with the window taps unrolled around a vector of
consecutive outputs, which read consecutive inputs at any stride. Imports te.compute,
te.schedule, te.errors and micro_kernel.vector_lanes.
"""
from __future__ import annotations

from ..compute.ops.pool_phased import MAX_TAG, PACK_TAG, SUM_TAG
from ..compute.tensor import Tensor
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule
from .conv2d import producer_ops
from .micro_kernel import vector_lanes


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
    s = create_schedule(out.op)
    lanes = vector_lanes(out.dtype)
    for op in found[1:]:
        # the average's division and any epilogue: computed as the output row is written
        if op is not pool and op is not pack and not op.reduce_axis:
            s[op].compute_inline()
    n, c, y, _ = s[out].op.axis
    plane = s[out].fuse(n, c)
    s[out].parallel(plane)
    xo, xi = _row(s, out.op, lanes)
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

