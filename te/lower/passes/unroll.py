"""unroll: loops marked unrolled with a small constant extent are replicated.

Takes a flattened Stmt, gives one where each such loop becomes a sequence of copies of its
body with the loop variable replaced by a constant (larger loops keep the `unrolled` kind
and the code generator asks LLVM to unroll them). Imports ir, visitor, simplify.
"""
from __future__ import annotations

import dataclasses

from ...compute.expr import Const, const
from .. import ir
from ..visitor import Mutator
from .simplify import _substitute_stmt

MAX_UNROLL_EXTENT = 64


class _Unroll(Mutator):
    def visit_For(self, s: ir.For) -> ir.Stmt:
        body = self.visit_stmt(s.body)
        if s.kind == ir.UNROLLED and isinstance(s.min, Const) and \
                isinstance(s.extent, Const) and s.extent.value <= MAX_UNROLL_EXTENT:
            mentions: dict = {}  # which subtrees of body use the loop var, for all copies
            copies = [_substitute_stmt(body, {s.loop_var: const(s.min.value + k,
                                                                 s.loop_var.dtype)}, mentions)
                      for k in range(int(s.extent.value))]
            return ir.keep_body_pragmas(s, ir.seq(*copies))
        return s if body is s.body else dataclasses.replace(s, body=body)

    def visit_expr(self, e):
        return e


def unroll_loops(s: ir.Stmt) -> ir.Stmt:
    return _Unroll().visit_stmt(s)
