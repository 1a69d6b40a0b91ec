"""parallel_outline: each outermost parallel loop -> a ParallelTask, the loop's iterations as
a task function of their own with the values it captures from the function around it.

Takes and gives a flattened function body; the code generator emits each task as a function
plus one call into the thread pool, and reads what to pass from `captured` (TVM's
lower_parallel, Halide's closure conversion). A parallel loop inside a task stays a loop:
its thread runs it serially. Idempotent: tasks already made are kept. Imports te.compute.expr
and the loop IR core (ir, visitor).
"""
from __future__ import annotations

from ...compute import expr as E
from .. import ir
from ..visitor import Mutator, stmt_children, walk_scoped, walk_stmts


def outline_parallel(body: ir.Stmt, func_name: str) -> ir.Stmt:
    """`body` with each outermost parallel loop made a ParallelTask named
    `<func_name>_par<k>` (k counting in program order, past the names already taken)."""
    taken = {s.name for s in walk_stmts(body) if isinstance(s, ir.ParallelTask)}
    return _Outline(func_name, taken).visit_stmt(body)


class _Outline(Mutator):
    def __init__(self, func_name: str, taken: set):
        self.func_name = func_name
        self.taken = taken
        self.next = 0

    def visit_expr(self, e: E.Expr) -> E.Expr:
        return e  # no expression changes: only statements are wrapped

    def visit_ParallelTask(self, s: ir.ParallelTask) -> ir.Stmt:
        return s  # outlined before (a function lowered, then built)

    def visit_For(self, s: ir.For):
        if s.kind != ir.PARALLEL:
            return (yield from self.generic_steps(s))
        captured = tuple(v for v in free_vars(s.body) if v is not s.loop_var)
        return ir.ParallelTask(self._fresh_name(), captured, s)

    def _fresh_name(self) -> str:
        while True:
            name = f"{self.func_name}_par{self.next}"
            self.next += 1
            if name not in self.taken:
                self.taken.add(name)
                return name


def free_vars(s: ir.Stmt) -> list:
    """Vars a statement reads (buffer data pointers included) but does not bind itself, in
    first-use order. A loop var, let var or allocation bound inside is not free, even when
    the same Var object is also bound outside (partitioned loops reuse their variables)."""
    seen: dict = {}
    for node, bound in walk_scoped(s):
        for v in _reads(node):
            if v not in bound:
                seen.setdefault(v, None)
    return list(seen)


def _reads(node: ir.Stmt) -> list:
    """The Vars that statement `node`'s own expressions read, and the data pointers of the
    buffers it loads and stores, in program order."""
    out = [node.buffer.data] if isinstance(node, ir.Store) else []

    def one(e):
        if isinstance(e, E.Var):
            out.append(e)
        elif isinstance(e, ir.Load):
            out.append(e.buffer.data)
    for x in stmt_children(node)[0]:
        E.pre_order(x, one)
    return out
