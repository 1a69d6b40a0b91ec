"""Convolution and transposed convolution over any number of spatial axes, (N, C, *spatial)
data (ONNX's 3-d Conv and ConvTranspose; the 2-d ones keep their own forms in nn,
conv2d_gemm and conv_transpose).

Each is one direct te.compute reduction over the group's input channels and the kernel's
taps; a convolution's padding is a separate stage 'pad_temp' (absent when zero) that a
schedule may inline; a transposed one is the convolution of the input spread out by the
stride with the flipped kernel. Imports te.compute (api, tensor), te.errors and the
sibling nn, transform and _util only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import (check_dim, check_groups, check_tensor, fmt_shape, int_tuple, pad_tuple_nd,
                    static_dim)
from .nn import _window
from .transform import pad

_TAP_NAMES = {1: ("rx",), 2: ("ry", "rx"), 3: ("rd", "ry", "rx")}


def _geometry(data: Tensor, kernel: Tensor, stride, padding, dilation, groups, who: str):
    """(rank r, strides, dilations, pads as (begins..., ends...), the kernel's constant
    spatial sizes) after the checks both ops share."""
    check_tensor(data, who, "data")
    r = data.ndim - 2
    if r < 1:
        raise ShapeError(f"{who}: data must be (N, C, *spatial) with a spatial axis, got "
                         f"shape {fmt_shape(data.shape)}")
    check_tensor(kernel, who, "kernel", ndim=data.ndim)
    strides = int_tuple(stride, r, who, "stride", minimum=1)
    dil = int_tuple(dilation, r, who, "dilation", minimum=1)
    pads = pad_tuple_nd(padding, r, who)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{who}: groups must be a positive int, got {groups!r}")
    taps = tuple(static_dim(k) for k in kernel.shape[2:])
    if any(k is None for k in taps):
        raise ShapeError(f"{who}: kernel must have a constant spatial size, got "
                         f"{fmt_shape(kernel.shape)}")
    return r, strides, dil, pads, taps


def _reduce_axes(taps) -> list:
    names = _TAP_NAMES.get(len(taps)) or [f"r{a}" for a in range(len(taps))]
    return [api.reduce_axis((0, k), n) for k, n in zip(taps, names)]


def conv_nd(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
            out_dtype: str | None = None, name: str = "T_conv_nd") -> Tensor:
    """Convolution. data (N, C, *spatial), kernel (OC, C // groups, *taps); padding is an
    int, one per spatial axis, or begins then ends (ONNX's order). out[n, f, o...] = sum
    over c, k... of padded[n, c', o * stride + k * dilation ...] * kernel[f, c, k...], c'
    channel c of f's group."""
    who = "conv_nd"
    r, strides, dil, pads, taps = _geometry(data, kernel, stride, padding, dilation, groups,
                                            who)
    check_groups(data.shape[1], kernel.shape[0], kernel.shape[1], groups, who)
    out = tuple(_window(data.shape[2 + a], taps[a], strides[a], dil[a], pads[a], pads[r + a],
                        who, f"kernel axis {a}") for a in range(r))
    padded = data if not any(pads) else pad(data, (0, 0) + pads[:r], (0, 0) + pads[r:], 0,
                                            name="pad_temp")
    dtype = out_dtype or data.dtype
    rc = api.reduce_axis((0, kernel.shape[1]), "rc")
    rs = _reduce_axes(taps)
    oc_per_group = kernel.shape[0] // groups if groups > 1 else None

    def fcompute(*i):
        n, f, o = i[0], i[1], i[2:]
        ch = rc if groups == 1 else (f // oc_per_group) * kernel.shape[1] + rc
        reads = [p * s + (k * d if d > 1 else k) for p, k, s, d in zip(o, rs, strides, dil)]
        return api.sum(padded[(n, ch, *reads)].astype(dtype)
                       * kernel[(f, rc, *rs)].astype(dtype), axis=[rc, *rs])
    return api.compute((data.shape[0], kernel.shape[0]) + out, fcompute, name=name,
                       tag="conv_nd")


def conv_transpose_nd(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1,
                      output_padding=0, groups: int = 1,
                      name: str = "T_conv_transpose_nd") -> Tensor:
    """Transposed convolution. data (N, C, *spatial), kernel (C, OC // groups, *taps):
    out[n, f, o...] = sum over c, k... of data[n, c, i...] * kernel[c, f', k...] where
    o = i * stride - pad_begin + k * dilation per axis, c in f's group; each output axis
    is (in - 1) * stride - pads + dilation * (taps - 1) + output_padding + 1 long.

    Computed as conv_nd of stage '<name>_input' (data with stride - 1 zeros between its
    elements, padded by (taps - 1) * dilation less the given pads, cropped where that is
    negative) and stage '<name>_kernel' (the kernel flipped, (OC, C // groups, *taps)):
    the gather form (each tap testing whether a stride step lands on it) compiled 30x
    slower under the automatic space and ran 2-5x slower than this, zeros and all."""
    who = "conv_transpose_nd"
    r, strides, dil, pads, taps = _geometry(data, kernel, stride, padding, dilation, groups,
                                            who)
    extra = int_tuple(output_padding, r, who, "output_padding", minimum=0)
    dims = [static_dim(d) for d in tuple(data.shape) + tuple(kernel.shape)]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data and kernel must have constant shapes, got "
                         f"{fmt_shape(data.shape)} and {fmt_shape(kernel.shape)}")
    sizes, C, OCg = dims[2:2 + r], dims[1], dims[r + 3]
    if C % groups:
        raise ShapeError(f"{who}: groups must be a positive int dividing the data channels "
                         f"({C}), got {groups!r}")
    check_dim(kernel.shape[0], C, who, "kernel.shape[0] (data channels)")
    out = tuple((n - 1) * s - pads[a] - pads[r + a] + d * (k - 1) + e + 1
                for a, (n, s, d, k, e) in enumerate(zip(sizes, strides, dil, taps, extra)))
    if min(out) < 1:
        raise ShapeError(f"{who}: the padding leaves no output {out}")
    # the spread input's axis a: index t + before[a] holds spread position t, which is
    # data's t // stride where t >= 0, t < spread[a] and the stride divides t, else 0
    before = [(k - 1) * d - p for k, d, p in zip(taps, dil, pads[:r])]
    spread = [(n - 1) * s + 1 for n, s in zip(sizes, strides)]
    shape = tuple(o + (k - 1) * d for o, k, d in zip(out, taps, dil))

    def spread_input(*i):
        conds, index = [], []
        for a in range(r):
            t = i[2 + a] - before[a] if before[a] else i[2 + a]
            if before[a] > 0:
                conds.append(t >= 0)
            if shape[a] - 1 - before[a] >= spread[a]:   # the last index reaches past it
                conds.append(t < spread[a])
            if strides[a] > 1:
                conds.append(api.indexmod(t, strides[a]) == 0)
                t = api.indexdiv(t, strides[a])
            index.append(t)
        value = data[(i[0], i[1], *index)]
        return api.if_then_else(api.all(*conds), value, api.const(0, data.dtype)) \
            if conds else value
    spread_data = api.compute(tuple(data.shape[:2]) + shape, spread_input,
                              name=f"{name}_input", tag="injective")
    Cg = C // groups
    flipped = api.compute((OCg * groups, Cg) + tuple(taps), lambda *i: kernel[(
        (i[0] // OCg) * Cg + i[1] if groups > 1 else i[1], i[0] % OCg if groups > 1 else i[0],
        *(k - 1 - j for k, j in zip(taps, i[2:])))], name=f"{name}_kernel", tag="injective")
    return conv_nd(spread_data, flipped, 1, 0, dil, groups, name=name)
