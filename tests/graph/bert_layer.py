"""A BERT encoder layer as an ONNX model built with onnx.helper (opset 17): self-attention
(Q, K, V projections, 12 heads, scaled scores plus an additive mask, Softmax, output
projection), residual + LayerNormalization, the feed-forward block with GELU written
through Erf, residual + LayerNormalization. Weights seeded normal * 0.02."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def bert_layer(seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072,
               seed: int = 0):
    """(model, feeds) for one encoder layer on a batch of one sequence."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(name, *shape):
        return const(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def dense(x, name, n_in, n_out):
        y = node("MatMul", [x, weight(f"{name}_w", n_in, n_out)], f"{name}_mm")
        return node("Add", [y, weight(f"{name}_b", n_out)], name)

    def split_heads(x, name, perm):
        r = node("Reshape", [x, const(f"{name}_shape", np.array([1, seq, heads, hidden //
                                                                  heads], np.int64))],
                 f"{name}_heads")
        return node("Transpose", [r], f"{name}_t", perm=perm)

    def layer_norm(x, name):
        return node("LayerNormalization", [x, const(f"{name}_g", rng.uniform(
            0.5, 1.5, hidden).astype(np.float32)), weight(f"{name}_b", hidden)], name,
            axis=-1, epsilon=1e-12)

    q = split_heads(dense("x", "q", hidden, hidden), "q", [0, 2, 1, 3])
    k = split_heads(dense("x", "k", hidden, hidden), "k", [0, 2, 3, 1])
    v = split_heads(dense("x", "v", hidden, hidden), "v", [0, 2, 1, 3])
    scores = node("Div", [node("MatMul", [q, k], "qk"),
                          const("scale", np.float32(np.sqrt(hidden // heads)))], "scores")
    probs = node("Softmax", [node("Add", [scores, "mask"], "masked")], "probs", axis=-1)
    ctx = node("Transpose", [node("MatMul", [probs, v], "ctx_heads")], "ctx_t",
               perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, const("ctx_shape", np.array([1, seq, hidden], np.int64))],
               "ctx")
    h = layer_norm(node("Add", [dense(ctx, "attn_out", hidden, hidden), "x"], "res1"), "ln1")
    f = dense(h, "ffn1", hidden, ffn)
    erf = node("Erf", [node("Div", [f, const("sqrt2", np.float32(np.sqrt(2.0)))], "f_s")],
               "f_erf")
    gelu = node("Mul", [node("Mul", [f, node("Add", [erf, const("one", np.float32(1))],
                                              "f_1p")], "f_x"),
                        const("half", np.float32(0.5))], "gelu")
    out = layer_norm(node("Add", [dense(gelu, "ffn2", ffn, hidden), h], "res2"), "ln2")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden]),
              helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq])]
    g = helper.make_graph(nodes, "bert_layer", inputs,
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mask = np.zeros((1, 1, 1, seq), np.float32)
    mask[..., seq - seq // 8:] = -10000.0  # the padded tail of the sequence
    return model, {"x": rng.standard_normal((1, seq, hidden)).astype(np.float32),
                   "mask": mask}
