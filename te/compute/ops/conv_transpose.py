"""Transposed 2-d convolution (the gradient of conv2d with respect to its input), NCHW.

Takes data (N, C, H, W) and a kernel (C, OC // groups, KH, KW) with static
hyper-parameters, gives one te.compute reduction stage that reads each input element only
where a stride step lands on it (no zero-inserted copy). Imports te.compute (api, tensor),
te.errors and the sibling _util only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_dim, check_tensor, fmt_shape, int_tuple, pad_tuple, static_dim


def conv2d_transpose_nchw(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1,
                          output_padding=0, groups: int = 1,
                          name: str = "T_conv2d_transpose_nchw") -> Tensor:
    """out[n, f, y, x] = sum over c, ky, kx of data[n, c, iy, ix] * kernel[c, f', ky, kx]
    where y = iy * stride - pad_top + ky * dilation (likewise x), c in f's group; the
    output is (H - 1) * stride - pads + dilation * (KH - 1) + output_padding + 1 high."""
    who = "conv2d_transpose_nchw"
    check_tensor(data, who, "data", ndim=4)
    check_tensor(kernel, who, "kernel", ndim=4)
    sh, sw = int_tuple(stride, 2, who, "stride", minimum=1)
    dh, dw = int_tuple(dilation, 2, who, "dilation", minimum=1)
    oph, opw = int_tuple(output_padding, 2, who, "output_padding", minimum=0)
    top, left, bottom, right = pad_tuple(padding, who)
    dims = [static_dim(d) for d in tuple(data.shape) + tuple(kernel.shape)]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data and kernel must have constant shapes, got "
                         f"{fmt_shape(data.shape)} and {fmt_shape(kernel.shape)}")
    N, C, H, W, KC, OCg, KH, KW = dims
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or C % groups:
        raise ShapeError(f"{who}: groups must be a positive int dividing the data channels "
                         f"({C}), got {groups!r}")
    check_dim(KC, C, who, "kernel.shape[0] (data channels)")
    OH = (H - 1) * sh - top - bottom + dh * (KH - 1) + oph + 1
    OW = (W - 1) * sw - left - right + dw * (KW - 1) + opw + 1
    if OH < 1 or OW < 1:
        raise ShapeError(f"{who}: the padding leaves no output ({OH} x {OW})")
    Cg = C // groups
    rc = api.reduce_axis((0, Cg), "rc")
    ry = api.reduce_axis((0, KH), "ry")
    rx = api.reduce_axis((0, KW), "rx")

    def source(o, k, d, before, s, extent):
        t = o + before - k * d
        ok = api.all(t >= 0, api.indexmod(t, s) == 0, api.indexdiv(t, s) < extent) \
            if s > 1 else api.all(t >= 0, t < extent)
        index = api.indexdiv(t, s) if s > 1 else t
        return ok, api.if_then_else(ok, index, 0)

    def fcompute(n, f, y, x):
        c = rc if groups == 1 else (f // OCg) * Cg + rc
        oky, iy = source(y, ry, dh, top, sh, H)
        okx, ix = source(x, rx, dw, left, sw, W)
        term = data[n, c, iy, ix] * kernel[c, f % OCg if groups > 1 else f, ry, rx]
        return api.sum(api.if_then_else(api.all(oky, okx), term, api.const(0, data.dtype)),
                       axis=[rc, ry, rx])
    return api.compute((N, OCg * groups, OH, OW), fcompute, name=name,
                       tag="conv2d_transpose_nchw")
