"""Reusable operator definitions (classic TVM topi names) built on the public compute API.

Gives functions from te.Tensors to te.Tensors, grouped by family: elementwise, transform,
reduction, nn, scatter. Each checks its arguments and raises te.errors.ShapeError/DTypeError
naming the parameter. Imports te.compute and te.errors only, never schedule or lower.
"""
from .elementwise import (add, broadcast_binary, broadcast_shape, divide,
                          fused_scale_shift_relu, maximum, minimum, multiply, relu, subtract,
                          unary, where)
from .conv2d_gemm import conv2d_nchw_gemm, conv2d_nchw_phased, conv2d_pack_weight
from .convolution import conv_nd, conv_transpose_nd
from .conv_transpose import conv2d_transpose_nchw
from .grid_sample import grid_sample
from .linalg import matmul_nd, matmul_panel
from .normalization import (batch_norm_inference, global_pool2d, instance_norm, log_softmax,
                            lrn)
from .nn import (avg_pool2d, batch_matmul, conv2d_nchw, depthwise_conv2d_nchw, layer_norm,
                 matmul, max_pool2d, softmax)
from .pool_nd import avg_pool_nd, max_pool_indices, max_pool_nd
from .pool_phased import avg_pool2d_phased, max_pool2d_phased
from .resize import resize
from .reduction import argmax, argmin, cumprod, cumsum, max, min, sum, topk  # noqa: A004
from .scatter import scatter_elements, scatter_nd, tensor_scatter
from .winograd_rows import winograd_rows_input, winograd_rows_output, winograd_rows_weight
from .transform import (concatenate, gather_elements, pad, reshape, slice_axis, take, tile,
                        transpose)

__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "relu", "unary",
           "broadcast_binary", "broadcast_shape", "batch_norm_inference", "lrn",
           "global_pool2d", "matmul_nd", "matmul_panel", "where", "take", "tile", "log_softmax",
           "instance_norm",
           "conv2d_transpose_nchw", "conv2d_nchw_gemm", "conv2d_nchw_phased",
           "conv2d_pack_weight", "resize", "grid_sample", "fused_scale_shift_relu",
           "transpose", "reshape",
           "pad", "concatenate", "slice_axis", "sum", "max", "min", "argmax", "argmin",
           "cumsum", "cumprod", "topk", "gather_elements", "scatter_elements", "scatter_nd",
           "tensor_scatter", "matmul",
           "batch_matmul", "conv2d_nchw", "depthwise_conv2d_nchw", "max_pool2d",
           "avg_pool2d", "max_pool2d_phased", "avg_pool2d_phased", "softmax", "layer_norm",
           "conv_nd", "conv_transpose_nd", "max_pool_nd", "avg_pool_nd", "max_pool_indices",
           "winograd_rows_input", "winograd_rows_output", "winograd_rows_weight"]
