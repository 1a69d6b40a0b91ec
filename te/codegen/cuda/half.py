"""float16 in CUDA C: `half` storage, its arithmetic and its conversions (cuda_fp16.h).

Takes the expressions of the code generator (codegen.py) whose dtype, or whose operands'
dtype, is float16; gives their C text. +, -, *, / and comparisons are CUDA's half
intrinsics (__hadd, __hlt, ...): one rounding to half per operation, as numpy's float16
arithmetic gives. Everything else (floordiv, math functions) runs in float and rounds to
half once, as numpy computes its float16 functions. Conversions: __half2float and
__float2half (round to nearest even); float64 through __double2half (one rounding).
Imports te.compute.expr and te.dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ... import dtype as dt
from ...compute import expr as E

INCLUDE = "#include <cuda_fp16.h>"
HALF = "float16"
_ARITH = {"add": "__hadd", "sub": "__hsub", "mul": "__hmul", "div": "__hdiv",
          "min": "__hmin", "max": "__hmax"}
# C's comparisons on float: ordered, except != (true where an operand is NaN): __hneu.
_COMPARE = {"lt": "__hlt", "le": "__hle", "gt": "__hgt", "ge": "__hge", "eq": "__heq",
            "ne": "__hneu"}
# the float32 C of the operations computed in float: a and b are float text
_IN_FLOAT = {"floordiv": "floorf({a} / {b})", "floormod": "({a} - floorf({a} / {b}) * {b})",
             "truncdiv": "truncf({a} / {b})", "truncmod": "fmodf({a}, {b})"}


def uses_half(e: E.Expr) -> bool:
    """Whether `e` is float16 or compares float16 operands: its text comes from here."""
    if e.dtype == HALF:
        return True
    return isinstance(e, E.Binary) and e.a.dtype == HALF


def to_float(text: str) -> str:
    return f"__half2float({text})"


def binary(e: E.Binary, a: str, b: str) -> str:
    if e.op in _COMPARE:
        return f"{_COMPARE[e.op]}({a}, {b})"
    if e.op in _ARITH:
        return f"{_ARITH[e.op]}({a}, {b})"
    if e.op in _IN_FLOAT:
        return f"__float2half({_IN_FLOAT[e.op].format(a=to_float(a), b=to_float(b))})"
    raise ValueError(f"operator {e.op!r}")


def cast(e: E.Cast, value: str, c_type) -> str:
    """`value` (the text of e.value) converted to e.dtype, one side of it float16."""
    src, dst = e.value.dtype, e.dtype
    if dst == HALF:
        if src == HALF:
            return value
        if src == "float64":
            return f"__double2half({value})"
        if src == "float32":
            return f"__float2half({value})"
        # integers: exact in float up to 2^24, and any beyond 65504 is inf in half anyway
        wide = "double" if dt.bits(src) == 64 else "float"
        return f"__{wide}2half(({wide}){value})"
    as_float = to_float(value)
    if dst == "float32":
        return as_float
    if dt.is_bool(dst):
        return f"({as_float} != 0.0f)"
    return f"(({c_type(dst)}){as_float})"   # float64 exactly; integers truncated as C does


def call(name: str, args: list, float_call) -> str:
    """A math function of float16 arguments: `float_call(name, float_args)` gives the
    float32 C of it, rounded to half here."""
    return f"__float2half({float_call(name, [to_float(x) for x in args])})"


def literal(value: float) -> str:
    """The half constant nearest `value` (numpy's rounding), written as the float32 literal
    of that exact value converted by __float2half."""
    with np.errstate(over="ignore"):   # beyond 65504: inf, as numpy converts it
        v = float(np.float16(value))
    if math.isnan(v):
        return "__float2half(NAN)"
    if math.isinf(v):
        return f"__float2half({'-' if v < 0 else ''}INFINITY)"
    return f"__float2half({v!r}f)"
