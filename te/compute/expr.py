"""Scalar expression nodes, operator overloading and dtype promotion.

Takes Python numbers and expressions, gives immutable expression trees. Imports only
te.dtype and te.errors. Nodes are frozen dataclasses compared by identity (like TVM's
ObjectRef): `a == b` builds a comparison node, and `structural_equal` compares trees.
Vector nodes (Ramp, Broadcast) live here too because the vectorizer rewrites into them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

from .. import dtype as dt
from ..errors import DTypeError, TEError

# Bitwise operators and shifts take integer operands only (te.bitwise_and, te.shift_left).
# A shift by a negative amount or by the width or more gives numpy's answer: every bit
# shifted out (0, or -1 for a negative value shifted right), not the hardware's.
BITWISE_OPS = ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")
SHIFT_OPS = ("shift_left", "shift_right")
ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "truncdiv", "truncmod",
             "min", "max")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or")


class ExprOp:
    """Operator overloading shared by expressions and iteration variables."""

    def __add__(self, other): return binary("add", self, other)
    def __radd__(self, other): return binary("add", other, self)
    def __sub__(self, other): return binary("sub", self, other)
    def __rsub__(self, other): return binary("sub", other, self)
    def __mul__(self, other): return binary("mul", self, other)
    def __rmul__(self, other): return binary("mul", other, self)
    def __truediv__(self, other): return binary("div", self, other)
    def __rtruediv__(self, other): return binary("div", other, self)
    def __floordiv__(self, other): return binary("floordiv", self, other)
    def __rfloordiv__(self, other): return binary("floordiv", other, self)
    def __mod__(self, other): return binary("floormod", self, other)
    def __rmod__(self, other): return binary("floormod", other, self)
    def __neg__(self): return binary("sub", zero_like(self), self)
    def __pow__(self, other): return power(self, other)
    def __rpow__(self, other): return power(other, self)
    def __lt__(self, other): return binary("lt", self, other)
    def __le__(self, other): return binary("le", self, other)
    def __gt__(self, other): return binary("gt", self, other)
    def __ge__(self, other): return binary("ge", self, other)
    def __eq__(self, other): return binary("eq", self, other)  # type: ignore[override]
    def __ne__(self, other): return binary("ne", self, other)  # type: ignore[override]
    # & | ^ ~ are bitwise on two integer operands (TVM's meaning) and logical otherwise:
    # on bool conditions, as te has always read them (see _bit_or_logic).
    def __and__(self, other): return _bit_or_logic("and", self, other)
    def __rand__(self, other): return _bit_or_logic("and", other, self)
    def __or__(self, other): return _bit_or_logic("or", self, other)
    def __ror__(self, other): return _bit_or_logic("or", other, self)
    def __xor__(self, other): return _bit_or_logic("xor", self, other)
    def __rxor__(self, other): return _bit_or_logic("xor", other, self)
    def __invert__(self):
        return bitwise_not(self) if _is_integer_operand(self) else logical_not(self)
    def __lshift__(self, other): return binary("shift_left", self, other)
    def __rlshift__(self, other): return binary("shift_left", other, self)
    def __rshift__(self, other): return binary("shift_right", self, other)
    def __rrshift__(self, other): return binary("shift_right", other, self)
    __hash__ = object.__hash__

    def __bool__(self):
        raise TEError("an expression has no Python truth value; use te.if_then_else, "
                      "te.all or te.any to branch on it")

    def astype(self, dtype: str) -> "Expr":
        return cast(as_expr(self), dtype)

    def equal(self, other) -> "Expr":
        """self == other, as TVM spells it (tx.var.equal(0))."""
        return binary("eq", self, other)


@dataclass(frozen=True, eq=False)
class Expr(ExprOp):
    """Base of scalar and vector expressions; every node carries its dtype."""
    dtype: str

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A scalar variable: a loop index or a symbolic size (te.var)."""
    name: str

    def __init__(self, name: str, dtype: str = "int32"):
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "name", name)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A literal; `value` is a Python int, float or bool matching the dtype."""
    value: Any

    def __int__(self): return int(self.value)
    def __float__(self): return float(self.value)
    def __index__(self): return int(self.value)


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    value: Expr


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    """Arithmetic (ARITH_OPS, and BITWISE_OPS of integers), comparison (COMPARE_OPS) or
    logical (LOGIC_OPS)."""
    op: str
    a: Expr
    b: Expr

    def __bool__(self):
        # Lets `x in list` and `list.index(x)` work on expressions, as in TVM.
        if self.op == "eq":
            return self.a is self.b
        if self.op == "ne":
            return self.a is not self.b
        return ExprOp.__bool__(self)


@dataclass(frozen=True, eq=False)
class Not(Expr):
    a: Expr


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """cond ? true_value : false_value; only the chosen side is evaluated (if_then_else)."""
    cond: Expr
    true_value: Expr
    false_value: Expr


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A math intrinsic ("exp", "sqrt", ...) or an external function (extern=True)."""
    name: str
    args: tuple
    extern: bool = False

    @property
    def op(self) -> "CallOp":
        """What is called, as TVM names it: "tir.exp" for te.exp, "tir.call_pure_extern"
        for an external function (TVM's intrinsic lowering rules read call.op.name)."""
        return CallOp("tir.call_pure_extern" if self.extern else f"tir.{self.name}")


@dataclass(frozen=True)
class CallOp:
    name: str


@dataclass(frozen=True, eq=False)
class TensorLoad(Expr):
    """Reads tensor[indices] in a compute definition (TVM's ProducerLoad)."""
    tensor: Any
    indices: tuple


@dataclass(frozen=True, eq=False)
class CommReducer:
    """combine(lhs, rhs) -> result, with an identity element per value."""
    name: str
    lhs: tuple   # Vars
    rhs: tuple   # Vars
    result: tuple  # Exprs over lhs and rhs
    identity: tuple  # Consts

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """A commutative reduction of `source` over `axis` (IterVars) where `condition` holds."""
    combiner: CommReducer
    source: tuple
    axis: tuple
    condition: Expr
    value_index: int
    init: tuple = ()


@dataclass(frozen=True, eq=False)
class Ramp(Expr):
    """The vector (base, base+stride, ..., base+(lanes-1)*stride)."""
    base: Expr
    stride: Expr
    lanes: int


@dataclass(frozen=True, eq=False)
class Broadcast(Expr):
    value: Expr
    lanes: int


# ---------------------------------------------------------------------------------------
# Construction helpers: conversion, promotion, constant folding.

def const(value, dtype: str | None = None) -> Const:
    """te.const: a literal of `dtype` (int32 / float32 / bool inferred from the value)."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -2**31 <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise DTypeError(f"te.const: value must be a Python bool, int or float, "
                             f"got {type(value).__name__}")
    dtype = dt.check_dtype(dtype)
    return Const(dtype, _convert_value(value, dtype))


def _convert_value(value, dtype: str):
    if dt.is_bool(dtype):
        return bool(value)
    if dt.is_float(dtype):
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise DTypeError(f"te.const: {value!r} is not an integer but the dtype is {dtype}")
    value = int(value)
    lo, hi = dt.int_range(dtype)
    if not lo <= value <= hi:
        raise DTypeError(f"te.const: {value} does not fit {dt.base(dtype)} ({lo}..{hi})")
    return value


def _truncdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def as_expr(value, hint: str | None = None) -> Expr:
    """Convert a Python number, an IterVar or an Expr to an Expr (hint: dtype for numbers)."""
    if isinstance(value, Expr):
        return value
    var = getattr(value, "var", None)  # IterVar, without importing tensor.py
    if isinstance(var, Var):
        return var
    if isinstance(value, (bool, int, float)):
        if hint is not None:
            if isinstance(value, float) and not dt.is_float(hint):
                return const(value, "float32")
            if isinstance(value, int) and not isinstance(value, bool) and dt.is_bool(hint):
                return const(value, "int32")
            return const(value, dt.base(hint))
        return const(value)
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return const(value.item(), str(value.dtype))  # numpy scalar
    raise TEError(f"cannot use a value of type {type(value).__name__} in an expression "
                  f"(expected an expression, an axis or a number)")


def zero_like(x) -> Expr:
    e = as_expr(x)
    return Const(e.dtype, _convert_value(0, e.dtype))


def cast(value, dtype: str) -> Expr:
    """expr.astype(dtype): convert, folding constants."""
    e = as_expr(value)
    dtype = dt.check_dtype(dt.base(dtype), "astype dtype")
    dtype = dt.with_lanes(dtype, dt.lanes(e.dtype))
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        v = e.value
        if dt.is_bool(dtype):
            v = bool(v)
        elif dt.is_float(dtype):
            v = float(v)
        else:
            v = dt.wrap(int(math.trunc(v)) if isinstance(v, float) else int(v), dtype)
        return Const(dtype, v)
    return Cast(dtype, e)


def _operands(a, b) -> tuple[Expr, Expr]:
    """Convert both operands and promote them to a common dtype."""
    if isinstance(a, (bool, int, float)) and not isinstance(b, (bool, int, float)):
        eb = as_expr(b)
        ea = as_expr(a, eb.dtype)
    else:
        ea = as_expr(a)
        eb = as_expr(b, ea.dtype)
    la, lb = dt.lanes(ea.dtype), dt.lanes(eb.dtype)
    target = dt.promote(ea.dtype, eb.dtype)
    ea, eb = cast(ea, target), cast(eb, target)
    if la != lb:  # a scalar next to a vector is broadcast
        if la == 1:
            ea = Broadcast(dt.with_lanes(ea.dtype, lb), ea, lb)
        elif lb == 1:
            eb = Broadcast(dt.with_lanes(eb.dtype, la), eb, la)
        else:
            raise DTypeError(f"cannot combine vectors of {la} and {lb} lanes")
    return ea, eb


def _floor_float(x, y):
    return math.floor(x / y)


# Constant folding: op -> (integer rule, float rule). Integer results are wrapped to the
# dtype by fold(); division by zero is never folded (the generated code decides).
_FOLD = {
    "add": (lambda x, y: x + y, lambda x, y: x + y),
    "sub": (lambda x, y: x - y, lambda x, y: x - y),
    "mul": (lambda x, y: x * y, lambda x, y: x * y),
    "div": (None, lambda x, y: x / y),
    "floordiv": (lambda x, y: x // y, _floor_float),
    # Python's float % is numpy's: the exact fmod, moved by y when the signs differ
    "floormod": (lambda x, y: x % y, lambda x, y: x % y),
    "truncdiv": (lambda x, y: _truncdiv(x, y), lambda x, y: math.trunc(x / y)),
    "truncmod": (lambda x, y: x - _truncdiv(x, y) * y, math.fmod),
    "min": (min, min),
    "max": (max, max),
    # Python's & | ^ on ints are two's complement ones of unbounded width: wrapped to the
    # dtype, the generated code's answers (floats never reach here: binary() refuses them)
    "bitwise_and": (lambda x, y: x & y, None),
    "bitwise_or": (lambda x, y: x | y, None),
    "bitwise_xor": (lambda x, y: x ^ y, None),
    "lt": (lambda x, y: x < y,) * 2,
    "le": (lambda x, y: x <= y,) * 2,
    "gt": (lambda x, y: x > y,) * 2,
    "ge": (lambda x, y: x >= y,) * 2,
    "eq": (lambda x, y: x == y,) * 2,
    "ne": (lambda x, y: x != y,) * 2,
}


def fold(op: str, x, y, dtype: str):
    """`x op y` of two Python constants of `dtype`, as the generated code computes it (an
    integer result wraps to the dtype's width); None when it cannot be folded."""
    if op in SHIFT_OPS and dt.is_integral(dtype):
        return fold_shift(op, x, y, dtype)
    rules = _FOLD.get(op)
    if rules is None or (op in ("div", "floordiv", "floormod", "truncdiv", "truncmod")
                         and y == 0):
        return None
    rule = rules[1] if dt.is_float(dtype) else rules[0]
    if rule is None:
        return None
    value = rule(x, y)
    return dt.wrap(int(value), dtype) if dt.is_integral(dtype) and op not in COMPARE_OPS \
        else value


def fold_shift(op: str, x: int, y: int, dtype: str) -> int:
    """x << y or x >> y (arithmetic for a signed x) in integer `dtype`, as numpy computes
    it: an amount y outside [0, bits) shifts every bit out, giving 0, or -1 for a negative
    x shifted right (C and LLVM leave those amounts undefined)."""
    if not 0 <= y < dt.bits(dtype):
        return -1 if op == "shift_right" and x < 0 else 0
    return dt.wrap(x << y, dtype) if op == "shift_left" else x >> y


def check_integer(who: str, dtype: str) -> None:
    """Refuse a bitwise operator or shift (`who`, as te names it) of non-integer `dtype`."""
    if dt.is_integral(dtype):
        return
    hint = f" (te.logical_{who[8:]} is the bool one)" if dt.is_bool(dtype) and \
        who in ("bitwise_and", "bitwise_or", "bitwise_not") else ""
    raise DTypeError(f"te.{who}: expected integer operands, got dtype {dtype}{hint}")


def binary(op: str, a, b) -> Expr:
    """Build `a op b` with dtype promotion and constant folding."""
    ea, eb = _operands(a, b)
    if op in BITWISE_OPS:
        check_integer(op, ea.dtype)
    if op == "div" and not dt.is_float(ea.dtype):
        raise DTypeError("integer division with '/' is ambiguous: use '//' (floor), "
                         "te.truncdiv, or cast an operand to a float dtype first")
    if op in ("floormod", "truncmod") and dt.is_bool(ea.dtype):
        raise DTypeError(f"{op} is not defined for bool operands")
    rtype = dt.with_lanes("bool", dt.lanes(ea.dtype)) if op in COMPARE_OPS else ea.dtype
    if isinstance(ea, Const) and isinstance(eb, Const):
        folded = fold(op, ea.value, eb.value, ea.dtype)
        if folded is not None:
            return Const(rtype, _convert_value(folded, rtype))
    return Binary(rtype, op, ea, eb)


def bitwise_not(a) -> Expr:
    """~a of an integer expression: a xor all-ones (LLVM's own form of `not`), so every
    layer that knows bitwise_xor computes it; the CUDA code writes it as `~a`."""
    e = as_expr(a)
    check_integer("bitwise_not", e.dtype)
    return binary("bitwise_xor", e, all_ones(dt.base(e.dtype)))


def all_ones(dtype: str) -> Const:
    """The integer of `dtype` with every bit set: -1, or the largest unsigned value."""
    return Const(dtype, dt.wrap(-1, dtype))


def _is_integer_operand(x) -> bool:
    """A Python int (not a bool) or an integer expression."""
    if isinstance(x, (bool, float)):
        return False
    return isinstance(x, int) or dt.is_integral(as_expr(x).dtype)


def _is_bool_operand(x) -> bool:
    return isinstance(x, bool) or (not isinstance(x, (int, float))
                                   and dt.is_bool(as_expr(x).dtype))


def _bit_or_logic(op: str, a, b) -> Expr:
    """a & b, a | b, a ^ b: bitwise when both operands are integers (TVM's PrimExpr
    operators), else logical on the operands' truth values, as te's & and | have always
    been for conditions (a float operand included, kept as it was). ^ is new: logical
    where a bool takes part, otherwise bitwise, so it refuses floats."""
    if _is_integer_operand(a) and _is_integer_operand(b):
        return binary(f"bitwise_{op}", a, b)
    if op != "xor":
        return logical(op, a, b)
    if _is_bool_operand(a) or _is_bool_operand(b):
        return binary("ne", cast(as_expr(a), "bool"), cast(as_expr(b), "bool"))
    return binary("bitwise_xor", a, b)


def logical(op: str, a, b) -> Expr:
    ea, eb = cast(as_expr(a), "bool"), cast(as_expr(b), "bool")
    if isinstance(ea, Const) and isinstance(eb, Const):
        return const(bool(ea.value and eb.value) if op == "and" else bool(ea.value or eb.value))
    return Binary(ea.dtype, op, ea, eb)


def logical_not(a) -> Expr:
    ea = cast(as_expr(a), "bool")
    if isinstance(ea, Const):
        return const(not ea.value)
    return Not(ea.dtype, ea)


def select(cond, true_value, false_value) -> Expr:
    """te.if_then_else: lazily evaluated conditional."""
    c = as_expr(cond)
    if not dt.is_bool(c.dtype):
        raise DTypeError(f"if_then_else: cond must be a bool expression, got dtype {c.dtype}")
    t, f = _operands(true_value, false_value)
    if isinstance(c, Const):
        return t if c.value else f
    return Select(t.dtype, c, t, f)


FLOAT_INTRINSICS = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
                    "ceil", "round", "sin", "cos", "log2", "log10", "exp2", "trunc", "tan",
                    "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")


def call_intrinsic(name: str, x) -> Expr:
    e = as_expr(x)
    if not dt.is_float(e.dtype):
        raise DTypeError(f"te.{name}: expected a float expression, got dtype {e.dtype}; "
                         f"use .astype('float32') first")
    return Call(e.dtype, name, (e,))


def abs_(x) -> Expr:
    e = as_expr(x)
    if dt.is_uint(e.dtype) or dt.is_bool(e.dtype):
        return e
    return Call(e.dtype, "abs", (e,))


def power(a, b) -> Expr:
    ea, eb = _operands(a, b)
    if not dt.is_float(ea.dtype):
        raise DTypeError(f"te.power: expected float operands, got dtype {ea.dtype}")
    return Call(ea.dtype, "pow", (ea, eb))


def call_extern(dtype: str, name: str, *args) -> Expr:
    return Call(dt.check_dtype(dtype), name, tuple(as_expr(a) for a in args), extern=True)


# ---------------------------------------------------------------------------------------
# Generic traversal used by every layer: children, rebuilding, substitution, equality.

# Per node class: its sub-expressions, and how to rebuild it with new ones (same order).
# A table lookup by exact type keeps these two hot functions cheap. Nodes defined in later
# layers (ir.Load) provide expr_children / with_expr_children methods instead.
_CHILDREN = {
    Var: lambda e: (),
    Const: lambda e: (),
    Cast: lambda e: (e.value,),
    Not: lambda e: (e.a,),
    Binary: lambda e: (e.a, e.b),
    Select: lambda e: (e.cond, e.true_value, e.false_value),
    Call: lambda e: e.args,
    TensorLoad: lambda e: e.indices,
    Reduce: lambda e: e.source + (e.condition,) + e.init,
    Ramp: lambda e: (e.base, e.stride),
    Broadcast: lambda e: (e.value,),
}


def _new(e, **fields):
    """A copy of frozen node e with some fields replaced (dataclasses.replace, but cheaper:
    nodes have no __post_init__ or init-only fields)."""
    out = object.__new__(type(e))
    out.__dict__.update(e.__dict__)
    out.__dict__.update(fields)
    return out


def _reduce_with(e, new):
    n = len(e.source)
    return _new(e, source=tuple(new[:n]), condition=new[n], init=tuple(new[n + 1:]))


_WITH_CHILDREN = {
    Cast: lambda e, new: _new(e, value=new[0]),
    Not: lambda e, new: _new(e, a=new[0]),
    Binary: lambda e, new: _new(e, a=new[0], b=new[1]),
    Select: lambda e, new: _new(e, cond=new[0], true_value=new[1], false_value=new[2]),
    Call: lambda e, new: _new(e, args=tuple(new)),
    TensorLoad: lambda e, new: _new(e, indices=tuple(new)),
    Reduce: _reduce_with,
    Ramp: lambda e, new: _new(e, base=new[0], stride=new[1]),
    Broadcast: lambda e, new: _new(e, value=new[0]),
}


def children(e: Expr) -> tuple:
    """The sub-expressions of `e`, in field order."""
    rule = _CHILDREN.get(type(e))
    if rule is not None:
        return rule(e)
    kids = getattr(e, "expr_children", None)
    if kids is not None:
        return kids()
    raise TEError(f"unknown expression node {type(e).__name__}")


def with_children(e: Expr, new: tuple) -> Expr:
    """Rebuild `e` with new children (same order as `children`); returns e if unchanged."""
    old = children(e)
    if len(old) == len(new) and all(x is y for x, y in zip(old, new)):
        return e
    rule = _WITH_CHILDREN.get(type(e))
    if rule is not None:
        return rule(e, new)
    return e.with_expr_children(tuple(new))


# The walks below keep their own stack instead of recursing: an expression nests as deep
# as the user wrote it (x = x * 1.001 + 1 repeated in one lambda, or a chain of inlined
# stages), far past Python's recursion limit.

def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Post-order rewrite: children first, then fn(node) (None keeps the node)."""
    done: list = []  # rewritten subtrees, in the order their parents take them
    todo: list = [(e, None)]
    while todo:
        node, kids = todo.pop()
        if kids is None:
            kids = children(node)
            if kids:
                todo.append((node, kids))
                todo.extend((k, None) for k in reversed(kids))
                continue
        elif kids:
            new = done[len(done) - len(kids):]
            del done[len(done) - len(kids):]
            node = with_children(node, tuple(new))
        out = fn(node)
        done.append(node if out is None else out)
    return done[0]


def pre_order(e: Expr, fn: Callable[[Expr], None]) -> None:
    """fn(node) for every node of the tree, parents before children, left to right."""
    todo = [e]
    while todo:
        node = todo.pop()
        fn(node)
        todo.extend(reversed(children(node)))


def post_order(e: Expr, skip: Callable[[Expr], bool] | None = None) -> list:
    """The distinct nodes of `e` (by identity), every node after its children; the
    subtrees of nodes for which skip(node) holds are not entered (nor listed)."""
    out: list = []
    seen: set = set()
    todo: list = [(e, False)]
    while todo:
        node, expanded = todo.pop()
        if expanded:
            out.append(node)
            continue
        if id(node) in seen or (skip is not None and skip(node)):
            continue
        seen.add(id(node))
        todo.append((node, True))
        todo.extend((k, False) for k in reversed(children(node)))
    return out


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace Vars (keys, by identity) with expressions."""
    if not mapping:
        return e

    def rewrite(node):
        if isinstance(node, Var):
            return mapping.get(node)
        return None
    return transform(e, rewrite)


def free_vars(e: Expr) -> list:
    """Vars used in `e`, in first-use order, without duplicates."""
    seen: dict = {}

    def visit(node):
        if isinstance(node, Var):
            seen.setdefault(node, None)
        if isinstance(node, Reduce):  # reduce axes are bound by the reduction itself
            for iv in node.axis:
                for v in free_vars(iv.dom.min) + free_vars(iv.dom.extent):
                    seen.setdefault(v, None)
    pre_order(e, visit)
    return list(seen)


def structural_equal(a, b) -> bool:
    """Same tree shape, same fields; Vars, tensors and buffers compare by identity."""
    todo = [(a, b)]
    while todo:
        a, b = todo.pop()
        if a is b:
            continue
        if type(a) is not type(b) or isinstance(a, Var):
            return False
        if isinstance(a, Const):
            if a.dtype != b.dtype or a.value != b.value:
                return False
            continue
        if not isinstance(a, Expr):
            if a != b:
                return False
            continue
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, tuple):
                if not isinstance(y, tuple) or len(x) != len(y):
                    return False
                todo.extend(zip(x, y))
            elif isinstance(x, Expr):
                todo.append((x, y))
            elif x is not y and x != y:
                return False
    return True
