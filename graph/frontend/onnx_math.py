"""ONNX converters of arithmetic where dtype decides the op (Div, Mod, Pow), casts
(CastLike), comparisons and logic beyond the basic ones, the bitwise ops (opset 18), the
math functions te reaches through libm, and the constant-valued Size and Range.

Imports numpy, graph's builder and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np

from .. import builder, transform
from ..builder import apply
from ..ops.elementwise import LIBM_UNARY
from .onnx_base import Converter, Refused, const, row


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def legacy_broadcast(ins, attrs, opset, name: str):
    """B of a 2-input op: before opset 7, with broadcast=1, B's dims align with A's from
    `axis` on (no axis: at the end, as numpy does), so B is reshaped to make numpy
    broadcasting do that; from opset 7 (or broadcast=0: equal shapes) B as it is."""
    a, b = ins[0], ins[1]
    axis = attrs.get("axis")
    if opset >= 7 or not attrs.get("broadcast", 0) or axis is None or len(b.shape) == len(
            a.shape):
        return b
    axis = int(axis) % len(a.shape)
    trailing = len(a.shape) - axis - len(b.shape)
    if trailing < 0:
        raise Refused("axis", f"axis {axis} leaves no room for B's {len(b.shape)} dims")
    return transform.reshape(b, tuple(b.shape) + (1,) * trailing, name=f"{name}/b")


def _binary(op: str):
    """A two-input ONNX op onto one broadcasting table op."""
    def fn(ins, attrs, opset, outs):
        return [apply(op, ins[:2], {}, outs[0])]
    return Converter(fn, frozenset())


def _bitwise(op: str, onnx_op: str):
    """BitwiseAnd/Or/Xor (two inputs, numpy broadcasting) and BitwiseNot (one) onto te's
    bitwise operators: integer tensors only, as the spec's type constraint says."""
    def fn(ins, attrs, opset, outs):
        for x in ins:
            if not _is_int(x.dtype):
                raise Refused("", f"{onnx_op} of dtype {x.dtype} is not supported (integer "
                                  f"tensors only)")
        return [apply(op, ins[:2], {}, outs[0])]
    return Converter(fn, frozenset())


def _div(ins, attrs, opset, outs):
    # integer Div truncates toward zero (onnxruntime, and the reference's float divide
    # then cast); te's '/' refuses integers as ambiguous
    op = "trunc_divide" if _is_int(ins[0].dtype) else "divide"
    return [apply(op, [ins[0], legacy_broadcast(ins, attrs, opset, outs[0])], {}, outs[0])]


def _mod(ins, attrs, opset, outs):
    fmod = int(attrs.get("fmod", 0))
    if _is_int(ins[0].dtype):
        return [apply("trunc_mod" if fmod else "floor_mod", ins[:2], {}, outs[0])]
    if not fmod and opset < 28:
        raise Refused("fmod", f"fmod=0 on {ins[0].dtype} at opset {opset} (the spec "
                              f"requires fmod=1 for floats before opset 28)")
    # opset 28's float fmod=0 is numpy's % (the divisor's sign, signed zeros, infinities)
    return [apply("fmod" if fmod else "floor_mod", ins[:2], {}, outs[0])]


def _pow(ins, attrs, opset, outs):
    """Pow's result has the base's dtype; an integer base is raised in float64 (exact for
    the results that fit 53 bits) and cast back, a mixed exponent cast to the base's."""
    base, exp = ins[0], legacy_broadcast(ins, attrs, opset, outs[0])
    if base.dtype not in ("float32", "float64", "float16") and not _is_int(base.dtype):
        raise Refused("", f"Pow of dtype {base.dtype} is not supported")
    work = "float64" if _is_int(base.dtype) else base.dtype
    b = base if base.dtype == work else transform.cast(base, work, name=f"{outs[0]}/base")
    e = exp if exp.dtype == work else transform.cast(exp, work, name=f"{outs[0]}/exp")
    if work == base.dtype:
        return [apply("power", [b, e], {}, outs[0])]
    y = apply("power", [b, e], {}, f"{outs[0]}/{work}")
    return [transform.cast(y, base.dtype, name=outs[0])]


def _cast_like(ins, attrs, opset, outs):
    if attrs.get("saturate", 1) != 1:
        raise Refused("saturate", "only saturate=1 is supported")
    return [transform.cast(ins[0], ins[1].dtype, name=outs[0])]


def _libm_dtype(x, who: str) -> None:
    if x.dtype not in ("float32", "float64"):
        raise Refused("", f"{who} of dtype {x.dtype} is not supported (float32 and float64 "
                          f"only)")


def _libm_unary(op: str, onnx_op: str):
    def fn(ins, attrs, opset, outs):
        _libm_dtype(ins[0], onnx_op)
        return [apply(op, [ins[0]], {}, outs[0])]
    return Converter(fn, frozenset())


def _unary(op: str, onnx_attrs=(), kinds=("float",)):
    """An elementwise ONNX op on float inputs whose attributes map by lower-casing."""
    def fn(ins, attrs, opset, outs):
        if not ins[0].dtype.startswith(kinds):
            raise Refused("", f"dtype {ins[0].dtype} is not supported")
        kw = {k.lower(): float(attrs[k]) for k in onnx_attrs if k in attrs}
        return [apply(op, [ins[0]], kw, outs[0])]
    return Converter(fn, frozenset(onnx_attrs))


def _is_inf(ins, attrs, opset, outs):
    kw = {"detect_negative": int(attrs.get("detect_negative", 1)),
          "detect_positive": int(attrs.get("detect_positive", 1))}
    return [apply("is_inf", [ins[0]], kw, outs[0])]


def _size(ins, attrs, opset, outs):
    if any(not isinstance(d, int) for d in ins[0].shape):
        raise Refused("", "Size of a symbolic shape is not supported")
    return [builder.constant(np.asarray(int(np.prod(ins[0].shape)), np.int64),
                             name=outs[0])]


def _range(ins, attrs, opset, outs):
    start, limit, delta = (const(v, k) for v, k in zip(ins, ("start", "limit", "delta")))
    n = max(int(np.ceil((limit - start) / delta)), 0)
    data = (start + delta * np.arange(n)).astype(np.asarray(start).dtype)
    if n == 0:
        raise Refused("limit", "an empty Range (zero-size tensors are not supported)")
    return [builder.constant(data, name=outs[0])]


def _trilu(ins, attrs, opset, outs):
    x = ins[0]
    k = int(const(ins[1], "k")) if len(ins) > 1 and ins[1] is not None else 0
    rows, cols = x.shape[-2:]
    tri = np.triu if attrs.get("upper", 1) else np.tril
    keep = tri(np.ones((rows, cols), bool), k)
    zero = builder.constant(np.zeros((), x.dtype), name=f"{outs[0]}/zero")
    return [transform.where(builder.constant(keep, name=f"{outs[0]}/mask"), x, zero,
                            name=outs[0])]


MATH_CONVERTERS = {
    "Div": row(_div, "broadcast", "axis"),
    "Mod": row(_mod, "fmod"),
    "Pow": row(_pow, "broadcast", "axis"),
    "CastLike": row(_cast_like, "saturate"),
    "GreaterOrEqual": _binary("greater_equal"),
    "LessOrEqual": _binary("less_equal"),
    "Xor": _binary("logical_xor"),
    "BitwiseAnd": _bitwise("bitwise_and", "BitwiseAnd"),
    "BitwiseOr": _bitwise("bitwise_or", "BitwiseOr"),
    "BitwiseXor": _bitwise("bitwise_xor", "BitwiseXor"),
    "BitwiseNot": _bitwise("bitwise_not", "BitwiseNot"),
    "Round": _unary("round"),
    "Sin": _unary("sin"),
    "Cos": _unary("cos"),
    **{op.capitalize(): _libm_unary(op, op.capitalize()) for op in LIBM_UNARY},
    "IsNaN": _unary("is_nan"),
    "IsInf": row(_is_inf, "detect_negative", "detect_positive"),
    "Celu": _unary("celu", ("alpha",)),
    "ThresholdedRelu": _unary("thresholded_relu", ("alpha",)),
    "Shrink": _unary("shrink", ("bias", "lambd"), kinds=("float", "int", "uint")),
    "Mish": _unary("mish"),
    "Size": row(_size),
    "Range": row(_range),
    "Trilu": row(_trilu, "upper"),
}
