"""Resizing by nearest-neighbour or (multi-)linear interpolation, ONNX Resize's semantics.

Takes a te.Tensor, the output shape and per-axis scales, and the coordinate and rounding
modes; gives one te.compute stage that maps each output index to input coordinates and
reads (nearest) or blends (linear, the 2^k corners of the resized axes) the input.
Imports te.compute (api, tensor), te.errors and the sibling _util only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_tensor, fmt_shape, static_dim

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(o, size_in: int, size_out: int, scale: float, mode: str):
    """The input coordinate (float32) of output index o along one axis. As ONNX's
    reference, the resized length is size_in * scale, unrounded (it is size_out when the
    model gave sizes), and the coordinate divides by the scale: multiplying by its
    rounded reciprocal moves exact halves (3.5 / 3.5) off the tie nearest rounding breaks."""
    x = o.astype("float32")
    length = size_in * scale
    if mode == "asymmetric":
        return x / scale
    if mode == "align_corners":
        return x * ((size_in - 1) / (length - 1)) if length != 1 else x * 0.0
    if mode == "pytorch_half_pixel" and length <= 1:
        return x * 0.0
    return (x + 0.5) / scale - 0.5


def _clamp(i, size: int):
    return api.min(api.max(i, 0), size - 1)


def _nearest(c, mode: str):
    if mode == "round_prefer_floor":
        return api.ceil(c - 0.5)
    if mode == "round_prefer_ceil":
        return api.floor(c + 0.5)
    return api.floor(c) if mode == "floor" else api.ceil(c)


def resize(x: Tensor, out_shape, scales, method: str = "nearest",
           coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           name: str = "T_resize") -> Tensor:
    """x resized to `out_shape` (ints); scales[k] = out / in as the model gives it (it
    enters the coordinate map, as in ONNX). method 'nearest' or 'linear'."""
    who = "resize"
    check_tensor(x, who, "x")
    dims = [static_dim(d) for d in x.shape]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: x must have a constant shape, got {fmt_shape(x.shape)}")
    if len(out_shape) != x.ndim or len(scales) != x.ndim:
        raise ShapeError(f"{who}: out_shape and scales must have {x.ndim} entries, got "
                         f"{tuple(out_shape)} and {tuple(scales)}")
    for param, value, allowed in (("method", method, ("nearest", "linear")),
                                  ("coordinate_mode", coordinate_mode, COORDINATE_MODES),
                                  ("nearest_mode", nearest_mode, NEAREST_MODES)):
        if value not in allowed:
            raise ShapeError(f"{who}: {param} must be one of {list(allowed)}, got {value!r}")
    axes = [k for k in range(x.ndim) if out_shape[k] != dims[k] or scales[k] != 1.0]

    def coord(i, k):
        return _source(i, dims[k], out_shape[k], scales[k], coordinate_mode)

    def nearest(*i):
        index = list(i)
        for k in axes:
            index[k] = _clamp(_nearest(coord(i[k], k), nearest_mode).astype("int32"), dims[k])
        return x(*index)

    def linear(*i):
        lows, highs, weights = {}, {}, {}
        for k in axes:
            c = api.min(api.max(coord(i[k], k), 0.0), float(dims[k] - 1))
            low = api.floor(c)
            lows[k] = low.astype("int32")
            highs[k] = _clamp(lows[k] + 1, dims[k])
            weights[k] = c - low
        total = None
        for corner in range(1 << len(axes)):
            index, w = list(i), None
            for bit, k in enumerate(axes):
                high = corner >> bit & 1
                index[k] = highs[k] if high else lows[k]
                wk = weights[k] if high else 1.0 - weights[k]
                w = wk if w is None else w * wk
            term = x(*index).astype("float32") * w
            total = term if total is None else total + term
        return total.astype(x.dtype)
    fcompute = linear if method == "linear" and axes else nearest
    return api.compute(tuple(out_shape), fcompute, name=name, tag="injective")
