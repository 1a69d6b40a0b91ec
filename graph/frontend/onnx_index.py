"""ONNX converters of index-built tensors, onto table ops: OneHot (an equality against a
constant iota), GatherND (a linear index into the flattened indexed axes, then one take),
EyeLike (a constant), TopK (te's ranking topk), and the scatters: Scatter, ScatterElements,
ScatterND (te's gather-side scans, sized against MAX_SCATTER_WORK) and TensorScatter.

Imports numpy, graph's builder and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import math

import numpy as np

from .. import builder, transform
from ..builder import apply
from .onnx_base import DTYPES, Refused, only, row, scalar


def _static(v, what: str) -> tuple:
    if not all(isinstance(d, int) for d in v.shape):
        raise Refused("", f"input '{what}' needs a constant shape, got {list(v.shape)}")
    return tuple(v.shape)


def _as_int64(v, name: str):
    """Integer indices as int64; float indices truncated toward zero (ONNX casts them)."""
    return v if v.dtype == "int64" else transform.cast(v, "int64", name=name)


def _wrap_negative(idx, size, name: str):
    """idx + size where idx < 0 (an index counted from the end); `size` an int or a Value
    broadcast against idx."""
    neg = apply("less", [idx, 0], {}, f"{name}/neg")
    return transform.where(neg, apply("add", [idx, size], {}, f"{name}/wrapped"), idx,
                           name=name)


def _one_hot(ins, attrs, opset, outs):
    indices, values = ins[0], ins[2]
    depth = scalar(ins[1], "depth")
    if depth != int(depth) or depth < 1:
        raise Refused("depth", f"depth must be a positive integer, got {depth}")
    depth = int(depth)
    if tuple(values.shape) != (2,):
        raise Refused("values", f"values must be [off_value, on_value] (shape [2]), got "
                                f"{list(values.shape)}")
    rank = len(indices.shape)
    axis = int(attrs.get("axis", -1))
    if not -rank - 1 <= axis <= rank:
        raise Refused("axis", f"axis {axis} is out of range for a rank-{rank + 1} output "
                              f"(expected {-rank - 1} to {rank})")
    axis %= rank + 1
    idx = _wrap_negative(_as_int64(indices, f"{outs[0]}/idx"), depth, f"{outs[0]}/wrap")
    idx = transform.unsqueeze(idx, [axis], name=f"{outs[0]}/unsq")
    iota = np.arange(depth, dtype=np.int64).reshape(
        [depth if k == axis else 1 for k in range(rank + 1)])
    hot = apply("equal", [idx, builder.constant(iota, name=f"{outs[0]}/iota")], {},
                f"{outs[0]}/hot")
    off, on = (transform.reshape(transform.slice(values, [k], [k + 1], name=f"{outs[0]}/v{k}"),
                                 (), name=f"{outs[0]}/s{k}") for k in (0, 1))
    # out-of-range indices match no iota entry: all off_value, as onnxruntime gives
    return [transform.where(hot, on, off, name=outs[0])]


def _gather_nd(ins, attrs, opset, outs):
    data, indices = ins[0], ins[1]
    dshape, ishape = _static(data, "data"), _static(indices, "indices")
    b = int(attrs.get("batch_dims", 0))
    m = ishape[-1] if ishape else 0
    if not ishape or b < 0 or b >= len(ishape) or m < 1 or b + m > len(dshape):
        raise Refused("batch_dims", f"indices {list(ishape)} and batch_dims {b} do not index "
                                    f"data {list(dshape)} (need 0 <= batch_dims < rank of "
                                    f"indices and 1 <= last dim <= rank of data - batch_dims)")
    if dshape[:b] != ishape[:b]:
        raise Refused("batch_dims", f"the first {b} dims of data {list(dshape)} and indices "
                                    f"{list(ishape)} differ")
    name = outs[0]
    idx = _as_int64(indices, f"{name}/idx")
    indexed, rest = dshape[b:b + m], dshape[b + m:]
    sizes = np.array(indexed, dtype=np.int64)
    # every index wrapped from the end where negative and clipped into its axis (as take
    # clips: an index out of range would otherwise land in another row of the flattened
    # data), then one linear index per tuple
    idx = _wrap_negative(idx, builder.constant(sizes, name=f"{name}/sizes"), f"{name}/wrap")
    idx = apply("minimum", [apply("maximum", [idx, 0], {}, f"{name}/lo"),
                            builder.constant(sizes - 1, name=f"{name}/last")], {},
                f"{name}/clipped")
    strides = np.array([math.prod(indexed[k + 1:]) for k in range(m)], dtype=np.int64)
    scaled = apply("multiply", [idx, builder.constant(strides, name=f"{name}/strides")], {},
                   f"{name}/scaled")
    single = len(ishape) == 1     # one index tuple: a 1-element index, dropped at the end
    lin = builder.REDUCE_FUNCTIONS["reduce_sum"](scaled, [len(ishape) - 1], single,
                                                 name=f"{name}/lin")
    batch = math.prod(dshape[:b])
    if b:   # each batch's rows follow the previous batch's in the flattened data
        first = (np.arange(batch, dtype=np.int64) * math.prod(indexed)).reshape(
            (*ishape[:b], *[1] * (len(ishape) - 1 - b)))
        lin = apply("add", [lin, builder.constant(first, name=f"{name}/batch")], {},
                    f"{name}/lin_b")
    flat = transform.reshape(data, (batch * math.prod(indexed), *rest), name=f"{name}/flat")
    if not single:
        return [transform.take(flat, lin, 0, name=name)]
    return [transform.reshape(transform.take(flat, lin, 0, name=f"{name}/take"), rest,
                              name=name)]


def _eye_like(ins, attrs, opset, outs):
    shape = _static(ins[0], "input")
    if len(shape) != 2:
        raise Refused("", f"input must be 2-d, got shape {list(shape)}")
    code = attrs.get("dtype")
    dtype = ins[0].dtype if code is None else DTYPES.get(int(code))
    if dtype is None:
        raise Refused("dtype", f"element type {code} is not supported")
    eye = np.eye(shape[0], shape[1], int(attrs.get("k", 0)), dtype=dtype)
    return [builder.constant(eye, name=outs[0])]


# TopK ranks its axis in quadratic work (te.compute.ops.topk): axes longer than this are
# refused rather than compiled into minutes of work per row
MAX_TOPK_AXIS = 8192


def _top_k(ins, attrs, opset, outs):
    x = ins[0]
    rank = len(x.shape)
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        raise Refused("axis", f"axis {axis} is out of range for a rank-{rank} input")
    axis %= rank
    n = x.shape[axis]
    if not isinstance(n, int):
        raise Refused("axis", f"the axis' length must be constant, got {n}")
    if n > MAX_TOPK_AXIS:
        raise Refused("axis", f"an axis of {n} elements is longer than TopK's ranking "
                              f"supports ({MAX_TOPK_AXIS})")
    k = int(attrs["k"]) if opset < 10 else int(scalar(ins[1], "K"))
    if not 1 <= k <= n:
        raise Refused("K", f"K must be from 1 to the axis' length {n}, got {k}")
    if not x.dtype.startswith(("float", "int", "uint")):
        raise Refused("", f"dtype {x.dtype} is not supported")
    # sorted=0 lets any order through; the sorted one is such an order
    largest = int(attrs.get("largest", 1))
    return list(apply("topk", [x], {"k": k, "axis": axis, "largest": largest}, outs[0],
                      output_names=outs[:2]))


# A scatter is computed gather-side (te.compute.ops.scatter): each output element scans
# every update that could be aimed at it. Scans of more element x candidate pairs than this
# are refused rather than compiled into seconds of work per run
MAX_SCATTER_WORK = 1 << 28


def _scatter_checks(data, indices, updates, attrs) -> str:
    """The reduction attribute, once data's dtype can take it; constant shapes for the
    work estimate; data of rank 1 or more."""
    reduction = only(attrs, "reduction", ("none", "add", "mul", "max", "min"), "none")
    for v, what in ((data, "data"), (indices, "indices"), (updates, "updates")):
        _static(v, what)
    if not data.shape:
        raise Refused("", "data must have rank 1 or more, got a 0-d tensor")
    if reduction != "none" and data.dtype == "bool":
        raise Refused("reduction", f"reduction '{reduction}' needs numbers, got bool data")
    if reduction in ("add", "mul") and data.dtype == "float16":
        raise Refused("reduction", f"reduction '{reduction}' of float16 data is not supported "
                                   f"(its float16 accumulation rounds differently from "
                                   f"ONNX's reference)")
    return reduction


def _check_work(op: str, elements: int, candidates: int) -> None:
    if elements * candidates > MAX_SCATTER_WORK:
        raise Refused("", f"{op} would compare {elements} output elements with {candidates} "
                          f"candidate updates each ({elements * candidates} pairs, at most "
                          f"{MAX_SCATTER_WORK})")


def _scatter_elements(ins, attrs, opset, outs):
    """ScatterElements (and the deprecated Scatter of opsets 9 and 10, the same op without
    `reduction`)."""
    data, indices, updates = ins[0], ins[1], ins[2]
    reduction = _scatter_checks(data, indices, updates, attrs)
    rank = len(data.shape)
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise Refused("axis", f"axis {axis} is out of range for a rank-{rank} input")
    axis %= rank
    if len(indices.shape) != rank or tuple(updates.shape) != tuple(indices.shape):
        raise Refused("", f"indices and updates must have one shape of data's rank {rank}, "
                          f"got {list(indices.shape)} and {list(updates.shape)}")
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise Refused("", f"indices {list(indices.shape)} must be no larger than data "
                          f"{list(data.shape)} off the axis {axis}")
    _check_work("ScatterElements", math.prod(data.shape), indices.shape[axis])
    return [apply("scatter_elements", [data, indices, updates],
                  {"axis": axis, "reduction": reduction}, outs[0])]


def _scatter_nd(ins, attrs, opset, outs):
    data, indices, updates = ins[0], ins[1], ins[2]
    reduction = _scatter_checks(data, indices, updates, attrs)
    dshape, ishape = tuple(data.shape), tuple(indices.shape)
    q = ishape[-1] if ishape else 0
    if not 1 <= q <= len(dshape):
        raise Refused("", f"indices' last dim must be from 1 to data's rank {len(dshape)}, "
                          f"got indices {list(ishape)}")
    want = ishape[:-1] + dshape[q:]
    if tuple(updates.shape) != want:
        raise Refused("", f"updates must have shape {list(want)} (indices' rows, then data's "
                          f"dims after the first {q}), got {list(updates.shape)}")
    rows = math.prod(ishape[:-1])
    # 'none' finds the last row per indexed position, the others combine per element
    scanned = math.prod(dshape[:q]) if reduction == "none" else math.prod(dshape)
    _check_work("ScatterND", scanned, rows)
    return [apply("scatter_nd", [data, indices, updates], {"reduction": reduction}, outs[0])]


def _tensor_scatter(ins, attrs, opset, outs):
    past, update, write_indices = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    mode = only(attrs, "mode", ("linear", "circular"), "linear")
    rank = len(past.shape)
    axis = int(attrs.get("axis", -2))
    if not -rank <= axis < rank or axis % rank == 0:
        raise Refused("axis", f"axis {axis} must name a non-batch axis of the rank-{rank} "
                              f"cache (from {-rank} to {rank - 1}, not 0 or {-rank})")
    axis %= rank
    length, room = update.shape[axis], past.shape[axis]
    if isinstance(length, int) and isinstance(room, int) and length > room:
        raise Refused("", f"update's sequence length {length} must be at most the cache's "
                          f"{room} (axis {axis})")
    inputs = [past, update] + ([write_indices] if write_indices is not None else [])
    return [apply("tensor_scatter", inputs, {"axis": axis, "circular": mode == "circular"},
                  outs[0])]


INDEX_CONVERTERS = {
    "Scatter": row(_scatter_elements, "axis"),
    "ScatterElements": row(_scatter_elements, "axis", "reduction"),
    "ScatterND": row(_scatter_nd, "reduction"),
    "TensorScatter": row(_tensor_scatter, "axis", "mode"),
    "TopK": row(_top_k, "axis", "k", "largest", "sorted"),
    "OneHot": row(_one_hot, "axis"),
    "GatherND": row(_gather_nd, "batch_dims"),
    "EyeLike": row(_eye_like, "dtype", "k"),
}
