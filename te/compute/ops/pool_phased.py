"""max / average pooling (NCHW) in the form that te.autotune.schedule_pool2d schedules: each
output row a vector of consecutive outputs, whose window taps are vector loads at the
stride along x (the LLVM codegen loads strides 2 to MAX_DENSE_STRIDE as dense loads and a
shuffle; larger strides would be gathers).

Where sw <= MAX_DENSE_STRIDE and kh, kw <= MAX_TREE_TAPS the window is combined rows first
(_separable): stage '<name>_rows' (tag ROWS_TAG) combines each output row's kh input rows
column by column, and each output combines kw of those; otherwise each output reads its
kh * kw taps. Either reads, by the padding and the stride along x (sw):
- no padding, sw <= MAX_DENSE_STRIDE: the input itself, no copy;
- padding, sw <= MAX_DENSE_STRIDE: stage '<name>_pack' (tag 'injective,pool_pack'), the
  padded input Xp[n, c, i, j] = padded[n, c, i, j] (the dtype's lowest value for max,
  zero for the sum);
- sw > MAX_DENSE_STRIDE: the pack is phase-split, Xp[n, c, a, b, i, j] = padded[n, c,
  i*sh + a, j*sw + b], and tap (ry, rx) of output (y, x) reads Xp[n, c, ry % sh, rx % sw,
  y + ry // sh, x + rx // sw]: consecutive x read consecutive j.
With dilation (dh, dw) tap (ry, rx) sits at offset (ry * dh, rx * dw) from its window's
start, in every form above: kh and kw count the taps, the padded copy and the row buffer
span the dilated extent (kh - 1) * dh + 1 by (kw - 1) * dw + 1.
The same values as te.compute.ops.max_pool2d / avg_pool2d (same checks and messages).
Imports te.compute and te.errors only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_float, fmt_shape, int_tuple, static_dim
from .nn import _pool_args, _pool_count, _tap

PACK_TAG = "pool_pack"
# the largest stride along x read as vector loads (te.codegen.llvm's MAX_DENSE_STRIDE)
MAX_DENSE_STRIDE = 4
MAX_TAG, SUM_TAG, AVG_TAG = "pool_max", "pool_sum", "pool_avg"
ROWS_TAG = "pool_rows"
# Max windows up to this many taps are one expression, a tree of pairwise maxima, not a
# reduction: the NaN-propagating max is several dependent instructions (llvm.maximum), so
# a chain of kh*kw of them is latency-bound where a tree's maxima run side by side.
MAX_TREE_TAPS = 25


def _checked(data: Tensor, kernel, stride, padding, dilation, who: str):
    """_pool_args and the constant shape: ((kh, kw), (sh, sw), (dh, dw), pads, out shape,
    [N, C, H, W], (OH, OW))."""
    (kh, kw), (sh, sw), (dh, dw), pads, shape = _pool_args(data, kernel, stride, padding,
                                                           who, dilation)
    dims = [static_dim(d) for d in data.shape]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data must have a constant shape, got "
                         f"{fmt_shape(data.shape)}")
    OH, OW = (static_dim(d) for d in shape[2:])
    return (kh, kw), (sh, sw), (dh, dw), pads, shape, dims, (OH, OW)


def _extent(k: int, d: int) -> int:
    """The span of a window of k taps dilated by d."""
    return (k - 1) * d + 1


def _dense_source(data: Tensor, eh, ew, sh, sw, pads, dims, out_hw, fill, who: str):
    """What the windows read where sw <= MAX_DENSE_STRIDE: the input itself without
    padding, else its padded copy '<who>_pack' (rows and columns read: (OH - 1) * sh + eh,
    (OW - 1) * sw + ew, for windows of extent eh by ew)."""
    if not any(pads):
        return data
    N, C, H, W = dims
    top, left = pads[0], pads[1]
    rows, cols = (out_hw[0] - 1) * sh + eh, (out_hw[1] - 1) * sw + ew

    def padded(n, c, i, j):
        y, x = i - top, j - left
        inside = api.all(y >= 0, y < H, x >= 0, x < W)
        return api.if_then_else(inside, data[n, c, y, x], fill)
    return api.compute((N, C, rows, cols), padded, name=f"{who}_pack",
                       tag=f"injective,{PACK_TAG}")


def _tree(combine, taps: list):
    """combine over `taps` pairwise: independent operations, a log-deep chain."""
    while len(taps) > 1:
        taps = [combine(taps[k], taps[k + 1]) if k + 1 < len(taps) else taps[k]
                for k in range(0, len(taps), 2)]
    return taps[0]


def _separable(data: Tensor, kernel, stride, padding, dilation, fill, who: str, combine):
    """The window as rows first: stage '<who>_rows' (tag ROWS_TAG) combines each output row's
    kh input rows, column by column, and the result combines kw of those per output. Where
    sw <= MAX_DENSE_STRIDE and kh, kw <= MAX_TREE_TAPS: (window(n, c, y, x), (kh, kw),
    (sh, sw), pads, shape); else None. About sw * (kh - 1) + kw - 1 operations per output
    (the row buffer has sw columns per output) instead of kh * kw - 1."""
    (kh, kw), (sh, sw), (dh, dw), pads, shape, dims, out_hw = _checked(
        data, kernel, stride, padding, dilation, who)
    if sw > MAX_DENSE_STRIDE or max(kh, kw) > MAX_TREE_TAPS:
        return None
    eh, ew = _extent(kh, dh), _extent(kw, dw)
    src = _dense_source(data, eh, ew, sh, sw, pads, dims, out_hw, fill, who)
    cols = (out_hw[1] - 1) * sw + ew
    rows = api.compute((dims[0], dims[1], out_hw[0], cols), lambda n, c, y, j: _tree(
        combine, [src[n, c, y * sh + ry * dh, j] for ry in range(kh)]), name=f"{who}_rows",
        tag=ROWS_TAG)

    def window(n, c, y, x):
        return _tree(combine, [rows[n, c, y, x * sw + rx * dw] for rx in range(kw)])
    return window, (kh, kw), (sh, sw), pads, shape


def _phased(data: Tensor, kernel, stride, padding, dilation, fill, who: str):
    """(window reader read(n, c, y, x, ry, rx), (kh, kw), (sh, sw), pads, out shape)."""
    (kh, kw), (sh, sw), (dh, dw), pads, shape, dims, (OH, OW) = _checked(
        data, kernel, stride, padding, dilation, who)
    N, C, H, W = dims
    top, left = pads[0], pads[1]
    eh, ew = _extent(kh, dh), _extent(kw, dw)
    if sw <= MAX_DENSE_STRIDE:
        src = _dense_source(data, eh, ew, sh, sw, pads, dims, (OH, OW), fill, who)
        return (lambda n, c, y, x, ry, rx: src[n, c, y * sh + _tap(ry, dh),
                                               x * sw + _tap(rx, dw)]), \
            (kh, kw), (sh, sw), pads, shape
    # the phases and rows a window's offsets (taps times dilation) reach
    pha, phb = min(sh, eh), min(sw, ew)
    rows, cols = OH + (eh - 1) // sh, OW + (ew - 1) // sw

    def pack(n, c, a, b, i, j):
        y, x = i * sh + a - top, j * sw + b - left
        inside = api.all(y >= 0, y < H, x >= 0, x < W)
        return api.if_then_else(inside, data[n, c, y, x], fill)
    Xp = api.compute((N, C, pha, phb, rows, cols), pack, name=f"{who}_pack",
                     tag=f"injective,{PACK_TAG}")

    def tap(r, s):
        return (0, r) if s == 1 else (api.indexmod(r, s), api.indexdiv(r, s))

    def read(n, c, y, x, ry, rx):
        (a, oy), (b, ox) = tap(_tap(ry, dh), sh), tap(_tap(rx, dw), sw)
        return Xp[n, c, a, b, y + oy, x + ox]
    return read, (kh, kw), (sh, sw), pads, shape


def max_pool2d_phased(data: Tensor, kernel, stride=1, padding=0, dilation=1,
                      name: str = "T_max_pool2d") -> Tensor:
    """max_pool2d's result: rows first where _separable applies, else over the phase-split
    input; the output stage has tag 'pool_max'. Needs a constant shape. `dilation` spaces
    the window's taps (max_pool2d's)."""
    fill = api.min_value(data.dtype)
    sep = _separable(data, kernel, stride, padding, dilation, fill, "max_pool2d", api.max)
    if sep is not None:
        return api.compute(sep[-1], sep[0], name=name, tag=MAX_TAG)
    read, (kh, kw), _, _, shape = _phased(data, kernel, stride, padding, dilation, fill,
                                          "max_pool2d")
    if kh * kw <= MAX_TREE_TAPS:
        return api.compute(shape, lambda n, c, y, x: _tree(api.max, [
            read(n, c, y, x, ry, rx) for ry in range(kh) for rx in range(kw)]),
            name=name, tag=MAX_TAG)
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    return api.compute(shape, lambda n, c, y, x: api.max(read(n, c, y, x, ry, rx),
                                                         axis=[ry, rx]),
                       name=name, tag=MAX_TAG)


def avg_pool2d_phased(data: Tensor, kernel, stride=1, padding=0,
                      count_include_pad: bool = False, dilation=1,
                      name: str = "T_avg_pool2d") -> Tensor:
    """avg_pool2d's result, rows first where _separable applies, else over the phase-split
    input: stages 'pool_sum' (tag 'pool_sum') and the division (tag 'pool_avg'). Needs a
    constant shape. `dilation` spaces the window's taps (avg_pool2d's)."""
    check_float(data, "avg_pool2d", "data")
    zero = api.const(0, data.dtype)
    sep = _separable(data, kernel, stride, padding, dilation, zero, "avg_pool2d",
                     lambda a, b: a + b)
    if sep is not None:
        window, (kh, kw), (sh, sw), pads, shape = sep
        total = api.compute(shape, window, name="pool_sum", tag=SUM_TAG)
    else:
        read, (kh, kw), (sh, sw), pads, shape = _phased(data, kernel, stride, padding,
                                                        dilation, zero, "avg_pool2d")
        ry = api.reduce_axis((0, kh), "ry")
        rx = api.reduce_axis((0, kw), "rx")
        total = api.compute(shape, lambda n, c, y, x: api.sum(read(n, c, y, x, ry, rx),
                                                              axis=[ry, rx]),
                            name="pool_sum", tag=SUM_TAG)
    H, W = data.shape[2], data.shape[3]
    dh, dw = int_tuple(dilation, 2, "avg_pool2d", "dilation", minimum=1)

    def fcompute(n, c, y, x):
        if count_include_pad or not any(pads):
            return total[n, c, y, x] / float(kh * kw)
        area = (_pool_count(y, sh, kh, dh, pads[0], H)
                * _pool_count(x, sw, kw, dw, pads[1], W))
        return total[n, c, y, x] / area.astype(data.dtype)
    return api.compute(shape, fcompute, name=name, tag=AVG_TAG)
