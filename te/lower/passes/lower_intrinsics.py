"""lower_intrinsics: intrinsic calls rewritten by the rules registered for the target.

Takes a PrimFunc and its target; gives the body with each intrinsic call (te.exp's "exp",
an intrinsic of one's own from call_intrin) that has a rule for the target's kind replaced
by what the rule returns (TVM's register_intrin_lowering, which te.tvm.ir exposes). With no
rule registered it changes nothing. Imports te.compute, ir and the visitor.
"""
from __future__ import annotations

from typing import Callable

from ...compute import expr as E
from ...errors import LoweringError
from .. import ir
from ..visitor import Mutator

# (call name without "tir.", target kind or "default") -> (level, rule); a rule takes the
# E.Call and gives an expression of the same dtype (the call itself to keep it).
_RULES: dict = {}


def register_lowering(name: str, target_kind: str, rule: Callable, level: int = 10) -> None:
    """Lower calls of intrinsic `name` for targets of `target_kind` ("default": any) with
    rule(call) -> expression. Of two rules for one name and kind, the higher level wins; at
    the same level the later one."""
    key = (name, target_kind)
    if key in _RULES and _RULES[key][0] > level:
        return
    _RULES[key] = (level, rule)


def lowering_rule(name: str, target_kind: str) -> Callable | None:
    """The rule for `name` on `target_kind`: its own, else the "default" one, else None."""
    for kind in (target_kind, "default"):
        if (name, kind) in _RULES:
            return _RULES[(name, kind)][1]
    return None


def lower_intrinsics(func, target) -> ir.Stmt:
    """func's body with its intrinsic calls lowered by the registered rules for target."""
    if not _RULES:
        return func.body
    return _Lower(target.kind).visit_stmt(func.body)


class _Lower(Mutator):
    def __init__(self, target_kind: str) -> None:
        self.target_kind = target_kind

    def visit_Call(self, e: E.Call) -> E.Expr:
        e = self.generic_expr(e)
        if e.extern:
            return e
        rule = lowering_rule(e.name, self.target_kind)
        if rule is None:
            return e
        out = E.as_expr(rule(e))
        if out.dtype != e.dtype:
            raise LoweringError(f"lower_intrinsics: the rule registered for 'tir.{e.name}' on "
                                f"target '{self.target_kind}' returned dtype {out.dtype} for "
                                f"a {e.dtype} call; it must return the call's dtype")
        return out
