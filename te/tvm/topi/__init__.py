"""tvm.topi: TVM's operator names over te.compute.ops (our operator library).

Elementwise and broadcast ops (add, subtract, multiply, divide, maximum, minimum, power,
exp, log, sqrt, rsqrt, tanh, sigmoid, abs, erf, floor, ceil, round, cos, sin, the bitwise
and/or/xor/not and left/right shifts), transforms
(transpose, reshape, concatenate, tile, where), reductions (sum, max, min, argmax, argmin),
matmul; `nn` (conv2d_nchw, depthwise_conv2d_nchw, dense, matmul, batch_matmul, relu,
softmax, log_softmax, layer_norm, pad), `testing` (numpy references), `utils`, `tag` and
`x86` (the dense_pack / dense_nopack AutoTVM templates). Imports te.compute and
te.tvm.autotvm (for x86).
"""
from __future__ import annotations

from ...compute import api as _compute
from ...compute import ops as _ops
from ...errors import ArgumentError
from . import nn, tag, testing, utils, x86

add, subtract, multiply, divide = _ops.add, _ops.subtract, _ops.multiply, _ops.divide
maximum, minimum = _ops.maximum, _ops.minimum
transpose, reshape, concatenate, tile, where = (_ops.transpose, _ops.reshape,
                                                _ops.concatenate, _ops.tile, _ops.where)
sum, max, min, argmax, argmin = _ops.sum, _ops.max, _ops.min, _ops.argmax, _ops.argmin  # noqa: A001


def power(x, y):
    return _ops.broadcast_binary(_compute.power, x, y, name="T_power")


def _broadcast(fn, name):
    def op(lhs, rhs):
        return _ops.broadcast_binary(fn, lhs, rhs, name=f"T_{name}")
    op.__name__ = name
    op.__doc__ = f"{name}(lhs, rhs) of integer tensors with numpy broadcasting."
    return op


bitwise_and = _broadcast(_compute.bitwise_and, "bitwise_and")
bitwise_or = _broadcast(_compute.bitwise_or, "bitwise_or")
bitwise_xor = _broadcast(_compute.bitwise_xor, "bitwise_xor")
left_shift = _broadcast(_compute.shift_left, "left_shift")
right_shift = _broadcast(_compute.shift_right, "right_shift")


def _unary(fn, name):
    def op(x):
        return _ops.unary(fn, x, name=f"T_{name}")
    op.__name__ = name
    op.__doc__ = f"{name}(x) elementwise (tag 'elemwise')."
    return op


exp = _unary(_compute.exp, "exp")
log = _unary(_compute.log, "log")
sqrt = _unary(_compute.sqrt, "sqrt")
rsqrt = _unary(_compute.rsqrt, "rsqrt")
tanh = _unary(_compute.tanh, "tanh")
sigmoid = _unary(_compute.sigmoid, "sigmoid")
abs = _unary(_compute.abs, "abs")  # noqa: A001
erf = _unary(_compute.erf, "erf")
floor = _unary(_compute.floor, "floor")
ceil = _unary(_compute.ceil, "ceil")
round = _unary(_compute.round, "round")  # noqa: A001
cos = _unary(_compute.cos, "cos")
sin = _unary(_compute.sin, "sin")
bitwise_not = _unary(_compute.bitwise_not, "bitwise_not")


def matmul(a, b, transp_a: bool = False, transp_b: bool = False):
    """topi.matmul: a @ b (b transposed when transp_b)."""
    if transp_a:
        raise ArgumentError("topi.matmul: transp_a=True is not supported; transpose a first "
                            "(topi.transpose(a))")
    return _ops.matmul(a, b, transpose_b=transp_b)


__all__ = ["abs", "add", "argmax", "argmin", "bitwise_and", "bitwise_not", "bitwise_or",
           "bitwise_xor", "ceil", "concatenate", "cos", "divide", "erf", "exp", "floor",
           "left_shift", "log", "matmul", "max", "maximum", "min", "minimum", "multiply", "nn",
           "power", "reshape", "right_shift", "round", "rsqrt", "sigmoid", "sin", "sqrt",
           "subtract", "sum", "tag", "tanh", "testing", "tile", "transpose", "utils", "where",
           "x86"]
