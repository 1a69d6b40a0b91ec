"""Pass winograd_rows: a 3x3 stride-1 conv2d of a constant weight, with enough channels and
a large enough output, becomes Winograd F(4, 3) along its rows (input transform, a grouped
1x3 conv, output transform taking the bias); the output transform and what follows fuse
into one kernel; O0 (the imported graph), O1 and O2 give numpy's convolution on random data
(odd sizes, asymmetric padding, batch 2, a batch norm folded in first); every other conv
stays as it was."""
import importlib

import numpy as np
import pytest

import graph
import te
from graph.fuse import fuse
from graph.passes import optimize
from graph.passes.winograd import WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_SIZE, transform_weight
from graph.passes.winograd import winograd_rows
from te.compute import ops

RNG = np.random.default_rng(29)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _conv_ref(x, w, b, pads):
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out + b[None, :, None, None]


def _conv_relu(shape, co, pads, strides=1, dilation=1, groups=1, kernel=3):
    x = graph.input("x", shape)
    w = _rand(co, shape[1] // groups, kernel, kernel) * np.float32(0.1)
    b = _rand(co)
    y = graph.nn.conv2d(x, graph.constant(w, name="w"), graph.constant(b, name="b"),
                        strides=strides, padding=pads, dilation=dilation, groups=groups,
                        name="y")
    return graph.Graph([graph.relu(y, name="r")]), w, b


def _ops(g) -> list:
    return [n.op for n in g.nodes]


CASES = [  # (input shape, output channels, padding (top, left, bottom, right))
    ((1, 16, 7, 7), 16, (1, 1, 1, 1)),         # the smallest taken: 7 x 7, 16 channels
    ((1, 32, 14, 14), 40, (1, 1, 1, 1)),       # ResNet's geometry
    ((2, 35, 17, 16), 33, (1, 0, 2, 1)),       # batch 2, odd channels, 18 rows: partial tile
    ((1, 40, 16, 19), 48, (0, 2, 0, 0)),       # no rows of padding, 14 rows
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_eligible_convs_take_the_row_winograd_form_at_every_level(case):
    shape, co, pads = case
    g, w, b = _conv_relu(shape, co, pads)
    rewritten = winograd_rows(g)
    assert _ops(rewritten) == ["winograd_rows_input", "conv2d", "winograd_rows_output", "relu"]
    conv = rewritten.nodes[1]
    assert conv.attr["groups"] == 6 and tuple(conv.attr["padding"]) == (0, pads[1], 0,
                                                                        pads[3])
    assert conv.inputs[1].shape == (6 * co, shape[1], 1, 3)
    assert rewritten.nodes[2].inputs[1].name == "b"   # the bias, after the transform
    # O1: the grouped conv's weight packed; the output transform and the relu one kernel
    assert _ops(optimize(g)) == ["winograd_rows_input", "conv2d_packed",
                                 "winograd_rows_output", "relu"]
    assert [grp.ops for grp in fuse(optimize(g))] == [
        ["winograd_rows_input"], ["conv2d_packed"], ["winograd_rows_output", "relu"]]
    x = _rand(*shape)
    want = np.maximum(_conv_ref(x, w, b, pads), 0)
    for level in ("O0", "O1", "O2"):
        m = graph.compile(g, level=level, cache=False)
        assert ("winograd_rows_output" in str(m)) == (level != "O0")
        got = m.run({"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("what", ["stride 2", "dilation 2", "groups 2", "1x1", "channels",
                                  "rows", "columns", "padding 3", "off", "TE_WINOGRAD=0"])
def test_other_convs_stay_as_they_were(what, monkeypatch):
    c, s = WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_SIZE
    args = {"stride 2": ((1, c, 2 * s, 2 * s), c, 1, {"strides": 2}),
            "dilation 2": ((1, c, s + 2, s + 2), c, 2, {"dilation": 2}),
            "groups 2": ((1, 2 * c, s, s), 2 * c, 1, {"groups": 2}),
            "1x1": ((1, c, s, s), c, 0, {"kernel": 1}),
            "channels": ((1, c - 1, s, s), c, 1, {}),
            "rows": ((1, c, s - 1, s), c, 1, {}),
            "columns": ((1, c, s, s + 1), c, (1, 0, 1, 0), {}),
            "padding 3": ((1, c, s, s), c, (3, 1, 0, 1), {}),
            "off": ((1, c, s, s), c, 1, {}),
            "TE_WINOGRAD=0": ((1, c, s, s), c, 1, {})}[what]
    if what == "off":
        monkeypatch.setattr(importlib.import_module("graph.passes.winograd"), "WINOGRAD_ON",
                            False)
    if what == "TE_WINOGRAD=0":
        monkeypatch.setenv("TE_WINOGRAD", "0")
    shape, co, pads, kw = args
    g, _, _ = _conv_relu(shape, co, pads, **kw)
    assert str(winograd_rows(g)) == str(g)


def test_a_weight_fed_at_run_time_keeps_the_direct_form():
    x, w = graph.input("x", (1, 16, 9, 9)), graph.input("w", (16, 16, 3, 3))
    g = graph.Graph([graph.nn.conv2d(x, w, padding=1, name="y")])
    assert _ops(winograd_rows(g)) == ["conv2d"]


def test_non_finite_inputs_give_what_the_docstring_says():
    """The documented difference from the direct form: an infinity becomes NaN, a NaN
    reaches its whole tile of 4 output rows; finite values elsewhere still match."""
    g, w, b = _conv_relu((1, 16, 8, 9), 16, (1, 1, 1, 1))
    x = _rand(1, 16, 8, 9)
    x[0, 3, 2, 4] = np.inf
    x[0, 5, 6, 1] = np.nan
    direct = graph.compile(g, level="O0", cache=False).run({"x": x})[0]
    rows = graph.compile(g, level="O1", cache=False).run({"x": x})[0]
    assert np.isinf(direct).any() and not np.isinf(rows).any()
    assert np.isnan(rows[np.isinf(direct)]).all()
    # the infinity (input row 2, column 4) reaches output rows 1-3 directly, all of its
    # tile's rows 0-3 here; the NaN (row 6, column 1) rows 5-7 directly, 4-7 here
    assert not np.isnan(direct[0, :, 0, 3:6]).any() and np.isnan(rows[0, :, 0, 3:6]).all()
    assert not np.isnan(direct[0, :, 4, 0:3]).any() and np.isnan(rows[0, :, 4, 0:3]).all()
    finite = np.isfinite(direct) & np.isfinite(rows)
    np.testing.assert_allclose(rows[finite], direct[finite], rtol=1e-4, atol=1e-4)


def test_a_batch_norm_folds_into_the_weights_first():
    x = graph.input("x", (1, 32, 15, 15))
    w, b = _rand(32, 32, 3, 3) * np.float32(0.1), _rand(32)
    scale, shift = np.abs(_rand(32)) + np.float32(0.5), _rand(32)
    mean, var = _rand(32), np.abs(_rand(32)) + np.float32(0.5)
    y = graph.nn.conv2d(x, graph.constant(w, name="w"), graph.constant(b, name="b"), padding=1)
    bn = graph.nn.batch_norm(y, *(graph.constant(a) for a in (scale, shift, mean, var)),
                             epsilon=1e-5)
    g = graph.Graph([graph.relu(bn, name="r")])
    assert _ops(optimize(g))[:3] == ["winograd_rows_input", "conv2d_packed",
                                     "winograd_rows_output"]
    xa = _rand(1, 32, 15, 15)
    s = scale / np.sqrt(var + 1e-5)
    want = np.maximum((_conv_ref(xa, w, b, (1, 1, 1, 1)) - mean[:, None, None])
                      * s[:, None, None] + shift[:, None, None], 0)
    for level in ("O0", "O1"):
        got = graph.compile(g, level=level, cache=False).run({"x": xa})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_weight_transform_in_numpy_is_te_s():
    w = _rand(5, 3, 3, 3)
    W = te.placeholder(w.shape, name="W")
    U = ops.winograd_rows_weight(W)
    got = np.full((30, 3, 1, 3), np.nan, np.float32)
    te.build(te.create_schedule(U.op), [W, U])(w, got)
    np.testing.assert_allclose(transform_weight(w), got, rtol=1e-6, atol=1e-6)
