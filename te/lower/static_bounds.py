"""Reads that a compute definition makes outside a tensor of static shape, found at lowering.

Takes the bodies of the computed stages (inlined producers substituted, over each stage's
own axes) and raises a LoweringError for a read that provably leaves its tensor: one
iteration of the stage's domain, a witness, reads an index outside the dimension while
every if_then_else condition and `where` conjunct that guards the read holds there. The
witness is sought where an affine index reaches its extremes: the corners of the axes'
box, narrowed by the guards that bound one axis by a constant (te.all(i >= 5, ...)). A read
with no such witness (an index or guard that reads memory, symbolic sizes, or guards
this cannot narrow by) is left to the code. Imports te.compute, te.errors, arith, printer.
"""
from __future__ import annotations

import itertools

from ..compute import expr as E
from ..compute.expr import Const, Reduce, Select, TensorLoad, Var
from ..errors import LoweringError
from .arith import Analyzer
from .printer import print_expr

_MAX_CORNERS = 1024  # 2**10: the axes one index and its guards can mention


def check_static_reads(bodies: dict, narrowed: dict | None = None) -> None:
    """Raise a LoweringError for the first read of bodies (stage -> exprs) that leaves its
    tensor at some iteration of the stage's domain. narrowed: axis IterVar -> (lo, hi),
    the values it takes where that is less than its domain (a scan body's time axis)."""
    for st, body in bodies.items():
        box = {}
        for iv in tuple(st.op.axis) + tuple(st.op.reduce_axis):
            if narrowed and iv in narrowed:
                box[iv.var] = narrowed[iv]
            elif isinstance(iv.dom.min, Const) and isinstance(iv.dom.extent, Const):
                lo = int(iv.dom.min.value)
                box[iv.var] = (lo, lo + int(iv.dom.extent.value) - 1)
        reads: list = []
        for b in body:
            _guarded_reads(b, (), reads)
        for load, guards in reads:
            for k, (idx, dim) in enumerate(zip(load.indices, load.tensor.shape)):
                if isinstance(dim, Const):
                    _check_dim(st, load, k, idx, int(dim.value), guards, box)


def _guarded_reads(e: E.Expr, guards: tuple, out: list) -> None:
    """(load, conditions that hold wherever it is evaluated) for every load in e; with a
    stack of its own, as expressions nest deeper than Python's recursion limit, and each
    shared subtree visited once per set of guards."""
    todo = [(e, guards)]
    seen: dict = {}  # the marks' conditions kept alive, so that their ids stay theirs
    while todo:
        node, conds = todo.pop()
        mark = (id(node),) + tuple(id(c) for c in conds)
        if mark in seen:
            continue
        seen[mark] = (node, conds)
        if isinstance(node, Select):
            todo += [(node.cond, conds), (node.true_value, conds + (node.cond,)),
                     (node.false_value, conds + (E.logical_not(node.cond),))]
        elif isinstance(node, Reduce):  # the update tests each `where` conjunct in turn
            where = [c for c in _conjuncts(node.condition) if not isinstance(c, Const)]
            todo += [(c, conds + tuple(where[:k])) for k, c in enumerate(where)]
            todo += [(x, conds + tuple(where)) for x in node.source]
            todo += [(x, conds) for x in node.init]
        else:
            if isinstance(node, TensorLoad):
                out.append((node, conds))
            todo += [(k, conds) for k in E.children(node)]


def _check_dim(st, load, k: int, idx: E.Expr, extent: int, guards: tuple, box: dict) -> None:
    ana = Analyzer(box)
    lo, hi = ana.const_bound(idx)
    if lo is not None and hi is not None and 0 <= lo and hi < extent:
        return
    used = {v for e in (idx,) + guards for v in E.free_vars(e)}
    if not used <= set(box):
        return  # a symbolic size or a variable this stage does not bind
    ranges = _narrowed({v: box[v] for v in used}, guards)
    if ranges is None:
        return
    witness = _witness(idx, extent, guards, ranges)
    if witness is None:
        return
    point, value = witness
    span = Analyzer(ranges).const_bound(idx)
    at = ", ".join(f"{v.name} = {x}" for v, x in point.items())
    where = " (where its if_then_else / where conditions hold)" if guards else ""
    raise LoweringError(
        f"te.compute '{st.name}' reads tensor '{load.tensor.name}' out of bounds: index {k} "
        f"({print_expr(idx)}) reaches {span[0]}..{span[1]} over the loops{where}, but "
        f"dimension {k} of '{load.tensor.name}' has extent {extent} (shape "
        f"{_shape_text(load.tensor.shape)}); at {at} it is {value}")


def _witness(idx: E.Expr, extent: int, guards: tuple, ranges: dict):
    """(point, index) at a corner of `ranges` where every guard holds and idx is outside
    [0, extent); None if no corner is one."""
    axes = list(ranges)
    if 2 ** len(axes) > _MAX_CORNERS:
        return None
    for corner in itertools.product(*[sorted(set(ranges[v])) for v in axes]):
        point = dict(zip(axes, corner))
        ana = Analyzer({v: (x, x) for v, x in point.items()})
        lo, hi = ana.const_bound(idx)
        if lo is None or lo != hi or 0 <= lo < extent:
            continue
        if all(ana.can_prove(g) for g in guards):
            return point, lo
    return None


def _narrowed(ranges: dict, guards: tuple):
    """ranges with each guard of the form `a*v + b <cmp> 0` (one axis, after moving
    terms) applied to v; None if they leave some axis empty."""
    out = dict(ranges)
    for g in guards:
        for c in _conjuncts(g):
            bound = _one_axis_bound(c, out)
            if bound is None:
                continue
            v, lo, hi = bound
            old = out[v]
            out[v] = (max(old[0], lo), min(old[1], hi))
            if out[v][0] > out[v][1]:
                return None
    return out


def _one_axis_bound(cond: E.Expr, ranges: dict):
    """(v, lo, hi) that cond implies for the one axis it mentions, or None."""
    if isinstance(cond, E.Not) and isinstance(cond.a, E.Binary) and cond.a.op in _NEGATED:
        cond = E.Binary(cond.a.dtype, _NEGATED[cond.a.op], cond.a.a, cond.a.b)
    if not (isinstance(cond, E.Binary) and cond.op in ("lt", "le", "gt", "ge", "eq")):
        return None
    a, b = (cond.a, cond.b) if cond.op in ("lt", "le", "eq") else (cond.b, cond.a)
    if not _is_int(a):
        return None
    lin = Analyzer().linear(E.binary("sub", a, b))     # cond: lin < 0, lin <= 0 or == 0
    if len(lin.terms) != 1:
        return None
    (atom, c), = lin.terms.values()
    if not isinstance(atom, Var) or atom not in ranges:
        return None
    rhs = -lin.const - (1 if cond.op in ("lt", "gt") else 0)   # c * v <= rhs
    lo, hi = ranges[atom]
    if cond.op == "eq":
        return (atom, rhs // c, rhs // c) if rhs % c == 0 else (atom, 1, 0)
    if c > 0:
        return atom, lo, rhs // c
    return atom, -(-rhs // c), hi    # c * v <= rhs with c < 0: v >= ceil(rhs / c)


_NEGATED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}


def _is_int(e: E.Expr) -> bool:
    return e.dtype.startswith(("int", "uint")) and "x" not in e.dtype


def _conjuncts(cond: E.Expr) -> list:
    if isinstance(cond, E.Binary) and cond.op == "and":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _shape_text(shape: tuple) -> str:
    dims = [str(d.value) if isinstance(d, Const) else getattr(d, "name", "?") for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
