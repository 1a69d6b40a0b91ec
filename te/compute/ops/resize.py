"""Resizing by nearest-neighbour, (multi-)linear or (multi-)cubic interpolation, ONNX
Resize's semantics.

Takes a te.Tensor, the output shape and per-axis scales, and the coordinate and rounding
modes; gives one te.compute stage that maps each output index to input coordinates and
reads (nearest) or blends (linear: the 2^k corners of the k resized axes; cubic: 4^k taps,
Keys' cubic convolution with coefficient a) the input.
Imports te.compute (api, tensor), te.dtype, te.errors and the sibling _util only.
"""
from __future__ import annotations

import itertools
import math

from ... import dtype as dt
from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_tensor, fmt_shape, static_dim

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                    "half_pixel_symmetric", "tf_crop_and_resize")
METHODS = ("nearest", "linear", "cubic")
# input elements one antialiased output may read: each is a term of the output's
# expression (1024 compile in about half a minute)
MAX_FILTER_TERMS = 1024
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


def _tap_count(method: str, scale: float | None) -> int:
    """Input elements one output reads along an axis: the filter's support (1 linear, 2
    cubic) widened by 1 / scale where antialiasing a downsampling (scale < 1), each side."""
    support = 2.0 if method == "cubic" else 1.0
    return 2 * math.ceil(support / (scale if scale is not None else 1.0))


def filter_terms(method: str, scales) -> int:
    """Input elements one output of an antialiased linear or cubic resize reads: the
    product over the resized axes (their `scales`) of _tap_count. resize refuses more than
    MAX_FILTER_TERMS; importers check the same number first."""
    return math.prod(_tap_count(method, min(float(s), 1.0)) for s in scales)


def _filter_weight(d, method: str, a: float):
    """The filter's weight at distance d >= 0: the triangle (linear) or Keys' cubic."""
    if method == "linear":
        return api.max(1.0 - d, 0.0)
    near = ((a + 2) * d - (a + 3)) * d * d + 1.0
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return api.if_then_else(d <= 1.0, near, api.if_then_else(d < 2.0, far, 0.0))


def _saturate(value, dtype: str):
    """A filtered float `value` as `dtype`: integers rounded (half to even) and clipped to
    the type's range, as ONNX's reference saturates, since cubic weights overshoot the
    inputs' range (a uint8 255 next to a 0 gives about 279)."""
    if not dt.is_integral(dtype):
        return value.astype(dtype)
    lo, hi = dt.int_range(dtype)
    return api.min(api.max(api.round(value), float(lo)), float(hi)).astype(dtype)


def _balanced_sum(terms: list):
    """The sum of `terms` as a balanced tree: a chain of a thousand adds is deeper than
    the recursion of the passes that walk expressions."""
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def _filter_tables(coord, size: int, out: int, method: str, scale, a: float,
                   exclude_outside: bool, name: str) -> tuple:
    """(index table, weight table, taps n) of one resized axis: for each output index o
    and tap j, the input index (around floor(coord(o)), clamped to the edges, which
    repeats the edge values) and its weight. `scale` None: cubic's 4 taps with Keys'
    weights; else (antialiasing, scale <= 1) the filter stretched by 1 / scale over
    _tap_count taps, its weights normalized to sum to 1 as ONNX's reference does.
    exclude_outside: taps outside the input weigh nothing, the rest renormalized. Tables
    (attrs 'table'), computed once per output index rather than in every output element:
    spelled out there, 64 taps made an expression that took minutes to build."""
    n = _tap_count(method, scale)

    def tap(o, j):     # (unclamped input index, raw weight) of tap j (an int or a var)
        c = coord(o)
        low = api.floor(c)
        index = low.astype("int32") + j + (1 - n // 2)
        offset = (low - c) + (j + (1 - n // 2)).astype("float32") if not isinstance(j, int) \
            else (low - c) + float(j + 1 - n // 2)
        w = _filter_weight(api.abs(offset) * (scale if scale is not None else 1.0), method, a)
        if exclude_outside:
            w = api.if_then_else(api.all(index >= 0, index < size), w, 0.0)
        return index, w

    def weight(o, j):
        w = tap(o, j)[1]
        if scale is None and not exclude_outside:
            return w    # Keys' weights sum to 1
        total = tap(o, 0)[1]
        for jj in range(1, n):
            total = total + tap(o, jj)[1]
        return w / total
    attrs = {"table": True}
    index = api.compute((out, n), lambda o, j: _clamp(tap(o, j)[0], size),
                        name=f"{name}_taps", tag="injective", attrs=attrs)
    weights = api.compute((out, n), weight, name=f"{name}_weights", tag="injective",
                          attrs=attrs)
    return index, weights, n


def resize(x: Tensor, out_shape, scales, method: str = "nearest",
           coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           name: str = "T_resize", cubic_a: float = -0.75,
           exclude_outside: bool = False, roi=None,
           extrapolation_value: float = 0.0, antialias: bool = False) -> Tensor:
    """x resized to `out_shape` (ints); scales[k] = out / in as the model gives it (it
    enters the coordinate map, as in ONNX). method 'nearest', 'linear' or 'cubic'
    (coefficient `cubic_a`; taps past the edge repeat the edge value, or with
    `exclude_outside` weigh nothing and the others are renormalized). coordinate_mode
    'tf_crop_and_resize' reads the region `roi` ((start, end) per axis, fractions of the
    input's extent) and gives `extrapolation_value` where a coordinate leaves the input.
    `antialias` (linear, cubic): a downsampled axis reads the filter widened by 1 / scale,
    as ONNX's antialias (at most MAX_FILTER_TERMS input elements per output)."""
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

    def filtered(*i):
        terms = []
        for combo in itertools.product(*(range(tables[k][2]) for k in axes)):
            index, w = list(i), None
            for j, k in zip(combo, axes):
                taps, weights, _ = tables[k]
                index[k] = taps[i[k], j]
                w = weights[i[k], j] if w is None else w * weights[i[k], j]
            terms.append(x(*index).astype("float32") * w)
        return _saturate(_balanced_sum(terms), x.dtype)
    filters = method == "cubic" or (antialias and method == "linear")
    if antialias and filters:
        terms = filter_terms(method, [scales[k] for k in axes])
        if terms > MAX_FILTER_TERMS:
            raise ShapeError(f"{who}: antialiased {method} resizing by scales "
                             f"{tuple(scales)} reads {terms} input elements per output "
                             f"(at most {MAX_FILTER_TERMS})")
    tables = {k: _filter_tables(lambda o, k=k: coord(o, k), dims[k], out_shape[k], method,
                                min(scales[k], 1.0) if antialias else None, cubic_a,
                                exclude_outside, f"{name}_{k}")
              for k in (axes if filters else ())}
    fcompute = nearest if not axes else filtered if filters else \
        linear if method == "linear" else nearest
    if crop and axes:
        interpolate = fcompute

        def fcompute(*i):    # outside the input on any axis: the extrapolation value
            inside = api.all(*[api.all(coord(i[k], k) >= 0.0,
                                       coord(i[k], k) <= float(dims[k] - 1)) for k in axes])
            return api.if_then_else(inside, interpolate(*i),
                                    api.const(extrapolation_value, x.dtype))
    return api.compute(tuple(out_shape), fcompute, name=name, tag="injective")
