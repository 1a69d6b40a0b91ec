"""Analyzer(wraps=True), the simplify pass's mode, preserves values of int32 arithmetic that
wraps around (numpy's semantics for data), checked by evaluation near the int32 limits.

The expressions of test_lower_simplify_property are evaluated with every node wrapped to
int32, before and after simplify(), on values anywhere in int32 (most near the limits) and
inside bound ranges that may reach the limits; pinned cases check that rules still fire
where the ranges prove no wrap around.
"""
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from test_lower_simplify_property import _OPS, EXPRS, VARS, X, Y, show

from te.compute import expr as E
from te.compute.expr import Binary, Const, Var
from te.lower.arith import Analyzer

LO, HI = -2**31, 2**31 - 1


def wrap32(v: int) -> int:
    return (v - LO) % 2**32 + LO


def evaluate_wrapping(e, env: dict) -> int:
    """The value the generated code computes: each int32 node wraps around."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    assert isinstance(e, Binary), f"unexpected node {type(e).__name__}"
    a, b = evaluate_wrapping(e.a, env), evaluate_wrapping(e.b, env)
    if e.op in ("and", "or"):
        return int(bool(a and b) if e.op == "and" else bool(a or b))
    out = _OPS[e.op](a, b)
    return int(out) if isinstance(out, bool) else wrap32(out)


NEAR = st.one_of(st.integers(LO, LO + 40), st.integers(HI - 40, HI), st.integers(LO, HI),
                 st.integers(-40, 40))


@settings(max_examples=400, deadline=None)
@given(EXPRS, st.lists(st.tuples(NEAR, NEAR, NEAR), min_size=1, max_size=6))
def test_simplify_preserves_wrapped_values(expr, points):
    simple = Analyzer(wraps=True).simplify(expr)
    note(f"{show(expr)}  ->  {show(simple)}")
    for x, y, z in points:
        env = dict(zip(VARS, (x, y, z)))
        assert evaluate_wrapping(simple, env) == evaluate_wrapping(expr, env), env


@st.composite
def _ranges_near_limits(draw):
    out = {}
    for v in VARS:
        lo = draw(st.one_of(st.integers(HI - 30, HI), st.integers(LO, LO + 30),
                            st.integers(-20, 20)))
        out[v] = (lo, min(HI, lo + draw(st.integers(0, 12))))
    return out


def _around(op: str, expr):
    """`expr op 3` (division) or `expr op (x + 1)`: rules that need exact operands."""
    return E.binary(op, expr, 3 if op in ("floordiv", "floormod") else X + 1)


@settings(max_examples=300, deadline=None)
@given(EXPRS, st.sampled_from(["lt", "ge", "eq", "min", "max", "floordiv", "floormod"]),
       _ranges_near_limits(), st.data())
def test_range_rules_preserve_wrapped_values(expr, op, ranges, data):
    ana = _bound(ranges)
    whole = _around(op, expr)
    simple = ana.simplify(whole)
    note(f"{show(whole)}  ->  {show(simple)} with {ranges}")
    for _ in range(6):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in ranges.items()}
        assert evaluate_wrapping(simple, env) == evaluate_wrapping(whole, env), env


def _bound(ranges: dict) -> Analyzer:
    ana = Analyzer(wraps=True)
    for v, (lo, hi) in ranges.items():
        ana.bind(v, lo, hi)
    return ana


@pytest.mark.parametrize("build,ranges,expected", [
    (lambda: (X * 4 + Y) // 4, {X: (0, 1000), Y: (0, 3)}, "x"),
    (lambda: (X * 2) // 2, {X: (-2**29, 2**29)}, "x"),
    (lambda: (X * 2) // 2, {X: (0, 2**30)}, "floordiv(mul(x, 2), 2)"),
    (lambda: (X * 2) // 2, {}, "floordiv(mul(x, 2), 2)"),
    (lambda: X + 1 > X, {X: (0, 99)}, "True"),
    (lambda: X + 1 > X, {}, "gt(add(x, 1), x)"),
    (lambda: X * 65536 * 65536 + Y, {}, "y"),
])
def test_rules_fire_only_where_no_wrap_is_proven(build, ranges, expected):
    assert show(_bound(ranges).simplify(build())) == expected


def _wrap_to(value: int, dtype: str) -> int:
    bits, signed = int(dtype.lstrip("uint")), dtype.startswith("int")
    value %= 2**bits
    return value - 2**bits if signed and value >= 2**(bits - 1) else value


def _evaluate_in(e, env: dict, dtype: str) -> int:
    if isinstance(e, Const):
        assert _wrap_to(int(e.value), dtype) == int(e.value), f"{e.value} is no {dtype}"
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    return _wrap_to(_OPS[e.op](_evaluate_in(e.a, env, dtype), _evaluate_in(e.b, env, dtype)),
                    dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint32", "int64"])
def test_wrapped_coefficients_are_constants_of_the_dtype(dtype):
    x, y = Var("x", dtype), Var("y", dtype)
    bits = int(dtype.lstrip("uint"))
    lowest = -2**(bits - 1) if dtype.startswith("int") else 2**(bits - 1)

    def c(value: int):
        return E.const(_wrap_to(value, dtype), dtype)
    cases = [c(0) - x, x * c(lowest), c(0) - x - c(1), x * c(3) + x * c(2**bits - 3) + y,
             y + c(lowest) - x * c(2)]
    for e in cases:
        simple = Analyzer(wraps=True).simplify(e)
        for xv, yv in [(0, 1), (1, -1), (lowest, 3), (-5, lowest), (7, 2**bits - 1)]:
            env = {x: _wrap_to(xv, dtype), y: _wrap_to(yv, dtype)}
            assert _evaluate_in(simple, env, dtype) == _evaluate_in(e, env, dtype), show(e)
