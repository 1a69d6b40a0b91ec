"""TopK against onnxruntime at O0, O1 and O2: random data with ties, every axis, largest
and smallest, float and integer dtypes, k from 1 to the axis' length; NaN above every
number; the refusals."""
import numpy as np
import pytest

import graph
from onnx_cases import RNG, Const, check_levels, make_model, rand

I64 = np.int64


def _model(x, k, attrs, opset=11):
    return make_model("TopK", [x, Const(np.array([k], I64))], attrs, opset, n_out=2,
                      out_dtype=[x.dtype, I64])


CASES = [
    # shape, k, attributes
    ((3, 17), 5, {}),
    ((4, 9, 7), 9, {"axis": 1}),
    ((2, 6, 5), 1, {"axis": 0, "largest": 0}),
    ((5, 11), 4, {"axis": -1, "largest": 0}),
    ((1, 1000), 5, {}),
]


@pytest.mark.parametrize("shape,k,attrs", CASES, ids=[str(c[0]) for c in CASES])
def test_topk_matches_onnxruntime(shape, k, attrs):
    x = np.round(rand(*shape) * 4) / 4      # quarter steps: many ties
    model, feeds = _model(x, k, attrs)
    check_levels(model, feeds, levels=("O0", "O1", "O2"))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_topk_matches_onnxruntime(dtype):
    x = RNG.integers(-5, 5, (4, 13)).astype(dtype)
    model, feeds = _model(x, 6, {"largest": 1})
    check_levels(model, feeds)


def test_topk_before_opset_10_takes_k_as_an_attribute():
    x = rand(3, 8)
    model, feeds = make_model("TopK", [x], {"k": 3}, 9, n_out=2, out_dtype=[x.dtype, I64])
    check_levels(model, feeds)


@pytest.mark.parametrize("largest", [1, 0])
def test_nan_orders_above_every_number(largest):
    x = np.array([[1.0, np.nan, -2.0, 3.0, np.nan, 0.5]], np.float32)
    model, feeds = _model(x, 6, {"largest": largest})
    order = [1, 4, 3, 0, 5, 2] if largest else [2, 5, 0, 3, 1, 4]
    for level in ("O0", "O1"):
        values, indices = graph.compile(graph.from_onnx(model), level=level).run(feeds)
        np.testing.assert_array_equal(indices[0], order)
        np.testing.assert_array_equal(values[0], x[0, order])


@pytest.mark.parametrize("shape,k,message", [
    ((3, 5), 6, r"K must be from 1 to the axis' length 5, got 6"),
    ((2, 9000), 3, r"an axis of 9000 elements is longer than TopK's ranking supports "
                   r"\(8192\)"),
])
def test_unsupported_topk_is_refused_at_import(shape, k, message):
    model, _ = _model(rand(*shape), k, {})
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)
