"""The quantization ops (graph.frontend.onnx_quant) against onnxruntime (onnx's reference where
onnxruntime has no kernel) at O0 and O1, once at O2: QuantizeLinear and DequantizeLinear per
tensor, per axis and blocked, every integer type, with values that round from exact halves
(ties to even), that saturate, and negative zero points; MatMulInteger and QLinearMatMul per
tensor, per row and per column; ConvInteger and QLinearConv; DynamicQuantizeLinear through
its function body; where onnxruntime and ONNX's reference differ (float16 division, the
requantization's float32 product), onnxruntime's answer; the refusals."""
import numpy as np
import pytest

import graph
from onnx_cases import RNG, Const, check_levels, make_model

RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535),
          np.int16: (-32768, 32767)}


def _ints(dtype, shape, low=None, high=None):
    info = np.iinfo(dtype)
    low = info.min if low is None else low
    high = info.max if high is None else high
    return RNG.integers(low, high, shape, endpoint=True).astype(dtype)


def _to_quantize(shape, scale, zp, dtype, axis=None):
    """float32 data over the output type's range and 20 steps past each end (saturating),
    a third of it exact halves (k + 0.5) * scale, which divide to ties; `scale` and `zp`
    broadcast against `shape` (numbers, or arrays shaped to)."""
    lo, hi = RANGES[dtype]
    scale = np.broadcast_to(np.asarray(scale, np.float32), shape)
    zp = np.broadcast_to(np.asarray(zp, np.float32), shape)
    x = RNG.uniform(lo - zp - 20, hi - zp + 20, shape) * scale
    ties = (RNG.integers(lo, hi, shape) - zp + 0.5) * scale
    return np.where(RNG.random(shape) < 0.35, ties, x).astype(np.float32)


def _quantize_model(x, scale, zp, attrs=None, opset=13, dtype=np.uint8):
    ins = [x, Const(scale)] + ([Const(zp)] if zp is not None else [])
    return make_model("QuantizeLinear", ins, attrs, opset, out_dtype=dtype)


# ---- QuantizeLinear --------------------------------------------------------------------

@pytest.mark.parametrize("dtype,zp,opset,scale", [
    (np.uint8, 7, 10, 0.375),
    (np.int8, -3, 13, 0.0731),
    (np.int16, -300, 21, 0.375),
    (np.uint16, 1000, 21, 0.25),
], ids=["uint8-opset10", "int8-opset13", "int16-opset21", "uint16-opset21"])
def test_quantize_per_tensor_ties_and_saturation_match_onnxruntime(dtype, zp, opset, scale):
    scale = np.array(scale, np.float32)
    x = _to_quantize((7, 13), scale, zp, dtype)
    model, feeds = _quantize_model(x, scale, np.array(zp, dtype), opset=opset, dtype=dtype)
    check_levels(model, feeds)


def test_quantize_without_zero_point_is_uint8_or_output_dtype():
    scale = np.array([0.5], np.float32)   # a one-element 1-D scale is per tensor
    x = _to_quantize((3, 11), scale, 0, np.int8)
    check_levels(*_quantize_model(x, scale, None, opset=13))
    check_levels(*_quantize_model(x, scale, None, {"output_dtype": 3}, 21, np.int8))


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_quantize_per_axis_matches_onnxruntime(axis):
    shape = (3, 5, 7)
    n = shape[axis]
    scale = np.array([0.375, 0.25, 1.5, 0.125, 3.0, 0.5, 0.0731][:n], np.float32)
    zp = np.array([-5, 3, 0, -128, 127, 9, -1][:n], np.int8)
    view = [1, 1, 1]
    view[axis] = n
    x = _to_quantize(shape, scale.reshape(view), zp.reshape(view), np.int8)
    check_levels(*_quantize_model(x, scale, zp, {"axis": axis}, 13, np.int8))


@pytest.mark.parametrize("shape,axis,block", [((4, 10), 1, 4), ((7, 5), 0, 3)])
def test_quantize_blocked_matches_onnxruntime(shape, axis, block):
    blocks = list(shape)
    blocks[axis] = -(-shape[axis] // block)
    scale = RNG.choice(np.array([0.25, 0.375, 0.5, 1.5], np.float32), blocks)
    zp = _ints(np.int16, blocks, -50, 50)
    full_scale = np.repeat(scale, block, axis).take(range(shape[axis]), axis)
    full_zp = np.repeat(zp, block, axis).take(range(shape[axis]), axis)
    x = _to_quantize(shape, full_scale, full_zp, np.int16)
    model, feeds = _quantize_model(x, scale, zp, {"axis": axis, "block_size": block}, 21,
                                   np.int16)
    check_levels(model, feeds)


@pytest.mark.parametrize("opset,attrs", [(21, {}), (23, {}), (23, {"precision": 1})],
                         ids=["opset21-float32", "opset23-float16", "precision-float32"])
def test_float16_quantize_divides_as_onnxruntime(opset, attrs):
    # onnxruntime divides float16 in float32 before opset 23 (ONNX's reference: in
    # float16), from 23 in y_scale's type unless `precision` says otherwise
    scale = np.array(0.07, np.float16)
    x = (RNG.standard_normal(600) * 8).astype(np.float16)
    model, feeds = _quantize_model(x, scale, np.array(3, np.int8), attrs, opset, np.int8)
    check_levels(model, feeds)


def test_int32_quantize_matches_the_onnx_reference():
    x = _ints(np.int32, (5, 9), -3000, 3000)
    model, feeds = _quantize_model(x, np.array(12.5, np.float32), np.array(-4, np.int8),
                                   opset=13, dtype=np.int8)
    check_levels(model, feeds)


# ---- DequantizeLinear ------------------------------------------------------------------

@pytest.mark.parametrize("dtype,zp", [(np.uint8, 131), (np.int8, -7), (np.uint16, 40000),
                                      (np.int16, -1234), (np.int32, -70000)])
def test_dequantize_per_tensor_matches_onnxruntime(dtype, zp):
    x = _ints(dtype, (6, 7), *((-2**20, 2**20) if dtype == np.int32 else ()))
    model, feeds = make_model("DequantizeLinear",
                              [x, Const(np.array(0.0731, np.float32)),
                               Const(np.array(zp, dtype))], opset=21, out_dtype=np.float32)
    check_levels(model, feeds)


def test_dequantize_per_axis_and_float16_scale_match_onnxruntime():
    x = _ints(np.int8, (2, 5, 3))
    scale = RNG.uniform(0.01, 2, 5).astype(np.float16)
    zp = _ints(np.int8, 5)
    model, feeds = make_model("DequantizeLinear", [x, Const(scale), Const(zp)], {"axis": 1},
                              opset=19, out_dtype=np.float16)
    check_levels(model, feeds, rtol=1e-3, atol=0)


def test_dequantize_blocked_and_output_dtype_match_onnxruntime():
    x = _ints(np.uint8, (5, 9))
    scale = RNG.uniform(0.01, 2, (5, 3)).astype(np.float32)
    zp = _ints(np.uint8, (5, 3))
    model, feeds = make_model("DequantizeLinear", [x, Const(scale), Const(zp)],
                              {"axis": -1, "block_size": 4, "output_dtype": 10}, opset=23,
                              out_dtype=np.float16)
    check_levels(model, feeds, rtol=1e-3, atol=0)


# ---- MatMulInteger and QLinearMatMul ---------------------------------------------------

def test_matmul_integer_per_tensor_and_per_column_match_onnxruntime():
    a, b = _ints(np.uint8, (5, 37)), _ints(np.int8, (37, 11))
    model, feeds = make_model("MatMulInteger", [a, b, Const(np.array(131, np.uint8)),
                                                Const(_ints(np.int8, 11))],
                              opset=10, out_dtype=np.int32)
    check_levels(model, feeds)


def test_batched_matmul_integer_matches_onnxruntime():
    a, b = _ints(np.int8, (2, 3, 17)), _ints(np.uint8, (2, 17, 4))
    model, feeds = make_model("MatMulInteger", [a, b, Const(np.array([-9], np.int8)),
                                                Const(_ints(np.uint8, (2, 1, 4)))],
                              opset=10, out_dtype=np.int32)
    check_levels(model, feeds)


def test_matmul_integer_per_row_zero_point_is_exact():
    # the spec's per-row a_zero_point (M values): onnxruntime refuses it and ONNX's
    # reference broadcasts it along K, so the check is against numpy
    a, b = _ints(np.uint8, (4, 6)), _ints(np.uint8, (6, 3))
    a_zp, b_zp = _ints(np.uint8, 4), np.array(200, np.uint8)
    model, feeds = make_model("MatMulInteger", [a, b, Const(a_zp), Const(b_zp)], opset=10,
                              out_dtype=np.int32)
    want = (a.astype(np.int32) - a_zp[:, None]) @ (b.astype(np.int32) - 200)
    (got,) = graph.compile(graph.from_onnx(model), level="O1").run(feeds)
    assert got.dtype == np.int32 and (got == want).all()


def _qlinear_inputs(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    return [a, Const(a_scale), Const(a_zp), b, Const(b_scale), Const(b_zp), Const(y_scale),
            Const(y_zp)]


@pytest.mark.parametrize("dtype,scale_type,opset", [
    (np.uint8, np.float32, 10), (np.int8, np.float32, 10), (np.uint8, np.float16, 21)])
def test_qlinear_matmul_matches_onnxruntime(dtype, scale_type, opset):
    # per-column b_scale and b_zero_point; a y_scale small enough that some outputs saturate
    a, b = _ints(dtype, (7, 33)), _ints(dtype, (33, 5))
    ins = _qlinear_inputs(a, np.array(0.0066, scale_type), np.array(-3 if dtype == np.int8
                                                                     else 113, dtype),
                          b, RNG.uniform(0.001, 0.01, 5).astype(scale_type), _ints(dtype, 5),
                          np.array(0.0307, scale_type), np.array(5, dtype))
    model, feeds = make_model("QLinearMatMul", ins, opset=opset, out_dtype=dtype)
    check_levels(model, feeds)


def test_qlinear_matmul_requantizes_in_float32_as_onnxruntime_does():
    # multiplier float32(1 / 6): 3 * it is 0.50000001 exactly (ONNX's reference rounds to
    # 1) but 0.5 in float32 (onnxruntime: 0, a tie to even), and so on
    a = np.array([[3], [9], [15], [21], [27], [33], [5]], np.uint8)
    one, zero = np.array(1, np.float32), np.array(0, np.uint8)
    ins = _qlinear_inputs(a, one, zero, np.array([[1]], np.uint8), one, zero,
                          np.array(6, np.float32), zero)
    model, feeds = make_model("QLinearMatMul", ins, opset=10, out_dtype=np.uint8)
    check_levels(model, feeds, levels=("O0", "O1", "O2"))
    (got,) = graph.compile(graph.from_onnx(model)).run(feeds)
    np.testing.assert_array_equal(got.ravel(), [0, 2, 2, 4, 4, 6, 1])


def test_batched_qlinear_matmul_per_row_a_matches_onnx_reference():
    # per-row a parameters of shape [.., M, 1]: onnxruntime takes only per-tensor a
    a, b = _ints(np.int8, (2, 3, 9)), _ints(np.int8, (9, 4))
    ins = _qlinear_inputs(a, RNG.uniform(0.01, 0.05, (2, 3, 1)).astype(np.float32),
                          _ints(np.int8, (2, 3, 1), -10, 10), b, np.array(0.02, np.float32),
                          np.array(1, np.int8), np.array(0.05, np.float32),
                          np.array(-2, np.int8))
    model, feeds = make_model("QLinearMatMul", ins, opset=21, out_dtype=np.int8)
    check_levels(model, feeds, onnx_reference=True)


# ---- ConvInteger, QLinearConv, DynamicQuantizeLinear ---------------------------------------

def test_conv_integer_pads_with_the_zero_point_and_per_channel_weights():
    # (onnxruntime takes only a per-tensor w_zero_point: against ONNX's reference)
    x, w = _ints(np.uint8, (1, 3, 7, 9)), _ints(np.uint8, (4, 3, 3, 2))
    model, feeds = make_model("ConvInteger", [x, Const(w), Const(np.array(101, np.uint8)),
                                              Const(_ints(np.uint8, 4))],
                              {"pads": [1, 0, 2, 1], "strides": [2, 1]}, opset=10,
                              out_dtype=np.int32)
    check_levels(model, feeds, onnx_reference=True)


def test_qlinear_conv_with_bias_and_per_channel_scale_matches_onnxruntime():
    x, w = _ints(np.int8, (2, 4, 6, 5)), _ints(np.int8, (6, 2, 3, 3), -100, 100)
    ins = [x, Const(np.array(0.02, np.float32)), Const(np.array(-4, np.int8)), Const(w),
           Const(RNG.uniform(0.005, 0.02, 6).astype(np.float32)),
           Const(np.zeros(6, np.int8)), Const(np.array(0.09, np.float32)),
           Const(np.array(3, np.int8)), Const(_ints(np.int32, 6, -2000, 2000))]
    model, feeds = make_model("QLinearConv", ins, {"group": 2, "auto_pad": "SAME_UPPER"},
                              opset=10, out_dtype=np.int8)
    check_levels(model, feeds)


def test_conv1d_integer_matches_onnxruntime():
    x, w = _ints(np.uint8, (1, 2, 11)), _ints(np.int8, (3, 2, 4))
    model, feeds = make_model("ConvInteger", [x, Const(w), Const(np.array(7, np.uint8))],
                              {"dilations": [2]}, opset=10, out_dtype=np.int32)
    check_levels(model, feeds)


def test_dynamic_quantize_linear_imports_through_its_body():
    x = (RNG.standard_normal((3, 17)) * 3 + 1).astype(np.float32)
    model, feeds = make_model("DynamicQuantizeLinear", [x], opset=11, n_out=3,
                              out_dtype=[np.uint8, np.float32, np.uint8])
    check_levels(model, feeds)


# ---- refusals --------------------------------------------------------------------------

X = np.ones((2, 3, 4), np.float32)


@pytest.mark.parametrize("op,ins,attrs,opset,message", [
    ("QuantizeLinear", [X, Const(np.ones(4, np.float32))], {}, 13,
     r"input 'y_scale' must hold one value \(per tensor\) or be 1-D "
     r"with x's axis-1 size 3 \(per axis; or give block_size\), got shape \[4\]"),
    ("QuantizeLinear", [X, Const(np.ones(3, np.float32))], {"axis": 3}, 13,
     r"axis 3 is out of range for the rank-3 input 'x'"),
    ("QuantizeLinear", [X, Const(np.ones((2, 3, 3), np.float32))],
     {"axis": 2, "block_size": 2}, 21,
     r"input 'y_scale' must have shape \[2, 3, 2\] for blocks of 2 along axis 2 of x "
     r"\[2, 3, 4\], got \[2, 3, 3\]"),
    ("QuantizeLinear", [X, Const(np.ones(3, np.float32)), Const(np.ones(2, np.uint8))], {},
     13, r"input 'y_zero_point' must have the shape of 'y_scale' \[3\], got \[2\]"),
    ("QuantizeLinear", [X, Const(np.float32(1)), Const(np.uint8(0))], {"output_dtype": 3},
     21, r"attribute 'output_dtype'.*output_dtype int8 must be y_zero_point's type uint8"),
    ("QuantizeLinear", [X, Const(np.float32(1))], {"output_dtype": 6}, 21,
     r"output_dtype must be one of uint8, int8, uint16, int16, got element type 6"),
    ("QuantizeLinear", [X, Const(np.float32(1))], {"precision": 6}, 23,
     r"attribute 'precision'.*must be a float type \(float16, float32 or float64\), got "
     r"element type 6"),
    ("QuantizeLinear", [X, Const(np.int32(2))], {}, 23,
     r"input 'y_scale' of type int32 would divide in int32; give a float precision"),
    ("DequantizeLinear", [np.ones((2, 3), np.uint8), Const(np.float32(1)),
                          Const(np.int8(0))], {}, 13,
     r"input 'x_zero_point' must have x's type uint8, got int8"),
    ("MatMulInteger", [np.ones((4, 6), np.uint8), np.ones((6, 3), np.uint8),
                       Const(np.ones(6, np.uint8))], {}, 10,
     r"input 'a_zero_point' must hold one value \(per tensor\) or one per row of a \[4, 6\] "
     r"\(shape \[4\] or \[4, 1\]\), got \[6\]"),
    ("MatMulInteger", [np.ones((4, 6), np.uint8), np.ones((6, 3), np.uint8), None,
                       Const(np.ones(6, np.uint8))], {}, 10,
     r"input 'b_zero_point' must hold one value \(per tensor\) or one per column of b "
     r"\[6, 3\], got \[6\]"),
])
def test_unsupported_quantization_is_refused_at_import(op, ins, attrs, opset, message):
    model, _ = make_model(op, ins, attrs, opset)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


def test_per_axis_output_scale_of_qlinear_matmul_is_refused():
    a, b = np.ones((2, 3), np.uint8), np.ones((3, 4), np.uint8)
    one, zero = np.float32(1), np.uint8(0)
    ins = _qlinear_inputs(a, one, zero, b, one, zero, np.ones(4, np.float32),
                          np.zeros(4, np.uint8))
    model, _ = make_model("QLinearMatMul", ins, opset=10)
    with pytest.raises(graph.UnsupportedError,
                       match=r"input 'y_scale' must hold one value \(per tensor\), got "
                             r"shape \[4\]"):
        graph.from_onnx(model)


def test_per_row_scale_with_a_1d_other_operand_is_refused():
    """The product of a (3, 5) a and a 1-d b has no column axis for a per-row a_scale to
    keep (it broadcast to (3, 3) before)."""
    a, b = np.ones((3, 5), np.uint8), np.ones(5, np.uint8)
    one, zero = np.float32(1), np.uint8(0)
    ins = _qlinear_inputs(a, np.ones(3, np.float32), np.zeros(3, np.uint8), b, one, zero,
                          one, zero)
    model, _ = make_model("QLinearMatMul", ins, opset=10)
    with pytest.raises(graph.UnsupportedError,
                       match=r"input 'a_scale' must hold one value \(per tensor\) when the "
                             r"other operand is 1-d, got shape \[3\]"):
        graph.from_onnx(model)
