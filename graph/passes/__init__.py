"""The graph passes of level O1, in order: each a function Graph -> Graph, named in PASSES
(as te/lower/pipeline.py names the loop-IR passes). `optimize(g)` runs them all;
`optimize(g, stop_after=name)` stops after one; TE_DUMP_GRAPH=1 (or dump=True) prints the
graph after each pass. A pass never mutates its input graph's nodes: it builds new ones.
Imports graph.ir.
"""
from __future__ import annotations

import os
import sys

from ..errors import GraphError
from ..ir import Graph

# (name, function Graph -> Graph), in the order they run; filled by the pass modules
PASSES: list = []
PASS_NAMES = tuple(name for name, _ in PASSES)


def optimize(g: Graph, stop_after: str | None = None, dump: bool | None = None) -> Graph:
    """Run the pass pipeline on `g`; the result computes the same outputs from the same
    inputs (same names, dtypes, shapes, order)."""
    names = [name for name, _ in PASSES]
    if stop_after is not None and stop_after not in names:
        raise GraphError(f"graph.optimize: stop_after must be one of {names}, got "
                         f"{stop_after!r}")
    if dump is None:
        dump = os.environ.get("TE_DUMP_GRAPH", "") not in ("", "0")
    for name, run in PASSES:
        g = run(g)
        if dump:
            print(f"// after graph pass {name}\n{g}", file=sys.stderr)
        if name == stop_after:
            break
    return g
