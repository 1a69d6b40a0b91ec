"""verify: checks a flattened function is well formed, naming the node and the pass.

Takes a PrimFunc and the name of the pass that produced it; raises LoweringError when a
variable is used outside its scope or a buffer is used that is neither a parameter nor
allocated around the use. Imports te.compute.expr, ir, visitor.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.expr import Var
from ..errors import LoweringError
from . import ir
from .func import PrimFunc


class _Verifier:
    def __init__(self, func: PrimFunc, after: str):
        self.after = after
        self.vars = set(func.scalar_params)
        self.buffers = set(func.params)

    def fail(self, what: str) -> None:
        raise LoweringError(f"internal error after pass '{self.after}': {what}")

    def expr(self, e: E.Expr) -> None:
        E.pre_order(e, self._node)

    def _node(self, e: E.Expr) -> None:
        if isinstance(e, Var) and e not in self.vars:
            self.fail(f"variable '{e.name}' is used outside the loop or let that defines it")
        if isinstance(e, E.TensorLoad):
            self.fail(f"unflattened read of tensor '{e.tensor.name}'")
        if isinstance(e, ir.Load) and e.buffer not in self.buffers:
            self.fail(f"load from buffer '{e.buffer.name}' outside its allocation")
        if isinstance(e, E.Reduce):
            self.fail("a reduction expression survived lowering")
        if isinstance(e, ir.Prefetch):
            self.fail("a prefetch is used as a value; it may only be evaluated")

    def prefetch(self, p: ir.Prefetch) -> None:
        if not isinstance(p.load, ir.Load) or p.load.dtype != p.load.buffer.dtype:
            self.fail("a prefetch must name one element of a buffer (a scalar Load)")
        self.expr(p.load)

    def task(self, s: ir.ParallelTask) -> None:
        if not isinstance(s.loop, ir.For) or s.loop.kind != ir.PARALLEL:
            self.fail(f"parallel task '{s.name}' does not hold a parallel loop")
        data = {b.data for b in self.buffers}
        for v in s.captured:
            if v not in self.vars and v not in data:
                self.fail(f"parallel task '{s.name}' captures '{v.name}' outside the loop, "
                          f"let or allocation that defines it")

    def stmt(self, s: ir.Stmt) -> None:
        # an explicit stack of statements and scope exits: root stages nest their
        # allocations one inside the other, as deep as the chain of stages is long
        todo: list = [s]
        while todo:
            s = todo.pop()
            if isinstance(s, tuple):  # leaving the scope of a loop, let or allocation
                s[0].discard(s[1])
            else:
                self.one(s, todo)

    def scoped(self, todo: list, exprs: tuple, items: set, var, body: ir.Stmt) -> None:
        for x in exprs:
            self.expr(x)
        items.add(var)
        todo.extend(((items, var), body))

    def one(self, s: ir.Stmt, todo: list) -> None:
        """Check s itself; push its children (in reverse) and the exits of its scopes."""
        if isinstance(s, ir.For):
            self.scoped(todo, (s.min, s.extent), self.vars, s.loop_var, s.body)
        elif isinstance(s, ir.LetStmt):
            self.scoped(todo, (s.value,), self.vars, s.var, s.body)
        elif isinstance(s, ir.Allocate):
            self.scoped(todo, (s.extent,), self.buffers, s.buffer, s.body)
        elif isinstance(s, ir.Store):
            if s.buffer not in self.buffers:
                self.fail(f"store to buffer '{s.buffer.name}' outside its allocation")
            self.expr(s.index)
            self.expr(s.value)
        elif isinstance(s, ir.SeqStmt):
            todo.extend(reversed(s.stmts))
        elif isinstance(s, ir.IfThenElse):
            self.expr(s.cond)
            if s.else_case is not None:
                todo.append(s.else_case)
            todo.append(s.then_case)
        elif isinstance(s, ir.ThreadAllreduce):
            for x in s.values:
                self.expr(x)
            for v in s.results:
                self.vars.add(v)
                todo.append((self.vars, v))
            todo.append(s.body)
        elif isinstance(s, ir.ParallelTask):
            self.task(s)
            todo.append(s.loop)
        elif isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Prefetch):
            self.prefetch(s.value)
        elif isinstance(s, ir.Evaluate):
            self.expr(s.value)
        else:
            self.fail(f"unexpected statement {type(s).__name__}")


def verify_func(func: PrimFunc, after: str) -> None:
    _Verifier(func, after).stmt(func.body)
