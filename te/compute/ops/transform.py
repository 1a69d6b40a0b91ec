"""Injective layout transforms: transpose, reshape, pad, concatenate, slice_axis, take,
gather_elements, tile.

Takes te.Tensors with static shapes (reshape/slice need constants to check sizes), gives one
te.compute stage each whose body is an index map (constant pad and concatenate select
with te.if_then_else; pad's other modes clamp, reflect or wrap the index). Imports
te.compute (api, expr, tensor) and te.errors only.
"""
from __future__ import annotations

from typing import Sequence

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import (check_tensor, const_like, fmt_shape, int_tuple, normalize_axis,
                    same_dim, static_dim)


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "T_transpose"
              ) -> Tensor:
    """Permute the dimensions: out.shape[k] = x.shape[axes[k]]; None reverses them."""
    check_tensor(x, "transpose", "x")
    n = x.ndim
    if axes is None:
        axes = tuple(reversed(range(n)))
    if not isinstance(axes, (tuple, list)) or len(axes) != n:
        raise ShapeError(f"transpose: axes must be a permutation of {n} axes, got {axes!r}")
    perm = [normalize_axis(a, n, "transpose", "axes") for a in axes]
    if sorted(perm) != list(range(n)):
        raise ShapeError(f"transpose: axes must be a permutation of 0..{n - 1}, got {axes!r}")
    inverse = [perm.index(d) for d in range(n)]
    return api.compute(tuple(x.shape[p] for p in perm),
                       lambda *i: x(*[i[inverse[d]] for d in range(n)]),
                       name=name, tag="injective")


def _static_shape(x: Tensor, who: str) -> tuple:
    dims = tuple(static_dim(s) for s in x.shape)
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: x must have a constant shape, got {fmt_shape(x.shape)}")
    return dims


def reshape(x: Tensor, newshape: Sequence[int], name: str = "T_reshape") -> Tensor:
    """Row-major reshape (numpy order); one entry of newshape may be -1."""
    check_tensor(x, "reshape", "x")
    old = _static_shape(x, "reshape")
    new = list(int_tuple(newshape if isinstance(newshape, (tuple, list)) else (newshape,),
                         len(newshape) if isinstance(newshape, (tuple, list)) else 1,
                         "reshape", "newshape"))
    total = 1
    for d in old:
        total *= d
    if new.count(-1) > 1 or any(d == 0 or d < -1 for d in new):
        raise ShapeError(f"reshape: newshape must hold positive sizes and at most one -1, "
                         f"got {tuple(newshape)}")
    if -1 in new:
        known = 1
        for d in new:
            known *= d if d != -1 else 1
        if total % known:
            raise ShapeError(f"reshape: cannot reshape {fmt_shape(old)} ({total} elements) "
                             f"to {tuple(newshape)}")
        new[new.index(-1)] = total // known
    size = 1
    for d in new:
        size *= d
    if size != total:
        raise ShapeError(f"reshape: newshape must hold {total} elements like "
                         f"{fmt_shape(old)}, got {tuple(newshape)} ({size} elements)")

    def fcompute(*i):
        flat = api.const(0)
        for idx, d in zip(i, new):
            flat = flat * d + idx
        index = []
        for d in reversed(old):
            index.append(api.indexmod(flat, d) if d != 1 else api.const(0))
            flat = api.indexdiv(flat, d)
        return x(*reversed(index))
    return api.compute(tuple(new), fcompute, name=name, tag="injective")


PAD_MODES = ("constant", "edge", "reflect", "wrap")


def pad(x: Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        pad_value=0.0, name: str = "T_pad", mode: str = "constant") -> Tensor:
    """numpy.pad with pad_before[k]/pad_after[k] elements around dim k, in mode 'constant'
    (pad_value), 'edge', 'reflect' or 'wrap'. A negative pad crops that many elements first
    (ONNX Pad; onnxruntime's order): the other modes then repeat the cropped tensor. One
    stage of index arithmetic (a clamp, a reflection, a modulo), so it inlines and fuses."""
    check_tensor(x, "pad", "x")
    if mode not in PAD_MODES:
        raise ShapeError(f"pad: mode must be one of {list(PAD_MODES)}, got {mode!r}")
    n = x.ndim
    before = int_tuple(pad_before, n, "pad", "pad_before")
    after = before if pad_after is None else int_tuple(pad_after, n, "pad", "pad_after")
    kept = pad_kept_sizes(x.shape, before, after, mode)
    value = const_like(pad_value, x.dtype)
    shape = tuple(s + b + a if (b or a) else s for s, b, a in zip(x.shape, before, after))
    if mode != "constant":
        return api.compute(shape, lambda *i: x(*[
            _source_index(i[k], before[k], after[k], kept[k], mode) for k in range(n)]),
            name=name, tag="injective")

    def fcompute(*i):
        conds, index = [], []
        for k in range(n):
            if before[k] > 0:
                conds.append(i[k] >= before[k])
            if after[k] > 0:
                conds.append(i[k] < x.shape[k] + before[k])
            index.append(i[k] - before[k] if before[k] else i[k])
        if not conds:
            return x(*index)
        return api.if_then_else(api.all(*conds), x(*index), value)
    return api.compute(shape, fcompute, name=name, tag="injective,pad")


def pad_kept_sizes(shape, before: Sequence[int], after: Sequence[int], mode: str) -> tuple:
    """Each axis's size once its negative pads have cropped it, checked against what the
    mode needs: at least one element left, and for 'reflect' each pad smaller than that
    size (numpy would reflect again past it; onnxruntime refuses it). Raises ShapeError;
    the ONNX importer asks it before building a Pad."""
    return tuple(_kept_size(shape, k, b, a, mode) for k, (b, a) in enumerate(zip(before,
                                                                                 after)))


def _kept_size(shape, k: int, before: int, after: int, mode: str):
    size = shape[k]
    if min(before, after) >= 0 and (mode == "constant" or before == after == 0):
        return size  # may stay symbolic
    d = static_dim(size)
    if d is None:
        raise ShapeError(f"pad: mode {mode!r} with these pads needs a constant size on axis "
                         f"{k}, got shape {fmt_shape(shape)}")
    kept = d - max(0, -before) - max(0, -after)
    if kept < 1:
        raise ShapeError(f"pad: the negative pads of axis {k} (size {d}) must leave at "
                         f"least one element, got pad_before {before} and pad_after {after}")
    if mode == "reflect" and max(before, after) >= kept:
        size_text = f"{kept} elements" + (" after cropping" if kept != d else "")
        raise ShapeError(f"pad: mode 'reflect' needs each pad of axis {k} smaller than the "
                         f"axis ({size_text}), got pad_before {before} and pad_after {after}")
    return kept


def _source_index(i, before: int, after: int, kept: int, mode: str):
    """The element of x that output index i of an axis reads in mode edge/reflect/wrap: its
    position t in the cropped axis (outside [0, kept) in the padding) folded into range,
    then shifted past the elements cropped at the start."""
    t = i - before if before > 0 else i
    low, high = before > 0, after > 0
    if mode == "edge":
        t = api.max(t, 0) if low else t
        t = api.min(t, kept - 1) if high else t
    elif mode == "reflect":  # mirrored about the first and the last element (not repeated)
        t = api.max(t, -t) if low else t
        t = api.min(t, 2 * (kept - 1) - t) if high else t
    elif low or high:  # wrap: periodic, any number of periods
        t = api.indexmod(t, kept)
    return t - before if before < 0 else t


def concatenate(tensors: Sequence[Tensor], axis: int = 0, name: str = "T_concat") -> Tensor:
    """Join tensors along `axis`; every other dimension and the dtype must agree."""
    if not isinstance(tensors, (tuple, list)) or not tensors:
        raise ShapeError(f"concatenate: tensors must be a non-empty list of te.Tensor, "
                         f"got {tensors!r}")
    for k, t in enumerate(tensors):
        check_tensor(t, "concatenate", f"tensors[{k}]")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "concatenate")
    for k, t in enumerate(tensors[1:], start=1):
        if t.ndim != first.ndim:
            raise ShapeError(f"concatenate: tensors[{k}] must have {first.ndim} dimensions "
                             f"like tensors[0], got {t.ndim}")
        if t.dtype != first.dtype:
            raise ShapeError(f"concatenate: tensors[{k}] must have dtype {first.dtype} like "
                             f"tensors[0], got {t.dtype}")
        for d in range(first.ndim):
            if d != axis and not same_dim(t.shape[d], first.shape[d]):
                raise ShapeError(f"concatenate: tensors[{k}] has shape {fmt_shape(t.shape)}, "
                                 f"expected {fmt_shape(first.shape)} except on axis {axis}")
    offsets, total = [], api.const(0)
    for t in tensors:
        offsets.append(total)
        total = total + t.shape[axis]
    shape = tuple(total if d == axis else first.shape[d] for d in range(first.ndim))

    def fcompute(*i):
        def load(k):
            index = list(i)
            index[axis] = i[axis] - offsets[k] if k else i[axis]
            return tensors[k](*index)
        out = load(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            out = api.if_then_else(i[axis] < offsets[k + 1], load(k), out)
        return out
    return api.compute(shape, fcompute, name=name, tag="injective")


def slice_axis(x: Tensor, axis: int, begin: int | None = None, end: int | None = None,
               step: int = 1, name: str = "T_slice") -> Tensor:
    """x[..., begin:end:step, ...] on one axis, with Python slice semantics (clamping,
    negative indices and a negative step)."""
    check_tensor(x, "slice_axis", "x")
    axis = normalize_axis(axis, x.ndim, "slice_axis")
    extent = static_dim(x.shape[axis])
    if extent is None:
        raise ShapeError(f"slice_axis: x must have a constant size on axis {axis}, got "
                         f"{fmt_shape(x.shape)}")
    for param, v in (("begin", begin), ("end", end), ("step", step)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ShapeError(f"slice_axis: {param} must be an int or None, got {v!r}")
    if step == 0 or step is None:
        raise ShapeError("slice_axis: step must be a non-zero int, got 0")
    start, _, _ = slice(begin, end, step).indices(extent)
    length = len(range(*slice(begin, end, step).indices(extent)))
    if length == 0:
        raise ShapeError(f"slice_axis: the slice {begin}:{end}:{step} of axis {axis} "
                         f"(size {extent}) is empty")
    shape = tuple(length if d == axis else s for d, s in enumerate(x.shape))

    def fcompute(*i):
        index = list(i)
        index[axis] = i[axis] * step + start
        return x(*index)
    return api.compute(shape, fcompute, name=name, tag="injective")


def _clip_index(j, extent):
    """An index value as take and gather_elements read data: a negative one counts from
    the end, and one still outside [0, extent) is clipped to the nearest end (TVM's take
    mode 'clip'). ONNX calls such indices an error; clipped, a bad index reads an element
    of the tensor rather than memory past it, which took the process down. In the index's
    own type, then int32: a wide index is not truncated into range first."""
    j = api.if_then_else(j < 0, j + extent, j)
    return api.min(api.max(j, 0), extent - 1).astype("int32")


def take(data: Tensor, indices: Tensor, axis: int = 0, name: str = "T_take") -> Tensor:
    """numpy.take(data, indices, axis) (ONNX Gather): out has data's shape with `axis`
    replaced by indices' shape; a negative index counts from the end, one out of range is
    clipped to the nearest end (_clip_index)."""
    check_tensor(data, "take", "data")
    check_tensor(indices, "take", "indices")
    if not indices.dtype.startswith(("int", "uint")):
        raise ShapeError(f"take: indices must have an integer dtype, got {indices.dtype}")
    axis = normalize_axis(axis, data.ndim, "take")
    extent = data.shape[axis]
    shape = tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:])

    def fcompute(*i):
        j = _clip_index(indices(*i[axis:axis + indices.ndim]), extent)
        return data(*i[:axis], j, *i[axis + indices.ndim:])
    return api.compute(shape, fcompute, name=name, tag="injective")


def gather_elements(data: Tensor, indices: Tensor, axis: int = 0,
                    name: str = "T_gather_elements") -> Tensor:
    """ONNX GatherElements (numpy.take_along_axis): out has indices' shape, out[i] =
    data[i with axis replaced by indices[i]]; a negative index counts from the end, one
    out of range is clipped to the nearest end (_clip_index)."""
    check_tensor(data, "gather_elements", "data")
    check_tensor(indices, "gather_elements", "indices")
    if not indices.dtype.startswith(("int", "uint")):
        raise ShapeError(f"gather_elements: indices must have an integer dtype, got "
                         f"{indices.dtype}")
    if indices.ndim != data.ndim:
        raise ShapeError(f"gather_elements: indices must have data's rank {data.ndim}, got "
                         f"shape {fmt_shape(indices.shape)}")
    axis = normalize_axis(axis, data.ndim, "gather_elements")
    extent = data.shape[axis]

    def fcompute(*i):
        return data(*i[:axis], _clip_index(indices(*i), extent), *i[axis + 1:])
    return api.compute(tuple(indices.shape), fcompute, name=name, tag="injective")


def tile(x: Tensor, repeats: Sequence[int], name: str = "T_tile") -> Tensor:
    """numpy.tile with one repeat count per dimension of x."""
    check_tensor(x, "tile", "x")
    reps = int_tuple(tuple(repeats), x.ndim, "tile", "repeats", minimum=1)
    dims = _static_shape(x, "tile")
    return api.compute(tuple(d * r for d, r in zip(dims, reps)),
                       lambda *i: x(*[api.indexmod(v, d) if r > 1 else v
                                      for v, d, r in zip(i, dims, reps)]),
                       name=name, tag="injective")
