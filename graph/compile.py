"""graph.compile: a Graph -> a runnable Module at a compile level.

O0: the graph as it is, one kernel per node, run node by node from Python.
O1: the graph passes (graph.passes.optimize), then fusion (graph.fuse), then one kernel per
fused group; a group of one reshape runs as a view (no kernel, no copy).
At O0 and O1 the kernels run over an arena planned here (graph.dispatch, by prepare()).
O2: the O1 kernels in a planned order over one planned arena, called from one native entry
point (graph.o2); dry_run=True returns the memory plan (graph.plan_memory) and builds nothing.
tuning_log= builds every kernel with its best tuning record (graph.autotune writes them).
At every level identical workloads share one compiled kernel, and kernels compiled before
(by any compile, in any process) come from the compile cache on disk (graph/cache.py).
Imports te's public API and graph.{cache,errors,executor,fuse,group_kernels,ir,kernels,
memory,o2,passes}.
"""
from __future__ import annotations

import contextlib
import os

import te
from te.errors import ArgumentError, TEError

from . import cache as disk_cache
from .errors import GraphError
from .executor import Module, Step
from .fuse import fuse
from .group_kernels import compile_group
from .ir import Graph
from .kernels import compile_node
from .memory import plan_memory
from .o2 import O2Module
from .passes import optimize

LEVELS = ("O0", "O1", "O2")
TARGETS = ("llvm",)


def compile(g: Graph, level: str = "O0", target: str = "llvm",  # noqa: A001
            dry_run: bool = False, cache: bool | None = None,
            tuning_log: str | os.PathLike | None = None) -> Module:
    """Compile `g` at `level` for `target`; returns a Module with run(feeds). With
    dry_run=True: the MemoryPlan of `g` at `level`, and no code is generated. `cache`:
    whether kernels come from and go to the compile cache on disk (graph/cache.py; None,
    the default: yes unless TE_CACHE=0). `tuning_log`: a te.autotune log (graph.autotune
    writes one); each kernel takes its workload's best record (te.autotune's
    apply_history_best), and the records taken are part of its cache key."""
    with disk_cache.using(cache), _tuning(tuning_log, target):
        return _compile(g, level, target, dry_run)


def _tuning(log, target: str):
    """apply_history_best(log) around the compile, or nothing when `log` is None."""
    if log is None:
        return contextlib.nullcontext()
    if not isinstance(log, (str, os.PathLike)):
        raise GraphError(f"graph.compile: tuning_log must be a file path (str or "
                         f"os.PathLike) or None, got {log!r}")
    if not os.path.isfile(log):
        raise GraphError(f"graph.compile: tuning_log '{os.fspath(log)}' is not a file (it "
                         f"{'is a directory' if os.path.isdir(log) else 'does not exist'}); "
                         f"graph.autotune(g, log=...) writes one")
    try:
        return te.autotune.apply_history_best(os.fspath(log), target=target)
    except (ArgumentError, TEError) as err:
        detail = str(err).removeprefix("apply_history_best: ").removeprefix("log: ")
        raise GraphError(f"graph.compile: tuning_log {detail}") from None


def _compile(g: Graph, level: str, target: str, dry_run: bool):
    if not isinstance(g, Graph):
        raise GraphError(f"graph.compile: g must be a graph.Graph, got {type(g).__name__}")
    if level not in LEVELS:
        raise GraphError(f"graph.compile: level must be one of {list(LEVELS)}, got {level!r}")
    if target.split()[0] not in TARGETS:
        raise GraphError(f"graph.compile: target must be one of {list(TARGETS)} (with "
                         f"options), got {target!r}")
    if dry_run:
        return plan_memory(g, level)
    cache: dict = {}
    if level == "O0":
        steps = [_node_step(node, compile_node(node, target, cache)) for node in g.nodes]
        return Module(g, steps, level, target).prepare()
    opt = optimize(g)
    steps = [_group_step(group, None if group.is_view else compile_group(group, target, cache))
             for group in fuse(opt)]
    if level == "O2":
        return O2Module(opt, steps, target)
    return Module(opt, steps, level, target).prepare()


def _node_step(node, kernel) -> Step:
    return Step(kernel, tuple(node.inputs), tuple(node.outputs), (node.op,), node.name,
                f"{kernel.name}: {node}")


def _group_step(group, kernel) -> Step:
    outs = ", ".join(f"%{v.name}: {v.type_str}" for v in group.outputs)
    name = kernel.name if kernel is not None else "view"
    return Step(kernel, tuple(group.inputs), tuple(group.outputs), tuple(group.ops),
                group.outputs[0].name, f"{name}: {', '.join(group.ops)} -> {outs}",
                group.is_slices_concat)
