"""The conv2d strategy's schedule as a search space: its choices are knobs, tunable.

conv2d_schedule(cfg, out) schedules a conv2d_compute output (or one elementwise stage over
it) as `cfg` chooses: a ConfigSpace collects the knobs (and gives option 0 of each, the
strategy's heuristic choice, so the default config is the untuned schedule), a
ConfigEntity applies them. The GEMM form's knobs: 'layout' (per block of output channels
inside the output's loop, or the whole GEMM before the crop with channel or pixel tiles or
blocks of pixel tiles in parallel: the L2 test's choice, L2 being this host's; or in
blocks of input channels, outermost; for 1x1
convs, channel tiles outermost or blocks of that many pixel panels), 'reduce_order' and
'unroll_taps' (the register tile's reduction loops) and, for 1x1 convs, 'reduce_unroll'
(channel steps unrolled per loop iteration). The
register tile (mr, nr) is the compute's, and mr the layout of weights packed ahead, so it
is no knob. The direct form has none. schedule_conv2d takes the best record under
apply_history_best (key: workload.strategy_key(out, 'conv2d')), else the default.
Imports te.compute, te.schedule, te.errors, conv2d, dispatch, space and workload.
"""
from __future__ import annotations

import math

from ..compute.ops.conv2d_gemm import CROP_TAG, GEMM_TAG, PACK_TAG
from ..compute.tensor import ComputeOp, Tensor
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule
from . import conv2d as C
from .dispatch import dispatch_lookup
from .space import ConfigEntity, ConfigSpace
from .workload import strategy_key

STRATEGY = "conv2d"
MAX_PANEL_BLOCK = 16     # the largest block of pixel panels the space offers (1x1 convs)
MAX_TILE_BLOCK = 32     # the largest block of pixel tiles the space offers (rows form)
REDUCE_UNROLLS = (1, 2, 4)
MIN_REDUCE_BLOCK = 4    # the fewest input channels per block of the 'reduce:<k>' layouts
# parallel chunks the 'reduce:<k>' layouts (and the cvec form's 'channels') make of their
# channel x pixel tiles: a multiple of this, so that 2 or 4 threads get equal shares
PARALLEL_CHUNKS = 4
CVEC_MIN_TILES = 4      # channel tiles the cvec form's 'channels' layout needs to share out
# channel tiles (with the batch and groups) the rows form's heuristic needs to put them in
# parallel ('blocks', 'whole_channels'): with fewer, pixel tiles go in parallel (a 24-channel
# stem's 3 tiles on 2 threads left one thread idle a third of the time; 0: no minimum)
ROWS_MIN_TILES = 4
CVEC_MIN_BLOCKS = 4     # input-channel blocks the cvec form's first 'reduce:<k>' makes at least
# blocks of pixel panels the 1x1 heuristic's 'blocks:<b>' leaves at least, else b is 1: the
# threads claim blocks as they go, and with few of them the last round leaves threads idle
# (7 blocks on 2 threads: one runs 4; benchmarks/CONV_SHAPES.md)
MIN_PANEL_BLOCKS = 16


def conv2d_key(out) -> str:
    """The workload key of the conv2d strategy's records for `out`."""
    return strategy_key(out, STRATEGY)


def conv2d_space(out: Tensor) -> ConfigSpace:
    """The knobs of `out`'s schedule (see the module docstring); a single config for the
    direct form."""
    space = ConfigSpace()
    conv2d_schedule(space, out)
    return space


def schedule_conv2d(out: Tensor):
    """A schedule of `out`: a conv2d_compute output or one elementwise stage over it; the
    best record of conv2d_key(out) under apply_history_best, else the default config
    (the strategy's heuristic choices)."""
    space = conv2d_space(out)
    rec = dispatch_lookup(conv2d_key(out), space)
    cfg = space.default() if rec is None else ConfigEntity.from_json_dict(space, rec.config)
    return conv2d_schedule(cfg, out)


def conv2d_strategy(cfg, outputs, args=None):
    """(schedule, args) as te.autotune's tasks take a space generator: `outputs` the one
    conv output (or epilogue stage over it), `args` defaulting to the placeholders then it."""
    from .auto_space import default_args
    outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    if len(outs) != 1:
        raise ArgumentError(f"te.autotune: the conv2d strategy schedules one output (the "
                            f"conv's or one elementwise stage over it), got {len(outs)}")
    args = list(args) if args is not None else default_args(outs)
    return conv2d_schedule(cfg, outs[0]), args


def conv2d_schedule(cfg, out: Tensor):
    """The schedule `cfg` chooses for `out` (see the module docstring)."""
    if not isinstance(out, Tensor):
        raise ArgumentError(f"te.autotune.schedule_conv2d: out must be a te.Tensor (the "
                            f"conv's output or an elementwise stage over it), got "
                            f"{type(out).__name__}")
    found = C.producer_ops(out)
    gemm = C.by_tag(found, (GEMM_TAG,))
    if gemm is None:
        conv = C.by_tag(found, C.DIRECT_TAGS)
        if conv is None:
            raise ArgumentError(f"te.autotune.schedule_conv2d: out ('{out.op.name}') reads "
                                f"no conv2d stage (tags {GEMM_TAG!r} or {C.DIRECT_TAGS})")
        return C.schedule_direct(out, found, conv)
    pack = C.by_tag(found, (PACK_TAG,))
    crop = C.by_tag(found, (CROP_TAG,))
    if pack is None or crop is None:
        raise ArgumentError(f"te.autotune.schedule_conv2d: stage '{gemm.name}' lacks its "
                            f"pack or crop stage (tags {PACK_TAG!r}, {CROP_TAG!r})")
    s = create_schedule(out.op)
    if gemm.attrs.get("form") == "cvec":
        _define_cvec(cfg, gemm, pack)
        return _schedule_cvec(cfg, s, out, found, gemm, pack)
    if gemm.attrs.get("form") == "panels":
        _define_panels(cfg, gemm, pack)
        return _schedule_panels(cfg, s, out, found, gemm, pack)
    _define_rows(cfg, gemm, pack)
    return _schedule_rows(cfg, s, out, found, gemm, pack)


def _define_rows(cfg, gemm: ComputeOp, pack: ComputeOp) -> None:
    """The rows form's knobs, the heuristic's choice first: per channel block where the
    GEMM has no group axis and one image's packed input fits in L2 or its weights are
    too large to stream once per pixel tile (C.STREAMED_WEIGHT_BYTES), else the whole
    GEMM with channel tiles in parallel where it fits, pixel tiles where not; pixel
    tiles also where there are fewer than ROWS_MIN_TILES channel tiles to share out. 'tiles:<b>':
    the whole GEMM in blocks of b pixel tiles (b a divisor of the tile count; the
    heuristic's b is the largest whose input fits in half of L2), channel tiles inside.
    'reduce:<k>' (groups 1, sizes from _reduce_blocks): the whole GEMM in blocks of k input
    channels, first where the GEMM reads several stride phases."""
    fits = _channels_outer(pack) or (len(gemm.axis) == 3 and
                                     _weight_bytes(gemm) > C.STREAMED_WEIGHT_BYTES)
    mr = gemm.attrs["tile"][0]
    channel_tiles = math.prod(int(d.value) for d in gemm.output(0).shape[:-1]) // mr
    fits = fits and channel_tiles >= ROWS_MIN_TILES
    tiles = [f"tiles:{b}" for b in _tile_blocks(gemm, pack)]
    if len(gemm.axis) == 3:
        layouts = ["blocks", "whole_channels", "whole_pixels", *tiles] if fits else \
            ["whole_pixels", *tiles, "blocks", "whole_channels"]
        reduce = [f"reduce:{k}" for k in _reduce_blocks(pack)]
        _, _, pha, phb, _ = (int(d.value) for d in pack.output(0).shape)
        layouts = [*reduce, *layouts] if pha * phb > 1 else [*layouts, *reduce]
    else:
        layouts = ["whole_channels", "whole_pixels", *tiles] if fits else \
            ["whole_pixels", *tiles, "whole_channels"]
    cfg.define_knob("layout", layouts)
    if _taps(gemm) > 1:
        cfg.define_knob("reduce_order", ["channels_taps", "taps_channels"])
        cfg.define_knob("unroll_taps", [True, False])


def _weight_bytes(gemm: ComputeOp) -> int:
    """Bytes of the weights the GEMM reads (output channels padded to the tile)."""
    extents = [int(d.value) for d in gemm.output(0).shape[1:-1]]
    return math.prod(extents) * _taps(gemm) * int(gemm.reduce_axis[0].dom.extent.value) * 4


def _reduce_blocks(pack: ComputeOp, min_blocks: int = 1, channels: int | None = None) -> list:
    """The sizes of the 'reduce:<k>' layouts: the powers of two k, MIN_REDUCE_BLOCK <= k <
    input channels, that divide the input channels, the heuristic's first (the largest
    whose k channels of packed input take at most a quarter of L2 and that leaves at least
    `min_blocks` blocks). `channels`: those a group's reduction runs over (the pack's
    channels where None: groups 1)."""
    _, total, pha, phb, columns = (int(d.value) for d in pack.output(0).shape)
    channels = total if channels is None else channels
    sizes = [k for k in (2 ** e for e in range(channels.bit_length()))
             if MIN_REDUCE_BLOCK <= k < channels and channels % k == 0]
    if not sizes:
        return []
    fit = [k for k in sizes if k * pha * phb * columns * 4 <= C.l2_bytes() // 4
           and channels // k >= min_blocks]
    best = max(fit) if fit else sizes[0]
    return [best] + [k for k in sizes if k != best]


def _tile_blocks(gemm: ComputeOp, pack: ComputeOp) -> list:
    """The sizes of the 'tiles:<b>' layouts: the divisors b of the pixel tile count,
    1 < b < tiles (1 is 'whole_pixels'), up to MAX_TILE_BLOCK, the one the heuristic takes
    first (the largest whose block reads at most half of L2 of packed input)."""
    nr = gemm.attrs["tile"][1]
    npix = int(gemm.output(0).shape[-1].value)
    count = npix // nr
    sizes = [b for b in range(2, min(count - 1, MAX_TILE_BLOCK) + 1) if count % b == 0]
    if not sizes:
        return []
    # a block of b tiles reads b * nr columns of every channel (of its group) and phase,
    # and the kernel's reach past them (at most the pack's columns past the GEMM's)
    _, channels, pha, phb, columns = (int(d.value) for d in pack.output(0).shape)
    groups = 1 if len(gemm.axis) == 3 else int(gemm.output(0).shape[1].value)
    rows = channels // groups * pha * phb
    fit = [b for b in sizes if rows * (b * nr + columns - npix) * 4 <= C.l2_bytes() // 2]
    best = max(fit) if fit else sizes[0]
    return [best] + [b for b in sizes if b != best]


def _schedule_pack(s, pack: ComputeOp, lanes: int) -> None:
    """The rows and cvec forms' pack: (batch, channel) in parallel, each phase row a
    vectorized run; inlined where it reads no zeros (attrs['inline']: a 1x1 conv's)."""
    if pack.attrs.get("inline"):
        s[pack].compute_inline()
        return
    n, c, a, b, q = s[pack].op.axis
    wq = pack.attrs["pitch"]
    qo, qi = s[pack].split(q, factor=wq)
    s[pack].parallel(s[pack].fuse(n, c))
    s[pack].vectorize(s[pack].split(qi, factor=min(lanes, wq))[1])


def _reduce_inner(cfg, s, stage, taps: bool) -> tuple:
    """(the register tile's reduction loops in the order cfg['reduce_order'] takes, the
    ones to unroll besides the tile's own): kernel taps unrolled unless
    cfg['unroll_taps'] says not."""
    rc, ry, rx = s[stage].op.reduce_axis
    order = [ry, rx, rc] if taps and cfg["reduce_order"].val == "taps_channels" \
        else [rc, ry, rx]
    return order, ((ry, rx) if not taps or cfg["unroll_taps"].val else ())


def _define_cvec(cfg, gemm: ComputeOp, pack: ComputeOp) -> None:
    """The cvec form's knobs, the heuristic's choice first. 'layout': 'channels' (channel
    tiles, with the batch, in parallel, pixel tiles inside, each tile accumulating in
    registers over every input channel and tap) where one image's packed input fits in
    L2, one channel tile's weights (re-read per pixel tile) take at most half of it, and
    there are CVEC_MIN_TILES channel tiles to share out; 'pixels' (pixel tiles in
    parallel, channel tiles inside); 'reduce:<k>' (blocks of k input channels outermost,
    as the rows form's, sizes from _reduce_blocks, the first making CVEC_MIN_BLOCKS
    blocks): first otherwise. (A 3x3 conv over 512 channels at 7 x 7: a tile's weights
    and the input together nearly fill L2; benchmarks/CONV_SHAPES.md has the timings.)"""
    tiles = int(gemm.output(0).shape[1].value)
    per_group = int(gemm.reduce_axis[0].dom.extent.value)   # a group's input channels
    reduce = [f"reduce:{k}" for k in _reduce_blocks(pack, CVEC_MIN_BLOCKS, per_group)]
    mr = gemm.attrs["tile"][0]
    tile_weights = mr * per_group * _taps(gemm) * 4
    if _channels_outer(pack) and tiles >= CVEC_MIN_TILES and \
            tile_weights <= C.l2_bytes() // 2:
        layouts = ["channels", "pixels", *reduce]
    else:
        layouts = [*reduce, "channels", "pixels"]
    cfg.define_knob("layout", layouts)
    if _taps(gemm) > 1:
        cfg.define_knob("reduce_order", ["channels_taps", "taps_channels"])
        cfg.define_knob("unroll_taps", [True, False])


def _schedule_cvec(cfg, s, out: Tensor, found: list, gemm: ComputeOp, pack: ComputeOp):
    """The cvec form: mr channels (vectors) x nr pixels (broadcasts) per register tile,
    the pixel loop unrolled; per 'layout' (see _define_cvec). The crop (with the
    epilogue) reads the GEMM's result as the rows form's does."""
    lanes = C.vector_lanes(out.dtype)
    _schedule_pack(s, pack, lanes)
    nr = gemm.attrs["tile"][1]
    Yc = gemm.output(0)
    layout = cfg["layout"].val
    taps = _taps(gemm) > 1
    if layout.startswith("reduce:"):
        n, fo, p, fi = s[Yc].op.axis
        rc, ry, rx = s[Yc].op.reduce_axis
        rco, rci = s[Yc].split(rc, factor=int(layout.split(":")[1]))
        po, pi = s[Yc].split(p, factor=nr)
        inner, unrolled = _reduce_inner(cfg, s, Yc.op, taps)
        inner = [rci if ax is rc else ax for ax in inner]
        _reduce_in_chunks(s[Yc], (n, fo, po, rco), (*inner, pi, fi),
                          int(Yc.shape[1].value), int(Yc.shape[2].value) // nr)
        stage = s[Yc]
    else:
        local = s.cache_write(Yc, "local")
        n, fo, p, fi = s[Yc].op.axis
        po, pi = s[Yc].split(p, factor=nr)
        if layout == "channels":    # pixel chunks where the channel tiles share out unevenly
            chunks = _pixel_chunks(int(Yc.shape[1].value), int(Yc.shape[2].value) // nr)
            pco, inner_tile = s[Yc].split(po, nparts=chunks)
            s[Yc].reorder(n, fo, pco, inner_tile, pi, fi)
            s[Yc].parallel(s[Yc].fuse(n, fo, pco))
        else:
            inner_tile = fo
            s[Yc].reorder(n, po, fo, pi, fi)
            s[Yc].parallel(s[Yc].fuse(n, po))
        s[Yc].unroll(pi)
        s[Yc].vectorize(fi)
        s[local].compute_at(s[Yc], inner_tile)
        _, _, pi, fi = s[local].op.axis
        inner, unrolled = _reduce_inner(cfg, s, local.op, taps)
        s[local].reorder(*inner, pi, fi)
        stage = s[local]
    for ax in (*unrolled, pi):
        stage.unroll(ax)
    stage.vectorize(fi)
    C.epilogue(s, out, found, gemm)
    C.out_loops(s, out, lanes)
    return s


def _reduce_chunks(tiles: int, pixel_tiles: int) -> tuple:
    """(channel chunks, pixel chunks) in parallel in a 'reduce:<k>' layout, PARALLEL_CHUNKS
    in all where the pixel tiles allow: the channel tiles in the largest number of equal
    chunks that divides PARALLEL_CHUNKS (each chunk reads the block's input once), the
    pixel tiles in the rest. (Three chunks, or one, left one of 2 threads idle for a third
    of the time, or all of it: a 3x3 conv to 32 channels is one tile of the cvec form on
    AVX-512.)"""
    channels = max(c for c in range(1, PARALLEL_CHUNKS + 1)
                   if tiles % c == 0 and PARALLEL_CHUNKS % c == 0)
    pixels = max(1, min(PARALLEL_CHUNKS // channels, pixel_tiles))
    if channels * pixels == 1:    # one pixel tile: any divisor of the channel tiles
        channels = max(c for c in range(1, PARALLEL_CHUNKS + 1) if tiles % c == 0)
    return channels, pixels


def _reduce_in_chunks(stage, loops, inner, tiles: int, pixel_tiles: int) -> None:
    """The 'reduce:<k>' loop nest of both forms: `loops` (batch, channel tiles, pixel
    tiles, input-channel blocks) as (batch, channel chunks, pixel chunks) in parallel
    (_reduce_chunks), then the blocks, the channel and pixel tiles of the chunk, `inner`."""
    n, fo, po, rco = loops
    fc, pc = _reduce_chunks(tiles, pixel_tiles)
    fco, fci = stage.split(fo, nparts=fc)
    pco, poi = stage.split(po, nparts=pc)
    stage.reorder(n, fco, pco, rco, fci, poi, *inner)
    stage.parallel(stage.fuse(n, fco, pco))


def _pixel_chunks(tiles: int, pixel_tiles: int) -> int:
    """Chunks of the pixel tiles that, with each of `tiles` channel tiles in parallel, make
    a multiple of PARALLEL_CHUNKS parallel iterations where the pixel tiles allow."""
    return max(1, min(PARALLEL_CHUNKS // math.gcd(tiles, PARALLEL_CHUNKS), pixel_tiles))


def _schedule_rows(cfg, s, out: Tensor, found: list, gemm: ComputeOp, pack: ComputeOp):
    lanes = C.vector_lanes(out.dtype)
    _schedule_pack(s, pack, lanes)
    # the GEMM: an mr x nr tile accumulates in registers over (channels, kernel rows,
    # kernel columns); computed per channel block, or whole before the crop
    mr, nr = gemm.attrs["tile"]
    Yf = gemm.output(0)
    layout = cfg["layout"].val
    if layout.startswith("reduce:"):
        _gemm_reduce_blocks(cfg, s, Yf, (mr, nr), int(layout.split(":")[1]),
                            _taps(gemm) > 1)
        C.epilogue(s, out, found, gemm)
        C.out_loops(s, out, lanes)
        return s
    local = s.cache_write(Yf, "local")
    if layout == "blocks":
        _gemm_in_blocks(s, out, found, gemm, lanes)
    elif layout.startswith("tiles:"):
        _gemm_tile_blocks(s, Yf, (mr, nr), int(layout.split(":")[1]))
        C.epilogue(s, out, found, gemm)
        C.out_loops(s, out, lanes)
    else:
        _gemm_whole(s, Yf, (mr, nr), layout == "whole_channels")
        C.epilogue(s, out, found, gemm)
        C.out_loops(s, out, lanes)
    lf, lp = s[local].op.axis[-2:]
    s[local].compute_at(s[Yf], s[Yf].leaf_iter_vars[-3])
    order, unrolled = _reduce_inner(cfg, s, local.op, _taps(gemm) > 1)
    s[local].reorder(*order, lf, lp)
    for ax in (*unrolled, lf):
        s[local].unroll(ax)
    s[local].vectorize(lp)
    return s


def _taps(gemm: ComputeOp) -> int:
    """Kernel taps (rows x columns) of the GEMM's reduction."""
    return math.prod(int(iv.dom.extent.value) for iv in gemm.reduce_axis[1:])


def _gemm_whole(s, Yf: Tensor, tile, channels_outer: bool) -> None:
    """The whole GEMM as a stage of its own, before the crop: channel tiles (with batch and
    group) in parallel and pixel tiles inside, or the other way round."""
    mr, nr = tile
    axes = list(s[Yf].op.axis)
    fo, fi = s[Yf].split(axes[-2], factor=mr)
    po, pi = s[Yf].split(axes[-1], factor=nr)
    outer, inner = (fo, po) if channels_outer else (po, fo)
    s[Yf].reorder(*axes[:-2], outer, inner, fi, pi)
    s[Yf].parallel(s[Yf].fuse(*axes[:-2], outer))
    s[Yf].unroll(fi)
    s[Yf].vectorize(pi)


def _gemm_tile_blocks(s, Yf: Tensor, tile, block: int) -> None:
    """The whole GEMM before the crop in blocks of `block` pixel tiles (with batch and
    group) in parallel, channel tiles inside, the block's pixel tiles inside those: each
    channel tile's weights are streamed once per block, not once per pixel tile, over
    input columns that stay in L2 while the block lasts."""
    mr, nr = tile
    axes = list(s[Yf].op.axis)
    fo, fi = s[Yf].split(axes[-2], factor=mr)
    po, pi = s[Yf].split(axes[-1], factor=nr)
    pbo, pbi = s[Yf].split(po, factor=block)
    s[Yf].reorder(*axes[:-2], pbo, fo, pbi, fi, pi)
    s[Yf].parallel(s[Yf].fuse(*axes[:-2], pbo))
    s[Yf].unroll(fi)
    s[Yf].vectorize(pi)


def _gemm_reduce_blocks(cfg, s, Yf: Tensor, tile, block: int, taps: bool) -> None:
    """The whole GEMM before the crop in PARALLEL_CHUNKS chunks of its channel x pixel
    tiles in parallel (_reduce_chunks), each over the input channels in blocks of
    `block`, channel tiles then pixel tiles inside (the accumulators' init hoisted before
    the blocks): a block's packed input stays in L2 while the chunk's channel tiles read
    it, and the mr x nr tile accumulates over the block's channels and taps, read from and
    written to the GEMM's buffer once per block."""
    mr, nr = tile
    n, f, p = s[Yf].op.axis
    rc = s[Yf].op.reduce_axis[0]
    rco, rci = s[Yf].split(rc, factor=block)
    fo, fi = s[Yf].split(f, factor=mr)
    po, pi = s[Yf].split(p, factor=nr)
    inner, unrolled = _reduce_inner(cfg, s, Yf.op, taps)
    inner = [rci if ax is rc else ax for ax in inner]
    _reduce_in_chunks(s[Yf], (n, fo, po, rco), (*inner, fi, pi),
                      int(Yf.shape[1].value) // mr, int(Yf.shape[2].value) // nr)
    for ax in (*unrolled, fi):
        s[Yf].unroll(ax)
    s[Yf].vectorize(pi)


def _gemm_in_blocks(s, out: Tensor, found: list, gemm: ComputeOp, lanes: int) -> None:
    """The GEMM computed per block of mr output channels (with the batch) inside the
    output's parallel loop, each block's result cropped (through the epilogue) right after,
    while it is in L2, not written whole and read back; each block streams its weights
    once over every pixel tile, which re-read the packed input from L2 (groups 1)."""
    mr, nr = gemm.attrs["tile"]
    Yf = gemm.output(0)
    C.epilogue(s, out, found, gemm)
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


def _define_panels(cfg, gemm: ComputeOp, pack: ComputeOp) -> None:
    """A 1x1 conv's knobs, the heuristic's choice first: 'layout' is 'channels' (channel
    tiles outermost, where one image's packed input fits in L2) or 'blocks:<b>' (blocks of
    b pixel panels in parallel; the heuristic's b is the largest divisor of the panel count
    up to C.PANEL_BLOCK that leaves at least MIN_PANEL_BLOCKS blocks, else 1);
    'reduce_unroll' channel steps."""
    panels = int(pack.output(0).shape[1].value)
    sizes = [b for b in range(1, min(panels, MAX_PANEL_BLOCK) + 1) if panels % b == 0]
    # a divisor of the panel count (a partial block would guard every tile), leaving
    # enough blocks to share out evenly, or single panels
    best = max(b for b in sizes
               if b <= C.PANEL_BLOCK and (b == 1 or panels // b >= MIN_PANEL_BLOCKS))
    blocks = [f"blocks:{b}" for b in [best] + [b for b in sizes if b != best]]
    cfg.define_knob("layout", ["channels", *blocks] if _channels_outer(pack)
                    else [*blocks, "channels"])
    channels = int(gemm.reduce_axis[0].dom.extent.value)
    cfg.define_knob("reduce_unroll", [u for u in REDUCE_UNROLLS if channels % u == 0])


def _schedule_panels(cfg, s, out: Tensor, found: list, gemm: ComputeOp, pack: ComputeOp):
    """A 1x1 conv: the output's own loops are the GEMM's tiles (pixels fused, split by nr;
    channels split by mr), so each mr x nr tile is accumulated in registers and written
    once, through the epilogue. With channel tiles outermost each streams its weights once
    over the whole packed input (L2-resident); with blocks of pixel panels in parallel each
    block packs its panels just before its tiles read them (an L2-sized buffer), and the
    channel tiles go around the block's panels so that the mr weight rows are reused
    across them."""
    mr, nr = gemm.attrs["tile"]
    C.epilogue(s, out, found, gemm)
    n, f, y, x = s[out].op.axis
    pixels = s[out].fuse(y, x)
    fo, fi = s[out].split(f, factor=mr)
    po, pi = s[out].split(pixels, factor=nr)
    s[out].unroll(fi)
    s[out].vectorize(pi)
    pn, a, c, j = s[pack].op.axis
    s[pack].vectorize(j)
    layout = cfg["layout"].val
    if layout == "channels":
        s[out].reorder(n, fo, po, fi, pi)
        s[out].parallel(s[out].fuse(n, fo))
        s[gemm].compute_at(s[out], po)
        s[pack].parallel(s[pack].fuse(pn, a))
    else:
        pbo, pbi = s[out].split(po, factor=int(layout.split(":")[1]))
        s[out].reorder(n, pbo, fo, pbi, fi, pi)
        block_loop = s[out].fuse(n, pbo)
        s[out].parallel(block_loop)
        s[gemm].compute_at(s[out], pbi)
        s[pack].compute_at(s[out], block_loop)
        s[pack].reorder(c, a, j)
    yf, yp = s[gemm].op.axis[-2:]
    (rc,) = s[gemm].op.reduce_axis
    unroll = cfg["reduce_unroll"].val
    if unroll == 1:
        s[gemm].reorder(rc, yf, yp)
    else:   # unroll steps of the channel loop around the tile's own unrolled rows
        rco, rci = s[gemm].split(rc, factor=unroll)
        s[gemm].reorder(rco, rci, yf, yp)
        s[gemm].unroll(rci)
    s[gemm].unroll(yf)
    s[gemm].vectorize(yp)
    return s


def _channels_outer(pack: ComputeOp) -> bool:
    """Whether one image's packed input fits in this host's L2 (C.l2_bytes): then
    output-channel tiles go outermost (in parallel) and each streams its weights once over
    all pixel tiles, which re-read the packed input from L2; otherwise pixel tiles go
    outermost, and the weights are re-read per pixel block (small late layers have the
    largest weights: 7x7 images, 512-2048 channels)."""
    shape = [int(d.value) for d in pack.output(0).shape[1:]]
    return math.prod(shape) * 4 <= C.l2_bytes()
