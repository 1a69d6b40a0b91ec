"""Neural-network ops: convolution, pooling, normalization, softmax, matrix products.

Each row's compute takes te tensors in the op's input order and the node's (already
normalized) attributes, and calls te.compute.ops. Imports te's public API, te.compute.ops
and graph.ops.base.
"""
from __future__ import annotations

import te
from te.compute import ops as topi

from .base import OpDef, Pattern, static


def _with_bias(out, bias, name):
    if bias is None:
        return out
    return te.compute(out.shape, lambda *i: out(*i) + bias[i[1]],
                      name=f"{name}_bias", tag="broadcast")


def conv2d(ins, strides, padding, dilation, groups):
    """ins: data (N, C, H, W), weight (OC, C // groups, KH, KW), optional bias (OC,)."""
    # the conv2d strategy: a GEMM form or the direct one, by the attributes and shapes
    out = te.autotune.conv2d_compute(ins[0], ins[1], strides, padding, dilation, groups,
                                     name="conv2d")
    return _with_bias(out, ins[2] if len(ins) > 2 else None, "conv2d")


def conv2d_packed(ins, strides, padding, dilation, groups, kernel_shape):
    """ins: data, the weight packed by conv2d_pack_weight (for conv2d_weight_tile's mr),
    optional bias; kernel_shape: the unpacked weight's (OC, C // groups, KH, KW)."""
    # the unpacked weight's shape for the strategy's checks; the compute reads ins[1]
    kernel = te.placeholder(tuple(kernel_shape), dtype=ins[1].dtype, name="conv2d_kernel")
    out = te.autotune.conv2d_compute(ins[0], kernel, strides, padding, dilation, groups,
                                     name="conv2d", packed=ins[1])
    return _with_bias(out, ins[2] if len(ins) > 2 else None, "conv2d")


def winograd_rows_output(ins, out_height):
    """ins: the grouped conv's result (N, 6 * CO, tiles, W), optional bias (CO,)."""
    return topi.winograd_rows_output(ins[0], out_height, ins[1] if len(ins) > 1 else None,
                                     name="winograd_rows_output")


def conv2d_transpose(ins, strides, padding, dilation, output_padding, groups):
    """ins: data (N, C, H, W), weight (C, OC // groups, KH, KW), optional bias (OC,)."""
    out = topi.conv2d_transpose_nchw(ins[0], ins[1], strides, padding, dilation,
                                     output_padding, groups, name="conv2d_transpose")
    return _with_bias(out, ins[2] if len(ins) > 2 else None, "conv2d_transpose")


def _static(t) -> bool:
    return all(isinstance(static(d), int) for d in t.shape)


# pools of constant shapes read a phase-split padded input (te.autotune.schedule_pool2d's
# form); symbolic ones the plain compute, which the 'pool' family leaves to 'auto'. A
# dilation (an attribute only where it is not 1) spaces the window's taps in either.
def max_pool2d(ins, kernel, strides, padding, dilation=(1, 1)):
    pool = topi.max_pool2d_phased if _static(ins[0]) else topi.max_pool2d
    return pool(ins[0], kernel, strides, padding, dilation, name="max_pool2d")


def avg_pool2d(ins, kernel, strides, padding, count_include_pad, dilation=(1, 1)):
    pool = topi.avg_pool2d_phased if _static(ins[0]) else topi.avg_pool2d
    return pool(ins[0], kernel, strides, padding, count_include_pad, dilation,
                name="avg_pool2d")


# 3-d convolutions and pools: the direct computes of te.compute.ops.convolution and pool_nd
# (padding as begins, then ends); the convolutions scheduled by the automatic space
# ('auto'), the pools by te.autotune.schedule_pool_nd ('pool'); the 2-d ops above keep
# their own forms and schedules.
def conv3d(ins, strides, padding, dilation, groups):
    """ins: data (N, C, D, H, W), weight (OC, C // groups, KD, KH, KW), optional bias."""
    _check_rank(ins, 5, "conv3d")
    out = topi.conv_nd(ins[0], ins[1], strides, padding, dilation, groups, name="conv3d")
    return _with_bias(out, ins[2] if len(ins) > 2 else None, "conv3d")


def conv3d_transpose(ins, strides, padding, dilation, output_padding, groups):
    """ins: data (N, C, D, H, W), weight (C, OC // groups, KD, KH, KW), optional bias."""
    _check_rank(ins, 5, "conv3d_transpose")
    out = topi.conv_transpose_nd(ins[0], ins[1], strides, padding, dilation, output_padding,
                                 groups, name="conv3d_transpose")
    return _with_bias(out, ins[2] if len(ins) > 2 else None, "conv3d_transpose")


def max_pool3d(ins, kernel, strides, padding, dilation):
    _check_rank(ins[:1], 5, "max_pool3d")
    return topi.max_pool_nd(ins[0], kernel, strides, padding, dilation, name="max_pool3d")


def avg_pool3d(ins, kernel, strides, padding, dilation, count_include_pad):
    _check_rank(ins[:1], 5, "avg_pool3d")
    return topi.avg_pool_nd(ins[0], kernel, strides, padding, count_include_pad, dilation,
                            name="avg_pool3d")


def _check_rank(ins, ndim: int, who: str) -> None:
    """The data (and weight) of a 3-d op are 5-d, a bias 1-d: te's computes take any rank."""
    for k, t in enumerate(ins):
        want = 1 if k == 2 else ndim   # (a conv's bias)
        if len(t.shape) != want:
            raise te.ShapeError(f"{who}: input {k} must have {want} dimensions, got "
                                f"{len(t.shape)}")


def batch_norm(ins, epsilon):
    """ins: x, scale, bias, mean, var (ONNX BatchNormalization's order)."""
    return topi.batch_norm_inference(*ins, epsilon=epsilon, name="batch_norm")


def gemm(ins, alpha, beta, trans_a, trans_b):
    """alpha * op(A) @ op(B) + beta * C, op transposing when asked; C broadcasts."""
    a = topi.transpose(ins[0], (1, 0), name="gemm_a_t") if trans_a else ins[0]
    out = topi.matmul(a, ins[1], transpose_b=bool(trans_b), name="gemm_matmul")
    if alpha != 1.0:
        out = topi.multiply(out, alpha, name="gemm_alpha")
    if len(ins) > 2 and beta != 0.0:
        c = ins[2] if beta == 1.0 else topi.multiply(ins[2], beta, name="gemm_beta")
        out = topi.add(out, c, name="gemm")
    return out


# softmax, log_softmax and layer_norm are reductions along rows followed by elementwise
# stages: as COMM_REDUCE their elementwise producers (an attention's scale and mask, a
# residual add) fuse in front of them, and the automatic space's row-reduction policy
# schedules the whole (te.autotune.row_reduction). lrn and instance_norm stay opaque.
OPS = {op.name: op for op in (
    OpDef("conv2d", Pattern.OUT_ELEMWISE_FUSABLE, conv2d, (2, 3), schedule="conv2d",
          doc="2-d convolution, NCHW, groups and dilation, optional bias"),
    # what graph.passes.pack_conv_weights makes of a conv2d with a constant weight
    OpDef("conv2d_packed", Pattern.OUT_ELEMWISE_FUSABLE, conv2d_packed, (2, 3),
          schedule="conv2d", doc="conv2d reading its weight pre-packed (conv2d_pack_weight)"),
    OpDef("conv2d_pack_weight", Pattern.INJECTIVE,
          lambda ins, groups, mr: topi.conv2d_pack_weight(ins[0], groups, mr,
                                                          name="conv2d_pack_weight"),
          doc="a conv2d weight in the GEMM form's register-tile layout"),
    # what graph.passes.winograd_rows makes of a 3x3 stride-1 conv2d: these two around a
    # grouped 1x3 conv2d
    OpDef("winograd_rows_input", Pattern.INJECTIVE,
          lambda ins, top, out_height: topi.winograd_rows_input(
              ins[0], top, out_height, name="winograd_rows_input"),
          doc="a 3x3 conv's input rows, Winograd F(4, 3)-transformed per tile of 4 rows"),
    # fused as a conv is: its elementwise consumers (relu, a residual add) join it, an
    # injective one does not (a concatenate, which its output then goes into in place)
    OpDef("winograd_rows_output", Pattern.OUT_ELEMWISE_FUSABLE, winograd_rows_output, (1, 2),
          doc="the tiles' rows back as a 3x3 conv's output rows, optional bias"),
    OpDef("conv2d_transpose", Pattern.OUT_ELEMWISE_FUSABLE, conv2d_transpose, (2, 3),
          doc="transposed 2-d convolution, NCHW, groups and dilation, optional bias"),
    OpDef("max_pool2d", Pattern.OUT_ELEMWISE_FUSABLE, max_pool2d, schedule="pool",
          doc="max pooling, NCHW"),
    OpDef("avg_pool2d", Pattern.OUT_ELEMWISE_FUSABLE, avg_pool2d, schedule="pool",
          doc="average pooling, NCHW"),
    OpDef("conv3d", Pattern.OUT_ELEMWISE_FUSABLE, conv3d, (2, 3),
          doc="3-d convolution, NCDHW, groups and dilation, optional bias"),
    OpDef("conv3d_transpose", Pattern.OUT_ELEMWISE_FUSABLE, conv3d_transpose, (2, 3),
          doc="transposed 3-d convolution, NCDHW, groups and dilation, optional bias"),
    OpDef("max_pool3d", Pattern.OUT_ELEMWISE_FUSABLE, max_pool3d, schedule="pool",
          doc="max pooling, NCDHW"),
    OpDef("avg_pool3d", Pattern.OUT_ELEMWISE_FUSABLE, avg_pool3d, schedule="pool",
          doc="average pooling, NCDHW"),
    # opaque: an int64 index, read by nothing to fuse with (a MaxUnpool, a gather)
    OpDef("max_pool_indices", Pattern.OPAQUE,
          lambda ins, kernel, strides, padding, dilation, storage_order:
          topi.max_pool_indices(ins[0], kernel, strides, padding, dilation, storage_order,
                                name="max_pool_indices"), schedule="pool",
          doc="int64 flat index of each max pooling window's first maximum (ONNX MaxPool's "
              "Indices), any spatial rank"),
    OpDef("global_avg_pool2d", Pattern.OUT_ELEMWISE_FUSABLE,
          lambda ins: topi.global_pool2d(ins[0], "avg", name="global_avg_pool2d"),
          doc="mean over the spatial dims, kept as size 1"),
    OpDef("global_max_pool2d", Pattern.OUT_ELEMWISE_FUSABLE,
          lambda ins: topi.global_pool2d(ins[0], "max", name="global_max_pool2d"),
          doc="max over the spatial dims, kept as size 1"),
    OpDef("batch_norm", Pattern.BROADCAST, batch_norm, (5, 5),
          doc="batch normalization with running statistics (inference)"),
    OpDef("lrn", Pattern.OPAQUE,
          lambda ins, size, alpha, beta, bias: topi.lrn(ins[0], size, alpha, beta, bias,
                                                        name="lrn"),
          doc="local response normalization across channels"),
    OpDef("softmax", Pattern.COMM_REDUCE,
          lambda ins, axis: topi.softmax(ins[0], axis, name="softmax"),
          doc="softmax along one axis"),
    OpDef("log_softmax", Pattern.COMM_REDUCE,
          lambda ins, axis: topi.log_softmax(ins[0], axis, name="log_softmax"),
          doc="log of softmax along one axis, without forming the softmax"),
    OpDef("instance_norm", Pattern.OPAQUE,
          lambda ins, epsilon: topi.instance_norm(*ins, epsilon=epsilon,
                                                  name="instance_norm"), (3, 3),
          doc="normalization over the spatial axes of each (batch, channel)"),
    OpDef("layer_norm", Pattern.COMM_REDUCE,
          lambda ins, axis, epsilon: topi.layer_norm(*ins, axis=axis, epsilon=epsilon,
                                                     name="layer_norm"), (3, 3),
          doc="layer normalization over the trailing axes from `axis`"),
    OpDef("gemm", Pattern.OUT_ELEMWISE_FUSABLE, gemm, (2, 3),
          doc="alpha * A @ B + beta * C, optional transposes"),
    OpDef("matmul", Pattern.OUT_ELEMWISE_FUSABLE,
          lambda ins: topi.matmul_nd(ins[0], ins[1], name="matmul"), (2, 2),
          doc="numpy.matmul: batched, broadcast"),
    OpDef("matmul_panel", Pattern.OUT_ELEMWISE_FUSABLE,
          lambda ins, n: topi.matmul_panel(ins[0], ins[1], n, name="matmul"), (2, 2),
          doc="matmul by a constant [k, n] weight laid out in panels ahead (O1)"),
)}
