"""tvm.target: Target(target, host=None) as TVM spells it, over te.target.Target.

Takes a target string or Target and an optional host; gives te's frozen, parsed Target
(`.kind.name`, `.host`, `.attrs`, `with target:`, `Target.current()`). Imports te.target.
"""
from __future__ import annotations

from ..target import Target as _Target
from ..target import TargetKind, parse_target


class _ParsedTarget(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _Target)


class Target(_Target, metaclass=_ParsedTarget):
    """tvm.target.Target("llvm", host="llvm"): returns te.target.Target, and
    `isinstance(t, tvm.target.Target)` holds for every parsed target."""

    def __new__(cls, target, host=None):
        text = target.text if isinstance(target, _Target) else target
        parsed = parse_target(text, who="tvm.target.Target")
        return parsed if host is None else parsed.with_host(host)

    current = staticmethod(_Target.current)


def create(target) -> _Target:
    """tvm.target.create (older TVM): the parsed target."""
    return parse_target(target, who="tvm.target.create")


__all__ = ["Target", "TargetKind", "create"]
