"""conv2d NCHW as a GEMM over flattened, padded, phase-split input rows (no im2col), and
the direct form over the same phase-split input (conv2d_nchw_phased).

Takes conv2d_nchw's arguments plus the register tile (mr, nr) a schedule will use; gives the
NCHW output as three stages a schedule finds by tag:

- 'conv2d_gemm_pack' Xp[n, c, a, b, q]: the zero-padded input split into stride phases
  (a, b) = (y % sh, x % sw), each phase's rows flattened with pitch wq. Output pixel
  p = y * wq + x then reads Xp[n, c, (ry*dh) % sh, (rx*dw) % sw, p + off(ry, rx)]: an
  index affine in p with slope 1, so nr consecutive pixels are one vector load for every
  (c, ry, rx), at any stride and dilation. The wq - OW columns at the end of each row are
  computed and dropped. attrs['pitch'] = wq; attrs['inline'] where Xp reads no zeros
  and a schedule should inline it rather than copy (a 1x1 conv without padding whose
  pixel tiles end with the image: at stride 1, or at any stride in the cvec form).
- 'conv2d_gemm' Yf[n, (g,) f, p]: the GEMM, output channels padded up to a multiple of mr
  (zero weights) and pixels up to a multiple of nr, so a register tile never has a tail;
  attrs['tile'] = (mr, nr).
- 'conv2d_gemm_crop' (named `name`): Yf cropped into (N, OC, OH, OW).

form='cvec' turns the register tile round: vectors of mr output channels by nr pixels
broadcast one at a time, Yc[n, fo, p, fi] over the output's own pixels p = y * OW + x
(attrs['form'] = 'cvec'; with groups, fo runs over every group's channel tiles in turn).
A broadcast needs no contiguous run, so a pixel tile may cross rows and no padding column
is computed (the rows form's wq - OW per row: +14% work at 14x14, +31% at 7x7); only the
last tile's p >= OH * OW are, and the pack has the rows they read. The weights are read
as vectors of mr channels: packed (below), where fi is the innermost axis.

The GEMM reads the weights as they are (OC, ICg, KH, KW), or pre-packed by
conv2d_pack_weight (`packed=`): Wp[g, fo, c, ry, rx, fi], the mr weights one register tile
broadcasts per (channel, tap) next to each other and the padded channels zero, so the
GEMM reads one cache line per step instead of mr rows ICg*KH*KW apart, with no selects.
A graph packs constant weights once, at compile time (graph.passes.conv_weights).

Imports te.compute and te.errors only.
"""
from __future__ import annotations

from ...errors import ArgumentError, ShapeError
from .. import api
from ..tensor import Tensor
from ._util import fmt_shape, static_dim
from .nn import conv2d_geometry

PACK_TAG, GEMM_TAG, CROP_TAG = "conv2d_gemm_pack", "conv2d_gemm", "conv2d_gemm_crop"
FORMS = ("rows", "cvec")
WEIGHT_TAG = "injective,conv2d_weight_pack"


def _phase_tap(r, d, s):
    """(phase, offset in phase rows/columns) of kernel tap r with dilation d and stride s
    over a stride-phase-split input; plain (0, r * d) at stride 1."""
    if s == 1:
        return 0, r * d
    return api.indexmod(r * d, s), api.indexdiv(r * d, s)


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def gemm_pixels(out_hw, kernel_hw, stride, dilation, groups: int) -> int:
    """The GEMM's pixel columns before rounding up to whole register tiles: OH * OW for a
    1x1 kernel (groups 1: the panel form), else OH rows of the phase row pitch."""
    (OH, OW), (kh, kw), sw, dw = out_hw, kernel_hw, stride[1], dilation[1]
    if kh == kw == 1 and groups == 1:
        return OH * OW
    return OH * (OW + (kw - 1) * dw // sw)


def packed_weight_shape(kernel_shape, groups: int, mr: int) -> tuple:
    """conv2d_pack_weight's output shape for a (OC, ICg, KH, KW) kernel."""
    OC, ICg, KH, KW = kernel_shape
    return (groups, _ceil_to(OC // groups, mr) // mr, ICg, KH, KW, mr)


def conv2d_pack_weight(kernel: Tensor, groups: int = 1, mr: int = 8,
                       name: str = "conv2d_weight_pack") -> Tensor:
    """kernel (OC, ICg, KH, KW) as Wp[g, fo, c, ry, rx, fi] = kernel[g * OCg + fo * mr + fi,
    c, ry, rx], zero where fo * mr + fi >= OCg (OCg = OC // groups): the layout the GEMM
    form reads with register tiles of mr output channels."""
    who = "conv2d_pack_weight"
    dims = [static_dim(d) for d in kernel.shape] if len(kernel.shape) == 4 else [None]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: kernel must be 4-d (OC, ICg, KH, KW) with constant dims, "
                         f"got {fmt_shape(kernel.shape)}")
    for param, v in (("groups", groups), ("mr", mr)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ShapeError(f"{who}: {param} must be a positive int, got {v!r}")
    if dims[0] % groups:
        raise ShapeError(f"{who}: kernel output channels ({dims[0]}) must be divisible by "
                         f"groups ({groups})")
    OCg = dims[0] // groups

    def fcompute(g, fo, c, ry, rx, fi):
        f = fo * mr + fi
        if OCg % mr == 0:
            return kernel[g * OCg + f, c, ry, rx]
        w = kernel[g * OCg + api.min(f, OCg - 1), c, ry, rx]
        return api.if_then_else(f < OCg, w, api.const(0, kernel.dtype))
    return api.compute(packed_weight_shape(dims, groups, mr), fcompute, name=name,
                       tag=WEIGHT_TAG)


def _weight_reader(kernel: Tensor, packed, groups: int, mr: int, dtype: str):
    """w(g, f, rc, ry, rx): the weight of channel f of group g (zero for the padding
    channels f >= OCg), read from `packed` (conv2d_pack_weight's layout) when given."""
    OC = static_dim(kernel.shape[0])
    OCg = OC // groups
    ocp = _ceil_to(OCg, mr)
    if packed is not None:
        want = packed_weight_shape([static_dim(d) for d in kernel.shape], groups, mr)
        got = tuple(static_dim(d) for d in packed.shape)
        if got != want:
            raise ShapeError(f"conv2d_nchw_gemm: packed must have shape {want} (the kernel "
                             f"{fmt_shape(kernel.shape)} packed for groups {groups} and mr "
                             f"{mr}), got {fmt_shape(packed.shape)}")
        return lambda g, f, rc, ry, rx: packed[g, api.indexdiv(f, mr), rc, ry, rx,
                                               api.indexmod(f, mr)].astype(dtype)

    def read(g, f, rc, ry, rx):
        oc = f if groups == 1 else g * OCg + f
        if ocp != OCg:   # padded channels: zero weights, read from a clamped (valid) row
            oc = api.min(oc, (g + 1) * OCg - 1 if groups > 1 else OC - 1)
        w = kernel[oc, rc, ry, rx].astype(dtype)
        if ocp != OCg:
            w = api.if_then_else(f < OCg, w, api.const(0, dtype))
        return w
    return read


def conv2d_nchw_gemm(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1,
                     groups: int = 1, tile=(8, 32), out_dtype: str | None = None,
                     name: str = "T_conv2d_nchw", packed: Tensor | None = None,
                     form: str = "rows") -> Tensor:
    """conv2d_nchw's result (same arguments and checks) in the GEMM form above; `tile` is
    (mr output channels, nr pixels) of the schedule's register tile. Needs constant
    shapes. With groups > 1 the GEMM has a group axis: Yf[n, g, f, p]. `packed`: the
    kernel in conv2d_pack_weight's layout for (groups, mr), read instead of `kernel`
    (which then only gives the shapes). `form`: 'rows' (pixels as vectors; 1x1 kernels
    of groups 1 as panels) or 'cvec' (output channels as vectors; with groups > 1 the
    channel tiles of all groups in one axis, group after group)."""
    who = "conv2d_nchw_gemm"
    (sh, sw), (dh, dw), pads, (kh, kw), (OH, OW) = conv2d_geometry(
        data, kernel, stride, padding, dilation, groups, who)
    dims = [static_dim(d) for d in (*data.shape, *kernel.shape)]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data and kernel must have constant shapes, got "
                         f"{fmt_shape(data.shape)} and {fmt_shape(kernel.shape)}")
    if (not isinstance(tile, (tuple, list)) or len(tile) != 2
            or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in tile)):
        raise ShapeError(f"{who}: tile must be 2 positive ints (mr, nr), got {tile!r}")
    if form not in FORMS:
        raise ArgumentError(f"{who}: form must be one of {FORMS}, got {form!r}")
    N, C, H, W, OC, ICg = dims[:6]
    mr, nr = tile
    top, left = pads[0], pads[1]
    OCg = OC // groups
    dtype = out_dtype or data.dtype
    weight = _weight_reader(kernel, packed, groups, mr, dtype)
    if kh == kw == 1 and groups == 1 and form == "rows":
        return _pointwise(data, kernel, weight, (sh, sw), (top, left), (OH, OW), tile, dtype,
                          name)
    # phases actually read (a 1x1 stride-2 kernel reads phase (0, 0) only)
    pha, phb = min(sh, (kh - 1) * dh + 1), min(sw, (kw - 1) * dw + 1)
    wq = OW + (kw - 1) * dw // sw                 # phase row pitch: OW and the kernel's reach
    if form == "cvec":    # pixels y * OW + x; the last tile's extra ones read rows past OH
        npix = _ceil_to(OH * OW, nr)
        rows = (npix - 1) // OW + (kh - 1) * dh // sh + 1
    else:
        npix = _ceil_to(gemm_pixels((OH, OW), (kh, kw), (sh, sw), (dh, dw), groups), nr)
        reach = (kh - 1) * dh // sh * wq + (kw - 1) * dw // sw
        rows = -(-(npix + reach) // wq)           # what the last pixel tile reads

    # a 1x1 conv without padding whose pixel tiles end with the image reads no zeros: its
    # pack is a plain read of the input, which the schedule inlines rather than copies, at
    # stride 1 (then the input itself), or at any stride in the cvec form (which reads one
    # pixel per broadcast; the rows form's vectors would read at the stride)
    inline = (kh == kw == 1 and not top and not left and (OH - 1) * sh < H
              and (OW - 1) * sw < W and rows * wq == OH * OW
              and (form == "cvec" or sh == sw == 1))

    def pack(n, c, a, b, q):
        y = api.indexdiv(q, wq) * sh + a - top
        x = api.indexmod(q, wq) * sw + b - left
        if inline:
            return data[n, c, y, x].astype(dtype)
        inside = api.all(y >= 0, y < H, x >= 0, x < W)
        return api.if_then_else(inside, data[n, c, y, x].astype(dtype), api.const(0, dtype))
    Xp = api.compute((N, C, pha, phb, rows * wq), pack, name=f"{name}_pack", tag=PACK_TAG,
                      attrs={"pitch": wq, "inline": inline})

    rc = api.reduce_axis((0, ICg), "rc")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")

    a, oy = _phase_tap(ry, dh, sh)
    b, ox = _phase_tap(rx, dw, sw)
    ocp = _ceil_to(OCg, mr)
    if form == "cvec":
        # channel tiles of every group in one axis fo: group fo // tiles, tile fo % tiles
        tiles = ocp // mr

        def cvec(n, fo, p, fi):
            y, x = api.indexdiv(p, OW), api.indexmod(p, OW)
            g, f = (0, fo) if groups == 1 else (api.indexdiv(fo, tiles), api.indexmod(fo, tiles))
            w = packed[g, f, rc, ry, rx, fi].astype(dtype) if packed is not None else \
                weight(g, f * mr + fi, rc, ry, rx)
            c = rc if groups == 1 else g * ICg + rc
            return api.sum(w * Xp[n, c, a, b, (y + oy) * wq + x + ox], axis=[rc, ry, rx])
        Yc = api.compute((N, groups * tiles, npix, mr), cvec, name=f"{name}_gemm",
                         tag=GEMM_TAG, attrs={"tile": (mr, nr), "form": "cvec"})

        def crop(n, f, y, x):
            if groups == 1:
                return Yc[n, api.indexdiv(f, mr), y * OW + x, api.indexmod(f, mr)]
            g, fg = api.indexdiv(f, OCg), api.indexmod(f, OCg)
            return Yc[n, g * tiles + api.indexdiv(fg, mr), y * OW + x, api.indexmod(fg, mr)]
        return api.compute((N, OC, OH, OW), crop, name=name, tag=CROP_TAG)

    def gemm(n, g, f, p):
        w = weight(g, f, rc, ry, rx)
        c = rc if groups == 1 else g * ICg + rc
        return api.sum(w * Xp[n, c, a, b, p + oy * wq + ox], axis=[rc, ry, rx])
    if groups == 1:
        Yf = api.compute((N, ocp, npix), lambda n, f, p: gemm(n, 0, f, p), name=f"{name}_gemm",
                         tag=GEMM_TAG, attrs={"tile": (mr, nr)})
        return api.compute((N, OC, OH, OW), lambda n, f, y, x: Yf[n, f, y * wq + x],
                           name=name, tag=CROP_TAG)
    Yf = api.compute((N, groups, ocp, npix), gemm, name=f"{name}_gemm", tag=GEMM_TAG,
                     attrs={"tile": (mr, nr)})
    return api.compute((N, OC, OH, OW), lambda n, f, y, x: Yf[
        n, api.indexdiv(f, OCg), api.indexmod(f, OCg), y * wq + x], name=name, tag=CROP_TAG)


def _pointwise(data, kernel, weight, stride, pads, out_hw, tile, dtype, name):
    """A 1x1 convolution (groups 1): the GEMM kernel (OC x C) @ panels of the input, where
    panel a holds pixels a*nr .. a*nr + nr - 1 of every channel contiguously ([n, a, c, j]),
    gathered at the stride and zero beyond the image: the micro-kernel then reads nr
    contiguous values per channel step (a 1x1 conv reads each channel once per pixel, so
    the flattened-rows form would jump a whole image plane per step). Output pixel p = y * OW
    + x is the GEMM's column p: no dropped columns, and the schedule can compute each tile
    in the output's own loop (GEMM attrs['form'] = 'panels')."""
    (N, C, H, W), OC = (static_dim(d) for d in data.shape), static_dim(kernel.shape[0])
    (sh, sw), (top, left), (OH, OW) = stride, pads, out_hw
    mr, nr = tile
    P = OH * OW
    panels = -(-P // nr)

    def pack(n, a, c, j):
        p = a * nr + j
        y = api.indexdiv(p, OW) * sh - top
        x = api.indexmod(p, OW) * sw - left
        conds = [p < P] if P % nr else []
        conds += [y >= 0, y < H, x >= 0, x < W] if top or left else []
        v = data[n, c, y, x].astype(dtype)
        return api.if_then_else(api.all(*conds), v, api.const(0, dtype)) if conds else v
    XP = api.compute((N, panels, C, nr), pack, name=f"{name}_pack", tag=PACK_TAG,
                     attrs={"form": "panels"})
    rc = api.reduce_axis((0, C), "rc")
    ocp = _ceil_to(OC, mr)

    def gemm(n, f, p):
        w = weight(0, f, rc, 0, 0)
        return api.sum(w * XP[n, api.indexdiv(p, nr), rc, api.indexmod(p, nr)], axis=rc)
    Y = api.compute((N, ocp, panels * nr), gemm, name=f"{name}_gemm", tag=GEMM_TAG,
                    attrs={"tile": (mr, nr), "form": "panels"})
    return api.compute((N, OC, OH, OW), lambda n, f, y, x: Y[n, f, y * OW + x], name=name,
                       tag=CROP_TAG)


def conv2d_nchw_phased(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1,
                       groups: int = 1, out_dtype: str | None = None,
                       name: str = "T_conv2d_nchw") -> Tensor:
    """conv2d_nchw's result (same arguments and checks), reading a zero-padded copy of the
    input split into stride phases: stage '<name>_pack' (tag 'injective,pad', absent at
    stride 1 without padding), Xp[n, c, a, b, i, j] = padded[n, c, i*sh + a, j*sw + b].
    Consecutive output columns then read consecutive j at any stride, so a direct schedule
    that vectorizes them loads whole vectors (depthwise and narrow grouped convs). The
    output stage has tag 'conv2d_nchw'. Needs constant shapes."""
    who = "conv2d_nchw_phased"
    (sh, sw), (dh, dw), pads, (kh, kw), (OH, OW) = conv2d_geometry(
        data, kernel, stride, padding, dilation, groups, who)
    dims = [static_dim(d) for d in (*data.shape, *kernel.shape)]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: data and kernel must have constant shapes, got "
                         f"{fmt_shape(data.shape)} and {fmt_shape(kernel.shape)}")
    N, C, H, W, OC, ICg = dims[:6]
    top, left = pads[0], pads[1]
    OCg = OC // groups
    dtype = out_dtype or data.dtype
    phased = sh > 1 or sw > 1 or any(pads)
    if phased:
        pha, phb = min(sh, (kh - 1) * dh + 1), min(sw, (kw - 1) * dw + 1)
        rows, cols = OH + (kh - 1) * dh // sh, OW + (kw - 1) * dw // sw

        def pack(n, c, a, b, i, j):
            y, x = i * sh + a - top, j * sw + b - left
            inside = api.all(y >= 0, y < H, x >= 0, x < W)
            return api.if_then_else(inside, data[n, c, y, x].astype(dtype),
                                    api.const(0, dtype))
        src = api.compute((N, C, pha, phb, rows, cols), pack, name=f"{name}_pack",
                          tag="injective,pad")
    rc = api.reduce_axis((0, ICg), "rc")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")

    a, oy = _phase_tap(ry, dh, sh)
    b, ox = _phase_tap(rx, dw, sw)

    def fcompute(n, f, y, x):
        ch = rc if groups == 1 else api.indexdiv(f, OCg) * ICg + rc
        v = src[n, ch, a, b, y + oy, x + ox] if phased else data[n, ch, y + oy, x + ox]
        return api.sum(v.astype(dtype) * kernel[f, rc, ry, rx].astype(dtype),
                       axis=[rc, ry, rx])
    return api.compute((N, OC, OH, OW), fcompute, name=name, tag="conv2d_nchw")
