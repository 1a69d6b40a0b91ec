"""The outputs of BatchNormalization and Dropout beyond inference's one: BatchNormalization
in training mode (normalized by the batch's statistics, the running ones updated), the
Dropout mask (all True outside training), and Dropout in training mode with ratio 0 (which
drops nothing); against onnxruntime at O0 and O1; random dropout refused."""
import numpy as np
import pytest

import graph
from onnx_cases import Const, assert_close, check_levels, make_model, onnx, rand, reference_outputs


@pytest.mark.parametrize("shape", [(3, 5, 4, 7), (6, 3), (2, 4, 9)])
def test_batch_norm_training_mode_matches_onnxruntime(shape):
    c = shape[1]
    x = rand(*shape) * 3 + 1
    scale, bias = rand(c), rand(c)
    mean, var = rand(c), rand(c, low=0.5, high=2.0)
    model, feeds = make_model("BatchNormalization", [x, scale, bias, mean, var],
                              {"training_mode": 1, "momentum": 0.8, "epsilon": 1e-3},
                              opset=15, n_out=3)
    check_levels(model, feeds)


def test_batch_norm_training_mode_refusals():
    half = rand(2, 3, 4).astype(np.float16)
    stats = [rand(3).astype(np.float16) for _ in range(4)]
    model, _ = make_model("BatchNormalization", [half, *stats], {"training_mode": 1},
                          opset=15, n_out=3)
    with pytest.raises(graph.UnsupportedError, match=r"BatchNormalization, node 'node0': "
                                                     r"float16 inputs are not supported"):
        graph.from_onnx(model)
    model, _ = make_model("BatchNormalization", [rand(3), *[rand(1) for _ in range(4)]],
                          {"training_mode": 1}, opset=15, n_out=3)
    with pytest.raises(graph.UnsupportedError, match=r"training mode needs an \(N, C, \.\.\.\) "
                                                     r"input, got shape \[3\]"):
        graph.from_onnx(model)


def test_dropout_mask_is_all_true_outside_training():
    x = rand(3, 7)
    model, feeds = make_model("Dropout", [x, Const(np.array(0.3, np.float32))], {},
                              opset=13, n_out=2, out_dtype=[np.float32, np.bool_])
    check_levels(model, feeds)


def test_training_dropout_with_ratio_zero_drops_nothing():
    x = rand(4, 5)
    model, feeds = make_model("Dropout", [x, Const(np.array(0.0, np.float32)),
                                          Const(np.array(True))], {}, opset=13, n_out=2,
                              out_dtype=[np.float32, np.bool_])
    check_levels(model, feeds)
    model, _ = make_model("Dropout", [x, Const(np.array(0.5, np.float32)),
                                      Const(np.array(True))], {}, opset=13)
    with pytest.raises(graph.UnsupportedError, match=r"training mode \(random dropout\) is not "
                                                     r"supported unless ratio is 0"):
        graph.from_onnx(model)


def test_symbolic_batch_training_norm_imports_and_an_unread_mask_needs_no_shape():
    """A mean over a symbolic dim divides by that dim's expression; the Dropout mask of a
    symbolic shape is not made, and refused only where something reads it."""
    from onnx_cases import helper
    x = rand(4, 3, 5)
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                              ["y", "rm", "rv"], training_mode=1),
             helper.make_node("Dropout", ["y"], ["z", "mask"])]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in
             (("s", rand(3)), ("b", rand(3)), ("m", rand(3)), ("v", rand(3, low=0.5, high=2)))]
    outputs = [helper.make_tensor_value_info(n, 1, None) for n in ("z", "rm", "rv")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", 1, ["N", 3, 5])],
                          outputs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    graph.from_onnx(model)   # symbolic: imports
    fixed = graph.from_onnx(model, shapes={"x": x.shape})
    ref = reference_outputs(model, {"x": x})
    for level in ("O0", "O1"):
        assert_close(graph.compile(fixed, level=level).run({"x": x}), ref)
    model.graph.output.append(helper.make_tensor_value_info("mask", 9, None))
    with pytest.raises(graph.UnsupportedError, match=r"Dropout, node 'Dropout#1': output "
                                                     r"'mask' is not supported"):
        graph.from_onnx(model)
