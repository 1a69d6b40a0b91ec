"""Pooling over any number of spatial axes (N, C, *spatial): max and average pools (the
3-d ones of ONNX; the 2-d pools keep their own tuned forms in nn and pool_phased), the
flat index of each window's maximum (ONNX MaxPool's Indices output, any rank) and its
inverse, max_unpool.

Window tap k along a spatial axis of output o reads padded index o * stride + k * dilation,
as in nn's 2-d pools, whose checks and tap counts these share. Imports te.compute (api,
tensor), te.errors and the sibling nn, transform and _util only.
"""
from __future__ import annotations

import math

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_float, check_tensor, fmt_shape, int_tuple, pad_tuple_nd, static_dim
from .nn import _check_dilated_taps, _pool_count, _tap, _window
from .transform import pad

# the reduction stages' tags, which te.autotune.schedule_pool_nd looks for
ND_MAX_TAG, ND_SUM_TAG, ND_INDEX_TAG = "pool_nd_max", "pool_nd_sum", "pool_nd_index"


def _pool_nd_args(data: Tensor, kernel, stride, padding, dilation, who: str) -> tuple:
    """(kernel, strides, dilations, pads as (begins..., ends...), output shape) of a pool
    over data's spatial axes (all but the first two)."""
    check_tensor(data, who, "data")
    r = data.ndim - 2
    if r < 1:
        raise ShapeError(f"{who}: data must be (N, C, *spatial) with a spatial axis, got "
                         f"shape {fmt_shape(data.shape)}")
    kernel = int_tuple(kernel, r, who, "kernel", minimum=1)
    strides = int_tuple(stride, r, who, "stride", minimum=1)
    dil = int_tuple(dilation, r, who, "dilation", minimum=1)
    pads = pad_tuple_nd(padding, r, who)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    if any(pads[a] >= e or pads[r + a] >= e for a, e in enumerate(extents)):
        dilated = "" if set(dil) == {1} else f" with dilation {dil}"
        raise ShapeError(f"{who}: padding must be smaller than the kernel on each side (a "
                         f"window of only padding has no value), got padding {padding!r} "
                         f"for kernel {kernel}{dilated}")
    out = []
    for a in range(r):
        size = data.shape[2 + a]
        o = _window(size, kernel[a], strides[a], dil[a], pads[a], pads[r + a], who,
                    f"kernel axis {a}")
        if dil[a] > 1:
            _check_dilated_taps(size, o, kernel[a], strides[a], dil[a], pads[a], who,
                                f"spatial axis {a}")
        out.append(o)
    return kernel, strides, dil, pads, tuple(data.shape[:2]) + tuple(out)


def _padded(data: Tensor, pads: tuple, value, name: str) -> Tensor:
    r = data.ndim - 2
    if not any(pads):
        return data
    return pad(data, (0, 0) + pads[:r], (0, 0) + pads[r:], value, name=name)


def _window_taps(kernel) -> list:
    names = ("rd", "ry", "rx")[-len(kernel):] if len(kernel) <= 3 else [
        f"r{a}" for a in range(len(kernel))]
    return [api.reduce_axis((0, k), n) for k, n in zip(kernel, names)]


def _reads(i, taps, strides, dil) -> list:
    """The padded index of output i's window taps (i: the output index, N and C first)."""
    return list(i[:2]) + [o * s + _tap(t, d) for o, t, s, d in zip(i[2:], taps, strides,
                                                                    dil)]


def max_pool_nd(data: Tensor, kernel, stride=1, padding=0, dilation=1,
                name: str = "T_max_pool_nd") -> Tensor:
    """Max pooling over (N, C, *spatial); padding reads as the dtype's lowest value (stage
    'pad_temp'); padding is an int, one per axis, or begins then ends (ONNX's order)."""
    kernel, strides, dil, pads, shape = _pool_nd_args(data, kernel, stride, padding,
                                                      dilation, "max_pool_nd")
    padded = _padded(data, pads, api.min_value(data.dtype), "pad_temp")
    taps = _window_taps(kernel)
    return api.compute(shape, lambda *i: api.max(padded(*_reads(i, taps, strides, dil)),
                                                 axis=taps), name=name, tag=ND_MAX_TAG)


def avg_pool_nd(data: Tensor, kernel, stride=1, padding=0, count_include_pad: bool = False,
                dilation=1, name: str = "T_avg_pool_nd") -> Tensor:
    """Average pooling over (N, C, *spatial) (floats), windows as max_pool_nd's; the divisor
    is the number of taps inside the input, or all of them with count_include_pad. Stages
    'pad_temp' (zeros), 'pool_sum' and the division."""
    who = "avg_pool_nd"
    kernel, strides, dil, pads, shape = _pool_nd_args(data, kernel, stride, padding,
                                                      dilation, who)
    check_float(data, who, "data")
    padded = _padded(data, pads, 0, "pad_temp")
    taps = _window_taps(kernel)
    total = api.compute(shape, lambda *i: api.sum(padded(*_reads(i, taps, strides, dil)),
                                                  axis=taps), name="pool_sum", tag=ND_SUM_TAG)
    r = len(kernel)

    def fcompute(*i):
        if count_include_pad or not any(pads):
            return total(*i) / float(math.prod(kernel))
        area = None
        for a in range(r):
            n = _pool_count(i[2 + a], strides[a], kernel[a], dil[a], pads[a],
                            data.shape[2 + a])
            area = n if area is None else area * n
        return total(*i) / area.astype(data.dtype)
    return api.compute(shape, fcompute, name=name, tag="elemwise")


def _first_max():
    """(index, value) pairs combined to the larger value, on a tie the smaller index: the
    first maximum in window order (the index grows with each tap's position)."""
    def combine(x, y):
        take_x = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
        return (api.if_then_else(take_x, x[0], y[0]), api.if_then_else(take_x, x[1], y[1]))

    def identity(index_dtype, value_dtype):
        return api.max_value(index_dtype), api.min_value(value_dtype)
    return api.comm_reducer(combine, identity, name="first_max")


def max_pool_indices(data: Tensor, kernel, stride=1, padding=0, dilation=1,
                     storage_order: int = 0, name: str = "T_max_pool_indices") -> Tensor:
    """ONNX MaxPool's Indices: the int64 flat index in data of each window's maximum, the
    first in window order on a tie; storage_order 0 row-major ((n * C + c) * H + h) * W + w,
    1 column-major within the plane ((n * C + c) * H * W + h + w * H). Padding never wins:
    a padding tap reads the lowest value at the largest index. Stage '<name>_red' reduces
    (index within the plane, value) pairs; the result converts the index."""
    who = "max_pool_indices"
    kernel, strides, dil, pads, shape = _pool_nd_args(data, kernel, stride, padding,
                                                      dilation, who)
    if storage_order not in (0, 1):
        raise ShapeError(f"{who}: storage_order must be 0 or 1, got {storage_order!r}")
    sizes = [static_dim(s) for s in data.shape]
    if any(s is None for s in sizes[1:]):
        raise ShapeError(f"{who}: data must have constant channels and spatial sizes (the "
                         f"index arithmetic's), got {fmt_shape(data.shape)}")
    spatial = sizes[2:]
    plane = math.prod(spatial)
    if plane >= 2 ** 31:
        raise ShapeError(f"{who}: data's planes are too large for the index arithmetic "
                         f"(2^31 elements or more), got shape {fmt_shape(data.shape)}")
    r = len(kernel)
    taps = _window_taps(kernel)
    padded = _padded(data, pads, api.min_value(data.dtype), "pad_temp")
    reducer = _first_max()

    def reduce(*i):
        read = _reads(i, taps, strides, dil)
        flat, inside = None, []
        for a in range(r):
            pos = read[2 + a] - pads[a] if pads[a] else read[2 + a]
            if pads[a]:
                inside.append(pos >= 0)
            if pads[r + a]:
                inside.append(pos < spatial[a])
            flat = pos if flat is None else flat * spatial[a] + pos
        if inside:
            flat = api.if_then_else(api.all(*inside), flat, api.max_value(flat.dtype))
        return reducer((flat, padded(*read)), axis=taps)
    idx, _value = api.compute(shape, reduce, name=f"{name}_red", tag=ND_INDEX_TAG)

    def fcompute(*i):
        within = idx(*i)
        if storage_order == 1 and r > 1:   # a row-major position -> column-major
            within = _column_major(within, spatial)
        base = (i[0].astype("int64") * sizes[1] + i[1].astype("int64")) * plane
        return base + within.astype("int64")
    return api.compute(shape, fcompute, name=name, tag="injective")


def _column_major(flat, spatial: list):
    """A row-major position within a plane of these spatial sizes, column-major."""
    coords, rest = [], flat
    for size in reversed(spatial[1:]):
        coords.append(api.indexmod(rest, size))
        rest = api.indexdiv(rest, size)
    coords.append(rest)
    coords.reverse()
    out, step = None, 1
    for c, size in zip(coords, spatial):
        term = c * step if step > 1 else c
        out = term if out is None else out + term
        step *= size
    return out

