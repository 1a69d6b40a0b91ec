"""max / average pooling (NCHW) in the form that te.autotune.schedule_pool2d schedules: each
output row a vector of consecutive outputs, whose window taps are vector loads at the
stride along x (the LLVM codegen loads strides 2 to MAX_DENSE_STRIDE as dense loads and a
shuffle; larger strides would be gathers).

The window reads, by the padding and the stride along x (sw):
- no padding, sw <= MAX_DENSE_STRIDE: the input itself, no copy;
- padding, sw <= MAX_DENSE_STRIDE: stage '<name>_pack' (tag 'injective,pool_pack'), the
  padded input Xp[n, c, i, j] = padded[n, c, i, j] (the dtype's lowest value for max,
  zero for the sum);
- sw > MAX_DENSE_STRIDE: the pack is phase-split, Xp[n, c, a, b, i, j] = padded[n, c,
  i*sh + a, j*sw + b], and tap (ry, rx) of output (y, x) reads Xp[n, c, ry % sh, rx % sw,
  y + ry // sh, x + rx // sw]: consecutive x read consecutive j.
The same values as te.compute.ops.max_pool2d / avg_pool2d (same checks and messages).
Imports te.compute and te.errors only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_float, fmt_shape, static_dim
from .nn import _pool_args

PACK_TAG = "pool_pack"
# the largest stride along x read as vector loads (te.codegen.llvm's MAX_DENSE_STRIDE)
MAX_DENSE_STRIDE = 4
MAX_TAG, SUM_TAG, AVG_TAG = "pool_max", "pool_sum", "pool_avg"
# Max windows up to this many taps are one expression, a tree of pairwise maxima, not a
# reduction: the NaN-propagating max is several dependent instructions (llvm.maximum), so
# a chain of kh*kw of them is latency-bound where a tree's maxima run side by side.
MAX_TREE_TAPS = 25


def _phased(data: Tensor, kernel, stride, padding, fill, who: str):
    """(window reader read(n, c, y, x, ry, rx), (kh, kw), (sh, sw), pads, out shape)."""
    (kh, kw), (sh, sw), pads, shape = _pool_args(data, kernel, stride, padding, who)
    dims = [static_dim(d) for d in data.shape]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data must have a constant shape, got "
                         f"{fmt_shape(data.shape)}")
    N, C, H, W = dims
    top, left = pads[0], pads[1]
    OH, OW = (static_dim(d) for d in shape[2:])
    if sw <= MAX_DENSE_STRIDE:
        if not any(pads):
            return (lambda n, c, y, x, ry, rx: data[n, c, y * sh + ry, x * sw + rx]), \
                (kh, kw), (sh, sw), pads, shape
        rows, cols = (OH - 1) * sh + kh, (OW - 1) * sw + kw   # the rows and columns read

        def padded(n, c, i, j):
            y, x = i - top, j - left
            inside = api.all(y >= 0, y < H, x >= 0, x < W)
            return api.if_then_else(inside, data[n, c, y, x], fill)
        Xq = api.compute((N, C, rows, cols), padded, name=f"{who}_pack",
                         tag=f"injective,{PACK_TAG}")
        return (lambda n, c, y, x, ry, rx: Xq[n, c, y * sh + ry, x * sw + rx]), \
            (kh, kw), (sh, sw), pads, shape
    pha, phb = min(sh, kh), min(sw, kw)
    rows, cols = OH + (kh - 1) // sh, OW + (kw - 1) // sw

    def pack(n, c, a, b, i, j):
        y, x = i * sh + a - top, j * sw + b - left
        inside = api.all(y >= 0, y < H, x >= 0, x < W)
        return api.if_then_else(inside, data[n, c, y, x], fill)
    Xp = api.compute((N, C, pha, phb, rows, cols), pack, name=f"{who}_pack",
                     tag=f"injective,{PACK_TAG}")

    def tap(r, s):
        return (0, r) if s == 1 else (api.indexmod(r, s), api.indexdiv(r, s))

    def read(n, c, y, x, ry, rx):
        (a, oy), (b, ox) = tap(ry, sh), tap(rx, sw)
        return Xp[n, c, a, b, y + oy, x + ox]
    return read, (kh, kw), (sh, sw), pads, shape


def max_pool2d_phased(data: Tensor, kernel, stride=1, padding=0,
                      name: str = "T_max_pool2d") -> Tensor:
    """max_pool2d's result over the phase-split input; the output stage has tag
    'pool_max'. Needs a constant shape."""
    read, (kh, kw), _, _, shape = _phased(data, kernel, stride, padding,
                                          api.min_value(data.dtype), "max_pool2d")
    if kh * kw <= MAX_TREE_TAPS:
        def window(n, c, y, x):
            taps = [read(n, c, y, x, ry, rx) for ry in range(kh) for rx in range(kw)]
            while len(taps) > 1:   # pairwise: independent maxima, a log-deep chain
                taps = [api.max(taps[k], taps[k + 1]) if k + 1 < len(taps) else taps[k]
                        for k in range(0, len(taps), 2)]
            return taps[0]
        return api.compute(shape, window, name=name, tag=MAX_TAG)
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    return api.compute(shape, lambda n, c, y, x: api.max(read(n, c, y, x, ry, rx),
                                                         axis=[ry, rx]),
                       name=name, tag=MAX_TAG)


def avg_pool2d_phased(data: Tensor, kernel, stride=1, padding=0,
                      count_include_pad: bool = False, name: str = "T_avg_pool2d") -> Tensor:
    """avg_pool2d's result over the phase-split input: stages 'pool_sum' (tag 'pool_sum')
    and the division (tag 'pool_avg'). Needs a constant shape."""
    check_float(data, "avg_pool2d", "data")
    read, (kh, kw), (sh, sw), pads, shape = _phased(
        data, kernel, stride, padding, api.const(0, data.dtype), "avg_pool2d")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    total = api.compute(shape, lambda n, c, y, x: api.sum(read(n, c, y, x, ry, rx),
                                                          axis=[ry, rx]),
                        name="pool_sum", tag=SUM_TAG)
    H, W = data.shape[2], data.shape[3]

    def count(o, stride_, k, before, size):
        start = o * stride_ - before
        return api.min(start + k, size) - api.max(start, 0)

    def fcompute(n, c, y, x):
        if count_include_pad or not any(pads):
            return total[n, c, y, x] / float(kh * kw)
        area = count(y, sh, kh, pads[0], H) * count(x, sw, kw, pads[1], W)
        return total[n, c, y, x] / area.astype(data.dtype)
    return api.compute(shape, fcompute, name=name, tag=AVG_TAG)
