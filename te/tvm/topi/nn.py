"""tvm.topi.nn: TVM's nn operator signatures over te.compute.ops."""
from __future__ import annotations

from ...compute import api as _api
from ...compute import ops as _ops
from ...errors import ArgumentError

relu = _ops.relu
softmax = _ops.softmax
log_softmax = _ops.log_softmax


def conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):  # noqa: N803
    return _ops.conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=out_dtype)


def depthwise_conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype=None):  # noqa: N803
    return _ops.depthwise_conv2d_nchw(Input, Filter, stride, padding, dilation,
                                      out_dtype=out_dtype)


def _add_bias(C, bias, out_dtype):
    if bias is None:
        return C
    return _api.compute(C.shape, lambda i, j: C[i, j] + bias[j].astype(out_dtype),
                        name="T_add_bias", tag="broadcast")


def dense(data, weight, bias=None, out_dtype=None):
    """data (M, K) times weight (N, K) transposed, plus bias (N,)."""
    out_dtype = out_dtype or data.dtype
    C = _ops.matmul(data, weight, transpose_b=True, out_dtype=out_dtype, name="T_dense")
    return _add_bias(C, bias, out_dtype)


def matmul(tensor_a, tensor_b, bias=None, out_dtype=None, transpose_a=False,
           transpose_b=False):
    if transpose_a:
        raise ArgumentError("topi.nn.matmul: transpose_a=True is not supported; transpose "
                            "tensor_a first (topi.transpose)")
    out_dtype = out_dtype or tensor_a.dtype
    C = _ops.matmul(tensor_a, tensor_b, transpose_b=transpose_b, out_dtype=out_dtype)
    return _add_bias(C, bias, out_dtype)


def batch_matmul(tensor_a, tensor_b, oshape=None, out_dtype=None, transpose_a=False,
                 transpose_b=True):
    """TVM's default: tensor_b is (batch, N, K), transposed."""
    if transpose_a or oshape is not None:
        raise ArgumentError("topi.nn.batch_matmul: transpose_a and oshape are not supported")
    return _ops.batch_matmul(tensor_a, tensor_b, transpose_b=transpose_b, out_dtype=out_dtype)


def layer_norm(data, gamma, beta, axis, epsilon=1e-5):
    return _ops.layer_norm(data, gamma, beta, axis=axis, epsilon=epsilon)


def pad(data, pad_before, pad_after=None, pad_value=0.0, name="PadInput"):
    return _ops.pad(data, pad_before, pad_after, pad_value=pad_value, name=name)


__all__ = ["batch_matmul", "conv2d_nchw", "dense", "depthwise_conv2d_nchw", "layer_norm",
           "log_softmax", "matmul", "pad", "relu", "softmax"]
