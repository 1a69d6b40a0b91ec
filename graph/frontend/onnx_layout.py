"""ONNX converters of layout, reduction and constant ops (Reshape, Squeeze, Unsqueeze,
Flatten, Transpose, Concat, Pad, Slice, Split, Expand, Gather, Tile, Resize, Constant,
ConstantOfShape, Shape, ReduceX, ArgMax/ArgMin), opsets 6 to 28: where an attribute became
an input, the converter reads whichever the model has.

Imports numpy, te.compute.ops.resize (its antialias limit), te.compute.ops.transform (the
pad modes and their checks), te.errors, graph's builder modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np
from te.compute.ops.resize import MAX_FILTER_TERMS, filter_terms
from te.compute.ops.transform import PAD_MODES, pad_kept_sizes
from te.errors import ShapeError

from .. import builder, transform
from ..builder import apply
from .onnx_base import Converter, Refused, const, distinct_axes, only, row, scalar

# ---- layout --------------------------------------------------------------------------

def _reshape(ins, attrs, opset, outs):
    x = ins[0]
    shape = [int(d) for d in (attrs["shape"] if opset < 5 else const(ins[1], "shape"))]
    if not attrs.get("allowzero", 0):  # 0 copies the input's dim
        shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    return [transform.reshape(x, shape, name=outs[0])]


def _axes(ins, attrs, opset, new_opset: int, name: str = "axes"):
    """Axes given as an attribute before `new_opset`, as an optional input from it on."""
    if opset < new_opset:
        return attrs.get(name)
    if len(ins) < 2 or ins[1] is None:
        return None
    return [int(a) for a in const(ins[1], name)]


def _squeeze(ins, attrs, opset, outs):
    return [transform.squeeze(ins[0], _axes(ins, attrs, opset, 13), name=outs[0])]


def _unsqueeze(ins, attrs, opset, outs):
    axes = _axes(ins, attrs, opset, 13)
    if axes is None:
        raise Refused("axes", "Unsqueeze needs axes")
    return [transform.unsqueeze(ins[0], list(axes), name=outs[0])]


def _flatten(ins, attrs, opset, outs):
    return [transform.flatten(ins[0], attrs.get("axis", 1), name=outs[0])]


def _transpose(ins, attrs, opset, outs):
    return [transform.transpose(ins[0], attrs.get("perm"), name=outs[0])]


def _concat(ins, attrs, opset, outs):
    return [transform.concatenate(ins, attrs["axis"], name=outs[0])]


def _pad(ins, attrs, opset, outs):
    """Pad from opset 2: pads (and the constant value) attributes before opset 11, inputs
    from it on, `axes` from 18, mode 'wrap' from 19. What te cannot pad (a reflection past
    the axis's ends, a crop of every element) is refused with te's reason, before the
    builder would raise it as an error."""
    mode = only(attrs, "mode", PAD_MODES, "constant")
    x = ins[0]
    n = len(x.shape)
    if opset < 11:
        pads, value = list(attrs["pads"]), attrs.get("value", 0.0)
    else:
        pads = [int(p) for p in const(ins[1], "pads")]
        value = scalar(ins[2], "constant_value") if len(ins) > 2 and ins[2] else 0.0
        if len(ins) > 3 and ins[3] is not None:
            pads = _pads_of_axes(pads, distinct_axes(const(ins[3], "axes"), n), n)
    if len(pads) != 2 * n:
        raise Refused("pads", f"pads must hold 2 values per padded axis ({2 * n}), got "
                              f"{len(pads)}")
    try:
        pad_kept_sizes(x.shape, pads[:n], pads[n:], mode)
    except ShapeError as e:
        raise Refused("pads", str(e)) from None
    return [transform.pad(x, pads[:n], pads[n:], value, name=outs[0], mode=mode)]


def _pads_of_axes(pads: list, axes: list, n: int) -> list:
    """Pads given for some axes (begins, then ends, in the order of `axes`) as pads of all
    n axes, zero on the others."""
    if len(pads) != 2 * len(axes):
        raise Refused("pads", f"pads must hold 2 values per axis in axes {axes}, got "
                              f"{len(pads)}")
    full = [0] * (2 * n)
    for k, a in enumerate(axes):
        full[a], full[n + a] = pads[k], pads[len(axes) + k]
    return full


def _slice(ins, attrs, opset, outs):
    x = ins[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = const(ins[1], "starts"), const(ins[2], "ends")
        axes = const(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = const(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    big = np.iinfo(np.int64).max // 2  # ONNX writes "to the end" as INT64_MAX
    clamp = [int(max(min(v, big), -big)) for v in ends]
    n = len(x.shape)
    for k, a in enumerate(range(len(starts)) if axes is None else axes):
        step = 1 if steps is None else int(steps[k])
        if step and not isinstance(x.shape[int(a) % n], int):
            continue
        if step and not range(*slice(int(starts[k]), clamp[k], step).indices(
                x.shape[int(a) % n])):
            raise Refused("starts", f"the slice {int(starts[k])}:{int(ends[k])}:{step} of "
                                    f"axis {int(a) % n} is empty (zero-size tensors are not "
                                    f"supported)")
    return [transform.slice(x, [int(v) for v in starts], clamp, axes, steps, name=outs[0])]


def _split(ins, attrs, opset, outs):
    x = ins[0]
    axis = attrs.get("axis", 0) % len(x.shape)
    sizes = attrs.get("split") if opset < 13 else (
        [int(s) for s in const(ins[1], "split")] if len(ins) > 1 and ins[1] is not None
        else None)
    if sizes is None:
        parts = attrs.get("num_outputs", len(outs))
        size = -(-x.shape[axis] // parts)
        sizes = [min(size, x.shape[axis] - k * size) for k in range(parts)]
    if min(sizes) <= 0:
        raise Refused("split", f"sizes {list(sizes)} give an empty piece (zero-size tensors "
                               f"are not supported)")
    return list(transform.split(x, sizes, axis, name=outs[0], output_names=outs))


def _expand(ins, attrs, opset, outs):
    return [transform.expand(ins[0], [int(d) for d in const(ins[1], "shape")], name=outs[0])]


def _gather(ins, attrs, opset, outs):
    data, indices = ins[0], ins[1]
    axis = attrs.get("axis", 0) % len(data.shape)
    if len(indices.shape) == 0:  # one index: take it as a 1-element list, drop the axis
        one = transform.reshape(indices, (1,), name=f"{outs[0]}/index")
        y = transform.take(data, one, axis, name=f"{outs[0]}/take")
        return [transform.reshape(y, data.shape[:axis] + data.shape[axis + 1:],
                                  name=outs[0])]
    return [transform.take(data, indices, axis, name=outs[0])]


def _resize(ins, attrs, opset, outs):
    x = ins[0]
    method = only(attrs, "mode", ("nearest", "linear", "cubic"), "nearest")
    antialias = bool(only(attrs, "antialias", (0, 1), 0))
    if opset < 11:  # opset 10: Upsample's coordinates
        coordinate, nearest = "asymmetric", "floor"
        scales, sizes = const(ins[1], "scales"), None
    else:
        coordinate = only(attrs, "coordinate_transformation_mode",
                          ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                           "half_pixel_symmetric", "tf_crop_and_resize"), "half_pixel")
        nearest = only(attrs, "nearest_mode", ("round_prefer_floor", "round_prefer_ceil",
                                               "floor", "ceil"), "round_prefer_floor")
        given = [v for v in ins[2:4] if v is not None and (not v.is_constant or v.data.size)]
        if len(given) != 1:
            raise Refused("scales", "exactly one of scales and sizes must be given")
        by_sizes = len(ins) > 3 and given[0] is ins[3]
        sizes = const(ins[3], "sizes") if by_sizes else None
        scales = None if by_sizes else const(ins[2], "scales")
    shape, scales = _resize_shape(x.shape, attrs, scales, sizes)
    roi = _resize_roi(x.shape, attrs, ins[1]) if coordinate == "tf_crop_and_resize" else None
    if antialias and method != "nearest":
        # te's resize refuses these at compile; refused here, at import
        terms = filter_terms(method, [s for s, d, o in zip(scales, x.shape, shape)
                                      if s != 1.0 or d != o])
        if terms > MAX_FILTER_TERMS:
            raise Refused("antialias", f"downsampling by scales {list(scales)} reads {terms} "
                                       f"input elements per output (at most "
                                       f"{MAX_FILTER_TERMS})")
    return [transform.resize(x, shape, scales, method, coordinate, nearest, name=outs[0],
                             cubic_a=float(attrs.get("cubic_coeff_a", -0.75)),
                             exclude_outside=bool(attrs.get("exclude_outside", 0)), roi=roi,
                             extrapolation_value=float(attrs.get("extrapolation_value", 0.0)),
                             antialias=antialias)]


def _resize_axes(attrs, rank: int) -> list:
    """Resize's `axes` (every axis by default), in their given order."""
    return distinct_axes(attrs.get("axes", range(rank)), rank)


def _resize_roi(in_shape, attrs, roi_input) -> list:
    """tf_crop_and_resize's region as (start, end) per axis: the roi input holds the starts
    then the ends of `axes` (every axis by default); the others keep (0, 1)."""
    rank = len(in_shape)
    axes = _resize_axes(attrs, rank)
    data = [float(v) for v in np.asarray(const(roi_input, "roi")).reshape(-1)]
    if len(data) != 2 * len(axes):
        raise Refused("roi", f"roi must hold {2 * len(axes)} values (the starts, then the ends "
                             f"of axes {axes}), got {len(data)}")
    roi = [(0.0, 1.0)] * rank
    for k, a in enumerate(axes):
        roi[a] = (data[k], data[len(axes) + k])
    return roi


def _upsample(ins, attrs, opset, outs):
    """Upsample (opsets 7 to 9; Resize since 10): scales as an attribute before opset 9,
    an input from it; Resize-10's coordinates (asymmetric, nearest rounds down)."""
    x = ins[0]
    method = only(attrs, "mode", ("nearest", "linear"), "nearest")
    if opset < 9:
        scales = attrs.get("scales")
        if scales is None:
            raise Refused("scales", "Upsample before opset 9 needs the scales attribute")
    else:
        scales = const(ins[1], "scales")
    shape, scales = _resize_shape(x.shape, {}, [float(s) for s in scales], None)
    return [transform.resize(x, shape, scales, method, "asymmetric", "floor", name=outs[0])]


def _resize_shape(in_shape, attrs, scales, sizes) -> tuple:
    """(output shape, scales) over every axis from the scales or sizes given for `axes`
    (every axis by default; the others keep their size and a scale of 1), with sizes
    fitted to one scale by keep_aspect_ratio_policy as ONNX's reference does: the least
    ('not_larger') or greatest ('not_smaller') of the axes' size ratios, each output size
    that scale times the input size rounded half up."""
    rank = len(in_shape)
    axes = _resize_axes(attrs, rank)
    given = [float(v) for v in (sizes if sizes is not None else scales)]
    if len(given) != len(axes):
        raise Refused("axes", f"{'sizes' if sizes is not None else 'scales'} has {len(given)} "
                              f"entries for axes {axes} of a rank-{rank} input")
    policy = only(attrs, "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"),
                  "stretch")
    shape, full = list(in_shape), [1.0] * rank
    if sizes is None:
        for a, s in zip(axes, given):
            full[a], shape[a] = s, int(np.floor(in_shape[a] * s))
        return shape, full
    ratios = [s / in_shape[a] for a, s in zip(axes, given)]
    if policy != "stretch":
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        given = [int(scale * in_shape[a] + 0.5) for a in axes]
        ratios = [scale] * len(axes)
    for a, s, r in zip(axes, given, ratios):
        shape[a], full[a] = int(s), r
    return shape, full


def _constant(ins, attrs, opset, outs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            data = np.asarray(attrs[key], dtype=np.float32 if "float" in key else
                              np.int64 if "int" in key else None)
            return [builder.constant(data, name=outs[0])]
    raise Refused("value", "Constant needs value, value_float(s) or value_int(s)")


def _constant_of_shape(ins, attrs, opset, outs):
    shape = [int(d) for d in const(ins[0], "input")]
    value = attrs.get("value", np.zeros(1, np.float32))
    return [builder.constant(np.full(shape, value.reshape(-1)[0], value.dtype), name=outs[0])]


def _shape(ins, attrs, opset, outs):
    dims = ins[0].shape[attrs.get("start", 0):attrs.get("end", len(ins[0].shape))]
    if any(not isinstance(d, int) for d in dims):
        raise Refused("", "Shape of a symbolic dim is not supported")
    return [builder.constant(np.asarray(dims, np.int64), name=outs[0])]


def _reduce(op: str, new_opset: int):
    def fn(ins, attrs, opset, outs):
        x = ins[0]
        axes = _axes(ins, attrs, opset, new_opset)
        if axes is None or len(axes) == 0:
            if attrs.get("noop_with_empty_axes", 0):
                return [apply("identity", [x], {}, outs[0])]
            axes = None
        keep = bool(attrs.get("keepdims", 1))
        if not keep and len(axes if axes is not None else x.shape) == len(x.shape):
            # a 0-d result: te declares no 0-d tensors, so keep the dims, then reshape
            r = builder.REDUCE_FUNCTIONS[op](x, axes, True, name=f"{outs[0]}/keep")
            return [transform.reshape(r, (), name=outs[0])]
        return [builder.REDUCE_FUNCTIONS[op](x, axes, keep, name=outs[0])]
    return Converter(fn, frozenset(("axes", "keepdims", "noop_with_empty_axes")))


def _arg(op: str):
    def fn(ins, attrs, opset, outs):
        x = ins[0]
        axis = attrs.get("axis", 0) % len(x.shape)
        kw = {"axis": axis, "keepdims": int(attrs.get("keepdims", 1))}
        if not attrs.get("select_last_index", 0):
            return [apply(op, [x], kw, outs[0])]
        # the last extreme index: the first one of the reversed axis, counted from the end
        size = x.shape[axis]
        flipped = transform.slice(x, [-1], [-size - 1], [axis], [-1], name=f"{outs[0]}/rev")
        first = apply(op, [flipped], kw, f"{outs[0]}/first")
        return [apply("subtract", [np.asarray(size - 1, np.int64), first], {}, outs[0])]
    return Converter(fn, frozenset(("axis", "keepdims", "select_last_index")))


LAYOUT_CONVERTERS = {
    "Gather": row(_gather, "axis"),
    "Resize": row(_resize, "mode", "coordinate_transformation_mode", "nearest_mode",
                  "cubic_coeff_a", "exclude_outside", "extrapolation_value", "antialias",
                  "axes", "keep_aspect_ratio_policy"),
    "Upsample": row(_upsample, "mode", "scales"),
    "Tile": row(lambda ins, a, o, outs: [transform.tile(
        ins[0], [int(r) for r in const(ins[1], "repeats")], name=outs[0])]),
    "Reshape": row(_reshape, "allowzero"),
    "Flatten": row(_flatten, "axis"),
    "Squeeze": row(_squeeze, "axes"),
    "Unsqueeze": row(_unsqueeze, "axes"),
    "Transpose": row(_transpose, "perm"),
    "Concat": row(_concat, "axis"),
    "Pad": row(_pad, "mode", "pads", "value"),
    "Slice": row(_slice, "starts", "ends", "axes"),
    "Split": row(_split, "axis", "split", "num_outputs"),
    "Expand": row(_expand),
    "Constant": row(_constant, "value", "value_float", "value_floats", "value_int",
                    "value_ints"),
    "ConstantOfShape": row(_constant_of_shape, "value"),
    "Shape": row(_shape, "start", "end"),
    **{onnx_op: _reduce(op, 18 if onnx_op != "ReduceSum" else 13) for onnx_op, op in (
        ("ReduceSum", "reduce_sum"), ("ReduceMean", "reduce_mean"), ("ReduceMax", "reduce_max"),
        ("ReduceMin", "reduce_min"), ("ReduceProd", "reduce_prod"), ("ReduceL1", "reduce_l1"),
        ("ReduceL2", "reduce_l2"), ("ReduceSumSquare", "reduce_sum_square"),
        ("ReduceLogSum", "reduce_log_sum"), ("ReduceLogSumExp", "reduce_log_sum_exp"))},
    "ArgMax": _arg("argmax"),
    "ArgMin": _arg("argmin"),
}
