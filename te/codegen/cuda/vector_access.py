"""Vectorized loops of CUDA code as vector loads and stores (float2, float4, int4, ...).

A loop marked vectorize, from 0 over 2 or 4 iterations, whose body is one Store (or one
guarded by a tail check: the vector form runs where every lane passes it) at
`base + v` (v the loop variable) to a global or shared buffer, where every load that
depends on v reads a global or shared buffer at `base' + v`, and every base is a multiple
of the lane count, becomes one vector load per such access, the arithmetic lane by lane,
and one vector store (`ld.global.v4.f32` / `st.global.v4.f32` in the PTX) instead of a
scalar access per lane. The multiple makes the address aligned: CUDA allocations are, and
the code generator aligns the shared arrays these loops touch. A load that only a
condition's branch makes (a padded input's, under if_then_else) keeps the loop scalar: the
vector load would read outside the buffer where the condition is false. Anything else
stays a scalar loop. Imports te.compute.expr, te.lower (ir, arith).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...compute import expr as E
from ...lower import ir
from ...lower.arith import Analyzer, key
from ...lower.passes.loop_partition import conjuncts

VECTOR_TYPES = {("float32", 2): "float2", ("float32", 4): "float4", ("int32", 2): "int2",
                ("int32", 4): "int4", ("float64", 2): "double2",
                ("float16", 2): "half2"}
LANES = "xyzw"
_SCOPES = ("global", "shared")


@dataclass(frozen=True)
class VectorLoop:
    lanes: int
    store: ir.Store
    store_base: E.Expr
    loads: tuple        # ((Load, its base), ...): the distinct loads that depend on the var
    lane_values: tuple  # the stored value of each lane, each load above a placeholder Var
    placeholders: tuple  # per load, per lane: the Var standing for that lane of it
    # where the loop's body is guarded: the guard for every lane (the vector form runs
    # where it holds, the scalar loop elsewhere); None where it is not
    guard: E.Expr | None = None


def vector_loop(loop: ir.For) -> VectorLoop | None:
    """The vector form of `loop`, or None where it must stay a scalar loop."""
    if loop.kind != ir.VECTORIZED or not isinstance(loop.extent, E.Const) \
            or not (isinstance(loop.min, E.Const) and loop.min.value == 0):
        return None
    lanes, store, var = int(loop.extent.value), loop.body, loop.loop_var
    ana = Analyzer()
    guard = None
    if isinstance(store, ir.IfThenElse) and store.else_case is None:
        # a tail check: the vector form runs where it holds for every lane
        guard, store = _every_lane(store.cond, var, lanes, ana), store.then_case
    if not isinstance(store, ir.Store) or (store.buffer.dtype, lanes) not in VECTOR_TYPES:
        return None
    store_base = _aligned_base(store.buffer, store.index, var, lanes, ana)
    if store_base is None:
        return None
    loads: dict = {}

    def collect(node):
        if isinstance(node, ir.Load) and var in E.free_vars(node.index):
            loads.setdefault((id(node.buffer.data), key(node.index)), node)
    E.pre_order(store.value, collect)
    if _only_under_a_condition(store.value, var):
        return None
    bases = []
    for load in loads.values():
        base = _aligned_base(load.buffer, load.index, var, lanes, ana)
        if base is None or load.buffer.dtype != store.buffer.dtype:
            return None
        if load.buffer.data is store.buffer.data and key(load.index) != key(store.index):
            return None   # lanes would read what other lanes of the same loop write
        bases.append(base)
    placeholders = tuple(tuple(E.Var(f"lane{k}_{lane}", store.buffer.dtype)
                               for lane in range(lanes)) for k in range(len(loads)))
    index = {k: n for n, k in enumerate(loads)}
    lane_values = []
    for lane in range(lanes):
        def to_lane(node, lane=lane):
            if isinstance(node, ir.Load):
                n = index.get((id(node.buffer.data), key(node.index)))
                if n is not None:
                    return placeholders[n][lane]
            return None
        value = E.transform(store.value, to_lane)   # var elsewhere: the lane's number
        lane_values.append(E.substitute(value, {var: E.const(lane, var.dtype)}))
    return VectorLoop(lanes, store, store_base, tuple(zip(loads.values(), bases)),
                      tuple(lane_values), placeholders, guard)


def _only_under_a_condition(value: E.Expr, var: E.Var) -> bool:
    """Whether a load of `value` that depends on `var` is made only in a branch of a Select
    (or the right side of a logical and / or), not also unconditionally: C evaluates such a
    load only where the condition lets it, a vector load always."""
    always, sometimes = set(), set()
    todo = [(value, False)]
    while todo:
        node, conditional = todo.pop()
        if isinstance(node, ir.Load) and var in E.free_vars(node.index):
            (sometimes if conditional else always).add((id(node.buffer.data), key(node.index)))
        if isinstance(node, E.Select):
            todo += [(node.cond, conditional), (node.true_value, True),
                     (node.false_value, True)]
        elif isinstance(node, E.Binary) and node.op in ("and", "or"):
            todo += [(node.a, conditional), (node.b, True)]
        else:
            todo += [(kid, conditional) for kid in E.children(node)]
    return bool(sometimes - always)


def _every_lane(cond: E.Expr, var: E.Var, lanes: int, ana: Analyzer) -> E.Expr:
    """`cond` for var = 0, 1, ... lanes - 1 at once. A conjunct `a*var + rest < b` holds for
    every lane where it holds for the last (a >= 0) or the first (a <= 0); one that does not
    depend on var is written once."""
    terms: dict = {}
    for c in conjuncts(cond):
        if var not in E.free_vars(c):
            picks = [0]
        else:
            coeff = None
            if isinstance(c, E.Binary) and c.op in ("lt", "le") and \
                    E.dt.is_integral(c.a.dtype):
                coeff = sum(k for atom, k in ana.linear(c.a - c.b).terms.values()
                            if atom is var)
                others = [atom for atom, _ in ana.linear(c.a - c.b).terms.values()
                          if atom is not var]
                if any(var in E.free_vars(atom) for atom in others):
                    coeff = None
            picks = list(range(lanes)) if coeff is None else [lanes - 1 if coeff >= 0 else 0]
        for lane in picks:
            term = ana.simplify(E.substitute(c, {var: E.const(lane, var.dtype)}))
            terms.setdefault(key(term), term)
    out = None
    for term in terms.values():
        out = term if out is None else E.logical("and", out, term)
    return out if out is not None else E.const(True, "bool")


def _aligned_base(buffer: ir.Buffer, index: E.Expr, var: E.Var, lanes: int,
                  ana: Analyzer) -> E.Expr | None:
    """`base` where `index` is `base + var` and base a multiple of `lanes`, else None."""
    if buffer.scope not in _SCOPES:
        return None
    lin = ana.linear(index)
    coeffs = [(atom, c) for atom, c in lin.terms.values()]
    if sum(1 for atom, c in coeffs if atom is var and c == 1) != 1:
        return None
    rest = [(atom, c) for atom, c in coeffs if atom is not var]
    if any(var in E.free_vars(atom) or c % lanes for atom, c in rest) or lin.const % lanes:
        return None
    return ana.simplify(E.substitute(index, {var: E.const(0, var.dtype)}))
