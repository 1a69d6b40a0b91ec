"""ONNX converters of ops built from several table ops (RMSNormalization, LpNormalization,
MeanVarianceNormalization, GroupNormalization, Hardmax, DepthToSpace, SpaceToDepth,
RotaryEmbedding) or onto
one with a data-dependent index or running reduction (GatherElements, CumSum, CumProd), and
BitShift and Swish.

Imports numpy, graph's builder and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np

from .. import builder, transform
from ..builder import apply
from .onnx_base import Converter, Refused, const, distinct_axes, only, row

_REDUCE = builder.REDUCE_FUNCTIONS


def _rms_norm(ins, attrs, opset, outs):
    x, scale = ins[0], ins[1]
    only(attrs, "stash_type", (1,), 1)
    n = len(x.shape)
    axes = list(range(attrs.get("axis", -1) % n, n))
    eps = float(attrs.get("epsilon", 1e-5))
    sq = apply("multiply", [x, x], {}, f"{outs[0]}/sq")
    mean = _REDUCE["reduce_mean"](sq, axes, True, name=f"{outs[0]}/mean")
    rms = apply("sqrt", [apply("add", [mean, eps], {}, f"{outs[0]}/eps")], {},
                f"{outs[0]}/rms")
    normed = apply("divide", [x, rms], {}, f"{outs[0]}/normed")
    return [apply("multiply", [normed, scale], {}, outs[0])]


def _lp_norm(ins, attrs, opset, outs):
    x = ins[0]
    p = only(attrs, "p", (1, 2), 2)
    axis = attrs.get("axis", -1) % len(x.shape)
    norm = _REDUCE["reduce_l1" if p == 1 else "reduce_l2"](x, [axis], True,
                                                           name=f"{outs[0]}/norm")
    y = apply("divide", [x, norm], {}, f"{outs[0]}/div")
    zero = apply("equal", [norm, 0.0], {}, f"{outs[0]}/zero")  # a zero norm gives 0
    zeros = builder.constant(np.zeros((), x.dtype), name=f"{outs[0]}/0")
    return [transform.where(zero, zeros, y, name=outs[0])]


def _mean_variance_norm(ins, attrs, opset, outs):
    """(x - mean) / (std + 1e-9) over `axes`, as ONNX's function defines it, with the
    variance as the mean square deviation (its E[x^2] - E[x]^2 may round below zero)."""
    x = ins[0]
    axes = distinct_axes(attrs.get("axes", (0, 2, 3)), len(x.shape))
    name = outs[0]
    mean = _REDUCE["reduce_mean"](x, axes, True, name=f"{name}/mean")
    dev = apply("subtract", [x, mean], {}, f"{name}/dev")
    var = _REDUCE["reduce_mean"](apply("multiply", [dev, dev], {}, f"{name}/sq"), axes, True,
                                 name=f"{name}/var")
    std = apply("add", [apply("sqrt", [var], {}, f"{name}/std"), 1e-9], {}, f"{name}/eps")
    return [apply("divide", [dev, std], {}, name)]


def _group_norm(ins, attrs, opset, outs):
    """Each group of channels normalized over its channels and pixels, then scaled and
    shifted: per group before opset 21 (scale and bias of num_groups), per channel from it."""
    x, scale, bias = ins[:3]
    only(attrs, "stash_type", (1,), 1)
    groups = int(attrs["num_groups"])
    if len(x.shape) < 3 or not isinstance(x.shape[1], int) or groups < 1 \
            or x.shape[1] % groups:
        raise Refused("num_groups", f"num_groups {groups} must divide the channels of an "
                                    f"(N, C, ...) input, got shape {list(x.shape)}")
    name = outs[0]
    n, c = x.shape[:2]
    grouped = transform.reshape(x, (n, groups, -1), name=f"{name}/grouped")
    mean = _REDUCE["reduce_mean"](grouped, [2], True, name=f"{name}/mean")
    dev = apply("subtract", [grouped, mean], {}, f"{name}/dev")
    var = _REDUCE["reduce_mean"](apply("multiply", [dev, dev], {}, f"{name}/sq"), [2], True,
                                 name=f"{name}/var")
    eps = float(attrs.get("epsilon", 1e-5))
    std = apply("sqrt", [apply("add", [var, eps], {}, f"{name}/eps")], {}, f"{name}/std")
    normed = apply("divide", [dev, std], {}, f"{name}/normed")
    per = groups if opset < 21 else c
    if tuple(scale.shape) != (per,) or tuple(bias.shape) != (per,):
        raise Refused("", f"scale and bias must have shape [{per}] at opset {opset}, got "
                          f"{list(scale.shape)} and {list(bias.shape)}")
    if opset < 21:
        view, shape = normed, (groups, 1)
    else:
        view = transform.reshape(normed, x.shape, name=f"{name}/back")
        shape = (c, *[1] * (len(x.shape) - 2))
    scaled = apply("multiply", [view, transform.reshape(scale, shape, name=f"{name}/s")], {},
                   f"{name}/scaled")
    y = apply("add", [scaled, transform.reshape(bias, shape, name=f"{name}/b")], {},
              name if opset >= 21 else f"{name}/shifted")
    return [y] if opset >= 21 else [transform.reshape(y, x.shape, name=name)]


def _hardmax(ins, attrs, opset, outs):
    x = ins[0]
    n = len(x.shape)
    axis = attrs.get("axis", 1 if opset < 13 else -1) % n
    if opset < 13 and axis != n - 1:  # before opset 13: over the 2-d view, like Softmax
        flat = transform.flatten(x, axis, name=f"{outs[0]}/flat")
        (y,) = _hardmax([flat], {"axis": 1}, 13, [f"{outs[0]}/2d"])
        return [transform.reshape(y, x.shape, name=outs[0])]
    first = apply("argmax", [x], {"axis": axis, "keepdims": 1}, f"{outs[0]}/argmax")
    iota = np.arange(x.shape[axis], dtype=np.int64).reshape(
        [x.shape[axis] if k == axis else 1 for k in range(n)])
    hot = apply("equal", [builder.constant(iota, name=f"{outs[0]}/iota"), first], {},
                f"{outs[0]}/hot")
    return [transform.cast(hot, x.dtype, name=outs[0])]


def _depth_to_space(ins, attrs, opset, outs):
    x = ins[0]
    if len(x.shape) != 4:
        raise Refused("", f"only 4-d input is supported, got {len(x.shape)}-d")
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    mode = only(attrs, "mode", ("DCR", "CRD"), "DCR")
    if mode == "DCR":
        t = transform.reshape(x, (n, b, b, c // (b * b), h, w), name=f"{outs[0]}/split")
        t = transform.transpose(t, (0, 3, 4, 1, 5, 2), name=f"{outs[0]}/perm")
    else:
        t = transform.reshape(x, (n, c // (b * b), b, b, h, w), name=f"{outs[0]}/split")
        t = transform.transpose(t, (0, 1, 4, 2, 5, 3), name=f"{outs[0]}/perm")
    return [transform.reshape(t, (n, c // (b * b), h * b, w * b), name=outs[0])]


def _space_to_depth(ins, attrs, opset, outs):
    x = ins[0]
    if len(x.shape) != 4:
        raise Refused("", f"only 4-d input is supported, got {len(x.shape)}-d")
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    # DCR (the only order before opset 28) puts the block offset before the channel, CRD
    # after it: the inverses of DepthToSpace's two modes
    crd = only(attrs, "mode", ("DCR", "CRD"), "DCR") == "CRD"
    t = transform.reshape(x, (n, c, h // b, b, w // b, b), name=f"{outs[0]}/split")
    t = transform.transpose(t, (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4),
                            name=f"{outs[0]}/perm")
    return [transform.reshape(t, (n, c * b * b, h // b, w // b), name=outs[0])]


def _rotary_embedding(ins, attrs, opset, outs):
    """RoPE as ONNX's reference computes it, on a (batch, seq, heads, head_size) view: the
    first rotary_embedding_dim features of each head, paired as halves or interleaved, are
    rotated by the cos/sin of their position (cos_cache[position_ids] when given); the rest
    pass through. Built here rather than from ONNX's body, whose split leaves an empty
    pass-through piece when the whole head rotates."""
    x, cos, sin, positions = (list(ins) + [None])[:4]
    name = outs[0]
    if len(x.shape) == 4:
        view = transform.transpose(x, (0, 2, 1, 3), name=f"{name}/bshd")
    elif len(x.shape) == 3:
        heads = int(attrs.get("num_heads", 0))
        if heads < 1 or not isinstance(x.shape[2], int) or x.shape[2] % heads:
            raise Refused("num_heads", f"num_heads must divide the hidden size of a 3-d "
                                       f"input, got {heads} for shape {list(x.shape)}")
        view = transform.reshape(x, (*x.shape[:2], heads, x.shape[2] // heads),
                                 name=f"{name}/bshd")
    else:
        raise Refused("", f"input must be 3-d or 4-d, got shape {list(x.shape)}")
    head = view.shape[3]
    dim = int(attrs.get("rotary_embedding_dim", 0)) or head
    if dim % 2 or dim > head:
        raise Refused("rotary_embedding_dim", f"rotary_embedding_dim must be even and at most "
                                              f"the head size {head}, got {dim}")
    if positions is not None:
        cos = transform.take(cos, positions, 0, name=f"{name}/cos_at")
        sin = transform.take(sin, positions, 0, name=f"{name}/sin_at")
    if cos.shape[-1] != dim // 2 or sin.shape[-1] != dim // 2 or len(cos.shape) != 3:
        raise Refused("", f"cos_cache and sin_cache must give (batch, seq, {dim // 2}) "
                          f"(rotary_embedding_dim / 2), got {list(cos.shape)}")
    cos = transform.unsqueeze(cos, [2], name=f"{name}/cos")
    sin = transform.unsqueeze(sin, [2], name=f"{name}/sin")
    interleaved = int(attrs.get("interleaved", 0))
    if interleaved:
        x1 = transform.slice(view, [0], [dim], [3], [2], name=f"{name}/x1")
        x2 = transform.slice(view, [1], [dim], [3], [2], name=f"{name}/x2")
    else:
        x1 = transform.slice(view, [0], [dim // 2], [3], name=f"{name}/x1")
        x2 = transform.slice(view, [dim // 2], [dim], [3], name=f"{name}/x2")

    def mul(a, b, tag):
        return apply("multiply", [a, b], {}, f"{name}/{tag}")
    real = apply("subtract", [mul(cos, x1, "c1"), mul(sin, x2, "s2")], {}, f"{name}/real")
    imag = apply("add", [mul(sin, x1, "s1"), mul(cos, x2, "c2")], {}, f"{name}/imag")
    if interleaved:
        pairs = transform.concatenate(
            [transform.unsqueeze(real, [4], name=f"{name}/re"),
             transform.unsqueeze(imag, [4], name=f"{name}/im")], 4, name=f"{name}/pairs")
        rotated = transform.reshape(pairs, (*view.shape[:3], dim), name=f"{name}/rotated")
    else:
        rotated = transform.concatenate([real, imag], 3, name=f"{name}/rotated")
    if dim < head:
        rest = transform.slice(view, [dim], [head], [3], name=f"{name}/pass")
        rotated = transform.concatenate([rotated, rest], 3, name=f"{name}/joined")
    if len(x.shape) == 3:
        return [transform.reshape(rotated, x.shape, name=name)]
    return [transform.transpose(rotated, (0, 2, 1, 3), name=name)]


def _gather_elements(ins, attrs, opset, outs):
    axis = attrs.get("axis", 0) % len(ins[0].shape)
    return [apply("gather_elements", ins[:2], {"axis": axis}, outs[0])]


def _scan(op: str):
    def fn(ins, attrs, opset, outs):
        x = ins[0]
        axis = int(np.asarray(const(ins[1], "axis")).reshape(-1)[0]) % len(x.shape)
        return [apply(op, [x], {"axis": axis, "exclusive": int(attrs.get("exclusive", 0)),
                                "reverse": int(attrs.get("reverse", 0))}, outs[0])]
    return Converter(fn, frozenset(("exclusive", "reverse")))


def _bit_shift(ins, attrs, opset, outs):
    direction = only(attrs, "direction", ("LEFT", "RIGHT"), None)
    if not ins[0].dtype.startswith(("uint", "int")):
        raise Refused("", f"dtype {ins[0].dtype} is not supported (integers only)")
    return [apply("left_shift" if direction == "LEFT" else "right_shift", ins[:2], {},
                  outs[0])]


def _swish(ins, attrs, opset, outs):
    return [apply("swish", [ins[0]], {"alpha": float(attrs.get("alpha", 1.0))}, outs[0])]


COMPOSITE_CONVERTERS = {
    "RMSNormalization": row(_rms_norm, "axis", "epsilon", "stash_type"),
    "LpNormalization": row(_lp_norm, "axis", "p"),
    "Hardmax": row(_hardmax, "axis"),
    "MeanVarianceNormalization": row(_mean_variance_norm, "axes"),
    "GroupNormalization": row(_group_norm, "epsilon", "num_groups", "stash_type"),
    "DepthToSpace": row(_depth_to_space, "blocksize", "mode"),
    "SpaceToDepth": row(_space_to_depth, "blocksize", "mode"),
    "GatherElements": row(_gather_elements, "axis"),
    "RotaryEmbedding": row(_rotary_embedding, "interleaved", "num_heads",
                           "rotary_embedding_dim"),
    "CumSum": _scan("cumsum"),
    "CumProd": _scan("cumprod"),
    "BitShift": row(_bit_shift, "direction"),
    "Swish": row(_swish, "alpha"),
}
