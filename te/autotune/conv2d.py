"""The conv2d strategy: which compute a convolution gets, by its attributes, and its schedule.

conv2d_compute picks conv2d_nchw_gemm (a GEMM over padded, phase-split rows with a
register-tiled micro-kernel) where the per-group channel counts fill a register tile, else
conv2d_nchw_phased (direct, over a phase-split padded input: depthwise and narrow grouped
convs; conv2d_nchw where shapes are symbolic). The GEMM's form and register tile are chosen
per shape (conv2d_gemm_form: pixels as vectors, the tile from conv2d_tile by the GEMM's
pixel and channel counts, or output channels as vectors ('cvec', CVEC_PIXELS pixels per
tile) where that pads less; conv2d_gemm_tile gives the tile, conv2d_weight_tile its mr,
the packed weights' layout). The
schedule (conv2d_space.schedule_conv2d) takes the kernel's output tensor: the conv's own
output, or one elementwise stage over it (a fused epilogue: bias, relu, residual add) that
is then computed in the conv's final (cropping) loop; the GEMM form's choices are knobs
there, the direct form's schedule (schedule_direct) and the helpers both share are here.
Stages are found by tag. Imports te.compute, te.schedule, te.errors,
micro_kernel.vector_lanes and runtime.cache_sizes.
"""
from __future__ import annotations

from runtime import cache_sizes

from ..compute import ops
from ..compute.ops.conv2d_gemm import PACK_TAG, gemm_pixels
from ..compute.ops.nn import conv2d_geometry
from ..compute.api import placeholder
from ..compute.tensor import ComputeOp, Tensor
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule
from .micro_kernel import vector_lanes

DIRECT_TAGS = ("conv2d_nchw", "depthwise_conv2d_nchw")
MIN_GEMM_CHANNELS = 4    # output channels per group: below that the tile is mostly padding
# weights (rows form, groups 1) above this are read per channel block, even where the
# packed input exceeds L2: streamed once per pixel tile they would come from DRAM each time
STREAMED_WEIGHT_BYTES = 4 << 20
PANEL_BLOCK = 7          # pixel panels packed and computed together (1x1 convs)
WIDE_TILE_COST = 0.94    # time per padded pixel of a 3-vector tile, relative to 2 vectors
# AVX2: time per padded element of a 6x16 tile relative to 4x24: the rows form, the 1x1
# panels form below LARGE_PANELS pixels, and from there on (fewer passes over the packed
# input: one per 6 output channels instead of 4)
NARROW_TILE_COST = (1.05, 1.02, 0.92)
LARGE_PANELS = 768
MIN_GEMM_REDUCTION = 8   # input channels per group x kernel taps (depthwise 3x3: 9)
# the 'cvec' form's tile: 2 vectors of output channels by 6 broadcast pixels (12 of AVX2's
# 16 registers accumulate); its time per padded element relative to the rows form's 4x24
# (benchmarks/CONV_SHAPES.md). On 16-lane (AVX-512) hosts 2 vectors by 7 pixels, relative
# to the rows form's 8x32 / 8x48: on AMD Zen 4, 6, 8, 10 and 12 pixels measured 2-11%
# slower than 7 over ResNet-50's 3x3 convs (whose 14x14 and 7x7 images are whole tiles of
# 7), 14 (28 accumulators) 19% slower (0: those hosts keep the rows form)
CVEC_PIXELS = 6
CVEC_WIDE_PIXELS = 7
CVEC_COST = 1.05
CVEC_WIDE_COST = 1.0
# a 1x1 conv (groups 1) in the cvec form, per padded element relative to the panels form's
# tile: its crop (a transpose out of the channel vectors) costs more against a 1x1 conv's
# short work per output than a 3x3's. On AMD Zen 4 cvec ran 4-15% faster than the panels
# at ResNet-50's 14 x 14 and 7 x 7 outputs (which the panels pad by 14% and 31%) and 7-80%
# slower at 28 x 28 and 56 x 56 (benchmarks/CONV_SHAPES.md). 8-lane hosts: not measured, so
# 0 (1x1 convs keep the panels there)
CVEC_POINTWISE_COST = 0.0
CVEC_WIDE_POINTWISE_COST = 1.08
# AVX-512: a cvec GEMM of at most 2 x CVEC_ROW_PIXELS pixels (a group's) and at most
# CVEC_ROW_TAPS kernel taps takes one vector of channels by its pixels (in the fewest tiles
# of at most CVEC_ROW_PIXELS) instead of 2 vectors by 7: each weight vector, loaded once,
# serves every pixel. Such GEMMs are the small late layers, whose weights come from DRAM in
# a model (ResNet-50's Winograd 1x3 conv at 7 x 7, 14 pixels a group: 19 MB of weights;
# its 7 x 7 1x1s: 4 MB), where 2 x 7 tiles re-read each weight from L2 per pixel tile. 28
# pixels (30 registers live), 3x3 kernels and a stride-2 1x1 measured slower
# (benchmarks/CONV_SHAPES.md). 0: off
CVEC_ROW_PIXELS = 25
CVEC_ROW_TAPS = 3
# input channels the cvec form needs: a stem's (3 channels, 7x7 stride 2: a short reduction
# over a large output) measured 1.2-1.3x slower than in the rows form
CVEC_MIN_CHANNELS = 16
CVEC_ON = True           # (benchmarks turn it off to compare the forms)
# a depthwise conv pads each channel in its own parallel iteration (schedule_direct);
# off: one padded copy of the whole input first (benchmarks compare the two)
PAD_PER_CHANNEL = True


def l2_bytes() -> int:
    """The L2 cache per core that the schedules size their loops for: this host's (read
    once by runtime.cache_sizes, 1 MiB where unreadable; te.cache keys code by it)."""
    return cache_sizes.l2_bytes()


def conv2d_tile(dtype: str = "float32", pixels: int | None = None,
                channels: int | None = None, pointwise: bool = False) -> tuple:
    """(mr, nr): output channels x pixels of the register tile, the candidate of
    tile_candidates(dtype, pointwise) with the least estimated time: the GEMM's `pixels`
    (gemm_pixels) and output `channels` per group (where given) each rounded up to whole
    tiles, times the tile's cost factor (time per padded element relative to the first
    candidate); ties and `pixels` None take the first-listed default. On AVX-512 8
    channels by 2 or 3 vectors (16 or 24 accumulators of the 32 registers): 3 vectors
    load fewer operands per FMA, and are taken where they leave little more padding than
    2 (not for 7x7 or 14x14 images). On AVX2 (16 registers, 12 accumulators) 4 channels by
    3 vectors or 6 by 2: `pointwise` (the 1x1 panels form) takes 6x16 for 28x28 images and
    up wherever its padded channels allow, both forms below that 6x16 only where 24-pixel
    tiles pad more (14x14, 13x13, 7x7 images)."""
    candidates = tile_candidates(dtype, pointwise, pixels)
    if pixels is None:
        return candidates[0][:2]

    def cost(cand):
        mr, nr, factor = cand
        return _ceil_to(pixels, nr) * (_ceil_to(channels, mr) if channels else mr) * factor
    return min(candidates, key=cost)[:2]


def tile_candidates(dtype: str = "float32", pointwise: bool = False,
                    pixels: int | None = None) -> list:
    """[(mr, nr, cost factor)] conv2d_tile chooses from for a GEMM of `pixels` columns,
    the default first (see there); the factors are measured (benchmarks/CONV_SHAPES.md)."""
    lanes = vector_lanes(dtype)
    if lanes >= 16:
        return [(8, 2 * lanes, 1.0), (8, 3 * lanes, WIDE_TILE_COST)]
    factor = NARROW_TILE_COST[0 if not pointwise else
                              2 if (pixels or 0) >= LARGE_PANELS else 1]
    return [(4, 3 * lanes, 1.0), (6, 2 * lanes, factor)]


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def conv2d_gemm_tile(data_shape, kernel_shape, strides=1, padding=0, dilation=1,
                     groups: int = 1, dtype: str = "float32") -> tuple | None:
    """(mr, nr) of the register tile where conv2d_compute picks the GEMM form for these
    constant shapes and conv geometry (conv2d_nchw's arguments), else None (a direct
    form, or shapes that are not constant ints)."""
    plan = conv2d_gemm_form(data_shape, kernel_shape, strides, padding, dilation, groups,
                            dtype)
    return None if plan is None else plan[1]


def conv2d_gemm_form(data_shape, kernel_shape, strides=1, padding=0, dilation=1,
                     groups: int = 1, dtype: str = "float32") -> tuple | None:
    """(form, (mr, nr)) where conv2d_compute picks the GEMM form (conv2d_nchw_gemm's
    `form`: 'rows' or 'cvec') for these constant shapes and geometry, else None. 'cvec'
    where vectors of output channels pad fewer elements than the rows form's tile pads
    (its dropped columns and partial tiles; per group), each weighed by its cost factor
    (CVEC_COST / CVEC_WIDE_COST; a 1x1 conv of groups 1 by CVEC_POINTWISE_COST /
    CVEC_WIDE_POINTWISE_COST against its panels). The tile: 2 vectors of channels by
    CVEC_PIXELS pixels on 8-lane hosts, CVEC_WIDE_PIXELS on 16-lane ones, where one vector
    by all the pixels of a small stride-1 GEMM (_cvec_tile, CVEC_ROW_PIXELS) is not taken."""
    dims = (*data_shape, *kernel_shape)
    if len(dims) != 8 or any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
        return None
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        return None
    oc, icg, kh, kw = kernel_shape
    if oc // groups < MIN_GEMM_CHANNELS or icg * kh * kw < MIN_GEMM_REDUCTION:
        return None
    stride, dil, _, khw, out_hw = conv2d_geometry(
        placeholder(tuple(data_shape), dtype), placeholder(tuple(kernel_shape), dtype),
        strides, padding, dilation, groups, "conv2d_nchw")
    pixels = gemm_pixels(out_hw, khw, stride, dil, groups)
    pointwise = kh == kw == 1 and groups == 1
    tile = conv2d_tile(dtype, pixels, oc // groups, pointwise)
    lanes = vector_lanes(dtype)
    nr = CVEC_WIDE_PIXELS if lanes >= 16 else CVEC_PIXELS
    if pointwise:
        cost = CVEC_POINTWISE_COST if lanes < 16 else CVEC_WIDE_POINTWISE_COST
    else:
        cost = CVEC_COST if lanes < 16 else CVEC_WIDE_COST
    if not CVEC_ON or not nr or not cost or icg < CVEC_MIN_CHANNELS:
        return "rows", tile
    factor = dict((c[:2], c[2])
                  for c in tile_candidates(dtype, pointwise, pixels))[tile]
    mr = 2 * lanes
    rows_cost = _ceil_to(pixels, tile[1]) * _ceil_to(oc // groups, tile[0]) * factor
    cvec_cost = _ceil_to(out_hw[0] * out_hw[1], nr) * _ceil_to(oc // groups, mr) * cost
    if cvec_cost > rows_cost:
        return "rows", tile
    row = kh * kw <= CVEC_ROW_TAPS and tuple(stride) == (1, 1)
    return "cvec", _cvec_tile(lanes, out_hw[0] * out_hw[1], row, mr, nr)


def _cvec_tile(lanes: int, pixels: int, row: bool, mr: int, nr: int) -> tuple:
    """The cvec form's (mr, nr): on 16-lane hosts, for a `row` conv (stride 1, at most
    CVEC_ROW_TAPS taps), one vector of channels by a GEMM's few pixels (see
    CVEC_ROW_PIXELS: in the fewest tiles that hold them, as even as they come), else
    (mr, nr) as given."""
    if (lanes < 16 or not CVEC_ROW_PIXELS or not row or pixels <= nr
            or pixels > CVEC_ROW_PIXELS * 2):
        return mr, nr
    tiles = -(-pixels // CVEC_ROW_PIXELS)
    return lanes, -(-pixels // tiles)


def conv2d_weight_tile(data_shape, kernel_shape, groups: int = 1, dtype: str = "float32",
                       strides=1, padding=0, dilation=1) -> int | None:
    """mr (output channels of the register tile) where conv2d_compute picks the GEMM form
    for these constant shapes and conv geometry, which then reads a weight pre-packed by
    te.compute.ops.conv2d_pack_weight(kernel, groups, mr) as well; None where it picks a
    direct form (or the shapes are not constant ints). mr depends on the output's pixel
    count (conv2d_tile), so the geometry must be the conv's own."""
    tile = conv2d_gemm_tile(data_shape, kernel_shape, strides, padding, dilation, groups, dtype)
    return None if tile is None else tile[0]


def conv2d_compute(data: Tensor, kernel: Tensor, strides=1, padding=0, dilation=1,
                   groups: int = 1, name: str = "conv2d", packed: Tensor | None = None
                   ) -> Tensor:
    """The output of a conv2d (conv2d_nchw's arguments) in the form its schedule wants;
    bad arguments raise conv2d_nchw's errors, whichever form they would get. `packed`:
    the kernel already in conv2d_pack_weight's layout (for conv2d_weight_tile's mr), read
    instead of `kernel`, which then only gives the shapes; only for the GEMM form. The cvec
    form is taken only with `packed` weights (conv2d_weight_tile's mr is its tile's then);
    plain ones keep the rows form."""
    stride, dil, _, khw, out_hw = conv2d_geometry(data, kernel, strides, padding, dilation,
                                                  groups, "conv2d_nchw")
    static = all(hasattr(d, "value") for d in (*data.shape, *kernel.shape))
    plan = conv2d_gemm_form(*([int(d.value) for d in t.shape] for t in (data, kernel)),
                            strides, padding, dilation, groups, data.dtype) if static else None
    if plan is not None and plan[0] == "cvec" and packed is None:
        # cvec reads a vector of mr channels per step: from plain (OC, C, KH, KW) weights
        # that is a gather lane by lane (DenseNet-121 at O0 ran 1.8x slower), so plain weights
        # keep the rows form and its tile
        plan = "rows", conv2d_tile(data.dtype, gemm_pixels(out_hw, khw, stride, dil, groups),
                                   int(kernel.shape[0].value) // groups,
                                   tuple(khw) == (1, 1) and groups == 1)
    if plan is not None:
        return ops.conv2d_nchw_gemm(data, kernel, strides, padding, dilation, groups,
                                    tile=plan[1], name=name, packed=packed, form=plan[0])
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


def by_tag(ops_: list, tags) -> ComputeOp | None:
    for op in ops_:
        if any(t in tags for t in op.tag.split(",")):
            return op
    return None


def epilogue(s, out: Tensor, found: list, stop) -> None:
    """Inline every stage between `out` and `stop` (the crop and any elementwise stage), so
    the output loop computes them from the conv's result as it writes."""
    for op in found[1:]:
        if op is not stop and not op.reduce_axis and op.tag not in (PACK_TAG, "injective,pad"):
            s[op].compute_inline()


def out_loops(s, out: Tensor, lanes: int):
    """(batch, channel) rows of `out` in parallel, each row's pixels vectorized; gives
    (the fused parallel loop, the row loop y)."""
    n, f, y, x = s[out].op.axis
    width = int(out.shape[3].value)
    xo, xi = s[out].split(x, factor=max(1, min(lanes, width)))
    s[out].vectorize(xi)
    row = s[out].fuse(n, f)
    s[out].parallel(row)
    return row, y


def schedule_direct(out: Tensor, found: list, conv: ComputeOp):
    """Rows of (batch, channel) in parallel; each output row computed into a local buffer,
    x innermost and vectorized with the reduction around it, then the epilogue (if any)
    writes it; the padded input stays a stage of its own (no bounds selects inside). A
    depthwise conv (one input channel per output channel) pads each channel's input in
    its own iteration of the parallel loop, into a buffer that stays in L1 for the conv to
    read: a padded copy of the whole input, written and read back through L2 or further,
    took most of a stride-2 conv's time (benchmarks/CONV_SHAPES.md)."""
    s = create_schedule(out.op)
    lanes = vector_lanes(out.dtype)
    width = int(conv.output(0).shape[3].value)
    n, f, y, x = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=max(1, min(lanes, width)))
    if conv is out.op:
        s[conv].reorder(n, f, y, xo, *s[conv].op.reduce_axis, xi)
        row = s[conv].fuse(n, f)
        s[conv].parallel(row)
        row_stage = s[conv]
    else:
        s[conv].reorder(xo, *s[conv].op.reduce_axis, xi)
        epilogue(s, out, found, conv)
        row, out_y = out_loops(s, out, lanes)
        s[conv].compute_at(s[out], out_y)
        row_stage = s[out]
    s[conv].vectorize(xi)
    src = conv.input_tensors[0].op       # the conv's own padded input (not an epilogue's)
    pad = src if isinstance(src, ComputeOp) and "pad" in src.tag.split(",") else None
    if pad is not None:
        if PAD_PER_CHANNEL and _one_channel_each(conv, pad):
            s[pad].compute_at(row_stage, row)
            if len(pad.axis) == 6:      # each phase row one vector (LLVM splits it)
                s[pad].vectorize(pad.axis[5])
        else:
            s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))
            if len(pad.axis) == 6:      # conv2d_nchw_phased's: each phase row vectorized
                cols = int(pad.output(0).shape[5].value)
                s[pad].vectorize(s[pad].split(pad.axis[5], factor=max(1, min(lanes, cols)))[1])
    return s


def _one_channel_each(conv: ComputeOp, pad: ComputeOp) -> bool:
    """Whether each output channel of the direct conv reads one input channel of its
    padded input `pad` that no other output channel reads (depthwise, multiplier 1)."""
    dims = (pad.output(0).shape[1], conv.output(0).shape[1], conv.reduce_axis[0].dom.extent)
    if not all(hasattr(d, "value") for d in dims):      # symbolic channel counts
        return False
    channels, out_channels, per_group = (int(d.value) for d in dims)
    return out_channels == channels and per_group == 1 and channels > 1
