"""graph.compile at O0 and Module.run: results against numpy, intermediates with keep=True,
identical kernels compiled once, and the errors of compile and run."""
import numpy as np
import pytest

import graph
import te

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _conv_ref(x, w, b, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oc, _, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], oc, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def test_o0_runs_a_small_cnn_like_numpy_and_keeps_intermediates():
    w, b = _rand(6, 3, 3, 3), _rand(6)
    x = graph.input("x", (2, 3, 13, 11))
    conv = graph.nn.conv2d(x, graph.constant(w, name="w"), graph.constant(b, name="b"),
                           strides=2, padding=1, name="conv")
    act = graph.relu(conv, name="act")
    pooled = graph.nn.global_avg_pool2d(act, name="gap")
    flat = graph.flatten(pooled, name="flat")
    logits = graph.nn.dense(flat, graph.constant(_rand(4, 6), name="fc_w"), name="fc")
    m = graph.compile(graph.Graph([graph.nn.softmax(logits, name="prob"), act]))
    xa = _rand(2, 3, 13, 11)
    prob, act_out = m.run({"x": xa})
    conv_ref = _conv_ref(xa, w, b, 2, 1)
    np.testing.assert_allclose(act_out, np.maximum(conv_ref, 0), rtol=1e-4, atol=1e-4)
    logits_ref = np.maximum(conv_ref, 0).mean(axis=(2, 3)) @ m.graph.constants[2].data.T
    e = np.exp(logits_ref - logits_ref.max(axis=1, keepdims=True))
    np.testing.assert_allclose(prob, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)
    kept = m.run({"x": xa}, keep=True)
    assert list(kept) == ["x", "w", "b", "fc_w", "conv", "act", "gap", "flat", "fc", "prob"]
    np.testing.assert_allclose(kept["conv"], conv_ref, rtol=1e-4, atol=1e-4)
    assert kept["gap"].shape == (2, 6, 1, 1) and kept["prob"] is not None


def test_identical_workloads_compile_one_kernel():
    x = graph.input("x", (3, 5))
    y = graph.relu(graph.add(x, x, name="a1"), name="r1")
    z = graph.relu(graph.add(y, y, name="a2"), name="r2")
    m = graph.compile(graph.Graph(z))
    assert len(m.steps) == 4 and m.num_kernels == 2
    xa = _rand(3, 5)
    np.testing.assert_allclose(m.run({"x": xa})[0], np.maximum(4 * np.maximum(xa, 0), 0),
                               rtol=1e-6)
    assert "k0_add: %a1: float32[3, 5] = add(%x, %x)" in str(m)


def test_scalar_constants_and_bool_outputs():
    x = graph.input("x", (4, 7))
    m = graph.compile(graph.Graph([graph.greater(x, 0.25), graph.multiply(x, 3.0)]))
    xa = _rand(4, 7)
    mask, triple = m.run({"x": xa})
    assert mask.dtype == np.bool_ and (mask == (xa > 0.25)).all()
    np.testing.assert_allclose(triple, 3 * xa, rtol=1e-6)


def test_run_errors_name_the_input_the_expected_and_the_given():
    x = graph.input("x", (2, 3))
    m = graph.compile(graph.Graph(graph.relu(x)))
    with pytest.raises(graph.FeedError, match=r"run: missing input 'x' \(float32\[2, 3\]\); "
                                              r"the graph's inputs are \['x'\]"):
        m.run({})
    with pytest.raises(graph.FeedError, match=r"run: unknown input 'y'; the graph's inputs "
                                              r"are \['x'\]"):
        m.run({"x": _rand(2, 3), "y": _rand(2, 3)})
    with pytest.raises(graph.FeedError, match=r"run: input 'x' must have shape \(2, 3\), got "
                                              r"\(3, 2\)"):
        m.run({"x": _rand(3, 2)})
    with pytest.raises(graph.FeedError, match=r"run: input 'x' must have dtype float32, got "
                                              r"float64"):
        m.run({"x": np.ones((2, 3))})
    with pytest.raises(graph.FeedError, match=r"run: feeds must be a dict"):
        m.run([_rand(2, 3)])


def test_compile_errors():
    g = graph.Graph(graph.relu(graph.input("x", (2, 3))))
    with pytest.raises(graph.GraphError, match=r"graph\.compile: level must be one of "
                                               r"\['O0', 'O1', 'O2'\], got 'O3'"):
        graph.compile(g, level="O3")
    with pytest.raises(graph.GraphError, match=r"graph\.compile: target must be one of "
                                               r"\['llvm'\]"):
        graph.compile(g, target="opencl")
    sym = graph.Graph(graph.relu(graph.input("x", (te.var("n"), 3))))
    with pytest.raises(graph.GraphError, match=r"value 'x' has symbolic shape float32\[n, 3\];"
                                               r" compile needs constant shapes"):
        graph.compile(sym)


def test_profile_times_every_step_and_prints_a_table():
    x = graph.input("x", (4, 9))
    m = graph.compile(graph.Graph(graph.exp(graph.relu(x, name="r"), name="e")))
    prof = m.profile({"x": _rand(4, 9)}, repeat=3)
    assert [(r[0], r[1], r[2]) for r in prof.rows] == [("k0_relu", "relu", "r"),
                                                       ("k1_exp", "exp", "e")]
    assert all(r[3] > 0 for r in prof.rows) and prof.total == sum(r[3] for r in prof.rows)
    lines = str(prof).splitlines()
    assert lines[0].split() == ["kernel", "ops", "node", "time", "(us)", "share"]
    assert lines[1].split()[:3] == ["k0_relu", "relu", "r"] and lines[-1].endswith("100.0%")
    with pytest.raises(graph.FeedError, match=r"profile: repeat must be a positive int, got 0"):
        m.profile({"x": _rand(4, 9)}, repeat=0)
    with pytest.raises(graph.FeedError, match=r"run: missing input 'x'"):
        m.profile({})
