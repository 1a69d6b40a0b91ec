"""The conv2d strategy (te.autotune.conv2d_compute + schedule_conv2d) against a numpy
convolution on random data: odd sizes, strides, dilation, groups, asymmetric padding,
batch 2, alone and with a fused epilogue stage built as the graph's fusion builds it
(te.compute over the conv output + a per-channel bias, then relu, or + a residual)."""
import importlib
import re

import numpy as np
import pytest

import te
from te.compute import ops
from te.autotune.micro_kernel import vector_lanes
from te.errors import ArgumentError, ShapeError


def conv_ref(x, w, stride, pads, dilation, groups):
    """float64 NCHW convolution: one einsum per (group, kernel tap)."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    (sh, sw), (dh, dw), (t, left, b, r) = stride, dilation, pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (left, r)))
    oh = (h + t + b - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + left + r - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, g * icg:(g + 1) * icg, ky * dh:ky * dh + (oh - 1) * sh + 1:sh,
                           kx * dw:kx * dw + (ow - 1) * sw + 1:sw]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * ocg:(g + 1) * ocg, :, ky, kx])
    return out


def _as4(v):
    return (v, v, v, v) if isinstance(v, int) else (v if len(v) == 4 else (*v, *v))


# (N, C, H, W, OC, k, stride, padding, dilation, groups, the compute it should get)
CASES = [
    (2, 8, 9, 11, 16, 3, 1, 1, 1, 1, "gemm"),             # 3x3 same padding
    (2, 5, 11, 13, 13, 3, 2, 1, 1, 1, "gemm"),            # odd channels, stride 2
    (1, 3, 23, 21, 10, 7, 2, 3, 1, 1, "gemm"),            # the ResNet stem's shape kind
    (2, 12, 9, 7, 9, 1, 2, 0, 1, 1, "gemm"),              # 1x1 stride-2 downsampling
    (2, 24, 7, 7, 40, 1, 1, 0, 1, 1, "gemm"),             # 1x1, a 7x7 image
    (2, 12, 9, 10, 12, 3, 1, 2, 2, 3, "gemm"),            # dilated, grouped
    (2, 9, 10, 9, 15, 3, 2, (0, 1, 2, 1), 1, 3, "gemm"),  # asymmetric padding, groups
    (2, 7, 8, 9, 5, (2, 3), (1, 2), 1, (2, 1), 1, "gemm"),  # rectangular everything
    (2, 10, 9, 11, 13, 1, 1, 1, 1, 1, "gemm"),            # 1x1 with padding
    (1, 72, 61, 61, 9, 1, 1, 0, 1, 1, "gemm"),            # 1x1, pixel blocks outermost
    (1, 70, 59, 60, 5, 3, 1, 1, 1, 1, "gemm"),            # 3x3, pixel tiles outermost
    (2, 6, 9, 7, 6, 3, 2, 1, 1, 6, "direct"),             # depthwise
    (2, 6, 9, 7, 12, 3, 1, 1, 1, 6, "direct"),            # depthwise, multiplier 2
    (2, 6, 11, 9, 6, 3, 1, 1, 1, 2, "direct"),            # 3 channels per group
    (2, 6, 11, 10, 6, 3, 2, 2, 2, 6, "direct"),           # depthwise, dilated, strided
    (2, 6, 9, 8, 6, 3, 1, 0, 1, 6, "direct"),             # depthwise, reads data as it is
    (1, 17, 29, 30, 17, 3, 2, 1, 1, 17, "direct"),        # depthwise, rows of 2 vectors
    (1, 19, 7, 7, 19, 3, 1, 1, 1, 19, "direct"),          # depthwise, a 7x7 image
]


def _build(x, w, stride, padding, dilation, groups, epilogue):
    X = te.placeholder(x.shape, name="X")
    W = te.placeholder(w.shape, name="W")
    conv = te.autotune.conv2d_compute(X, W, stride, padding, dilation, groups)
    extra = []
    if epilogue == "bias_relu":
        B = te.placeholder((w.shape[0],), name="B")
        out = te.compute(conv.shape, lambda n, f, y, i: te.max(conv[n, f, y, i] + B[f], 0.0),
                         name="epilogue", tag="broadcast")
        extra = [B]
    elif epilogue == "residual":
        R = te.placeholder(tuple(int(d.value) for d in conv.shape), name="R")
        out = te.compute(conv.shape, lambda *i: conv(*i) + R(*i), name="epilogue",
                         tag="elemwise")
        extra = [R]
    else:
        out = conv
    s = te.autotune.schedule_conv2d(out)
    return conv, te.build(s, [X, W, *extra, out]), extra


@pytest.mark.parametrize("epilogue", [None, "bias_relu", "residual"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_conv2d_strategy_matches_numpy(case, epilogue):
    n, c, h, wd, oc, k, stride, padding, dilation, groups, form = case
    kh, kw = (k, k) if isinstance(k, int) else k
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c // groups, kh, kw)).astype(np.float32)
    conv, fn, extra = _build(x, w, stride, padding, dilation, groups, epilogue)
    assert (conv.op.tag == "conv2d_gemm_crop") == (form == "gemm"), conv.op.tag
    st = (stride, stride) if isinstance(stride, int) else stride
    dl = (dilation, dilation) if isinstance(dilation, int) else dilation
    want = conv_ref(x, w, st, _as4(padding), dl, groups)
    inputs = [x, w]
    if epilogue == "bias_relu":
        b = rng.standard_normal(oc).astype(np.float32)
        inputs.append(b)
        want = np.maximum(want + b[None, :, None, None], 0)
    elif epilogue == "residual":
        res = rng.standard_normal(want.shape).astype(np.float32)
        inputs.append(res)
        want = want + res
    got = np.full(want.shape, np.nan, np.float32)
    fn(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_pads_each_channel_in_its_parallel_iteration(multiplier, monkeypatch):
    """Multiplier 1: each output channel pads its one input channel inside the parallel
    loop (a buffer of one channel's phases); multiplier 2 (two output channels read each
    input channel) pads the whole input first. PAD_PER_CHANNEL off: the whole input first,
    the same numbers."""
    x = np.random.default_rng(8).standard_normal((1, 5, 13, 12)).astype(np.float32)
    w = np.random.default_rng(9).standard_normal((5 * multiplier, 1, 3, 3)).astype(np.float32)

    def run():
        X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
        conv = te.autotune.conv2d_compute(X, W, 2, 1, 1, 5)
        out = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu")
        s = te.autotune.schedule_conv2d(out)
        got = np.full([int(d.value) for d in out.shape], np.nan, np.float32)
        te.build(s, [X, W, out])(x, w, got)
        return str(te.lower(s, [X, W, out], simple_mode=True)), got
    text, got = run()
    np.testing.assert_allclose(got, np.maximum(conv_ref(x, w, (2, 2), (1,) * 4, (1, 1), 5), 0),
                               rtol=1e-5, atol=1e-5)
    per_channel = re.search(rf"parallel for \(\S+, 0, {5 * multiplier}\) \{{\s*allocate "
                            r"conv2d_pack\[float32 \* (\d+)\]", text)
    if multiplier == 1:
        assert per_channel and int(per_channel.group(1)) < 13 * 12 + 100, text
    else:
        assert per_channel is None and text.index("allocate conv2d_pack") < \
            text.index("parallel for"), text
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "PAD_PER_CHANNEL", False)
    text_off, got_off = run()
    assert text_off.index("allocate conv2d_pack") < text_off.index("parallel for")
    np.testing.assert_array_equal(got_off, got)


def test_epilogue_is_computed_in_the_conv_output_loop():
    """The epilogue stage replaces the crop: one output loop nest, no second pass (the
    crop stage is inlined, so no buffer of the conv's NCHW result is allocated). The GEMM
    is computed per block of output channels inside that nest's parallel loop (a small
    image's packed input fits in L2), its full pixel tiles and the last, partial one each
    accumulated in a register tile."""
    X = te.placeholder((1, 8, 9, 9), name="X")
    W = te.placeholder((32, 8, 3, 3), name="W")
    B = te.placeholder((32,), name="B")
    conv = te.autotune.conv2d_compute(X, W, 1, 1)
    out = te.compute(conv.shape, lambda n, f, y, i: te.max(conv[n, f, y, i] + B[f], 0.0),
                     name="epilogue")
    text = str(te.lower(te.autotune.schedule_conv2d(out), [X, W, B, out]))
    assert re.findall(r"allocate (\S+)\[", text) == ["conv2d_pack", "conv2d_gemm",
                                                      "conv2d_gemm.local", "conv2d_gemm.local"]
    mr, _ = te.autotune.conv2d_gemm_tile((1, 8, 9, 9), (32, 8, 3, 3), 1, 1)
    blocks = -(-32 // mr)
    assert re.search(rf"parallel for \(n\.f\.outer\.fused, 0, {blocks}\) \{{\s*allocate "
                     rf"conv2d_gemm\[", text), text
    # one store, the crop loop's (and its scalar tail where 9 columns exceed a vector)
    lanes = vector_lanes("float32")
    assert len(re.findall(r"epilogue\[", text)) == (1 if lanes >= 9 else 2)


def test_pointwise_tiles_are_written_through_the_epilogue():
    """A 1x1 conv's mr x nr tiles are accumulated in a tile-sized buffer inside the
    output's loops and stored once, through the epilogue, as whole vectors (the fused
    pixel index simplifies back to the flat one: no scatter); 56 pixels are whole tiles
    and a partial one (the tile chosen for the shape)."""
    X = te.placeholder((1, 16, 7, 8), name="X")
    W = te.placeholder((16, 16, 1, 1), name="W")
    B = te.placeholder((16,), name="B")
    conv = te.autotune.conv2d_compute(X, W, 1, 0)
    out = te.compute(conv.shape, lambda n, f, y, i: te.max(conv[n, f, y, i] + B[f], 0.0),
                     name="epilogue")
    text = str(te.lower(te.autotune.schedule_conv2d(out), [X, W, B, out]))
    mr, nr = te.autotune.conv2d_gemm_tile((1, 16, 7, 8), (16, 16, 1, 1))
    assert set(re.findall(r"allocate (\S+)\[float32 \* (\d+)\]", text)) == {
        ("conv2d_pack", str(16 * nr * (-(-56 // nr)))), ("conv2d_gemm", str(mr * nr))}
    stores = re.findall(r"epilogue\[([^\]]*)\] =", text)
    # the whole tile's lanes (a row may be stored as several vectors), and the last
    # channel tile's rows where mr does not divide 16
    lanes = [int(st.rsplit(",", 1)[1].strip(" )")) for st in stores if st.startswith("ramp(")]
    assert sum(lanes) == (mr + 16 % mr) * nr, stores
    assert not any("floor" in st for st in stores), stores  # the tail: contiguous too


def test_symbolic_shapes_get_the_plain_direct_compute():
    n = te.var("n")
    conv = te.autotune.conv2d_compute(te.placeholder((n, 8, 9, 9), name="X"),
                                      te.placeholder((16, 8, 3, 3), name="W"), 1, 1)
    assert conv.op.tag == "conv2d_nchw"
    assert [t.op.name for t in conv.op.input_tensors] == ["pad_temp", "W"]


def test_depthwise_conv_of_symbolic_channels_schedules_and_matches_numpy():
    """Symbolic channels: the whole input padded first (the per-channel pad needs constant
    channel counts), the numbers numpy's."""
    c = te.var("c")
    X = te.placeholder((2, c, 9, 10), name="X")
    W = te.placeholder((4, 1, 3, 3), name="W")
    conv = te.autotune.conv2d_compute(X, W, 2, 1, 1, 4)
    fn = te.build(te.autotune.schedule_conv2d(conv), [X, W, conv])
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 4, 9, 10)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    got = np.full((2, 4, 5, 5), np.nan, np.float32)
    fn(x, w, got)
    np.testing.assert_allclose(got, conv_ref(x, w, (2, 2), (1,) * 4, (1, 1), 4), rtol=1e-5,
                               atol=1e-5)


def test_gemm_form_checks_its_arguments():
    X = te.placeholder((1, 8, 9, 9), name="X")
    W = te.placeholder((16, 8, 3, 3), name="W")
    with pytest.raises(ShapeError, match=r"conv2d_nchw_gemm: tile must be 2 positive ints "
                                         r"\(mr, nr\), got \(8, 0\)"):
        ops.conv2d_nchw_gemm(X, W, tile=(8, 0))
    with pytest.raises(ShapeError, match=r"conv2d_nchw_gemm: data channels \(8\) must be "
                                         r"divisible by groups \(3\)"):
        ops.conv2d_nchw_gemm(X, W, groups=3)
    n = te.var("n")
    with pytest.raises(ShapeError, match="conv2d_nchw_gemm: data and kernel must have "
                                         "constant shapes"):
        ops.conv2d_nchw_gemm(te.placeholder((n, 8, 9, 9), name="Xn"), W)
    with pytest.raises(ShapeError, match="conv2d_nchw_phased: data and kernel must have "
                                         "constant shapes"):
        ops.conv2d_nchw_phased(te.placeholder((n, 8, 9, 9), name="Xn"), W)


def test_schedule_conv2d_refuses_a_graph_without_conv():
    X = te.placeholder((1, 8, 9, 9), name="X")
    Y = te.compute(X.shape, lambda *i: X(*i) + 1.0, name="Y")
    with pytest.raises(ArgumentError, match="schedule_conv2d: out \\('Y'\\) reads no conv2d "
                                            "stage"):
        te.autotune.schedule_conv2d(Y)
    with pytest.raises(ArgumentError, match="out must be a te.Tensor"):
        te.autotune.schedule_conv2d(Y.op)


# (N, C, H, W, OC, k, stride, padding): per-shape tiles (3 vectors wide where the pixels
# round up well), channel blocks and pixel tiles outermost, at both vector widths
TILE_CASES = [
    (1, 9, 40, 37, 13, 3, 1, 1),      # 40 x 39 pixel rows: 3-vector tiles, channel blocks
    (1, 70, 59, 60, 11, 3, 1, 1),     # pixel tiles outermost, 3-vector tiles
    (2, 16, 14, 14, 24, 3, 1, 1),     # 14 x 16 pixel rows: 2-vector tiles
    (1, 9, 30, 31, 12, 3, 2, 1),      # stride 2
    (1, 10, 28, 28, 17, 1, 1, 0),     # 1x1, 784 pixels: 3-vector panels
    (1, 10, 7, 7, 11, 3, 1, 1),       # 7 x 9 pixel rows: AVX2 6x16, 11 of 12 channels
    (2, 10, 7, 7, 11, 1, 1, 0),       # 1x1, 49 pixels: AVX2 6x16
    (1, 9, 13, 13, 11, 1, 2, 0),      # 1x1 stride 2: AVX2 6x16
    (1, 8, 14, 14, 11, 3, 2, 1),      # 3x3 stride 2, 7 x 8 pixel rows: AVX2 6x16
]


@pytest.mark.parametrize("lanes", [8, 16], ids=["avx2", "avx512"])
@pytest.mark.parametrize("case", TILE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_tiles_of_both_vector_widths_match_numpy(case, lanes, monkeypatch):
    """The host's vector width decides the tile; forced here (wider vectors than the host's
    are split by LLVM), so both widths' schedules are checked on any host."""
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "vector_lanes",
                        lambda dtype="float32": lanes)
    n, c, h, wd, oc, k, stride, pad = case
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c, k, k)).astype(np.float32)
    conv, fn, (res,) = _build(x, w, stride, pad, 1, 1, "residual")
    assert conv.op.tag == "conv2d_gemm_crop"
    tile = conv.op.input_tensors[0].op.attrs["tile"]
    assert tile == te.autotune.conv2d_gemm_tile(x.shape, w.shape, stride, pad)
    if lanes == 8 and h <= 14:
        assert tile == (6, 16)
    args = [x, w, rng.standard_normal(tuple(int(d.value) for d in conv.shape)).astype(
        np.float32)]
    want = conv_ref(x, w, (stride, stride), _as4(pad), (1, 1), 1) + args[2]
    got = np.full(want.shape, np.nan, np.float32)
    fn(*args, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_tile_width_follows_the_pixel_count(monkeypatch):
    """AVX-512: 3 vectors (48 pixels) where rounding up to them pads little more than to 2
    (ResNet's 56x56 and 28x28 layers), 2 vectors for 14x14 and 7x7 images."""
    mod = importlib.import_module("te.autotune.conv2d")
    monkeypatch.setattr(mod, "vector_lanes", lambda dtype="float32": 16)
    tile = te.autotune.conv2d_tile
    assert [tile("float32", p) for p in (56 * 58, 28 * 30, 56 * 56, 28 * 28)] == [(8, 48)] * 4
    assert [tile("float32", p) for p in (14 * 16, 7 * 9, 14 * 14, 7 * 7)] == [(8, 32)] * 4
    assert [tile("float32", p, 64, True) for p in (56 * 56, 7 * 7)] == [(8, 48), (8, 32)]
    assert tile("float32") == (8, 32)


def test_avx2_tile_follows_pixels_channels_and_form(monkeypatch):
    """AVX2: 4x24 for the rows form where 24-pixel tiles pad about as little as 16-pixel
    ones (56x56, 28x28 and the stem), 6x16 where they pad more (14x14 and 7x7 images);
    the 1x1 panels form 6x16 from 28x28 images on unless rounding the channels up to 6
    costs more than 4, below that where 24-pixel tiles pad more (not 6x6: 36 -> 48)."""
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "vector_lanes",
                        lambda dtype="float32": 8)
    tile = te.autotune.conv2d_tile
    assert [tile("float32", p, 64) for p in (56 * 58, 28 * 30, 112 * 115)] == [(4, 24)] * 3
    assert [tile("float32", p, 256) for p in (14 * 16, 7 * 9, 7 * 8)] == [(6, 16)] * 3
    assert [tile("float32", p, 64, True) for p in (56 * 56, 28 * 28, 7 * 7)] == [(6, 16)] * 3
    assert tile("float32", 48, 4, True) == (4, 24)   # 4 channels: 6 would be half padding
    assert tile("float32", 784, 4, True) == (4, 24)
    assert [tile("float32", p, 256, True) for p in (6 * 6, 27 * 27)] == [(4, 24)] * 2
    assert tile("float32") == tile("float32", 7 * 9) == (4, 24)
    gemm_tile = te.autotune.conv2d_gemm_tile    # the geometry decides the pixel count
    assert gemm_tile((1, 8, 14, 14), (12, 8, 3, 3), padding=0) == (4, 24)   # 12 x 14
    assert gemm_tile((1, 8, 14, 14), (12, 8, 3, 3), padding=1) == (6, 16)   # 14 x 16
    assert gemm_tile((1, 8, 14, 14), (12, 8, 3, 3), 2, 1) == (6, 16)        # 7 x 8
    assert gemm_tile((1, 8, 14, 14), (12, 4, 3, 3), groups=2) == (6, 16)   # 6 per group
    assert gemm_tile((1, 8, 14, 14), (8, 4, 3, 3), 1, 1, groups=2) == (4, 24)  # 4 per group
    assert gemm_tile((1, 6, 14, 14), (6, 1, 3, 3), groups=6) is None        # depthwise
