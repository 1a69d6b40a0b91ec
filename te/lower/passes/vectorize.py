"""vectorize: loops marked vectorized become vector expressions (Ramp / Broadcast).

Takes a flattened Stmt, gives one where each vectorized loop of constant extent whose body
is a straight-line sequence of stores is replaced by that body over vector lanes. A body
the vector form cannot express (inner loops, branches on a lane-varying condition, a lane-
varying value stored to one address) stays a serial loop: correct, and LLVM may still
vectorize it. A select on a lane-varying condition whose sides read memory stays vector
code where masking their loads makes it safe (masked_loads_suffice: te/codegen/llvm loads
only the lanes each side is taken for; a padded copy's border reads). A guard
`v + c < k` on the whole body shortens the loop instead (a tail tile), and widths that
are multiples of 4 but not powers of two become power-of-two vectors. Imports
te.compute.expr, te.dtype, ir, visitor, loop_partition (conditions).
"""
from __future__ import annotations

import dataclasses

from ... import dtype as dt
from ...compute import expr as E
from ...compute.expr import Binary, Broadcast, Const, Ramp, Var
from .. import ir
from ..visitor import Mutator
from .loop_partition import conjuncts, guarded


# Selects on a lane-varying condition with masked loads (masked_loads_suffice); off: such a
# body stays a serial loop for LLVM (benchmarks compare the two)
MASKED_SELECTS = True


class _CannotVectorize(Exception):
    pass


def _lanes(e: E.Expr) -> int:
    return dt.lanes(e.dtype)


def _bcast(e: E.Expr, n: int) -> E.Expr:
    if _lanes(e) == n:
        return e
    return Broadcast(dt.with_lanes(e.dtype, n), e, n)


class _VecExpr(Mutator):
    """Rewrites an expression with `var` replaced by Ramp(min, 1, lanes)."""

    def __init__(self, var: Var, lanes: int, lo: E.Expr):
        self.var, self.n = var, lanes
        self.ramp = Ramp(dt.with_lanes(var.dtype, lanes), lo, E.const(1, var.dtype), lanes)
        self.memo: dict = {}  # id(node) -> (node, its vector form)

    def visit_expr(self, e: E.Expr) -> E.Expr:
        """Subtrees first, deepest first, so that each node's rule finds its operands in
        the memo: a user's expression nests deeper than Python recurses."""
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        for node in E.post_order(e, self._done):
            self.memo[id(node)] = (node, super().visit_expr(node))
        return self.memo[id(e)][1]

    def _done(self, e: E.Expr) -> bool:
        hit = self.memo.get(id(e))
        return hit is not None and hit[0] is e

    def visit_Var(self, v: Var) -> E.Expr:
        return self.ramp if v is self.var else v

    def visit_Binary(self, e: Binary) -> E.Expr:
        a, b = self.visit_expr(e.a), self.visit_expr(e.b)
        if a is e.a and b is e.b:
            return e
        n = max(_lanes(a), _lanes(b))
        if e.op in ("add", "sub", "mul") and n > 1:
            r = _ramp_arith(e.op, a, b)
            if r is not None:
                return r
        rtype = dt.with_lanes(e.dtype, n)
        return Binary(rtype, e.op, _bcast(a, n), _bcast(b, n))

    def visit_Select(self, e: E.Select) -> E.Expr:
        c, t, f = (self.visit_expr(x) for x in (e.cond, e.true_value, e.false_value))
        n = max(_lanes(c), _lanes(t), _lanes(f))
        if n == 1:
            return E.with_children(e, (c, t, f))
        if _lanes(c) > 1 and (_has_load(t) or _has_load(f) or _has_div(t) or _has_div(f)) \
                and not (MASKED_SELECTS and masked_loads_suffice(t)
                         and masked_loads_suffice(f)):
            raise _CannotVectorize("lazy select on a lane-varying condition")
        return E.Select(dt.with_lanes(e.dtype, n), _bcast(c, n), _bcast(t, n), _bcast(f, n))

    def generic_expr(self, e: E.Expr) -> E.Expr:
        kids = E.children(e)
        new = tuple(self.visit_expr(k) for k in kids)
        if all(a is b for a, b in zip(kids, new)):
            return e
        n = max(_lanes(k) for k in new)
        if isinstance(e, (Ramp, Broadcast)) or isinstance(e, E.Reduce):
            raise _CannotVectorize(type(e).__name__)
        if isinstance(e, ir.Load):
            return ir.Load(dt.with_lanes(e.dtype, n), e.buffer, new[0])
        new = tuple(_bcast(k, n) for k in new)
        out = E.with_children(e, new)
        return dataclasses.replace(out, dtype=dt.with_lanes(e.dtype, n))


def _ramp_arith(op: str, a: E.Expr, b: E.Expr):
    """Keep Ramp structure through + - * by scalars (so indices stay contiguous)."""
    if op == "mul":
        if isinstance(a, Ramp) and _lanes(b) == 1:
            return Ramp(a.dtype, a.base * b, a.stride * b, a.lanes)
        if isinstance(b, Ramp) and _lanes(a) == 1:
            return Ramp(b.dtype, b.base * a, b.stride * a, b.lanes)
        return None
    sign = 1 if op == "add" else -1
    if isinstance(a, Ramp) and _lanes(b) == 1:
        return Ramp(a.dtype, a.base + b if sign > 0 else a.base - b, a.stride, a.lanes)
    if isinstance(b, Ramp) and _lanes(a) == 1 and sign > 0:
        return Ramp(b.dtype, a + b.base, b.stride, b.lanes)
    if isinstance(a, Ramp) and isinstance(b, Ramp):
        return Ramp(a.dtype, E.binary(op, a.base, b.base), E.binary(op, a.stride, b.stride),
                    a.lanes)
    return None


def _has_kind(e: E.Expr, pred) -> bool:
    found = []
    E.pre_order(e, lambda x: found.append(x) if pred(x) else None)
    return bool(found)


def _has_load(e: E.Expr) -> bool:
    return _has_kind(e, lambda x: isinstance(x, ir.Load))


def masked_loads_suffice(e: E.Expr) -> bool:
    """Whether `e`, one side of a select on a lane-varying condition, is safe to compute for
    every lane once its loads read only the lanes that take that side: each load has a
    vector index reading no memory itself (a scalar load would be made whether or not any
    lane takes the side), no integer division or remainder by anything but a non-zero
    constant (it could trap), no call out."""
    unsafe = []

    def visit(x):
        if isinstance(x, ir.Load):
            if _lanes(x.index) == 1 or _has_load(x.index):
                unsafe.append(x)
        elif isinstance(x, (ir.PackedCall, ir.AccessPtr, ir.Prefetch)) or (
                isinstance(x, E.Call) and x.extern):
            unsafe.append(x)
        elif isinstance(x, Binary) and x.op in _INT_DIVISIONS and dt.is_integral(x.dtype):
            d = x.b.value if isinstance(x.b, Broadcast) else x.b
            if not (isinstance(d, Const) and d.value != 0):
                unsafe.append(x)
    E.pre_order(e, visit)
    return not unsafe


_INT_DIVISIONS = ("floordiv", "floormod", "truncdiv", "truncmod")


def _has_div(e: E.Expr) -> bool:
    return _has_kind(e, lambda x: isinstance(x, Binary) and x.op in _INT_DIVISIONS and
                     dt.is_integral(x.dtype))


def _vectorize_body(s: ir.Stmt, vec: _VecExpr) -> ir.Stmt:
    if isinstance(s, ir.SeqStmt):
        return ir.seq(*[_vectorize_body(x, vec) for x in s.stmts])
    if isinstance(s, ir.Store):
        index, value = vec.visit_expr(s.index), vec.visit_expr(s.value)
        n = max(_lanes(index), _lanes(value))
        if _lanes(index) == 1 and n > 1:
            raise _CannotVectorize("a lane-varying value stored to one address")
        return ir.Store(s.buffer, _bcast(index, n), _bcast(value, n))
    if isinstance(s, ir.IfThenElse):
        cond = vec.visit_expr(s.cond)
        if _lanes(cond) > 1:
            raise _CannotVectorize("branch on a lane-varying condition")
        return ir.IfThenElse(cond, _vectorize_body(s.then_case, vec),
                             None if s.else_case is None else _vectorize_body(s.else_case, vec))
    raise _CannotVectorize(type(s).__name__)


def _tighten(s: ir.For, body: ir.Stmt):
    """(loop, body) with a guard `v + c < k` on the whole body (c, k constants: the tail
    tile of a non-dividing split, once loop_partition and simplify made the outer index
    constant) turned into a shorter extent, so the tail is vector code too instead of a
    guarded serial loop per tile row (which LLVM then spends seconds vectorizing)."""
    if not (isinstance(body, ir.IfThenElse) and body.else_case is None
            and isinstance(s.min, Const) and isinstance(s.extent, Const)):
        return s, body
    terms = conjuncts(body.cond)
    end, kept = s.min.value + s.extent.value, []
    for c in terms:
        limit = _var_limit(c, s.loop_var)
        if limit is None:
            kept.append(c)
        else:
            end = min(end, max(limit, s.min.value))
    if len(kept) == len(terms):
        return s, body
    loop = dataclasses.replace(s, extent=E.const(end - s.min.value, s.extent.dtype))
    return loop, guarded(kept, body.then_case)


def _var_limit(cond: E.Expr, var: Var):
    """k - c for a condition `var + c < k` or `var < k` (integer constants), else None."""
    if not (isinstance(cond, Binary) and cond.op == "lt" and isinstance(cond.b, Const)):
        return None
    a, k = cond.a, cond.b.value
    if a is var:
        return int(k)
    if isinstance(a, Binary) and a.op == "add" and a.a is var and isinstance(a.b, Const):
        return int(k - a.b.value)
    return None


def _pow2_pieces(extent: int) -> list:
    """(offset, lanes) pieces of a vectorized extent. A multiple of 4 that is not a power
    of two (24, 48, 56) becomes power-of-two pieces (56 = 32 + 16 + 8, 12 = 8 + 4):
    LLVM legalizes an odd-sized vector like <56 x float> by widening, and a local buffer
    accessed with such vectors at offsets 56, 112, ... is not split into registers (a 3x3
    conv tile measured 961 stack accesses and 3x slower than the split form)."""
    if extent % 4 or extent & (extent - 1) == 0:
        return [(0, extent)]
    out, offset = [], 0
    while offset < extent:
        n = 1 << ((extent - offset).bit_length() - 1)
        out.append((offset, n))
        offset += n
    return out


class _Vectorize(Mutator):
    def visit_For(self, s: ir.For) -> ir.Stmt:
        body = self.visit_stmt(s.body)
        if s.kind == ir.VECTORIZED:
            s, body = _tighten(s, body)
            if isinstance(s.extent, Const) and s.extent.value > 1:
                try:
                    pieces = []
                    for offset, n in _pow2_pieces(int(s.extent.value)):
                        lo = s.min if offset == 0 else s.min + E.const(offset, s.min.dtype)
                        pieces.append(_vectorize_body(body, _VecExpr(s.loop_var, n, lo)))
                    return ir.keep_body_pragmas(s, ir.seq(*pieces))
                except _CannotVectorize:
                    pass
            return dataclasses.replace(s, kind=ir.SERIAL, body=body,
                                       pragmas=s.pragmas + (("vectorize_hint", 1),))
        return s if body is s.body else dataclasses.replace(s, body=body)

    def visit_expr(self, e):
        return e


def vectorize_loops(s: ir.Stmt) -> ir.Stmt:
    return _Vectorize().visit_stmt(s)
