"""Level O1's fusion (graph.fuse) and fused kernels: which nodes share a kernel, and every
case's result against O0 and numpy on random data of odd sizes."""
import math

import numpy as np
import pytest

import graph
from graph.fuse import fuse

RNG = np.random.default_rng(11)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _const(a, name):
    return graph.constant(a, name=name)


def _groups(g) -> list:
    """Each group as its ops, in order."""
    return [group.ops for group in fuse(g)]


def _check(g, feeds, ref, rtol=1e-4, atol=1e-4) -> graph.executor.Module:
    """Compile `g` at O0 and O1, compare both with `ref` (a list, one array per output);
    returns the O1 module."""
    m0, m1 = graph.compile(g, level="O0"), graph.compile(g, level="O1")
    outs0, outs1 = m0.run(feeds), m1.run(feeds)
    for o0, o1, r in zip(outs0, outs1, ref, strict=True):
        np.testing.assert_allclose(o1, r, rtol=rtol, atol=atol)
        np.testing.assert_allclose(o1, o0, rtol=rtol, atol=atol)
    assert m1.num_kernels < m0.num_kernels or len(m1.steps) < len(m0.steps)
    return m1


def _conv_ref(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oc, _, kh, kw = w.shape
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], oc, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out + b[None, :, None, None]


def test_conv_bias_relu_is_one_kernel():
    w, b, b2 = _rand(6, 3, 3, 3), _rand(6), _rand(6, 1, 1)
    x = graph.input("x", (2, 3, 9, 7))
    conv = graph.nn.conv2d(x, _const(w, "w"), _const(b, "b"), padding=1, name="conv")
    # a second bias fed at run time (a constant one folds into the conv's bias at O1)
    out = graph.relu(graph.add(conv, graph.input("b2", (6, 1, 1)), name="bias2"), name="act")
    g = graph.Graph(out)
    assert _groups(g) == [["conv2d", "add", "relu"]]
    xa = _rand(2, 3, 9, 7)
    m = _check(g, {"x": xa, "b2": b2}, [np.maximum(_conv_ref(xa, w, b, 1) + b2, 0)])
    # O1 packs the constant weight (pass pack_conv_weights): the conv is conv2d_packed
    assert len(m.steps) == 1 and "conv2d_packed, add, relu -> %act: float32[2, 6, 9, 7]" in str(m)


def test_conv_residual_add_relu_is_one_kernel():
    w, b = _rand(5, 5, 3, 3), _rand(5)
    x = graph.input("x", (1, 5, 11, 6))
    conv = graph.nn.conv2d(x, _const(w, "w"), _const(b, "b"), padding=1, name="conv")
    out = graph.relu(graph.add(conv, x, name="residual"), name="act")
    g = graph.Graph(out)
    assert _groups(g) == [["conv2d", "add", "relu"]]
    xa = _rand(1, 5, 11, 6)
    _check(g, {"x": xa}, [np.maximum(_conv_ref(xa, w, b, 1) + xa, 0)])


def _gelu_erf(v):
    """GELU as ONNX exporters write it: x * 0.5 * (1 + erf(x / sqrt 2)), a diamond on x."""
    half = graph.multiply(v, 0.5, name="gelu_half")
    e = graph.erf(graph.divide(v, math.sqrt(2.0), name="gelu_div"), name="gelu_erf")
    return graph.multiply(half, graph.add(e, 1.0, name="gelu_one"), name="gelu")


def test_matmul_bias_gelu_is_one_kernel():
    w, b = _rand(19, 37), _rand(37)
    x = graph.input("x", (2, 13, 19))
    h = graph.add(graph.nn.matmul(x, _const(w, "w"), name="mm"), _const(b, "b"), name="bias")
    g = graph.Graph(_gelu_erf(h))
    assert _groups(g) == [["matmul", "add", "multiply", "divide", "erf", "add", "multiply"]]
    xa = _rand(2, 13, 19)
    hr = xa.astype(np.float64) @ w + b
    from math import erf
    ref = hr * 0.5 * (1 + np.vectorize(erf)(hr / math.sqrt(2.0)))
    m = _check(g, {"x": xa}, [ref])
    assert len(m.steps) == 1


def test_attention_scale_mask_softmax_is_one_kernel():
    q, k = graph.input("q", (2, 3, 17, 8)), graph.input("k", (2, 3, 8, 17))
    mask = graph.input("mask", (2, 1, 1, 17))
    scores = graph.nn.matmul(q, k, name="scores")
    scaled = graph.multiply(scores, 1 / math.sqrt(8.0), name="scale")
    masked = graph.add(scaled, graph.multiply(graph.subtract(1.0, mask, name="inv"), -1e4,
                                              name="bias"), name="masked")
    g = graph.Graph(graph.nn.softmax(masked, axis=-1, name="probs"))
    assert _groups(g) == [["matmul"], ["multiply", "subtract", "multiply", "add", "softmax"]]
    qa, ka = _rand(2, 3, 17, 8), _rand(2, 3, 8, 17)
    ma = (RNG.random((2, 1, 1, 17)) < 0.7).astype("float32")
    s = qa.astype(np.float64) @ ka / math.sqrt(8.0) - (1 - ma) * 1e4
    e = np.exp(s - s.max(-1, keepdims=True))
    _check(g, {"q": qa, "k": ka, "mask": ma}, [e / e.sum(-1, keepdims=True)], atol=1e-5)


def test_reduction_takes_its_elementwise_and_injective_producers():
    x = graph.input("x", (7, 5, 33))
    t = graph.transpose(graph.exp(x, name="e"), (1, 0, 2), name="t")
    out = graph.reduce_sum(graph.multiply(t, t, name="sq"), axis=-1, keepdims=False,
                           name="s")
    g = graph.Graph(graph.relu(out, name="after"))
    # the relu after the reduction is a kernel of its own (TVM: no epilogue on a reduction)
    assert _groups(g) == [["exp", "transpose", "multiply", "reduce_sum"], ["relu"]]
    xa = _rand(7, 5, 33)
    ref = np.maximum((np.exp(xa.astype(np.float64)) ** 2).sum(-1).T, 0)
    _check(g, {"x": xa}, [ref])


def test_nothing_fuses_across_an_opaque_op():
    x = graph.input("x", (2, 4, 9, 5))
    a = graph.exp(x, name="a")
    n = graph.nn.lrn(a, size=3, name="lrn")
    out = graph.sigmoid(graph.add(n, 1.0, name="p"), name="out")
    g = graph.Graph(out)
    assert _groups(g) == [["exp"], ["lrn"], ["add", "sigmoid"]]
    m0 = graph.compile(g, level="O0")
    xa = _rand(2, 4, 9, 5)
    np.testing.assert_allclose(graph.compile(g, level="O1").run({"x": xa})[0],
                               m0.run({"x": xa})[0], rtol=1e-5, atol=1e-6)


def test_a_value_used_by_two_groups_ends_its_group():
    w1, w2 = _rand(11, 6), _rand(11, 7)
    x = graph.input("x", (5, 11))
    y = graph.tanh(graph.exp(x, name="e"), name="y")   # read by two matmuls: a group output
    o1 = graph.relu(graph.nn.matmul(y, _const(w1, "w1"), name="m1"), name="o1")
    o2 = graph.nn.matmul(y, _const(w2, "w2"), name="m2")
    g = graph.Graph([o1, o2])
    groups = fuse(g)
    assert [gr.ops for gr in groups] == [["exp", "tanh"], ["matmul", "relu"], ["matmul"]]
    assert [[v.name for v in gr.outputs] for gr in groups] == [["y"], ["o1"], ["m2"]]
    xa = _rand(5, 11)
    ya = np.tanh(np.exp(xa.astype(np.float64)))
    m = _check(g, {"x": xa}, [np.maximum(ya @ w1, 0), ya @ w2])
    kept = m.run({"x": xa}, keep=True)
    # 'e' lives inside a kernel; O1 keeps the weights laid out in panels (pack_matmul_weights)
    assert list(kept) == ["x", "w1/panels", "w2/panels", "y", "o1", "m2"]


def test_graph_outputs_inside_a_chain_end_their_groups():
    x = graph.input("x", (3, 13))
    a = graph.exp(x, name="a")
    b = graph.sqrt(graph.add(a, 1.0, name="b0"), name="b")
    c = graph.negative(graph.log(b, name="c0"), name="c")
    g = graph.Graph([c, b])
    assert _groups(g) == [["exp", "add", "sqrt"], ["log", "negative"]]
    xa = _rand(3, 13)
    bref = np.sqrt(np.exp(xa.astype(np.float64)) + 1)
    _check(g, {"x": xa}, [-np.log(bref), bref], rtol=1e-5, atol=1e-6)


def test_reshapes_are_views_and_split_stays_alone():
    x = graph.input("x", (4, 6, 5))
    r = graph.reshape(graph.relu(x, name="r0"), (24, 5), name="r")
    parts = graph.split(graph.exp(r, name="e"), axis=0, sizes=(10, 14), name="sp")
    g = graph.Graph([graph.add(parts[0], 1.0, name="o0"), graph.sigmoid(parts[1], name="o1")])
    groups = fuse(g)
    assert [gr.ops for gr in groups] == [["relu"], ["reshape"], ["exp"], ["split"],
                                         ["add"], ["sigmoid"]]
    assert [gr.is_view for gr in groups] == [False, True, False, False, False, False]
    xa = _rand(4, 6, 5)
    m = graph.compile(g, level="O1")
    e = np.exp(np.maximum(xa, 0).reshape(24, 5))
    o0, o1 = m.run({"x": xa})
    np.testing.assert_allclose(o0, e[:10] + 1, rtol=1e-5)
    np.testing.assert_allclose(o1, 1 / (1 + np.exp(-e[10:])), rtol=1e-5)
    assert "  view: reshape -> %r: float32[24, 5]" in str(m)
    kept = m.run({"x": xa}, keep=True)
    assert np.shares_memory(kept["r"], kept["r0"])   # the view copied nothing


def test_identical_fused_groups_compile_once_and_profile_lists_fused_ops():
    x = graph.input("x", (3, 17))
    y = graph.sigmoid(graph.add(x, 1.0, name="a1"), name="s1")
    y = graph.reshape(y, (17, 3), name="v")
    z = graph.sigmoid(graph.add(y, 1.0, name="a2"), name="s2")
    z = graph.reshape(z, (3, 17), name="v2")
    out = graph.sigmoid(graph.add(z, 1.0, name="a3"), name="s3")
    g = graph.Graph(out)
    m = graph.compile(g, level="O1")
    assert len(m.steps) == 5 and m.num_kernels == 2   # (3, 17) twice, (17, 3) once
    xa = _rand(3, 17)

    def f(v):
        return 1 / (1 + np.exp(-(v + 1)))
    ref = f(f(f(xa).reshape(17, 3)).reshape(3, 17))
    np.testing.assert_allclose(m.run({"x": xa})[0], ref, rtol=1e-5)
    table = str(m.profile({"x": xa}, repeat=2))
    assert "add+sigmoid" in table and "view" in table and table.count("\n") == 6


@pytest.mark.parametrize("level", ["O3", "o1"])
def test_unknown_level_is_refused(level):
    with pytest.raises(graph.GraphError, match=r"level must be one of \['O0', 'O1', 'O2'\], "
                                               r"got"):
        graph.compile(graph.Graph(graph.relu(graph.input("x", (2,)))), level=level)


def test_an_output_that_is_a_view_of_a_feed_is_a_copy():
    x = graph.input("x", (4, 6))
    g = graph.Graph([graph.reshape(x, (6, 4), name="r"), graph.exp(x, name="e")])
    m = graph.compile(g, level="O1")
    xa = _rand(4, 6)
    r, e = m.run({"x": xa})
    assert not np.shares_memory(r, xa)
    np.testing.assert_array_equal(r, xa.reshape(6, 4))
    np.testing.assert_allclose(e, np.exp(xa), rtol=1e-6)


def test_a_lone_node_reading_one_value_twice_runs_at_o1():
    # CSE makes the two softmaxes one value, so the add reads it twice, alone in its group
    x = graph.input("x", (3, 5))
    g = graph.Graph(graph.add(graph.nn.softmax(x, name="s1"), graph.nn.softmax(x, name="s2"),
                              name="out"))
    m = graph.compile(g, level="O1")
    assert [s.ops for s in m.steps] == [("softmax",), ("add",)]
    assert [v.name for v in m.steps[1].inputs] == ["s1", "s1"]
    xa = _rand(3, 5)
    e = np.exp(xa - xa.max(-1, keepdims=True))
    np.testing.assert_allclose(m.run({"x": xa})[0], 2 * e / e.sum(-1, keepdims=True),
                               rtol=1e-5)
