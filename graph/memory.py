"""graph.plan_memory: the memory plan of a graph at a level, without generating code.

At O0 the steps are the nodes (each its own kernel); at O1 and O2 the fused groups of
graph.passes.optimize + graph.fuse (a reshape group is a view). A step may write over an
input (in place) when every op it runs is elementwise or broadcasting (graph.ops.Pattern):
such a kernel reads an input of the output's shape only at the index it writes. A lone
concatenate of contiguous blocks (graph.fuse.slices_concat) may have its inputs written in
place by their producers (O1 and O2). The plan (graph.plan) orders the steps, gives
lifetimes and arena offsets; O2 runs over it.
Imports graph.{errors,fuse,ir,ops,passes,plan}.
"""
from __future__ import annotations

from .errors import GraphError
from .fuse import fuse
from .ir import Graph
from .ops import OPS, Pattern
from .passes import optimize
from .plan import PlanStep, plan
from .plan_report import MemoryPlan

PLAN_LEVELS = ("O0", "O1", "O2")
POINTWISE = (Pattern.ELEMWISE, Pattern.BROADCAST)


def plan_memory(g: Graph, level: str = "O2", reorder: bool = True,
                inplace: bool = True) -> MemoryPlan:
    """The MemoryPlan of `g` compiled at `level` (print it for the table). `reorder=False`
    keeps the order the steps come in; `inplace=False` writes no output over an input."""
    if not isinstance(g, Graph):
        raise GraphError(f"graph.plan_memory: g must be a graph.Graph, got "
                         f"{type(g).__name__}")
    if level not in PLAN_LEVELS:
        raise GraphError(f"graph.plan_memory: level must be one of {list(PLAN_LEVELS)}, got "
                         f"{level!r}")
    _check_static(g)
    if level == "O0":
        steps = [PlanStep(tuple(n.inputs), tuple(n.outputs), n.op,
                          elementwise=_pointwise_node(n)) for n in g.nodes]
        return plan(steps, g.inputs, g.constants, g.outputs, reorder, inplace)
    opt = optimize(g)
    steps = [group_plan_step(gr) for gr in fuse(opt)]
    return plan(steps, opt.inputs, opt.constants, opt.outputs, reorder, inplace)


def group_plan_step(group) -> PlanStep:
    """The PlanStep of a fused group (graph.fuse.Group)."""
    return PlanStep(tuple(group.inputs), tuple(group.outputs), "+".join(group.ops),
                    view=group.is_view,
                    elementwise=len(group.outputs) == 1 and pointwise_ops(group.ops),
                    slices=group.is_slices_concat)


def kernel_plan_step(step) -> PlanStep:
    """The PlanStep of a compiled Module's kernel step (graph.executor.Step), labelled by
    its kernel."""
    return PlanStep(tuple(step.inputs), tuple(step.outputs), step.kernel.name,
                    elementwise=len(step.outputs) == 1 and pointwise_ops(step.ops),
                    slices=step.slices_concat)


def pointwise_ops(ops) -> bool:
    """Whether every op (by name) is elementwise or broadcasting."""
    return all(OPS[op].pattern in POINTWISE for op in ops)


def _pointwise_node(node) -> bool:
    return len(node.outputs) == 1 and pointwise_ops([node.op])


def _check_static(g: Graph) -> None:
    for v in g.values():
        if any(not isinstance(d, int) for d in v.shape):
            raise GraphError(f"graph.plan_memory: value '{v.name}' has symbolic shape "
                             f"{v.type_str}; planning needs constant shapes (give them with "
                             f"from_onnx(..., shapes=...) or graph.input)")
