"""Reference interpreter of flattened loop IR on numpy arrays: the executable semantics.

Takes a PrimFunc after storage flattening (Allocate/Store/Load) and numpy arrays, runs it in
place. The IR is compiled once into nested Python closures over a frame of variable slots,
then run. Values are numpy scalars (integer wraparound in the dtype's width) or numpy arrays
(vector lanes); integer division by zero gives 0 as in numpy. Strict: out-of-bounds accesses
raise OutOfBoundsError, unwritten Allocate memory reads as NaN / 0xA5 bytes.
Imports te.compute, te.dtype, te.errors and ir.py.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import dtype as dt
from ..compute import expr as E
from ..errors import TOO_DEEP, ArgumentError, TEError
from . import ir
from .func import PrimFunc


class InterpError(TEError):
    """The interpreter cannot run this IR (an unflattened node, an unbound variable...)."""


class OutOfBoundsError(InterpError, IndexError):
    """A Load or Store outside its buffer."""


def run_func(func: PrimFunc, args: list, scalars: dict | None = None,
             externs: dict | None = None) -> None:
    """Run `func` on `args` (numpy arrays, one per func.params, written in place).

    scalars maps scalar_params (Vars or their names) to ints; missing ones are read from the
    argument shapes. externs maps extern Call names to Python callables on numpy scalars.
    """
    if len(args) != len(func.params):
        raise ArgumentError(f"{func.name}: expected {len(func.params)} array arguments, "
                            f"got {len(args)}")
    values = _bind_scalars(func, args, scalars or {})
    flats = [_flat_arg(func.name, b, a, values) for b, a in zip(func.params, args)]
    c = _Compiler(externs or {})
    for v in list(values):
        c.bind(v)
    for b in func.params:
        c.bind_buffer(b)
    try:
        body = c.stmt(func.body)
        for v, x in values.items():
            c.frame[c.slots[v]] = x
        for b, a in zip(func.params, flats):
            c.bufs[c.buf_slots[b.data]] = a
        with np.errstate(all="ignore"):
            body()
    except RecursionError:
        # closures call the closures of their operands and bodies: one Python frame per
        # level, as deep as the IR nests
        raise InterpError(TOO_DEEP.format(who="interp", what="interpret")) from None


# ---------------------------------------------------------------------------------------
# Arguments

def _np_type(dtype: str):
    return np.dtype(dt.base(dtype)).type


def _bind_scalars(func: PrimFunc, args: list, given: dict) -> dict:
    by_name = {k: v for k, v in given.items() if isinstance(k, str)}
    values: dict = {}
    for v in func.scalar_params:
        x = given[v] if v in given else by_name.get(v.name)
        if x is not None:
            values[v] = _np_type(v.dtype)(x)
    for b, a in zip(func.params, args):
        for d, extent in enumerate(b.shape):
            if not isinstance(extent, E.Var):
                continue
            if np.ndim(a) != len(b.shape):
                if extent not in values:
                    raise ArgumentError(f"{func.name}: cannot read size '{extent.name}' from "
                                        f"argument '{b.name}' of shape {np.shape(a)}; "
                                        f"pass it in scalars")
                continue
            got = _np_type(extent.dtype)(np.shape(a)[d])
            if values.setdefault(extent, got) != got:
                raise ArgumentError(f"{func.name}: argument '{b.name}' dimension {d} is "
                                    f"{got}, but '{extent.name}' is {values[extent]}")
    for v in func.scalar_params:
        if v not in values:
            raise ArgumentError(f"{func.name}: no value for scalar parameter '{v.name}'")
    return values


def _flat_arg(fname: str, b: ir.Buffer, a, values: dict) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"{fname}: argument '{b.name}' must be a numpy array, "
                            f"got {type(a).__name__}")
    if a.dtype != np.dtype(dt.base(b.dtype)):
        raise ArgumentError(f"{fname}: argument '{b.name}' must have dtype {b.dtype}, "
                            f"got {a.dtype}")
    if not a.flags.c_contiguous:
        raise ArgumentError(f"{fname}: argument '{b.name}' must be C-contiguous")
    size = 1
    for extent in b.shape:
        size *= int(_const_eval(extent, values))
    if a.size != size:
        raise ArgumentError(f"{fname}: argument '{b.name}' has {a.size} elements, "
                            f"expected {size}")
    return a.reshape(-1)


def _const_eval(e, values: dict):
    c = _Compiler({})
    for v in values:
        c.bind(v)
    fn = c.expr(E.as_expr(e))
    for v, x in values.items():
        c.frame[c.slots[v]] = x
    return fn()


# ---------------------------------------------------------------------------------------
# Operations on numpy scalars and arrays

# Integer division follows numpy (run_func ignores its warnings): x // 0 and x % 0 are 0,
# MIN // -1 wraps to MIN and MIN % -1 is 0; the generated code gives the same answers.

def _int_floordiv(a, b):
    return a // b


def _int_floormod(a, b):
    return a % b


def _int_truncdiv(a, b):
    q = a // b
    fix = (a % b != 0) & ((a < 0) != (b < 0))
    return q + np.asarray(fix).astype(q.dtype)[()]


def _int_truncmod(a, b):
    return np.fmod(a, b)


def _float_floordiv(a, b):
    return np.floor(a / b)




# numpy's shifts give te's answers for every amount, the ones past the width included
_INT_OPS = {"floordiv": _int_floordiv, "floormod": _int_floormod,
            "truncdiv": _int_truncdiv, "truncmod": _int_truncmod,
            "div": _int_truncdiv, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
            "bitwise_xor": np.bitwise_xor, "shift_left": np.left_shift,
            "shift_right": np.right_shift}
_FLOAT_OPS = {"floordiv": _float_floordiv, "floormod": np.mod,
              "truncdiv": lambda a, b: np.trunc(a / b), "truncmod": np.fmod}


def _make_binary(op: str, dtype: str, fa, fb):
    """A closure computing `fa() op fb()`; the common ops are spelled out for speed."""
    if op == "add":
        return lambda: fa() + fb()
    if op == "sub":
        return lambda: fa() - fb()
    if op == "mul":
        return lambda: fa() * fb()
    if op == "lt":
        return lambda: fa() < fb()
    if op == "le":
        return lambda: fa() <= fb()
    if op == "gt":
        return lambda: fa() > fb()
    if op == "ge":
        return lambda: fa() >= fb()
    if op == "eq":
        return lambda: fa() == fb()
    if op == "ne":
        return lambda: fa() != fb()
    # Both sides always run, as in the generated code (no short-circuit).
    if op == "and":
        return lambda: fa() & fb()
    if op == "or":
        return lambda: fa() | fb()
    if op in ("min", "max"):
        if dt.is_float(dtype) or dt.lanes(dtype) > 1:
            fn = np.minimum if op == "min" else np.maximum
            return lambda: fn(fa(), fb())
        if op == "min":
            return lambda: min(fa(), fb())
        return lambda: max(fa(), fb())
    if dt.is_float(dtype):
        if op == "div":
            return lambda: fa() / fb()
        fn = _FLOAT_OPS[op]
    elif dt.is_uint(dtype) and op in ("truncdiv", "truncmod", "div"):
        fn = _INT_OPS["floor" + op[5:]] if op != "div" else _int_floordiv
    else:
        fn = _INT_OPS[op]
    return lambda: fn(fa(), fb())


def _erf(x):
    t = type(x) if np.ndim(x) == 0 else None
    if t is not None:
        return t(math.erf(float(x)))
    return np.array([math.erf(float(v)) for v in x], dtype=x.dtype)


def _intrinsic(name: str, dtype: str) -> Callable:
    one = _np_type(dtype)(1)
    table = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
        "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
        "sin": np.sin, "cos": np.cos, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
        "pow": np.power, "erf": _erf, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
        "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
        "acosh": np.arccosh, "atanh": np.arctanh,
        "rsqrt": lambda x: one / np.sqrt(x),
        "sigmoid": lambda x: one / (one + np.exp(-x)),
        "likely": lambda x: x,
    }
    if name not in table:
        raise InterpError(f"interp: unknown intrinsic '{name}'")
    return table[name]


def _cast(dtype: str, fv):
    target = _np_type(dtype)
    if dt.is_bool(dtype):
        return lambda: fv() != 0
    return lambda: fv().astype(target)


def _sentinel_array(dtype: str, n: int) -> np.ndarray:
    if dt.is_float(dtype):
        return np.full(n, np.nan, dtype=dt.base(dtype))
    if dt.is_bool(dtype):
        return np.ones(n, dtype=bool)
    a = np.empty(n, dtype=dt.base(dtype))
    a.view(np.uint8).fill(0xA5)
    return a


def _oob(buffer: ir.Buffer, index, size: int, what: str):
    return OutOfBoundsError(f"{what} {buffer.name}[{index}] is out of bounds: buffer "
                            f"'{buffer.name}' has {size} elements")


# ---------------------------------------------------------------------------------------
# Compilation to closures

class _Compiler:
    """Turns IR into closures reading Vars from `frame` and storage from `bufs` (by slot)."""

    def __init__(self, externs: dict):
        self.frame: list = []
        self.bufs: list = []
        self.slots: dict = {}      # Var -> frame index
        self.buf_slots: dict = {}  # buffer.data Var -> bufs index
        self.externs = externs
        # while a side of a select on a lane-varying condition runs: the lanes that take it
        # (innermost last); vector loads read only those, as codegen's masked loads do
        self.lane_masks: list = []

    def bind(self, v: E.Var) -> int:
        if v not in self.slots:
            self.slots[v] = len(self.frame)
            self.frame.append(None)
        return self.slots[v]

    def bind_buffer(self, b: ir.Buffer) -> int:
        if b.data not in self.buf_slots:
            self.buf_slots[b.data] = len(self.bufs)
            self.bufs.append(None)
        return self.buf_slots[b.data]

    def buffer_slot(self, b: ir.Buffer) -> int:
        k = self.buf_slots.get(b.data)
        if k is None:
            raise InterpError(f"interp: buffer '{b.name}' is used outside its Allocate and is "
                              f"not a parameter")
        return k

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: ir.Stmt) -> Callable:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise InterpError(f"interp runs flattened IR only; got {type(s).__name__} "
                              f"(run storage flattening first)")
        return method(s)

    def stmt_SeqStmt(self, s: ir.SeqStmt) -> Callable:
        fns = tuple(self.stmt(x) for x in s.stmts)

        def run():
            for fn in fns:
                fn()
        return run

    def stmt_For(self, s: ir.For) -> Callable:
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        k, frame = self.bind(s.loop_var), self.frame
        body = self.stmt(s.body)
        t = np.dtype(dt.base(s.loop_var.dtype))

        def run():
            lo = fmin()
            for v in np.arange(lo, lo + fext(), dtype=t):
                frame[k] = v
                body()
        return run

    def stmt_ParallelTask(self, s: ir.ParallelTask) -> Callable:
        return self.stmt(s.loop)  # the iterations are independent: any order is one

    def stmt_IfThenElse(self, s: ir.IfThenElse) -> Callable:
        cond, then = self.expr(s.cond), self.stmt(s.then_case)
        other = self.stmt(s.else_case) if s.else_case is not None else None

        def run():
            if cond():
                then()
            elif other is not None:
                other()
        return run

    def stmt_Evaluate(self, s: ir.Evaluate) -> Callable:
        return self.expr(s.value)

    def stmt_LetStmt(self, s: ir.LetStmt) -> Callable:
        value = self.expr(s.value)
        k, frame = self.bind(s.var), self.frame
        body = self.stmt(s.body)

        def run():
            frame[k] = value()
            body()
        return run

    def stmt_ThreadAllreduce(self, s: ir.ThreadAllreduce) -> Callable:
        # the serial meaning (ir.ThreadAllreduce): the thread loops ran in turn, so each
        # value already holds the combination over the group
        values = [self.expr(x) for x in s.values]
        slots, frame = [self.bind(v) for v in s.results], self.frame
        body = self.stmt(s.body)

        def run():
            got = [value() for value in values]
            for k, x in zip(slots, got):
                frame[k] = x
            body()
        return run

    def stmt_Store(self, s: ir.Store) -> Callable:
        b, bufs, k = s.buffer, self.bufs, self.buffer_slot(s.buffer)
        index, value = self.expr(s.index), self.expr(s.value)
        if dt.lanes(s.index.dtype) > 1:
            def run_vector():
                i, arr = index(), bufs[k]
                if i.min() < 0 or i.max() >= arr.size:
                    raise _oob(b, list(i), arr.size, "store to")
                arr[i] = value()
            return run_vector

        def run():
            i, arr = index(), bufs[k]
            if not 0 <= i < arr.size:
                raise _oob(b, i, arr.size, "store to")
            arr[i] = value()
        return run

    def stmt_Allocate(self, s: ir.Allocate) -> Callable:
        extent = self.expr(s.extent)
        bufs = self.bufs
        k = len(bufs)  # a fresh slot: an inner Allocate may reuse the data Var of an outer one
        bufs.append(None)
        outer = self.buf_slots.get(s.buffer.data)
        self.buf_slots[s.buffer.data] = k
        body = self.stmt(s.body)
        if outer is None:
            del self.buf_slots[s.buffer.data]
        else:
            self.buf_slots[s.buffer.data] = outer
        dtype = s.buffer.dtype

        def run():
            bufs[k] = _sentinel_array(dtype, int(extent()))
            body()
            bufs[k] = None
        return run

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: E.Expr) -> Callable:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise InterpError(f"interp runs flattened IR only; got expression "
                              f"{type(e).__name__}")
        return method(e)

    def expr_Var(self, e: E.Var) -> Callable:
        k = self.slots.get(e)
        if k is None:
            raise InterpError(f"interp: variable '{e.name}' is used where it is not bound")
        frame = self.frame
        return lambda: frame[k]

    def expr_Const(self, e: E.Const) -> Callable:
        base, lanes = dt.split_lanes(e.dtype)
        value = _np_type(base)(e.value)
        if lanes > 1:
            vec = np.full(lanes, value)
            return lambda: vec.copy()
        return lambda: value

    def expr_Binary(self, e: E.Binary) -> Callable:
        return _make_binary(e.op, e.a.dtype, self.expr(e.a), self.expr(e.b))

    def expr_Not(self, e: E.Not) -> Callable:
        fa = self.expr(e.a)
        return lambda: ~fa()

    def expr_Cast(self, e: E.Cast) -> Callable:
        return _cast(e.dtype, self.expr(e.value))

    def expr_Select(self, e: E.Select) -> Callable:
        c, t, f = self.expr(e.cond), self.expr(e.true_value), self.expr(e.false_value)
        if dt.lanes(e.cond.dtype) > 1:
            masks = self.lane_masks
            return lambda: _vector_select(c(), t, f, masks)
        return lambda: t() if c() else f()

    def expr_Call(self, e: E.Call) -> Callable:
        args = tuple(self.expr(a) for a in e.args)
        if e.extern:
            fn = self.externs.get(e.name)
            if fn is None:
                raise InterpError(f"interp: extern function '{e.name}' is not given in externs")
        else:
            fn = _intrinsic(e.name, e.dtype)
        if len(args) == 1:
            (fa,) = args
            return lambda: fn(fa())
        return lambda: fn(*(a() for a in args))

    def expr_Ramp(self, e: E.Ramp) -> Callable:
        base, stride = self.expr(e.base), self.expr(e.stride)
        steps = np.arange(e.lanes, dtype=dt.base(e.base.dtype))
        return lambda: base() + stride() * steps

    def expr_Broadcast(self, e: E.Broadcast) -> Callable:
        value, lanes, t = self.expr(e.value), e.lanes, dt.base(e.dtype)
        return lambda: np.full(lanes, value(), dtype=t)

    def expr_Load(self, e: ir.Load) -> Callable:
        b, bufs, k = e.buffer, self.bufs, self.buffer_slot(e.buffer)
        index = self.expr(e.index)
        if dt.lanes(e.index.dtype) > 1:
            masks = self.lane_masks

            def load_vector():
                i, arr = index(), bufs[k]
                if masks:   # only the lanes of a masked select's side
                    lanes = masks[-1]
                    out = np.zeros(i.shape, arr.dtype)
                    if lanes.any():
                        out[lanes] = load_lanes(i[lanes], arr)
                    return out
                return load_lanes(i, arr)

            def load_lanes(i, arr):
                if i.min() < 0 or i.max() >= arr.size:
                    raise _oob(b, list(i), arr.size, "load from")
                return arr[i]
            return load_vector

        if isinstance(e.index, E.Var):  # the most common index: skip one closure call
            frame, slot = self.frame, self.slots[e.index]

            def load_var():
                i, arr = frame[slot], bufs[k]
                if not 0 <= i < arr.size:
                    raise _oob(b, i, arr.size, "load from")
                return arr[i]
            return load_var

        def load():
            i, arr = index(), bufs[k]
            if not 0 <= i < arr.size:
                raise _oob(b, i, arr.size, "load from")
            return arr[i]
        return load

    def expr_CheckedIndex(self, e: ir.CheckedIndex) -> Callable:
        """The run-time bounds check of te.build(..., instrument_bound_checkers=True)."""
        index, extent, name = self.expr(e.index), self.expr(e.extent), e.buffer.name
        masks = self.lane_masks

        def checked():
            i, n = index(), extent()
            outside = (i < 0) | (i >= n)
            if masks and np.shape(outside) == masks[-1].shape:  # a masked load's lanes
                outside = outside & masks[-1]
            bad = np.flatnonzero(outside)
            if bad.size:
                first = np.asarray(i).reshape(-1)[bad[0]]
                raise OutOfBoundsError(f"buffer '{name}': index {first} out of range "
                                       f"[0, {n})")
            return i
        return checked

    def expr_Prefetch(self, e: ir.Prefetch) -> Callable:
        """A cache hint: nothing is read, but the lowering promises an address inside the
        buffer, so the index is checked (it has no side effects to evaluate)."""
        b, bufs, k = e.load.buffer, self.bufs, self.buffer_slot(e.load.buffer)
        index = self.expr(e.load.index)

        def prefetch():
            i, arr = index(), bufs[k]
            if not 0 <= i < arr.size:
                raise _oob(b, i, arr.size, "prefetch of")
        return prefetch


def _vector_select(cond, t: Callable, f: Callable, masks: list):
    """Lane-wise select that evaluates a side only when some lane takes it: a broadcast
    condition guarding an out-of-bounds read (padding) must not read, as in the codegen.
    Where lanes differ, each side runs with its lanes pushed on `masks`, so its vector
    loads read only those (codegen's masked loads)."""
    if cond.all():
        return t()
    if not cond.any():
        return f()
    return np.where(cond, _masked(t, cond, masks), _masked(f, ~cond, masks))


def _masked(side: Callable, lanes, masks: list):
    masks.append(lanes if not masks else lanes & masks[-1])
    try:
        return side()
    finally:
        masks.pop()
