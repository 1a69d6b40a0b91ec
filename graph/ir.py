"""The graph IR: Values (typed edges), Nodes (op applications) and a Graph of outputs.

A Value has a name, a dtype and a shape whose dims are ints or te expressions (te.var for a
symbolic size); it is made by a Node, or is a graph input (no node, no data) or a constant
(numpy data). A Graph is built from its outputs and orders its nodes topologically.
Imports numpy, te (expressions only) and graph.errors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import GraphError


def format_dim(d) -> str:
    if isinstance(d, (int, np.integer)):
        return str(int(d))
    return getattr(d, "name", None) or str(d)


def format_type(dtype: str, shape: tuple) -> str:
    return f"{dtype}[{', '.join(format_dim(d) for d in shape)}]"


def format_attr(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(format_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if isinstance(v, str) else str(v)


@dataclass(eq=False)
class Value:
    """An edge of the graph: `node` made it (output number `index`), or it is an input
    (node None, data None) or a constant (data a numpy array)."""
    name: str
    dtype: str
    shape: tuple
    node: "Node | None" = None
    index: int = 0
    data: np.ndarray | None = field(default=None, repr=False)

    @property
    def is_input(self) -> bool:
        return self.node is None and self.data is None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def type_str(self) -> str:
        return format_type(self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type_str}"


@dataclass(eq=False)
class Node:
    """One op application: `attrs` is a tuple of (name, value) pairs of plain hashable
    Python values (ints, floats, strings, tuples), so a node's workload is a dict key."""
    op: str
    inputs: tuple
    attrs: tuple
    name: str
    outputs: tuple = ()

    @property
    def attr(self) -> dict:
        return dict(self.attrs)

    def workload(self) -> tuple:
        """What decides a node's kernel: op, attributes, input dtypes and shapes."""
        return (self.op, self.attrs, tuple((v.dtype, tuple(map(str, v.shape)))
                                           for v in self.inputs))

    def __str__(self) -> str:
        outs = ", ".join(f"%{v.name}: {v.type_str}" for v in self.outputs)
        args = ", ".join(f"%{v.name}" for v in self.inputs)
        attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in self.attrs)
        call = f"{self.op}({args}{'; ' + attrs if attrs else ''})"
        named = self.outputs and self.outputs[0].name == self.name
        return f"{outs} = {call}" + ("" if named else f"  # {self.name}")


class Graph:
    """The nodes reaching `outputs`, in topological order (inputs before users).

    `inputs` fixes the order of the graph inputs (every input the outputs depend on must be
    listed); by default they come in the order the nodes first use them."""

    def __init__(self, outputs, inputs=None, name: str = "graph"):
        outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for k, v in enumerate(outs):
            if not isinstance(v, Value):
                raise GraphError(f"Graph: outputs[{k}] must be a graph Value, got "
                                 f"{type(v).__name__}")
        self.name = name
        self.outputs = outs
        self.nodes = _topo_order(outs)
        found, consts = _leaves(self.nodes, outs)
        self.constants = consts
        if inputs is None:
            self.inputs = found
        else:
            self.inputs = list(inputs)
            missing = [v.name for v in found if v not in self.inputs]
            if missing:
                raise GraphError(f"Graph: inputs must list every input the outputs use; "
                                 f"missing {missing}")
        _check_names(self)

    def values(self) -> list:
        """Every value: inputs, constants, then node outputs in order."""
        return (list(self.inputs) + list(self.constants)
                + [v for n in self.nodes for v in n.outputs])

    def __str__(self) -> str:
        head = ", ".join(repr(v) for v in self.inputs)
        lines = [f"graph {self.name}({head}) {{"]
        for c in self.constants:
            lines.append(f"  %{c.name}: {c.type_str} = constant")
        lines += [f"  {n}" for n in self.nodes]
        lines.append("  return " + ", ".join(f"%{v.name}" for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__


def _topo_order(outputs: list) -> list:
    """Post-order DFS from the outputs with an explicit stack (deep graphs, no recursion)."""
    order, done, stack = [], set(), []
    for v in outputs:
        if v.node is not None:
            stack.append((v.node, False))
        while stack:
            node, expanded = stack.pop()
            if id(node) in done:
                continue
            if expanded:
                done.add(id(node))
                order.append(node)
                continue
            stack.append((node, True))
            for inp in reversed(node.inputs):
                if inp.node is not None and id(inp.node) not in done:
                    stack.append((inp.node, False))
    return order


def _leaves(nodes: list, outputs: list) -> tuple:
    inputs, consts, seen = [], [], set()
    for v in [v for n in nodes for v in n.inputs] + outputs:
        if v.node is not None or id(v) in seen:
            continue
        seen.add(id(v))
        (consts if v.is_constant else inputs).append(v)
    return inputs, consts


def _check_names(g: Graph) -> None:
    seen = {}
    for v in g.values():
        other = seen.setdefault(v.name, v)
        if other is not v:
            raise GraphError(f"Graph: two values are named '{v.name}'; value names must be "
                             f"unique (they name feeds and kept intermediates)")
