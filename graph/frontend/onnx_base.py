"""What the ONNX converters share: the element type table, the Converter row, Refused,
and the checks of constant inputs and attribute values.

Imports numpy and, to fold a computed constant, graph's compile and ir.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# ONNX TensorProto element types -> dtype names (the ones te has)
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
          7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class Refused(Exception):
    """This node cannot be imported: `attribute` ('' for the op) and why; `needs` names the
    graph inputs that would make it importable if bound to their values (from_onnx's
    constants=)."""

    def __init__(self, attribute: str, reason: str, needs=()):
        super().__init__(reason)
        self.attribute = attribute
        self.reason = reason
        self.needs = list(needs)


@dataclass(frozen=True)
class Converter:
    fn: Callable
    attrs: frozenset


def const(v, what: str):
    """The numpy data of a Value that must be a constant (a shape, axes, pads input). A
    value computed from constants alone (a shape built by Shape, Slice and Concat) is
    folded: its subgraph compiled at O0 and run."""
    if v is not None and v.is_constant:
        return v.data
    inputs = _graph_inputs(v) if v is not None else []
    if v is None or inputs:
        raise Refused(what, f"input '{what}' must be a constant (an initializer or a "
                            f"Constant node)", inputs)
    from ..compile import compile as graph_compile
    from ..ir import Graph
    (data,) = graph_compile(Graph([v], inputs=[]), level="O0").run({})
    return data


def scalar(v, what: str) -> float:
    """A constant input holding one number (a 0-d or one-element tensor) as a float."""
    data = const(v, what)
    if data.size != 1:
        raise Refused(what, f"input '{what}' must hold one value, got shape {data.shape}")
    return float(data.reshape(-1)[0])


def _graph_inputs(v) -> list:
    """The names of the graph inputs `v` is computed from."""
    found, seen, stack = [], set(), [v]
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        if u.is_input:
            found.append(u.name)
        elif u.node is not None:
            stack.extend(u.node.inputs)
    return found


def distinct_axes(given, rank: int, attribute: str = "axes") -> list:
    """An `axes` attribute as non-negative axes in its own order (ONNX pairs them with other
    lists), refused unless each is in [-rank, rank) and none repeats."""
    given = [int(a) for a in given]
    if any(not -rank <= a < rank for a in given) or len({a % rank for a in given}) < len(given):
        raise Refused(attribute, f"{attribute} {given} must be distinct axes of the "
                                 f"rank-{rank} input")
    return [a % rank for a in given]


def only(attrs: dict, name: str, allowed, default):
    value = attrs.get(name, default)
    if value not in allowed:
        raise Refused(name, f"value {value!r} not supported (supported: {list(allowed)})")
    return value


def row(fn, *attrs) -> Converter:
    """A table row: the converter and the attributes it understands."""
    return Converter(fn, frozenset(attrs))
