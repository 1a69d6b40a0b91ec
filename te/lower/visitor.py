"""Visitor and Mutator bases for loop IR and expressions.

Takes IR from ir.py, gives traversal: a Mutator rebuilds a node only when a child changed,
so unchanged subtrees keep their identity. Subclasses override visit_<NodeName>. Imports
ir.py and te.compute.expr.
"""
from __future__ import annotations

import dataclasses

from ..compute import expr as E
from . import ir


def stmt_children(s: ir.Stmt) -> tuple:
    """(exprs, stmts) directly under statement s."""
    if isinstance(s, ir.For):
        return (s.min, s.extent), (s.body,)
    if isinstance(s, ir.SeqStmt):
        return (), s.stmts
    if isinstance(s, ir.IfThenElse):
        return (s.cond,), (s.then_case,) + ((s.else_case,) if s.else_case is not None else ())
    if isinstance(s, ir.Evaluate):
        return (s.value,), ()
    if isinstance(s, ir.LetStmt):
        return (s.value,), (s.body,)
    if isinstance(s, ir.ProducerStore):
        return s.indices + (s.value,), ()
    if isinstance(s, ir.ProducerRealize):
        return tuple(x for r in s.bounds for x in (r.min, r.extent)), (s.body,)
    if isinstance(s, ir.Store):
        return (s.index, s.value), ()
    if isinstance(s, ir.Allocate):
        return (s.extent,), (s.body,)
    raise TypeError(f"unknown statement {type(s).__name__}")


def walk_stmts(s: ir.Stmt, reverse: bool = False):
    """Every statement under s, s first, parents before children (pre-order), from an
    explicit stack: statements nest as deep as a schedule's stages. reverse=True takes
    children last to first, so what runs last comes first (a nest's own stage before the
    producers computed inside it)."""
    todo = [s]
    while todo:
        node = todo.pop()
        yield node
        kids = stmt_children(node)[1]
        todo.extend(kids if reverse else reversed(kids))


def pre_order_exprs(s: ir.Stmt, fn) -> None:
    """fn(e) on every expression node under statement s, in program order: a statement's
    own expressions before those of the statements inside it."""
    for node in walk_stmts(s):
        for x in stmt_children(node)[0]:
            E.pre_order(x, fn)


class Mutator:
    """Rebuilds IR bottom-up; override visit_X(node) for node class X to rewrite it."""

    def visit_stmt(self, s: ir.Stmt) -> ir.Stmt:
        method = getattr(self, "visit_" + type(s).__name__, None)
        if method is not None:
            return method(s)
        return self.generic_stmt(s)

    def visit_expr(self, e: E.Expr) -> E.Expr:
        method = getattr(self, "visit_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        return self.generic_expr(e)

    def generic_expr(self, e: E.Expr) -> E.Expr:
        kids = E.children(e)
        if not kids:
            return e
        return E.with_children(e, tuple(self.visit_expr(k) for k in kids))

    def generic_stmt(self, s: ir.Stmt) -> ir.Stmt:
        ex, st = stmt_children(s)
        new_ex = tuple(self.visit_expr(x) for x in ex)
        new_st = tuple(self.visit_stmt(x) for x in st)
        if all(a is b for a, b in zip(ex, new_ex)) and all(a is b for a, b in zip(st, new_st)):
            return s
        return rebuild_stmt(s, new_ex, new_st)


def rebuild_stmt(s: ir.Stmt, ex: tuple, st: tuple) -> ir.Stmt:
    """A copy of s with new expression and statement children (in stmt_children order)."""
    r = dataclasses.replace
    if isinstance(s, ir.For):
        return r(s, min=ex[0], extent=ex[1], body=st[0])
    if isinstance(s, ir.SeqStmt):
        return ir.seq(*st)
    if isinstance(s, ir.IfThenElse):
        return r(s, cond=ex[0], then_case=st[0], else_case=st[1] if len(st) > 1 else None)
    if isinstance(s, ir.Evaluate):
        return r(s, value=ex[0])
    if isinstance(s, ir.LetStmt):
        return r(s, value=ex[0], body=st[0])
    if isinstance(s, ir.ProducerStore):
        return r(s, indices=tuple(ex[:-1]), value=ex[-1])
    if isinstance(s, ir.ProducerRealize):
        bounds = tuple(ir_range(ex[2 * k], ex[2 * k + 1]) for k in range(len(s.bounds)))
        return r(s, bounds=bounds, body=st[0])
    if isinstance(s, ir.Store):
        return r(s, index=ex[0], value=ex[1])
    if isinstance(s, ir.Allocate):
        return r(s, extent=ex[0], body=st[0])
    raise TypeError(f"unknown statement {type(s).__name__}")


def ir_range(lo, extent):
    from ..compute.tensor import Range
    return Range(lo, extent)


class Visitor:
    """Walks IR in pre-order; override visit_X(node) and call self.generic(node) to descend."""

    def visit(self, node) -> None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic(node)

    def generic(self, node) -> None:
        if isinstance(node, ir.Stmt):
            ex, st = stmt_children(node)
            for x in ex:
                self.visit(x)
            for x in st:
                self.visit(x)
        else:
            for k in E.children(node):
                self.visit(k)


def post_order_stmt(s: ir.Stmt, fn) -> ir.Stmt:
    """Rewrite statements bottom-up with fn(stmt) -> stmt | None (None keeps it)."""

    class _M(Mutator):
        def visit_stmt(self, node):
            node = self.generic_stmt(node)
            out = fn(node)
            return node if out is None else out

        def visit_expr(self, e):
            return e
    return _M().visit_stmt(s)
