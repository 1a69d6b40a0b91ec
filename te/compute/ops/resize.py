"""Resizing by nearest-neighbour, (multi-)linear or (multi-)cubic interpolation, ONNX
Resize's semantics.

Takes a te.Tensor, the output shape and per-axis scales, and the coordinate and rounding
modes; gives one te.compute stage that maps each output index to input coordinates and
reads (nearest) or blends (linear: the 2^k corners of the k resized axes; cubic: 4^k taps,
Keys' cubic convolution with coefficient a) the input.
Imports te.compute (api, tensor), te.errors and the sibling _util only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_tensor, fmt_shape, static_dim

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                    "half_pixel_symmetric", "tf_crop_and_resize")
METHODS = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(o, size_in: int, size_out: int, scale: float, mode: str, roi=(0.0, 1.0)):
    """The input coordinate (float32) of output index o along one axis. As ONNX's
    reference, the resized length is size_in * scale, unrounded (it is size_out when the
    model gave sizes), and the coordinate divides by the scale: multiplying by its
    rounded reciprocal moves exact halves (3.5 / 3.5) off the tie nearest rounding breaks.
    'tf_crop_and_resize' maps the output onto the region `roi` (start, end as fractions
    of the input's last index)."""
    x = o.astype("float32")
    length = size_in * scale
    if mode == "tf_crop_and_resize":
        start, end = (float(r) * (size_in - 1) for r in roi)
        if length == 1:
            return x * 0.0 + (start + (end - start) / 2)
        return x * ((end - start) / (length - 1)) + start
    if mode == "asymmetric":
        return x / scale
    if mode == "align_corners":
        return x * ((size_in - 1) / (length - 1)) if length != 1 else x * 0.0
    if mode == "pytorch_half_pixel" and length <= 1:
        return x * 0.0
    if mode == "half_pixel_symmetric":  # the rounding of the length split to both ends
        return (x + 0.5) / scale - 0.5 + size_in / 2 * (1 - size_out / length)
    return (x + 0.5) / scale - 0.5


def _clamp(i, size: int):
    return api.min(api.max(i, 0), size - 1)


def _nearest(c, mode: str):
    if mode == "round_prefer_floor":
        return api.ceil(c - 0.5)
    if mode == "round_prefer_ceil":
        return api.floor(c + 0.5)
    return api.floor(c) if mode == "floor" else api.ceil(c)


def _cubic_weights(t, a: float) -> list:
    """Keys' cubic convolution weights of the taps at distances t + 1, t, 1 - t, 2 - t
    from a coordinate t past its floor (ONNX's cubic_coeff_a = a)."""
    def near(d):    # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1.0

    def far(d):     # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def resize(x: Tensor, out_shape, scales, method: str = "nearest",
           coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           name: str = "T_resize", cubic_a: float = -0.75,
           exclude_outside: bool = False, roi=None,
           extrapolation_value: float = 0.0) -> Tensor:
    """x resized to `out_shape` (ints); scales[k] = out / in as the model gives it (it
    enters the coordinate map, as in ONNX). method 'nearest', 'linear' or 'cubic'
    (coefficient `cubic_a`; taps past the edge repeat the edge value, or with
    `exclude_outside` weigh nothing and the others are renormalized). coordinate_mode
    'tf_crop_and_resize' reads the region `roi` ((start, end) per axis, fractions of the
    input's extent) and gives `extrapolation_value` where a coordinate leaves the input."""
    who = "resize"
    check_tensor(x, who, "x")
    dims = [static_dim(d) for d in x.shape]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: x must have a constant shape, got {fmt_shape(x.shape)}")
    if len(out_shape) != x.ndim or len(scales) != x.ndim:
        raise ShapeError(f"{who}: out_shape and scales must have {x.ndim} entries, got "
                         f"{tuple(out_shape)} and {tuple(scales)}")
    for param, value, allowed in (("method", method, METHODS),
                                  ("coordinate_mode", coordinate_mode, COORDINATE_MODES),
                                  ("nearest_mode", nearest_mode, NEAREST_MODES)):
        if value not in allowed:
            raise ShapeError(f"{who}: {param} must be one of {list(allowed)}, got {value!r}")
    crop = coordinate_mode == "tf_crop_and_resize"
    roi = [tuple(r) for r in roi] if roi is not None else [(0.0, 1.0)] * x.ndim
    if len(roi) != x.ndim:
        raise ShapeError(f"{who}: roi must have {x.ndim} (start, end) pairs, got {len(roi)}")
    axes = [k for k in range(x.ndim) if out_shape[k] != dims[k] or scales[k] != 1.0
            or (crop and roi[k] != (0.0, 1.0))]

    def coord(i, k):
        return _source(i, dims[k], out_shape[k], scales[k], coordinate_mode, roi[k])

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

    def cubic(*i):
        taps, weights = {}, {}
        for k in axes:
            c = coord(i[k], k)
            low = api.floor(c)
            ws = _cubic_weights(c - low, cubic_a)
            index = [low.astype("int32") + (d - 1) for d in range(4)]
            if exclude_outside:     # taps outside the input weigh nothing
                ws = [api.if_then_else(api.all(j >= 0, j < dims[k]), w, 0.0)
                      for j, w in zip(index, ws)]
                total = ws[0] + ws[1] + ws[2] + ws[3]
                ws = [w / total for w in ws]
            taps[k] = [_clamp(j, dims[k]) for j in index]
            weights[k] = ws
        total = None
        for combo in range(4 ** len(axes)):
            index, w = list(i), None
            for n, k in enumerate(axes):
                d = combo // 4 ** n % 4
                index[k] = taps[k][d]
                w = weights[k][d] if w is None else w * weights[k][d]
            term = x(*index).astype("float32") * w
            total = term if total is None else total + term
        return total.astype(x.dtype)
    fcompute = {"linear": linear, "cubic": cubic}.get(method, nearest) if axes else nearest
    if crop and axes:
        interpolate = fcompute

        def fcompute(*i):    # outside the input on any axis: the extrapolation value
            inside = api.all(*[api.all(coord(i[k], k) >= 0.0,
                                       coord(i[k], k) <= float(dims[k] - 1)) for k in axes])
            return api.if_then_else(inside, interpolate(*i),
                                    api.const(extrapolation_value, x.dtype))
    return api.compute(tuple(out_shape), fcompute, name=name, tag="injective")
