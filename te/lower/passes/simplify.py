"""simplify: fold constants, collect linear index terms, decide provable conditions.

Takes a Stmt, gives an equivalent Stmt. Knows each loop variable's range while inside its
loop, so guards such as `i.inner < 8` inside `for (i.inner, 0, 8)` disappear, and loops of
extent one become their body with the variable replaced by the loop minimum.
Imports te.compute.expr, ir, visitor, arith.
"""
from __future__ import annotations

import dataclasses

from ...compute import expr as E
from ...compute.expr import Const
from .. import ir
from ..arith import WARM_DEPTH, Analyzer
from ..visitor import Mutator


class _Simplify(Mutator):
    def __init__(self, ranges: dict | None):
        # Data and index expressions alike: signed arithmetic may wrap (numpy's semantics).
        self.ana = Analyzer(ranges, wraps=True)

    def visit_expr(self, e: E.Expr) -> E.Expr:
        # The analyzer simplifies the whole tree itself; visiting children first would
        # simplify every subtree once per enclosing level.
        return self.ana.simplify(e)

    def visit_For(self, s: ir.For) -> ir.Stmt:
        lo, ext = self.visit_expr(s.min), self.visit_expr(s.extent)
        if isinstance(ext, Const) and ext.value <= 0:
            return ir.SeqStmt(())
        # A one-iteration loop goes (its variable becomes the constant); pragmas that
        # apply to its body stay, on a one-iteration loop whose variable nothing reads.
        if isinstance(ext, Const) and ext.value == 1 and s.kind != ir.THREAD_BINDING:
            body = self.visit_stmt(_substitute_stmt(s.body, {s.loop_var: lo}))
            return ir.keep_body_pragmas(s, body)
        saved = self.ana.ranges.get(s.loop_var)
        bound = isinstance(lo, Const)
        if bound:
            hi = int(lo.value + ext.value - 1) if isinstance(ext, Const) else None
            self.ana.bind(s.loop_var, int(lo.value), hi)
        body = self.visit_stmt(s.body)
        if bound or saved is not None:
            self.ana.unbind(s.loop_var, saved)
        if _is_empty(body):
            return body
        if lo is s.min and ext is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, min=lo, extent=ext, body=body)

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        cond = self.visit_expr(s.cond)
        if isinstance(cond, Const):
            if cond.value:
                return self.visit_stmt(s.then_case)
            return self.visit_stmt(s.else_case) if s.else_case is not None else ir.SeqStmt(())
        then_case = self.visit_stmt(s.then_case)
        else_case = self.visit_stmt(s.else_case) if s.else_case is not None else None
        return ir.IfThenElse(cond, then_case, else_case)

    def visit_SeqStmt(self, s: ir.SeqStmt):
        stmts = []
        for x in s.stmts:  # a generator frame: root stages nest (see Mutator.visit_stmt)
            stmts.append((yield x))
        return ir.seq(*[x for x in stmts if not _is_empty(x)]) if stmts else s


def _is_empty(s: ir.Stmt) -> bool:
    return isinstance(s, ir.SeqStmt) and not s.stmts


class _Substitute(Mutator):
    """Replaces Vars (by identity). Subtrees that mention none of them are kept without a
    walk, and a subtree shared by several statements is rebuilt once. `mentions` may be
    shared by substitutions of the same Vars into the same body (unrolled copies)."""

    def __init__(self, vmap: dict, mentions: dict | None = None):
        self.vmap = vmap
        self.mentions = {} if mentions is None else mentions  # id(expr) -> (expr, bool)
        self.memo: dict = {}  # id(expr) -> (expr, result); holding expr keeps its id unique

    def visit_expr(self, e: E.Expr) -> E.Expr:
        if not self._mentions(e, 0):
            return e
        return self._rewritten(e, 0)

    def _mentions(self, e: E.Expr, depth: int) -> bool:
        hit = self.mentions.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if depth >= WARM_DEPTH:  # deeper: the rest deepest first, by post_order's stack
            for node in E.post_order(e, self._known):
                if node is not e:
                    self.mentions[id(node)] = (node, self._mentions_here(node))
        out = isinstance(e, E.Var) and e in self.vmap
        for k in E.children(e):
            out = self._mentions(k, depth + 1) or out  # visit every child: fill the memo
        self.mentions[id(e)] = (e, out)
        return out

    def _rewritten(self, e: E.Expr, depth: int) -> E.Expr:
        """e (which mentions a replaced Var) with them replaced."""
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if depth >= WARM_DEPTH:
            for node in E.post_order(e, self._unchanged_or_done):
                if node is not e:
                    self.memo[id(node)] = (node, self._rewrite(node))
        if isinstance(e, E.Var):
            out = self.vmap[e]
        else:
            out = E.with_children(e, tuple(self._rewritten(k, depth + 1) if self._mentioned(k)
                                           else k for k in E.children(e)))
        self.memo[id(e)] = (e, out)
        return out

    def _mentions_here(self, node: E.Expr) -> bool:
        if isinstance(node, E.Var):
            return node in self.vmap
        return any(self._mentioned(k) for k in E.children(node))

    def _rewrite(self, node: E.Expr) -> E.Expr:
        if isinstance(node, E.Var):
            return self.vmap[node]
        return E.with_children(node, tuple(self.memo[id(k)][1] if self._mentioned(k) else k
                                           for k in E.children(node)))

    def _known(self, e: E.Expr) -> bool:
        hit = self.mentions.get(id(e))
        return hit is not None and hit[0] is e

    def _mentioned(self, e: E.Expr) -> bool:
        return self.mentions[id(e)][1]

    def _unchanged_or_done(self, e: E.Expr) -> bool:
        hit = self.memo.get(id(e))
        return not self._mentioned(e) or (hit is not None and hit[0] is e)


def _substitute_stmt(s: ir.Stmt, vmap: dict, mentions: dict | None = None) -> ir.Stmt:
    return _Substitute(vmap, mentions).visit_stmt(s)


def simplify_stmt(s: ir.Stmt, ranges: dict | None = None) -> ir.Stmt:
    """Simplify s; `ranges` gives known (lo, hi) bounds of free variables (sizes >= 0)."""
    return _Simplify(ranges).visit_stmt(s)
