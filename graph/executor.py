"""Running a compiled graph from Python: check the feeds, call each step's kernel in order.

A Module holds the graph and, per node, its Kernel; run(feeds) returns the outputs in the
graph's order, run(feeds, keep=True) every value by name (to find the first node that
differs from a reference). Imports numpy and graph.{errors,ir}.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

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
        env = self._execute(self._check(feeds))
        if keep:
            return {v.name: env[id(v)] for v in self.graph.values()}
        # an output that is a graph input or a constant is copied: the caller owns the
        # result, and must neither see its feed aliased nor be able to change a constant
        return [env[id(v)] if v.node is not None else np.array(env[id(v)])
                for v in self.graph.outputs]

    def profile(self, feeds: dict, repeat: int = 5) -> "Profile":
        """Run `repeat` times timing each step; the Profile prints a table of every step
        (kernel, the ops it runs, the median time, its share of the total)."""
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise FeedError(f"profile: repeat must be a positive int, got {repeat!r}")
        inputs = self._check(feeds)
        times = [[] for _ in self.steps]
        for _ in range(repeat):
            self._execute(inputs, times)
        return Profile([(kernel.name, node.op, node.name, float(np.median(t)))
                        for (node, kernel), t in zip(self.steps, times)])

    def _execute(self, inputs: list, times: list | None = None) -> dict:
        env = {id(c): c.data for c in self.graph.constants}
        env.update((id(v), a) for v, a in zip(self.graph.inputs, inputs))
        for k, (node, kernel) in enumerate(self.steps):
            args = [env[id(v)] for v in node.inputs]
            start = time.perf_counter()
            outs = kernel(*args)
            if times is not None:
                times[k].append(time.perf_counter() - start)
            for v, a in zip(node.outputs, outs):
                env[id(v)] = a.reshape(v.shape)
        return env

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


@dataclass(frozen=True)
class Profile:
    """Per-step times of one Module: rows of (kernel, ops, node, median seconds)."""
    rows: list

    @property
    def total(self) -> float:
        return sum(r[3] for r in self.rows)

    def __str__(self) -> str:
        total = self.total or 1.0
        width = max([len(r[2]) for r in self.rows] + [4])
        lines = [f"{'kernel':<18} {'ops':<18} {'node':<{width}} {'time (us)':>10} {'share':>6}"]
        for kernel, ops, node, t in self.rows:
            lines.append(f"{kernel:<18} {ops:<18} {node:<{width}} {t * 1e6:>10.1f} "
                         f"{100 * t / total:>5.1f}%")
        lines.append(f"{'total':<18} {'':<18} {'':<{width}} {self.total * 1e6:>10.1f} 100.0%")
        return "\n".join(lines)
