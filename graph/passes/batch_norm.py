"""Pass fold_batch_norm: inference BatchNormalization as per-channel constants.

With constant statistics, batch_norm(x) = x * s + t per channel c (axis 1), where
s = scale / sqrt(var + eps) and t = bias - mean * s (computed in float64, cast to the
weight's dtype once). When x is made by a conv2d or gemm with constant weights (or a 2-d
matmul by a constant matrix) and nothing else reads x, s goes into the weights and t into
the bias, and the batch_norm disappears. Otherwise (x also read elsewhere, or made by
another op) the batch_norm becomes multiply and add by (C, 1, ...) constants: broadcast ops
that fusion merges into x's producer or consumer. A batch_norm with non-constant
statistics stays. A multiply, add or subtract by a per-channel constant right after such a
conv2d / gemm / matmul (models that scale after their batch norm, inception_v2) folds into
its weights the same way. Imports numpy and graph.passes.rewrite.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from .rewrite import rebuild


def _per_channel(c, x):
    """c's values along axis 1 of x as a (C,) float64 array, where c is a constant of x's
    dtype whose broadcast against x keeps x's shape and varies along axis 1 only; else
    None."""
    if not c.is_constant or c.dtype != x.dtype or not 2 <= len(x.shape) or len(
            c.shape) > len(x.shape) or not isinstance(x.shape[1], int):
        return None
    shape = (1,) * (len(x.shape) - len(c.shape)) + tuple(c.shape)
    if any(d != 1 for k, d in enumerate(shape) if k != 1) or shape[1] not in (1, x.shape[1]):
        return None
    return np.broadcast_to(c.data.astype(np.float64).reshape(shape[1]), (x.shape[1],))


def _scale_shift(node, ins):
    """(k, s, t): the node computes ins[k] * s + t with per-channel (C,) arrays s and t
    (float64); None for any other node."""
    if node.op == "batch_norm":
        if not all(v.is_constant for v in ins[1:]):
            return None
        scale, bias, mean, var = (v.data.astype(np.float64) for v in ins[1:])
        s = scale / np.sqrt(var + node.attr["epsilon"])
        return 0, s, bias - mean * s
    if node.op not in ("multiply", "add", "subtract"):
        return None
    for k in ((0, 1) if node.op != "subtract" else (0,)):
        c = _per_channel(ins[1 - k], ins[k])
        if c is None:
            continue
        one, zero = np.ones_like(c), np.zeros_like(c)
        return k, *{"multiply": (c, zero), "add": (one, c), "subtract": (one, -c)}[node.op]
    return None


def _conv2d(rw, p, s, t, name):
    data, w = p.inputs[0], p.inputs[1]
    b = p.inputs[2].data.astype(np.float64) if len(p.inputs) > 2 else 0.0
    w2 = (w.data.astype(np.float64) * s[:, None, None, None]).astype(w.dtype)
    b2 = (b * s + t).astype(w.dtype)
    ins = [data, rw.constant(w2, f"{w.name}/bn"), rw.constant(b2, f"{name}/bias")]
    return rw.apply("conv2d", ins, p.attr, name=name)


def _gemm(rw, p, s, t, name):
    a, w = p.inputs[0], p.inputs[1]
    attr = p.attr
    scaled = s[:, None] if attr["trans_b"] else s[None, :]  # B is (N, K) or (K, N)
    w2 = (w.data.astype(np.float64) * scaled).astype(w.dtype)
    c = p.inputs[2].data.astype(np.float64) * attr["beta"] if len(p.inputs) > 2 else 0.0
    c2 = np.asarray(c * s + t).astype(w.dtype)  # broadcasts like C did, now with (N,)
    ins = [a, rw.constant(w2, f"{w.name}/bn"), rw.constant(c2, f"{name}/bias")]
    return rw.apply("gemm", ins, {**attr, "beta": 1.0}, name=name)


def _matmul(rw, p, s, t, name):
    a, w = p.inputs
    w2 = (w.data.astype(np.float64) * s[None, :]).astype(w.dtype)
    if not t.any():
        return rw.apply("matmul", [a, rw.constant(w2, f"{w.name}/bn")], {}, name=name)
    prod = rw.apply("matmul", [a, rw.constant(w2, f"{w.name}/bn")], {}, base=f"{name}/matmul")
    return rw.apply("add", [prod, rw.constant(t.astype(w.dtype), f"{name}/bias")], {},
                    name=name)


def _foldable(p, s) -> bool:
    """Whether producer node p takes the per-channel scale s into constant weights (a
    matmul has no bias: only a scale that is not all ones is worth a rewrite)."""
    consts = all(v.is_constant for v in p.inputs[1:])
    if p.op in ("conv2d", "gemm"):
        return consts
    return (p.op == "matmul" and consts and len(p.inputs[1].shape) == 2
            and len(p.outputs[0].shape) == 2 and bool((s != 1).any()))


def _rule(rw, node, ins):
    found = _scale_shift(node, ins)
    if found is None:
        return None
    k, s, t = found
    x, name = ins[k], node.outputs[0].name
    p = x.node
    if p is not None and rw.uses(node.inputs[k]) == 1 and _foldable(p, s):
        return [{"conv2d": _conv2d, "gemm": _gemm, "matmul": _matmul}[p.op](
            rw, p, s, t, name)]
    if node.op != "batch_norm":
        return None
    per_channel = (len(s),) + (1,) * (len(x.shape) - 2)
    scaled = rw.apply("multiply", [x, rw.constant(s.astype(x.dtype).reshape(per_channel),
                                                  f"{name}/scale")], {}, base=f"{name}/mul")
    return [rw.apply("add", [scaled, rw.constant(t.astype(x.dtype).reshape(per_channel),
                                                 f"{name}/shift")], {}, name=name)]


def fold_batch_norm(g: Graph) -> Graph:
    """g with every batch_norm of constant statistics folded or made multiply + add, and
    per-channel multiply/add/subtract folded into the weights before them."""
    return rebuild(g, _rule)
