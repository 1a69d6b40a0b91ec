"""Argument checks shared by the operator definitions in te.compute.ops.

Takes the raw arguments of an operator, gives normalized Python values (axes, int tuples,
static dims) or raises ShapeError/DTypeError naming the operator and the parameter.
Imports te.compute and te.errors only.
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ..expr import Const, Expr, as_expr, cast
from ..tensor import Tensor


def static_dim(e) -> int | None:
    """The value of a shape entry when it is a constant, else None (a symbolic size)."""
    if isinstance(e, int):
        return e
    return int(e.value) if isinstance(e, Const) else None


def static_shape(t: Tensor) -> tuple:
    """The shape of `t` with constant entries as ints and symbolic ones as Exprs."""
    return tuple(static_dim(s) if static_dim(s) is not None else s for s in t.shape)


def check_tensor(x, who: str, param: str, ndim: int | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise ShapeError(f"{who}: {param} must be a te.Tensor, got {type(x).__name__}")
    if ndim is not None and x.ndim != ndim:
        raise ShapeError(f"{who}: {param} must have {ndim} dimensions, got {x.ndim} "
                         f"(shape {fmt_shape(x.shape)})")
    return x


def check_float(x: Tensor, who: str, param: str) -> None:
    if not x.dtype.startswith("float"):
        raise DTypeError(f"{who}: {param} must have a float dtype, got {x.dtype}")


def same_dim(a, b) -> bool:
    """True when two shape entries are provably equal (equal constants or the same Var)."""
    sa, sb = static_dim(a), static_dim(b)
    if sa is not None and sb is not None:
        return sa == sb
    return a is b


def check_dim(got, expected, who: str, what: str) -> None:
    """Raise unless `got` may equal `expected`; symbolic sizes are trusted unless both fixed."""
    sg, se = static_dim(got), static_dim(expected)
    if sg is not None and se is not None and sg != se:
        raise ShapeError(f"{who}: {what}: expected {se}, got {sg}")


def check_groups(channels, out_channels, kernel_in, groups: int, who: str) -> None:
    """A grouped convolution's channels: data's and the kernel's output channels divisible
    by `groups`, the kernel's input channels data's per group (where the dims are known)."""
    c, oc = static_dim(channels), static_dim(out_channels)
    if c is not None and c % groups:
        raise ShapeError(f"{who}: data channels ({c}) must be divisible by groups ({groups})")
    if oc is not None and oc % groups:
        raise ShapeError(f"{who}: kernel output channels ({oc}) must be divisible by groups "
                         f"({groups})")
    if c is not None:
        check_dim(kernel_in, c // groups, who, "kernel.shape[1] (data channels // groups)")


def normalize_axis(axis, ndim: int, who: str, param: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ShapeError(f"{who}: {param} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{who}: {param} must be in [{-ndim}, {ndim - 1}] for a "
                         f"{ndim}-d tensor, got {axis}")
    return axis % ndim


def normalize_axes(axis, ndim: int, who: str, param: str = "axis") -> tuple:
    """None -> every axis; an int or a sequence of ints -> sorted, distinct, non-negative."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = [normalize_axis(a, ndim, who, param) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{who}: {param} must not repeat an axis, got {axis!r}")
    return tuple(sorted(out))


def int_tuple(value, n: int, who: str, param: str, minimum: int | None = None) -> tuple:
    """An int (repeated n times) or a sequence of n ints, each >= minimum."""
    vals = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(vals, (tuple, list)) or len(vals) != n or any(
            isinstance(v, bool) or not isinstance(v, int) for v in vals):
        raise ShapeError(f"{who}: {param} must be an int or {n} ints, got {value!r}")
    if minimum is not None and any(v < minimum for v in vals):
        raise ShapeError(f"{who}: {param} must be >= {minimum}, got {value!r}")
    return tuple(vals)


def pad_tuple(padding, who: str) -> tuple:
    """padding as int, (pad_h, pad_w) or (top, left, bottom, right) -> (t, l, b, r)."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        vals = int_tuple(padding, 4, who, "padding", minimum=0)
        return vals
    ph, pw = int_tuple(padding, 2, who, "padding (an int, 2 ints or 4 ints)", minimum=0)
    return (ph, pw, ph, pw)


def pad_tuple_nd(padding, r: int, who: str) -> tuple:
    """padding over r spatial axes as an int, r ints (each on both sides) or 2r ints
    (begins, then ends: ONNX's order) -> the 2r ints."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * r:
        return int_tuple(padding, 2 * r, who, "padding", minimum=0)
    return int_tuple(padding, r, who, f"padding (an int, {r} or {2 * r} ints)", minimum=0) * 2


def fmt_shape(shape) -> str:
    parts = [str(static_dim(s)) if static_dim(s) is not None else getattr(s, "name", "?")
             for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def const_like(value, dtype: str) -> Expr:
    """A Python number as a constant of `dtype`; an Expr is cast to `dtype`."""
    return cast(as_expr(value), dtype)
