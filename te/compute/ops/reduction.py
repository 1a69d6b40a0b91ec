"""Reductions over axes: sum, max, min (several axes, keepdims), argmax/argmin, cumsum and
cumprod.

Takes a te.Tensor and axes, gives one te.compute reduction stage (argmax/argmin: a two-output
stage from a tuple te.comm_reducer, returned as its index output). Imports te.compute (api,
tensor) and te.errors only; `sum`/`max`/`min` shadow the builtins in this module on purpose
(topi names), and the module never needs the builtins.
"""
from __future__ import annotations

from typing import Callable

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_tensor, normalize_axes, normalize_axis


def reduce_over(x: Tensor, axes: tuple, keepdims: bool, name: str, tag: str,
                make: Callable) -> Tensor:
    """A stage reducing x over `axes`: make(full_index, reduce_axes) gives its body."""
    raxes = {a: api.reduce_axis((0, x.shape[a]), f"k{a}" if len(axes) > 1 else "k")
             for a in axes}
    shape = tuple(1 if d in raxes else s for d, s in enumerate(x.shape)
                  if keepdims or d not in raxes)
    if not shape:
        raise ShapeError(f"{name}: reducing every axis without keepdims would give a 0-d "
                         f"tensor, which te.compute cannot declare; pass keepdims=True")

    def fcompute(*i):
        it = iter(i)
        full = []
        for d in range(x.ndim):
            if d in raxes:
                full.append(raxes[d])
                if keepdims:
                    next(it)
            else:
                full.append(next(it))
        return make(full, [raxes[a] for a in axes])
    return api.compute(shape, fcompute, name=name, tag=tag)


def _simple(reducer, who: str, default_name: str):
    def op(x: Tensor, axis=None, keepdims: bool = False, name: str = default_name) -> Tensor:
        check_tensor(x, who, "x")
        axes = normalize_axes(axis, x.ndim, who)
        return reduce_over(x, axes, keepdims, name, "comm_reduce",
                           lambda full, raxes: reducer(x(*full), axis=raxes))
    op.__name__ = who
    op.__doc__ = (f"{who} of x over `axis` (an int, a sequence of ints or None for all); "
                  f"keepdims keeps reduced dims as size 1.")
    return op


sum = _simple(api.sum, "sum", "T_sum")  # noqa: A001
max = _simple(api.max, "max", "T_max")  # noqa: A001
min = _simple(api.min, "min", "T_min")  # noqa: A001


def _arg_reducer(better: Callable, worst: Callable, name: str):
    """(index, value) pairs; ties go to the smaller index, so the order of combination
    (splits, rfactor) cannot change the answer and it matches numpy's first occurrence."""
    def combine(x, y):
        take_x = better(x[1], y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
        return (api.if_then_else(take_x, x[0], y[0]), api.if_then_else(take_x, x[1], y[1]))

    def identity(index_dtype, value_dtype):
        return api.max_value(index_dtype), worst(value_dtype)
    return api.comm_reducer(combine, identity, name=name)


_argmax = _arg_reducer(lambda a, b: a > b, api.min_value, "argmax")
_argmin = _arg_reducer(lambda a, b: a < b, api.max_value, "argmin")


def _arg(reducer, who: str, x: Tensor, axis: int, keepdims: bool, name: str) -> Tensor:
    check_tensor(x, who, "x")
    axis = normalize_axis(axis, x.ndim, who)

    def make(full, raxes):
        return reducer((raxes[0].var, x(*full)), axis=raxes)
    idx, _value = reduce_over(x, (axis,), keepdims, f"{name}_red", "comm_reduce_idx", make)
    # te.lower wants every output of a stage it writes; copying the index out leaves the
    # two-output reduction an intermediate stage (inlinable only into nothing: attach it).
    return api.compute(idx.shape, lambda *i: idx(*i), name=name, tag="injective")


def argmax(x: Tensor, axis: int, keepdims: bool = False, name: str = "T_argmax") -> Tensor:
    """int32 index of the first maximum along `axis`: a copy of output 0 of the two-output
    stage <name>_red (index, max value) = returned.op.input_tensors[0].op."""
    return _arg(_argmax, "argmax", x, axis, keepdims, name)


def argmin(x: Tensor, axis: int, keepdims: bool = False, name: str = "T_argmin") -> Tensor:
    """int32 index of the first minimum along `axis` (stage <name>_red as for argmax)."""
    return _arg(_argmin, "argmin", x, axis, keepdims, name)


def _scan(reducer, who: str, x: Tensor, axis: int, exclusive: bool, reverse: bool,
          name: str) -> Tensor:
    """A running reduction along `axis` (exclusive: the element itself is left out;
    reverse: from the end), written as a reduction over k with where=k <= i: quadratic
    work, for small axes."""
    check_tensor(x, who, "x")
    axis = normalize_axis(axis, x.ndim, who)
    k = api.reduce_axis((0, x.shape[axis]), "k")

    def fcompute(*i):
        index = list(i)
        index[axis] = k
        lo, hi = (i[axis], k) if reverse else (k, i[axis])
        return reducer(x(*index), axis=k, where=lo < hi if exclusive else lo <= hi)
    return api.compute(x.shape, fcompute, name=name, tag="scan")


_product = api.comm_reducer(lambda a, b: a * b, lambda dtype: api.const(1, dtype),
                            name="prod")


def cumsum(x: Tensor, axis: int = 0, exclusive: bool = False, reverse: bool = False,
           name: str = "T_cumsum") -> Tensor:
    """Running sum along `axis` (ONNX CumSum: exclusive, reverse)."""
    return _scan(api.sum, "cumsum", x, axis, exclusive, reverse, name)


def cumprod(x: Tensor, axis: int = 0, exclusive: bool = False, reverse: bool = False,
            name: str = "T_cumprod") -> Tensor:
    """Running product along `axis` (ONNX CumProd: exclusive, reverse)."""
    return _scan(_product, "cumprod", x, axis, exclusive, reverse, name)


def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True,
         name: str = "T_topk") -> tuple:
    """(values, int64 indices) of the k largest (or smallest) elements along `axis`, in
    order, ties to the smaller index (ONNX TopK, torch.topk's order). Quadratic work, for
    short axes: stage '<name>_rank' counts, per element, the elements that come before it
    (greater, or equal at a smaller index); output r is the element whose rank is r."""
    check_tensor(x, "topk", "x")
    axis = normalize_axis(axis, x.ndim, "topk")
    n = x.shape[axis]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1 or \
            (hasattr(n, "value") and k > int(n.value)):
        raise ShapeError(f"topk: k must be an int from 1 to the axis' length {n}, got {k!r}")
    j = api.reduce_axis((0, n), "j")

    def at(i, v):
        index = list(i)
        index[axis] = v
        return x(*index)

    def rank(*i):
        xi, xj = at(i, i[axis]), at(i, j)
        nan_i, nan_j = xi != xi, xj != xj     # NaN orders above every number (torch.topk)
        numbers = api.logical_not(nan_i) & api.logical_not(nan_j)
        if largest:
            ahead = (nan_j & api.logical_not(nan_i)) | (numbers & (xj > xi))
        else:
            ahead = (nan_i & api.logical_not(nan_j)) | (numbers & (xj < xi))
        tie = (xj == xi) | (nan_i & nan_j)
        return api.sum(api.if_then_else(ahead | (tie & (j < i[axis])), 1, 0), axis=j)
    ranks = api.compute(x.shape, rank, name=f"{name}_rank", tag="topk_rank")
    shape = tuple(k if d == axis else x.shape[d] for d in range(x.ndim))

    def pick(value_of, dtype, stage):
        def fcompute(*i):
            m = api.reduce_axis((0, n), "m")
            index = list(i)
            index[axis] = m
            hit = ranks(*index) == i[axis]
            return api.sum(api.if_then_else(hit, value_of(i, m), api.const(0, dtype)),
                           axis=m)
        return api.compute(shape, fcompute, name=f"{name}_{stage}", tag="topk_pick")
    values = pick(lambda i, m: at(i, m), x.dtype, "values")
    indices = pick(lambda i, m: m.astype("int64"), "int64", "indices")
    return values, indices


__all__ = ["sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "reduce_over", "topk"]
