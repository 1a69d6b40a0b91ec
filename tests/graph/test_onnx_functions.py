"""Ops imported as the body ONNX defines for them (graph.frontend.onnx_function): Attention
(context-dependent: its body depends on the inputs' ranks), the losses (SoftmaxCrossEntropyLoss
expands to a body that holds NegativeLogLikelihoodLoss, itself a function), CenterCropPad,
Shrink, Mish, the windows; against onnxruntime (onnx's reference where onnxruntime has no
kernel) at O0 and O1, once at O2. A body node that is not supported is refused, named after
the node it came from; an op with a converter of its own is not expanded. Also the
converters that stand in for a body: RotaryEmbedding, and SpaceToDepth's CRD mode."""
import numpy as np
import pytest

import graph
from onnx_cases import RNG, Const, check_levels, helper, make_model, rand

I64 = np.int64


def test_attention_4d_gqa_causal_with_past_matches_onnxruntime():
    q, k, v = rand(2, 4, 5, 8), rand(2, 2, 7, 8), rand(2, 2, 7, 6)
    past_k, past_v = rand(2, 2, 3, 8), rand(2, 2, 3, 6)
    model, feeds = make_model("Attention", [q, k, v, None, past_k, past_v],
                              {"is_causal": 1}, opset=23, n_out=3)
    check_levels(model, feeds, levels=("O0", "O1", "O2"))


def test_attention_3d_heads_mask_scale_softcap_and_scores_match_onnxruntime():
    q, k, v = rand(1, 6, 3 * 4), rand(1, 9, 3 * 4), rand(1, 9, 3 * 5)
    mask = rand(6, 9)
    model, feeds = make_model(
        "Attention", [q, k, v, mask],
        {"q_num_heads": 3, "kv_num_heads": 3, "scale": 0.3, "softcap": 2.5,
         "qk_matmul_output_mode": 1}, opset=23, n_out=4)
    model.graph.node[0].output[1:3] = ["", ""]   # present_key/value absent, scores kept
    del model.graph.output[1:3]
    check_levels(model, feeds)


def test_attention_boolean_mask_matches_onnxruntime():
    q, k, v = rand(1, 2, 4, 8), rand(1, 2, 6, 8), rand(1, 2, 6, 8)
    mask = RNG.random((4, 6)) < 0.7
    mask[:, 0] = True   # no fully masked row
    model, feeds = make_model("Attention", [q, k, v, mask], {}, opset=23)
    check_levels(model, feeds)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_with_weights_and_ignore_index(reduction):
    scores = rand(3, 5, 4)
    labels = RNG.integers(0, 5, (3, 4)).astype(I64)
    labels[1, 2] = 2
    weights = rand(5, low=0.5, high=2.0)
    model, feeds = make_model("SoftmaxCrossEntropyLoss", [scores, labels, weights],
                              {"reduction": reduction, "ignore_index": 2}, opset=13, n_out=2)
    check_levels(model, feeds)


def test_negative_log_likelihood_loss_matches_onnxruntime():
    x = rand(4, 6, 3)
    target = RNG.integers(0, 6, (4, 3)).astype(I64)
    model, feeds = make_model("NegativeLogLikelihoodLoss", [x, target],
                              {"reduction": "sum"}, opset=22)
    check_levels(model, feeds)


def test_center_crop_pad_shrink_mish_match_onnxruntime():
    x = rand(5, 8, 3)
    model, feeds = make_model("CenterCropPad", [x, Const(np.array([7, 4], I64))],
                              {"axes": [0, 1]}, opset=18)
    check_levels(model, feeds)
    model, feeds = make_model("Shrink", [rand(4, 7)], {"lambd": 0.6}, opset=9)
    check_levels(model, feeds)
    model, feeds = make_model("Mish", [rand(3, 11)], {}, opset=22)
    check_levels(model, feeds)


def test_window_from_a_constant_size_matches_onnxruntime():
    model, feeds = make_model("HannWindow", [Const(np.array(9, I64))], {"periodic": 0},
                              opset=17, out_dtype=np.float32)
    check_levels(model, feeds)


def test_an_unsupported_body_node_is_refused_by_the_node_it_came_from():
    half = [x.astype(np.float16) for x in (rand(1, 2, 3, 4), rand(1, 2, 3, 4),
                                           rand(1, 2, 3, 4))]
    model, _ = make_model("Attention", half, {}, opset=23)
    with pytest.raises(graph.UnsupportedError,
                       match=r"MatMul, node 'node0/MatMul#\d+': float16 inputs are not "
                             r"supported"):
        graph.from_onnx(model)


def test_a_body_holding_an_unknown_op_is_refused_with_the_other_problems():
    q, k, v = rand(1, 3, 8), rand(1, 3, 8), rand(1, 3, 8)
    model, _ = make_model("LinearAttention", [q, k, v], {"q_num_heads": 2, "kv_num_heads": 2,
                                                         "update_rule": "linear"}, opset=28)
    unknown = helper.make_node("NonZero", ["in0"], ["nz"], name="nz_node")
    model.graph.node.append(unknown)
    with pytest.raises(graph.UnsupportedError) as info:
        graph.from_onnx(model)
    text = str(info.value)
    assert "NonZero, node 'nz_node': op not supported" in text
    assert "Scan, node 'node0/Scan#" in text


def test_an_op_with_its_own_converter_is_not_expanded():
    model, _ = make_model("Softmax", [rand(3, 5)], {"axis": 1}, opset=13)
    g = graph.from_onnx(model)
    assert [n.op for n in g.nodes] == ["softmax"]


def test_inputs_outside_the_definition_are_refused():
    """LinearAttention's definition needs q_num_heads and kv_num_heads: without them ONNX
    builds no body."""
    q = rand(1, 3, 8)
    model, _ = make_model("LinearAttention", [q, q, q], {}, opset=28)
    with pytest.raises(graph.UnsupportedError,
                       match=r"LinearAttention, node 'node0': ONNX's definition of "
                             r"LinearAttention gives no body for these inputs"):
        graph.from_onnx(model)


def test_a_required_input_left_out_is_refused_not_crashed_on():
    """The default update_rule 'gated_delta' reads the decay input; its body reshapes it."""
    q = rand(1, 3, 8)
    model, _ = make_model("LinearAttention", [q, q, q], {"q_num_heads": 2, "kv_num_heads": 2},
                          opset=28)
    with pytest.raises(graph.UnsupportedError,
                       match=r"Reshape, node 'node0/Reshape#\d+': required input 'data' is "
                             r"absent"):
        graph.from_onnx(model)
    model, _ = make_model("Relu", [q], opset=13)
    model.graph.node[0].input[0] = ""
    with pytest.raises(graph.UnsupportedError,
                       match=r"Relu, node 'node0': required input 'X' is absent"):
        graph.from_onnx(model)


@pytest.mark.parametrize("rank,interleaved,dim", [(4, 0, 0), (4, 1, 0), (3, 0, 6), (3, 1, 4)])
def test_rotary_embedding_matches_onnxruntime(rank, interleaved, dim):
    """A converter of its own (ONNX's body splits off an empty piece when the whole head
    rotates): 4-d and packed 3-d inputs, halves and interleaved pairs, whole and partial
    rotation, with position ids."""
    batch, seq, heads, head = 2, 5, 3, 10
    x = rand(batch, heads, seq, head) if rank == 4 else rand(batch, seq, heads * head)
    half = (dim or head) // 2
    cos, sin = rand(11, half), rand(11, half)
    positions = RNG.integers(0, 11, (batch, seq)).astype(I64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": dim}
    if rank == 3:
        attrs["num_heads"] = heads
    model, feeds = make_model("RotaryEmbedding", [x, cos, sin, positions], attrs, opset=23)
    check_levels(model, feeds)


def test_rotary_embedding_without_position_ids_and_its_refusals():
    x, cos, sin = rand(1, 2, 4, 6), rand(1, 4, 3), rand(1, 4, 3)
    model, feeds = make_model("RotaryEmbedding", [x, cos, sin], {}, opset=23)
    check_levels(model, feeds, levels=("O0",))
    model, _ = make_model("RotaryEmbedding", [x, cos, sin], {"rotary_embedding_dim": 5},
                          opset=23)
    with pytest.raises(graph.UnsupportedError, match=r"rotary_embedding_dim must be even and "
                                                     r"at most the head size 6, got 5"):
        graph.from_onnx(model)
    model, _ = make_model("RotaryEmbedding", [rand(1, 4, 12), cos, sin], {"num_heads": 5},
                          opset=23)
    with pytest.raises(graph.UnsupportedError, match=r"num_heads must divide the hidden size "
                                                     r"of a 3-d input, got 5"):
        graph.from_onnx(model)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes_match_the_reference(mode):
    model, feeds = make_model("SpaceToDepth", [rand(2, 3, 6, 4)], {"blocksize": 2,
                                                                   "mode": mode}, opset=28)
    check_levels(model, feeds)


def _graph_model(nodes, inputs, outputs, opset=13):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, e, s)
                                       for n, e, s in inputs],
                          [helper.make_tensor_value_info(n, e, None) for n, e in outputs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_omitted_optional_inputs_and_outputs_of_a_function_op():
    """'' names an absent input or output, never a value: leaving out an input somewhere
    must not make an omitted output look used."""
    x, t = rand(3, 5, 4), RNG.integers(0, 5, (3, 4)).astype(I64)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", ""], ["loss", ""])
    model = _graph_model([node], [("x", 1, x.shape), ("t", 7, t.shape)], [("loss", 1)])
    check_levels(model, {"x": x, "t": t})


def test_a_model_value_named_like_a_body_value_keeps_its_own_data():
    """The model's 'loss/X_Log' is not the body's X_Log of the node named 'loss': the body's
    values take another prefix."""
    x, t = rand(3, 5, 4), RNG.integers(0, 5, (3, 4)).astype(I64)
    nodes = [helper.make_node("Neg", ["x"], ["loss/X_Log"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["l"], name="loss"),
             helper.make_node("Abs", ["loss/X_Log"], ["a"])]
    model = _graph_model(nodes, [("x", 1, x.shape), ("t", 7, t.shape)], [("l", 1), ("a", 1)])
    check_levels(model, {"x": x, "t": t})
