"""Elementwise (one input) and broadcasting (two inputs) ops: one table row each.

UNARY maps an op to its scalar function of a te expression (and the op's attributes);
BINARY maps an op to a scalar function of two. Both families share one compute each
(te.compute.ops.unary / broadcast_binary: numpy broadcasting). Imports te's public API,
te.compute.ops and graph.ops.base.
"""
from __future__ import annotations

import math

import te
from te.compute import ops as topi

from .base import OpDef, Pattern


def _zero(e):
    return te.const(0, e.dtype)


def _one(e):
    return te.const(1, e.dtype)


def _clip(e, min=None, max=None):  # noqa: A002  (ONNX's attribute names)
    if min is not None:
        e = te.max(e, te.const(min, e.dtype))
    if max is not None:
        e = te.min(e, te.const(max, e.dtype))
    return e


def _gelu(e, approximate="none"):
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (e + 0.044715 * e * e * e)
        return 0.5 * e * (1.0 + te.tanh(inner))
    return 0.5 * e * (1.0 + te.erf(e * (1.0 / math.sqrt(2.0))))


# te intrinsics that only libm computes (scalar calls in the kernel); ONNX's
# converters take float32 and float64 to them
LIBM_UNARY = ("acos", "asin", "atan", "acosh", "asinh", "atanh", "cosh", "sinh", "tan")


def _shift(a, b, left: bool):
    """a << b or a >> b (arithmetic for signed a) in a's dtype, te's shifts: a shift by the
    width or more, or by a negative amount, moves every bit out: 0, or the sign (-1 or 0)
    for a signed right shift (numpy's answers, and ONNX BitShift's). An amount of another
    dtype is taken to a's where that keeps its value, else to the width (out of range in
    both)."""
    if b.dtype != a.dtype:
        bits = te.const(int("".join(c for c in a.dtype if c.isdigit())), a.dtype)
        in_range = te.logical_and(b >= 0, b < bits.value)
        b = te.if_then_else(in_range, b.astype(a.dtype), bits)
    return te.shift_left(a, b) if left else te.shift_right(a, b)


def _is_inf(e, detect_negative=1, detect_positive=1):
    inf = te.const(float("inf"), e.dtype)
    pos = e == inf if detect_positive else te.const(False, "bool")
    neg = e == _zero(e) - inf if detect_negative else te.const(False, "bool")
    return te.logical_or(pos, neg)


def _shrink(e, bias=0.0, lambd=0.5):
    return te.if_then_else(e < te.const(-lambd, e.dtype), e + te.const(bias, e.dtype),
                           te.if_then_else(e > te.const(lambd, e.dtype),
                                           e - te.const(bias, e.dtype), _zero(e)))


def _sign(e):
    return te.if_then_else(e > _zero(e), _one(e),
                           te.if_then_else(e < _zero(e), te.const(-1, e.dtype), _zero(e)))


# op -> scalar function (expression, **attributes) -> expression
UNARY = {
    "relu": lambda e: te.max(e, _zero(e)),
    "sigmoid": te.sigmoid,
    "tanh": te.tanh,
    "exp": te.exp,
    "log": te.log,
    "sqrt": te.sqrt,
    "erf": te.erf,
    "floor": te.floor,
    "ceil": te.ceil,
    "abs": te.abs,
    "negative": lambda e: _zero(e) - e,
    "reciprocal": lambda e: _one(e) / e,
    "sign": _sign,
    "softplus": lambda e: te.log(te.exp(e) + 1.0),
    "softsign": lambda e: e / (te.abs(e) + 1.0),
    "elu": lambda e, alpha=1.0: te.if_then_else(e < _zero(e), alpha * (te.exp(e) - 1.0), e),
    "leaky_relu": lambda e, alpha=0.01: te.if_then_else(e < _zero(e), alpha * e, e),
    "selu": lambda e, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875: gamma
    * te.if_then_else(e <= _zero(e), alpha * (te.exp(e) - 1.0), e),
    "hard_sigmoid": lambda e, alpha=0.2, beta=0.5: _clip(alpha * e + beta, 0.0, 1.0),
    "hard_swish": lambda e: e * _clip(e * (1.0 / 6.0) + 0.5, 0.0, 1.0),
    "gelu": _gelu,
    "clip": _clip,
    "cast": lambda e, dtype: e.astype(dtype),
    "identity": lambda e: e,
    "logical_not": te.logical_not,
    "bitwise_not": te.bitwise_not,  # integers only (te refuses floats and bools)
    "round": te.round,  # halves to even, as ONNX Round
    "sin": te.sin,
    "cos": te.cos,
    **{name: getattr(te, name) for name in LIBM_UNARY},
    "is_nan": lambda e: e != e,
    "is_inf": _is_inf,
    "celu": lambda e, alpha=1.0: te.max(e, _zero(e)) + te.min(
        _zero(e), alpha * (te.exp(e * (1.0 / alpha)) - 1.0)),
    "thresholded_relu": lambda e, alpha=1.0: te.if_then_else(
        e > te.const(alpha, e.dtype), e, _zero(e)),
    "shrink": _shrink,
    "mish": lambda e: e * te.tanh(te.log(te.exp(e) + 1.0)),
    "swish": lambda e, alpha=1.0: e * te.sigmoid(alpha * e),
}

# op -> scalar function of (lhs, rhs); comparisons and logic give bool
BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "trunc_divide": te.truncdiv,  # integer division rounding toward zero (C, ONNX Div)
    "floor_mod": te.floormod,     # remainder with the divisor's sign (Python %), exact
    "trunc_mod": te.truncmod,     # integer remainder with the dividend's sign (C %)
    "fmod": te.fmod,              # float remainder with the dividend's sign (C fmod), exact
    "power": te.power,
    "maximum": lambda a, b: te.max(a, b),
    "minimum": lambda a, b: te.min(a, b),
    "equal": lambda a, b: a == b,
    "less": lambda a, b: a < b,
    "greater": lambda a, b: a > b,
    "less_equal": lambda a, b: a <= b,
    "left_shift": lambda a, b: _shift(a, b, left=True),
    "right_shift": lambda a, b: _shift(a, b, left=False),
    "greater_equal": lambda a, b: a >= b,
    "logical_and": te.logical_and,
    "logical_or": te.logical_or,
    "logical_xor": lambda a, b: a != b,
    "bitwise_and": te.bitwise_and,  # integers only (te refuses floats and bools)
    "bitwise_or": te.bitwise_or,
    "bitwise_xor": te.bitwise_xor,
    "prelu": lambda a, b: te.if_then_else(a < _zero(a), a * b, a),
}


def _unary_def(name: str, fn) -> OpDef:
    def compute(ins, **attrs):
        return topi.unary(lambda e: fn(e, **attrs), ins[0], name=name)
    return OpDef(name, Pattern.ELEMWISE, compute, (1, 1),
                 doc=f"elementwise {name}")


def _binary_def(name: str, fn) -> OpDef:
    def compute(ins):
        return topi.broadcast_binary(fn, ins[0], ins[1], name=name)
    return OpDef(name, Pattern.BROADCAST, compute, (2, 2),
                 doc=f"{name} with numpy broadcasting")


OPS = {**{n: _unary_def(n, f) for n, f in UNARY.items()},
       **{n: _binary_def(n, f) for n, f in BINARY.items()}}
