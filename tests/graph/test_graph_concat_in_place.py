"""Concatenations written in place (graph.plan's concat): the producers of a concatenate's
inputs write them straight into its output's buffer, each at its block's offset, and the
concatenate runs no kernel; nested ones (DenseNet's growing concatenations) share one
buffer. Every level gives numpy's numbers, the plan is safe (plan_checks), and the cases
that must copy (a graph input, a graph output, blocks off the alignment, not contiguous
blocks, a value twice) still copy."""
import numpy as np
import pytest

import graph
from graph.plan import ALIGNMENT
from plan_checks import check_plan

RNG = np.random.default_rng(7)


def _weight(oc, ic, k):
    return graph.constant(RNG.uniform(-1, 1, (oc, ic, k, k)).astype("float32"))


def _conv(x, oc, k=3, relu=True):
    y = graph.nn.conv2d(x, _weight(oc, x.shape[1], k), padding=k // 2)
    return graph.relu(y) if relu else y


def _np_conv(x, w, k):
    """Cross-correlation, stride 1, 'same' padding, NCHW, by loops over the taps."""
    p = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    h, wd = x.shape[2:]
    out = np.zeros((x.shape[0], w.shape[0], h, wd), np.float64)
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + h, dx:dx + wd],
                             w[:, :, dy, dx])
    return out


def _reference(g, feeds):
    """The graph evaluated node by node in numpy (conv2d, relu and concatenate only)."""
    env = {id(v): feeds[v.name] for v in g.inputs}
    env.update((id(c), c.data) for c in g.constants)
    for n in g.nodes:
        ins = [env[id(v)] for v in n.inputs]
        if n.op == "conv2d":
            out = _np_conv(ins[0], ins[1], ins[1].shape[-1])
        elif n.op == "relu":
            out = np.maximum(ins[0], 0)
        elif n.op == "concatenate":
            out = np.concatenate(ins, axis=n.attr["axis"])
        else:
            raise AssertionError(n.op)
        env[id(n.outputs[0])] = out
    return [env[id(v)] for v in g.outputs]


def _check_levels(g, elided: int, levels=("O0", "O1", "O2")):
    x = RNG.uniform(-1, 1, g.inputs[0].shape).astype("float32")
    want = _reference(g, {"x": x})
    p = graph.plan_memory(g, "O2")
    check_plan(p)
    assert len(p.elided) == elided, p
    for level in levels:
        m = graph.compile(g, level=level, cache=False)
        for got, ref in zip(m.run({"x": x}), want):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=level)
        if level != "O0":
            check_plan(m.memory_plan if level == "O2" else m.prepare()._dispatch.memory_plan)
    return p, m


def test_nested_concatenations_are_written_in_place_by_their_producers():
    x = graph.input("x", (1, 8, 6, 6))
    a = _conv(x, 16)                    # 16 x 6 x 6 floats: 36 lines of 64 bytes
    b = _conv(x, 8, k=1)
    c = graph.concatenate([a, b], axis=1)
    e = _conv(c, 8)                     # reads the concatenation
    f = graph.concatenate([c, e], axis=1)    # DenseNet's growing concatenation
    out = _conv(f, 5, relu=False)
    p, m = _check_levels(graph.Graph([out]), elided=2)
    where = {t.name: (t.offset, t.note) for t in p.tensors}
    base = where[f.name][0]
    assert where[a.name] == (base, f"block of %{f.name} at +0")
    block = 16 * 36 * 4
    assert where[b.name] == (base + block, f"block of %{f.name} at +{block}")
    assert where[c.name][0] == base and where[e.name][0] == base + block + 8 * 36 * 4
    assert "its blocks written in place" in where[c.name][1]
    assert not any("concatenate" in call.kernel.name for call in m.calls)
    copied = graph.plan_memory(graph.Graph([out]), "O2", inplace=False)
    assert not copied.elided and p.arena_bytes < copied.arena_bytes


def _concat_graph(case: str):
    x = graph.input("x", (1, 8, 6, 6))
    a = _conv(x, 16)
    if case == "graph input":
        c = graph.concatenate([a, x], axis=1)
    elif case == "twice":
        c = graph.concatenate([a, a], axis=1)
    elif case == "unaligned":       # 3 x 6 x 6 floats: 432 bytes, not whole lines
        c = graph.concatenate([_conv(x, 3), a], axis=1)
    elif case == "not contiguous":  # along the rows: each block is 6 runs of its output
        c = graph.concatenate([a, _conv(x, 16, k=1)], axis=2)
    else:
        raise AssertionError(case)
    return graph.Graph([_conv(c, 4, relu=False)])


@pytest.mark.parametrize("case", ["graph input", "twice", "unaligned", "not contiguous"])
def test_concatenations_that_must_copy_still_copy(case):
    assert 16 * 36 * 4 % ALIGNMENT == 0 and 3 * 36 * 4 % ALIGNMENT != 0
    _check_levels(_concat_graph(case), elided=0, levels=("O1", "O2"))


def test_a_block_that_is_a_graph_output_keeps_its_own_array():
    x = graph.input("x", (1, 8, 6, 6))
    a, b = _conv(x, 16), _conv(x, 16, k=1)
    c = graph.concatenate([a, b], axis=1)
    g = graph.Graph([_conv(c, 4, relu=False), b])
    _check_levels(g, elided=0, levels=("O1", "O2"))
