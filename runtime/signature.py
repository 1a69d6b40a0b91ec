"""The plain-data description of a compiled kernel's arguments (the codegen <-> runtime ABI).

Takes nothing; gives ArgSpec, ScalarSpec and KernelSignature (frozen, JSON round-trippable).
Kernel `name` has the LLVM signature `i32 @name(ptr buf0, ..., <scalar> s0, ...)`: a data
pointer per ArgSpec (dense, row-major), a value per ScalarSpec, then, with bounds checks
(checked_buffers), a pointer to its error record; it returns 0 on success. Imports stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

SIGNATURE_VERSION = 1
# Status of a failed bounds check; the kernel then wrote its error record: RECORD_FIELDS
# int64s, (2k for a load from checked buffer k or 2k + 1 for a store to it, the index, the
# buffer's extent). te's code generator (te/codegen/llvm/bounds.py) uses the same numbers.
BOUNDS_STATUS = -1
RECORD_FIELDS = 3

# A dimension: a constant, a size variable's name, or an expression over them (an
# output of shape (n - 2,)), written (op, operand, operand) with op one of SHAPE_OPS and
# operands entries again; checked at call time once the variables are bound.
ShapeEntry = Union[int, str, tuple]
SHAPE_OPS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max")


def shape_entry_from_json(entry: Any) -> ShapeEntry:
    """A shape entry read back from JSON (where tuples are lists)."""
    if isinstance(entry, list):
        return tuple(shape_entry_from_json(e) for e in entry)
    return entry


def evaluate_shape_entry(entry: ShapeEntry, values: dict) -> int:
    """The value of `entry` given the size variables' `values` (name -> int)."""
    if isinstance(entry, int):
        return entry
    if isinstance(entry, str):
        return values[entry]
    op, a, b = entry
    x, y = evaluate_shape_entry(a, values), evaluate_shape_entry(b, values)
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op in ("floordiv", "floormod"):
        if y == 0:
            raise ZeroDivisionError(f"shape expression {format_shape_entry(entry)} divides "
                                    f"by zero")
        return x // y if op == "floordiv" else x % y
    return min(x, y) if op == "min" else max(x, y)


def format_shape_entry(entry: ShapeEntry) -> str:
    """The entry as text: "n - 2", "floordiv(n, 4)"."""
    if not isinstance(entry, tuple):
        return str(entry)
    op, a, b = entry
    symbols = {"add": "+", "sub": "-", "mul": "*"}
    left, right = format_shape_entry(a), format_shape_entry(b)
    if op in symbols:
        right = f"({right})" if isinstance(b, tuple) else right
        return f"{left} {symbols[op]} {right}"
    return f"{op}({left}, {right})"


def shape_entry_names(entry: ShapeEntry) -> set:
    """The size variables an entry names."""
    if isinstance(entry, str):
        return {entry}
    if isinstance(entry, tuple):
        return shape_entry_names(entry[1]) | shape_entry_names(entry[2])
    return set()


@dataclass(frozen=True)
class ArgSpec:
    """One buffer argument: its dtype and shape (ints, names of size variables, or
    expressions over them; see ShapeEntry).

    `output` marks an argument the kernel writes: it must be writeable and must not overlap
    any other argument (kernel parameters are noalias). Absent in old signatures: False.
    """

    name: str
    dtype: str
    shape: tuple[ShapeEntry, ...]
    output: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape),
                "output": self.output}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArgSpec:
        return cls(name=data["name"], dtype=data["dtype"],
                   shape=tuple(shape_entry_from_json(e) for e in data["shape"]),
                   output=bool(data.get("output", False)))


@dataclass(frozen=True)
class ScalarSpec:
    """One scalar argument, passed to the kernel after the buffers: a symbolic size bound
    from the arguments' shapes, or (position given) a value the caller passes itself, at
    that index of its argument list (`te.build(s, [A, B, bias])` with bias a te.var)."""

    name: str
    dtype: str
    position: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype}
        if self.position is not None:
            out["position"] = self.position
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScalarSpec:
        return cls(name=data["name"], dtype=data["dtype"], position=data.get("position"))


@dataclass(frozen=True)
class KernelSignature:
    """The entry point name and its buffer and scalar arguments, in call order.

    `heap_buffers` names the kernel's heap-allocated intermediates; status code -2 - 2k means
    heap buffer k could not be allocated, -3 - 2k that it exceeds the int32 index range.
    `checked_buffers` names the buffers whose accesses the kernel checks (BOUNDS_STATUS);
    when there are any, the kernel takes the pointer to its error record last.
    """

    name: str
    args: tuple[ArgSpec, ...]
    scalars: tuple[ScalarSpec, ...] = ()
    heap_buffers: tuple[str, ...] = ()
    checked_buffers: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({
            "version": SIGNATURE_VERSION,
            "name": self.name,
            "args": [arg.to_dict() for arg in self.args],
            "scalars": [scalar.to_dict() for scalar in self.scalars],
            "heap_buffers": list(self.heap_buffers),
            "checked_buffers": list(self.checked_buffers),
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KernelSignature:
        data = json.loads(text)
        version = data.get("version", SIGNATURE_VERSION)
        if version != SIGNATURE_VERSION:
            raise ValueError(
                f"kernel signature: expected version {SIGNATURE_VERSION}, got {version}"
            )
        return cls(
            name=data["name"],
            args=tuple(ArgSpec.from_dict(arg) for arg in data["args"]),
            scalars=tuple(ScalarSpec.from_dict(scalar) for scalar in data.get("scalars", ())),
            heap_buffers=tuple(data.get("heap_buffers", ())),
            checked_buffers=tuple(data.get("checked_buffers", ())),
        )
