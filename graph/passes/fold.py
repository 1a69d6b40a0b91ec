"""Pass fold_constants: a node whose inputs are all constants becomes constants.

Nodes are visited in topological order, so a chain fed only by weights (a transposed or
reshaped weight, a shape computation) folds link by link. The value is computed by the same
kernels O0 runs (graph.kernels), so a folded constant holds exactly what the node would have
computed; the pure data movements (reshape, transpose, concatenate, identity, conv2d_pack_weight)
use numpy,
which moves the same bytes without compiling a kernel. Imports numpy and
graph.{kernels,passes.rewrite}.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Value
from ..kernels import compile_node
from .rewrite import rebuild

# A node whose output has more elements than its constant inputs together is folded only up
# to this many elements: an expand or tile of a small constant to a large tensor would turn
# a few bytes into megabytes held for the model's lifetime, while computed at run time it
# fuses into its consumers' loops for free.
MAX_GROWTH_ELEMENTS = 4096

# conv2d_pack_weight pads the output channels of each group up to the register tile (mr):
# bounded growth, and the point of packing is to do it here rather than per run
BOUNDED_GROWTH = ("conv2d_pack_weight",)


def _pack_weight(a, groups, mr):
    """te.compute.ops.conv2d_pack_weight in numpy: (OC, ICg, KH, KW) ->
    (groups, ceil(OCg / mr), ICg, KH, KW, mr), zero past each group's OCg channels."""
    w = a[0]
    OC, ICg, KH, KW = w.shape
    OCg = OC // groups
    tiles = -(-OCg // mr)
    w = w.reshape(groups, OCg, ICg, KH, KW)
    w = np.pad(w, [(0, 0), (0, tiles * mr - OCg), (0, 0), (0, 0), (0, 0)])
    return np.ascontiguousarray(w.reshape(groups, tiles, mr, ICg, KH, KW)
                                .transpose(0, 1, 3, 4, 5, 2))


_NUMPY = {
    "conv2d_pack_weight": _pack_weight,
    "reshape": lambda a, newshape: a[0].reshape(newshape),
    "transpose": lambda a, axes: a[0].transpose(axes),
    "concatenate": lambda a, axis: np.concatenate(a, axis),
    "identity": lambda a: a[0],
}


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _evaluate(node, ins, cache: dict) -> list:
    arrays = [v.data for v in ins]
    move = _NUMPY.get(node.op)
    if move is not None:
        return [np.array(move(arrays, **node.attr), order="C")]
    # the node on its (constant) inputs, compiled like any O0 node
    kernel = compile_node(node, "llvm", cache)
    return kernel(*arrays)


def fold_constants(g: Graph) -> Graph:
    """g with every all-constant node (up to MAX_GROWTH_ELEMENTS of growth) folded."""
    cache: dict = {}

    def rule(rw, node, ins):
        if not ins or not all(v.is_constant for v in ins):
            return None
        out_size = sum(_size(v.shape) for v in node.outputs)
        if node.op not in BOUNDED_GROWTH and out_size > max(
                sum(_size(v.shape) for v in ins), MAX_GROWTH_ELEMENTS):
            return None
        # the copy's input types are the old ones, so compile_node sees the same workload
        arrays = _evaluate(node, ins, cache)
        return [Value(v.name, v.dtype, v.shape, data=np.array(a, dtype=v.dtype, order="C")
                      .reshape(v.shape)) for v, a in zip(node.outputs, arrays)]

    return rebuild(g, rule)
