"""Injective layout ops: reshape, transpose, concatenate, pad, slice, expand, split, take
(gather), tile; resize and grid_sample (interpolation); and where (a broadcasting select).

Attributes are static (shapes, axes and offsets known when the graph is built), so each
output shape follows from the inputs' shapes alone. Imports te's public API,
te.compute.ops and graph.ops.base.
"""
from __future__ import annotations

import te
from te.compute import ops as topi

from .base import OpDef, Pattern


def slice_(ins, starts, ends, axes, steps):
    """x[starts[k]:ends[k]:steps[k]] on each axes[k] (Python slice semantics), one stage per
    sliced axis; the automatic schedule inlines all but the last."""
    out = ins[0]
    for k, (b, e, a, s) in enumerate(zip(starts, ends, axes, steps)):
        out = topi.slice_axis(out, a, b, e, s, name="slice" if k == len(axes) - 1
                              else f"slice_{k}")
    return out


def expand(ins, shape):
    """Broadcast x to numpy.broadcast_shapes(x.shape, shape) (ONNX Expand)."""
    x = ins[0]
    ones = te.compute(tuple(shape), lambda *i: te.const(0, x.dtype), name="expand_zero")
    return topi.broadcast_binary(lambda a, b: a, x, ones, name="expand")


def split(ins, axis, sizes):
    """Consecutive pieces of `sizes` elements along `axis`: one output each."""
    outs, begin = [], 0
    for k, n in enumerate(sizes):
        outs.append(topi.slice_axis(ins[0], axis, begin, begin + n, 1, name=f"split_{k}"))
        begin += n
    return outs


OPS = {op.name: op for op in (
    OpDef("reshape", Pattern.INJECTIVE,
          lambda ins, newshape: topi.reshape(ins[0], newshape, name="reshape"),
          doc="row-major reshape to a static shape"),
    OpDef("transpose", Pattern.INJECTIVE,
          lambda ins, axes: topi.transpose(ins[0], axes, name="transpose"),
          doc="permute the dimensions"),
    OpDef("concatenate", Pattern.INJECTIVE,
          lambda ins, axis: topi.concatenate(list(ins), axis, name="concatenate"),
          (1, 1 << 16), doc="join along an axis"),
    OpDef("pad", Pattern.INJECTIVE,
          lambda ins, pad_before, pad_after, value, mode="constant": topi.pad(
              ins[0], pad_before, pad_after, value, name="pad", mode=mode),
          doc="constant, edge, reflect or wrap padding; negative pads crop"),
    OpDef("slice", Pattern.INJECTIVE, slice_, doc="strided slices on several axes"),
    OpDef("expand", Pattern.BROADCAST, expand, doc="numpy broadcast to a shape"),
    OpDef("split", Pattern.INJECTIVE, split, doc="consecutive pieces along an axis"),
    OpDef("take", Pattern.INJECTIVE,
          lambda ins, axis: topi.take(ins[0], ins[1], axis, name="take"), (2, 2),
          doc="gather along an axis by an index tensor (numpy.take)"),
    OpDef("gather_elements", Pattern.INJECTIVE,
          lambda ins, axis: topi.gather_elements(ins[0], ins[1], axis, name="gather_elements"),
          (2, 2), doc="gather along an axis by an index of the output's shape "
                      "(numpy.take_along_axis)"),
    OpDef("tile", Pattern.INJECTIVE,
          lambda ins, repeats: topi.tile(ins[0], repeats, name="tile"),
          doc="repeat along each axis (numpy.tile)"),
    OpDef("resize", Pattern.INJECTIVE,
          lambda ins, shape, scales, method, coordinate_mode, nearest_mode, cubic_a=-0.75,
          exclude_outside=False, roi=None, extrapolation_value=0.0, antialias=False:
          topi.resize(ins[0], shape, scales, method, coordinate_mode, nearest_mode,
                      name="resize", cubic_a=cubic_a, exclude_outside=exclude_outside,
                      roi=roi, extrapolation_value=extrapolation_value, antialias=antialias),
          doc="nearest, linear or cubic resizing to a shape (ONNX Resize)"),
    OpDef("grid_sample", Pattern.INJECTIVE,
          lambda ins, mode, padding_mode, align_corners: topi.grid_sample(
              ins[0], ins[1], mode, padding_mode, align_corners, name="grid_sample"), (2, 2),
          doc="nearest, linear or cubic sampling at the positions a grid gives, outside "
              "padded by zeros, border or reflection (ONNX GridSample)"),
    OpDef("where", Pattern.BROADCAST,
          lambda ins: topi.where(ins[0], ins[1], ins[2], name="where"), (3, 3),
          doc="select by a condition, the three broadcast (numpy.where)"),
)}
