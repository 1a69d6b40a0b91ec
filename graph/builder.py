"""Building graphs in Python: graph.input, graph.constant, and one function per op.

`apply(op, inputs, attrs)` makes a Node, infers its outputs' dtypes and shapes from the op
table and returns the output Value(s); the per-op functions (graph.add, graph.relu,
graph.reshape, ...; the nn ones in graph.nn) check and normalize attributes first. Python
numbers and numpy arrays given as operands become constants. Imports numpy, te's public API
and graph.{errors,ir,ops}.
"""
from __future__ import annotations

import itertools

import numpy as np

import te
from te.errors import TEError

from .errors import GraphError, UnsupportedError
from .ir import Node, Value
from .ops import BINARY, OPS, REDUCE, UNARY, infer

_counter = itertools.count()


def _fresh(prefix: str) -> str:
    return f"{prefix}_{next(_counter)}"


def input(name: str, shape, dtype: str = "float32") -> Value:  # noqa: A001  (Relay's name)
    """A graph input: dims are ints, or te.var / strings for symbolic sizes."""
    if not isinstance(name, str) or not name:
        raise GraphError(f"graph.input: name must be a non-empty string, got {name!r}")
    try:
        dtype = te.placeholder((1,), dtype=dtype).dtype
    except TEError as e:
        raise GraphError(f"graph.input '{name}': {e}") from None
    dims = []
    for d in shape:
        if isinstance(d, str):
            d = te.var(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1:
            d = int(d)
        elif not isinstance(d, te.Var):
            raise GraphError(f"graph.input '{name}': shape entries must be positive ints, "
                             f"names or te.var, got {tuple(shape)!r}")
        dims.append(d)
    return Value(name, dtype, tuple(dims))


def constant(data, name: str | None = None, dtype: str | None = None) -> Value:
    """A constant Value holding `data` (a numpy array or a Python number)."""
    arr = np.asarray(data, dtype=dtype) if dtype else np.asarray(data)
    if arr.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats default to the float32 of models
    try:
        te.placeholder((1,), dtype=arr.dtype.name)
    except TEError:
        raise GraphError(f"graph.constant: data has dtype {arr.dtype}, which te does not "
                         f"support") from None
    return Value(name or _fresh("const"), arr.dtype.name, tuple(arr.shape),
                 data=np.array(arr, order="C"))  # (not ascontiguousarray: 0-d stays 0-d)


def _as_value(v, like: str, op: str, k: int) -> Value:
    if isinstance(v, Value):
        return v
    if isinstance(v, (bool, int, float, np.number, np.ndarray)):
        return constant(np.asarray(v, dtype=like))
    raise GraphError(f"graph.{op}: input {k} must be a graph Value, a number or a numpy "
                     f"array, got {type(v).__name__}")


def apply(op: str, inputs, attrs: dict | None = None, name: str | None = None,
          output_names=None):
    """Add one `op` node; returns its output Value (a tuple for multi-output ops)."""
    if op not in OPS:
        raise GraphError(f"graph: unknown op '{op}'")
    inputs = list(inputs)
    like = next((v.dtype for v in inputs if isinstance(v, Value)), "float32")
    inputs = tuple(_as_value(v, like, op, k) for k, v in enumerate(inputs))
    attrs = dict(attrs or {})
    name = name or _fresh(op)
    empty = [v.name for v in inputs if _empty(v.shape)]
    types = [] if empty else infer(OPS[op], [(v.dtype, v.shape) for v in inputs], attrs, name)
    empty += [f"output {k}" for k, (_, shape) in enumerate(types) if _empty(shape)]
    if empty:
        raise UnsupportedError(f"{op} '{name}': '{empty[0]}' is a zero-size (empty) tensor; "
                               f"ops on empty tensors are not supported")
    node = Node(op, inputs, tuple(attrs.items()), name)
    names = list(output_names or ())
    names += [name if len(types) == 1 and not names else f"{name}:{k}"
              for k in range(len(names), len(types))]
    node.outputs = tuple(Value(n, dt, shape, node, k)
                         for k, (n, (dt, shape)) in enumerate(zip(names, types)))
    return node.outputs[0] if len(types) == 1 else node.outputs


def _empty(shape) -> bool:
    return any(isinstance(d, int) and d == 0 for d in shape)


def _unary(op: str):
    def f(x, name: str | None = None, **attrs):
        return apply(op, [x], attrs, name)
    f.__name__ = op
    f.__doc__ = f"Elementwise {op} (attributes: the op table's keyword arguments)."
    return f


def _binary(op: str):
    def f(lhs, rhs, name: str | None = None):
        return apply(op, [lhs, rhs], {}, name)
    f.__name__ = op
    f.__doc__ = f"{op}(lhs, rhs) with numpy broadcasting."
    return f


def _reduce(op: str):
    def f(x, axis=None, keepdims: bool = True, name: str | None = None):
        axes = tuple(range(len(x.shape))) if axis is None else normalize_axes(
            axis, len(x.shape), op)
        return apply(op, [x], {"axes": axes, "keepdims": int(bool(keepdims))}, name)
    f.__name__ = op
    f.__doc__ = f"{op} over `axis` (an int, ints, or None for all); keepdims as ONNX."
    return f


def normalize_axes(axis, ndim: int, who: str, param: str = "axis") -> tuple:
    """An int or ints in [-ndim, ndim) -> sorted distinct non-negative axes."""
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not (
                -ndim <= a < ndim):
            raise GraphError(f"graph.{who}: {param} must be ints in [{-ndim}, {ndim - 1}], "
                             f"got {axis!r}")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise GraphError(f"graph.{who}: {param} must not repeat an axis, got {axis!r}")
    return tuple(sorted(out))


# cast and clip check their attributes first: graph.transform defines them
UNARY_FUNCTIONS = {op: _unary(op) for op in UNARY if op not in ("cast", "clip")}
BINARY_FUNCTIONS = {op: _binary(op) for op in BINARY}
REDUCE_FUNCTIONS = {op: _reduce(op) for op in REDUCE}
