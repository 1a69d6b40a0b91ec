"""tvm.te: TVM's tensor-expression module, our te API under its names.

Takes what `from tvm import te` code calls; gives te's own functions and classes (no
wrappers): the compute API, scan, extern, tensor intrinsics, schedules and lower. Imports
te.compute, te.schedule, te.lower and te.build.
"""
from __future__ import annotations

from ..build import lower
from ..compute.api import (abs, acos, acosh, all, any, asin, asinh, atan, atanh, bitwise_and,
                           bitwise_not, bitwise_or, bitwise_xor, ceil, comm_reducer, compute,
                           const, cos, cosh, erf, exp, exp2, floor, floordiv, floormod,
                           if_then_else, indexdiv, indexmod, log, log2, log10, max, max_value,
                           min, min_value, placeholder, power, reduce_axis, round, rsqrt,
                           sigmoid, sin, sinh, size_var, sqrt, sum, tan, tanh, thread_axis, trunc,
                           truncdiv, truncmod, var)
from ..compute.expr import Expr, Var
from ..compute.scan_extern import scan
from ..compute.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Tensor
from ..lower import ir_builder
from ..lower.extern_api import call_packed, decl_buffer, decl_tensor_intrin, extern
from ..schedule.schedule import Schedule, create_schedule
from ..schedule.stage import Stage

__all__ = ["ComputeOp", "Expr", "IterVar", "PlaceholderOp", "Range", "Schedule", "Stage",
           "Tensor", "Var", "abs", "acos", "acosh", "all", "any", "asin", "asinh", "atan",
           "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "call_packed",
           "ceil", "comm_reducer", "compute", "const", "cos", "cosh",
           "create_schedule", "decl_buffer", "decl_tensor_intrin", "erf", "exp", "exp2",
           "extern", "floor", "floordiv", "floormod", "if_then_else", "indexdiv", "indexmod",
           "ir_builder", "log", "log2", "log10", "lower", "max", "max_value", "min",
           "min_value", "placeholder", "power", "reduce_axis", "round", "rsqrt", "scan",
           "sigmoid", "sin", "sinh", "size_var", "sqrt", "sum", "tan", "tanh", "thread_axis",
           "trunc", "truncdiv", "truncmod", "var"]
