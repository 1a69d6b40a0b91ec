"""tvm.ir: register_intrin_lowering and register_op_attr, TVM's intrinsic rule API.

Takes a call name ("tir.exp", "tir.mylog"), a target kind and a rule (call -> expression);
gives registrations that te's lower_intrinsics pass applies when it lowers for that target.
Imports te.lower.passes.lower_intrinsics and te.target.
"""
from __future__ import annotations

from typing import Callable

from ..errors import LoweringError
from ..lower.passes.lower_intrinsics import register_lowering
from ..target import TARGET_OPTIONS

# register_op_attr's records: (op name, attribute) -> value. TVM needs "TCallEffectKind"
# before it lowers a new intrinsic; te needs nothing, and keeps them for whoever asks.
OP_ATTRS: dict = {}


def _op_name(op_name: str, who: str) -> str:
    if not isinstance(op_name, str) or not op_name.startswith("tir.") \
            or not op_name[4:].isidentifier():
        raise LoweringError(f"{who}: op_name must look like 'tir.NAME', got {op_name!r}")
    return op_name[4:]


def register_intrin_lowering(op_name: str, target: str, *, f: Callable | None = None,
                             level: int = 10):
    """Lower calls of `op_name` ("tir.exp") for `target` ("llvm", "cuda" or "default")
    with f(call) -> expression of the call's dtype (the call itself keeps it); the
    higher level wins. Without f, a decorator."""
    name = _op_name(op_name, "register_intrin_lowering")
    kind = target.split()[0] if isinstance(target, str) and target.strip() else target
    if kind not in (*TARGET_OPTIONS, "default"):
        raise LoweringError(f"register_intrin_lowering: target must be one of "
                            f"{', '.join((*TARGET_OPTIONS, 'default'))}, got {target!r}")

    def register(rule: Callable) -> Callable:
        if not callable(rule):
            raise LoweringError(f"register_intrin_lowering: f must be callable, got {rule!r}")
        register_lowering(name, kind, rule, level)
        return rule
    return register if f is None else register(f)


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Record attribute `attr_key` of op `op_name` (TVM declares a new intrinsic this way);
    without value, a decorator."""
    name = _op_name(op_name, "register_op_attr")

    def register(v):
        OP_ATTRS[(f"tir.{name}", attr_key)] = v
        return v
    return register if value is None else register(value)


__all__ = ["register_intrin_lowering", "register_op_attr"]
