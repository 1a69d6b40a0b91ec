"""graph.compile: a Graph -> a runnable Module at a compile level.

O0: the graph as it is, one kernel per node, run node by node from Python; nodes with the
same workload share one compiled kernel. Imports graph.{errors,executor,ir,kernels}.
"""
from __future__ import annotations

from .errors import GraphError
from .executor import Module
from .ir import Graph
from .kernels import compile_node

LEVELS = ("O0",)
TARGETS = ("llvm",)


def compile(g: Graph, level: str = "O0", target: str = "llvm") -> Module:  # noqa: A001
    """Compile `g` at `level` for `target`; returns a Module with run(feeds)."""
    if not isinstance(g, Graph):
        raise GraphError(f"graph.compile: g must be a graph.Graph, got {type(g).__name__}")
    if level not in LEVELS:
        raise GraphError(f"graph.compile: level must be one of {list(LEVELS)}, got {level!r}")
    if target.split()[0] not in TARGETS:
        raise GraphError(f"graph.compile: target must be one of {list(TARGETS)} (with "
                         f"options), got {target!r}")
    cache: dict = {}
    steps = [(node, compile_node(node, target, cache)) for node in g.nodes]
    return Module(g, steps, level, target)
