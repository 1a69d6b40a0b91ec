"""What the ONNX converters share: the element type table, the Converter row, Refused,
and the checks of constant inputs and attribute values.

Imports numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# ONNX TensorProto element types -> dtype names (the ones te has)
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
          7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class Refused(Exception):
    """This node cannot be imported: `attribute` ('' for the op) and why; `needs` names the
    graph input that would make it importable if bound to its value (from_onnx's
    constants=), '' when there is none."""

    def __init__(self, attribute: str, reason: str, needs: str = ""):
        super().__init__(reason)
        self.attribute = attribute
        self.reason = reason
        self.needs = needs


@dataclass(frozen=True)
class Converter:
    fn: Callable
    attrs: frozenset


def const(v, what: str):
    """The numpy data of a Value that must be a constant (a shape, axes, pads input)."""
    if v is None or not v.is_constant:
        raise Refused(what, f"input '{what}' must be a constant (an initializer or a "
                            f"Constant node)", v.name if v is not None and v.is_input else "")
    return v.data


def only(attrs: dict, name: str, allowed, default):
    value = attrs.get(name, default)
    if value not in allowed:
        raise Refused(name, f"value {value!r} not supported (supported: {list(allowed)})")
    return value


def row(fn, *attrs) -> Converter:
    """A table row: the converter and the attributes it understands."""
    return Converter(fn, frozenset(attrs))
