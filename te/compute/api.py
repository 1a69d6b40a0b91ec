"""The user-facing compute API: placeholder, compute, reduce_axis, reducers, math.

Takes Python values from user code, gives tensors and expressions. Every check of user
input for the compute layer happens here, so errors point at the user's call. Imports
expr, tensor, te.dtype and te.errors.
"""
from __future__ import annotations

import builtins
import dataclasses
import inspect
import weakref
from typing import Callable

from .. import dtype as dt
from ..errors import ComputeError, DTypeError, ShapeError
from . import expr as E
from .expr import Const, Expr, Reduce, Var, as_expr
from .tensor import DATA_PAR, REDUCE, THREAD, ComputeOp, IterVar, PlaceholderOp, Range, Tensor

_name_counts: dict = {}


def var(name: str = "v", dtype: str = "int32") -> Var:
    """A symbolic scalar, typically a size bound when the kernel is called."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ComputeError(f"te.var: name must be an identifier string, got {name!r}")
    return Var(name, dt.check_dtype(dtype, "te.var dtype"))


def size_var(name: str = "n", dtype: str = "int32") -> Var:
    return var(name, dtype)


const = E.const


def _shape(shape, who: str) -> tuple:
    if isinstance(shape, (int, Expr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ShapeError(f"{who}: shape must be a tuple of ints or te.var, "
                         f"got {type(shape).__name__}")
    out = []
    for k, s in enumerate(shape):
        if isinstance(s, float):
            s = _integral_float(s, k, who)
        if isinstance(s, bool) or not isinstance(s, (int, Expr)) and not hasattr(s, "__index__"):
            raise ShapeError(f"{who}: shape[{k}] must be an int or an integer expression, "
                             f"got {s!r}")
        e = as_expr(int(s) if not isinstance(s, Expr) else s)
        if not dt.is_integral(e.dtype):
            raise ShapeError(f"{who}: shape[{k}] must be an integer, got dtype {e.dtype}")
        if isinstance(e, Const) and e.value <= 0:
            raise ShapeError(f"{who}: shape[{k}] must be positive, got {e.value}")
        out.append(e)
    return tuple(out)


def _integral_float(value: float, k: int, who: str) -> int:
    """A float extent such as N / bn (TVM's tutorials write them) as the int it equals. TVM
    truncates any float; one with a fraction is refused here, as truncating would drop the
    last partial tile of data without a word."""
    if not value.is_integer():
        raise ShapeError(f"{who}: shape[{k}] must be an integer, got the float {value!r} "
                         f"(write an integer division such as N // bn; TVM would truncate it "
                         f"to {int(value)})")
    return int(value)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape and dtype."""
    shape = _shape(shape, "te.placeholder")
    dtype = dt.check_dtype(dtype, "te.placeholder dtype")
    return PlaceholderOp(name, shape, dtype).output(0)


def _lambda_names(fcompute: Callable, ndim: int) -> list:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"i{k}" for k in range(ndim)]
    if len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        return [f"i{k}" for k in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != ndim or len(positional) != len(params):
        raise ComputeError(f"te.compute: fcompute must take {ndim} index argument(s), one per "
                           f"dimension of shape, but it takes {len(params)}")
    return [p.name for p in positional]


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None):
    """Declare out[i, j, ...] = fcompute(i, j, ...); returns a Tensor (or a list of them)."""
    shape = _shape(shape, "te.compute")
    if not callable(fcompute):
        raise ComputeError(f"te.compute: fcompute must be callable, got "
                           f"{type(fcompute).__name__}")
    names = _lambda_names(fcompute, len(shape))
    axis = tuple(IterVar(Range(Const("int32", 0) if s.dtype == "int32" else Const(s.dtype, 0), s),
                         Var(n, s.dtype), DATA_PAR) for n, s in zip(names, shape))
    result = fcompute(*[iv.var for iv in axis])
    multi = isinstance(result, (tuple, list))
    body = tuple(as_expr(r) for r in (result if multi else (result,)))
    if not body:
        raise ComputeError("te.compute: fcompute returned an empty tuple")
    reduce_axis = _check_body(body, name)
    body, reduce_axis = _own_reduce_axes(body, reduce_axis)
    op = ComputeOp(name, tag, attrs, axis, reduce_axis, body)
    for iv in reduce_axis:
        _REDUCE_OWNER[iv] = op
    _check_free_vars(op)
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs if multi else outs[0]


# reduce IterVar -> the ComputeOp that reduces over it. One IterVar is one loop variable, so
# a second compute that reduces over the same axis gets a private copy (like TVM's SSA pass);
# the first keeps the original so that `s[C].split(k, ...)` works as users write it.
_REDUCE_OWNER: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_REDUCE_VARS: "weakref.WeakSet" = weakref.WeakSet()  # loop vars of every te.reduce_axis


def _own_reduce_axes(body: tuple, axes: tuple) -> tuple:
    shared = [iv for iv in axes if iv in _REDUCE_OWNER]
    if not shared:
        return body, axes
    copies = {iv: IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), REDUCE) for iv in shared}
    _REDUCE_VARS.update(c.var for c in copies.values())
    vmap = {iv.var: c.var for iv, c in copies.items()}
    new_axes = tuple(copies.get(iv, iv) for iv in axes)
    new_body = tuple(dataclasses.replace(b, axis=new_axes,
                                         source=tuple(E.substitute(x, vmap) for x in b.source),
                                         condition=E.substitute(b.condition, vmap),
                                         init=tuple(E.substitute(x, vmap) for x in b.init))
                     for b in body)
    return new_body, new_axes


def _contains_reduce(e: Expr) -> bool:
    found = []
    E.pre_order(e, lambda n: found.append(n) if isinstance(n, Reduce) else None)
    return bool(found)


def _check_body(body: tuple, name: str) -> tuple:
    """Reductions must be the whole body and agree across outputs; returns the reduce axes."""
    top = [isinstance(b, Reduce) for b in body]
    for b in body:
        kids = b.source + (b.condition,) if isinstance(b, Reduce) else E.children(b)
        if builtins.any(_contains_reduce(k) for k in kids):
            raise ComputeError(f"te.compute '{name}': a reduction (te.sum/max/min) must be the "
                               f"whole expression returned by fcompute, not part of it; "
                               f"compute it as its own tensor first")
    if not builtins.any(top):
        return ()
    if not builtins.all(top):
        raise ComputeError(f"te.compute '{name}': either every output is a reduction or "
                           f"none is")
    first = body[0]
    for b in body[1:]:
        if b.combiner is not first.combiner or b.axis != first.axis:
            raise ComputeError(f"te.compute '{name}': multiple reduction outputs must come "
                               f"from one tuple reducer call")
    return first.axis


def _check_free_vars(op: ComputeOp) -> None:
    bound = {iv.var for iv in op.axis} | {iv.var for iv in op.reduce_axis}
    for b in op.body:
        for v in E.free_vars(b):
            if v in bound:
                continue
            if v in _REDUCE_VARS:
                raise ComputeError(f"te.compute '{op.name}': reduce axis '{v.name}' is used "
                                   f"outside a reduction over it; wrap the expression in "
                                   f"te.sum/te.max/te.min(..., axis={v.name})")
            if v.name in {iv.var.name for iv in op.axis}:
                raise ComputeError(f"te.compute '{op.name}': variable '{v.name}' is not one "
                                   f"of this compute's axes (it belongs to another compute)")


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over [lo, hi) given as (lo, hi) or a Range."""
    if isinstance(dom, Range):
        rng = dom
    else:
        if not isinstance(dom, (tuple, list)) or len(dom) != 2:
            raise ShapeError(f"te.reduce_axis: dom must be a (begin, end) pair, got {dom!r}")
        lo, hi = as_expr(dom[0]), as_expr(dom[1])
        if not dt.is_integral(lo.dtype) or not dt.is_integral(hi.dtype):
            raise ShapeError(f"te.reduce_axis: dom bounds must be integers, got {dom!r}")
        rng = Range(lo, E.binary("sub", hi, lo))
        if isinstance(rng.extent, Const) and rng.extent.value <= 0:
            raise ShapeError(f"te.reduce_axis: dom must be non-empty (begin < end), got {dom!r}")
    iv = IterVar(rng, Var(name, rng.extent.dtype), REDUCE)
    _REDUCE_VARS.add(iv.var)
    return iv


def thread_axis(dom=None, tag: str = "", name: str = "") -> IterVar:
    """A GPU thread axis for Stage.bind: te.thread_axis("threadIdx.x"), or with its extent
    as TVM also spells it, te.thread_axis((0, 64), "threadIdx.x") (Stage.bind checks that
    the loop has that extent where both are constants)."""
    if isinstance(dom, str):  # the usual spelling: the tag first
        dom, tag, name = None, dom, name or tag
    valid = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
             "threadIdx.z", "vthread", "cthread")
    if tag not in valid:
        raise ComputeError(f"te.thread_axis: tag must be one of {', '.join(valid)}, "
                           f"got {tag!r}")
    rng = None
    if dom is not None:
        if isinstance(dom, Range):
            rng = dom
        elif isinstance(dom, (tuple, list)) and len(dom) == 2:
            lo, hi = as_expr(dom[0]), as_expr(dom[1])
            if not (isinstance(lo, Const) and lo.value == 0 and dt.is_integral(hi.dtype)):
                raise ComputeError(f"te.thread_axis: dom must be (0, extent) with an integer "
                                   f"extent, got {dom!r}")
            rng = Range(lo, hi)
        else:
            raise ComputeError(f"te.thread_axis: dom must be a (0, extent) pair or a tag "
                               f"string, got {dom!r}")
    return IterVar(rng, Var(name or tag, "int32"), THREAD, tag)


# ---------------------------------------------------------------------------------------
# Reducers

def _axis_list(axis, who: str) -> tuple:
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, IterVar) or a.iter_type != REDUCE:
            raise ComputeError(f"{who}: axis must be a te.reduce_axis or a list of them, "
                               f"got {a!r}")
    if not axes:
        raise ComputeError(f"{who}: axis must name at least one te.reduce_axis")
    return tuple(axes)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce"):
    """A commutative reducer from combine(x, y) and identity(dtype...) (tuples allowed)."""

    def reducer(expr, axis=None, where=None, init=None):
        if axis is not None and not isinstance(axis, (IterVar, list, tuple)) \
                and not isinstance(expr, (list, tuple)):
            return fcombine(as_expr(expr), as_expr(axis))  # te.max(a, b): elementwise
        who = f"te.{name}"
        axes = _axis_list(axis, who)
        multi = isinstance(expr, (list, tuple))
        source = tuple(as_expr(e) for e in (expr if multi else (expr,)))
        dtypes = [s.dtype for s in source]
        lhs = tuple(Var(f"x{k}" if multi else "x", d) for k, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{k}" if multi else "y", d) for k, d in enumerate(dtypes))
        res = fcombine(lhs, rhs) if multi else fcombine(lhs[0], rhs[0])
        res = tuple(as_expr(r) for r in (res if isinstance(res, (list, tuple)) else (res,)))
        ident = fidentity(*dtypes)
        ident = tuple(E.cast(as_expr(i, d), d)
                      for i, d in zip(ident if isinstance(ident, (list, tuple)) else (ident,),
                                      dtypes))
        if len(res) != len(source) or len(ident) != len(source):
            raise ComputeError(f"{who}: combine and identity must give {len(source)} value(s)")
        for r, d in zip(res, dtypes):
            if r.dtype != d:
                raise DTypeError(f"{who}: combine returned dtype {r.dtype} for a {d} value")
        combiner = E.CommReducer(name, lhs, rhs, res, ident)
        cond = E.const(True) if where is None else E.cast(as_expr(where), "bool")
        init_t = () if init is None else tuple(
            E.cast(as_expr(i), d) for i, d in zip(init if multi else (init,), dtypes))
        outs = tuple(Reduce(d, combiner, source, axes, cond, k, init_t)
                     for k, d in enumerate(dtypes))
        return outs if multi else outs[0]

    reducer.__name__ = name
    return reducer


def min_value(dtype: str) -> Const:
    dtype = dt.check_dtype(dtype)
    if dt.is_float(dtype):
        return E.const(float("-inf"), dtype)
    if dt.is_bool(dtype):
        return E.const(False)
    return E.const(dt.int_range(dtype)[0], dtype)


def max_value(dtype: str) -> Const:
    dtype = dt.check_dtype(dtype)
    if dt.is_float(dtype):
        return E.const(float("inf"), dtype)
    if dt.is_bool(dtype):
        return E.const(True)
    return E.const(dt.int_range(dtype)[1], dtype)


def _min2(a, b): return E.binary("min", a, b)
def _max2(a, b): return E.binary("max", a, b)


sum = comm_reducer(lambda x, y: x + y, lambda d: E.const(0, d), name="sum")  # noqa: A001
max = comm_reducer(_max2, min_value, name="max")  # noqa: A001
min = comm_reducer(_min2, max_value, name="min")  # noqa: A001


# ---------------------------------------------------------------------------------------
# Scalar helpers

def if_then_else(cond, t, f) -> Expr:
    return E.select(cond, t, f)


def all(*conds) -> Expr:  # noqa: A001
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    out = E.const(True)
    for c in conds:
        out = E.logical("and", out, c)
    return out


def any(*conds) -> Expr:  # noqa: A001
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    out = E.const(False)
    for c in conds:
        out = E.logical("or", out, c)
    return out


def logical_and(a, b): return E.logical("and", a, b)
def logical_or(a, b): return E.logical("or", a, b)
def logical_not(a): return E.logical_not(a)


def _int_binary(op: str, a, b) -> Expr:
    out = E.binary(op, a, b)
    if not dt.is_integral(out.dtype):
        raise DTypeError(f"te.{op}: expected integer operands, got dtype {out.dtype}")
    return out


def indexdiv(a, b): return _int_binary("floordiv", a, b)
def indexmod(a, b): return _int_binary("floormod", a, b)
def floordiv(a, b): return E.binary("floordiv", a, b)
def floormod(a, b): return E.binary("floormod", a, b)
def truncdiv(a, b): return _int_binary("truncdiv", a, b)
def truncmod(a, b): return _int_binary("truncmod", a, b)


def bitwise_and(a, b):
    """a & b bit by bit, of integer operands (promoted as +); floats and bools refused."""
    return E.binary("bitwise_and", a, b)


def bitwise_or(a, b):
    """a | b bit by bit, of integer operands (promoted as +); floats and bools refused."""
    return E.binary("bitwise_or", a, b)


def bitwise_xor(a, b):
    """a ^ b bit by bit, of integer operands (promoted as +); floats and bools refused."""
    return E.binary("bitwise_xor", a, b)


def bitwise_not(a):
    """~a: every bit of integer `a` flipped (numpy's np.invert)."""
    return E.bitwise_not(a)


def shift_left(a, b):
    """a << b of integer operands (promoted as +), wrapping to the dtype. As numpy: an
    amount b below 0 or of the bit width or more gives 0."""
    return E.binary("shift_left", a, b)


def shift_right(a, b):
    """a >> b of integer operands (promoted as +): arithmetic for a signed dtype, logical
    for an unsigned one. As numpy: an amount b below 0 or of the bit width or more gives
    0, or -1 for a negative a."""
    return E.binary("shift_right", a, b)


def fmod(a, b) -> Expr:
    """C's fmod: the float remainder of a / b with the dividend's sign, exact (no rounding
    of the quotient; LLVM's frem); te.floormod of floats is the divisor-signed one."""
    out = E.binary("truncmod", a, b)
    if not dt.is_float(out.dtype):
        raise DTypeError(f"te.fmod: expected float operands, got dtype {out.dtype} "
                         f"(te.truncmod is the integer remainder)")
    return out


def _intrinsic(name: str):
    def f(x):
        return E.call_intrinsic(name, x)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} of a float expression."
    return f


exp, log, sqrt, rsqrt, tanh, sigmoid, erf = (_intrinsic(n) for n in
                                            ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                                             "erf"))
floor, ceil, round, trunc = (_intrinsic(n) for n in ("floor", "ceil", "round", "trunc"))  # noqa
sin, cos, log2, log10, exp2 = (_intrinsic(n) for n in ("sin", "cos", "log2", "log10", "exp2"))
tan, asin, acos, atan = (_intrinsic(n) for n in ("tan", "asin", "acos", "atan"))
sinh, cosh, asinh, acosh, atanh = (_intrinsic(n) for n in ("sinh", "cosh", "asinh", "acosh",
                                                           "atanh"))
abs = E.abs_  # noqa: A001
power = E.power
call_extern = E.call_extern
