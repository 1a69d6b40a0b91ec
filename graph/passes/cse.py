"""Pass eliminate_common_subexpressions: compute each distinct thing once.

Constants with the same dtype, shape and bytes become one (the first in graph order); then
nodes with the same op, attributes and (already merged) inputs become one, in topological
order, so whole repeated chains merge. Only constants up to MAX_CONSTANT_ELEMENTS are
compared: identical large weights are rare, and hashing each would read every weight of a
model once per compile. Imports graph.passes.rewrite.
"""
from __future__ import annotations

from ..ir import Graph
from .rewrite import Rewriter

MAX_CONSTANT_ELEMENTS = 1 << 16


def eliminate_common_subexpressions(g: Graph) -> Graph:
    """g with duplicate small constants and duplicate nodes merged."""
    rw = Rewriter(g)
    first: dict = {}
    for c in g.constants:
        if c.data.size <= MAX_CONSTANT_ELEMENTS:
            key = (c.dtype, tuple(c.shape), c.data.tobytes())
            rw.env[id(c)] = first.setdefault(key, c)
    seen: dict = {}

    def rule(rw, node, ins):
        # repr tells 0.0 from -0.0 and 1 from 1.0, which == and hash do not
        key = (node.op, repr(node.attrs), tuple(id(v) for v in ins))
        outs = seen.get(key)
        if outs is None:
            outs = seen[key] = rw.copy(node, ins)
        return outs

    return rw.run(rule)
