"""Dilated 2-d MaxPool, AveragePool (count_include_pad 0 and 1) and LpPool (p 2 and 3)
imported from one-node ONNX models, at graph.compile levels O0 and O1, against
onnxruntime (onnx's ReferenceEvaluator where onnxruntime has no kernel): dilations (2, 2),
(2, 3) and (1, 3), strides (one above MAX_DENSE_STRIDE: the phase-split form), asymmetric
pads, ceil_mode (with windows running into its extra end padding), auto_pad SAME_UPPER,
odd sizes, 1-d pools; the graph nodes' attribute and what stays refused (pools over four
spatial axes)."""
import numpy as np
import pytest

import graph
from onnx_cases import assert_close, make_model, ort, rand, reference_outputs

OPSET = 19   # AveragePool takes dilations from opset 19

# (id, input shape, window attributes)
GEOMETRY = [
    ("d22", (2, 3, 9, 11), {"kernel_shape": [3, 3], "dilations": [2, 2]}),
    ("d23-strided-padded", (1, 4, 13, 10),
     {"kernel_shape": [2, 3], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 2, 1, 0]}),
    ("d13-asymmetric", (1, 3, 10, 17),
     {"kernel_shape": [3, 2], "dilations": [1, 3], "strides": [1, 2], "pads": [2, 1, 0, 1]}),
    ("d23-stride5", (1, 2, 11, 23),   # stride 5 along x: the phase-split padded copy
     {"kernel_shape": [3, 3], "dilations": [2, 3], "strides": [2, 5], "pads": [1, 1, 2, 2]}),
    # ceil_mode: the last windows run past the given end padding (by 1 row, 2 columns)
    ("d22-ceil", (1, 3, 12, 13),
     {"kernel_shape": [3, 3], "dilations": [2, 2], "strides": [2, 3], "pads": [1, 1, 1, 1],
      "ceil_mode": 1}),
    ("d23-ceil", (1, 2, 10, 16),
     {"kernel_shape": [2, 3], "dilations": [2, 3], "strides": [3, 4], "pads": [1, 0, 1, 1],
      "ceil_mode": 1}),
    ("d13-ceil-exact", (1, 2, 9, 14),   # ceil mode's count equals floor's here
     {"kernel_shape": [3, 2], "dilations": [1, 3], "strides": [3, 3], "pads": [0, 1, 2, 1],
      "ceil_mode": 1}),
]

KINDS = [("MaxPool", {}), ("AveragePool", {"count_include_pad": 0}),
         ("AveragePool", {"count_include_pad": 1}), ("LpPool", {"p": 2}), ("LpPool", {"p": 3})]
KIND_IDS = ["max", "avg", "avg_include_pad", "lp2", "lp3"]


def check_levels(model, feeds, ref, rtol=1e-4, atol=1e-5):
    g = graph.from_onnx(model)
    for level in ("O0", "O1"):
        assert_close(graph.compile(g, level=level).run(feeds), ref, rtol, atol)


@pytest.mark.parametrize("kind,extra", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("shape,attrs", [g[1:] for g in GEOMETRY], ids=[g[0] for g in GEOMETRY])
def test_dilated_pools_match_onnxruntime(shape, attrs, kind, extra):
    model, feeds = make_model(kind, [rand(*shape)], {**attrs, **extra}, OPSET)
    check_levels(model, feeds, reference_outputs(model, feeds))


def _same_upper_pads(shape, attrs) -> list:
    """The spec's SAME_UPPER padding (output size ceil(size / stride)) for the dilated
    window, as explicit ONNX pads (begins, then ends)."""
    begins, ends = [], []
    for size, k, s, d in zip(shape[2:], attrs["kernel_shape"], attrs["strides"],
                             attrs["dilations"]):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


SAME_UPPER = [
    ((2, 2, 9, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 2]}),
    ((1, 3, 10, 13), {"kernel_shape": [2, 3], "strides": [1, 3], "dilations": [2, 3]}),
    ((1, 2, 7, 15), {"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [1, 3]}),
]


def _prepadded_reference(kind, extra, x, attrs, pads):
    """onnxruntime's pool over `x` padded ahead (np.pad: -inf for max, zeros otherwise) with
    no pads of its own: the windows of `pads`. The average without the padding is the ratio
    of two such averages over all taps, of the values and of ones (the taps inside)."""
    def run(a):
        a = np.pad(a, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                   constant_values=-np.inf if kind == "MaxPool" else 0.0)
        model, feeds = make_model(kind, [a], {**attrs, **extra, "count_include_pad": 1}
                                  if kind == "AveragePool" else {**attrs, **extra}, OPSET)
        return reference_outputs(model, feeds)[0]
    if kind == "AveragePool" and not extra["count_include_pad"]:
        return [run(x) / run(np.ones_like(x))]
    return [run(x)]


@pytest.mark.parametrize("kind,extra", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("shape,attrs", SAME_UPPER, ids=str)
def test_dilated_pools_with_same_upper_padding(shape, attrs, kind, extra):
    """auto_pad SAME_UPPER pads for the dilated window, so the output keeps ceil(size /
    stride) per axis as the spec says. onnxruntime's pools pad for the undilated kernel
    (a smaller output) and refuse pads past the undilated kernel, and onnx's reference
    AveragePool and LpPool leave outputs unwritten here, so the values are onnxruntime's
    over the input padded ahead."""
    x = rand(*shape)
    model, feeds = make_model(kind, [x], {**attrs, **extra, "auto_pad": "SAME_UPPER"}, OPSET)
    ref = _prepadded_reference(kind, extra, x, attrs, _same_upper_pads(shape, attrs))
    assert ref[0].shape[2:] == tuple(-(-n // s) for n, s in zip(shape[2:], attrs["strides"]))
    check_levels(model, feeds, ref)


@pytest.mark.parametrize("shape,attrs", SAME_UPPER, ids=str)
def test_dilated_max_pool_with_same_upper_matches_the_onnx_reference(shape, attrs):
    """onnx's reference MaxPool follows the spec's SAME_UPPER with dilation."""
    from onnx.reference import ReferenceEvaluator
    model, feeds = make_model("MaxPool", [rand(*shape)], {**attrs, "auto_pad": "SAME_UPPER"},
                              OPSET)
    check_levels(model, feeds, ReferenceEvaluator(model).run(None, feeds))


@pytest.mark.parametrize("kind,extra", KINDS[:4], ids=KIND_IDS[:4])
def test_dilated_one_d_pools(kind, extra):
    attrs = {"kernel_shape": [3], "dilations": [2], "strides": [2], "pads": [1, 2],
             "ceil_mode": 1}
    model, feeds = make_model(kind, [rand(2, 3, 18)], {**attrs, **extra}, OPSET)
    check_levels(model, feeds, reference_outputs(model, feeds))


def test_ceil_mode_with_count_include_pad_counts_the_given_padding_only():
    """Undilated too: the windows ceil mode adds reach past the end padding, and those taps
    are not counted (onnxruntime and the onnx reference agree)."""
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
             "count_include_pad": 1}
    model, feeds = make_model("AveragePool", [rand(1, 2, 10, 10)], attrs, OPSET)
    ref = reference_outputs(model, feeds)
    assert ref[0].shape == (1, 2, 6, 6)
    check_levels(model, feeds, ref)


def test_pool_nodes_carry_dilation_only_where_it_is_not_one():
    x = graph.input("x", (1, 2, 9, 9))
    plain = graph.nn.max_pool2d(x, 3, 1, 1, name="plain")
    dilated = graph.nn.avg_pool2d(x, 3, 1, 1, True, dilation=(2, 3), name="dilated")
    assert "dilation" not in plain.node.attr
    assert dilated.node.attr["dilation"] == (2, 3)
    assert dilated.shape == (1, 2, 7, 5)
    with pytest.raises(graph.GraphError, match=r"graph.nn.max_pool2d: dilation must be an "
                                               r"int or 2 ints >= 1, got 0"):
        graph.nn.max_pool2d(x, 3, dilation=0)


def test_dilated_pools_built_with_graph_nn_match_onnxruntime_of_their_export():
    """The builder's pools with dilation, exported (tests/graph/onnx_export.py) and run by
    onnxruntime, against the compiled graph."""
    from onnx_export import to_onnx
    x = graph.input("x", (1, 3, 12, 14))
    a = graph.nn.max_pool2d(x, (2, 3), (1, 2), (1, 1, 0, 2), dilation=(2, 3), name="a")
    b = graph.nn.avg_pool2d(graph.relu(a), 3, 2, 1, dilation=2, name="b")
    g = graph.Graph([b], inputs=[x])
    feeds = {"x": rand(1, 3, 12, 14)}
    sess = ort.InferenceSession(to_onnx(g).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for level in ("O0", "O1"):
        assert_close(graph.compile(g, level=level).run(feeds), sess.run(None, feeds))


REFUSED = [
    # (the indices output, 3-d MaxPool and LpPool: tests/graph/test_onnx_pool_conv_3d.py)
    ("MaxPool", (1, 2, 3, 5, 6, 7), {"kernel_shape": [2, 2, 2, 2], "dilations": [2, 2, 2, 2]},
     1, r"MaxPool, attribute 'kernel_shape', node 'node0': only 1-d, 2-d and 3-d MaxPool "
        r"\(3-d to 5-d input\) are supported, got a 6-d input"),
    ("LpPool", (1, 2, 3, 5, 6, 7), {"kernel_shape": [2, 2, 2, 2], "dilations": [1, 2, 2, 2]},
     1, r"LpPool, attribute 'kernel_shape', node 'node0': only 1-d, 2-d and 3-d LpPool"),
]


@pytest.mark.parametrize("op,shape,attrs,n_out,message", REFUSED, ids=["max-4d", "lp-4d"])
def test_what_stays_refused(op, shape, attrs, n_out, message):
    model, _ = make_model(op, [rand(*shape)], attrs, OPSET, n_out=n_out)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)
