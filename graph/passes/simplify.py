"""Pass simplify_algebra: local rewrites that remove work, one rule table.

- x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1 -> x, where the constant is all ones (zeros)
  and x already has the result's dtype and shape (a broadcast that widens x stays).
  (x + 0 turns a -0.0 into +0.0; the values compare equal.)
- transpose of a transpose -> one transpose, or none when the two cancel; a transpose
  with the identity permutation -> its input; a transpose that moves only size-1 axes
  keeps the element order and becomes a reshape.
- reshape of a reshape -> one reshape; a reshape to the input's own shape -> its input.
  (flatten, squeeze and unsqueeze are reshapes in this IR, so their chains fold too.)
Rules see inputs already simplified, so chains collapse in one walk. Imports numpy and
graph.passes.rewrite.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from .rewrite import rebuild, same_shape

# op -> (which operand may be the constant: 0 lhs, 1 rhs, the neutral value)
_NEUTRAL = {
    "multiply": ((0, 1), 1),
    "add": ((0, 1), 0),
    "subtract": ((1,), 0),
    "divide": ((1,), 1),
}


def _neutral_operand(node, ins):
    """The operand that the node passes through unchanged, or None."""
    sides, neutral = _NEUTRAL[node.op]
    out = node.outputs[0]
    for k in sides:
        c, x = ins[k], ins[1 - k]
        if (c.is_constant and c.dtype != "bool" and x.dtype == out.dtype
                and same_shape(x.shape, out.shape) and np.all(c.data == neutral)):
            return x
    return None


def _is_reshape_like(perm, shape) -> bool:
    """A permutation that keeps the order of the axes longer than 1 moves no element."""
    moved = [a for a in perm if shape[a] != 1]
    return moved == sorted(moved)


def _transpose(rw, node, ins):
    x, out = ins[0], node.outputs[0]
    perm = node.attr["axes"]
    inner = x.node
    if inner is not None and inner.op == "transpose":  # y[j] = x[p1[p2[j]]]
        p1 = inner.attr["axes"]
        perm, x = tuple(p1[a] for a in perm), inner.inputs[0]
    if perm == tuple(range(len(perm))):
        return [x]
    if all(isinstance(d, int) for d in x.shape) and _is_reshape_like(perm, x.shape):
        return _reshape_to(rw, x, out)
    if x is ins[0]:
        return None
    return [rw.apply("transpose", [x], {"axes": perm}, name=out.name)]


def _reshape_to(rw, x, out):
    """x reshaped to out's shape, skipping a reshape that x itself is."""
    if x.node is not None and x.node.op == "reshape":
        x = x.node.inputs[0]
    if same_shape(x.shape, out.shape):
        return [x]
    return [rw.apply("reshape", [x], {"newshape": tuple(out.shape)}, name=out.name)]


def _reshape(rw, node, ins):
    x = ins[0]
    if same_shape(x.shape, node.outputs[0].shape) or (
            x.node is not None and x.node.op == "reshape"):
        return _reshape_to(rw, x, node.outputs[0])
    return None


def _rule(rw, node, ins):
    if node.op in _NEUTRAL:
        x = _neutral_operand(node, ins)
        return None if x is None else [x]
    if node.op == "transpose":
        return _transpose(rw, node, ins)
    if node.op == "reshape":
        return _reshape(rw, node, ins)
    return None


def simplify_algebra(g: Graph) -> Graph:
    """g with the rule table above applied to every node."""
    return rebuild(g, _rule)
