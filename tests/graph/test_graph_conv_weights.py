"""Pass pack_conv_weights (and the fold_constants run after it): a GEMM-form conv2d of a
constant weight reads it pre-packed, folded once at compile time; the same results at O0
and O1 on random data (odd channel counts, groups, a batch norm folded in first); convs of
a direct form or a run-time weight stay conv2d."""
import importlib

import numpy as np
import pytest

import graph
import te
from graph.passes import fold_constants, optimize, pack_conv_weights
from graph.passes.fold import MAX_GROWTH_ELEMENTS, _pack_weight
from te.compute import ops

RNG = np.random.default_rng(23)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _ops(g) -> list:
    return [n.op for n in g.nodes]


def _both_levels(g, atol=1e-4):
    feeds = {v.name: _rand(*v.shape) for v in g.inputs}
    want = graph.compile(g, level="O0").run(feeds)
    got = graph.compile(g, level="O1").run(feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=atol * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_pack_weight_folding_in_numpy_matches_te(groups):
    w = _rand(12, 4, 3, 2)
    mr = te.autotune.conv2d_tile()[0]
    W = te.placeholder(w.shape, name="W")
    P = ops.conv2d_pack_weight(W, groups, mr)
    got = np.full(_pack_weight([w], groups, mr).shape, np.nan, np.float32)
    te.build(te.create_schedule(P.op), [W, P])(w, got)
    np.testing.assert_array_equal(_pack_weight([w], groups, mr), got)


def test_a_constant_weight_is_packed_once_at_compile_time():
    x = graph.input("x", (1, 6, 9, 11))
    y = graph.nn.conv2d(x, graph.constant(_rand(13, 6, 3, 3), name="w"),
                        graph.constant(_rand(13), name="b"), padding=1, name="y")
    g = graph.Graph([graph.relu(y, name="r")])
    packed = pack_conv_weights(g)
    assert _ops(packed) == ["conv2d_pack_weight", "conv2d_packed", "relu"]
    assert dict(packed.nodes[1].attr)["kernel_shape"] == (13, 6, 3, 3)
    folded = optimize(g)
    assert _ops(folded) == ["conv2d_packed", "relu"]
    w = folded.nodes[0].inputs[1]
    mr = te.autotune.conv2d_weight_tile((1, 6, 9, 11), (13, 6, 3, 3), 1, "float32", 1, 1)
    assert w.is_constant and w.shape == (1, -(-13 // mr), 6, 3, 3, mr)
    _both_levels(g)


def test_the_packed_layout_follows_each_convs_geometry(monkeypatch):
    """AVX2 (forced): the same weight shape packs for 6x16 tiles at a 7x7 output and 4x24
    at a 28x28 one (conv2d_weight_tile of the conv's own strides and padding), and both
    graphs still match O0."""
    monkeypatch.setattr(importlib.import_module("te.autotune.conv2d"), "vector_lanes",
                        lambda dtype="float32": 8)
    for hw, strides, mr in ((7, 1, 6), (14, 2, 6), (28, 1, 4)):
        x = graph.input("x", (1, 5, hw, hw))
        y = graph.nn.conv2d(x, graph.constant(_rand(11, 5, 3, 3), name="w"), strides=strides,
                            padding=1, name="y")
        g = graph.Graph([graph.relu(y, name="r")])
        folded = optimize(g)
        assert _ops(folded) == ["conv2d_packed", "relu"]
        assert folded.nodes[0].inputs[1].shape == (1, -(-11 // mr), 5, 3, 3, mr)
        _both_levels(g)


def test_a_big_packed_weight_folds_past_the_growth_limit():
    """13 output channels pad up to 16: more growth than fold_constants allows others."""
    c = MAX_GROWTH_ELEMENTS // 9 + 8
    x = graph.input("x", (1, c, 5, 5))
    g = graph.Graph([graph.nn.conv2d(x, graph.constant(_rand(13, c, 3, 3), name="w"),
                                     padding=1, name="y")])
    assert _ops(fold_constants(pack_conv_weights(g))) == ["conv2d_packed"]
    _both_levels(g, atol=1e-3)


def test_batch_norm_folds_first_then_groups_and_1x1_convs_pack():
    x = graph.input("x", (2, 12, 7, 9))
    y = graph.nn.conv2d(x, graph.constant(_rand(21, 4, 3, 3)), strides=2, padding=1,
                        groups=3, name="grouped")
    y = graph.nn.batch_norm(y, *(graph.constant(np.abs(_rand(21)) + 0.5) for _ in range(4)),
                            name="bn")
    y = graph.nn.conv2d(y, graph.constant(_rand(9, 21, 1, 1)), name="pointwise")
    g = graph.Graph([y])
    assert _ops(optimize(g)) == ["conv2d_packed", "conv2d_packed"]
    _both_levels(g)


def test_direct_form_and_run_time_weights_stay_conv2d():
    x = graph.input("x", (1, 6, 9, 9))
    w = graph.input("w", (6, 6, 3, 3))
    a = graph.nn.conv2d(x, w, padding=1, name="runtime_weight")
    b = graph.nn.conv2d(a, graph.constant(_rand(6, 1, 3, 3)), padding=1, groups=6,
                        name="depthwise")
    g = graph.Graph([b], inputs=[x, w])
    assert _ops(optimize(g)) == ["conv2d", "conv2d"]
    _both_levels(g)
