"""The graph passes of level O1, in order: each a function Graph -> Graph, named in PASSES
(as te/lower/pipeline.py names the loop-IR passes). `optimize(g)` runs them all;
`optimize(g, stop_after=name)` stops after one; TE_DUMP_GRAPH=1 (or dump=True) prints the
graph after each pass. A pass never mutates its input graph's nodes: it builds new ones
(graph.passes.rewrite), and after each pass the graph's inputs and outputs are checked to
be unchanged. Imports graph.{errors,ir} and the pass modules.
"""
from __future__ import annotations

import os
import sys

from ..errors import GraphError
from ..ir import Graph
from .batch_norm import fold_batch_norm
from .cleanup import remove_identity
from .conv_weights import pack_conv_weights
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold import fold_constants
from .panels import pack_matmul_weights
from .rewrite import same_shape
from .simplify import simplify_algebra
from .winograd import winograd_rows

# (name, function Graph -> Graph), in the order they run
PASSES: list = [
    # identity, inference Dropout and casts to the same dtype: gone
    ("remove_identity", remove_identity),
    # all-constant nodes (weight transposes, shape arithmetic) computed once
    ("fold_constants", fold_constants),
    # x*1, x+0, transpose and reshape chains
    ("simplify_algebra", simplify_algebra),
    # batch_norm into conv/gemm/matmul weights, else multiply + add
    ("fold_batch_norm", fold_batch_norm),
    # 3x3 stride-1 convs as Winograd F(4, 3) along their rows: half the multiplies
    ("winograd_rows", winograd_rows),
    # constant matmul weights laid out once in the panels the kernel streams
    ("pack_matmul_weights", pack_matmul_weights),
    # conv2d weights in the layout the GEMM form's register tiles read (a pack node)...
    ("pack_conv_weights", pack_conv_weights),
    # ...computed once here (fold_constants again), not on every run
    ("fold_packed_weights", fold_constants),
    # repeated constants and nodes merged (also those the passes above made)
    ("eliminate_common_subexpressions", eliminate_common_subexpressions),
    # only what the outputs read; unread split pieces dropped
    ("eliminate_dead_code", eliminate_dead_code),
]
PASS_NAMES = tuple(name for name, _ in PASSES)


def optimize(g: Graph, stop_after: str | None = None, dump: bool | None = None) -> Graph:
    """Run the pass pipeline on `g`; the result computes the same outputs from the same
    inputs (same names, dtypes, shapes, order)."""
    if not isinstance(g, Graph):
        raise GraphError(f"graph.optimize: g must be a graph.Graph, got {type(g).__name__}")
    if stop_after is not None and stop_after not in PASS_NAMES:
        raise GraphError(f"graph.optimize: stop_after must be one of {list(PASS_NAMES)}, "
                         f"got {stop_after!r}")
    if dump is None:
        dump = os.environ.get("TE_DUMP_GRAPH", "") not in ("", "0")
    for name, run in PASSES:
        new = run(g)
        _verify(g, new, name)
        g = new
        if dump:
            print(f"// after graph pass {name}\n{g}", file=sys.stderr)
        if name == stop_after:
            break
    return g


def _signature(values) -> list:
    return [(v.name, v.dtype, v.shape) for v in values]


def _verify(before: Graph, after: Graph, name: str) -> None:
    """A pass keeps the graph's interface: the input Values and the outputs' names, dtypes
    and shapes, in order."""
    if len(after.inputs) != len(before.inputs) or any(
            a is not b for a, b in zip(after.inputs, before.inputs)):
        raise GraphError(f"graph pass {name}: changed the graph inputs from "
                         f"{_signature(before.inputs)} to {_signature(after.inputs)}")
    ok = len(after.outputs) == len(before.outputs) and all(
        a.name == b.name and a.dtype == b.dtype and same_shape(a.shape, b.shape)
        for a, b in zip(after.outputs, before.outputs))
    if not ok:
        raise GraphError(f"graph pass {name}: changed the graph outputs from "
                         f"{_signature(before.outputs)} to {_signature(after.outputs)}")
