"""instrument_bound_checkers: run-time bounds checks on the Loads and Stores that the loop
ranges do not prove inside their buffers (te.build(..., instrument_bound_checkers=True)).

Takes a flattened PrimFunc whose indices are final (after vectorize and unroll, Ramps
included); gives its body with the index of each access not proven in [0, extent) by the
interval arithmetic wrapped in ir.CheckedIndex, which code generation turns into a check
that stops the kernel with an error naming the buffer, the index and the extent. Prefetches
are hints that never fault and stay unchecked. Imports te.compute, te.dtype, ir, visitor,
arith.
"""
from __future__ import annotations

from ... import dtype as dt
from ...compute import expr as E
from .. import ir
from ..func import PrimFunc
from ..arith import Analyzer, interval, key
from ..visitor import Mutator, rebuild_stmt, stmt_children


def instrument_bound_checkers(func: PrimFunc) -> ir.Stmt:
    """func's body with the index of every Load and Store not proven in bounds checked."""
    sizes = {v: (0, None) for v in func.scalar_params}
    # A parameter is a dense array of prod(shape) elements (the runtime checks contiguity).
    extents = {buf.data: _product(buf.shape) for buf in func.params}
    return _Instrument(Analyzer(sizes), extents).visit_stmt(func.body)


def _product(shape: tuple) -> E.Expr:
    out = E.const(1)
    for dim in shape:
        out = E.binary("mul", out, dim)
    return Analyzer().simplify(out)


class _Instrument(Mutator):
    """Keeps, for each enclosing loop or let variable, an interval over the size variables
    (symbolic ends), narrowed inside guards (`if (x >= 1 && x < n)`, the true side of a
    select), the bounds guards give whole expressions, and the element count of each buffer
    in scope."""

    def __init__(self, ana: Analyzer, extents: dict):
        self.ana = ana
        self.extents = extents  # buffer data Var -> element count (Expr)
        self.ranges: dict = {}  # Var -> (lo, hi) Exprs
        self.facts: dict = {}  # arith.key(e) -> (e, lo, hi) known inside guards; None: none

    def _interval(self, e: E.Expr):
        """[lo, hi] of scalar integer `e` over the enclosing ranges and guards, or None. An
        expression that reads memory has none: a store may change what it reads (a bound
        `I[0]` would go stale), and a gathered index is what the checks are for."""
        if not dt.is_integral(e.dtype) or dt.lanes(e.dtype) != 1 or _reads_memory(e):
            return None
        e = self.ana.simplify(e)
        itv = interval(e, self.ranges, self.ana)
        fact = self.facts.get(key(e))
        if fact is None:
            return itv
        fact = fact[1:]
        lo, hi = (None, None) if itv is None else itv
        lo = fact[0] if lo is None else lo if fact[0] is None else self._max(lo, fact[0])
        hi = fact[1] if hi is None else hi if fact[1] is None else self._min(hi, fact[1])
        return None if lo is None or hi is None else (lo, hi)

    def _min(self, a: E.Expr, b: E.Expr) -> E.Expr:
        return self.ana.simplify(E.binary("min", a, b))

    def _max(self, a: E.Expr, b: E.Expr) -> E.Expr:
        return self.ana.simplify(E.binary("max", a, b))

    def _scoped(self, table: dict, key, value, visit):
        """visit() with table[key] = value (no entry when value is None), then restore:
        partitioned loops reuse their variables, and an inner binding hides an outer one."""
        had, previous = key in table, table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        try:
            return visit()
        finally:
            if had:
                table[key] = previous
            else:
                table.pop(key, None)

    def visit_For(self, s: ir.For) -> ir.Stmt:
        lo, extent = self.visit_expr(s.min), self.visit_expr(s.extent)
        first = self._interval(lo)
        last = self._interval(E.binary("sub", E.binary("add", lo, extent), E.const(1, lo.dtype)))
        rng = None if first is None or last is None else (first[0], last[1])
        body = self._binding(s.loop_var, rng, lambda: self.visit_stmt(s.body))
        return _rebuild(s, (lo, extent), (body,))

    def visit_LetStmt(self, s: ir.LetStmt) -> ir.Stmt:
        value = self.visit_expr(s.value)
        body = self._binding(s.var, self._interval(value), lambda: self.visit_stmt(s.body))
        return _rebuild(s, (value,), (body,))

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        cond = self.visit_expr(s.cond)
        then = self._assuming(cond, lambda: self.visit_stmt(s.then_case))
        other = () if s.else_case is None else (self.visit_stmt(s.else_case),)
        return _rebuild(s, (cond,), (then,) + other)

    def visit_Select(self, e: E.Select) -> E.Expr:
        # Codegen and the interpreter evaluate a side that loads only when it is chosen.
        cond = self.visit_expr(e.cond)
        true_value = self._assuming(cond, lambda: self.visit_expr(e.true_value))
        return E.with_children(e, (cond, true_value, self.visit_expr(e.false_value)))

    def _assuming(self, cond: E.Expr, visit):
        """visit() knowing that the scalar condition `cond` holds: each conjunct `a < b`,
        `a <= b`, `a > b` or `a >= b` bounds its integer side a (or b) by the other's
        interval, as a loop or let variable's range or as a fact about that expression."""
        if isinstance(cond, E.Binary) and cond.op == "and":
            return self._assuming(cond.a, lambda: self._assuming(cond.b, visit))
        if not isinstance(cond, E.Binary) or cond.op not in _BOUNDS:
            return visit()
        # a < b bounds a from above by b, and b from below by a
        below, offset = _BOUNDS[cond.op]
        return self._bounded(cond.a, cond.b, below, offset, lambda: self._bounded(
            cond.b, cond.a, not below, -offset, visit))

    def _bounded(self, side: E.Expr, other: E.Expr, below: bool, offset: int, visit):
        """visit() knowing side >= other + offset (below) or side <= other + offset: a fact
        about the expression `side`, and a narrower range for its variable v when side is
        v + rest or rest - v."""
        itv = self._interval(other)
        if (itv is None or not dt.is_integral(side.dtype) or dt.lanes(side.dtype) != 1
                or _reads_memory(side)
                # `a < b` bounds a by b - 1, which for an unsigned b of 0 wraps around
                or dt.is_uint(side.dtype) or dt.is_uint(other.dtype)):
            return visit()
        side = self.ana.simplify(side)
        end = self.ana.simplify(E.binary("add", itv[0 if below else 1],
                                         E.const(offset, other.dtype)))
        _, lo, hi = self.facts.get(key(side), (side, None, None))
        if below:
            lo = end if lo is None else self._max(lo, end)
        else:
            hi = end if hi is None else self._min(hi, end)

        def with_fact():
            return self._scoped(self.facts, key(side), (side, lo, hi), visit)
        narrowed = self._narrowed(side, end, below)
        if narrowed is None:
            return with_fact()
        return self._scoped(self.ranges, narrowed[0], narrowed[1], with_fact)

    def _narrowed(self, side: E.Expr, end: E.Expr, below: bool):
        """(v, narrower range of v) when side = c*v + rest, c = 1 or -1, for a variable v
        with a range that rest does not use, and side >= end (below) or side <= end."""
        for atom, c in self.ana.linear(side).terms.values():
            if not (isinstance(atom, E.Var) and atom in self.ranges and c in (1, -1)):
                continue
            rest = self.ana.simplify(E.binary("sub", side, E.binary(
                "mul", atom, E.const(c, atom.dtype))))
            rest_itv = None if atom in E.free_vars(rest) else self._interval(rest)
            if rest_itv is None:
                continue
            # c*v = side - rest: at least end - hi(rest) (below), at most end - lo(rest)
            bound = E.binary("sub", end, rest_itv[1] if below else rest_itv[0])
            if c == -1:
                bound, below = E.binary("sub", E.const(0, bound.dtype), bound), not below
            bound = self.ana.simplify(bound)
            lo, hi = self.ranges[atom]
            return atom, (self._max(lo, bound), hi) if below else (lo, self._min(hi, bound))
        return None

    def _binding(self, var: E.Var, rng, visit):
        """visit() with `var` bound afresh to range `rng` (None: unknown); what was known in
        terms of the variable's earlier binding does not hold for the new one."""
        kept_facts, kept_ranges = self.facts, self.ranges

        def stale(*exprs) -> bool:
            return any(x is not None and var in E.free_vars(x) for x in exprs)
        self.facts = {k: f for k, f in kept_facts.items() if not stale(*f)}
        self.ranges = {v: r for v, r in kept_ranges.items() if not stale(*r)}
        try:
            return self._scoped(self.ranges, var, rng, visit)
        finally:
            self.facts, self.ranges = kept_facts, kept_ranges

    def visit_Allocate(self, s: ir.Allocate) -> ir.Stmt:
        extent = self.visit_expr(s.extent)
        body = self._scoped(self.extents, s.buffer.data, extent,
                            lambda: self.visit_stmt(s.body))
        return _rebuild(s, (extent,), (body,))

    def visit_Store(self, s: ir.Store) -> ir.Stmt:
        index, value = self.visit_expr(s.index), self.visit_expr(s.value)
        return _rebuild(s, (self._checked(s.buffer, index), value), ())

    def visit_Load(self, e: ir.Load) -> E.Expr:
        return E.with_children(e, (self._checked(e.buffer, self.visit_expr(e.index)),))

    def visit_Prefetch(self, e: ir.Prefetch) -> E.Expr:
        return e

    def _checked(self, buf: ir.Buffer, index: E.Expr) -> E.Expr:
        extent = self.extents[buf.data]
        if self._proven(index, extent):
            return index
        base = dt.base(index.dtype)
        if extent.dtype != base:
            extent = E.cast(extent, base)
        return ir.CheckedIndex(index.dtype, index, extent, buf)

    def _proven(self, index: E.Expr, extent: E.Expr) -> bool:
        """Whether every lane of `index` lies in [0, extent) wherever it is evaluated."""
        base, lanes = dt.split_lanes(index.dtype)
        if lanes == 1:
            itv = self._interval(index)
        else:  # lane k of the vector, for a lane variable k in [0, lanes)
            lane = E.Var("lane", base)
            at_lane = _at_lane(index, lane)
            if at_lane is None:
                return False
            itv = self._scoped(self.ranges, lane, (E.const(0, base), E.const(lanes - 1, base)),
                               lambda: self._interval(at_lane))
        return itv is not None and self._at_least_zero(itv[0]) and self._below(itv[1], extent)

    def _at_least_zero(self, e: E.Expr) -> bool:
        # The analyzer bounds max(x, 0) from below only when it bounds x: split such terms.
        if self.ana.can_prove(E.binary("ge", e, E.const(0, e.dtype))):
            return True
        if isinstance(e, E.Binary) and e.op in ("min", "max", "add"):
            both = self._at_least_zero(e.a), self._at_least_zero(e.b)
            return any(both) if e.op == "max" else all(both)
        if isinstance(e, E.Binary) and e.op == "mul" and isinstance(e.b, E.Const):
            return e.b.value >= 0 and self._at_least_zero(e.a)
        return False

    def _below(self, e: E.Expr, bound: E.Expr) -> bool:
        if isinstance(e, E.Binary) and e.op in ("min", "max"):
            both = self._below(e.a, bound), self._below(e.b, bound)
            return any(both) if e.op == "min" else all(both)
        return self.ana.can_prove(E.binary("lt", e, bound))


def _at_lane(e: E.Expr, lane: E.Var):
    """Lane `lane` of vector index `e` as a scalar expression, or None when `e` is not made
    of Ramps, Broadcasts and integer arithmetic."""
    if isinstance(e, E.Ramp):
        return E.binary("add", e.base, E.binary("mul", e.stride, lane))
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.Binary) and e.op in ("add", "sub", "mul"):
        a, b = _at_lane(e.a, lane), _at_lane(e.b, lane)
        return None if a is None or b is None else E.binary(e.op, a, b)
    return None


def _reads_memory(e: E.Expr) -> bool:
    found = []

    def visit(node):
        if isinstance(node, ir.Load) or (isinstance(node, E.Call) and node.extern):
            found.append(node)
    E.pre_order(e, visit)
    return bool(found)


# a OP b -> (whether b bounds a from below, the offset added to that bound)
_BOUNDS = {"lt": (False, -1), "le": (False, 0), "gt": (True, 1), "ge": (True, 0)}


def _rebuild(s: ir.Stmt, ex: tuple, st: tuple) -> ir.Stmt:
    """`s` itself when no child changed (unchanged subtrees keep their identity)."""
    old_ex, old_st = stmt_children(s)
    if all(a is b for a, b in zip(old_ex, ex)) and all(a is b for a, b in zip(old_st, st)):
        return s
    return rebuild_stmt(s, ex, st)
