"""The conv2d GEMM's 'cvec' form (vectors of output channels by broadcast pixels, no
padding columns): every layout and reduction order of odd-sized convs (strides, dilation,
padding, output channels that do not fill a tile, batch 2, packed or plain weights) against
numpy, its knobs and heuristic, which convs the strategy gives it, and its errors."""
import re

import numpy as np
import pytest

import te
from runtime import cache_sizes
from te.autotune import conv2d as C
from te.autotune.conv2d_space import _pixel_chunks, _reduce_chunks, conv2d_schedule
from te.autotune.space import ConfigEntity
from te.compute import ops
from te.errors import ArgumentError

from test_conv2d_space import _rand, conv_ref

# (N, C, H, W, OC, k, stride, pad, dilation, tile)
CASES = [
    (1, 16, 14, 14, 32, 3, 1, 1, 1, (16, 6)),    # 196 pixels: the last tile partial
    (2, 9, 11, 13, 20, 3, 2, 1, 1, (16, 6)),     # batch 2, stride 2, 20 channels padded
    (1, 8, 10, 9, 8, 5, 1, 2, 2, (8, 5)),        # dilation 2, 5x5, one channel tile
    (1, 12, 9, 9, 24, 1, 2, 0, 1, (8, 7)),       # 1x1 stride 2 (phase (0, 0) only)
    (1, 6, 7, 7, 16, 3, 1, 0, 1, (16, 4)),       # no padding: 5x5 output
    (1, 16, 3, 3, 48, 3, 1, 1, 1, (16, 7)),      # 3 channel tiles, 2 pixel tiles
    (1, 18, 5, 9, 30, 3, 1, 1, 1, (8, 7), 3),    # groups 3: 10 channels a group, padded
    (2, 12, 6, 7, 12, 3, 2, 1, 1, (16, 5), 2),   # groups 2, stride 2, one tile a group
    (2, 20, 5, 7, 40, 1, 1, 0, 1, (16, 7)),      # 1x1 stride 1, 35 pixels: the input itself
    (1, 12, 8, 13, 24, 1, 2, 0, 1, (16, 7)),     # 1x1 stride 2, 4 x 7 pixels: read in place
    (1, 20, 5, 7, 24, 1, 1, 0, 1, (16, 6)),      # 1x1 stride 1, 35 pixels padded to 36
    (1, 24, 7, 7, 40, 1, 1, 0, 1, (16, 25)),     # one vector by 25 pixels (AVX-512's 7 x 7)
]


def cvec_case(case, packed: bool, seed=11):
    """(args, inputs, want, out): conv (+ bias + relu) in the cvec form, its inputs."""
    n, c, h, w, oc, k, stride, pad, dil, tile, *groups = case
    groups = groups[0] if groups else 1
    mr, cg, ocg = tile[0], c // groups, oc // groups
    X = te.placeholder((n, c, h, w), name="X")
    W = te.placeholder((oc, cg, k, k), name="W")
    B = te.placeholder((oc,), name="B")
    P = te.placeholder((groups, -(-ocg // mr), cg, k, k, mr), name="P") if packed else None
    conv = ops.conv2d_nchw_gemm(X, W, stride, pad, dil, groups, tile=tile, packed=P,
                                form="cvec")
    out = te.compute(conv.shape, lambda b, f, y, x: te.max(conv[b, f, y, x] + B[f], 0.0),
                     name="epilogue", tag="broadcast")
    rng = np.random.default_rng(seed)
    x, wt, b = _rand(rng, n, c, h, w), _rand(rng, oc, cg, k, k), _rand(rng, oc)
    wd = np.zeros((oc, cg, (k - 1) * dil + 1, (k - 1) * dil + 1), np.float32)
    wd[:, :, ::dil, ::dil] = wt                       # dilation as a sparse kernel
    want = np.maximum(conv_ref(x, wd, stride, pad, groups) + b[None, :, None, None], 0)
    wk = wt
    if packed:   # per group: channels padded to whole tiles, the tile's mr innermost
        pad_oc = np.zeros((groups, -(-ocg // mr) * mr, cg, k, k), np.float32)
        pad_oc[:, :ocg] = wt.reshape(groups, ocg, cg, k, k)
        wk = pad_oc.reshape(groups, -1, mr, cg, k, k).transpose(0, 1, 3, 4, 5, 2).copy()
    return [X, P if packed else W, B, out], (x, wk, b), want, out


def check(cfg, args, inputs, want, out, what):
    fn = te.build(conv2d_schedule(cfg, out), args)
    got = np.full(want.shape, np.nan, np.float32)
    fn(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(),
                               err_msg=str(what))


IDS = ["partial_tile", "stride2_batch2", "dilated", "pointwise", "nopad", "few_tiles",
       "groups3", "groups2_stride2", "pointwise_strided_view",
       "pointwise_view", "pointwise_partial", "wide_pixel_tile"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_config_of_the_cvec_form_matches_numpy(case):
    args, inputs, want, out = cvec_case(case, True)
    space = te.autotune.conv2d_space(out)
    layouts = space.knobs["layout"].options
    assert {"channels", "pixels"} <= set(layouts)
    for index in range(space.size):
        check(space.get(index), args, inputs, want, out, space.get(index))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_cvec_form_reading_plain_weights_matches_numpy(case):
    """The weights as they are (OC, C, KH, KW), not packed: a strided read per vector."""
    args, inputs, want, out = cvec_case(case, False)
    space = te.autotune.conv2d_space(out)
    check(space.default(), args, inputs, want, out, "default")


def test_the_gemm_has_no_padding_columns_and_reads_packed_weights_as_vectors():
    args, _, _, out = cvec_case(CASES[0], True)
    gemm = C.by_tag(C.producer_ops(out), ("conv2d_gemm",))
    assert gemm.attrs == {"tile": (16, 6), "form": "cvec"}
    # (batch, channel tiles, pixels: 196 rounded up to 6, channels in the tile)
    assert [int(d.value) for d in gemm.output(0).shape] == [1, 2, 198, 16]
    ir = str(te.lower(te.autotune.schedule_conv2d(out), args))
    assert "P[" in ir and "W[" not in ir


def test_a_1x1_convs_pack_is_inlined_only_where_its_tiles_end_with_the_image():
    """A 1x1 conv without padding whose pixel tiles end with the image reads the input
    itself, at any stride (the pack inlined, no copy); a partial last tile or padding
    keeps the copy."""
    def pack_of(case):
        args, _, _, out = cvec_case(case, True)
        pack = C.by_tag(C.producer_ops(out), ("conv2d_gemm_pack",))
        ir = str(te.lower(te.autotune.schedule_conv2d(out), args))
        return pack.attrs["inline"], f"{pack.name}[" in ir
    by_id = dict(zip(IDS, CASES))
    assert pack_of(by_id["pointwise_view"]) == (True, False)
    assert pack_of(by_id["pointwise_partial"]) == (False, True)
    assert pack_of(by_id["pointwise"]) == (False, True)               # 25 pixels, tiles of 7
    assert pack_of(by_id["pointwise_strided_view"]) == (True, False)  # stride 2, 4 x 7
    assert pack_of((1, 20, 5, 7, 24, 1, 1, 1, 1, (16, 7))) == (False, True)   # padding


def test_the_layout_heuristic(monkeypatch):
    """'channels' first where one image's packed input fits in L2, a channel tile's
    weights take at most half of it and there are at least 4 channel tiles; else the
    'reduce:<k>' blocks first (the largest k whose input takes at most a quarter of L2 and
    that leaves 4 blocks), then 'channels' and 'pixels'."""
    case = (1, 32, 14, 14, 64, 3, 1, 1, 1, (16, 6))   # a tile's weights: 16*32*9*4 bytes
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 1 << 20)
    layouts = te.autotune.conv2d_space(cvec_case(case, True)[3]).knobs["layout"].options
    assert layouts == ("channels", "pixels", "reduce:8", "reduce:4", "reduce:16")
    few = (1, 32, 14, 14, 48, 3, 1, 1, 1, (16, 6))          # 3 channel tiles
    layouts = te.autotune.conv2d_space(cvec_case(few, True)[3]).knobs["layout"].options
    assert layouts[:3] == ("reduce:8", "reduce:4", "reduce:16")
    # the input (32 x 16 x 16 floats, 32 KiB) fits in a 35 KiB L2, a tile's 18 KiB of
    # weights do not fit in half of it (17.5 KiB)
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 35 << 10)
    layouts = te.autotune.conv2d_space(cvec_case(case, True)[3]).knobs["layout"].options
    assert layouts == ("reduce:8", "reduce:4", "reduce:16", "channels", "pixels")
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 37 << 10)   # they do: 18.5 KiB
    layouts = te.autotune.conv2d_space(cvec_case(case, True)[3]).knobs["layout"].options
    assert layouts[0] == "channels"
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 16 << 10)
    layouts = te.autotune.conv2d_space(cvec_case(case, True)[3]).knobs["layout"].options
    assert layouts == ("reduce:4", "reduce:8", "reduce:16", "channels", "pixels")


def test_which_convs_the_strategy_gives_the_cvec_form(monkeypatch):
    """On hosts of 8-lane vectors (AVX2): a 3x3 at 14x14 (the rows form computes 2 dropped
    columns per row of 14) takes cvec with 2 vectors of channels by 6 pixels; a stem (3
    input channels), 1x1 convs and grouped ones of few channels a group keep the rows
    form, and so does a conv reading plain (unpacked) weights; a grouped conv of 16 or more
    input channels a group (the row-Winograd form's 1x3 conv) takes cvec where it pads
    less."""
    form = te.autotune.conv2d_gemm_form
    monkeypatch.setattr(C, "vector_lanes", lambda dtype="float32": 8)
    assert form((1, 256, 14, 14), (256, 256, 3, 3), 1, 1) == ("cvec", (16, 6))
    assert form((1, 512, 7, 7), (512, 512, 3, 3), 1, 1) == ("cvec", (16, 6))
    assert form((1, 3, 224, 224), (64, 3, 7, 7), 2, 3)[0] == "rows"
    assert form((1, 256, 14, 14), (1024, 256, 1, 1))[0] == "rows"
    assert form((1, 64, 14, 14), (64, 8, 3, 3), 1, 1, 1, 8)[0] == "rows"
    # 6 groups of 32 -> 32 channels, 4 rows of 14: rows pad 56 pixels to 72 (4 x 24 tiles)
    assert form((1, 192, 4, 14), (192, 32, 1, 3), 1, (0, 1, 0, 1), 1, 6) == ("cvec", (16, 6))
    assert te.autotune.conv2d_gemm_tile((1, 256, 14, 14), (256, 256, 3, 3), 1, 1) == (16, 6)
    assert te.autotune.conv2d_weight_tile((1, 256, 14, 14), (256, 256, 3, 3), 1, "float32",
                                          1, 1) == 16
    # 56 columns by 58 per row: the rows form's 4x24 tile pads ~4%, about what cvec costs
    assert form((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)[0] == "rows"
    # conv2d_compute takes cvec only where it reads packed weights
    X, W = te.placeholder((1, 32, 14, 14), name="X"), te.placeholder((64, 32, 3, 3), name="W")
    assert form((1, 32, 14, 14), (64, 32, 3, 3), 1, 1) == ("cvec", (16, 6))
    plain = C.by_tag(C.producer_ops(te.autotune.conv2d_compute(X, W, 1, 1)), ("conv2d_gemm",))
    assert plain.attrs.get("form") != "cvec"
    P = te.placeholder((1, 4, 32, 3, 3, 16), name="P")
    packed = C.by_tag(C.producer_ops(te.autotune.conv2d_compute(X, W, 1, 1, packed=P)),
                      ("conv2d_gemm",))
    assert packed.attrs == {"tile": (16, 6), "form": "cvec"}
    monkeypatch.setattr(C, "CVEC_ON", False)
    assert form((1, 256, 14, 14), (256, 256, 3, 3), 1, 1)[0] == "rows"
    monkeypatch.setattr(C, "CVEC_ON", True)


def test_which_convs_the_strategy_gives_the_cvec_form_on_avx512(monkeypatch):
    """On hosts of 16-lane vectors: 2 vectors of channels by 7 pixels (ResNet's 14 x 14
    and 7 x 7 images are whole tiles) where that pads less than the rows form's 8 x 32 or
    8 x 48 tile, 1x1 convs included (by CVEC_WIDE_POINTWISE_COST), one vector by all the
    pixels where they are few (CVEC_ROW_PIXELS); CVEC_WIDE_PIXELS 0 keeps the rows form."""
    form = te.autotune.conv2d_gemm_form
    monkeypatch.setattr(C, "vector_lanes", lambda dtype="float32": 16)
    assert form((1, 256, 14, 14), (256, 256, 3, 3), 1, 1) == ("cvec", (32, 7))
    assert form((1, 512, 7, 7), (512, 512, 3, 3), 1, 1) == ("cvec", (32, 7))
    assert form((1, 512, 14, 14), (512, 512, 3, 3), 2, 1) == ("cvec", (32, 7))
    assert te.autotune.conv2d_weight_tile((1, 256, 14, 14), (256, 256, 3, 3), 1, "float32",
                                          1, 1) == 32
    # 56 x 58 columns: the rows form's tiles pad ~4% and cvec's equal cost loses
    assert form((1, 64, 56, 56), (64, 64, 3, 3), 1, 1) == ("rows", (8, 48))
    # 1x1 convs: cvec where the panels pad 14% (14 x 14) or 31% (7 x 7) of the pixels,
    # the panels at 28 x 28 (8 x 48 tiles pad 4%) and 56 x 56; groups of fewer channels
    # than a cvec tile keep the panels as well
    assert form((1, 1024, 14, 14), (2048, 1024, 1, 1), 2) == ("cvec", (32, 7))
    assert form((1, 256, 14, 14), (1024, 256, 1, 1)) == ("cvec", (32, 7))
    assert form((1, 512, 28, 28), (1024, 512, 1, 1), 2) == ("cvec", (32, 7))
    assert form((1, 512, 28, 28), (128, 512, 1, 1)) == ("rows", (8, 48))
    assert form((1, 64, 56, 56), (256, 64, 1, 1)) == ("rows", (8, 48))
    assert form((1, 256, 56, 56), (512, 256, 1, 1), 2) == ("rows", (8, 48))
    assert form((1, 256, 13, 13), (16, 256, 1, 1))[0] == "rows"
    # a GEMM of at most 50 pixels, stride 1, at most 3 taps: one vector of channels by
    # all its pixels, in tiles of at most 25 (each weight vector loaded once for them all)
    assert form((1, 1024, 7, 7), (2048, 1024, 1, 1)) == ("cvec", (16, 25))
    assert form((1, 3072, 2, 7), (3072, 512, 1, 3), 1, (0, 1, 0, 1), 1, 6) == \
        ("cvec", (16, 14))
    assert te.autotune.conv2d_weight_tile((1, 1024, 7, 7), (2048, 1024, 1, 1)) == 16
    assert form((1, 512, 7, 7), (512, 512, 3, 3), 1, 1) == ("cvec", (32, 7))   # 9 taps
    assert form((1, 1536, 4, 14), (1536, 256, 1, 3), 1, (0, 1, 0, 1), 1, 6) == \
        ("cvec", (32, 7))                                                   # 56 pixels
    # plain (unpacked) weights keep the panels, with the panels' own tile
    X, W = te.placeholder((1, 64, 7, 7), name="X"), te.placeholder((128, 64, 1, 1), name="W")
    plain = C.by_tag(C.producer_ops(te.autotune.conv2d_compute(X, W)), ("conv2d_gemm",))
    assert plain.attrs == {"tile": C.conv2d_tile("float32", 49, 128, True), "form": "panels"}
    monkeypatch.setattr(C, "CVEC_ROW_PIXELS", 0)
    assert form((1, 1024, 7, 7), (2048, 1024, 1, 1)) == ("cvec", (32, 7))
    assert form((1, 3, 224, 224), (64, 3, 7, 7), 2, 3)[0] == "rows"
    monkeypatch.setattr(C, "CVEC_WIDE_PIXELS", 0)
    assert form((1, 256, 14, 14), (256, 256, 3, 3), 1, 1)[0] == "rows"


def test_the_strategys_cvec_conv_matches_numpy(monkeypatch):
    """conv2d_compute + schedule_conv2d where the strategy picks cvec (forced to 8 lanes'
    choice on any host), reading the weight packed for conv2d_weight_tile's mr."""
    monkeypatch.setattr(C, "vector_lanes", lambda dtype="float32": 8)
    xs, ws = (1, 16, 7, 7), (32, 16, 3, 3)
    assert te.autotune.conv2d_gemm_form(xs, ws, 1, 1)[0] == "cvec"
    mr = te.autotune.conv2d_weight_tile(xs, ws, 1, "float32", 1, 1)
    X, W = te.placeholder(xs, name="X"), te.placeholder(ws, name="W")
    P = ops.conv2d_pack_weight(W, 1, mr)
    Pp = te.placeholder(tuple(int(d.value) for d in P.shape), name="Pp")
    conv = te.autotune.conv2d_compute(X, W, 1, 1, packed=Pp)
    fn = te.build(te.autotune.schedule_conv2d(conv), [X, Pp, conv])
    pack = te.build(te.create_schedule(P.op), [W, P])
    rng = np.random.default_rng(2)
    x, w = _rand(rng, *xs), _rand(rng, *ws)
    wp = np.empty(tuple(int(d.value) for d in P.shape), np.float32)
    pack(w, wp)
    got = np.empty((1, 32, 7, 7), np.float32)
    fn(x, wp, got)
    np.testing.assert_allclose(got, conv_ref(x, w, 1, 1, 1), rtol=1e-4, atol=1e-4 * 40)


def test_chunk_counts_are_a_multiple_of_four_where_the_pixel_tiles_allow():
    # (channel tiles, pixel tiles) -> (channel chunks, pixel chunks): 'reduce:<k>'
    assert _reduce_chunks(1, 100) == (1, 4)
    assert _reduce_chunks(2, 100) == (2, 2)
    assert _reduce_chunks(3, 100) == (1, 4)       # 3 chunks: one of 2 threads idle 1/3
    assert _reduce_chunks(6, 100) == (2, 2)
    assert _reduce_chunks(16, 1) == (4, 1)
    assert _reduce_chunks(3, 2) == (1, 2)
    assert _reduce_chunks(3, 1) == (3, 1)         # one pixel tile: 3 chunks, not 1
    # pixel chunks beside every channel tile in parallel: 'channels'
    assert [_pixel_chunks(t, 100) for t in (1, 2, 3, 4, 5, 6, 8)] == [4, 2, 4, 1, 4, 2, 1]
    assert _pixel_chunks(5, 3) == 3


@pytest.mark.parametrize("channels, chunks", [(16, {"reduce:4": 4, "channels": 4}),
                                              (48, {"reduce:4": 4, "channels": 12})])
def test_few_channel_tiles_share_out_in_pixel_chunks(channels, chunks):
    """One or three channel tiles (16 or 48 output channels by 16-channel tiles) in a
    'reduce:<k>' or 'channels' layout: the GEMM's parallel loop runs a multiple of 4
    chunks (with one tile it had one iteration: a single thread did all the work), and
    the result is numpy's."""
    args, inputs, want, out = cvec_case((1, 16, 14, 14, channels, 3, 1, 1, 1, (16, 7)), True)
    space = te.autotune.conv2d_space(out)
    for layout, count in chunks.items():
        cfg = ConfigEntity(space, dict(space.default().values, layout=layout))
        ir = str(te.lower(conv2d_schedule(cfg, out), args))
        loops = dict(re.findall(r"parallel for \((\S+), 0, (\d+)\)", ir))
        gemm = [int(n) for name, n in loops.items() if "p.outer" in name]
        assert gemm == [count], (layout, loops)
        check(cfg, args, inputs, want, out, layout)


def test_bad_forms_are_refused():
    X = te.placeholder((1, 8, 9, 9), name="X")
    W = te.placeholder((16, 4, 3, 3), name="W")
    with pytest.raises(ArgumentError, match=r"conv2d_nchw_gemm: form must be one of "
                                            r"\('rows', 'cvec'\), got 'nchwc'"):
        ops.conv2d_nchw_gemm(X, te.placeholder((16, 8, 3, 3), name="W8"), form="nchwc")
    with pytest.raises(ArgumentError, match=r"conv2d_nchw_gemm: form must be one of "
                                            r"\('rows', 'cvec'\), got None"):
        ops.conv2d_nchw_gemm(X, W, groups=2, form=None)


def test_a_grouped_convs_reduce_blocks_divide_one_groups_channels():
    """'reduce:<k>' splits the reduction over one group's input channels (48 here, of 288
    in the pack): k divides 48 and is below it."""
    X = te.placeholder((1, 6 * 48, 4, 13), name="X")
    W = te.placeholder((6 * 40, 48, 1, 3), name="W")
    P = te.placeholder((6, 3, 48, 1, 3, 16), name="P")
    conv = ops.conv2d_nchw_gemm(X, W, 1, (0, 1, 0, 1), 1, 6, tile=(16, 7), packed=P,
                                form="cvec")
    sizes = [int(o.split(":")[1]) for o in te.autotune.conv2d_space(conv).knobs["layout"].options
             if o.startswith("reduce:")]
    assert sizes and all(48 % k == 0 and k < 48 for k in sizes), sizes
