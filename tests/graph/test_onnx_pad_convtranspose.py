"""ONNX Pad in modes constant, edge, reflect and wrap (negative pads crop first, pads on
several axes, the `axes` input, the attribute form of opset 10) and ConvTranspose 1-d, with
output_shape and with auto_pad SAME_UPPER/SAME_LOWER, imported from one-node models and
compiled at O0 and O1 (O2 for one case each) against onnxruntime on seeded random data of
odd sizes; the graph node and fused kernel of a pad; what stays refused, with its text."""
import numpy as np
import pytest

import graph
from graph.fuse import fuse
from onnx_cases import Const, assert_close, check_levels, make_model, ort, rand

MODES = ["constant", "edge", "reflect", "wrap"]

# (id, input shape, pads (begins then ends), axes or None); reflect's pads stay below the
# cropped axis sizes
PADS = [
    ("several-axes", (2, 3, 7, 9), [0, 1, 2, 3, 1, 2, 6, 0], None),
    ("crop-and-pad", (1, 4, 9, 11), [0, -1, 3, -2, 0, 2, -4, 5], None),
    ("crop-only", (2, 5, 7), [0, -2, -1, 0, -1, -3], None),
    ("axes", (2, 3, 7, 9), [2, -1, 4, 1], [-1, 2]),
]


def _pad_model(x, pads, mode, axes=None, value=None, opset=19):
    inputs = [x, Const(np.array(pads, np.int64))]
    if value is not None or axes is not None:
        inputs.append(None if value is None else Const(np.array(value, np.float32)))
    if axes is not None:
        inputs.append(Const(np.array(axes, np.int64)))
    return make_model("Pad", inputs, {"mode": mode}, opset)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,shape,pads,axes", PADS, ids=[p[0] for p in PADS])
def test_pad_modes_match_onnxruntime(name, shape, pads, axes, mode):
    value = 1.25 if mode == "constant" else None
    model, feeds = _pad_model(rand(*shape), pads, mode, axes, value)
    levels = ("O0", "O1", "O2") if name == "crop-and-pad" else ("O0", "O1")
    check_levels(model, feeds, levels=levels)


@pytest.mark.parametrize("mode", MODES[:3])  # 'wrap' came with opset 19
def test_pad_attribute_form_of_opset_10(mode):
    attrs = {"mode": mode, "pads": [1, 0, 2, 0, 2, 1]}
    if mode == "constant":
        attrs["value"] = -0.5
    model, feeds = make_model("Pad", [rand(3, 5, 4)], attrs, 10)
    check_levels(model, feeds)


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_edge_and_wrap_pads_longer_than_the_axis(mode):
    """Edge repeats the end element, wrap goes round the axis as often as the pads ask;
    onnxruntime does both."""
    model, feeds = _pad_model(rand(2, 3, 5), [0, 7, 1, 0, 4, 12], mode)
    check_levels(model, feeds)


def test_pad_int_data():
    """Exact for integers: edge, reflect and wrap only move elements."""
    x = np.random.default_rng(5).integers(-50, 50, (3, 6, 5)).astype(np.int32)
    for mode in MODES[1:]:
        model, feeds = _pad_model(x, [1, 2, 0, 2, 0, 4], mode)
        check_levels(model, feeds)


def test_reflect_pad_fuses_into_its_consumers_and_exports():
    """A reflect pad is an injective node: at O1 it shares one kernel with the elementwise
    nodes around it; the node carries `mode` (a constant pad keeps the attributes it had),
    and the graph exported back to ONNX runs the same in onnxruntime."""
    from onnx_export import to_onnx
    x = graph.input("x", (2, 3, 7, 9))
    p = graph.pad(graph.relu(x), (0, 0, 2, 3), (0, 1, 1, -2), name="p", mode="reflect")
    q = graph.pad(p, (0, 0, 1, 0), (0, 0, 0, 1), 0.5, name="q")
    y = graph.sigmoid(q, name="y")
    g = graph.Graph([y], inputs=[x])
    assert p.node.attr["mode"] == "reflect" and "mode" not in q.node.attr
    assert [gr.ops for gr in fuse(g)] == [["relu", "pad", "pad", "sigmoid"]]
    feeds = {"x": rand(2, 3, 7, 9)}
    sess = ort.InferenceSession(to_onnx(g).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for level in ("O0", "O1", "O2"):
        assert_close(graph.compile(g, level=level).run(feeds), sess.run(None, feeds))


PAD_REFUSED = [
    ("reflect", (2, 3, 5), [0, 0, 5, 0, 0, 0], None,
     r"Pad, attribute 'pads', node 'node0': pad: mode 'reflect' needs each pad of axis 2 "
     r"smaller than the axis \(5 elements\), got pad_before 5 and pad_after 0"),
    ("reflect", (2, 3, 5), [0, 0, 2, 0, 0, -3], None,
     r"mode 'reflect' needs each pad of axis 2 smaller than the axis \(2 elements after "
     r"cropping\), got pad_before 2 and pad_after -3"),
    ("edge", (2, 3, 5), [0, -2, 0, 0, -1, 3], None,
     r"pad: the negative pads of axis 1 \(size 3\) must leave at least one element, got "
     r"pad_before -2 and pad_after -1"),
    ("constant", (2, 3, 5), [1, 2, 3], [0, 1],
     r"Pad, attribute 'pads', node 'node0': pads must hold 2 values per axis in axes "
     r"\[0, 1\], got 3"),
    ("constant", (2, 3, 5), [1, 2, 3, 4], [1, -2],
     r"Pad, attribute 'axes', node 'node0': axes \[1, -2\] must be distinct axes of the "
     r"rank-3 input"),
]


@pytest.mark.parametrize("mode,shape,pads,axes,message", PAD_REFUSED,
                         ids=["reflect-past-axis", "reflect-past-cropped-axis", "crop-all",
                              "pads-length", "repeated-axes"])
def test_what_pad_refuses(mode, shape, pads, axes, message):
    model, _ = _pad_model(rand(*shape), pads, mode, axes)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


def test_pad_mode_is_checked_by_the_builder():
    x = graph.input("x", (3, 4))
    with pytest.raises(graph.GraphError, match=r"graph.pad: mode must be one of \['constant', "
                                               r"'edge', 'reflect', 'wrap'\], got 'mirror'"):
        graph.pad(x, (1, 1), (0, 0), mode="mirror")


# ---- ConvTranspose -----------------------------------------------------------------------

def _conv_transpose(x_shape, w_shape, attrs, bias=True, opset=17, seed=0):
    rng = np.random.default_rng(seed)
    w = Const(rng.standard_normal(w_shape).astype(np.float32))
    groups = attrs.get("group", 1)
    b = [Const(rng.standard_normal(w_shape[1] * groups).astype(np.float32))] if bias else []
    return make_model("ConvTranspose", [rand(*x_shape), w] + b, attrs, opset)


ONE_D = [
    ("plain", (2, 3, 11), (3, 4, 3), {}),
    ("strided-padded", (1, 4, 9), (4, 2, 4),
     {"strides": [3], "pads": [2, 1], "output_padding": [1], "dilations": [2]}),
    ("groups", (2, 6, 7), (6, 1, 3), {"group": 3, "strides": [2], "pads": [1, 0]}),
    ("output-shape", (1, 3, 8), (3, 2, 3), {"strides": [2], "output_shape": [16]}),
    ("same-lower", (1, 3, 7), (3, 5, 4), {"strides": [3], "auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", [c[1:] for c in ONE_D],
                         ids=[c[0] for c in ONE_D])
def test_one_d_conv_transpose_matches_onnxruntime(x_shape, w_shape, attrs):
    model, feeds = _conv_transpose(x_shape, w_shape, attrs)
    levels = ("O0", "O1", "O2") if "pads" in attrs and "group" not in attrs else ("O0", "O1")
    check_levels(model, feeds, levels=levels)


# (id, input (N, C, H, W), weight (C, OC, KH, KW), attributes): small sizes (the kernels
# compile in well under a second), odd totals of padding split both ways
OUTPUT_SIZE = [
    ("shape-notset-odd", (1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2],
                                                     "output_shape": [6, 8]}),
    ("shape-upper", (1, 2, 3, 4), (2, 3, 3, 2), {"strides": [3, 2], "auto_pad": "SAME_UPPER",
                                                "output_shape": [8, 7]}),
    ("shape-lower-dilated", (1, 2, 3, 4), (2, 2, 3, 3),
     {"strides": [2, 3], "dilations": [2, 1], "auto_pad": "SAME_LOWER",
      "output_shape": [6, 11]}),
    ("shape-larger-than-full", (1, 2, 3, 4), (2, 3, 3, 3),
     {"strides": [3, 2], "output_shape": [11, 10]}),
    ("shape-ignores-pads", (1, 2, 3, 4), (2, 3, 3, 3),
     {"strides": [2, 2], "output_padding": [1, 1], "output_shape": [6, 8],
      "kernel_shape": [3, 3], "pads": [3, 3, 3, 3]}),
    ("same-upper", (1, 2, 3, 5), (2, 3, 3, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("same-lower", (1, 2, 3, 5), (2, 3, 3, 4), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("same-lower-output-padding-groups", (1, 4, 3, 4), (4, 3, 3, 3),
     {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_padding": [1, 0], "group": 2}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", [c[1:] for c in OUTPUT_SIZE],
                         ids=[c[0] for c in OUTPUT_SIZE])
def test_conv_transpose_output_size_matches_onnxruntime(x_shape, w_shape, attrs):
    model, feeds = _conv_transpose(x_shape, w_shape, attrs)
    one_of_each = attrs.get("auto_pad") == "SAME_UPPER" and "output_shape" in attrs
    check_levels(model, feeds, levels=("O0", "O1", "O2") if one_of_each else ("O0", "O1"))


CT_REFUSED = [
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [3, 2], "output_shape": [12, 8]},
     r"ConvTranspose, attribute 'output_shape', node 'node0': output_shape \[12, 8\]: each "
     r"size must be in \[1, 11\] for a size-3 input with stride 3, got 12"),
    # a kernel smaller than the stride: onnxruntime's output is smaller than SAME's
    ((1, 3, 4, 5), (3, 2, 2, 1), {"strides": [3, 2], "auto_pad": "SAME_UPPER"},
     r"ConvTranspose, attribute 'auto_pad', node 'node0': auto_pad SAME_UPPER with an output "
     r"larger than the full one \(12 > 11\) is not supported: onnxruntime and ONNX's "
     r"reference disagree on it"),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"output_shape": [5]},
     r"output_shape must hold one size per spatial axis \(2\), got \[5\]"),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"kernel_shape": [3, 2]},
     r"ConvTranspose, attribute 'kernel_shape', node 'node0': kernel_shape \[3, 2\] must "
     r"match the weight's spatial shape \[3, 3\]"),
    ((1, 2, 3, 4, 5, 3), (2, 3, 2, 2, 2, 2), {},
     r"ConvTranspose, attribute 'kernel_shape', node 'node0': only 1-d, 2-d and 3-d "
     r"ConvTranspose \(3-d to 5-d input\) are supported, got a 6-d input"),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs,message", CT_REFUSED,
                         ids=["output-too-large", "same-past-full", "output-shape-length",
                              "kernel-mismatch", "4d"])
def test_what_conv_transpose_refuses(x_shape, w_shape, attrs, message):
    model, _ = _conv_transpose(x_shape, w_shape, attrs, bias=False)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


def test_a_refused_1d_conv_transpose_says_it_was_seen_as_2d():
    """The 1-d op's lists gain a height entry on the way to the 2-d converter; its refusal
    says so, since the lists it quotes are not the ones the model wrote."""
    model, _ = make_model("ConvTranspose", [rand(1, 3, 5), Const(rand(3, 2, 3))],
                          {"kernel_shape": [2]})
    with pytest.raises(graph.UnsupportedError, match=r"\[1, 3\] .*\(the 1-d op seen as 2-d "
                                                     r"with a height of 1\)"):
        graph.from_onnx(model)
