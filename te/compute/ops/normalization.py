"""Normalizations and whole-map pooling over NCHW-like tensors: batch_norm_inference, lrn,
instance_norm, global_pool2d; and log_softmax.

Takes te.Tensors (channels on axis 1) and static hyper-parameters, gives the output tensor
(lrn keeps its windowed square sum a separate stage). Imports te.compute (api, tensor),
te.errors and the sibling op modules only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_dim, check_float, check_tensor, normalize_axes, static_dim
from .reduction import reduce_over


def batch_norm_inference(x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor,
                         epsilon: float = 1e-5, name: str = "T_batch_norm") -> Tensor:
    """(x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c] with c = axis 1 of x and
    every per-channel operand of shape (C,): inference with running statistics."""
    who = "batch_norm_inference"
    check_tensor(x, who, "x")
    check_float(x, who, "x")
    if x.ndim < 2:
        raise ShapeError(f"{who}: x must have at least 2 dimensions (N, C, ...), got {x.ndim}")
    for param, t in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
        check_tensor(t, who, param, ndim=1)
        check_dim(t.shape[0], x.shape[1], who, f"{param}.shape[0] (x.shape[1], the channels)")

    def fcompute(*i):
        c = i[1]
        return ((x(*i) - mean[c]) * api.rsqrt(var[c] + epsilon)) * scale[c] + bias[c]
    return api.compute(x.shape, fcompute, name=name, tag="broadcast")


def lrn(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
        name: str = "T_lrn") -> Tensor:
    """Local response normalization across channels (axis 1), ONNX's definition:
    x / (bias + alpha / size * sum of x^2 over channels c - (size-1)//2 .. c + size//2)^beta.
    Stage <name>_sqsum holds the windowed sum of squares."""
    who = "lrn"
    check_tensor(x, who, "x")
    check_float(x, who, "x")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ShapeError(f"{who}: size must be a positive int, got {size!r}")
    if x.ndim < 3:
        raise ShapeError(f"{who}: x must have at least 3 dimensions (N, C, ...), got {x.ndim}")
    before = (size - 1) // 2
    channels = x.shape[1]
    r = api.reduce_axis((0, size), "r")

    def sqsum(*i):
        c = i[1] + r - before
        inside = api.all(c >= 0, c < channels)
        index = (i[0], api.if_then_else(inside, c, 0)) + tuple(i[2:])
        v = x(*index)
        return api.sum(api.if_then_else(inside, v * v, api.const(0, x.dtype)), axis=r)
    total = api.compute(x.shape, sqsum, name=f"{name}_sqsum", tag="lrn_sqsum")
    scale = float(alpha) / size
    return api.compute(x.shape, lambda *i: x(*i) / api.power(
        bias + scale * total(*i), api.const(beta, x.dtype)), name=name, tag="elemwise")


def global_pool2d(x: Tensor, kind: str = "avg", name: str = "T_global_pool") -> Tensor:
    """The mean ('avg') or max ('max') over every axis after the first two, kept as size 1:
    (N, C, H, W) -> (N, C, 1, 1)."""
    who = "global_pool2d"
    check_tensor(x, who, "x")
    if kind not in ("avg", "max"):
        raise ShapeError(f"{who}: kind must be 'avg' or 'max', got {kind!r}")
    if x.ndim < 3:
        raise ShapeError(f"{who}: x must have at least 3 dimensions (N, C, ...), got {x.ndim}")
    axes = tuple(range(2, x.ndim))
    if kind == "max":
        return reduce_over(x, axes, True, name, "comm_reduce",
                           lambda full, raxes: api.max(x(*full), axis=raxes))
    check_float(x, who, "x")
    inv = 1.0 / _spatial_count(x, axes, who, " for 'avg'")
    return reduce_over(x, axes, True, name, "comm_reduce",
                       lambda full, raxes: api.sum(x(*full) * inv, axis=raxes))


def log_softmax(x: Tensor, axis: int = -1, name: str = "T_log_softmax") -> Tensor:
    """x - max - log(sum(exp(x - max))) along `axis` (floats): stages <name>_max,
    <name>_sum and the result."""
    who = "log_softmax"
    check_tensor(x, who, "x")
    check_float(x, who, "x")
    (axis,) = normalize_axes(axis, x.ndim, who)
    if x.ndim == 1:
        raise ShapeError(f"{who}: x must have at least 2 dimensions (the reduced row stage "
                         f"cannot be 0-d); reshape a vector to (1, n)")

    def drop(i):
        return tuple(v for d, v in enumerate(i) if d != axis)
    top = reduce_over(x, (axis,), False, f"{name}_max", "comm_reduce",
                      lambda full, raxes: api.max(x(*full), axis=raxes))
    total = reduce_over(x, (axis,), False, f"{name}_sum", "comm_reduce",
                        lambda full, raxes: api.sum(api.exp(x(*full) - top(*drop(full))),
                                                    axis=raxes))
    return api.compute(x.shape, lambda *i: x(*i) - top(*drop(i)) - api.log(total(*drop(i))),
                       name=name, tag="injective")


def instance_norm(x: Tensor, scale: Tensor, bias: Tensor, epsilon: float = 1e-5,
                  name: str = "T_instance_norm") -> Tensor:
    """(x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], the mean and (biased)
    variance over the spatial axes (2, 3, ...) of each (n, c): stages <name>_mean,
    <name>_var and the result."""
    who = "instance_norm"
    check_tensor(x, who, "x")
    check_float(x, who, "x")
    if x.ndim < 3:
        raise ShapeError(f"{who}: x must have at least 3 dimensions (N, C, ...), got {x.ndim}")
    for param, t in (("scale", scale), ("bias", bias)):
        check_tensor(t, who, param, ndim=1)
        check_dim(t.shape[0], x.shape[1], who, f"{param}.shape[0] (x.shape[1], the channels)")
    axes = tuple(range(2, x.ndim))
    inv = 1.0 / _spatial_count(x, axes, who, "")
    mean = reduce_over(x, axes, False, f"{name}_mean", "comm_reduce",
                       lambda full, raxes: api.sum(x(*full) * inv, axis=raxes))

    def centered(i):  # two passes: the mean, then the mean of squared deviations
        return x(*i) - mean(i[0], i[1])
    var = reduce_over(x, axes, False, f"{name}_var", "comm_reduce",
                      lambda full, raxes: api.sum(centered(full) * centered(full) * inv,
                                                  axis=raxes))
    return api.compute(x.shape, lambda *i: centered(i) * api.rsqrt(var(i[0], i[1]) + epsilon)
                       * scale[i[1]] + bias[i[1]], name=name, tag="injective")


def _spatial_count(x: Tensor, axes: tuple, who: str, purpose: str) -> int:
    """How many elements the spatial `axes` of x hold; they must be static (the mean's
    1 / count is a constant)."""
    count = 1
    for a in axes:
        d = static_dim(x.shape[a])
        if d is None:
            raise ShapeError(f"{who}: x must have constant spatial sizes{purpose}, got axis "
                             f"{a} symbolic")
        count *= d
    return count
