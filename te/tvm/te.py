"""tvm.te: TVM's tensor-expression module, our te API under its names.

Takes what `from tvm import te` code calls; gives te's own functions and classes (no
wrappers). Imports te.compute, te.schedule and te.build.
"""
from __future__ import annotations

from ..build import lower
from ..compute.api import (abs, all, any, ceil, comm_reducer, compute, const, cos, erf, exp,
                           exp2, floor, floordiv, floormod, if_then_else, indexdiv, indexmod,
                           log, log2, log10, max, max_value, min, min_value, placeholder,
                           power, reduce_axis, round, rsqrt, sigmoid, sin, size_var, sqrt, sum,
                           tanh, thread_axis, trunc, truncdiv, truncmod, var)
from ..compute.expr import Expr, Var
from ..compute.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Tensor
from ..schedule.schedule import Schedule, create_schedule
from ..schedule.stage import Stage

__all__ = ["ComputeOp", "Expr", "IterVar", "PlaceholderOp", "Range", "Schedule", "Stage",
           "Tensor", "Var", "abs", "all", "any", "ceil", "comm_reducer", "compute", "const",
           "cos", "create_schedule", "erf", "exp", "exp2", "floor", "floordiv", "floormod",
           "if_then_else", "indexdiv", "indexmod", "log", "log2", "log10", "lower", "max",
           "max_value", "min", "min_value", "placeholder", "power", "reduce_axis", "round",
           "rsqrt", "sigmoid", "sin", "size_var", "sqrt", "sum", "tanh", "thread_axis", "trunc",
           "truncdiv", "truncmod", "var"]
