"""Running a compiled graph from Python: check the feeds, call each step's kernel in order.

A Module holds the graph and, per node, its Kernel; run(feeds) returns the outputs in the
graph's order, run(feeds, keep=True) every value by name (to find the first node that
differs from a reference). Imports numpy and graph.{errors,ir}.
"""
from __future__ import annotations

import numpy as np

from .errors import FeedError
from .ir import Graph, format_dim


class Module:
    """What graph.compile returns: `run`, and `str()` listing the kernels in order."""

    def __init__(self, graph: Graph, steps: list, level: str, target: str):
        self.graph = graph
        self.steps = steps  # [(node, Kernel)] in execution order
        self.level = level
        self.target = target

    @property
    def num_kernels(self) -> int:
        """How many distinct kernels were compiled (identical workloads share one)."""
        return len({id(k) for _, k in self.steps})

    def run(self, feeds: dict, keep: bool = False):
        """The outputs (a list of numpy arrays in the graph's output order); with keep=True
        a dict of every input, constant and node output by value name, in graph order."""
        env = {id(c): c.data for c in self.graph.constants}
        env.update((id(v), a) for v, a in zip(self.graph.inputs, self._check(feeds)))
        for node, kernel in self.steps:
            outs = kernel(*[env[id(v)] for v in node.inputs])
            for v, a in zip(node.outputs, outs):
                env[id(v)] = a.reshape(v.shape)
        if keep:
            return {v.name: env[id(v)] for v in self.graph.values()}
        return [env[id(v)] for v in self.graph.outputs]

    def _check(self, feeds) -> list:
        if not isinstance(feeds, dict):
            raise FeedError(f"run: feeds must be a dict of input name -> array, got "
                            f"{type(feeds).__name__}")
        names = [v.name for v in self.graph.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise FeedError(f"run: unknown input {unknown[0]!r}; the graph's inputs are "
                            f"{names}")
        out = []
        for v in self.graph.inputs:
            if v.name not in feeds:
                raise FeedError(f"run: missing input '{v.name}' ({v.type_str}); the graph's "
                                f"inputs are {names}")
            a = np.asarray(feeds[v.name])
            if a.dtype.name != v.dtype:
                raise FeedError(f"run: input '{v.name}' must have dtype {v.dtype}, got "
                                f"{a.dtype.name}")
            if a.shape != tuple(v.shape):
                want = "(" + ", ".join(format_dim(d) for d in v.shape) + ")"
                raise FeedError(f"run: input '{v.name}' must have shape {want}, got "
                                f"{a.shape}")
            out.append(a if a.flags.c_contiguous else np.array(a, order="C"))
        return out

    def __str__(self) -> str:
        lines = [f"module {self.graph.name} (level {self.level}, target {self.target}, "
                 f"{len(self.steps)} steps, {self.num_kernels} kernels) {{"]
        lines += [f"  {kernel.name}: {node}" for node, kernel in self.steps]
        return "\n".join(lines + ["}"])
