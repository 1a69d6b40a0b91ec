"""The nine CNNs of onnx/backend/test/data/light, with seeded random weights fitting each
weight's role, at O0 against onnxruntime: max|ours - ref| <= 1e-3 * max(1, max|ref|) on
the output and on the value before the final softmax."""
import numpy as np
import pytest

import graph
from onnx_cases import light_model, ort

MODELS = ["squeezenet", "resnet50", "bvlc_alexnet", "zfnet512", "vgg19", "shufflenet",
          "inception_v1", "inception_v2", "densenet121"]


@pytest.mark.parametrize("name", MODELS)
def test_light_model_matches_onnxruntime_at_o0(name):
    model, feeds = light_model(name)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    g = graph.from_onnx(model)
    outs = graph.compile(g, level="O0").run(feeds)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        assert out.shape == ref.shape
        err = float(np.abs(out - ref).max())
        assert err <= 1e-3 * max(1.0, float(np.abs(ref).max())), (name, err)
