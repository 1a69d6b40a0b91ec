"""Property test of fusion: random DAGs of elementwise, broadcast, reduction, matmul and
softmax nodes (values read by several nodes, graph outputs inside chains) give the same
result at O1 as at O0, every group has one output value and at most one anchor.
FZ_SEEDS=80 runs more seeds than CI's 8 (80 passed when it was written)."""
import os

import numpy as np
import pytest

import graph
from graph.fuse import fuse

R, C = 5, 7
UNARY = ["tanh", "sigmoid", "relu", "abs", "negative"]
BINARY = ["add", "multiply", "subtract", "maximum"]


def _random_graph(seed: int):
    rng = np.random.default_rng(seed)
    x = graph.input("x", (R, C))
    values, rows = [x], []   # rows: (R, 1) values from keepdims reductions

    def pick(pool):
        # favour recent values (chains), sometimes reuse old ones (diamonds, fan-out)
        k = len(pool) - 1 - min(int(rng.geometric(0.5)) - 1, len(pool) - 1)
        return pool[k]

    for k in range(int(rng.integers(6, 12))):
        kind = rng.choice(["unary", "binary", "bcast", "reduce", "matmul", "softmax"],
                          p=[0.25, 0.25, 0.15, 0.15, 0.1, 0.1])
        a = pick(values)
        if kind == "unary":
            v = getattr(graph, str(rng.choice(UNARY)))(a, name=f"n{k}")
        elif kind == "binary":
            v = getattr(graph, str(rng.choice(BINARY)))(a, pick(values), name=f"n{k}")
        elif kind == "bcast":
            other = pick(rows) if rows and rng.random() < 0.6 else graph.constant(
                rng.standard_normal((1, C)).astype("float32"), name=f"c{k}")
            v = getattr(graph, str(rng.choice(BINARY)))(a, other, name=f"n{k}")
        elif kind == "reduce":
            red = str(rng.choice(["reduce_sum", "reduce_max", "reduce_mean"]))
            rows.append(getattr(graph, red)(a, axis=-1, keepdims=True, name=f"n{k}"))
            continue
        elif kind == "matmul":
            w = graph.constant((rng.standard_normal((C, C)) / C).astype("float32"),
                               name=f"w{k}")
            v = graph.nn.matmul(a, w, name=f"n{k}")
        else:
            v = graph.nn.softmax(a, axis=-1, name=f"n{k}")
        values.append(v)
    outs = [values[-1]] + [values[int(j)] for j in
                           rng.choice(len(values) - 1, size=min(2, len(values) - 1),
                                      replace=False) if j > 0]
    return graph.Graph(list(dict.fromkeys(outs)))


@pytest.mark.parametrize("seed", range(int(os.environ.get("FZ_SEEDS", 8))))
def test_random_graph_gives_the_same_result_at_o0_and_o1(seed):
    g = _random_graph(seed)
    groups = fuse(g)
    assert sorted(id(n) for gr in groups for n in gr.nodes) == sorted(id(n) for n in g.nodes)
    for gr in groups:
        assert len(gr.outputs) == 1
        anchors = [n for n in gr.nodes if graph.OPS[n.op].pattern in
                   (graph.Pattern.COMM_REDUCE, graph.Pattern.OUT_ELEMWISE_FUSABLE)]
        assert len(anchors) <= 1, gr.ops
    xa = np.random.default_rng(100 + seed).standard_normal((R, C)).astype("float32")
    outs0 = graph.compile(g, level="O0").run({"x": xa})
    outs1 = graph.compile(g, level="O1").run({"x": xa})
    for o0, o1 in zip(outs0, outs1, strict=True):
        np.testing.assert_allclose(o1, o0, rtol=1e-4, atol=1e-5)
