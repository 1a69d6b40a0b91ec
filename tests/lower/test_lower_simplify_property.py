"""The integer simplifier (te.lower.arith.Analyzer) preserves values, checked by evaluation.

Random expressions over a few int32 vars (+, -, *, floordiv and floormod by positive
constants, min, max) are evaluated on random ints before and after simplify(); with var
ranges bound (Analyzer.bind), only points inside the ranges are evaluated, and pinned
cases check that the range-aware rules actually fire. Imports te, hypothesis.
"""
import operator

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import te
from te.compute import expr as E
from te.compute.expr import Binary, Const, Var
from te.lower.arith import Analyzer

X, Y, Z = Var("x"), Var("y"), Var("z")
VARS = (X, Y, Z)

_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "floordiv": operator.floordiv, "floormod": operator.mod, "min": min, "max": max,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}


def evaluate(e, env: dict):
    """Python-integer value of an expression of Var, Const and Binary nodes."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Binary) and e.op in ("and", "or"):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return (a and b) if e.op == "and" else (a or b)
    if isinstance(e, Binary):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op in ("floordiv", "floormod"):
            assert b > 0, f"simplifier produced a non-positive divisor in {e}"
        return _OPS[e.op](a, b)
    raise AssertionError(f"unexpected node {type(e).__name__} in {e}")


def show(e) -> str:
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    return f"{e.op}({show(e.a)}, {show(e.b)})"


def _const(value: int):
    return E.const(value)


def _node(op: str, a, b):
    return E.binary(op, a, b)


def _binop(children):
    # Named functions, not lambdas: hypothesis re-parses lambda sources to describe them.
    general = st.builds(_node, st.sampled_from(["add", "sub", "mul", "min", "max"]),
                        children, children)
    divs = st.builds(_node, st.sampled_from(["floordiv", "floormod"]), children,
                     st.integers(1, 9).map(_const))
    scaled = st.builds(_node, st.just("mul"), children, st.integers(-6, 6).map(_const))
    return st.one_of(general, divs, scaled)


LEAVES = st.one_of(st.sampled_from(VARS), st.integers(-12, 12).map(_const))
EXPRS = st.recursive(LEAVES, _binop, max_leaves=10)
VALUES = st.integers(-40, 40)


@settings(max_examples=300, deadline=None)
@given(EXPRS, st.lists(st.tuples(VALUES, VALUES, VALUES), min_size=1, max_size=6))
def test_simplify_preserves_values(expr, points):
    simple = Analyzer().simplify(expr)
    note(f"{show(expr)}  ->  {show(simple)}")
    for x, y, z in points:
        env = {X: x, Y: y, Z: z}
        assert evaluate(simple, env) == evaluate(expr, env), (show(expr), show(simple), env)


@st.composite
def _ranges(draw):
    out = {}
    for v in VARS:
        lo = draw(st.integers(-20, 20))
        out[v] = (lo, lo + draw(st.integers(0, 12)))
    return out


@settings(max_examples=300, deadline=None)
@given(EXPRS, _ranges(), st.data())
def test_simplify_with_ranges_preserves_values_inside_ranges(expr, ranges, data):
    ana = Analyzer()
    for v, (lo, hi) in ranges.items():
        ana.bind(v, lo, hi)
    simple = ana.simplify(expr)
    note(f"{show(expr)}  ->  {show(simple)} with {ranges}")
    for _ in range(6):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in ranges.items()}
        assert evaluate(simple, env) == evaluate(expr, env), (show(expr), show(simple), env)


@settings(max_examples=200, deadline=None)
@given(EXPRS, EXPRS, st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]), _ranges(),
       st.data())
def test_comparisons_decided_only_when_true_everywhere(a, b, op, ranges, data):
    ana = Analyzer()
    for v, (lo, hi) in ranges.items():
        ana.bind(v, lo, hi)
    cond = E.binary(op, a, b)
    simple = ana.simplify(cond)
    note(f"{show(cond)}  ->  {show(simple)} with {ranges}")
    for _ in range(6):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in ranges.items()}
        assert evaluate(simple, env) == evaluate(cond, env)


def _with(ranges):
    ana = Analyzer()
    for v, (lo, hi) in ranges.items():
        ana.bind(v, lo, hi)
    return ana


@pytest.mark.parametrize("build,ranges,expected", [
    (lambda: (X * 4 + Y) // 4, {Y: (0, 3)}, "x"),
    (lambda: (X * 4 + Y) % 4, {Y: (0, 3)}, "y"),
    (lambda: (X * 8 + Y * 2 + 1) // 2, {}, "add(mul(x, 4), y)"),
    (lambda: (X * 2 + 5) // 2, {}, "add(x, 2)"),
    (lambda: te.min(X, X + 1), {}, "x"),
    (lambda: te.max(X - 3, X), {}, "x"),
    (lambda: te.min(X, 10), {X: (0, 9)}, "x"),
    (lambda: te.max(X, Y), {X: (0, 4), Y: (5, 9)}, "y"),
    (lambda: X + Y - X, {}, "y"),
    (lambda: X * 3 - X * 3 + 7, {}, "7"),
    (lambda: Y % 5, {Y: (10, 14)}, "sub(y, 10)"),
    (lambda: Y // 5, {Y: (10, 14)}, "2"),
    # a fused loop's (outer, inner) index pair addressing flat memory: (x // c) * c + x % c
    (lambda: (X * 32 + Y) // 56 * 56 + (X * 32 + Y) % 56, {}, "add(mul(x, 32), y)"),
    (lambda: ((X + Y) // 7 * 7 + (X + Y) % 7) * 3 + 1, {}, "add(add(mul(x, 3), mul(y, "
                                                          "3)), 1)"),
    (lambda: X // 7 * 6 + X % 7, {}, "add(mul(floordiv(x, 7), 6), floormod(x, 7))"),
    (lambda: X // 7 * 7 + X % 6, {}, "add(mul(floordiv(x, 7), 7), floormod(x, 6))"),
])
def test_rules_fire(build, ranges, expected):
    assert show(_with(ranges).simplify(build())) == expected


@pytest.mark.parametrize("build,ranges,verdict", [
    (lambda: X < 10, {X: (0, 9)}, True),
    (lambda: X < 9, {X: (0, 9)}, None),
    (lambda: X >= 0, {X: (0, 9)}, True),
    (lambda: X * 4 + Y < 32, {X: (0, 7), Y: (0, 3)}, True),
    (lambda: X * 4 + Y < 31, {X: (0, 7), Y: (0, 3)}, None),
    (lambda: X > Y, {X: (5, 9), Y: (0, 4)}, True),
    (lambda: X == Y, {X: (5, 9), Y: (0, 4)}, False),
])
def test_comparisons_decided_by_ranges(build, ranges, verdict):
    out = _with(ranges).simplify(build())
    if verdict is None:
        assert not isinstance(out, Const)
    else:
        assert isinstance(out, Const) and out.value is verdict
