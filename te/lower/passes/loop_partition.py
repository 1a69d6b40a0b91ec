"""loop_partition: split a loop so its main part runs without tail guards.

Takes a flattened Stmt, gives an equivalent one where a loop `v` whose body is guarded by
`c*v + rest < 0` (c > 0; the guard a non-dividing split leaves behind) becomes two loops:
a main loop over the values of v where the guard holds for every value of the inner loop
variables (the guard is dropped there, so the body can be vectorized), and a tail loop
that keeps it. Vectorized, unrolled and thread-bound loops are left whole; inside a tail,
inner loops are partitioned again up to MAX_TAIL_DEPTH tails deep, so code growth stays
bounded (a tail's guards are the ones its own inner loops cannot remove). For a GPU
(barrier_free_only) a loop is partitioned only where no barrier can sit inside it: its
split point may depend on threadIdx, so its trip count may differ between threads.
Imports te.compute.expr, ir, visitor, arith.
"""
from __future__ import annotations

import dataclasses

from ...compute import expr as E
from ...compute.expr import Binary, Var
from .. import ir
from ..arith import Analyzer, interval, key
from ..visitor import Mutator, walk_stmts

_PARTITIONABLE = (ir.SERIAL, ir.PARALLEL)


def conjuncts(cond: E.Expr) -> list:
    """The terms of a chain of `and`s (a condition that is not one: itself)."""
    if isinstance(cond, Binary) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def guarded(conds: list, then_case: ir.Stmt, else_case=None) -> ir.Stmt:
    """`if (c0 && c1 && ...) then_case`, or then_case itself when no condition is left."""
    if not conds:
        return then_case
    cond = conds[0]
    for c in conds[1:]:
        cond = E.logical("and", cond, c)
    return ir.IfThenElse(cond, then_case, else_case)


def _guards_and_ranges(s: ir.Stmt, guards: list, ranges: dict, unsafe: set) -> None:
    """Collect If conjuncts and the ranges of loop vars below s (let vars are unsafe)."""
    for s in walk_stmts(s):
        if isinstance(s, ir.IfThenElse):
            guards.extend(conjuncts(s.cond))
        if isinstance(s, ir.For):
            hi = s.min + s.extent - 1
            old = ranges.get(s.loop_var)
            if old is not None and not (E.structural_equal(old[0], s.min)
                                        and E.structural_equal(old[1], hi)):
                unsafe.add(s.loop_var)  # one var reused by loops of different bounds
            ranges[s.loop_var] = (s.min, hi)
        if isinstance(s, ir.LetStmt):
            unsafe.add(s.var)


def _upper_limit(cond: E.Expr, var: Var, ranges: dict, unsafe: set, ana: Analyzer):
    """For a guard `c*var + rest < 0` (c > 0): the first value of var where it may fail."""
    if not isinstance(cond, Binary) or cond.op not in ("lt", "le") or \
            not E.dt.is_integral(cond.a.dtype) or E.dt.lanes(cond.a.dtype) != 1:
        return None
    if E.dt.is_uint(cond.a.dtype) or E.dt.is_uint(var.dtype):
        # the split point's arithmetic (c - 1 - rest) goes below zero and would wrap
        # around: an unsigned loop keeps its guards
        return None
    diff = cond.a - cond.b if cond.op == "lt" else cond.a - cond.b - 1
    lin = ana.linear(diff)
    coeff = next((c for atom, c in lin.terms.values() if atom is var), None)
    if coeff is None or coeff <= 0:
        return None
    others = [atom for atom, _ in lin.terms.values() if atom is not var]
    if any(var in E.free_vars(atom) for atom in others):
        return None
    rest = ana.simplify(diff - var * coeff)
    if any(v in unsafe for v in E.free_vars(rest)):
        return None
    itv = interval(rest, ranges, ana)
    if itv is None:
        return None
    # c*v + rest_hi < 0  <=>  v < ceil(-rest_hi / c)
    return ana.simplify(E.binary("floordiv", coeff - 1 - itv[1], coeff))


# How many tails deep inner loops are still partitioned: code grows by at most one copy
# of a loop body per guarded level inside each of these tails.
MAX_TAIL_DEPTH = 2
# a parallel loop keeps its tail iterations: `if (v < split) main else tail` inside the one
# loop, so the threads share them out (False: the tail as a loop after it, for A/B runs)
PARALLEL_TAIL_INSIDE = True


def may_hold_a_barrier(s: ir.Stmt) -> bool:
    """Whether CUDA code for `s` may hold a barrier or another block-wide step: a shared
    buffer is allocated or stored to (its fill gets __syncthreads), or a call is evaluated
    for its effect. Conservative: what it cannot rule out counts."""
    for x in walk_stmts(s):
        if isinstance(x, ir.Allocate) and x.buffer.scope not in ("local", "global"):
            return True
        if isinstance(x, ir.Store) and x.buffer.scope not in ("local", "global"):
            return True
        if isinstance(x, ir.Evaluate) and not isinstance(x.value, ir.Prefetch):
            return True
        if not isinstance(x, (ir.For, ir.SeqStmt, ir.IfThenElse, ir.LetStmt, ir.Store,
                              ir.Allocate, ir.Evaluate)):
            return True   # a statement kind this check does not know
    return False


class _Partition(Mutator):
    def __init__(self, barrier_free_only: bool = False):
        self.ana = Analyzer()
        self.tail_depth = 0
        self.barrier_free_only = barrier_free_only

    def visit_expr(self, e):
        return e

    def visit_For(self, s: ir.For) -> ir.Stmt:
        if s.kind not in _PARTITIONABLE or (self.barrier_free_only
                                            and may_hold_a_barrier(s.body)):
            return self.generic_stmt(s)
        guards, ranges, unsafe = [], {}, set()
        _guards_and_ranges(s.body, guards, ranges, unsafe)
        limits, removable = [], {}
        for g in guards:
            lim = _upper_limit(g, s.loop_var, ranges, unsafe, self.ana)
            if lim is not None:
                limits.append(lim)
                removable[key(g)] = g
        if not limits:
            return self.generic_stmt(s)
        end = self.ana.simplify(s.min + s.extent)
        split = limits[0]
        for lim in limits[1:]:
            split = E.binary("min", split, lim)
        split = self.ana.simplify(E.binary("min", E.binary("max", split, s.min), end))
        main_body = self.visit_stmt(_drop_guards(s.body, set(removable)))
        main = dataclasses.replace(s, extent=self.ana.simplify(split - s.min), body=main_body)
        tail_body = s.body
        if self.tail_depth < MAX_TAIL_DEPTH:
            # inner loops of the tail may carry guards of their own (a row block that does
            # not divide inside a column tail): partition those too, to a bounded depth
            self.tail_depth += 1
            tail_body = self.visit_stmt(s.body)
            self.tail_depth -= 1
        tail = dataclasses.replace(s, min=split, extent=self.ana.simplify(end - split),
                                   body=tail_body)
        if (s.kind == ir.PARALLEL and PARALLEL_TAIL_INSIDE and _positive(main.extent)
                and _positive(tail.extent)):
            # one parallel loop whose iterations branch: a tail after the loop would run on
            # the calling thread alone while the others wait (or launch a region of its own).
            # Constant extents only: a symbolic tail is often empty, which simplify then
            # sees and drops, where a branch would keep two copies of the body
            return dataclasses.replace(s, body=ir.IfThenElse(
                E.binary("lt", s.loop_var, split), main_body, tail_body))
        return ir.seq(main, tail)


def _positive(extent: E.Expr) -> bool:
    return isinstance(extent, E.Const) and extent.value > 0


def _drop_guards(s: ir.Stmt, keys: set) -> ir.Stmt:
    class _Drop(Mutator):
        def visit_expr(self, e):
            return e

        def visit_IfThenElse(self, node: ir.IfThenElse) -> ir.Stmt:
            kept = [c for c in conjuncts(node.cond) if key(c) not in keys]
            then_case = self.visit_stmt(node.then_case)
            else_case = None if node.else_case is None else self.visit_stmt(node.else_case)
            return guarded(kept, then_case, else_case)
    return _Drop().visit_stmt(s)


def partition_loops(s: ir.Stmt, barrier_free_only: bool = False) -> ir.Stmt:
    return _Partition(barrier_free_only).visit_stmt(s)
