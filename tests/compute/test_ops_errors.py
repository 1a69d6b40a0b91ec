"""te.compute.ops argument checks: each bad argument raises ShapeError/DTypeError whose text
names the operator, the parameter, what was expected and what came (texts pinned here).
Imports te and te.compute.ops; builds nothing.
"""
import re

import pytest

import te
from te.compute import ops

A = te.placeholder((7, 13), name="A")
V = te.placeholder((13,), name="V")
X4 = te.placeholder((1, 4, 9, 9), name="X4")
K4 = te.placeholder((6, 2, 3, 3), name="K4")
AI = te.placeholder((7, 13), "int32", name="AI")


CASES = [
    (lambda: ops.relu([1, 2]), te.ShapeError, "relu: x must be a te.Tensor, got list"),
    (lambda: ops.add(A, te.placeholder((7, 5))), te.ShapeError,
     "add: shapes (7, 13) and (7, 5) do not broadcast: dimension 1 is 13 vs 5"),
    (lambda: ops.multiply(2, 3), te.ShapeError,
     "multiply: at least one of lhs and rhs must be a te.Tensor"),
    (lambda: ops.fused_scale_shift_relu(V, A, 0.0), te.ShapeError,
     "fused_scale_shift_relu: a must broadcast to the shape of x (13,), got (7, 13)"),
    (lambda: ops.transpose(A, (0, 0)), te.ShapeError,
     "transpose: axes must be a permutation of 0..1, got (0, 0)"),
    (lambda: ops.transpose(A, (0, 2)), te.ShapeError,
     "transpose: axes must be in [-2, 1] for a 2-d tensor, got 2"),
    (lambda: ops.reshape(A, (5, 5)), te.ShapeError,
     "reshape: newshape must hold 91 elements like (7, 13), got (5, 5) (25 elements)"),
    (lambda: ops.reshape(A, (-1, 5)), te.ShapeError,
     "reshape: cannot reshape (7, 13) (91 elements) to (-1, 5)"),
    (lambda: ops.pad(A, (1,)), te.ShapeError, "pad: pad_before must be an int or 2 ints, got (1,)"),
    (lambda: ops.pad(A, (1, -7), (0, -6)), te.ShapeError,
     "pad: the negative pads of axis 1 (size 13) must leave at least one element, got "
     "pad_before -7 and pad_after -6"),
    (lambda: ops.pad(A, (1, 2), mode="symmetric"), te.ShapeError,
     "pad: mode must be one of ['constant', 'edge', 'reflect', 'wrap'], got 'symmetric'"),
    (lambda: ops.pad(A, (1, 2), (7, 0), mode="reflect"), te.ShapeError,
     "pad: mode 'reflect' needs each pad of axis 0 smaller than the axis (7 elements), got "
     "pad_before 1 and pad_after 7"),
    (lambda: ops.pad(A, (0, 9), (0, -4), mode="reflect"), te.ShapeError,
     "pad: mode 'reflect' needs each pad of axis 1 smaller than the axis (9 elements after "
     "cropping), got pad_before 9 and pad_after -4"),
    (lambda: ops.pad(te.placeholder((te.var("n"), 3)), (1, 0), mode="edge"), te.ShapeError,
     "pad: mode 'edge' with these pads needs a constant size on axis 0, got shape (n, 3)"),
    (lambda: ops.concatenate([A, V], 0), te.ShapeError,
     "concatenate: tensors[1] must have 2 dimensions like tensors[0], got 1"),
    (lambda: ops.concatenate([A, te.placeholder((7, 13)), AI], 0), te.ShapeError,
     "concatenate: tensors[2] must have dtype float32 like tensors[0], got int32"),
    (lambda: ops.concatenate([A, te.placeholder((3, 5))], 0), te.ShapeError,
     "concatenate: tensors[1] has shape (3, 5), expected (7, 13) except on axis 0"),
    (lambda: ops.slice_axis(A, 1, 5, 2), te.ShapeError,
     "slice_axis: the slice 5:2:1 of axis 1 (size 13) is empty"),
    (lambda: ops.slice_axis(A, 0, 0, 3, 0), te.ShapeError,
     "slice_axis: step must be a non-zero int, got 0"),
    (lambda: ops.sum(A, (1, -1)), te.ShapeError, "sum: axis must not repeat an axis, got (1, -1)"),
    (lambda: ops.sum(A), te.ShapeError,
     "T_sum: reducing every axis without keepdims would give a 0-d tensor"),
    (lambda: ops.argmax(A, 2), te.ShapeError,
     "argmax: axis must be in [-2, 1] for a 2-d tensor, got 2"),
    (lambda: ops.matmul(A, A), te.ShapeError,
     "matmul: B.shape[0] (the reduction size, A.shape[1]): expected 13, got 7"),
    (lambda: ops.matmul(A, V), te.ShapeError,
     "matmul: B must have 2 dimensions, got 1 (shape (13,))"),
    (lambda: ops.batch_matmul(te.placeholder((2, 3, 4)), te.placeholder((3, 4, 5))),
     te.ShapeError, "batch_matmul: B.shape[0] (the batch size): expected 2, got 3"),
    (lambda: ops.conv2d_nchw(X4, K4, groups=3), te.ShapeError,
     "conv2d_nchw: data channels (4) must be divisible by groups (3)"),
    (lambda: ops.conv2d_nchw(X4, K4), te.ShapeError,
     "conv2d_nchw: kernel.shape[1] (data channels // groups): expected 4, got 2"),
    (lambda: ops.conv2d_nchw(X4, K4, stride=0, groups=2), te.ShapeError,
     "conv2d_nchw: stride must be >= 1, got 0"),
    (lambda: ops.conv2d_nchw(X4, K4, padding=(1, 2, 3), groups=2), te.ShapeError,
     "conv2d_nchw: padding (an int, 2 ints or 4 ints) must be an int or 2 ints, got (1, 2, 3)"),
    (lambda: ops.conv2d_nchw(X4, te.placeholder((6, 2, 11, 3)), groups=2), te.ShapeError,
     "conv2d_nchw: the kernel height window (11 with dilation) does not fit the padded "
     "input (9)"),
    (lambda: ops.depthwise_conv2d_nchw(X4, K4), te.ShapeError,
     "depthwise_conv2d_nchw: kernel.shape[0] (data channels): expected 4, got 6"),
    (lambda: ops.max_pool2d(X4, (2, 2), padding=2), te.ShapeError,
     "max_pool2d: padding must be smaller than the kernel on each side"),
    (lambda: ops.avg_pool2d(te.placeholder((1, 1, 4, 4), "int32"), 2), te.DTypeError,
     "avg_pool2d: data must have a float dtype, got int32"),
    (lambda: ops.softmax(AI), te.DTypeError, "softmax: x must have a float dtype, got int32"),
    (lambda: ops.softmax(V), te.ShapeError, "softmax: x must have at least 2 dimensions"),
    (lambda: ops.layer_norm(A, V, te.placeholder((7,)), 1), te.ShapeError,
     "layer_norm: beta.shape[0] (x.shape[1]): expected 13, got 7"),
    (lambda: ops.layer_norm(A, A, A, (0, 1)), te.ShapeError,
     "layer_norm: axis must leave at least one axis unnormalized"),
    (lambda: ops.cumsum(A, 3), te.ShapeError,
     "cumsum: axis must be in [-2, 1] for a 2-d tensor, got 3"),
]


@pytest.mark.parametrize("make, error, text", CASES, ids=[c[2].split(":")[0] + f"-{k}"
                                                          for k, c in enumerate(CASES)])
def test_error_message(make, error, text):
    with pytest.raises(error, match=re.escape(text)):
        make()


def test_errors_are_te_errors():
    """Every op error derives from te.TEError, and ShapeError is also a ValueError."""
    with pytest.raises(te.TEError):
        ops.reshape(A, (4, 4))
    with pytest.raises(ValueError):
        ops.transpose(A, (1,))
