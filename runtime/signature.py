"""The plain-data description of a compiled kernel's arguments (the codegen <-> runtime ABI).

Takes nothing; gives ArgSpec, ScalarSpec and KernelSignature (frozen, JSON round-trippable).
Kernel `name` has the LLVM signature `i32 @name(ptr buf0, ..., <scalar> s0, ...)`: one data
pointer per ArgSpec (dense, row-major), then one value per ScalarSpec; it returns 0 on success.
Imports stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

SIGNATURE_VERSION = 1

ShapeEntry = Union[int, str]


@dataclass(frozen=True)
class ArgSpec:
    """One buffer argument: its dtype and shape (ints, or names of size variables)."""

    name: str
    dtype: str
    shape: tuple[ShapeEntry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArgSpec:
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]))


@dataclass(frozen=True)
class ScalarSpec:
    """One scalar argument: a symbolic size variable passed after the buffers."""

    name: str
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScalarSpec:
        return cls(name=data["name"], dtype=data["dtype"])


@dataclass(frozen=True)
class KernelSignature:
    """The entry point name and its buffer and scalar arguments, in call order."""

    name: str
    args: tuple[ArgSpec, ...]
    scalars: tuple[ScalarSpec, ...] = ()

    def to_json(self) -> str:
        return json.dumps({
            "version": SIGNATURE_VERSION,
            "name": self.name,
            "args": [arg.to_dict() for arg in self.args],
            "scalars": [scalar.to_dict() for scalar in self.scalars],
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
        )
