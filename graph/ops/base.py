"""What the op table holds (OpDef), the fusion pattern lattice, and shape/dtype inference.

An OpDef gives an op's pattern kind, how many inputs it takes, the schedule family that
compiles it, and `compute`: te tensors + attributes -> te tensor(s). Inference builds that
compute on placeholders of the input types and reads the result's dtype and shape, so the
shape rules live in one place (te.compute.ops) and symbolic dims (te.var) flow through.
Imports te's public API and graph.errors/ir.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

import te
from te.errors import TEError

from ..errors import GraphError


class Pattern(enum.IntEnum):
    """TVM's fusion lattice (relay OpPatternKind): a lower kind fuses into more."""
    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class OpDef:
    """One row of the op table. `compute(inputs, **attrs)` takes te tensors in input order;
    `schedule` names the schedule family in graph.schedule ('auto': te's automatic space)."""
    name: str
    pattern: Pattern
    compute: Callable
    arity: tuple = (1, 1)
    schedule: str = "auto"
    doc: str = ""


def placeholders(types: list, prefix: str = "in") -> list:
    """te placeholders for (dtype, shape) pairs; a 0-d value is a 1-element tensor in te
    (te.compute declares no 0-d tensors), which broadcasts the same way."""
    return [te.placeholder(tuple(shape) or (1,), dtype=dtype, name=f"{prefix}{k}")
            for k, (dtype, shape) in enumerate(types)]


def build_compute(opdef: OpDef, types: list, attrs: dict) -> tuple:
    """(placeholders, output tensors) of op `opdef` on inputs of these (dtype, shape)s."""
    ins = placeholders(types)
    outs = opdef.compute(ins, **attrs)
    return ins, list(outs) if isinstance(outs, (list, tuple)) else [outs]


def static(d):
    """A te shape entry as an int where it is constant, else the expression itself."""
    value = getattr(d, "value", None)
    return int(value) if value is not None and not isinstance(d, te.Var) else d


def infer(opdef: OpDef, types: list, attrs: dict, node_name: str) -> list:
    """[(dtype, shape)] of the outputs, or GraphError naming the node and the op."""
    lo, hi = opdef.arity
    if not lo <= len(types) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise GraphError(f"{opdef.name} '{node_name}': expected {want} inputs, got "
                         f"{len(types)}")
    try:
        _, outs = build_compute(opdef, types, attrs)
    except TEError as e:
        raise GraphError(f"{opdef.name} '{node_name}': {e}") from None
    except TypeError as e:  # a missing or unknown attribute keyword
        raise GraphError(f"{opdef.name} '{node_name}': attributes {sorted(attrs)} do not "
                         f"fit the op ({e})") from None
    # an elementwise op of 0-d values is 0-d (te computes it as one element, like them);
    # expand's shape comes from its attribute instead
    scalar = (bool(types) and all(len(shape) == 0 for _, shape in types)
              and opdef.pattern in (Pattern.ELEMWISE, Pattern.BROADCAST)
              and opdef.name != "expand")
    return [(t.dtype, () if scalar else tuple(static(d) for d in t.shape)) for t in outs]
