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
from ..visitor import Mutator, walk_stmts


class _Simplify(Mutator):
    def __init__(self, ranges: dict | None):
        # Data and index expressions alike: signed arithmetic may wrap (numpy's semantics).
        self.ana = Analyzer(ranges, wraps=True)
        self._loop_branch = None   # a loop's whole body when that is one if (see below)

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
        # a body that is one `if (v < c)` on the loop's own variable (a partitioned parallel
        # loop's main and tail) gets v's range narrowed in each branch
        self._loop_branch = s.body if isinstance(s.body, ir.IfThenElse) else None
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
        var, then_range, else_range = (self._branch_ranges(cond) if s is self._loop_branch
                                       else (None, None, None))
        then_case = self._visit_within(s.then_case, var, then_range)
        else_case = (self._visit_within(s.else_case, var, else_range)
                     if s.else_case is not None else None)
        return ir.IfThenElse(cond, then_case, else_case)

    def _branch_ranges(self, cond: E.Expr) -> tuple:
        """(var, its range where `cond` holds, where it fails) for a condition `var < c` or
        `var <= c` (c constant) on a loop variable with a known range (a partitioned
        parallel loop's `if (v < split) main else tail`), else (None, None, None). Only
        for an if that is a loop's whole body: each narrowing empties the analyzer's memo,
        and many ifs sharing one large expression (ir_builder code) would each simplify it
        again."""
        if not (isinstance(cond, E.Binary) and cond.op in ("lt", "le")
                and isinstance(cond.a, E.Var) and isinstance(cond.b, Const)):
            return None, None, None
        known = self.ana.ranges.get(cond.a)
        if known is None or known[1] is None or not isinstance(cond.b.value, int):
            return None, None, None
        lo, hi = known
        last = cond.b.value - 1 if cond.op == "lt" else cond.b.value  # the last value inside
        return cond.a, (lo, min(hi, last)), (max(lo, last + 1), hi)

    def _visit_within(self, s: ir.Stmt, var, rng) -> ir.Stmt:
        """s simplified with `var` known to lie in `rng` (lo, hi): replaced by the value
        where only one is left (as a one-iteration loop's); empty ranges unchanged."""
        if var is None or rng[0] > rng[1]:
            return self.visit_stmt(s)
        if rng[0] == rng[1] and not any(isinstance(x, ir.For) and x.loop_var is var
                                        for x in walk_stmts(s)):
            return self.visit_stmt(_substitute_stmt(s, {var: E.const(rng[0], var.dtype)}))
        saved = self.ana.ranges.get(var)
        self.ana.bind(var, *rng)
        try:
            return self.visit_stmt(s)
        finally:
            self.ana.unbind(var, saved)

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
