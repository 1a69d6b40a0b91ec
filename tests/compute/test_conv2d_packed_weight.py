"""Pre-packed conv2d weights: te.compute.ops.conv2d_pack_weight's layout (against its
definition), and the conv2d strategy's GEMM form reading a
packed weight (conv2d_compute(packed=...)) against a numpy convolution on random data,
with odd channel counts (padded register tiles), groups, strides and a fused epilogue."""
import importlib

import numpy as np
import pytest
from test_conv2d_strategy import CASES, _as4, conv_ref

import te
from te.compute import ops
from te.compute.ops.conv2d_gemm import packed_weight_shape
from te.errors import ArgumentError, ShapeError


def _pack_by_definition(w, groups, mr):
    oc, icg, kh, kw = w.shape
    ocg = oc // groups
    out = np.zeros(packed_weight_shape(w.shape, groups, mr), w.dtype)
    for g in range(groups):
        for f in range(ocg):
            out[g, f // mr, :, :, :, f % mr] = w[g * ocg + f]
    return out


@pytest.mark.parametrize("shape,groups,mr", [((13, 5, 3, 3), 1, 8), ((16, 4, 1, 1), 1, 8),
                                             ((12, 3, 2, 3), 3, 8), ((10, 7, 3, 1), 2, 4)])
def test_pack_weight_matches_its_definition(shape, groups, mr):
    w = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = _pack_by_definition(w, groups, mr)
    W = te.placeholder(shape, name="W")
    P = ops.conv2d_pack_weight(W, groups, mr)
    got = np.full(want.shape, np.nan, np.float32)
    te.build(te.create_schedule(P.op), [W, P])(w, got)
    np.testing.assert_array_equal(got, want)


GEMM_CASES = [c for c in CASES if c[-1] == "gemm"]


# AVX2 6x16 tiles (lanes forced to 8): channels no multiple of 6, groups, stride 2, 1x1
NARROW_CASES = [(1, 10, 7, 7, 11, 3, 1, 1, 1, 1, "gemm"),
                (2, 12, 7, 7, 22, 3, 1, 1, 1, 2, "gemm"),
                (1, 8, 14, 14, 11, 3, 2, 1, 1, 1, "gemm"),
                (1, 9, 13, 13, 11, 1, 2, 0, 1, 1, "gemm"),
                (2, 10, 7, 7, 17, 1, 1, 0, 1, 1, "gemm")]


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_gemm_form_reading_a_packed_weight_matches_numpy(case):
    _check_packed(case)


@pytest.mark.parametrize("case", NARROW_CASES, ids=lambda c: "-".join(map(str, c)))
def test_avx2_narrow_tiles_reading_a_packed_weight_match_numpy(case, monkeypatch):
    """The per-shape mr of AVX2's 6x16 tiles (forced, so any host checks it)."""
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "vector_lanes",
                        lambda dtype="float32": 8)
    assert _check_packed(case) == (6, 16)


def _check_packed(case):
    """Build the case's conv reading a packed weight (conv2d_weight_tile's mr for its
    geometry) and a bias + relu epilogue, check it against numpy; gives the GEMM's tile."""
    n, c, h, wd, oc, k, stride, padding, dilation, groups, _ = case
    kh, kw = (k, k) if isinstance(k, int) else k
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    mr = te.autotune.conv2d_weight_tile(x.shape, w.shape, groups, "float32", stride, padding,
                                        dilation)
    X = te.placeholder(x.shape, name="X")
    W = te.placeholder(w.shape, name="W")
    P = te.placeholder(packed_weight_shape(w.shape, groups, mr), name="P")
    B = te.placeholder((oc,), name="B")
    conv = te.autotune.conv2d_compute(X, W, stride, padding, dilation, groups, packed=P)
    out = te.compute(conv.shape, lambda n_, f, y, i: te.max(conv[n_, f, y, i] + B[f], 0.0),
                     name="epilogue", tag="broadcast")
    fn = te.build(te.autotune.schedule_conv2d(out), [X, P, B, out])
    st = (stride, stride) if isinstance(stride, int) else stride
    dl = (dilation, dilation) if isinstance(dilation, int) else dilation
    want = np.maximum(conv_ref(x, w, st, _as4(padding), dl, groups) + b[:, None, None], 0)
    got = np.full(want.shape, np.nan, np.float32)
    fn(x, _pack_by_definition(w, groups, mr), b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    tile = conv.op.input_tensors[0].op.attrs["tile"]
    assert tile[0] == mr
    return tile


def test_direct_form_shapes_have_no_weight_tile():
    assert te.autotune.conv2d_weight_tile((1, 6, 9, 9), (6, 1, 3, 3), 6) is None  # depthwise
    assert te.autotune.conv2d_weight_tile((1, 6, 9, 9), (6, 3, 3, 3), 2) is None  # 3 per group
    assert te.autotune.conv2d_weight_tile((1, te.var("c"), 9, 9), (6, 6, 3, 3)) is None


def test_a_weight_packed_for_another_geometry_is_refused(monkeypatch):
    """AVX2 (forced): the same kernel packs for 6x16 tiles at a 7x7 output and 4x24 at a
    28x28 one, so a weight packed for one does not fit the other."""
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "vector_lanes",
                        lambda dtype="float32": 8)
    tile = te.autotune.conv2d_weight_tile
    assert tile((1, 8, 7, 7), (11, 8, 3, 3), 1, "float32", 1, 1) == 6
    assert tile((1, 8, 28, 28), (11, 8, 3, 3), 1, "float32", 1, 1) == 4
    P = te.placeholder(packed_weight_shape((11, 8, 3, 3), 1, 6), name="P")
    W = te.placeholder((11, 8, 3, 3), name="W")
    te.autotune.conv2d_compute(te.placeholder((1, 8, 7, 7), name="X7"), W, 1, 1, packed=P)
    with pytest.raises(ShapeError, match=r"conv2d_nchw_gemm: packed must have shape "
                                         r"\(1, 3, 8, 3, 3, 4\) \(the kernel \(11, 8, 3, 3\) "
                                         r"packed for groups 1 and mr 4\), got "
                                         r"\(1, 2, 8, 3, 3, 6\)"):
        te.autotune.conv2d_compute(te.placeholder((1, 8, 28, 28), name="X28"), W, 1, 1,
                                   packed=P)


def test_packed_weights_are_checked():
    X = te.placeholder((1, 8, 9, 9), name="X")
    W = te.placeholder((13, 8, 3, 3), name="W")
    bad = te.placeholder((1, 1, 8, 3, 3, 8), name="bad")
    mr = te.autotune.conv2d_weight_tile((1, 8, 9, 9), (13, 8, 3, 3), 1, "float32", 1, 1)
    with pytest.raises(ShapeError, match=rf"conv2d_nchw_gemm: packed must have shape "
                                         rf"\(1, {-(-13 // mr)}, 8, 3, 3, {mr}\) \(the kernel "
                                         rf"\(13, 8, 3, 3\) packed for groups 1 and mr {mr}\), "
                                         rf"got \(1, 1, 8, 3, 3, 8\)"):
        te.autotune.conv2d_compute(X, W, 1, 1, packed=bad)
    D = te.placeholder((6, 1, 3, 3), name="D")
    with pytest.raises(ArgumentError, match=r"conv2d_compute: packed weights are only read "
                                            r"by the GEMM form"):
        te.autotune.conv2d_compute(te.placeholder((1, 6, 9, 9), name="X6"), D, 1, 1,
                                   groups=6, packed=bad)
    with pytest.raises(ShapeError, match=r"conv2d_pack_weight: mr must be a positive int, "
                                         r"got 0"):
        ops.conv2d_pack_weight(W, 1, 0)
    with pytest.raises(ShapeError, match=r"conv2d_pack_weight: kernel output channels "
                                         r"\(13\) must be divisible by groups \(2\)"):
        ops.conv2d_pack_weight(W, 2, 8)
    with pytest.raises(ShapeError, match=r"conv2d_pack_weight: kernel must be 4-d"):
        ops.conv2d_pack_weight(te.placeholder((13, 8, 9), name="W3"), 1, 8)
