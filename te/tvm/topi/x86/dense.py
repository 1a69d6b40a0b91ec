"""topi's x86 dense templates, "dense_pack.x86" and "dense_nopack.x86", with our API.

dense_pack: the weight (N, K) is packed to (N / bn, K, bn), bn = tile_x's innermost size,
so the inner loop reads it contiguously; C (M, N) is tiled by tile_y / tile_x (three loops
each: the outer ones fused and parallel, the innermost of x vectorized) and computed in a
write cache per tile, whose reduction is split by tile_k and its rows by tile_inner.
dense_nopack: sums of `vec` lanes (tile_k's innermost size) reduced at the end. Untuned
(cfg.is_fallback) both set the defaults topi sets. Knobs, sizes and defaults follow topi's
templates; the code is ours. Imports te.compute, te.tvm.autotvm and topi.utils.
"""
from __future__ import annotations

from ....compute import api as te
from ....schedule.schedule import create_schedule
from ...autotvm import register_topi_compute, register_topi_schedule
from ...autotvm.task.space import SplitEntity
from ..utils import get_const_tuple, traverse_inline
from .utils import get_fp32_len


def _largest_divisor_at_most(n: int, cap: int) -> int:
    return next(d for d in range(min(cap, n), 0, -1) if n % d == 0)


def _halvings(n: int) -> int:
    """The largest power of two t with n / t even-divisible steps down to at most 4."""
    t = 1
    while n // t > 4 and (n // t) % 2 == 0:
        t *= 2
    return t


def _default_pack_config(cfg, M, N, K) -> None:
    tx_inner = _largest_divisor_at_most(N, 2 * get_fp32_len())
    tx_mid = _halvings(N // tx_inner)
    ty_inner = 8
    while M % ty_inner:
        ty_inner //= 2
    ty_mid = _halvings(M // ty_inner)
    cfg["tile_y"] = SplitEntity([M // ty_inner // ty_mid, ty_mid, ty_inner])
    cfg["tile_x"] = SplitEntity([N // tx_inner // tx_mid, tx_mid, tx_inner])
    cfg["tile_k"] = SplitEntity([K, 1])
    cfg["tile_inner"] = SplitEntity([M // ty_inner, ty_inner])


def _add_bias(C, bias, out_dtype):
    if bias is None:
        return C
    return te.compute(C.shape, lambda i, j: C[i, j] + bias[j].astype(out_dtype),
                      name="T_add_bias", tag="broadcast")


@register_topi_compute("dense_pack.x86")
def dense_pack(cfg, data, weight, bias=None, out_dtype=None):
    """data (M, K) x weight (N, K) (or pre-packed (N / bn, K, bn)) transposed, + bias."""
    out_dtype = out_dtype or data.dtype
    M, K = get_const_tuple(data.shape)
    if len(weight.shape) == 3:
        nb, _, bn = get_const_tuple(weight.shape)
        N = nb * bn
    else:
        N, _ = get_const_tuple(weight.shape)
    cfg.define_split("tile_y", M, num_outputs=3)
    cfg.define_split("tile_x", N, num_outputs=3)
    cfg.define_split("tile_k", K, num_outputs=2)
    cfg.define_split("tile_inner", M, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    if cfg.is_fallback:
        _default_pack_config(cfg, M, N, K)
    if len(weight.shape) == 2:
        bn = cfg["tile_x"].size[-1]
        packed = te.compute((N // bn, K, bn), lambda z, y, x: weight[z * bn + x, y],
                            name="packed_weight")
    else:
        packed = weight
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda y, x: te.sum(
        data[y, k].astype(out_dtype) *
        packed[te.indexdiv(x, bn), k, te.indexmod(x, bn)].astype(out_dtype), axis=k),
        name="T_dense_pack", tag="dense_pack")
    cfg.add_flop(2 * M * N * K)
    return _add_bias(C, bias, out_dtype)


def _tile_output(cfg, s, T):
    y, x = s[T].op.axis
    yt, yo, yi = cfg["tile_y"].apply(s, T, y)
    xt, xo, xi = cfg["tile_x"].apply(s, T, x)
    s[T].reorder(xt, yt, yo, xo, yi, xi)
    return s[T].fuse(xt, yt), yo, xo, yi, xi


def _schedule_pack(cfg, s, C, O) -> None:
    CC = s.cache_write(C, "global")
    xyt, yo, xo, yi, xi = _tile_output(cfg, s, C)
    if C == O:
        s[C].parallel(xyt)
    xyo = s[C].fuse(yo, xo)
    s[C].unroll(yi)
    s[C].vectorize(xi)
    s[CC].compute_at(s[C], xyo)
    y, x = s[CC].op.axis
    ko, ki = cfg["tile_k"].apply(s, CC, s[CC].op.reduce_axis[0])
    s[CC].reorder(ko, ki, y, x)
    s[CC].vectorize(x)
    rows = cfg["tile_inner"].size[-1]
    if rows > 1:
        y_o, y_i = s[CC].split(y, factor=rows)
        s[CC].reorder(ko, y_o, ki, y_i, x)
        s[CC].unroll(y_o)
        s[CC].unroll(ki)
        s[CC].unroll(y_i)
    else:
        s[CC].unroll(ki)
        s[CC].unroll(y)
    if C != O:
        oxyt, _, _, _, oxi = _tile_output(cfg, s, O)
        s[C].compute_at(s[O], oxyt)
        s[O].vectorize(oxi)
        s[O].parallel(oxyt)


@register_topi_schedule("dense_pack.x86")
def schedule_dense_pack(cfg, outs):
    s = create_schedule([t.op for t in outs])

    def visit(op):
        if "dense_pack" in op.tag:
            _schedule_pack(cfg, s, op.output(0), outs[0])
    traverse_inline(s, outs[0].op, visit)
    return s


@register_topi_compute("dense_nopack.x86")
def dense_nopack(cfg, data, weight, bias=None, out_dtype=None):
    out_dtype = out_dtype or data.dtype
    M, K = get_const_tuple(data.shape)
    N, _ = get_const_tuple(weight.shape)
    cfg.define_split("tile_y", M, num_outputs=2)
    cfg.define_split("tile_x", N, num_outputs=2)
    cfg.define_split("tile_k", K, num_outputs=2)
    if cfg.is_fallback:
        vec = _largest_divisor_at_most(K, 2 * get_fp32_len())
        cfg["tile_k"] = SplitEntity([K // vec, vec])
        cfg["tile_x"] = SplitEntity([N, 1])
        cfg["tile_y"] = SplitEntity([1, M])
    vec = cfg["tile_k"].size[-1]
    k = te.reduce_axis((0, K // vec), name="k")
    CC = te.compute((M, N, vec), lambda z, y, x: te.sum(
        data[z, k * vec + x].astype(out_dtype) * weight[y, k * vec + x].astype(out_dtype),
        axis=k), name="T_dense_lanes")
    kk = te.reduce_axis((0, vec), name="kk")
    C = te.compute((M, N), lambda y, x: te.sum(CC[y, x, kk], axis=kk), name="T_dense_nopack",
                   tag="dense_nopack")
    cfg.add_flop(2 * M * N * K)
    return _add_bias(C, bias, out_dtype)


def _schedule_nopack(cfg, s, C) -> None:
    y, x = s[C].op.axis
    (kk,) = s[C].op.reduce_axis
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, yi, xi)
    xyo = s[C].fuse(yo, xo)
    s[C].parallel(xyo)
    s[C].unroll(kk)
    (CC,) = s[C].op.input_tensors
    s[CC].compute_at(s[C], xyo)
    z, y, x = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    yz = s[CC].fuse(z, y)
    s[CC].reorder(k, yz, x)
    s[CC].unroll(yz)
    s[CC].vectorize(x)


@register_topi_schedule("dense_nopack.x86")
def schedule_dense_nopack(cfg, outs):
    s = create_schedule([t.op for t in outs])

    def visit(op):
        if "dense_nopack" in op.tag:
            _schedule_nopack(cfg, s, op.output(0))
    traverse_inline(s, outs[0].op, visit)
    return s
