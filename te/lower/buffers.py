"""Which buffers a statement stores to, reads and allocates: questions the build asks of any
lowered function (its outputs) and target 'cuda''s host/device split asks of each kernel.

Takes loop IR statements (flattened: Store/Load/Allocate over Buffers); gives sets of the
buffers' data Vars. Imports ir and visitor.
"""
from __future__ import annotations

from . import ir
from .visitor import pre_order_exprs, walk_stmts


def stored_buffers(s: ir.Stmt) -> set:
    """The data Vars of every buffer that `s` stores to, or hands to an extern call that
    may write it."""
    found = {n.buffer.data for n in walk_stmts(s) if isinstance(n, ir.Store)}

    def visit(e):
        if isinstance(e, (ir.AccessPtr, ir.BufferArg)) and e.write:
            found.add(e.buffer.data)
    pre_order_exprs(s, visit)
    return found


def allocated_buffers(s: ir.Stmt, scope: str | None = None) -> set:
    """The data Vars of the buffers allocated inside `s` (of `scope`, if given)."""
    return {n.buffer.data for n in walk_stmts(s) if isinstance(n, ir.Allocate)
            and (scope is None or n.buffer.scope == scope)}


def loaded_buffers(s: ir.Stmt) -> set:
    """The data Vars of every buffer that `s` reads."""
    found: set = set()

    def visit(e):
        if isinstance(e, ir.Load):
            found.add(e.buffer.data)
    pre_order_exprs(s, visit)
    return found
