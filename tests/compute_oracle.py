"""An oracle for schedule tests that never lowers: the compute definitions evaluated directly.

Takes output tensors and numpy arrays for their placeholders, gives every output's value
computed by walking each ComputeOp's body over its whole domain with numpy (a reduction
folds its source over the reduce axes, in order, where its condition holds). Neither the
schedule, nor bound inference, nor loop building, nor the loop-IR interpreter is involved,
so a lowering bug that the interpreter shares (both run the same loop IR) still shows.
Integer arithmetic wraps in the operands' dtype, as the generated code does; a read
outside a tensor that the definition makes (not one an if_then_else keeps from being
evaluated) raises IndexError. Lives in tests/ because only tests need it; imports numpy
and te.compute only.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from te import dtype as dt
from te.compute import expr as E
from te.compute.tensor import ComputeOp, PlaceholderOp, Tensor


def evaluate(outputs, feeds: dict, sizes: dict | None = None,
             externs: dict | None = None) -> list:
    """The value of each tensor in `outputs` (a tensor or a list of them).

    feeds: placeholder tensor -> numpy array; sizes: te.var name -> int, for symbolic
    shapes; externs: call_extern name -> function on numpy arrays.
    """
    outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    ev = _Evaluator(feeds, sizes or {}, externs or {})
    with np.errstate(all="ignore"):  # integers wrap and floats overflow as in the kernels
        return [ev.tensor(t) for t in outs]


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(dt.base(dtype))


class _Evaluator:
    def __init__(self, feeds: dict, sizes: dict, externs: dict):
        self.values = {t: np.asarray(a) for t, a in feeds.items()}
        self.sizes, self.externs = sizes, externs

    def tensor(self, t: Tensor) -> np.ndarray:
        if t not in self.values:
            if isinstance(t.op, PlaceholderOp):
                raise KeyError(f"compute_oracle: no array given for placeholder '{t.name}'")
            self._compute(t.op)
        return self.values[t]

    def _scalar(self, e: E.Expr) -> int:
        """A shape or reduce-axis bound: constants and te.var sizes only."""
        value = self.expr(e, {}, None)
        if np.ndim(value) != 0:
            raise ValueError("compute_oracle: a domain bound depends on a loop variable")
        return int(value)

    def _compute(self, op: ComputeOp) -> None:
        shape = tuple(self._scalar(iv.dom.extent) for iv in op.axis)
        nd = len(shape) + len(op.reduce_axis)
        env = {iv.var: _axis_values(iv, self._scalar(iv.dom.min), n, k, nd)
               for k, (iv, n) in enumerate(zip(op.axis, shape))}
        if op.is_reduction:
            results = self._reduce(op, shape, env)
        else:
            results = [np.broadcast_to(self.expr(b, env, None), shape).astype(_np_dtype(b.dtype))
                       for b in op.body]
        for k, r in enumerate(results):
            self.values[op.output(k)] = np.ascontiguousarray(r)

    def _reduce(self, op: ComputeOp, shape: tuple, env: dict) -> list:
        """Fold the sources over the reduce domain, point by point in row-major order."""
        red = op.body[0]
        nd = len(shape) + len(op.reduce_axis)
        rshape = tuple(self._scalar(iv.dom.extent) for iv in op.reduce_axis)
        env = dict(env)
        for k, (iv, n) in enumerate(zip(op.reduce_axis, rshape)):
            env[iv.var] = _axis_values(iv, self._scalar(iv.dom.min), n, len(shape) + k, nd)
        full = shape + rshape
        cond = np.ones(full, bool)
        for c in _conjuncts(red.condition):  # each conjunct evaluated where the earlier hold
            cond &= np.broadcast_to(self.expr(c, env, cond), full)
        sources = [np.broadcast_to(self.expr(s, env, cond), full) for s in red.source]
        start = red.init if red.init else red.combiner.identity
        acc = [np.broadcast_to(self.expr(x, env, None), shape).astype(_np_dtype(x.dtype))
               for x in start]
        comb = red.combiner
        for point in np.ndindex(*rshape):
            where = (Ellipsis,) + point
            step = {v: a for v, a in zip(comb.lhs, acc)}
            step.update((v, s[where]) for v, s in zip(comb.rhs, sources))
            new = [self.expr(r, step, None) for r in comb.result]
            acc = [np.where(cond[where], n, a).astype(a.dtype) for n, a in zip(new, acc)]
        return acc

    # -- expressions over broadcast index arrays -------------------------------------------
    def expr(self, e: E.Expr, env: dict, mask) -> np.ndarray:
        """e's value at every point; `mask` (None: all) marks the points whose value is
        used, so a guarded read or division is only checked there."""
        rule = _RULES.get(type(e))
        if rule is None:
            raise TypeError(f"compute_oracle: cannot evaluate {type(e).__name__}")
        return rule(self, e, env, mask)

    def _var(self, e: E.Var, env: dict, mask):
        if e in env:
            return env[e]
        if e.name in self.sizes:
            return np.array(self.sizes[e.name], _np_dtype(e.dtype))
        raise KeyError(f"compute_oracle: no value for variable '{e.name}'")

    def _load(self, e: E.TensorLoad, env: dict, mask):
        arr = self.tensor(e.tensor)
        idx = [np.asarray(self.expr(i, env, mask)).astype(np.int64) for i in e.indices]
        shape = np.broadcast_shapes(*(i.shape for i in idx),
                                    *(() if mask is None else (mask.shape,)))
        active = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        safe = []
        for d, (i, n) in enumerate(zip(idx, arr.shape)):
            i = np.broadcast_to(i, shape)
            bad = active & ((i < 0) | (i >= n))
            if bad.any():
                raise IndexError(f"compute_oracle: '{e.tensor.name}' read at index "
                                 f"{int(i[bad][0])} of dimension {d}, which has extent {n}")
            safe.append(np.where(active, i, 0))
        return arr[tuple(safe)]

    def _binary(self, e: E.Binary, env: dict, mask):
        a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
        if e.op in ("and", "or"):
            return np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)
        kind = _np_dtype(e.a.dtype).kind
        if kind in "iu" and e.op in _DIVISIONS:
            b = _nonzero_divisor(b, mask)
        fn = (_INT_OPS if kind in "iub" else _FLOAT_OPS)[e.op]
        return np.asarray(fn(a, b))

    def _select(self, e: E.Select, env: dict, mask):
        c = np.asarray(self.expr(e.cond, env, mask), bool)
        base = True if mask is None else mask
        t = self.expr(e.true_value, env, base & c)
        f = self.expr(e.false_value, env, base & ~c)
        return np.where(c, t, f).astype(_np_dtype(e.dtype))

    def _call(self, e: E.Call, env: dict, mask):
        args = [self.expr(a, env, mask) for a in e.args]
        if e.extern:
            if e.name not in self.externs:
                raise KeyError(f"compute_oracle: no function given for extern '{e.name}'")
            fn = self.externs[e.name]
        else:
            fn = _intrinsic(e.name, _np_dtype(e.dtype))
        return np.asarray(fn(*args)).astype(_np_dtype(e.dtype))

    def _cast(self, e: E.Cast, env: dict, mask):
        v = np.asarray(self.expr(e.value, env, mask))
        return v != 0 if dt.is_bool(e.dtype) else v.astype(_np_dtype(e.dtype))


def _axis_values(iv, lo: int, n: int, k: int, nd: int) -> np.ndarray:
    """lo..lo+n-1 along dimension k of an nd-dimensional broadcast shape."""
    shape = [1] * nd
    shape[k] = n
    return (np.arange(n) + lo).astype(_np_dtype(iv.var.dtype)).reshape(shape)


def _conjuncts(cond: E.Expr) -> list:
    if isinstance(cond, E.Binary) and cond.op == "and":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


_DIVISIONS = ("div", "floordiv", "floormod", "truncdiv", "truncmod")


def _nonzero_divisor(b, mask):
    """Division by zero where the value is used is an error; elsewhere divide by one."""
    zero = np.asarray(b) == 0
    used = zero if mask is None else zero & mask
    if np.any(used):
        raise ZeroDivisionError("compute_oracle: integer division by zero")
    return np.where(zero, np.ones_like(b), b)


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


def _compare(name: str) -> Callable:
    return getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater",
                        "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}[name])


_COMMON = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum,
           "max": np.maximum, **{c: _compare(c) for c in E.COMPARE_OPS}}
_INT_OPS = {**_COMMON, "floordiv": np.floor_divide, "floormod": np.mod, "div": _trunc_div,
            "truncdiv": _trunc_div, "truncmod": lambda a, b: a - _trunc_div(a, b) * b}
_FLOAT_OPS = {**_COMMON, "div": np.divide, "floordiv": lambda a, b: np.floor(a / b),
              "floormod": np.mod,
              "truncdiv": lambda a, b: np.trunc(a / b), "truncmod": np.fmod}


def _intrinsic(name: str, dtype: np.dtype) -> Callable:
    one = dtype.type(1)
    table = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
        "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
        "sin": np.sin, "cos": np.cos, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
        "pow": np.power, "erf": np.vectorize(math.erf, otypes=[dtype]),
        "rsqrt": lambda x: one / np.sqrt(x), "sigmoid": lambda x: one / (one + np.exp(-x)),
        "likely": lambda x: x,
    }
    if name not in table:
        raise KeyError(f"compute_oracle: unknown intrinsic '{name}'")
    return table[name]


_RULES = {
    E.Var: _Evaluator._var,
    E.Const: lambda self, e, env, mask: np.array(e.value, _np_dtype(e.dtype)),
    E.Binary: _Evaluator._binary,
    E.Not: lambda self, e, env, mask: np.logical_not(self.expr(e.a, env, mask)),
    E.Select: _Evaluator._select,
    E.Call: _Evaluator._call,
    E.Cast: _Evaluator._cast,
    E.TensorLoad: _Evaluator._load,
}
