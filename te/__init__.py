"""te: a tensor-expression compiler in pure Python (the classic TVM te workflow).

Re-exports only: the compute API, schedules, lowering and building.
"""
from .compute.api import (abs, acos, acosh, all, any, asin, asinh, atan, atanh, bitwise_and,
                          bitwise_not, bitwise_or, bitwise_xor, call_extern, ceil, comm_reducer,
                          compute, const, cos, cosh, erf, exp, exp2, floor, floordiv, floormod,
                          fmod, if_then_else, indexdiv, indexmod, log, log2, log10, logical_and,
                          logical_not, logical_or, max, max_value, min, min_value, placeholder,
                          power, reduce_axis, round, rsqrt, shift_left, shift_right, sigmoid,
                          sin, sinh, size_var, sqrt, sum, tan, tanh, thread_axis, trunc,
                          truncdiv, truncmod, var)
from .compute.expr import Expr, Var, structural_equal
from .compute.scan_extern import scan
from .compute.tensor import IterVar, Range, Tensor
from .errors import (ArgumentError, BuildError, ComputeError, DTypeError, LoweringError,
                     ScheduleError, ShapeError, TEError)
from .schedule.schedule import Schedule, create_schedule
from .schedule.stage import Stage
from .build import build, lower
from .lower.extern_api import call_packed, decl_buffer, decl_tensor_intrin, extern
from .lower import ir_builder
from .codegen.cuda.tensor_core import wmma_matmul_intrin, wmma_store_intrin
from .target import Target
from .autotune.api import autotune  # noqa: E402  (a callable carrying the template API)
from runtime import ndarray as nd  # noqa: E402
