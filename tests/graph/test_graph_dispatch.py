"""Levels O0 and O1 over the planned arena (graph/dispatch.py): what a run returns stays the
caller's (the next run changes none of it), feeds are never written, run(keep=True) gives
every value right and in memory of its own, O0, O1 and O2 agree, runs from threads agree, a
run allocates its outputs only, a failing kernel raises the runtime's error, and a step that
is no compiled kernel still runs."""
import dataclasses
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import graph
import runtime
from graph.executor import Module
from test_graph_o2 import _tricky_graph

LEVELS = ["O0", "O1"]


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _weight(g):
    return next(c.data for c in g.constants if c.name == "w")


def _tricky_reference(x, w) -> dict:
    """numpy's values of _tricky_graph, by name."""
    h = np.maximum(x @ w + 0.5, 0)
    e = np.exp(np.exp(np.tanh(h)))                     # softmax(exp(tanh(h)))
    s = e / e.sum(axis=1, keepdims=True)
    u = 1 / (1 + np.exp(-s.reshape(10, 6))) + x.reshape(10, 6)
    return {"h": h, "r": h.reshape(60), "s": s, "t": s.reshape(10, 6), "u": u,
            "xv": x.reshape(60), "rr": h.reshape(6, 10)}


def _check_outputs(got, ref, x, w):
    want = [ref["u"], ref["r"], ref["xv"], w, ref["rr"]]
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", LEVELS)
def test_a_run_changes_nothing_an_earlier_run_returned_nor_the_feeds(level):
    g = _tricky_graph()
    m = graph.compile(g, level=level)
    w = _weight(g)
    rng = np.random.default_rng(3)
    feeds = [_rand(rng, 6, 10) for _ in range(3)]
    kept_feeds = [f.copy() for f in feeds]
    runs = [m.run({"x": f}) for f in feeds]   # each run returns into the same plan's arena
    for got, x in zip(runs, kept_feeds):
        _check_outputs(got, _tricky_reference(x, w), x, w)
    for f, kept in zip(feeds, kept_feeds):
        np.testing.assert_array_equal(f, kept)            # feeds are read only
    first, second = runs[0], runs[1]
    assert not any(np.shares_memory(a, b) for a in first for b in second)
    assert not np.shares_memory(first[2], feeds[0])       # a feed's view is a copy
    first[3][0, 0] = 7.0                                  # and a constant's
    assert m.run({"x": feeds[0]})[3][0, 0] != 7.0
    # at O1 a reshape is a view: outputs r and rr are one array (at O0 a copying kernel)
    assert np.shares_memory(first[1], first[4]) == (level == "O1")


@pytest.mark.parametrize("level", LEVELS)
def test_keep_gives_every_value_right_and_in_memory_of_its_own(level):
    g = _tricky_graph()
    m = graph.compile(g, level=level)
    w = _weight(g)
    rng = np.random.default_rng(4)
    x1, x2 = _rand(rng, 6, 10), _rand(rng, 6, 10)
    m.run({"x": x2})                                      # the arena holds another run's
    kept = m.run({"x": x1}, keep=True)
    ref = _tricky_reference(x1, w)
    assert {"x", "w", "r", "s", "u", "xv", "rr"} <= set(kept)   # h: in a fused group at O1
    for name, want in ref.items():
        if name in kept:
            np.testing.assert_allclose(kept[name], want, rtol=1e-5, atol=1e-5)
    snapshot = {name: a.copy() for name, a in kept.items()}
    m.run({"x": x2})
    m.run({"x": x2}, keep=True)
    arrays = list(kept.items())
    for i, (name, a) in enumerate(arrays):
        np.testing.assert_array_equal(a, snapshot[name])  # later runs wrote none of them
        for other, b in arrays[i + 1:]:
            # values sharing memory are views of one another (a reshape): the same bytes;
            # two values in one reused buffer would differ
            if np.shares_memory(a, b):
                assert a.tobytes() == b.tobytes(), (name, other)


def test_o0_o1_and_o2_agree():
    g = _tricky_graph()
    rng = np.random.default_rng(5)
    xa = _rand(rng, 6, 10)
    m0, m1, m2 = (graph.compile(g, level=lv) for lv in ("O0", "O1", "O2"))
    o0, o1, o2 = (m.run({"x": xa}) for m in (m0, m1, m2))
    for a, b, c in zip(o0, o1, o2):
        np.testing.assert_array_equal(b, c)               # the same kernels, the same plan
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    kept = m1.run({"x": xa}, keep=True)                   # each value in its own array
    for v, b in zip(m1.graph.outputs, o1):
        np.testing.assert_array_equal(kept[v.name], b)


@pytest.mark.parametrize("level", LEVELS)
def test_runs_from_threads_agree(level):
    m = graph.compile(_tricky_graph(), level=level)
    rng = np.random.default_rng(6)
    feeds = [{"x": _rand(rng, 6, 10)} for _ in range(4)]
    want = [m.run(f) for f in feeds]
    got = [None] * len(feeds)

    def work(k):
        for _ in range(100):
            got[k] = m.run(feeds[k])
            if any(not np.array_equal(a, b) for a, b in zip(got[k], want[k])):
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(feeds))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch often: a run finds the arena busy, or takes it
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("level", LEVELS)
def test_a_run_allocates_its_outputs_only(level):
    rng = np.random.default_rng(8)
    x = graph.input("x", (128, 128))
    wa = _rand(rng, 128, 128) / 8
    w = graph.constant(wa, name="w")
    h = graph.tanh(graph.nn.matmul(x, w), name="h")       # 64 KiB intermediates
    h = graph.sigmoid(graph.nn.matmul(graph.exp(h), w), name="h2")
    out = graph.reduce_sum(h, axis=1, keepdims=False, name="out")
    m = graph.compile(graph.Graph(out), level=level)
    xa = _rand(rng, 128, 128)
    ref = (1 / (1 + np.exp(-(np.exp(np.tanh(xa @ wa)) @ wa)))).sum(axis=1)
    tracemalloc.start()
    try:
        got = m.run({"x": xa})     # the first: compile planned the arena already
        fast_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        m.run({"x": xa}, keep=True)
        keep_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got[0], ref, rtol=1e-4)
    assert fast_peak < 128 * 4 + 16 * 1024, fast_peak
    assert keep_peak > 2 * 128 * 128 * 4, keep_peak


def test_a_step_that_is_no_compiled_kernel_runs_step_by_step():
    class Negate:
        name = "negate"

        def __call__(self, a):
            return [np.negative(a)]

    x = graph.input("x", (3, 4))
    m = graph.compile(graph.Graph(graph.exp(graph.relu(x, name="r"), name="e")))
    steps = [dataclasses.replace(m.steps[0], kernel=Negate())] + m.steps[1:]
    custom = Module(m.graph, steps, "O0", "llvm")
    xa = _rand(np.random.default_rng(9), 3, 4)
    np.testing.assert_allclose(custom.run({"x": xa})[0], np.exp(-xa), rtol=1e-6)
    assert [r[0] for r in custom.profile({"x": xa}, repeat=2).rows] == ["negate", "k1_exp"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_kernel_failing_over_the_arena_raises_its_error_and_frees_the_arena(
        level, monkeypatch):
    x = graph.input("x", (3, 4))
    m = graph.compile(graph.Graph(graph.exp(graph.relu(x, name="r"), name="e")), level=level)
    xa = _rand(np.random.default_rng(10), 3, 4)
    # status -2: heap buffer 0 could not be allocated (runtime.Module.raise_status's words)
    monkeypatch.setattr(runtime.Module, "entry", property(lambda self: lambda *args: -2))
    with pytest.raises(MemoryError, match=r"kernel 'k0_[a-z_]+': could not allocate memory "
                                          r"for buffer '#0'"):
        m.run({"x": xa})
    monkeypatch.undo()
    np.testing.assert_allclose(m.run({"x": xa})[0], np.exp(np.maximum(xa, 0)), rtol=1e-6)
    assert not m._dispatch_lock.locked()   # the failed run let the arena go
