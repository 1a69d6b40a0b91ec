"""The conv2d strategy's search space (te.autotune.conv2d_space): its knobs per form, every
config of small convs (odd sizes, stride 2, a fused epilogue) against numpy, the default
config as the untuned heuristic's choice, and a tuning run (strategy="conv2d") whose
records apply_history_best and schedule_conv2d take."""
import importlib
import json

import numpy as np
import pytest

import te
from runtime import cache_sizes
from te.autotune import conv2d as C
from te.autotune.conv2d_space import MIN_PANEL_BLOCKS, conv2d_schedule
from te.autotune.space import ConfigEntity
from te.errors import ArgumentError

FAST = te.autotune.MeasureOptions(number=1, repeat=1, min_repeat_ms=0)


def conv_ref(x, w, stride, pad, groups):
    """float64 NCHW convolution, square stride and padding."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, g * icg:(g + 1) * icg, ky:ky + (oh - 1) * stride + 1:stride,
                           kx:kx + (ow - 1) * stride + 1:stride]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * ocg:(g + 1) * ocg, :, ky, kx])
    return out


def _rand(rng, *shape):
    return ((rng.random(shape) + 0.5) * rng.choice([-1, 1], shape)).astype(np.float32)


def conv_bias_relu(n, c, h, w, oc, k, stride, pad, groups=1):
    """(X, W, B, out): conv2d_compute with a bias + relu epilogue stage, as graph fuses it."""
    X = te.placeholder((n, c, h, w), name="X")
    W = te.placeholder((oc, c // groups, k, k), name="W")
    B = te.placeholder((oc,), name="B")
    conv = te.autotune.conv2d_compute(X, W, stride, pad, 1, groups)
    out = te.compute(conv.shape, lambda b, f, y, x: te.max(conv[b, f, y, x] + B[f], 0.0),
                     name="epilogue", tag="broadcast")
    return X, W, B, out


def conv_case(case, seed):
    """(X, W, B, out, inputs, want) of a SMALL-style case: conv_bias_relu's stages, random
    x, weight and bias, and numpy's result."""
    n, c, h, w, oc, k, stride, pad, groups = case
    X, W, B, out = conv_bias_relu(*case)
    rng = np.random.default_rng(seed)
    inputs = (_rand(rng, n, c, h, w), _rand(rng, oc, c // groups, k, k), _rand(rng, oc))
    x, wt, b = inputs
    want = np.maximum(conv_ref(x, wt, stride, pad, groups) + b[None, :, None, None], 0)
    return X, W, B, out, inputs, want


def check_config(cfg, case_stages, what):
    """Builds `cfg`'s schedule of a conv_case and checks it against numpy's result."""
    X, W, B, out, inputs, want = case_stages
    fn = te.build(conv2d_schedule(cfg, out), [X, W, B, out])
    got = np.full(want.shape, np.nan, np.float32)
    fn(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(),
                               err_msg=str(what))


# (N, C, H, W, OC, k, stride, pad, groups): odd sizes, stride 2, each form
SMALL = [
    (2, 5, 11, 13, 13, 3, 2, 1, 1),    # rows form, groups 1: per-block or whole GEMM
    (2, 12, 13, 15, 9, 1, 2, 0, 1),    # 1x1 stride 2: the panel form
    (2, 12, 9, 7, 12, 3, 2, 1, 3),     # grouped: a GEMM with a group axis (whole only)
    (1, 16, 6, 8, 12, 1, 1, 0, 2),     # grouped 1x1, 48 pixels: whole tiles, no pack copy
]


def test_a_grouped_1x1_conv_in_whole_tiles_reads_its_input_in_place():
    """The rows form's pack of a 1x1 stride-1 conv without padding, whose pixel tiles end
    with the image (48 pixels: 8 x 48 tiles on AVX-512, 6 x 16 on AVX2), is inlined."""
    X, W, B, out = conv_bias_relu(*SMALL[3])
    pack = C.by_tag(C.producer_ops(out), ("conv2d_gemm_pack",))
    assert pack.attrs["inline"]
    ir = str(te.lower(te.autotune.schedule_conv2d(out), [X, W, B, out]))
    assert f"{pack.name}[" not in ir and "X[" in ir


def test_the_spaces_knobs_per_form_with_the_heuristics_choice_first():
    rows = te.autotune.conv2d_space(conv_bias_relu(*SMALL[0])[3])
    assert {k: list(v.options) for k, v in rows.knobs.items()} == {
        "layout": ["blocks", "whole_channels", "whole_pixels"],
        "reduce_order": ["channels_taps", "taps_channels"],
        "unroll_taps": [True, False]}
    assert rows.size == 12
    panels = te.autotune.conv2d_space(conv_bias_relu(*SMALL[1])[3])
    # 56 pixels: 2 panels of 32 (AVX-512) or 3 of 24 (AVX2), the packed input fits in L2
    assert list(panels.knobs) == ["layout", "reduce_unroll"]
    assert panels.knobs["layout"].options[:2] == ("channels", "blocks:1")
    assert panels.knobs["reduce_unroll"].options == (1, 2, 4)
    odd = te.autotune.conv2d_space(conv_bias_relu(1, 9, 9, 11, 9, 1, 2, 0)[3])
    assert odd.knobs["reduce_unroll"].options == (1,)    # 9 channels: no steps of 2 or 4
    grouped = te.autotune.conv2d_space(conv_bias_relu(*SMALL[2])[3])
    assert grouped.knobs["layout"].options == ("whole_channels", "whole_pixels")
    # the direct form (depthwise) has no knobs: a single config
    depthwise = te.autotune.conv2d_space(conv_bias_relu(1, 6, 9, 7, 6, 3, 2, 1, 6)[3])
    assert depthwise.size == 1 and not depthwise.knobs


def test_large_images_default_to_pixel_tiles_and_the_heuristics_panel_block():
    """Where one image's packed input exceeds L2 the heuristic puts pixel tiles (3x3) or
    blocks of panels (1x1: the largest divisor of the panel count up to 7 leaving
    MIN_PANEL_BLOCKS blocks, else single panels) outermost, and that is option 0; the other
    layouts follow."""
    rows = te.autotune.conv2d_space(conv_bias_relu(1, 70, 59, 60, 5, 3, 1, 1)[3])
    layouts = rows.knobs["layout"].options
    assert layouts[0] == "whole_pixels" and layouts[-2:] == ("blocks", "whole_channels")
    assert all(lay.startswith("tiles:") for lay in layouts[1:-2])
    X, W, B, out = conv_bias_relu(1, 72, 61, 61, 9, 1, 1, 0)
    space = te.autotune.conv2d_space(out)
    layouts = space.knobs["layout"].options
    nr = out.op.input_tensors[0].op.input_tensors[0].op.attrs["tile"][1]
    panels = -(-61 * 61 // nr)
    best = max(b for b in range(1, 8)
               if panels % b == 0 and (b == 1 or panels // b >= MIN_PANEL_BLOCKS))
    assert layouts[0] == f"blocks:{best}" and layouts[-1] == "channels"
    assert sorted(int(x.split(":")[1]) for x in layouts[:-1]) == \
        [b for b in range(1, 17) if panels % b == 0]
    assert space.knobs["reduce_unroll"].options == (1, 2, 4)    # 72 channels


def test_the_panel_blocks_leave_enough_blocks_to_share_out():
    """A 28 x 28 1x1 conv has 49 panels of 16 pixels (33 of 24, 25 of 32): blocks of 7
    would leave 7 blocks, and on 2 threads one thread runs 4 of them, so the heuristic
    takes single panels; a 56 x 56 one (196 panels of 16) keeps blocks of 7 (28 blocks)."""
    assert MIN_PANEL_BLOCKS == 16
    for size in (28, 56):
        out = conv_bias_relu(1, 1024, size, size, 64, 1, 1, 0)[3]   # input far above L2
        nr = out.op.input_tensors[0].op.input_tensors[0].op.attrs["tile"][1]
        panels = -(-size * size // nr)
        block = int(te.autotune.conv2d_space(out).knobs["layout"].options[0].split(":")[1])
        assert panels % block == 0 and (block == 1 or panels // block >= 16), (size, nr)
        if size == 28:
            assert block == 1, nr
        elif nr == 16:
            assert block == 7


@pytest.mark.parametrize("case", SMALL, ids=["rows", "panels", "grouped", "grouped_1x1"])
def test_every_config_of_a_small_conv_matches_numpy(case):
    stages = conv_case(case, 3)
    X, W, B, out = stages[:4]
    space = te.autotune.conv2d_space(out)
    lowered = set()
    for index in range(space.size):
        check_config(space.get(index), stages, space.get(index))
        lowered.add(str(te.lower(conv2d_schedule(space.get(index), out), [X, W, B, out])))
    assert len(lowered) == space.size     # each config is a schedule of its own


# several pixel tiles, so blocks of them ('tiles:<b>') at nr 24, 32 and 48 alike
TILED = [
    (1, 5, 30, 17, 9, 3, 1, 1, 1),     # 570 pixels: 24, 18 or 12 tiles
    (1, 6, 45, 33, 7, 3, 2, 1, 1),     # stride 2, 414 pixels: 18 or 9 tiles
    (1, 8, 24, 18, 8, 3, 1, 1, 2),     # grouped, 480 pixels: 20, 15 or 10 tiles
]


@pytest.mark.parametrize("case", TILED, ids=["rows", "stride2", "grouped"])
def test_every_layout_of_a_conv_of_several_pixel_tiles_matches_numpy(case):
    stages = conv_case(case, 5)
    space = te.autotune.conv2d_space(stages[3])
    layouts = space.knobs["layout"].options
    assert any(lay.startswith("tiles:") for lay in layouts)
    for layout in layouts:
        check_config(ConfigEntity(space, dict(space.default().values, layout=layout)), stages,
                     layout)


def _tile_block_heuristic(out, l2):
    """The 'tiles:<b>' sizes the space should offer under an L2 of `l2` bytes, its choice
    first: divisors of the tile count, the largest whose input columns fit in l2 / 2."""
    found = C.producer_ops(out)
    gemm, pack = C.by_tag(found, ("conv2d_gemm",)), C.by_tag(found, ("conv2d_gemm_pack",))
    nr, npix = gemm.attrs["tile"][1], int(gemm.output(0).shape[-1].value)
    _, chans, pha, phb, cols = (int(d.value) for d in pack.output(0).shape)
    count = npix // nr
    sizes = [b for b in range(2, min(count - 1, 32) + 1) if count % b == 0]
    fit = [b for b in sizes if chans * pha * phb * (b * nr + cols - npix) * 4 <= l2 // 2]
    best = max(fit) if fit else sizes[0]
    return [f"tiles:{best}"] + [f"tiles:{b}" for b in sizes if b != best]


@pytest.mark.parametrize("l2", [1 << 20, 64 << 10, 8 << 10, 1 << 10])
def test_the_layouts_follow_the_hosts_l2(monkeypatch, l2):
    """Per channel block where one image's packed input fits in L2, else whole with pixel
    tiles outermost; then blocks of pixel tiles, the heuristic's size first. (33 output
    channels: at least ROWS_MIN_TILES channel tiles on every host.)"""
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: l2)
    X, W, B, out = conv_bias_relu(1, 5, 30, 17, 33, 3, 1, 1)
    pack = C.by_tag(C.producer_ops(out), ("conv2d_gemm_pack",))
    packed = np.prod([int(d.value) for d in pack.output(0).shape]) * 4
    layouts = list(te.autotune.conv2d_space(out).knobs["layout"].options)
    tiles = _tile_block_heuristic(out, l2)
    if packed <= l2:
        assert layouts == ["blocks", "whole_channels", "whole_pixels", *tiles]
    else:
        assert layouts == ["whole_pixels", *tiles, "blocks", "whole_channels"]


@pytest.mark.parametrize("oc, first", [(9, "whole_pixels"), (17, "whole_pixels"),
                                       (32, "blocks")])
def test_fewer_channel_tiles_than_threads_need_put_pixel_tiles_in_parallel(monkeypatch, oc,
                                                                          first):
    """A conv of few output channels (ShuffleNet's 24-channel stem: 3 tiles) puts its pixel
    tiles in parallel even where its packed input fits in L2: ROWS_MIN_TILES channel tiles
    are needed to share them out (8 channels a tile here, AVX-512's)."""
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 1 << 20)
    monkeypatch.setattr(C, "vector_lanes", lambda dtype="float32": 16)
    monkeypatch.setattr(C, "CVEC_ON", False)
    space_module = importlib.import_module("te.autotune.conv2d_space")
    out = conv_bias_relu(1, 5, 30, 17, oc, 3, 1, 1)[3]
    gemm = C.by_tag(C.producer_ops(out), ("conv2d_gemm",))
    assert gemm.attrs["tile"][0] == 8
    assert space_module.ROWS_MIN_TILES == 4
    assert _without_reduce(te.autotune.conv2d_space(out))[0] == first
    monkeypatch.setattr(space_module, "ROWS_MIN_TILES", 0)
    assert _without_reduce(te.autotune.conv2d_space(out))[0] == "blocks"


def test_weights_too_large_to_stream_per_pixel_tile_stay_per_channel_block(monkeypatch):
    """Where the packed input exceeds L2 the whole GEMM streams its weights once per pixel
    tile; above C.STREAMED_WEIGHT_BYTES the heuristic keeps the per channel block layout
    (groups 1), which streams them once. (The rows form's: the cvec form off.)"""
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: 1 << 10)
    monkeypatch.setattr(C, "CVEC_ON", False)
    big = conv_bias_relu(1, 256, 9, 9, 520, 3, 2, 1)[3]      # 256 * 520 * 9 * 4 bytes
    small = conv_bias_relu(1, 256, 9, 9, 64, 3, 2, 1)[3]
    assert 256 * 520 * 9 * 4 > C.STREAMED_WEIGHT_BYTES >= 256 * 64 * 9 * 4
    assert _without_reduce(te.autotune.conv2d_space(big))[0] == "blocks"
    assert _without_reduce(te.autotune.conv2d_space(small))[0] == "whole_pixels"


def _without_reduce(space):
    return [lay for lay in space.knobs["layout"].options if not lay.startswith("reduce:")]


# input channels in blocks ('reduce:<k>'): channel counts with power-of-two divisors >= 4
REDUCED = [
    (1, 12, 19, 17, 7, 3, 2, 1, 1),    # stride 2, odd sizes, 7 output channels (padded)
    (2, 16, 13, 11, 10, 3, 1, 1, 1),   # batch 2, stride 1: blocks of 4 and 8
    (1, 8, 9, 10, 5, 3, 2, 0, 1),      # stride 2, no padding
    (1, 8, 11, 9, 4, 3, 2, 1, 1),      # one channel tile: pixel chunks
]


@pytest.mark.parametrize("case", REDUCED, ids=["stride2", "batch2", "nopad", "one_tile"])
def test_every_config_of_the_reduce_layouts_matches_numpy(case):
    c = case[1]
    stages = conv_case(case, 7)
    space = te.autotune.conv2d_space(stages[3])
    sizes = [int(lay.split(":")[1]) for lay in space.knobs["layout"].options
             if lay.startswith("reduce:")]
    assert sorted(sizes) == [b for b in (4, 8) if b < c and c % b == 0]
    for size in sizes:
        for order in ("channels_taps", "taps_channels"):
            for unroll in (True, False):
                cfg = ConfigEntity(space, dict(space.default().values, layout=f"reduce:{size}",
                                               reduce_order=order, unroll_taps=unroll))
                check_config(cfg, stages, cfg)


@pytest.mark.parametrize("l2", [1 << 20, 16 << 10, 1 << 10])
def test_reduce_blocks_lead_at_stride_2_with_the_largest_block_in_a_quarter_of_l2(
        monkeypatch, l2):
    """'reduce:<k>' comes first where the GEMM reads several stride phases, last otherwise
    (weights above C.STREAMED_WEIGHT_BYTES too); its first k is the largest whose k
    channels of packed input fit in a quarter of L2, else the smallest. (The rows form's:
    the cvec form off.)"""
    monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: l2)
    monkeypatch.setattr(C, "CVEC_ON", False)
    out = conv_bias_relu(1, 64, 29, 27, 8, 3, 2, 1)[3]
    pack = C.by_tag(C.producer_ops(out), ("conv2d_gemm_pack",))
    _, chans, pha, phb, cols = (int(d.value) for d in pack.output(0).shape)
    fit = [k for k in (4, 8, 16, 32) if k * pha * phb * cols * 4 <= l2 // 4]
    best = max(fit) if fit else 4
    layouts = list(te.autotune.conv2d_space(out).knobs["layout"].options)
    assert layouts[:4] == [f"reduce:{best}"] + [f"reduce:{k}" for k in (4, 8, 16, 32)
                                                 if k != best]
    flat = conv_bias_relu(1, 64, 29, 27, 8, 3, 1, 1)[3]
    layouts = te.autotune.conv2d_space(flat).knobs["layout"].options
    assert all(lay.startswith("reduce:") for lay in layouts[-4:])
    assert not any(lay.startswith("reduce:") for lay in layouts[:-4])
    big = conv_bias_relu(1, 256, 9, 9, 520, 3, 1, 1)[3]      # 256 * 520 * 9 * 4 bytes
    layouts = te.autotune.conv2d_space(big).knobs["layout"].options
    assert layouts[0] == "blocks" and layouts[-1].startswith("reduce:")


@pytest.mark.parametrize("case", SMALL, ids=["rows", "panels", "grouped", "grouped_1x1"])
def test_the_default_config_is_the_untuned_schedule(case):
    X, W, B, out = conv_bias_relu(*case)
    space = te.autotune.conv2d_space(out)
    untuned = str(te.lower(te.autotune.schedule_conv2d(out), [X, W, B, out]))
    assert str(te.lower(conv2d_schedule(space.default(), out), [X, W, B, out])) == untuned
    assert str(te.lower(conv2d_schedule(space, out), [X, W, B, out])) == untuned


def test_a_tuning_run_records_conv_configs_that_apply_history_best_takes(tmp_path):
    X, W, B, out = conv_bias_relu(*SMALL[0])
    log = tmp_path / "conv.jsonl"
    result = te.autotune(out, args=[X, W, B, out], strategy="conv2d", trials=4, log=str(log),
                         tuner="random", seed=0, measure_option=FAST, verbose=0)
    key = te.autotune.conv2d_key(out)
    assert key.startswith("conv2d:") and key != te.autotune.graph_key(out)
    assert result.task.key == key == te.autotune.strategy_key(out, "conv2d")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and {r["workload"] for r in records} == {key}
    best = result.best_config
    space = te.autotune.conv2d_space(out)
    want = str(te.lower(conv2d_schedule(best, out), [X, W, B, out]))
    with te.autotune.apply_history_best(str(log)):
        with te.autotune.trace_lookups() as applied:
            s = te.autotune.schedule_conv2d(out)
    assert [r.workload for r in applied] == [key]
    assert applied[0].config == best.to_json_dict()
    assert str(te.lower(s, [X, W, B, out])) == want
    assert space.from_json_dict(applied[0].config) == best
    # the same call with the log resumes: nothing left to measure for 4 trials
    again = te.autotune(out, args=[X, W, B, out], strategy="conv2d", trials=4, log=str(log),
                        tuner="random", seed=0, measure_option=FAST, verbose=0)
    assert len(again.history) == 4 and len(log.read_text().splitlines()) == len(records)


def test_an_unknown_strategy_and_a_conv_strategy_without_a_conv_are_refused():
    X, W, B, out = conv_bias_relu(*SMALL[0])
    from te.autotune.task import STRATEGIES
    assert {"auto", "conv2d"} <= set(STRATEGIES)
    with pytest.raises(ArgumentError, match=r"^te.autotune: strategy must be one of "
                       + repr(sorted(STRATEGIES)).replace("[", r"\[").replace("]", r"\]")
                       + r", got 'conv3d'$"):
        te.autotune(out, strategy="conv3d", trials=1)
    A = te.placeholder((4, 5), name="A")
    Y = te.compute((4, 5), lambda i, j: A[i, j] * 2.0, name="Y")
    with pytest.raises(ArgumentError, match=r"schedule_conv2d: out \('Y'\) reads no conv2d"):
        te.autotune(Y, strategy="conv2d", trials=1)
