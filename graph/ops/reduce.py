"""Reductions over static axes: sum, mean, max, min, prod, L1, L2, sum of squares, log of
the sum (of exps); argmax and argmin; topk.

One compute for the family (te.compute.ops.reduction.reduce_over) with the per-element
map, the combiner and the final map as table data. Imports te's public API,
te.compute.ops and graph.ops.base.
"""
from __future__ import annotations

import te
from te.compute import ops as topi
from te.compute.ops.reduction import reduce_over

from .base import OpDef, Pattern

_prod = te.comm_reducer(lambda a, b: a * b, lambda dtype: te.const(1, dtype), name="prod")

# op -> (per-element map, combiner, map of the result and the element count: an int, or
# an expression where a reduced dim is symbolic)
REDUCE = {
    "reduce_sum": (lambda e: e, te.sum, None),
    "reduce_mean": (lambda e: e, te.sum, lambda r, count: r * (1.0 / count)
                    if isinstance(count, int) else r / count.astype(r.dtype)),
    "reduce_max": (lambda e: e, te.max, None),
    "reduce_min": (lambda e: e, te.min, None),
    "reduce_prod": (lambda e: e, _prod, None),
    "reduce_l1": (te.abs, te.sum, None),
    "reduce_l2": (lambda e: e * e, te.sum, lambda r, count: te.sqrt(r)),
    "reduce_sum_square": (lambda e: e * e, te.sum, None),
    "reduce_log_sum": (lambda e: e, te.sum, lambda r, count: te.log(r)),
    "reduce_log_sum_exp": (te.exp, te.sum, lambda r, count: te.log(r)),
}


def _reduce_def(name: str, pre, combine, post) -> OpDef:
    def compute(ins, axes, keepdims):
        x = ins[0]
        red = reduce_over(x, tuple(axes), bool(keepdims), name if post is None
                          else f"{name}_acc", "comm_reduce",
                          lambda full, raxes: combine(pre(x(*full)), axis=raxes))
        if post is None:
            return red
        count = 1  # an int, or an expression where a reduced dim is symbolic (a te.var)
        for a in axes:
            dim = x.shape[a]
            count = count * (int(dim.value) if hasattr(dim, "value") else dim)
        return te.compute(red.shape, lambda *i: post(red(*i), count), name=name,
                          tag="elemwise")
    return OpDef(name, Pattern.COMM_REDUCE, compute, doc=f"{name[7:]} over axes")


def _arg_def(name: str, fn) -> OpDef:
    def compute(ins, axis, keepdims):
        idx = fn(ins[0], axis, bool(keepdims), name=f"{name}_i32")
        return te.compute(idx.shape, lambda *i: idx(*i).astype("int64"), name=name,
                          tag="injective")
    return OpDef(name, Pattern.COMM_REDUCE, compute,
                 doc=f"int64 index of the first {name[3:]} along an axis")


def _scan_def(name: str, fn) -> OpDef:
    # opaque: a quadratic reduction per element, not a stage to fuse into its neighbours
    return OpDef(name, Pattern.OPAQUE, lambda ins, axis, exclusive, reverse: fn(
        ins[0], axis, bool(exclusive), bool(reverse), name=name),
        doc=f"running {name[3:]} along an axis (exclusive, reverse as ONNX)")


OPS = {**{n: _reduce_def(n, *row) for n, row in REDUCE.items()},
       "cumsum": _scan_def("cumsum", topi.cumsum),
       "cumprod": _scan_def("cumprod", topi.cumprod),
       "argmax": _arg_def("argmax", topi.argmax),
       "argmin": _arg_def("argmin", topi.argmin),
       # opaque, as the scans: a quadratic ranking of the axis, then k picks
       "topk": OpDef("topk", Pattern.OPAQUE, lambda ins, k, axis, largest: list(topi.topk(
           ins[0], k, axis, bool(largest), name="topk")),
           doc="the k largest or smallest values along an axis and their int64 indices")}
