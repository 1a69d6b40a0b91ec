"""Elementwise and broadcasting operators: relu, add/subtract/multiply/divide, scale-shift.

Takes te.Tensors (and Python or te scalars for the binary ops), gives one te.compute stage
each. Broadcasting follows numpy: shapes align on the right, a size-1 dim stretches.
Imports te.compute (api, expr, tensor) and te.errors only.
"""
from __future__ import annotations

from typing import Callable

from ...errors import ShapeError
from .. import api
from ..expr import Expr, as_expr
from ..tensor import Tensor
from ._util import check_tensor, fmt_shape, static_dim


def relu(x: Tensor, name: str = "T_relu") -> Tensor:
    """max(x, 0), elementwise."""
    check_tensor(x, "relu", "x")
    zero = api.const(0, x.dtype)
    return api.compute(x.shape, lambda *i: api.max(x(*i), zero), name=name, tag="elemwise")


def broadcast_shape(shape_a, shape_b, who: str = "broadcast") -> tuple:
    """The numpy broadcast of two shapes; entries are ints or symbolic Exprs."""
    n = max(len(shape_a), len(shape_b))
    a = (1,) * (n - len(shape_a)) + tuple(shape_a)
    b = (1,) * (n - len(shape_b)) + tuple(shape_b)
    out = []
    for k, (da, db) in enumerate(zip(a, b)):
        sa, sb = static_dim(da), static_dim(db)
        if sa == 1:
            out.append(db)
        elif sb == 1:
            out.append(da)
        elif sa is not None and sb is not None and sa != sb:
            raise ShapeError(f"{who}: shapes {fmt_shape(shape_a)} and {fmt_shape(shape_b)} "
                             f"do not broadcast: dimension {k} is {sa} vs {sb}")
        elif sa is None and sb is None and da is not db:
            raise ShapeError(f"{who}: shapes {fmt_shape(shape_a)} and {fmt_shape(shape_b)} "
                             f"do not broadcast: dimension {k} has two different sizes")
        else:
            out.append(da if sa is None else db)
    return tuple(out)


def broadcast_index(t: Tensor, out_index: tuple) -> tuple:
    """The index into `t` for an output index of the broadcast shape (size-1 dims read 0)."""
    lead = len(out_index) - t.ndim
    return tuple(0 if static_dim(d) == 1 else out_index[lead + k]
                 for k, d in enumerate(t.shape))


def _operand(v, who: str, param: str):
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (bool, int, float, Expr)):
        return as_expr(v) if isinstance(v, Expr) else v
    raise ShapeError(f"{who}: {param} must be a te.Tensor or a scalar, got {type(v).__name__}")


def _binary(fn: Callable, a, b, who: str, name: str) -> Tensor:
    a, b = _operand(a, who, "lhs"), _operand(b, who, "rhs")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise ShapeError(f"{who}: at least one of lhs and rhs must be a te.Tensor")
    if not isinstance(b, Tensor):
        return api.compute(a.shape, lambda *i: fn(a(*i), b), name=name, tag="broadcast")
    if not isinstance(a, Tensor):
        return api.compute(b.shape, lambda *i: fn(a, b(*i)), name=name, tag="broadcast")
    shape = broadcast_shape(a.shape, b.shape, who)
    return api.compute(shape, lambda *i: fn(a(*broadcast_index(a, i)),
                                             b(*broadcast_index(b, i))),
                       name=name, tag="broadcast")


def add(lhs, rhs, name: str = "T_add") -> Tensor:
    """lhs + rhs with numpy broadcasting; either side may be a scalar."""
    return _binary(lambda x, y: x + y, lhs, rhs, "add", name)


def subtract(lhs, rhs, name: str = "T_subtract") -> Tensor:
    """lhs - rhs with numpy broadcasting; either side may be a scalar."""
    return _binary(lambda x, y: x - y, lhs, rhs, "subtract", name)


def multiply(lhs, rhs, name: str = "T_multiply") -> Tensor:
    """lhs * rhs with numpy broadcasting; either side may be a scalar."""
    return _binary(lambda x, y: x * y, lhs, rhs, "multiply", name)


def divide(lhs, rhs, name: str = "T_divide") -> Tensor:
    """lhs / rhs with numpy broadcasting (true division: floats only make sense)."""
    return _binary(lambda x, y: x / y, lhs, rhs, "divide", name)


def maximum(lhs, rhs, name: str = "T_maximum") -> Tensor:
    """Elementwise max with numpy broadcasting."""
    return _binary(lambda x, y: api.max(x, y), lhs, rhs, "maximum", name)


def minimum(lhs, rhs, name: str = "T_minimum") -> Tensor:
    """Elementwise min with numpy broadcasting."""
    return _binary(lambda x, y: api.min(x, y), lhs, rhs, "minimum", name)


def broadcast_binary(fn: Callable, lhs, rhs, name: str = "T_binary") -> Tensor:
    """fn(lhs[i], rhs[i]) with numpy broadcasting, for a scalar function `fn` of two te
    expressions (power, comparisons, ...); either side may be a scalar."""
    return _binary(fn, lhs, rhs, name, name)


def unary(fn: Callable, x: Tensor, name: str = "T_unary") -> Tensor:
    """fn(x[i]) elementwise, for a scalar function `fn` of one te expression."""
    check_tensor(x, name, "x")
    return api.compute(x.shape, lambda *i: fn(x(*i)), name=name, tag="elemwise")


def fused_scale_shift_relu(x: Tensor, a, b, name: str = "T_scale_shift_relu") -> Tensor:
    """relu(x * a + b) in one stage; a and b are scalars or tensors broadcastable to x.

    The result has the shape of x: a and b may not enlarge it.
    """
    who = "fused_scale_shift_relu"
    check_tensor(x, who, "x")
    for param, v in (("a", a), ("b", b)):
        v = _operand(v, who, param)
        if isinstance(v, Tensor):
            shape = broadcast_shape(x.shape, v.shape, who)
            if len(shape) != x.ndim or any(static_dim(s) != static_dim(d) or
                                           (static_dim(s) is None and s is not d)
                                           for s, d in zip(shape, x.shape)):
                raise ShapeError(f"{who}: {param} must broadcast to the shape of x "
                                 f"{fmt_shape(x.shape)}, got {fmt_shape(v.shape)}")

    def load(v, i):
        return v(*broadcast_index(v, i)) if isinstance(v, Tensor) else v

    zero = api.const(0, x.dtype)
    return api.compute(x.shape, lambda *i: api.max(x(*i) * load(a, i) + load(b, i), zero),
                       name=name, tag="elemwise")


def where(cond: Tensor, lhs: Tensor, rhs: Tensor, name: str = "T_where") -> Tensor:
    """lhs[i] where cond[i] else rhs[i], the three broadcast together (numpy.where)."""
    for param, t in (("cond", cond), ("lhs", lhs), ("rhs", rhs)):
        check_tensor(t, "where", param)
    shape = broadcast_shape(broadcast_shape(cond.shape, lhs.shape, "where"), rhs.shape, "where")
    return api.compute(shape, lambda *i: api.if_then_else(
        cond(*broadcast_index(cond, i)), lhs(*broadcast_index(lhs, i)),
        rhs(*broadcast_index(rhs, i))), name=name, tag="broadcast")
