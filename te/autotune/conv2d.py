"""The conv2d strategy: which compute a convolution gets, by its attributes, and its schedule.

conv2d_compute picks conv2d_nchw_gemm (a GEMM over padded, phase-split rows with a
register-tiled micro-kernel) where the per-group channel counts fill a register tile, else
conv2d_nchw_phased (direct, over a phase-split padded input: depthwise and narrow grouped
convs; conv2d_nchw where shapes are symbolic). schedule_conv2d takes the kernel's
output tensor: the conv's own output, or one elementwise stage over it (a fused epilogue:
bias, relu, residual add) that is then computed in the conv's final (cropping) loop; where
the padded input fits in L2 the GEMM is computed per block of output channels inside that
loop. The register tile is chosen per shape (conv2d_tile). It finds the conv's stages by
tag. Imports te.compute, te.schedule, te.errors and micro_kernel.vector_lanes.
"""
from __future__ import annotations

import math

from ..compute import ops
from ..compute.ops.conv2d_gemm import CROP_TAG, GEMM_TAG, PACK_TAG, gemm_pixels
from ..compute.ops.nn import conv2d_geometry
from ..compute.tensor import ComputeOp, Tensor
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule
from .micro_kernel import vector_lanes

DIRECT_TAGS = ("conv2d_nchw", "depthwise_conv2d_nchw")
MIN_GEMM_CHANNELS = 4    # output channels per group: below that the tile is mostly padding
L2_BYTES = 1 << 20        # the packed input of one image that counts as L2-resident
PANEL_BLOCK = 7          # pixel panels packed and computed together (1x1 convs)
WIDE_TILE_COST = 0.94    # time per padded pixel of a 3-vector tile, relative to 2 vectors
MIN_GEMM_REDUCTION = 8   # input channels per group x kernel taps (depthwise 3x3: 9)


def conv2d_tile(dtype: str = "float32", pixels: int | None = None) -> tuple:
    """(mr, nr): output channels x pixels of the register tile. On AVX-512 8 channels by
    2 or 3 vectors (16 or 24 accumulators of the 32 registers, with the pixel vectors and
    a broadcast): 3 vectors load fewer operands per FMA, and are taken where the GEMM's
    `pixels` (gemm_pixels) rounded up to whole tiles leave little more padding than with
    2 (not for 7x7 or 14x14 images). AVX2: 4 channels by 3 vectors (12 of 16 registers)."""
    lanes = vector_lanes(dtype)
    if lanes < 16:
        return 4, 3 * lanes
    if pixels is not None and _ceil_to(pixels, 3 * lanes) * WIDE_TILE_COST <= \
            _ceil_to(pixels, 2 * lanes):
        return 8, 3 * lanes
    return 8, 2 * lanes


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def conv2d_weight_tile(data_shape, kernel_shape, groups: int = 1,
                       dtype: str = "float32") -> int | None:
    """mr (output channels of the register tile) where conv2d_compute picks the GEMM form
    for these constant shapes, which then reads a weight pre-packed by
    te.compute.ops.conv2d_pack_weight(kernel, groups, mr) as well; None where it picks a
    direct form (or the shapes are not constant ints)."""
    dims = (*data_shape, *kernel_shape)
    if len(dims) != 8 or any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
        return None
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        return None
    oc, icg, kh, kw = kernel_shape
    if oc // groups >= MIN_GEMM_CHANNELS and icg * kh * kw >= MIN_GEMM_REDUCTION:
        return conv2d_tile(dtype)[0]
    return None


def conv2d_compute(data: Tensor, kernel: Tensor, strides=1, padding=0, dilation=1,
                   groups: int = 1, name: str = "conv2d", packed: Tensor | None = None
                   ) -> Tensor:
    """The output of a conv2d (conv2d_nchw's arguments) in the form its schedule wants;
    bad arguments raise conv2d_nchw's errors, whichever form they would get. `packed`:
    the kernel already in conv2d_pack_weight's layout (for conv2d_weight_tile's mr), read
    instead of `kernel`, which then only gives the shapes; only for the GEMM form."""
    stride, dil, _, khw, out_hw = conv2d_geometry(data, kernel, strides, padding, dilation,
                                                  groups, "conv2d_nchw")
    static = all(hasattr(d, "value") for d in (*data.shape, *kernel.shape))
    mr = conv2d_weight_tile(*([int(d.value) for d in t.shape] for t in (data, kernel)),
                            groups, data.dtype) if static else None
    if mr is not None:
        pixels = gemm_pixels(out_hw, khw, stride, dil, groups)
        return ops.conv2d_nchw_gemm(data, kernel, strides, padding, dilation, groups,
                                    tile=conv2d_tile(data.dtype, pixels), name=name,
                                    packed=packed)
    if packed is not None:
        raise ArgumentError(f"te.autotune.conv2d_compute: packed weights are only read by "
                            f"the GEMM form (conv2d_weight_tile not None), and this conv "
                            f"(data {list(data.shape)}, kernel {list(kernel.shape)}, groups "
                            f"{groups}) takes a direct form")
    if static:
        return ops.conv2d_nchw_phased(data, kernel, strides, padding, dilation, groups,
                                      name=name)
    return ops.conv2d_nchw(data, kernel, strides, padding, dilation, groups, name=name)


def producer_ops(out: Tensor) -> list:
    """Every ComputeOp `out` reads, directly or not, `out`'s own op first."""
    found, todo, seen = [], [out.op], set()
    while todo:
        op = todo.pop()
        if id(op) in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(id(op))
        found.append(op)
        todo.extend(t.op for t in op.input_tensors)
    return found


def _by_tag(ops_: list, tags) -> ComputeOp | None:
    for op in ops_:
        if any(t in tags for t in op.tag.split(",")):
            return op
    return None


def schedule_conv2d(out: Tensor):
    """A schedule of `out`: a conv2d_compute output or one elementwise stage over it."""
    if not isinstance(out, Tensor):
        raise ArgumentError(f"te.autotune.schedule_conv2d: out must be a te.Tensor (the "
                            f"conv's output or an elementwise stage over it), got "
                            f"{type(out).__name__}")
    found = producer_ops(out)
    gemm = _by_tag(found, (GEMM_TAG,))
    if gemm is not None:
        return _schedule_gemm(out, found, gemm)
    conv = _by_tag(found, DIRECT_TAGS)
    if conv is None:
        raise ArgumentError(f"te.autotune.schedule_conv2d: out ('{out.op.name}') reads no "
                            f"conv2d stage (tags {GEMM_TAG!r} or {DIRECT_TAGS})")
    return _schedule_direct(out, found, conv)


def _epilogue(s, out: Tensor, found: list, stop) -> None:
    """Inline every stage between `out` and `stop` (the crop and any elementwise stage), so
    the output loop computes them from the conv's result as it writes."""
    for op in found[1:]:
        if op is not stop and not op.reduce_axis and op.tag not in (PACK_TAG, "injective,pad"):
            s[op].compute_inline()


def _out_loops(s, out: Tensor, lanes: int):
    """(batch, channel) rows of `out` in parallel, each row's pixels vectorized; gives
    (the fused parallel loop, the row loop y)."""
    n, f, y, x = s[out].op.axis
    width = int(out.shape[3].value)
    xo, xi = s[out].split(x, factor=max(1, min(lanes, width)))
    s[out].vectorize(xi)
    row = s[out].fuse(n, f)
    s[out].parallel(row)
    return row, y


def _schedule_gemm(out: Tensor, found: list, gemm: ComputeOp):
    s = create_schedule(out.op)
    pack = _by_tag(found, (PACK_TAG,))
    crop = _by_tag(found, (CROP_TAG,))
    if pack is None or crop is None:
        raise ArgumentError(f"te.autotune.schedule_conv2d: stage '{gemm.name}' lacks its "
                            f"pack or crop stage (tags {PACK_TAG!r}, {CROP_TAG!r})")
    if gemm.attrs.get("form") == "panels":
        return _schedule_panels(s, out, found, gemm, pack)
    lanes = vector_lanes(out.dtype)
    # the pack: (batch, channel) in parallel, each phase row a vectorized run
    n, c, a, b, q = s[pack].op.axis
    wq = pack.attrs["pitch"]
    qo, qi = s[pack].split(q, factor=wq)
    s[pack].parallel(s[pack].fuse(n, c))
    s[pack].vectorize(s[pack].split(qi, factor=min(lanes, wq))[1])
    # the GEMM: an mr x nr tile accumulates in registers over (channels, kernel rows,
    # kernel columns); computed per channel block where it can, else whole before the crop
    mr, nr = gemm.attrs["tile"]
    Yf = gemm.output(0)
    local = s.cache_write(Yf, "local")
    axes = list(s[Yf].op.axis)
    if len(axes) == 3 and _channels_outer(pack):
        _gemm_in_blocks(s, out, found, gemm, lanes)
    else:
        _gemm_whole(s, Yf, pack, (mr, nr))
        _epilogue(s, out, found, gemm)
        _out_loops(s, out, lanes)
    lf, lp = s[local].op.axis[-2:]
    rc, ry, rx = s[local].op.reduce_axis
    s[local].compute_at(s[Yf], s[Yf].leaf_iter_vars[-3])
    s[local].reorder(rc, ry, rx, lf, lp)
    for ax in (ry, rx, lf):
        s[local].unroll(ax)
    s[local].vectorize(lp)
    return s


def _gemm_whole(s, Yf: Tensor, pack: ComputeOp, tile) -> None:
    """The whole GEMM as a stage of its own, before the crop: pixel tiles (with batch and
    group) in parallel and channel tiles inside, or the other way round (_channels_outer)."""
    mr, nr = tile
    axes = list(s[Yf].op.axis)
    fo, fi = s[Yf].split(axes[-2], factor=mr)
    po, pi = s[Yf].split(axes[-1], factor=nr)
    outer, inner = (fo, po) if _channels_outer(pack) else (po, fo)
    s[Yf].reorder(*axes[:-2], outer, inner, fi, pi)
    s[Yf].parallel(s[Yf].fuse(*axes[:-2], outer))
    s[Yf].unroll(fi)
    s[Yf].vectorize(pi)


def _gemm_in_blocks(s, out: Tensor, found: list, gemm: ComputeOp, lanes: int) -> None:
    """The GEMM computed per block of mr output channels (with the batch) inside the
    output's parallel loop, each block's result cropped (through the epilogue) right after,
    while it is in L2, not written whole and read back; each block streams its weights
    once over every pixel tile, which re-read the packed input from L2 (groups 1)."""
    mr, nr = gemm.attrs["tile"]
    Yf = gemm.output(0)
    _epilogue(s, out, found, gemm)
    n, f, y, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=mr)
    s[out].reorder(n, fo, fi, y, x)
    block = s[out].fuse(n, fo)
    s[out].parallel(block)
    s[out].vectorize(s[out].split(x, factor=max(1, min(lanes, int(out.shape[3].value))))[1])
    s[Yf].compute_at(s[out], block)
    yn, yf, yp = s[Yf].op.axis
    po, pi = s[Yf].split(yp, factor=nr)
    s[Yf].reorder(yn, po, yf, pi)
    s[Yf].unroll(yf)
    s[Yf].vectorize(pi)


def _schedule_direct(out: Tensor, found: list, conv: ComputeOp):
    """Rows of (batch, channel) in parallel; each output row computed into a local buffer,
    x innermost and vectorized with the reduction around it, then the epilogue (if any)
    writes it; the padded input stays a stage of its own (no bounds selects inside)."""
    s = create_schedule(out.op)
    lanes = vector_lanes(out.dtype)
    width = int(conv.output(0).shape[3].value)
    n, f, y, x = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=max(1, min(lanes, width)))
    if conv is out.op:
        s[conv].reorder(n, f, y, xo, *s[conv].op.reduce_axis, xi)
        s[conv].parallel(s[conv].fuse(n, f))
    else:
        s[conv].reorder(xo, *s[conv].op.reduce_axis, xi)
        _epilogue(s, out, found, conv)
        _, out_y = _out_loops(s, out, lanes)
        s[conv].compute_at(s[out], out_y)
    s[conv].vectorize(xi)
    pad = _by_tag(found, ("pad",))
    if pad is not None:
        s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))
        if len(pad.axis) == 6:          # conv2d_nchw_phased's: each phase row vectorized
            cols = int(pad.output(0).shape[5].value)
            s[pad].vectorize(s[pad].split(pad.axis[5], factor=max(1, min(lanes, cols)))[1])
    return s


def _schedule_panels(s, out: Tensor, found: list, gemm: ComputeOp, pack: ComputeOp):
    """A 1x1 conv: the output's own loops are the GEMM's tiles (pixels fused, split by nr;
    channels split by mr), so each mr x nr tile is accumulated in registers and written
    once, through the epilogue. Blocks of `block` pixel panels (with the batch) run in
    parallel; each block packs its panels just before its tiles read them (an L2-sized
    buffer), and the channel tiles go around the block's panels so that the mr weight rows
    are reused across them."""
    mr, nr = gemm.attrs["tile"]
    _epilogue(s, out, found, gemm)
    n, f, y, x = s[out].op.axis
    pixels = s[out].fuse(y, x)
    fo, fi = s[out].split(f, factor=mr)
    po, pi = s[out].split(pixels, factor=nr)
    s[out].unroll(fi)
    s[out].vectorize(pi)
    pn, a, c, j = s[pack].op.axis
    s[pack].vectorize(j)
    if _channels_outer(pack):
        s[out].reorder(n, fo, po, fi, pi)
        s[out].parallel(s[out].fuse(n, fo))
        s[gemm].compute_at(s[out], po)
        s[pack].parallel(s[pack].fuse(pn, a))
    else:
        panels = int(pack.output(0).shape[1].value)
        # a divisor of the panel count (a partial block would guard every tile), leaving
        # at least 4 blocks to share out where it can
        block = max(b for b in range(1, PANEL_BLOCK + 1)
                    if panels % b == 0 and (b == 1 or panels // b >= 4))
        pbo, pbi = s[out].split(po, factor=block)
        s[out].reorder(n, pbo, fo, pbi, fi, pi)
        block_loop = s[out].fuse(n, pbo)
        s[out].parallel(block_loop)
        s[gemm].compute_at(s[out], pbi)
        s[pack].compute_at(s[out], block_loop)
        s[pack].reorder(c, a, j)
    yf, yp = s[gemm].op.axis[-2:]
    (rc,) = s[gemm].op.reduce_axis
    s[gemm].reorder(rc, yf, yp)
    s[gemm].unroll(yf)
    s[gemm].vectorize(yp)
    return s


def _channels_outer(pack: ComputeOp) -> bool:
    """Whether one image's packed input fits in L2: then output-channel tiles go outermost
    (in parallel) and each streams its weights once over all pixel tiles, which re-read the
    packed input from L2; otherwise pixel tiles go outermost, and the weights are re-read
    per pixel block (small late layers have the largest weights: 7x7 images, 512-2048
    channels)."""
    shape = [int(d.value) for d in pack.output(0).shape[1:]]
    return math.prod(shape) * 4 <= L2_BYTES
