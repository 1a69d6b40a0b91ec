"""graph.plan_memory (the dry run of O2): the targets on ResNet-50 and the BERT layer, the
plan's safety on random graphs (tests/graph/plan_checks.py), in-place reuse, the execution
order heuristic, the report table and the errors."""
import numpy as np
import pytest

import graph
import te
from graph.plan import ALIGNMENT, PlanStep, plan
from plan_checks import check_plan
from random_graphs import random_graph


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_plan_meets_the_targets(name):
    pytest.importorskip("onnx")
    if name == "bert":
        from bert_layer import bert_layer
        model, _ = bert_layer()
    else:
        from onnx_cases import light_model
        model, _ = light_model(name)
    g = graph.from_onnx(model)
    p = graph.plan_memory(g)
    assert p.arena_bytes <= 1.1 * p.lower_bound, p.summary()
    assert p.arena_bytes <= 0.5 * p.naive_bytes, p.summary()
    # the lower bound really is one: the bytes live at some step, none counted twice
    assert p.lower_bound <= p.arena_bytes
    check_plan(p)
    assert graph.compile(g, level="O2", dry_run=True).arena_bytes == p.arena_bytes


@pytest.mark.parametrize("level", ["O0", "O2"])
def test_no_two_live_tensors_share_memory_on_random_graphs(level):
    inplace = 0
    for seed in range(48):
        g = random_graph(seed, 12)  # as tests/graph/test_graph_random.py
        p = graph.plan_memory(g, level)
        inplace += check_plan(p)
        assert p.lower_bound <= p.arena_bytes <= p.naive_bytes, (seed, p.summary())
        order = [id(s) for s in p.order]
        assert len(set(order)) == len(order)
    # the graphs do exercise writing in place (250 and 10 when this was written)
    assert inplace >= {"O0": 100, "O2": 4}[level], inplace


def test_an_elementwise_chain_runs_in_place():
    x = graph.input("x", (3, 5, 7))
    y = graph.relu(graph.exp(graph.tanh(x)))
    z = graph.reduce_sum(graph.sigmoid(y), axis=1)
    g = graph.Graph([z])
    p = graph.plan_memory(g, "O0")  # one node per step: tanh, exp, relu, sigmoid in place
    size = 3 * 5 * 7 * 4
    assert p.arena_bytes == -(-size // ALIGNMENT) * ALIGNMENT
    notes = [t.note for t in p.tensors]
    assert notes[1:4] == [f"in place of %{t.name}" for t in p.tensors[:3]]
    off = graph.plan_memory(g, "O0", inplace=False)
    assert off.arena_bytes == 2 * p.arena_bytes and p.naive_bytes == 4 * p.arena_bytes


def test_no_in_place_over_a_value_read_later_or_of_another_shape():
    x = graph.input("x", (4, 6))
    a = graph.exp(x)
    b = graph.add(graph.negative(a), graph.constant(np.ones((1, 6), np.float32)))
    c = graph.multiply(a, b)   # a is still read here: b cannot take a's memory
    d = graph.reshape(c, (6, 4))
    e = graph.add(graph.transpose(d, (1, 0)), c)  # transpose is not elementwise
    p = graph.plan_memory(graph.Graph([e]), "O0")
    where = {t.name: t for t in p.tensors}
    assert where[b.name].note == f"in place of %{b.node.inputs[0].name}"
    assert where[c.name].note == f"in place of %{a.name}"   # a and b both end here
    assert where[e.node.inputs[0].name].note == ""


def _value(name, n):
    return graph.input(name, (n,))


def test_the_order_heuristic_finishes_a_branch_before_starting_another():
    """Given order: both big intermediates live at once; the greedy order reduces the first
    before making the second."""
    x, big1, big2, s1, s2, out = (_value(n, k) for n, k in
                                  [("x", 16), ("big1", 4096), ("big2", 4096), ("s1", 16),
                                   ("s2", 16), ("out", 16)])
    steps = [PlanStep((x,), (big1,), "a1"), PlanStep((x,), (big2,), "b1"),
             PlanStep((big1,), (s1,), "a2"), PlanStep((big2,), (s2,), "b2"),
             PlanStep((s1, s2), (out,), "c")]
    p = plan(steps, [x], [], [out])
    assert [s.label for s in p.order] == ["a1", "a2", "b1", "b2", "c"]
    assert p.heuristic.startswith("greedy")
    # at b2: big2, s1 and s2 (64 bytes each, aligned); given order: big1, big2 and s1 at a2
    assert p.arena_bytes == 4096 * 4 + 2 * 64 and p.tried[0][1] == 2 * 4096 * 4 + 64
    kept = plan(steps, [x], [], [out], reorder=False)
    assert [s.label for s in kept.order] == ["a1", "b1", "a2", "b2", "c"]


def test_the_report_prints_a_table():
    x = graph.input("x", (2, 8))
    w = graph.constant(np.ones((8, 8), np.float32))
    h = graph.relu(graph.nn.matmul(x, w))
    y = graph.reshape(graph.sigmoid(graph.nn.matmul(h, w)), (16,))
    text = str(graph.plan_memory(graph.Graph([y, x])))
    lines = text.splitlines()
    assert lines[0].startswith("memory plan: ") and "x the lower bound" in lines[0]
    assert lines[1].startswith("orders tried (arena, lower bound): given ")
    assert lines[2].split() == ["tensor", "type", "bytes", "steps", "offset", "note"]
    assert any(line.split()[-2:] == ["output", "0"] or "output 0" in line
               for line in lines[3:]), text


def test_plan_memory_errors():
    with pytest.raises(graph.GraphError, match="g must be a graph.Graph, got int"):
        graph.plan_memory(3)
    g = graph.Graph([graph.relu(graph.input("x", (2,)))])
    with pytest.raises(graph.GraphError, match=r"level must be one of \['O0', 'O1', 'O2'\], "
                                               r"got 'O3'"):
        graph.plan_memory(g, "O3")
    s = graph.Graph([graph.relu(graph.input("x", (te.var("n"), 2)))])
    with pytest.raises(graph.GraphError, match="value 'x' has symbolic shape"):
        graph.plan_memory(s)
