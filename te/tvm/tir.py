"""tvm.tir: the scalar expression helpers TVM's TE code calls, over te.compute.

Takes expressions and Python values; gives te expressions (const, Select, indexmod,
bitwise_and/or/xor/not, shift_left/right, call_pure_extern, call_intrin, call_packed, math
intrinsics), decl_buffer and ir_builder.
Imports te.compute and te.lower.
"""
from __future__ import annotations

import enum

from .. import dtype as dt
from ..compute import expr as E
from ..compute.api import (abs, acos, acosh, all, any, asin, asinh, atan, atanh, bitwise_and,
                           bitwise_not, bitwise_or, bitwise_xor, ceil, cos, cosh, erf, exp, exp2,
                           floor, floordiv, floormod, fmod, if_then_else, indexdiv, indexmod, log,
                           log2, log10, max_value, min_value, power, round, rsqrt, shift_left,
                           shift_right, sigmoid, sin, sinh, sqrt, tan, tanh, trunc, truncdiv,
                           truncmod)
from ..compute.expr import Call, Cast, Const, Expr, Var
from ..errors import ComputeError
from ..lower import ir_builder
from ..lower.extern_api import call_packed, decl_buffer

# TVM spells a literal of a known dtype IntImm / FloatImm; ours is one class
IntImm = FloatImm = Const
PrimExpr = Expr


def const(value, dtype: str | None = None) -> Const:
    """A literal: `dtype` or, when None, int32 for ints and float32 for floats (TVM's)."""
    return E.const(value, dtype)


def Select(condition, true_value, false_value) -> Expr:  # noqa: N802 (TVM's node name)
    """condition ? true_value : false_value."""
    return E.select(condition, true_value, false_value)


def call_pure_extern(dtype: str, func_name: str, *args) -> Expr:
    """A call of the external function `func_name` (libm's expf, CUDA's __expf) returning
    `dtype`; the generated code must be able to resolve it."""
    return E.call_extern(dtype, func_name, *args)


call_extern = call_pure_extern


def call_intrin(dtype: str, func_name: str, *args) -> Expr:
    """TVM's intrinsic call, "tir.exp" or a name registered with tvm.ir's
    register_intrin_lowering: te's intrinsic of that name (the "tir." prefix optional)."""
    name = func_name[4:] if func_name.startswith("tir.") else func_name
    operands = tuple(E.as_expr(a) for a in args)
    dtype = dt.check_dtype(dtype, "call_intrin dtype")
    if not name.isidentifier():
        raise ComputeError(f"call_intrin: func_name must be 'tir.NAME', got {func_name!r}")
    return Call(dtype, name, operands)


class CallEffectKind(enum.IntEnum):
    """TVM's side-effect classes of a call (register_op_attr's "TCallEffectKind")."""
    ExprAnnotation = 0
    Pure = 1
    ReadState = 2
    UpdateState = 3
    Opaque = UpdateState


__all__ = ["Call", "CallEffectKind", "Cast", "Const", "Expr", "FloatImm", "IntImm", "PrimExpr",
           "Select", "Var", "abs", "acos", "acosh", "all", "any", "asin", "asinh", "atan",
           "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "call_extern",
           "call_intrin", "call_packed", "call_pure_extern", "ceil", "const", "cos", "cosh",
           "decl_buffer", "erf", "exp", "exp2", "floor", "floordiv", "floormod", "fmod",
           "if_then_else", "indexdiv", "indexmod", "ir_builder", "log", "log2", "log10",
           "max_value", "min_value", "power", "round", "rsqrt", "shift_left", "shift_right",
           "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "truncdiv", "truncmod"]
