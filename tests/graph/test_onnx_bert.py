"""A BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, sequence 128, GELU through
Erf, LayerNormalization) built with onnx.helper, at O0, O1 and O2 against onnxruntime: the
layer's output and the attention probabilities within 1e-3 * max(1, max|ref|); at O1 the
attention's scale + mask + softmax is one kernel, as are the FFN's matmul + bias + GELU."""
import numpy as np
import pytest
from onnx_cases import ort  # first: skips this module where onnx or onnxruntime is absent

import graph
from bert_layer import bert_layer
from onnx import TensorProto, helper


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_bert_layer_matches_onnxruntime(level):
    model, feeds = bert_layer()
    model.graph.output.append(helper.make_tensor_value_info("probs", TensorProto.FLOAT, None))
    refs = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    g = graph.from_onnx(model)
    assert [v.type_str for v in g.outputs] == ["float32[1, 128, 768]",
                                               "float32[1, 12, 128, 128]"]
    m = graph.compile(g, level=level)
    outs = m.run(feeds)
    for out, ref in zip(outs, refs):
        err = float(np.abs(out - ref).max())
        assert err <= 1e-3 * max(1.0, float(np.abs(ref).max())), err
    # the mask reached the scores: the padded tail gets no attention
    assert float(outs[1][..., 112:].max()) < 1e-6
    if level == "O2":  # exactly what its kernels give run step by step (O1)
        for out, o1 in zip(outs, graph.executor.Module.run(m, feeds)):
            np.testing.assert_array_equal(out, o1)
        assert m.memory_plan.arena_bytes <= 1.1 * m.memory_plan.lower_bound
        # the dry run plans the very steps O2 runs
        assert graph.plan_memory(g).arena_bytes == m.memory_plan.arena_bytes
    if level == "O1":
        launched = sum(s.kernel is not None for s in m.steps)
        assert launched < len(g.nodes) and m.num_kernels < len({n.workload() for n in g.nodes})
        fused = [s.ops for s in m.steps]
        assert any(ops[-1] == "softmax" and {"add", "divide"} <= set(ops) for ops in fused)
        # (the FFN's weight laid out in panels once: pack_matmul_weights)
        assert any(ops[0] == "matmul_panel" and "erf" in ops for ops in fused)
