"""Visitor and Mutator bases for loop IR and expressions.

Takes IR from ir.py, gives traversal: a Mutator rebuilds a node only when a child changed,
so unchanged subtrees keep their identity. Subclasses override visit_<NodeName>. The walks
keep their own stacks (run_frames, walk_stmts, walk_down, the expression walks): statements
nest as deep as a schedule's stages and expressions as deep as the user wrote them, past
Python's recursion limit. Imports ir.py and te.compute.expr.
"""
from __future__ import annotations

import dataclasses
from types import GeneratorType

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
    if isinstance(s, ir.ParallelTask):
        return (), (s.loop,)
    if isinstance(s, ir.ThreadAllreduce):
        return s.values, (s.body,)
    if isinstance(s, (ir.BufferBind, ir.AliasScope)):
        return (), (s.body,)
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


# What walk_down's `step` gives to leave a statement's children out of the walk.
SKIP = object()


def walk_down(s: ir.Stmt, state, step):
    """(statement, state) for every statement under s, in walk_stmts' order, where `state`
    is what the path from s down to it gives: the children of a statement get
    step(statement, its state), or are left out when that is SKIP. For the walks that carry
    something down each path (the variables in scope, the thread loops around a statement),
    from the same explicit stack."""
    todo = [(s, state)]
    while todo:
        node, here = todo.pop()
        yield node, here
        inner = step(node, here)
        if inner is not SKIP:
            todo.extend((kid, inner) for kid in reversed(stmt_children(node)[1]))


def walk_scoped(s: ir.Stmt):
    """walk_down with the frozenset of Vars that the statements around each one bind (loop
    and let variables, allocations' data pointers): besides the function's parameters,
    what its own expressions may read. A statement's own expressions are outside its own
    binding (a loop's bounds cannot read its variable)."""
    return walk_down(s, frozenset(), _bind)


def _bind(node: ir.Stmt, bound: frozenset) -> frozenset:
    if isinstance(node, ir.For):
        return bound | {node.loop_var}
    if isinstance(node, ir.LetStmt):
        return bound | {node.var}
    if isinstance(node, ir.ThreadAllreduce):
        return bound | set(node.results)
    if isinstance(node, ir.Allocate):
        return bound | {node.buffer.data}
    return bound


def pre_order_exprs(s: ir.Stmt, fn) -> None:
    """fn(e) on every expression node under statement s, in program order: a statement's
    own expressions before those of the statements inside it."""
    for node in walk_stmts(s):
        for x in stmt_children(node)[0]:
            E.pre_order(x, fn)


class Mutator:
    """Rebuilds IR bottom-up; override visit_X(node) for node class X to rewrite it."""

    def visit_stmt(self, s: ir.Stmt) -> ir.Stmt:
        """The rewritten s. A visit_X may be a generator that yields the statements it
        wants visited and is sent their results (`body = yield s.body`, as generic_steps
        does): those frames stay on this loop's own stack instead of Python's, because
        statements nest as deep as a schedule's stages (each root stage's allocation holds
        the rest of the function). A plain visit_X that calls visit_stmt still works."""
        return run_frames(self._begin(s), self._begin)

    def _begin(self, s: ir.Stmt):
        """visit_X(s) or generic_steps(s): a result, or a generator frame to drive."""
        method = getattr(self, "visit_" + type(s).__name__, None)
        if method is not None:
            return method(s)
        return self.generic_steps(s)

    def visit_expr(self, e: E.Expr) -> E.Expr:
        method = getattr(self, "visit_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        return self.generic_expr(e)

    def generic_expr(self, e: E.Expr) -> E.Expr:
        """e with its children visited. Descendants that take this same generic path (no
        visit_X of their own) are walked with an explicit stack, not by recursion: a user's
        expression (or a chain of inlined stages) nests deeper than Python recurses."""
        kids = E.children(e)
        if not kids:
            return e
        inline = type(self).visit_expr is Mutator.visit_expr
        done: list = []
        todo: list = [(e, kids)]
        todo.extend((k, None) for k in reversed(kids))
        while todo:
            node, kids = todo.pop()
            if kids is None:
                if not inline or self._has_visit(node):
                    done.append(self.visit_expr(node))
                    continue
                kids = E.children(node)
                if not kids:
                    done.append(node)
                    continue
                todo.append((node, kids))
                todo.extend((k, None) for k in reversed(kids))
                continue
            new = tuple(done[len(done) - len(kids):])
            del done[len(done) - len(kids):]
            done.append(E.with_children(node, new))
        return done[0]

    def _has_visit(self, node) -> bool:
        return getattr(self, "visit_" + type(node).__name__, None) is not None

    def generic_stmt(self, s: ir.Stmt) -> ir.Stmt:
        return run_frames(self.generic_steps(s), self._begin)

    def generic_steps(self, s: ir.Stmt):
        """s with its children visited, as a generator frame (see visit_stmt)."""
        ex, st = stmt_children(s)
        new_ex = tuple(self.visit_expr(x) for x in ex)
        new_st = []
        for x in st:
            new_st.append((yield x))
        if all(a is b for a, b in zip(ex, new_ex)) and all(a is b for a, b in zip(st, new_st)):
            return s
        return rebuild_stmt(s, new_ex, tuple(new_st))


def run_frames(value, begin):
    """Run a walk whose frames are generators: each yields a statement to visit (begin(it)
    gives its result or its own frame) and is sent the result; returns the first frame's."""
    frames: list = []
    while True:
        if isinstance(value, GeneratorType):
            frames.append(value)
            value = None
        elif not frames:
            return value
        try:
            child = frames[-1].send(value)
        except StopIteration as stop:
            frames.pop()
            value = stop.value
            continue
        value = begin(child)


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
    if isinstance(s, ir.ParallelTask):
        return r(s, loop=st[0])
    if isinstance(s, ir.ThreadAllreduce):
        return r(s, values=tuple(ex), body=st[0])
    if isinstance(s, (ir.BufferBind, ir.AliasScope)):
        return r(s, body=st[0])
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
            return
        # expression descendants without a visit_X of their own: an explicit stack, as in
        # Mutator.generic_expr (expressions nest as deep as the user wrote them)
        inline = type(self).visit is Visitor.visit
        todo = list(reversed(E.children(node)))
        while todo:
            k = todo.pop()
            if not inline or getattr(self, "visit_" + type(k).__name__, None) is not None:
                self.visit(k)
            else:
                todo.extend(reversed(E.children(k)))


def post_order_stmt(s: ir.Stmt, fn) -> ir.Stmt:
    """Rewrite statements bottom-up with fn(stmt) -> stmt | None (None keeps it)."""

    class _M(Mutator):
        def generic_steps(self, node):
            node = yield from super().generic_steps(node)
            out = fn(node)
            return node if out is None else out

        def visit_expr(self, e):
            return e
    return _M().visit_stmt(s)
