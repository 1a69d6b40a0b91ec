"""Every imported ONNX op against onnxruntime: one-node models on random data (never zeros),
odd sizes, and the opset variants where an op changed (attributes that became inputs)."""
import numpy as np
import pytest

import graph
from onnx_cases import Const, assert_close, make_model, rand, run_both

B = np.bool_
I64 = np.int64

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Floor", "Ceil", "Abs", "Neg", "Sign",
         "Softplus", "Softsign", "Identity"]
POSITIVE = ["Log", "Sqrt", "Reciprocal"]

CASES = [(op, [rand(3, 5, 7)], {}, 13) for op in UNARY]
CASES += [(op, [rand(3, 5, 7, low=0.5, high=3.0)], {}, 13) for op in POSITIVE]
CASES += [
    ("HardSwish", [rand(5, 9) * 4], {}, 14),
    ("Elu", [rand(4, 7)], {"alpha": 0.7}, 13),
    ("LeakyRelu", [rand(4, 7)], {"alpha": 0.3}, 13),
    ("Selu", [rand(4, 7)], {}, 13),
    ("HardSigmoid", [rand(4, 7) * 4], {"alpha": 0.3, "beta": 0.4}, 13),
    ("Gelu", [rand(4, 7)], {}, 20),
    ("Gelu", [rand(4, 7)], {"approximate": "tanh"}, 20),
    ("Clip", [rand(5, 7)], {"min": -0.5, "max": 0.6}, 7),
    ("Clip", [rand(5, 7), Const(np.float32(-0.4)), Const(np.float32(0.3))], {}, 13),
    ("Clip", [rand(5, 7), Const(np.float32(-0.4))], {}, 13),
    ("Clip", [rand(5, 7), None, Const(np.float32(0.3))], {}, 11),
    ("Dropout", [rand(3, 5)], {"ratio": 0.3}, 7),
    ("Dropout", [rand(3, 5)], {}, 13),
    ("Add", [rand(3, 1, 5), rand(4, 5)], {}, 13),
    ("Sub", [rand(3, 4, 5), rand(5)], {}, 7),
    ("Mul", [rand(2, 3, 5), Const(rand(3, 1))], {}, 14),
    ("Div", [rand(3, 5), rand(3, 5, low=0.5, high=2.0)], {}, 13),
    ("Pow", [rand(3, 5, low=0.5, high=2.0), rand(5)], {}, 15),
    ("Sum", [rand(3, 5), rand(5), rand(3, 1)], {}, 13),
    ("Max", [rand(3, 5), rand(5), rand(3, 1)], {}, 13),
    ("Min", [rand(3, 5), rand(3, 5)], {}, 8),
    ("Mean", [rand(3, 5), rand(5), rand(3, 5)], {}, 13),
    ("PRelu", [rand(2, 5, 3, 3), Const(rand(5, 1, 1))], {}, 16),
    ("Cast", [rand(3, 5) * 10], {"to": 6}, 13, np.int32),
    ("Less", [rand(3, 5), rand(5)], {}, 13, B),
    ("Greater", [rand(3, 5), rand(3, 1)], {}, 13, B),
    ("Equal", [np.arange(15, dtype=I64).reshape(3, 5) % 4, np.arange(5, dtype=I64)], {}, 13, B),
    ("And", [rand(3, 5) > 0, rand(5) > 0], {}, 7, B),
    ("Or", [rand(3, 5) > 0, rand(3, 5) > 0], {}, 7, B),
    ("Not", [rand(3, 5) > 0], {}, 7, B),
    ("Conv", [rand(2, 3, 11, 9), Const(rand(4, 3, 3, 3))], {"pads": [1, 1, 1, 1]}, 11),
    ("Conv", [rand(1, 4, 13, 10), Const(rand(6, 2, 3, 2)), Const(rand(6))],
     {"group": 2, "strides": [2, 1], "dilations": [2, 1], "pads": [1, 0, 2, 1]}, 11),
    ("Conv", [rand(1, 5, 9, 9), Const(rand(5, 1, 3, 3))], {"group": 5, "auto_pad": "SAME_UPPER",
                                                          "strides": [2, 2]}, 11),
    ("Conv", [rand(1, 3, 8, 7), Const(rand(2, 3, 4, 4))], {"auto_pad": "SAME_LOWER"}, 11),
    ("Conv", [rand(1, 3, 8, 7), Const(rand(2, 3, 3, 2))], {"auto_pad": "VALID"}, 7),
    ("Conv", [rand(2, 4, 13), Const(rand(6, 2, 3)), Const(rand(6))],
     {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}, 11),
    ("Conv", [rand(1, 3, 10), Const(rand(2, 3, 4))], {"auto_pad": "SAME_UPPER"}, 11),
    ("MaxPool", [rand(2, 3, 11)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 12),
    ("AveragePool", [rand(2, 3, 11)], {"kernel_shape": [2], "ceil_mode": 1,
                                       "strides": [2]}, 11),
    ("ConvTranspose", [rand(1, 3, 5, 4), Const(rand(3, 2, 3, 3))], {}, 11),
    ("ConvTranspose", [rand(2, 4, 5, 6), Const(rand(4, 3, 3, 2)), Const(rand(6))],
     {"strides": [2, 3], "pads": [1, 0, 2, 1], "output_padding": [1, 2], "group": 2,
      "dilations": [1, 2]}, 11),
    ("MaxPool", [rand(2, 3, 11, 10)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1]}, 12),
    ("MaxPool", [rand(1, 3, 10, 11)], {"kernel_shape": [3, 2], "strides": [2, 2],
                                       "ceil_mode": 1}, 12),
    ("MaxPool", [rand(1, 2, 9, 8)], {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"}, 8),
    ("AveragePool", [rand(1, 3, 11, 10)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "pads": [1, 1, 1, 1]}, 11),
    ("AveragePool", [rand(1, 3, 11, 10)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "pads": [1, 1, 1, 1], "count_include_pad": 1}, 11),
    ("AveragePool", [rand(1, 2, 10, 11)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "ceil_mode": 1}, 11),
    ("GlobalAveragePool", [rand(2, 3, 7, 5)], {}, 13),
    ("GlobalMaxPool", [rand(2, 3, 7, 5)], {}, 13),
    ("BatchNormalization", [rand(2, 3, 5, 4), Const(rand(3)), Const(rand(3)), Const(rand(3)),
                            Const(rand(3, low=0.5, high=2.0))], {"epsilon": 1e-3}, 9),
    ("BatchNormalization", [rand(2, 3, 5), Const(rand(3)), Const(rand(3)), Const(rand(3)),
                            Const(rand(3, low=0.5, high=2.0))], {}, 15),
    ("LRN", [rand(1, 7, 5, 4)], {"size": 3, "alpha": 1e-2, "beta": 0.6, "bias": 1.5}, 13),
    ("LRN", [rand(2, 6, 3, 3)], {"size": 5}, 13),
    ("Softmax", [rand(2, 3, 5)], {"axis": 1}, 11),
    ("Softmax", [rand(2, 3, 5)], {"axis": 1}, 13),
    ("Softmax", [rand(3, 7)], {}, 13),
    ("Gemm", [rand(3, 5), Const(rand(7, 5)), Const(rand(7))], {"transB": 1, "alpha": 0.5,
                                                               "beta": 2.0}, 13),
    ("Gemm", [rand(5, 3), rand(5, 4)], {"transA": 1}, 11),
    ("MatMul", [rand(3, 5), rand(5, 4)], {}, 13),
    ("MatMul", [rand(2, 1, 3, 5), rand(4, 5, 6)], {}, 13),
    ("MatMul", [rand(5), rand(3, 5, 2)], {}, 13),
    ("MatMul", [rand(3, 5), rand(5)], {}, 13),
    ("LayerNormalization", [rand(2, 3, 7), Const(rand(7)), Const(rand(7))], {}, 17),
    ("LayerNormalization", [rand(2, 3, 7), Const(rand(3, 7))], {"axis": -2,
                                                                 "epsilon": 1e-3}, 17),
    ("Flatten", [rand(2, 3, 4, 5)], {"axis": 2}, 13),
    ("Flatten", [rand(2, 3, 4)], {"axis": 0}, 9),
    ("Reshape", [rand(2, 3, 4), Const(np.array([0, -1, 2], I64))], {}, 13),
    ("Transpose", [rand(2, 3, 4)], {"perm": [1, 2, 0]}, 13),
    ("Transpose", [rand(2, 3, 4)], {}, 13),
    ("Concat", [rand(2, 3, 4), rand(2, 1, 4), rand(2, 2, 4)], {"axis": 1}, 13),
    ("Squeeze", [rand(3, 1, 4, 1)], {"axes": [1]}, 11),
    ("Squeeze", [rand(3, 1, 4, 1), Const(np.array([-1], I64))], {}, 13),
    ("Squeeze", [rand(3, 1, 4, 1)], {}, 13),
    ("Unsqueeze", [rand(3, 4)], {"axes": [0, 3]}, 11),
    ("Unsqueeze", [rand(3, 4), Const(np.array([1, -1], I64))], {}, 13),
    ("Pad", [rand(2, 3, 4)], {"pads": [0, 1, 2, 1, 0, 3], "value": 1.5}, 7),
    ("Pad", [rand(2, 3, 4), Const(np.array([0, 1, 2, 1, 0, 3], I64)),
             Const(np.float32(-2.0))], {}, 13),
    ("Pad", [rand(2, 3, 4), Const(np.array([1, 2, 0, 3], I64)), None,
             Const(np.array([1, 2], I64))], {}, 18),
    ("Slice", [rand(5, 7, 4)], {"starts": [1, 0], "ends": [4, 100], "axes": [0, 2]}, 9),
    ("Slice", [rand(5, 7, 4), Const(np.array([-1, 1], I64)), Const(np.array([-6, 6], I64)),
               Const(np.array([0, 1], I64)), Const(np.array([-2, 2], I64))], {}, 13),
    ("Split", [rand(3, 7)], {"axis": 1, "split": [2, 5]}, 11, None, 2),
    ("Split", [rand(7, 3), Const(np.array([3, 1, 3], I64))], {}, 13, None, 3),
    ("Split", [rand(3, 7)], {"axis": 1, "num_outputs": 3}, 18, None, 3),
    ("Expand", [rand(3, 1), Const(np.array([2, 1, 5], I64))], {}, 13),
    ("ConstantOfShape", [Const(np.array([2, 3], I64))],
     {"value": __import__("onnx").helper.make_tensor("v", 1, [1], [1.25])}, 13, np.float32),
    ("Shape", [rand(2, 3, 5)], {}, 13, I64),
    ("Shape", [rand(2, 3, 5)], {"start": 1}, 15, I64),
]
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare"]
CASES += [(op, [rand(3, 4, 5)], {"axes": [1], "keepdims": 0}, 11) for op in REDUCE]
CASES += [(op, [rand(3, 4, 5), Const(np.array([0, -1], I64))], {}, 18) for op in REDUCE]
CASES += [
    ("ReduceSum", [rand(3, 4, 5), Const(np.array([2], I64))], {"keepdims": 0}, 13),
    ("ReduceMean", [rand(3, 4, 5)], {}, 13),
    ("ArgMax", [rand(3, 4, 5)], {"axis": 1}, 13, I64),
    ("ArgMin", [rand(3, 4, 5)], {"axis": -1, "keepdims": 0}, 13, I64),
    ("LogSoftmax", [rand(3, 7)], {}, 13),
    ("LogSoftmax", [rand(2, 3, 5)], {"axis": 1}, 11),
    ("InstanceNormalization", [rand(2, 3, 5, 4), Const(rand(3)), Const(rand(3))],
     {"epsilon": 1e-3}, 13),
    ("Gather", [rand(5, 4, 3), Const(np.array([[0, -1], [3, 1], [2, 2]], I64))],
     {"axis": 1}, 13),
    ("Gather", [rand(5, 3), np.array([4, 0, -2], I64)], {}, 13),
    ("Tile", [rand(2, 3, 1), Const(np.array([2, 1, 3], I64))], {}, 13),
    ("Where", [rand(3, 1) > 0, rand(3, 5), rand(5)], {}, 16, np.float32),
    ("Resize", [rand(1, 2, 5, 4), Const(np.array([1, 1, 2.0, 1.5], np.float32))],
     {"mode": "nearest"}, 10),
    ("Resize", [rand(1, 2, 5, 4), Const(np.array([1, 1, 2.0, 1.5], np.float32))],
     {"mode": "linear"}, 10),
    ("Resize", [rand(2, 3, 5, 4), None, Const(np.array([1, 1, 1.7, 0.6], np.float32))],
     {"mode": "linear"}, 13),
    ("Resize", [rand(1, 2, 5, 4), None, None, Const(np.array([1, 2, 9, 7], I64))],
     {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, 13),
    ("Resize", [rand(1, 2, 5, 4), None, None, Const(np.array([1, 2, 8, 11], I64))],
     {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, 19),
    ("Resize", [rand(1, 2, 5, 4), None, Const(np.array([1, 1, 2.5, 1.75], np.float32))],
     {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "round_prefer_ceil"},
     13),
    ("Resize", [rand(1, 2, 5, 4), Const(np.zeros(0, np.float32)),
                Const(np.zeros(0, np.float32)), Const(np.array([1, 2, 7, 3], I64))],
     {"nearest_mode": "floor"}, 11),
    ("Resize", [rand(1, 2, 6, 5), None, None, Const(np.array([1, 2, 4, 9], I64))],
     {"nearest_mode": "ceil", "coordinate_transformation_mode": "half_pixel"}, 18),
]


def _id(case):
    attrs = ",".join(f"{k}" for k in case[2])
    return f"{case[0]}-opset{case[3]}" + (f"-{attrs}" if attrs else "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_op_matches_onnxruntime(case):
    op, inputs, attrs, opset = case[:4]
    out_dtype = case[4] if len(case) > 4 else None
    n_out = case[5] if len(case) > 5 else 1
    model, feeds = make_model(op, inputs, attrs, opset, n_out, out_dtype)
    ours, ref = run_both(model, feeds)
    assert_close(ours, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mod_is_exact(dtype):
    """Mod with fmod=1 is C's fmod, exact where a - trunc(a / b) * b is not (quotients past
    2**24 in float32): bit for bit against numpy and onnxruntime, negatives and broadcasting
    included (quotients past 2**53 for float64)."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 37)) * 10.0 ** rng.integers(0, 9, (3, 37))).astype(dtype)
    b = (rng.standard_normal(37) * 3 + np.where(rng.random(37) < 0.5, -0.5, 0.5)).astype(dtype)
    a[0, :3], b[:3] = [1e7 + 1, -1e7 - 1, 123456789.0], [3.3, 3.3, -0.7]
    a[1, :3] = [1e20, -3e18, 7.25e16]  # past 2**53: wrong in float64 too
    model, feeds = make_model("Mod", [a, b], {"fmod": 1}, 13)
    ours, ref = run_both(model, feeds)
    np.testing.assert_array_equal(ours[0], np.fmod(a, b))
    np.testing.assert_array_equal(ours[0], ref[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mod_fmod0_is_numpys_remainder(dtype):
    """Opset 28's float Mod with fmod=0 is numpy's %: the divisor's sign, exact for large
    quotients, signed zeros and infinities as the spec lists (onnxruntime lacks opset 28)."""
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((2, 41)) * 10.0 ** rng.integers(0, 9, (2, 41))).astype(dtype)
    b = (rng.standard_normal(41) * 3 + np.where(rng.random(41) < 0.5, -0.5, 0.5)).astype(dtype)
    a[0, :8] = [1e7 + 1, -1e7 - 1, 1e20, 0.0, -0.0, 2.5, -2.5, np.inf]
    b[:8] = [3.3, 3.3, -0.7, -2.0, 2.0, -np.inf, -np.inf, 2.0]
    model, feeds = make_model("Mod", [a, b], {"fmod": 0}, 28)
    out = graph.compile(graph.from_onnx(model)).run(feeds)[0]
    with np.errstate(invalid="ignore"):
        expected = np.mod(a, b)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


def test_float_mod_fmod0_before_opset_28_is_refused():
    model, _ = make_model("Mod", [rand(3, 5), rand(3, 5)], {"fmod": 0}, 13)
    with pytest.raises(graph.UnsupportedError, match=r"fmod=0 on float32 at opset 13 \(the "
                       r"spec requires fmod=1 for floats before opset 28\)"):
        graph.from_onnx(model)
