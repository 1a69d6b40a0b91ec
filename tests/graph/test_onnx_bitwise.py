"""BitwiseAnd, BitwiseOr, BitwiseXor (numpy broadcasting) and BitwiseNot (opset 18) against
onnxruntime at O0 and O1, on int32, int64 and uint8 over each dtype's whole range; float
inputs are refused at import."""
import numpy as np
import pytest

import graph
from onnx_cases import check_levels, make_model

RNG = np.random.default_rng(18)
DTYPES = [np.int32, np.int64, np.uint8]
# (shape of A, shape of B): equal shapes, and broadcasting either way
SHAPES = [((3, 5, 7), (3, 5, 7)), ((2, 3, 1, 5), (4, 1)), ((7,), (3, 4, 7))]


def full_range(shape, dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    flat = x.reshape(-1)
    flat[:3] = np.array([info.min, info.max, 0], dtype)[:flat.size]
    return x


@pytest.mark.parametrize("shapes", SHAPES, ids=["same", "bcast", "bcast_lhs"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_binary_matches_onnxruntime(op, dtype, shapes):
    a, b = (full_range(s, dtype) for s in shapes)
    model, feeds = make_model(op, [a, b], opset=18)
    check_levels(model, feeds)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_not_matches_onnxruntime(dtype):
    model, feeds = make_model("BitwiseNot", [full_range((4, 9, 5), dtype)], opset=18)
    check_levels(model, feeds)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseNot"])
def test_float_inputs_are_refused(op):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    model, _ = make_model(op, [x] if op == "BitwiseNot" else [x, x], opset=18)
    with pytest.raises(graph.UnsupportedError, match=rf"{op} of dtype float32 is not "
                                                      rf"supported \(integer tensors only\)"):
        graph.from_onnx(model)
