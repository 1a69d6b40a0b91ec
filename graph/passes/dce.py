"""Pass eliminate_dead_code: keep only what the outputs need.

Building a Graph from its outputs already drops the nodes no output reaches; this pass
makes that explicit and goes one step further for multi-output nodes: a `split` some of
whose pieces nobody reads becomes one `slice` per piece that is read, so the unread pieces
are neither computed nor kept. Imports graph.passes.rewrite.
"""
from __future__ import annotations

from ..ir import Graph
from .rewrite import rebuild


def _rule(rw, node, ins):
    if node.op != "split":
        return None
    used = [rw.uses(v) > 0 for v in node.outputs]
    if all(used):
        return None
    axis, sizes = node.attr["axis"], node.attr["sizes"]
    outs, begin = [], 0
    for v, size, read in zip(node.outputs, sizes, used):
        if read:  # the piece keeps its value's name
            outs.append(rw.apply("slice", [ins[0]], {
                "starts": (begin,), "ends": (begin + size,), "axes": (axis,), "steps": (1,)},
                name=v.name))
        else:
            outs.append(None)
        begin += size
    return outs


def eliminate_dead_code(g: Graph) -> Graph:
    """g with only the nodes (and split pieces) its outputs depend on."""
    return rebuild(g, _rule)
