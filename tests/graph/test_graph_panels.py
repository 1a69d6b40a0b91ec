"""The O1 pass pack_matmul_weights: a matmul by a constant weight becomes matmul_panel of
the weight laid out once in panels; the same results as before, odd widths (zero-padded
last panel), what it leaves alone; and te's matmul_panel under the automatic space."""
import numpy as np
import pytest

import graph
import te
from graph.passes import pack_matmul_weights
from graph.passes.panels import panels
from te.compute.ops import matmul_panel

RNG = np.random.default_rng(61)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("a_shape, n", [((1, 13, 29), 45), ((7, 40), 64), ((3, 5, 16), 1000),
                                        ((2, 9), 3)])
def test_a_constant_weight_is_laid_out_once_with_the_same_results(a_shape, n):
    x = graph.input("x", a_shape)
    w = graph.constant(_rand(a_shape[-1], n), name="w")
    b = graph.constant(_rand(n), name="b")
    g = graph.Graph([graph.add(graph.nn.matmul(x, w, name="mm"), b, name="y")])
    new = pack_matmul_weights(g)
    (mm,) = [node for node in new.nodes if node.op.startswith("matmul")]
    assert mm.op == "matmul_panel" and mm.attr == {"n": n}
    p = mm.inputs[1]
    nr = te.autotune.panel_width(n)
    assert p.shape == (-(-n // nr), a_shape[-1], nr) and p.is_constant
    feeds = {"x": _rand(*a_shape)}
    want = np.asarray(feeds["x"]) @ w.data + b.data
    for level in ("O0", "O1"):
        (got,) = graph.compile(new, level=level).run(feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (o1,) = graph.compile(g, level="O1").run(feeds)     # the pass inside O1's pipeline
    np.testing.assert_allclose(o1, want, rtol=1e-5, atol=1e-5)


def test_matmuls_it_leaves_alone():
    # a weight computed at run time, a vector operand, batched weights
    x, v = graph.input("x", (4, 6)), graph.input("v", (6, 5))
    g = graph.Graph([graph.nn.matmul(x, v, name="a"),
                     graph.nn.matmul(x, graph.constant(_rand(6), name="c"), name="b"),
                     graph.nn.matmul(graph.input("z", (2, 4, 6)),
                                  graph.constant(_rand(2, 6, 3), name="d"), name="e")])
    assert [n.op for n in pack_matmul_weights(g).nodes] == ["matmul"] * 3


def test_panels_layout():
    w = np.arange(12, dtype=np.float32).reshape(2, 6)
    p = panels(w, 4)
    assert p.shape == (2, 2, 4)
    np.testing.assert_array_equal(p[0], w[:, :4])
    np.testing.assert_array_equal(p[1], [[4, 5, 0, 0], [10, 11, 0, 0]])


def test_te_matmul_panel_is_not_packed_again_and_matches_numpy():
    n, k = 45, 29
    nr = te.autotune.panel_width(n)
    A = te.placeholder((2, 13, k), name="A")
    P = te.placeholder((-(-n // nr), k, nr), name="P")
    C = matmul_panel(A, P, n)
    s, args = te.autotune.auto_schedule(C)
    assert "_pack" not in str(te.lower(s, args))
    a, w = _rand(2, 13, k), _rand(k, n)
    c = np.zeros((2, 13, n), np.float32)
    te.build(s, args)(a, panels(w, nr), c)
    np.testing.assert_allclose(c, a @ w, rtol=1e-5, atol=1e-5)


def test_te_matmul_panel_and_panel_width_refuse_bad_arguments():
    A = te.placeholder((3, 8), name="A")
    P = te.placeholder((2, 8, 16), name="P")
    with pytest.raises(te.ArgumentError, match=r"matmul_panel: n must be an int in \(16, 32\]"):
        matmul_panel(A, P, 40)
    with pytest.raises(te.ArgumentError, match="matmul_panel: n must be"):
        matmul_panel(A, P, 16)
    with pytest.raises(te.ArgumentError, match="panel_width: n must be a positive int"):
        te.autotune.panel_width(0)
