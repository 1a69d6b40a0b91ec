"""Level O2 (graph/o2.py): one native call over the planned arena gives exactly what the
same kernels give run step by step from Python (O1), on small graphs with every kind of
output (a view of an intermediate, of a feed, of another output; a constant), on light
models against onnxruntime, in threads; a run allocates nothing but its outputs."""
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import graph
from graph.executor import Module
from plan_checks import check_plan


def _o1_path(m, feeds) -> list:
    """The O2 module's kernels run step by step from Python, each value in an array of its
    own (run with keep=True; a plain O1 run shares O2's plan, so it is no check of it)."""
    kept = Module.run(m, feeds, keep=True)
    return [kept[v.name] for v in m.graph.outputs]


def _same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _tricky_graph():
    x = graph.input("x", (6, 10))
    w = graph.constant(np.random.default_rng(1).standard_normal((10, 10)).astype(np.float32),
                       name="w")
    h = graph.relu(graph.add(graph.nn.matmul(x, w), graph.constant(
        np.full((10,), 0.5, np.float32))), name="h")
    r = graph.reshape(h, (60,), name="r")           # an output viewing an intermediate
    s = graph.nn.softmax(graph.exp(graph.tanh(h)), axis=1, name="s")
    t = graph.reshape(s, (10, 6), name="t")
    u = graph.add(graph.sigmoid(t), graph.reshape(x, (10, 6)), name="u")
    outs = [u, r, graph.reshape(x, (60,), name="xv"), w, graph.reshape(r, (6, 10),
                                                                        name="rr")]
    return graph.Graph(outs, name="tricky")


def test_o2_equals_o1_on_every_kind_of_output():
    g = _tricky_graph()
    m = graph.compile(g, level="O2")
    check_plan(m.memory_plan)
    rng = np.random.default_rng(0)
    for _ in range(3):  # the arena is reused: each run must see only its own feeds
        xa = rng.standard_normal((6, 10)).astype(np.float32)
        got = m.run({"x": xa})
        _same(got, _o1_path(m, {"x": xa}))
        np.testing.assert_array_equal(got[2], xa.reshape(60))
        assert not np.shares_memory(got[2], xa)        # a feed's view is copied
        got[3][0, 0] = 7.0                             # a constant's too
        assert m.run({"x": xa})[3][0, 0] != 7.0
        assert np.shares_memory(got[1], got[4])        # outputs r and rr: one array
    assert m.level == "O2" and m.memory_plan.arena_bytes > 0
    text = str(m)
    assert text.startswith("module tricky (level O2, target llvm, ") and "arena" in text
    assert len(text.splitlines()) == len(m.calls) + 2
    with pytest.raises(graph.FeedError, match=r"run: input 'x' must have shape \(6, 10\), "
                                              r"got \(6, 9\)"):
        m.run({"x": np.zeros((6, 9), np.float32)})
    # what the fast path does not take goes through the full check, which converts it
    _same(m.run({"x": np.asfortranarray(xa)}), m.run({"x": xa}))
    with pytest.raises(graph.FeedError, match=r"run: unknown input 'y'"):
        m.run({"x": xa, "y": xa})
    keep = m.run({"x": xa}, keep=True)                 # debugging: the O1 path
    assert set(keep) >= {"x", "s", "u", "r"}


def test_o2_runs_from_threads():
    g = _tricky_graph()
    m = graph.compile(g, level="O2")
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal((6, 10)).astype(np.float32)} for _ in range(4)]
    want = [_o1_path(m, f) for f in feeds]
    got = [None] * len(feeds)

    def work(k):
        for _ in range(200):
            got[k] = m.run(feeds[k])
            if any(not np.array_equal(a, b) for a, b in zip(got[k], want[k])):
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(feeds))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: inside run, between its lines
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    for a, b in zip(got, want):
        _same(a, b)


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_light_model_at_o2(name):
    from onnx_cases import light_model, ort
    model, feeds = light_model(name)
    refs = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    m = graph.compile(graph.from_onnx(model), level="O2")
    check_plan(m.memory_plan)
    outs = m.run(feeds)
    _same(outs, _o1_path(m, feeds))
    for out, ref in zip(outs, refs):
        err = float(np.abs(out - ref).max())
        assert err <= 1e-3 * max(1.0, float(np.abs(ref).max())), (name, err)
    # a run allocates its outputs and nothing else that Python sees (kernels' own scratch
    # is native malloc); the step-by-step path allocates every intermediate
    out_bytes = sum(o.nbytes for o in outs)
    tracemalloc.start()
    try:
        m.run(feeds)
        o2_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        _o1_path(m, feeds)
        o1_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert o2_peak < out_bytes + 64 * 1024, (o2_peak, out_bytes)
    assert o1_peak > m.memory_plan.arena_bytes / 4, o1_peak


def test_o2_refuses_kernels_this_host_must_not_run():
    # O2 calls kernels by address, past the module's own refusal: it must refuse first
    import llvmlite.binding as llvm
    host = llvm.get_host_cpu_features()
    missing = [f for f in ("sse4a", "xop", "fma4", "tbm", "avx512fp16", "amx-fp16")
               if f in host and not host[f]]
    assert missing, "this host has every feature the test could turn on"
    g = graph.Graph([graph.relu(graph.input("x", (3, 5)))])
    with pytest.raises(graph.GraphError, match=r"graph.compile O2: kernel '\w+' must not run "
                                               r"on this host: .*lacks"):
        graph.compile(g, level="O2", target=f"llvm -mattr=+{missing[0]}", cache=False)


def test_o2_repeated_outputs_and_a_graph_of_constants():
    x = graph.input("x", (3, 4))
    y = graph.exp(graph.relu(x), name="y")
    m = graph.compile(graph.Graph([y, y, graph.negative(y, name="n")]), level="O2")
    xa = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    got = m.run({"x": xa})
    _same(got, _o1_path(m, {"x": xa}))
    np.testing.assert_allclose(got[0], np.exp(np.maximum(xa, 0)), rtol=1e-6)
    assert np.shares_memory(got[0], got[1])   # as at O1: the same value, one array
    c = graph.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    k = graph.compile(graph.Graph([graph.tanh(c, name="t")]), level="O2")
    assert k.calls == []   # folded into a constant: the driver calls nothing
    (t,) = k.run({})
    np.testing.assert_allclose(t, np.tanh(np.arange(6).reshape(2, 3)), rtol=1e-6)
    t[0, 0] = 5.0
    assert k.run({})[0][0, 0] == 0.0
