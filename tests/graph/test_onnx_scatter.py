"""Scatter, ScatterElements, ScatterND and TensorScatter against onnxruntime (onnx's numpy
reference where onnxruntime lacks the op) at O0 and O1, one case at O2: seeded random data
(never zeros), odd sizes, negative and duplicate indices under every reduction, every axis,
indices shorter than data off the axis; out-of-range indices dropped; the refusals."""
import numpy as np
import pytest

import graph
from onnx_cases import RNG, Const, check_levels, make_model, rand

I64 = np.int64
REDUCTIONS = ["none", "add", "mul", "max", "min"]


def _indices(shape, extent, dtype=I64):
    """Random indices from -extent to extent - 1: negatives, and duplicates once the shape
    holds more values than the axis."""
    return RNG.integers(-extent, extent, shape).astype(dtype)


def _opset(reduction: str) -> int:
    """The first opset with the reduction: add and mul from 16, max and min from 18."""
    return 18 if reduction in ("max", "min") else 16


def _elements_case(dshape, ishape, axis, reduction, dtype=np.float32, index_dtype=I64):
    data = (rand(*dshape) * 3).astype(dtype)
    updates = (rand(*ishape) * 3).astype(dtype)
    attrs = {"axis": axis} if reduction == "none" else {"axis": axis, "reduction": reduction}
    return make_model("ScatterElements", [data, _indices(ishape, dshape[axis], index_dtype),
                                          updates], attrs, _opset(reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_matches_onnxruntime(axis, reduction):
    """Indices 6 long on the axis (of 3 to 5 positions: duplicates) and shorter than data
    on another axis, so that some output elements receive nothing."""
    dshape = (4, 5, 3)
    ishape = [3, 2, 3]
    ishape[axis] = 6
    check_levels(*_elements_case(dshape, tuple(ishape), axis, reduction))


@pytest.mark.parametrize("dtype,reduction", [(np.int32, "add"), (np.int64, "mul"),
                                             (np.float16, "max"), (np.float64, "min")])
def test_scatter_elements_dtypes(dtype, reduction):
    check_levels(*_elements_case((5, 7), (3, 9), 1, reduction, dtype, np.int32))


def test_scatter_elements_of_bool_data():
    data = RNG.integers(0, 2, (3, 6)).astype(bool)
    updates = RNG.integers(0, 2, (3, 4)).astype(bool)
    model, feeds = make_model("ScatterElements", [data, _indices((3, 4), 6), updates],
                              {"axis": 1}, 13)
    check_levels(model, feeds)


@pytest.mark.parametrize("opset,attrs", [(9, {}), (10, {"axis": 1})])
def test_deprecated_scatter(opset, attrs):
    axis = attrs.get("axis", 0)
    data = rand(5, 4)
    ishape = (3, 4) if axis == 0 else (5, 3)
    model, feeds = make_model("Scatter", [data, _indices(ishape, data.shape[axis]),
                                          rand(*ishape)], attrs, opset)
    check_levels(model, feeds)


ND_CASES = [
    # data shape, indices shape: q = the last dim; rows before it (none: a single row)
    ((5, 4, 3), (7, 1)),
    ((5, 4, 3), (2, 3, 2)),
    ((5, 4, 3), (9, 3)),
    ((6, 5), (2,)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dshape,ishape", ND_CASES, ids=[str(c[1]) for c in ND_CASES])
def test_scatter_nd_matches_onnxruntime(dshape, ishape, reduction):
    """Random rows with negative coordinates; duplicate rows where there are more rows than
    indexed positions."""
    q = ishape[-1]
    indices = np.stack([_indices(ishape[:-1], dshape[c]) for c in range(q)], -1)
    updates = np.asarray(rand(*ishape[:-1], *dshape[q:]) * 3)   # 0-d for one element
    attrs = {} if reduction == "none" else {"reduction": reduction}
    model, feeds = make_model("ScatterND", [rand(*dshape) * 3, indices, updates], attrs,
                              _opset(reduction))
    check_levels(model, feeds)


def test_scatter_nd_with_constant_indices_at_o2():
    indices = Const(np.array([[1, -1], [0, 2], [1, 3]], I64))
    model, feeds = make_model("ScatterND", [rand(3, 4, 5), indices, rand(3, 5)],
                              {"reduction": "add"}, 16)
    check_levels(model, feeds, levels=("O0", "O1", "O2"))


@pytest.mark.parametrize("mode,axis,writes", [("linear", -2, [0, 3, 2]),
                                              ("circular", -2, [5, 6, 1]),
                                              ("linear", 1, None)])
def test_tensor_scatter(mode, axis, writes):
    past = rand(3, 7, 6, 5)
    shape = list(past.shape)
    shape[axis] = 3
    inputs = [past, rand(*shape)] + ([] if writes is None else [np.array(writes, I64)])
    model, feeds = make_model("TensorScatter", inputs, {"mode": mode, "axis": axis}, 24)
    check_levels(model, feeds)


def _scatter_in_order(data, targets, updates):
    """numpy's sequential scatter of the rows of updates at the (already in-range) targets."""
    out = data.copy()
    for t, u in zip(targets, updates):
        out[tuple(t)] = u
    return out


def test_out_of_range_indices_are_dropped():
    """ONNX calls them an error (onnxruntime refuses the run): their updates write nothing,
    the others land as usual. 2**32 + 1 must not be truncated to 1."""
    data, updates = rand(4, 5), rand(4, 2)
    indices = np.array([[0, 2**32 + 1], [7, -1], [-6, 3], [1, 4]], I64)
    model, feeds = make_model("ScatterElements", [data, indices, updates], {"axis": 1}, 13)
    kept = [(0, 0), (1, 1), (2, 1), (3, 0), (3, 1)]
    want = _scatter_in_order(data, [(r, indices[r, c] % 5) for r, c in kept],
                             [updates[r, c] for r, c in kept])
    nd_indices = np.array([[0, 9], [-2, 1], [4, 0], [0, -6]], I64)
    nd_model, nd_feeds = make_model("ScatterND", [data, nd_indices, updates[:, 0]], {}, 13)
    nd_want = _scatter_in_order(data, [(2, 1)], [updates[1, 0]])
    for level in ("O0", "O1"):
        (got,) = graph.compile(graph.from_onnx(model), level=level).run(feeds)
        np.testing.assert_array_equal(got, want)
        (got,) = graph.compile(graph.from_onnx(nd_model), level=level).run(nd_feeds)
        np.testing.assert_array_equal(got, nd_want)


@pytest.mark.parametrize("op,inputs,attrs,opset,message", [
    ("ScatterElements", [rand(3, 4), np.zeros((3, 4), I64), rand(3, 4)],
     {"reduction": "mean"}, 18,
     r"ScatterElements, attribute 'reduction', node 'node0': value 'mean' not supported"),
    ("ScatterND", [rand(3, 4).astype(np.float16), np.zeros((2, 1), I64),
                   rand(2, 4).astype(np.float16)], {"reduction": "add"}, 16,
     r"reduction 'add' of float16 data is not supported"),
    ("ScatterElements", [np.ones((3, 4), bool), np.zeros((3, 4), I64), np.ones((3, 4), bool)],
     {"reduction": "max"}, 18, r"reduction 'max' needs numbers, got bool data"),
    ("ScatterElements", [rand(3, 4), np.zeros((3, 4), I64), rand(3, 4)], {"axis": 2}, 13,
     r"attribute 'axis', .*axis 2 is out of range for a rank-2 input"),
    ("ScatterElements", [rand(3, 4), np.zeros((3, 5), I64), rand(3, 5)], {"axis": 0}, 13,
     r"indices \[3, 5\] must be no larger than data \[3, 4\] off the axis 0"),
    ("ScatterND", [rand(3, 4), np.zeros((2, 3), I64), rand(2)], {}, 13,
     r"indices' last dim must be from 1 to data's rank 2, got indices \[2, 3\]"),
    ("ScatterND", [rand(3, 4), np.zeros((2, 1), I64), rand(2, 5)], {}, 13,
     r"updates must have shape \[2, 4\] \(indices' rows, then data's dims after the first "
     r"1\), got \[2, 5\]"),
    ("ScatterElements", [rand(4096, 4096), np.zeros((64, 4096), I64), rand(64, 4096)],
     {"reduction": "add"}, 16,
     r"ScatterElements would compare 16777216 output elements with 64 candidate updates "
     r"each \(1073741824 pairs, at most 268435456\)"),
    ("TensorScatter", [rand(3, 4, 5), rand(3, 4, 5)], {"axis": 0}, 24,
     r"axis 0 must name a non-batch axis of the rank-3 cache"),
    ("TensorScatter", [rand(3, 4, 5), rand(3, 6, 5)], {"axis": 1}, 24,
     r"update's sequence length 6 must be at most the cache's 4 \(axis 1\)"),
])
def test_unsupported_scatters_are_refused_at_import(op, inputs, attrs, opset, message):
    model, _ = make_model(op, inputs, attrs, opset)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)
