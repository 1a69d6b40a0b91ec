"""The nine CNNs of onnx/backend/test/data/light, with seeded random weights fitting each
weight's role, at O0 and O1 against onnxruntime: max|ours - ref| <= 1e-3 * max(1, max|ref|)
on the output and on the value before the final softmax; O1 runs fewer kernels than O0."""
import numpy as np
import pytest

import graph
from onnx_cases import light_model, ort

MODELS = ["squeezenet", "resnet50", "bvlc_alexnet", "zfnet512", "vgg19", "shufflenet",
          "inception_v1", "inception_v2", "densenet121"]


def o0_kernel_counts(g) -> tuple:
    """(steps, distinct kernels) of g at O0, without compiling it: one per node, one per
    distinct node workload."""
    return len(g.nodes), len({n.workload() for n in g.nodes})


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("name", MODELS)
def test_light_model_matches_onnxruntime(name, level):
    model, feeds = light_model(name)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    g = graph.from_onnx(model)
    m = graph.compile(g, level=level)
    outs = m.run(feeds)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        assert out.shape == ref.shape
        err = float(np.abs(out - ref).max())
        assert err <= 1e-3 * max(1.0, float(np.abs(ref).max())), (name, err)
    steps, kernels = o0_kernel_counts(g)
    if level == "O0":
        assert (len(m.steps), m.num_kernels) == (steps, kernels)
    else:
        launched = sum(s.kernel is not None for s in m.steps)
        # pass winograd_rows makes a 3x3 conv three nodes (and kernels): fusion still runs
        # fewer kernels than O0 would over the same nodes
        extra = 2 * sum("winograd_rows_output" in s.ops for s in m.steps)
        assert launched < steps + extra and m.num_kernels < kernels + extra, (
            launched, m.num_kernels, extra)
