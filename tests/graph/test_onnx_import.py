"""graph.from_onnx: one error listing every unsupported op and attribute, symbolic dims as
te.vars, the shapes= override, paths, opsets, and the message when onnx is missing."""
import sys

import numpy as np
import pytest

import graph
import te
from onnx_cases import Const, assert_close, make_model, rand, run_both

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _info(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_every_unsupported_op_and_attribute_is_listed_in_one_error():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("NonZero", ["a"], ["b"], name="nz1"),
        helper.make_node("MaxPool", ["x4"], ["c"], name="pool1", kernel_shape=[2, 2],
                         auto_pad="SAME_MIDDLE"),
        helper.make_node("Relu", ["a"], ["d"], name="relu_bad", frobnicate=3),
        helper.make_node("Reshape", ["a", "dyn_shape"], ["e"], name="reshape1"),
        helper.make_node("Pad", ["x4", "pads4"], ["f"], name="pad1", mode="reflect"),
        helper.make_node("Relu", ["b"], ["g"], name="after_nz"),
    ]
    model = _model(nodes, [_info("x", [2, 3]), _info("x4", [1, 1, 4, 4]),
                           _info("dyn_shape", [2], TensorProto.INT64)],
                   [_info(o, None) for o in "bcdefg"], opset=11,
                   inits=[numpy_helper.from_array(np.array([0, 0, 4, 0, 0, 0, 0, 0], np.int64),
                                                  "pads4")])
    with pytest.raises(graph.UnsupportedError) as err:
        graph.from_onnx(model)
    assert str(err.value).splitlines() == [
        "from_onnx: the model uses 5 unsupported op(s) or attribute(s):",
        "  NonZero, node 'nz1': op not supported",
        "  Relu, attribute 'frobnicate', node 'relu_bad': attribute not supported",
        "  MaxPool, attribute 'auto_pad', node 'pool1': value 'SAME_MIDDLE' not supported",
        "  Reshape, attribute 'shape', node 'reshape1': input 'shape' must be a constant (an "
        "initializer or a Constant node)",
        "  Pad, attribute 'pads', node 'pad1': pad: mode 'reflect' needs each pad of axis 2 "
        "smaller than the axis (4 elements), got pad_before 4 and pad_after 0"]
    assert [item[:3] for item in err.value.items][0] == ("NonZero", "", "nz1")


def test_a_used_output_the_converter_does_not_make_is_refused():
    # (Dropout's mask before opset 10 is unspecified outside training)
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")
    model = _model([node], [_info("x", [1, 1, 4, 4])],
                   [_info("y", None), _info("mask", None)], opset=9)
    with pytest.raises(graph.UnsupportedError, match=r"Dropout, node 'drop': output 'mask' "
                                                     r"is not supported"):
        graph.from_onnx(model)


def test_dim_params_become_shared_te_vars_and_shapes_fixes_them():
    nodes = [helper.make_node("Add", ["x", "y"], ["z"], name="add")]
    model = _model(nodes, [_info("x", ["batch", 5]), _info("y", ["batch", 5])],
                   [_info("z", None)])
    g = graph.from_onnx(model)
    bx, by = g.inputs[0].shape[0], g.inputs[1].shape[0]
    assert isinstance(bx, te.Var) and bx.name == "batch" and bx is by
    assert str(g).splitlines()[1] == "  %z: float32[batch, 5] = add(%x, %y)"
    fixed = graph.from_onnx(model, shapes={"x": (3, 5), "y": (3, 5)})
    feeds = {"x": rand(3, 5), "y": rand(3, 5)}
    np.testing.assert_allclose(graph.compile(fixed).run(feeds)[0], feeds["x"] + feeds["y"])


def test_shapes_and_model_errors():
    model, _ = make_model("Relu", [rand(2, 3)])
    with pytest.raises(graph.GraphError, match=r"from_onnx: shapes names unknown input 'x'; "
                                               r"the model's inputs are \['in0'\]"):
        graph.from_onnx(model, shapes={"x": (2, 3)})
    with pytest.raises(graph.GraphError, match=r"shapes\['in0'\] must have 2 dims like the "
                                               r"model's input, got \(2, 3, 1\)"):
        graph.from_onnx(model, shapes={"in0": (2, 3, 1)})
    with pytest.raises(graph.GraphError, match=r"model must be a path or an onnx\.ModelProto, "
                                               r"got int"):
        graph.from_onnx(3)
    old, _ = make_model("Relu", [rand(2, 3)], opset=5)
    with pytest.raises(graph.UnsupportedError, match=r"the model's opset is 5; supported "
                                                     r"opsets are 6 to 28"):
        graph.from_onnx(old)


def test_import_from_a_path_gives_the_same_results(tmp_path):
    model, feeds = make_model("Conv", [rand(1, 3, 7, 6), Const(rand(2, 3, 3, 3))],
                              {"pads": [1, 1, 1, 1]})
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    g = graph.from_onnx(str(path))
    assert [v.name for v in g.constants] == ["in1"] and [v.name for v in g.inputs] == ["in0"]
    ours, ref = run_both(model, feeds)
    assert_close(graph.compile(g).run(feeds), ref)


def test_softmax_before_opset_13_is_the_softmax_of_the_flattened_2d_view():
    model, feeds = make_model("Softmax", [rand(2, 3, 5)], {"axis": 1}, opset=11)
    g = graph.from_onnx(model)
    assert [n.op for n in g.nodes] == ["reshape", "softmax", "reshape"]
    ours, ref = run_both(model, feeds)
    assert_close(ours, ref)


def test_missing_onnx_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(ImportError, match=r"graph\.from_onnx needs the onnx package: pip "
                                          r"install '\.\[onnx\]'"):
        graph.from_onnx("model.onnx")
