"""Pass remove_identity: drop the nodes that compute nothing at inference.

An `identity` node (ONNX Identity, and Dropout, which the importer makes an identity since
inference never drops) and a `cast` to the dtype its input already has are replaced by
their input. Imports graph.passes.rewrite.
"""
from __future__ import annotations

from ..ir import Graph
from .rewrite import rebuild


def _rule(rw, node, ins):
    if node.op == "identity" or (node.op == "cast" and node.attr["dtype"] == ins[0].dtype):
        return [ins[0]]
    return None


def remove_identity(g: Graph) -> Graph:
    """g without identity nodes and no-op casts."""
    return rebuild(g, _rule)
