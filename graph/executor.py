"""Running a compiled graph from Python: check the feeds, call each step's kernel in order.

A Module holds the graph and its Steps: at O0 one per node, at O1 one per fused group (a
kernel computing the group's output value, or a view: a reshape of its input that copies
nothing). run(feeds) returns the outputs in the graph's order: the kernels run over one
arena planned once (graph.dispatch; by prepare(), which graph.compile calls, or else by the
first run), and only the outputs are allocated per run. run(feeds, keep=True) returns every
value that exists by name (to find the first step that differs from a reference): the steps
run in their order, each value in its own array.
Imports numpy and graph.{dispatch,errors,ir}.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from .dispatch import Dispatch
from .errors import FeedError, GraphError
from .ir import Graph, format_dim


@dataclass
class Step:
    """One step of a Module: `kernel` (None for a view) reads `inputs`, writes `outputs`;
    `ops` are the ops it runs (one at O0, the fused group's at O1)."""
    kernel: object
    inputs: tuple
    outputs: tuple
    ops: tuple
    name: str   # the node's name, or the fused group's output value's
    text: str   # its line in str(Module)
    slices_concat: bool = False  # a concatenate of contiguous blocks (graph.fuse)

    @property
    def kernel_name(self) -> str:
        return self.kernel.name if self.kernel is not None else "view"


class Module:
    """What graph.compile returns: `run`, and `str()` listing the kernels in order."""

    def __init__(self, graph: Graph, steps: list, level: str, target: str):
        self.graph = graph
        self.steps = steps  # [Step] in execution order
        # the values whose memory is a feed's or a constant's: those and views of them
        self._aliased = {id(v) for v in list(graph.inputs) + list(graph.constants)}
        for step in steps:
            if step.kernel is None and id(step.inputs[0]) in self._aliased:
                self._aliased.add(id(step.outputs[0]))
        self.level = level
        self.target = target
        # the planned arena (graph.dispatch), built by prepare() or the first run; None
        # when a step cannot be called over it. One run at a time uses it: a run that
        # finds it busy takes the allocating path (_execute)
        self._dispatch: Dispatch | None = None
        self._dispatch_built = False
        self._dispatch_lock = threading.Lock()

    @property
    def num_kernels(self) -> int:
        """How many distinct kernels were compiled (identical workloads share one)."""
        return len({id(s.kernel) for s in self.steps if s.kernel is not None})

    def run(self, feeds: dict, keep: bool = False):
        """The outputs (a list of numpy arrays in the graph's output order); with keep=True
        a dict by value name, in graph order, of the values that exist: every input and
        constant, and each step's outputs (at O0 every node's output; at O1 the fused
        groups' outputs only, the values inside a group never exist in memory)."""
        inputs = self._check(feeds)
        if not keep and self._dispatch_lock.acquire(blocking=False):
            try:
                dispatch = self._dispatcher()
                if dispatch is not None:
                    return dispatch.run(inputs)
            finally:
                self._dispatch_lock.release()
        env = self._execute(inputs)
        if keep:
            return {v.name: env[id(v)] for v in self.graph.values() if id(v) in env}
        # an output that is a graph input or a constant (or a view of one) is copied: the
        # caller owns the result, and must neither see its feed aliased nor be able to
        # change a constant
        return [np.array(env[id(v)]) if id(v) in self._aliased else env[id(v)]
                for v in self.graph.outputs]

    def profile(self, feeds: dict, repeat: int = 5) -> "Profile":
        """Run `repeat` times timing each step as run(feeds) runs it; the Profile prints a
        table of every step (kernel, the ops it runs, the median time, its share of the
        total; a view over the planned arena takes no time)."""
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise FeedError(f"profile: repeat must be a positive int, got {repeat!r}")
        inputs = self._check(feeds)
        times = [[] for _ in self.steps]
        with self._dispatch_lock:
            dispatch = self._dispatcher()
            for _ in range(repeat):
                if dispatch is None:
                    self._execute(inputs, times)
                else:
                    dispatch.run(inputs, times)
        if dispatch is not None:
            times = [t or [0.0] for t in times]  # views
        return Profile([(step.kernel_name, "+".join(step.ops), step.name,
                         float(np.median(t))) for step, t in zip(self.steps, times)])

    def prepare(self) -> "Module":
        """Plan the arena that run uses now, not on the first run (graph.compile does)."""
        with self._dispatch_lock:
            self._dispatcher()
        return self

    def _dispatcher(self) -> Dispatch | None:
        """The planned arena and calls (built once; the caller holds _dispatch_lock)."""
        if not self._dispatch_built:
            try:
                self._dispatch = Dispatch(self.graph, self.steps)
            except GraphError:  # a step it cannot call: every run allocates
                self._dispatch = None
            self._dispatch_built = True
        return self._dispatch

    def _execute(self, inputs: list, times: list | None = None) -> dict:
        """Every value by id: the steps run in order, each output in a new array."""
        env = {id(c): c.data for c in self.graph.constants}
        env.update((id(v), a) for v, a in zip(self.graph.inputs, inputs))
        for k, step in enumerate(self.steps):
            args = [env[id(v)] for v in step.inputs]
            start = time.perf_counter()
            if step.kernel is None:  # a view: the same memory in the output's shape
                outs = [args[0].reshape(step.outputs[0].shape)]
            else:
                outs = step.kernel(*args)
            if times is not None:
                times[k].append(time.perf_counter() - start)
            for v, a in zip(step.outputs, outs):
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
            # the other byte order has the same values (its dtype.name is the same): the
            # kernels read native ones
            native = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
            out.append(a if a.dtype is native and a.flags.c_contiguous
                       else np.array(a, dtype=native, order="C"))
        return out

    def export_library(self, path) -> None:
        """Only level O2 builds the one native entry point a library can hold."""
        raise GraphError(f"export_library: only a module compiled at level O2 can be exported "
                         f"(this one is {self.level}: its kernels are dispatched from "
                         f"Python); compile it with graph.compile(g, level='O2')")

    def __str__(self) -> str:
        lines = [f"module {self.graph.name} (level {self.level}, target {self.target}, "
                 f"{len(self.steps)} steps, {self.num_kernels} kernels) {{"]
        lines += [f"  {step.text}" for step in self.steps]
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
        kw = max([len(r[0]) for r in self.rows] + [18])
        ow = max([len(r[1]) for r in self.rows] + [18])
        width = max([len(r[2]) for r in self.rows] + [4])
        lines = [f"{'kernel':<{kw}} {'ops':<{ow}} {'node':<{width}} {'time (us)':>10} "
                 f"{'share':>6}"]
        for kernel, ops, node, t in self.rows:
            lines.append(f"{kernel:<{kw}} {ops:<{ow}} {node:<{width}} {t * 1e6:>10.1f} "
                         f"{100 * t / total:>5.1f}%")
        lines.append(f"{'total':<{kw}} {'':<{ow}} {'':<{width}} {self.total * 1e6:>10.1f} "
                     f"100.0%")
        return "\n".join(lines)
