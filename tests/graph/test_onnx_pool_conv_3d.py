"""3-d MaxPool, AveragePool (count_include_pad 0 and 1) and LpPool, 3-d Conv and
ConvTranspose, MaxPool's Indices output (1-d, 2-d and 3-d, storage_order 0 and 1) and
MaxUnpool, imported from one-node ONNX models and run at graph.compile levels O0 and O1
(O2 once) against onnxruntime: odd sizes, strides, asymmetric pads, dilations, ceil_mode
(windows running into its extra end padding), auto_pad SAME_*, groups and bias; indices
with ties (the first maximum in window order wins) and negative data next to padding
(padding never wins); te's pool_nd schedule against the unscheduled compute; what stays
refused."""
import numpy as np
import pytest

import graph
import te
from te.compute import ops as topi
from onnx_cases import Const, check_levels, make_model, rand

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 19   # AveragePool takes dilations from opset 19
RNG = np.random.default_rng(3)

# (id, input shape, window attributes)
POOLS = [
    ("pads-strides", (1, 2, 7, 9, 8),
     {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]}),
    # dilated, the last windows running past the given end padding
    ("dilated-ceil", (1, 2, 9, 8, 11),
     {"kernel_shape": [2, 3, 2], "dilations": [2, 1, 3], "strides": [2, 2, 3],
      "pads": [1, 1, 0, 1, 0, 1], "ceil_mode": 1}),
    ("same-upper", (2, 1, 6, 7, 5),
     {"kernel_shape": [3, 3, 2], "strides": [2, 1, 2], "auto_pad": "SAME_UPPER"}),
]
KINDS = [("MaxPool", {}), ("AveragePool", {"count_include_pad": 0}),
         ("AveragePool", {"count_include_pad": 1}), ("LpPool", {"p": 2})]
KIND_IDS = ["max", "avg", "avg_include_pad", "lp2"]


@pytest.mark.parametrize("kind,extra", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("shape,attrs", [p[1:] for p in POOLS], ids=[p[0] for p in POOLS])
def test_3d_pools_match_onnxruntime(shape, attrs, kind, extra):
    model, feeds = make_model(kind, [rand(*shape)], {**attrs, **extra}, OPSET)
    check_levels(model, feeds)


def test_3d_lp_pool_with_p3():
    x = rand(1, 3, 5, 6, 7)
    model, feeds = make_model("LpPool", [x], {"kernel_shape": [2, 2, 3], "p": 3,
                                              "strides": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 1]},
                              OPSET)
    check_levels(model, feeds)


def _ties(*shape, low=-2, high=2, dtype=np.float32):
    """Small integers: every window holds ties; all negative where high <= 0."""
    return RNG.integers(low, high, shape).astype(dtype)


# (id, input, window attributes): Y and Indices, each storage_order
INDICES = [
    ("1d", _ties(2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("2d-ties", _ties(2, 3, 7, 8),
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # every value negative: a padding of zeros would win, the lowest value never does
    ("2d-negative-padded", _ties(1, 2, 6, 7, low=-3, high=0),
     {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 2, 1, 1], "dilations": [2, 1]}),
    ("3d-dilated-ceil", _ties(1, 2, 5, 6, 7),
     {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 1, 0, 0, 1, 1],
      "dilations": [2, 1, 1], "ceil_mode": 1}),
    ("3d-ties", _ties(2, 1, 4, 5, 6), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
]


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("x,attrs", [c[1:] for c in INDICES], ids=[c[0] for c in INDICES])
def test_max_pool_indices_match_onnxruntime(x, attrs, order):
    model, feeds = make_model("MaxPool", [x], {**attrs, "storage_order": order}, OPSET,
                              n_out=2, out_dtype=[None, np.int64])
    check_levels(model, feeds)


def test_uint8_indices_prefer_a_real_zero_over_the_padding():
    """uint8's lowest value is 0, the padding's too: the real zero is taken."""
    x = _ties(1, 2, 5, 6, low=0, high=3, dtype=np.uint8)
    model, feeds = make_model("MaxPool", [x], {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]},
                              12, n_out=2, out_dtype=[None, np.int64])
    check_levels(model, feeds)


def test_indices_alone_and_the_values_of_storage_order_1():
    """Y left out ('' output: onnxruntime refuses the model) and the column-major numbering
    checked against numpy."""
    x = rand(1, 2, 3, 4)
    node = helper.make_node("MaxPool", ["x"], ["", "i"], kernel_shape=[2, 2],
                            storage_order=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    (got,) = graph.compile(graph.from_onnx(model), level="O1").run({"x": x})
    for c in range(2):
        for y in range(2):
            for w in range(3):
                win = x[0, c, y:y + 2, w:w + 2]
                h, v = np.unravel_index(np.argmax(win), win.shape)
                assert got[0, c, y, w] == c * 12 + (y + h) + (w + v) * 3


# (id, x shape, w shape, attributes, bias)
CONVS = [
    ("groups-dilated-strided", (2, 4, 7, 8, 9), (6, 2, 3, 2, 3),
     {"group": 2, "dilations": [1, 2, 1], "strides": [2, 1, 2], "pads": [1, 0, 2, 1, 1, 0]},
     True),
    ("same-lower", (1, 3, 6, 5, 7), (4, 3, 2, 3, 2),
     {"auto_pad": "SAME_LOWER", "strides": [2, 1, 2]}, False),
    ("depthwise", (1, 4, 5, 6, 5), (8, 1, 3, 3, 3), {"group": 4, "pads": [1] * 6}, True),
]


def _weights(w_shape, bias_size):
    w = Const(RNG.standard_normal(w_shape).astype(np.float32))
    return [w] + ([Const(RNG.standard_normal(bias_size).astype(np.float32))]
                  if bias_size else [])


@pytest.mark.parametrize("x_shape,w_shape,attrs,bias", [c[1:] for c in CONVS],
                         ids=[c[0] for c in CONVS])
def test_3d_conv_matches_onnxruntime(x_shape, w_shape, attrs, bias):
    model, feeds = make_model("Conv", [rand(*x_shape)] + _weights(
        w_shape, w_shape[0] if bias else 0), attrs, OPSET)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


CONV_TRANSPOSES = [
    ("groups-strided-dilated", (1, 4, 3, 4, 5), (4, 3, 3, 2, 3),
     {"group": 2, "strides": [2, 1, 3], "pads": [1, 0, 1, 0, 1, 2],
      "output_padding": [1, 0, 2], "dilations": [1, 2, 1]}, True),
    # pads past the kernel's extent: the full output cropped by more than the kernel adds
    ("pads-past-the-kernel", (1, 2, 5, 4, 6), (2, 3, 2, 2, 2),
     {"strides": [3, 3, 3], "pads": [2, 2, 2, 2, 2, 2]}, False),
    ("output-shape", (1, 2, 3, 4, 3), (2, 2, 3, 3, 3),
     {"strides": [2, 2, 2], "output_shape": [7, 10, 8]}, True),
    ("same-upper", (1, 3, 3, 2, 4), (3, 2, 3, 2, 3),
     {"strides": [2, 2, 1], "auto_pad": "SAME_UPPER"}, False),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs,bias", [c[1:] for c in CONV_TRANSPOSES],
                         ids=[c[0] for c in CONV_TRANSPOSES])
def test_3d_conv_transpose_matches_onnxruntime(x_shape, w_shape, attrs, bias):
    out_channels = w_shape[1] * attrs.get("group", 1)
    model, feeds = make_model("ConvTranspose", [rand(*x_shape)] + _weights(
        w_shape, out_channels if bias else 0), attrs, OPSET)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


def _pool_unpool(x, attrs, opset=12):
    """MaxPool's Y and Indices into MaxUnpool (Y is an output too)."""
    pool = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    unpool_attrs = {k: v for k, v in attrs.items() if k in ("kernel_shape", "strides", "pads")}
    unpool = helper.make_node("MaxUnpool", ["y", "i"], ["z"], **unpool_attrs)
    g = helper.make_graph([pool, unpool], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_tensor_value_info(n, 1, None) for n in ("y", "z")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), {"x": x}


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 6, 9), {"kernel_shape": [2, 3], "strides": [2, 3]}),
    ((1, 1, 4, 5, 6), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 2]}),
], ids=["2d", "3d"])
def test_max_unpool_of_a_max_pools_indices(shape, attrs):
    model, feeds = _pool_unpool(rand(*shape), attrs)
    check_levels(model, feeds)


def test_conv3d_relu_max_pool3d_with_indices_at_O2():
    x = rand(1, 3, 6, 7, 8)
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 6),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y", "i"], kernel_shape=[2, 2, 2],
                              strides=[2, 2, 2], ceil_mode=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_tensor_value_info("y", 1, None),
                           helper.make_tensor_value_info("i", TensorProto.INT64, None)], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    check_levels(model, {"x": x}, rtol=1e-4, atol=1e-4, levels=("O2",))


@pytest.mark.parametrize("make", ["max", "avg", "indices"])
def test_the_pool_nd_schedule_computes_what_the_plain_compute_does(make):
    """te.autotune.schedule_pool_nd, with an elementwise stage after the pool, against the
    unscheduled compute built with bound checkers (odd sizes: vector tails)."""
    x = te.placeholder((2, 3, 5, 7, 13), name="x")
    window = dict(kernel=(2, 3, 2), stride=(1, 2, 3), padding=(1, 0, 1, 0, 2, 1),
                  dilation=(2, 1, 1))
    pool = {"max": lambda: topi.max_pool_nd(x, **window),
            "avg": lambda: topi.avg_pool_nd(x, count_include_pad=False, **window),
            "indices": lambda: topi.max_pool_indices(x, storage_order=1,
                                                               **window)}[make]()
    out = te.compute(pool.shape, lambda *i: pool(*i) * 3, name="epilogue")
    data = _ties(2, 3, 5, 7, 13)
    results = []
    for s, checked in ((te.create_schedule(out.op), True),
                       (te.autotune.schedule_pool_nd(out), False)):
        got = np.empty(tuple(int(d.value) for d in out.shape), out.dtype)
        te.build(s, [x, out], instrument_bound_checkers=checked)(data, got)
        results.append(got)
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("pads,output_padding,strides", [
    ((2, 2, 2, 2, 2, 2), (0, 0, 0), 3),          # the spread input cropped on both sides
    ((0, 1, 0, 0, 2, 1), (2, 1, 0), 3),          # output_padding: zeros past the input
    ((1, 0, 1, 0, 1, 2), (1, 0, 2), (2, 1, 3)),
], ids=["cropped", "output-padding", "mixed"])
def test_conv_transpose_nd_reads_inside_its_inputs(pads, output_padding, strides):
    """The unscheduled compute built with bound checkers (an access outside a buffer
    raises) against the automatic space's schedule."""
    x = te.placeholder((1, 2, 5, 4, 6), name="x")
    w = te.placeholder((2, 3, 2, 2, 3), name="w")
    out = topi.conv_transpose_nd(x, w, strides, pads, (1, 2, 1), output_padding)
    data = [RNG.standard_normal((1, 2, 5, 4, 6)).astype(np.float32),
            RNG.standard_normal((2, 3, 2, 2, 3)).astype(np.float32)]
    results = []
    for s, checked in ((te.create_schedule(out.op), True),
                       (te.autotune.auto_schedule([out], args=[x, w, out])[0], False)):
        got = np.empty(tuple(int(d.value) for d in out.shape), np.float32)
        te.build(s, [x, w, out], instrument_bound_checkers=checked)(*data, got)
        results.append(got)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-5)


def test_builder_3d_ops_and_their_checks():
    x = graph.input("x", (1, 4, 5, 6, 7))
    w = graph.constant(rand(6, 2, 3, 3, 3))
    y = graph.nn.conv3d(x, w, None, 2, (1, 0, 1, 1, 1, 0), groups=2, name="y")
    assert y.shape == (1, 6, 3, 3, 3) and y.node.attr["padding"] == (1, 0, 1, 1, 1, 0)
    assert graph.nn.max_pool3d(x, 3, 2, 1).shape == (1, 4, 3, 3, 4)
    assert graph.nn.avg_pool3d(x, (1, 2, 3), padding=(0, 1, 1)).shape == (1, 4, 5, 7, 7)
    assert graph.nn.conv3d_transpose(x, graph.constant(rand(4, 2, 2, 2, 2)), None, 2
                                     ).shape == (1, 2, 10, 12, 14)
    indices = graph.nn.max_pool_indices(x, (2, 2, 2), 2, storage_order=1)
    assert (indices.dtype, indices.shape) == ("int64", (1, 4, 2, 3, 3))
    with pytest.raises(graph.GraphError, match=r"graph.nn.conv3d: padding \(an int, 3 ints "
                                               r"or 6 ints\) must be an int or 3 ints >= 0, "
                                               r"got \(1, 2\)"):
        graph.nn.conv3d(x, w, padding=(1, 2))
    with pytest.raises(graph.GraphError, match=r"graph.nn.max_pool_indices: storage_order "
                                               r"must be 0 or 1, got 2"):
        graph.nn.max_pool_indices(x, 2, storage_order=2)
    with pytest.raises(graph.GraphError, match=r"max_pool3d '.*': max_pool_nd: padding must "
                                               r"be smaller than the kernel on each side"):
        graph.nn.max_pool3d(x, 2, padding=2)


REFUSED = [
    ("MaxPool", [rand(1, 1, 3, 4, 3, 4)], {"kernel_shape": [2, 2, 2, 2]},
     r"MaxPool, attribute 'kernel_shape', node 'node0': only 1-d, 2-d and 3-d MaxPool \(3-d "
     r"to 5-d input\) are supported, got a 6-d input and kernel_shape \[2, 2, 2, 2\]"),
    ("Conv", [rand(1, 2, 3, 3, 3, 3), Const(rand(2, 2, 2, 2, 2, 2))], {},
     r"Conv, attribute 'kernel_shape', node 'node0': only 1-d, 2-d and 3-d Conv"),
    # onnxruntime indexes output_shape's tensor, ONNX's reference the unpooled size's
    ("MaxUnpool", [rand(1, 1, 2, 2), Const(np.array([[[[5, 7], [13, 15]]]])),
                   Const(np.array([1, 1, 5, 5]))], {"kernel_shape": [2, 2], "strides": [2, 2]},
     r"MaxUnpool, attribute 'output_shape', node 'node0': output_shape \[1, 1, 5, 5\] other "
     r"than the unpooled size \[1, 1, 4, 4\] is not supported: onnxruntime and ONNX's "
     r"reference disagree on it"),
    ("MaxUnpool", [rand(1, 16, 64, 64), Const(np.zeros((1, 16, 64, 64), np.int64))],
     {"kernel_shape": [2, 2], "strides": [2, 2]},
     r"MaxUnpool, node 'node0': MaxUnpool would compare 262144 output elements with 65536 "
     r"candidate updates each \(17179869184 pairs, at most 268435456\)"),
]


@pytest.mark.parametrize("op,inputs,attrs,message", REFUSED,
                         ids=["pool-4d", "conv-4d", "unpool-output-shape", "unpool-too-large"])
def test_what_stays_refused(op, inputs, attrs, message):
    model, _ = make_model(op, inputs, attrs, OPSET)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)
