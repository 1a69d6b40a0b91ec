"""graph.autotune's tuning tasks: the distinct kernels of a graph compiled at a level.

extract_tasks(g, level) builds each kernel's te compute as graph.compile does at `level`
(O0: one kernel per node; O1 and O2: graph.passes.optimize, then graph.fuse, one kernel per
group that is not a view), files the kernels by te.autotune's workload key in the space of
their family (graph.schedule.strategy: the key tuning records are filed under and
apply_history_best looks up), so identical workloads are one
task, and counts how many kernels of the graph each task stands for (its weight). A task
whose schedule has no knobs says why (graph.schedule.fixed_schedule). Imports te's public
API and graph.{errors,fuse,group_kernels,ir,kernels,ops,passes,schedule}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import te

from .errors import GraphError
from .fuse import fuse
from .group_kernels import group_compute
from .ir import Graph
from .kernels import check_static
from .ops import OPS, build_compute
from .passes import optimize
from .schedule import fixed_schedule, strategy

LEVELS = ("O0", "O1", "O2")


@dataclass
class TuningTask:
    """One distinct kernel: its te compute (`ins` placeholders -> `outs`), schedule family
    and workload `key`; `weight` kernels of the graph share it (`values`: their outputs).
    `reason` says why it cannot be tuned (None: tunable); `result` is its te.autotune
    TuneResult once graph.autotune has tuned it."""
    key: str
    name: str
    family: str
    ins: list
    outs: list
    weight: int = 1
    values: list = field(default_factory=list)
    reason: str | None = None
    result: object = None

    @property
    def tunable(self) -> bool:
        return self.reason is None

    @property
    def shape(self) -> tuple:
        """The (first) output's shape."""
        return tuple(int(d.value) for d in self.outs[0].shape)

    @property
    def args(self) -> list:
        """The kernel's arguments as graph.kernels.build_kernel passes them."""
        return self.ins + self.outs


def extract_tasks(g: Graph, level: str = "O2", who: str = "graph.extract_tasks") -> list:
    """The TuningTasks of `g` at `level`, in the order their first kernel runs."""
    if not isinstance(g, Graph):
        raise GraphError(f"{who}: g must be a graph.Graph, got {type(g).__name__}")
    if level not in LEVELS:
        raise GraphError(f"{who}: level must be one of {list(LEVELS)}, got {level!r}")
    if level == "O0":
        kernels = [_node_kernel(node) for node in g.nodes]
    else:
        kernels = [_group_kernel(group) for group in fuse(optimize(g)) if not group.is_view]
    tasks: dict = {}
    for name, family, ins, outs, values in kernels:
        key = te.autotune.strategy_key(outs, strategy(family))
        task = tasks.get(key)
        if task is None:
            tasks[key] = TuningTask(key, name, family, ins, outs, 1, list(values),
                                    fixed_schedule(family, outs))
        else:
            task.weight += 1
            task.values.extend(values)
    return list(tasks.values())


def _node_kernel(node) -> tuple:
    """As graph.kernels.compile_node builds a node's kernel."""
    check_static(list(node.inputs) + list(node.outputs))
    opdef = OPS[node.op]
    ins, outs = build_compute(opdef, [(v.dtype, v.shape) for v in node.inputs], node.attr)
    return node.op, opdef.schedule, ins, outs, [v.name for v in node.outputs]


def _group_kernel(group) -> tuple:
    """As graph.group_kernels.compile_group builds a group's kernel (a lone node's is its
    node kernel)."""
    if len(group.nodes) == 1:
        return _node_kernel(group.nodes[0])
    family, ins, outs = group_compute(group)
    name = "+".join(dict.fromkeys(group.ops))
    return name, family, ins, outs, [v.name for v in group.outputs]
