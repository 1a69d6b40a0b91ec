"""OneHot, GatherND, EyeLike, LpPool, MeanVarianceNormalization and GroupNormalization
against onnxruntime (onnx's numpy reference where onnxruntime lacks the type combination:
OneHot of int32 or float indices), at O0 and O1: one-node models on random data (never
zeros), odd sizes, negative and out-of-range indices, and the refusals' messages."""
import numpy as np
import pytest

import graph
from onnx_cases import RNG, Const, check_levels, make_model, rand

I64 = np.int64


ONE_HOT = [
    # indices, depth, axis: negative indices count from the end, out-of-range ones are all off
    (RNG.integers(-7, 7, (3, 5)).astype(I64), 7, -1),
    (RNG.integers(-9, 9, (4, 3)).astype(I64), 7, 0),     # some out of [-7, 7)
    (RNG.integers(0, 5, (2, 3, 4)).astype(np.int32), 5, 1),
    (RNG.integers(-5, 5, (6,)).astype(np.float32), 5, -2),
]


def test_one_hot_truncates_float_indices():
    """ONNX casts non-integer indices to int64 (toward zero); onnx's numpy reference
    compares them uncast, onnxruntime has no float-index kernel: numpy is the reference."""
    indices = np.array([[2.75, -1.5], [0.25, -3.9]], np.float32)
    model, feeds = make_model("OneHot", [indices, Const(np.array(4, I64)),
                                         Const(np.array([0.5, 3.0], np.float32))], {}, 11)
    wrapped = np.array([[2, 3], [0, 1]])
    want = np.where(np.arange(4) == wrapped[..., None], 3.0, 0.5).astype(np.float32)
    for level in ("O0", "O1"):
        (got,) = graph.compile(graph.from_onnx(model), level=level).run(feeds)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("indices,depth,axis", ONE_HOT)
def test_one_hot_matches_onnxruntime(indices, depth, axis):
    values = np.array([-0.75, 2.5], np.float32)
    # depth as a 1-element tensor where onnxruntime is the reference, else 0-d (numpy 2's
    # arange in onnx's reference takes no 1-element array)
    depth = np.array([depth] if indices.dtype == I64 else depth, I64)
    model, feeds = make_model("OneHot", [indices, Const(depth),
                                         Const(values)], {"axis": axis}, 11, out_dtype=np.float32)
    check_levels(model, feeds)


def test_one_hot_values_may_be_an_input():
    model, feeds = make_model("OneHot", [RNG.integers(-4, 4, (5, 3)).astype(I64),
                                         Const(np.array(4, I64)),
                                         np.array([0.5, -3.0], np.float32)], {}, 11,
                              out_dtype=np.float32)
    check_levels(model, feeds)


GATHER_ND = [
    # data shape, indices shape (the last dim indexes), batch_dims
    ((5, 7), (4, 2), 0),
    ((5, 7, 3), (2, 3, 1), 0),        # whole rows of the unindexed axes
    ((3, 5, 7), (3, 4, 2), 1),
    ((2, 3, 5, 7), (2, 3, 6, 1), 2),
    ((4, 5, 6), (2,), 0),             # one index tuple: one row out
    ((4, 5, 6), (3,), 0),             # one index tuple of every axis: a 0-d out
]


@pytest.mark.parametrize("dshape,ishape,batch", GATHER_ND)
def test_gather_nd_matches_onnxruntime(dshape, ishape, batch):
    data = rand(*dshape)
    m = ishape[-1]
    sizes = np.array(dshape[batch:batch + m])
    idx = RNG.integers(0, 1 << 20, ishape) % sizes
    idx = np.where(RNG.random(ishape) < 0.4, idx - sizes, idx).astype(I64)  # some negative
    model, feeds = make_model("GatherND", [data, idx], {"batch_dims": batch}, 13)
    check_levels(model, feeds)


@pytest.mark.parametrize("shape,k,dtype", [((4, 7), 0, None), ((6, 3), -2, 1),
                                           ((5, 5), 3, 7)])
def test_eye_like_matches_onnxruntime(shape, k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    out = {None: np.float32, 1: np.float32, 7: I64}[dtype]
    model, feeds = make_model("EyeLike", [rand(*shape)], attrs, 9, out_dtype=out)
    check_levels(model, feeds)


LP_POOL = [
    ((2, 3, 9, 11), {"kernel_shape": [3, 2], "p": 2}),
    ((1, 4, 10, 7), {"kernel_shape": [3, 3], "p": 1, "strides": [2, 2],
                     "pads": [1, 0, 1, 2]}),
    ((1, 2, 8, 9), {"kernel_shape": [2, 3], "p": 3, "auto_pad": "SAME_UPPER"}),
    ((2, 3, 13), {"kernel_shape": [4], "p": 2, "strides": [3]}),
]


@pytest.mark.parametrize("shape,attrs", LP_POOL)
def test_lp_pool_matches_onnxruntime(shape, attrs):
    model, feeds = make_model("LpPool", [rand(*shape)], attrs, 18)
    check_levels(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axes", [None, [0, 2], [1, 3]])
def test_mean_variance_normalization_matches_onnxruntime(axes):
    attrs = {} if axes is None else {"axes": axes}
    model, feeds = make_model("MeanVarianceNormalization", [rand(3, 4, 5, 6) * 3 + 1],
                              attrs, 13)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


def _group_norm_reference(x, groups, scale, bias, eps):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    if scale.shape[0] == groups:          # opset 18: per group
        return (y * scale[:, None] + bias[:, None]).reshape(x.shape)
    shape = (c,) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


@pytest.mark.parametrize("opset,shape,groups", [(21, (2, 6, 5, 3), 3), (21, (3, 4, 7), 2),
                                                (18, (2, 6, 5, 3), 3)])
def test_group_normalization_matches_numpy(opset, shape, groups):
    x = rand(*shape) * 2 + 0.5
    per = shape[1] if opset >= 21 else groups
    scale, bias = rand(per), rand(per)
    model, feeds = make_model("GroupNormalization", [x, Const(scale), Const(bias)],
                              {"num_groups": groups, "epsilon": 1e-4}, opset)
    want = _group_norm_reference(x.astype(np.float64), groups, scale, bias, 1e-4)
    g = graph.from_onnx(model)
    for level in ("O0", "O1"):
        (got,) = graph.compile(g, level=level).run(feeds)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


REFUSED = [
    ("LpPool", [rand(1, 2, 7, 7)], {"kernel_shape": [2, 2], "p": 0}, 18,
     r"LpPool, attribute 'p', node 'node0': p must be positive, got 0.0"),
    ("GroupNormalization", [rand(2, 6, 3), Const(rand(6)), Const(rand(6))],
     {"num_groups": 4}, 21, r"num_groups 4 must divide the channels of an \(N, C, \.\.\.\) "
                            r"input, got shape \[2, 6, 3\]"),
    ("OneHot", [np.array([1, 2], I64), Const(np.array(3, I64)),
                Const(np.array([0.0, 1.0, 2.0], np.float32))], {}, 11,
     r"values must be \[off_value, on_value\] \(shape \[2\]\), got \[3\]"),
    ("GatherND", [rand(3, 4), np.array([[0], [1]], I64)], {"batch_dims": 1}, 13,
     r"the first 1 dims of data \[3, 4\] and indices \[2, 1\] differ"),
]


@pytest.mark.parametrize("op,inputs,attrs,opset,message", REFUSED,
                         ids=[r[0] for r in REFUSED])
def test_unsupported_forms_are_refused_at_import(op, inputs, attrs, opset, message):
    model, _ = make_model(op, inputs, attrs, opset)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


def test_out_of_range_indices_are_clipped_not_read_past_the_data():
    """ONNX calls them an error (onnxruntime refuses the run); te's take clips each index
    to the nearest end, as TVM's take mode 'clip', where reading past the tensor took the
    process down."""
    data = rand(3, 4, 5)
    model, feeds = make_model("GatherND", [data, np.array([[0, 500000], [2, -9], [0, 5]], I64)],
                              {}, 13)
    for level in ("O0", "O1"):
        (got,) = graph.compile(graph.from_onnx(model), level=level).run(feeds)
        np.testing.assert_array_equal(got, data[[0, 2, 0], [3, 0, 3]])
    model, feeds = make_model("Gather", [data, np.array([500000, -1, -7], I64)], {"axis": 1}, 13)
    for level in ("O0", "O1"):
        (got,) = graph.compile(graph.from_onnx(model), level=level).run(feeds)
        np.testing.assert_array_equal(got, data[:, [3, 3, 0]])


@pytest.mark.parametrize("op,inputs,attrs,opset", [
    ("GroupNormalization", [rand(2, 6, 3).astype(np.float16), Const(rand(6).astype(np.float16)),
                            Const(rand(6).astype(np.float16))], {"num_groups": 3}, 21),
    ("MeanVarianceNormalization", [rand(2, 3, 4, 5).astype(np.float16)], {}, 13),
    ("LpPool", [rand(1, 2, 5, 5).astype(np.float16)], {"kernel_shape": [2, 2]}, 18),
])
def test_float16_sums_of_the_new_normalizations_and_lp_pool_are_refused(op, inputs, attrs,
                                                                        opset):
    model, _ = make_model(op, inputs, attrs, opset)
    with pytest.raises(graph.UnsupportedError, match=op):
        graph.from_onnx(model)


def test_mean_variance_normalization_axes_out_of_range_are_refused():
    model, _ = make_model("MeanVarianceNormalization", [rand(2, 3, 4)], {"axes": [0, 5]}, 13)
    with pytest.raises(graph.UnsupportedError,
                       match=r"axes \[0, 5\] must be distinct axes of the rank-3 input"):
        graph.from_onnx(model)
