"""Scatter written as gather: ONNX ScatterElements, ScatterND and TensorScatter.

te.compute has no in-place stores: a stage defines each output element by an expression of
its own position. So every output element here looks at the updates that could be aimed at
it and compares their target index with its position: ScatterElements scans the indexed
axis (output elements x the indices' length along it), ScatterND every row of indices
(output elements x rows), TensorScatter computes its one candidate directly. Combining the
matches is a reduction over those candidates, started at the data's element (te's `init`):
a sum, product, max or min; with no reduction the last matching update wins, as onnxruntime
and onnx's reference apply the updates in order (a stage finds the last match's position,
a second reads that update or the data).

Index values follow numpy: a negative one counts from the end (once); one still outside the
axis matches no output position, so its update is dropped (onnxruntime rejects the run;
dropping it never reads or writes outside a tensor).
Imports te.compute (api, tensor), te.errors and the sibling _util only.
"""
from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_dim, check_tensor, fmt_shape, normalize_axis, same_dim, static_dim

REDUCTIONS = ("none", "add", "mul", "max", "min")

_product = api.comm_reducer(lambda a, b: a * b, lambda dtype: api.const(1, dtype),
                            name="prod")
_COMBINE = {"add": api.sum, "mul": _product, "max": api.max, "min": api.min}


def _check_inputs(who: str, data: Tensor, indices: Tensor, updates: Tensor,
                  reduction: str) -> None:
    """The three tensors, integer indices, updates of data's dtype, a known reduction that
    the dtype can combine (bool data takes only 'none')."""
    check_tensor(data, who, "data")
    check_tensor(indices, who, "indices")
    check_tensor(updates, who, "updates")
    if not indices.dtype.startswith(("int", "uint")):
        raise DTypeError(f"{who}: indices must have an integer dtype, got {indices.dtype}")
    if updates.dtype != data.dtype:
        raise DTypeError(f"{who}: updates must have data's dtype {data.dtype}, got "
                         f"{updates.dtype}")
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{who}: reduction must be one of {list(REDUCTIONS)}, got "
                         f"{reduction!r}")
    if reduction != "none" and data.dtype == "bool":
        raise DTypeError(f"{who}: reduction {reduction!r} needs numbers, got bool data")


def _wrap(j, extent):
    """An index value counted from the end where negative (numpy's rule, applied once), in
    the index's own dtype so that a wide value is not truncated into range."""
    return api.if_then_else(j < 0, j + api.const(extent, j.dtype) if isinstance(extent, int)
                            else j + extent.astype(j.dtype), j)


def _last_update(shape, hits, position, rows, name: str) -> Tensor:
    """Stage '<name>_last': per element of `shape`, the largest `position` among the
    candidates (reduce axes `rows`) whose hits(...) holds, -1 where none does."""
    def fcompute(*i):
        return api.max(position(), axis=rows, where=hits(i), init=-1)
    return api.compute(shape, fcompute, name=f"{name}_last", tag="scatter_last")


def scatter_elements(data: Tensor, indices: Tensor, updates: Tensor, axis: int = 0,
                     reduction: str = "none", name: str = "T_scatter_elements") -> Tensor:
    """ONNX ScatterElements: a copy of data where out[p with axis replaced by indices[p]]
    combines updates[p] for every position p of indices (updates has indices' shape, each
    dim at most data's). reduction 'none' keeps the last update aimed at an element; 'add',
    'mul', 'max', 'min' combine data's element with all of them. Negative indices count
    from the end; an index outside the axis is dropped (see the module). Work: data's
    elements times indices' length along the axis."""
    who = "scatter_elements"
    _check_inputs(who, data, indices, updates, reduction)
    axis = normalize_axis(axis, data.ndim, who)
    if indices.ndim != data.ndim or updates.ndim != data.ndim:
        raise ShapeError(f"{who}: indices and updates must have data's rank {data.ndim}, got "
                         f"shapes {fmt_shape(indices.shape)} and {fmt_shape(updates.shape)}")
    for d in range(data.ndim):
        check_dim(updates.shape[d], indices.shape[d], who, f"updates dim {d} (indices')")
        lo, hi = static_dim(indices.shape[d]), static_dim(data.shape[d])
        if d != axis and lo is not None and hi is not None and lo > hi:
            raise ShapeError(f"{who}: indices dim {d} must be at most data's {hi}, got {lo}")
    # dims where indices may be shorter than data: positions past them receive nothing
    short = [d for d in range(data.ndim) if d != axis
             and not same_dim(indices.shape[d], data.shape[d])]
    k = api.reduce_axis((0, indices.shape[axis]), "k")

    def source(i, at):
        """The indices/updates position for output position i and axis position `at`:
        a short dim's index clamped into range (the match is masked there anyway)."""
        return [at if d == axis else api.min(i[d], indices.shape[d] - 1) if d in short
                else i[d] for d in range(data.ndim)]

    def hits(i, at):
        target = _wrap(indices(*source(i, at)), data.shape[axis])
        inside = [i[d] < indices.shape[d] for d in short]
        return api.all(target == i[axis].astype(target.dtype), *inside)

    if reduction != "none":
        combine = _COMBINE[reduction]
        return api.compute(data.shape, lambda *i: combine(
            updates(*source(i, k.var)), axis=k, where=hits(i, k.var), init=data(*i)),
            name=name, tag="scatter")
    last = _last_update(data.shape, lambda i: hits(i, k.var), lambda: k.var, [k], name)

    def pick(*i):
        at = last(*i)
        return api.if_then_else(at >= 0, updates(*source(i, api.max(at, 0))), data(*i))
    return api.compute(data.shape, pick, name=name, tag="scatter")


def _read(updates: Tensor, row, rest):
    """updates at a row and the positions after the indexed dims; [0] when both are empty
    (the 0-d update of a single row that names one element)."""
    return updates(*([*row, *rest] or [0]))


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, reduction: str = "none",
               name: str = "T_scatter_nd") -> Tensor:
    """ONNX ScatterND: indices of shape (*rows, q) name q leading coordinates of data per
    row; updates (shape (*rows, *data.shape[q:])) are written there in row-major row order.
    reduction 'none' keeps the last row aimed at an element (stage '<name>_last' finds it
    for each of data.shape[:q], work: that times the rows); 'add', 'mul', 'max', 'min'
    combine data's element with every matching row (work: data's elements times the rows).
    Negative indices count from the end; a row with an index outside its axis is dropped."""
    who = "scatter_nd"
    _check_inputs(who, data, indices, updates, reduction)
    q = static_dim(indices.shape[-1]) if indices.ndim else None
    if q is None or not 1 <= q <= data.ndim:
        raise ShapeError(f"{who}: indices' last dim must be a constant from 1 to data's rank "
                         f"{data.ndim}, got shape {fmt_shape(indices.shape)}")
    rows = tuple(indices.shape[:-1])
    # a single row updating one element has a 0-d update: te's 1-element tensor
    want = rows + tuple(data.shape[q:]) or (1,)
    if updates.ndim != len(want):
        raise ShapeError(f"{who}: updates must have shape {fmt_shape(want)} (indices' rows, "
                         f"then data's dims after the first {q}), got "
                         f"{fmt_shape(updates.shape)}")
    for d, (got, expected) in enumerate(zip(updates.shape, want)):
        check_dim(got, expected, who, f"updates dim {d}")
    # one reduce axis per row dim; a single row (indices of rank 1) still gets a 1-long one
    raxes = [api.reduce_axis((0, r), f"r{k}") for k, r in enumerate(rows)] or \
        [api.reduce_axis((0, 1), "r")]
    row = [a.var for a in raxes] if rows else []

    def hits(i):
        return api.all(*[_wrap(indices(*row, c), data.shape[c]) == i[c].astype(indices.dtype)
                         for c in range(q)])

    if reduction != "none":
        combine = _COMBINE[reduction]
        return api.compute(data.shape, lambda *i: combine(
            _read(updates, row, i[q:]), axis=raxes, where=hits(i), init=data(*i)),
            name=name, tag="scatter")
    strides = [math.prod(rows[k + 1:]) for k in range(len(rows))]

    def linear():
        return sum((v * s for v, s in zip(row, strides)), api.const(0, "int32"))
    last = _last_update(tuple(data.shape[:q]), hits, linear, raxes, name)

    def pick(*i):
        at = last(*i[:q])
        lin = api.max(at, 0)
        unravel = [api.indexmod(api.indexdiv(lin, s), r) for s, r in zip(strides, rows)]
        return api.if_then_else(at >= 0, _read(updates, unravel, i[q:]), data(*i))
    return api.compute(data.shape, pick, name=name, tag="scatter")


def tensor_scatter(past: Tensor, update: Tensor, write_indices: Tensor | None = None,
                   axis: int = -2, circular: bool = False,
                   name: str = "T_tensor_scatter") -> Tensor:
    """ONNX TensorScatter (a KV-cache write): past with update's `axis` slice s written at
    position write_indices[b] + s of batch b (write_indices omitted: 0), modulo the axis'
    length when `circular`. One candidate per element, so no scan: out[..., t, ...] is
    update[..., t - w, ...] where that is inside update, else past. A linear write past
    either end of the axis is dropped."""
    who = "tensor_scatter"
    check_tensor(past, who, "past")
    check_tensor(update, who, "update")
    axis = normalize_axis(axis, past.ndim, who)
    if axis == 0:
        raise ShapeError(f"{who}: axis must not be 0 (the batch axis), got 0")
    if update.dtype != past.dtype:
        raise DTypeError(f"{who}: update must have past's dtype {past.dtype}, got "
                         f"{update.dtype}")
    if update.ndim != past.ndim:
        raise ShapeError(f"{who}: update must have past's rank {past.ndim}, got shape "
                         f"{fmt_shape(update.shape)}")
    for d in range(past.ndim):
        if d != axis:
            check_dim(update.shape[d], past.shape[d], who, f"update dim {d} (past's)")
    length, room = static_dim(update.shape[axis]), static_dim(past.shape[axis])
    if length is not None and room is not None and length > room:
        raise ShapeError(f"{who}: update's axis length must be at most past's {room}, got "
                         f"{length}")
    if write_indices is not None:
        check_tensor(write_indices, who, "write_indices", ndim=1)
        if not write_indices.dtype.startswith("int"):
            raise DTypeError(f"{who}: write_indices must have an integer dtype, got "
                             f"{write_indices.dtype}")
        check_dim(write_indices.shape[0], past.shape[0], who, "write_indices length")

    def fcompute(*i):
        offset = i[axis].astype("int64")
        if write_indices is not None:
            offset = offset - write_indices(i[0]).astype("int64")
        if circular:
            offset = api.floormod(offset, past.shape[axis].astype("int64"))
        hit = (offset >= 0) & (offset < update.shape[axis].astype("int64"))
        at = list(i)
        at[axis] = api.min(api.max(offset, 0), update.shape[axis].astype("int64") - 1)
        return api.if_then_else(hit, update(*[a.astype("int32") for a in at]), past(*i))
    return api.compute(past.shape, fcompute, name=name, tag="injective")


__all__ = ["scatter_elements", "scatter_nd", "tensor_scatter", "REDUCTIONS"]
