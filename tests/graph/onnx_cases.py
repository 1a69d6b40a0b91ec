"""Helpers for the ONNX tests: one-node models built with onnx.helper, run by onnxruntime
(the reference) and by graph at O0."""
import numpy as np

import graph

onnx = __import__("pytest").importorskip("onnx")
ort = __import__("pytest").importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(2026)
ELEM = {np.dtype(k).name: v for k, v in (
    (np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE),
    (np.int32, TensorProto.INT32), (np.int64, TensorProto.INT64), (np.bool_, TensorProto.BOOL),
    (np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8),
    (np.uint16, TensorProto.UINT16), (np.int16, TensorProto.INT16),
    (np.float16, TensorProto.FLOAT16))}


def rand(*shape, low=None, high=None):
    """Random float32, never zero: normal, or uniform in [low, high)."""
    if low is not None:
        return RNG.uniform(low, high, shape).astype(np.float32)
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.where(np.abs(x) < 1e-3, 0.5, x).astype(np.float32)


class Const:
    """An input given as an initializer (a weight, or a shape/axes input)."""

    def __init__(self, data):
        self.data = np.asarray(data)


def make_model(op_type, inputs, attrs=None, opset=13, n_out=1, out_dtype=None):
    """A one-node model; `inputs` are arrays (graph inputs), Const (initializers) or None
    (an omitted optional input). The outputs have out_dtype (one, or a list of one per
    output), by default the first input's."""
    names, feeds, inits, vinfo = [], {}, [], []
    for k, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        if isinstance(x, Const):
            inits.append(numpy_helper.from_array(x.data, name))
        else:
            feeds[name] = x
            vinfo.append(helper.make_tensor_value_info(name, ELEM[x.dtype.name], x.shape))
    outs = [f"out{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, name="node0", **(attrs or {}))
    first = next(x for x in inputs if x is not None)
    first = first.data if isinstance(first, Const) else first
    kinds = out_dtype if isinstance(out_dtype, (list, tuple)) else [out_dtype] * n_out
    elems = [ELEM[np.dtype(t or first.dtype).name] for t in kinds]
    g = helper.make_graph([node], "case", vinfo,
                          [helper.make_tensor_value_info(o, e, None) for o, e in zip(outs, elems)],
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset >= 21 else 8
    return model, feeds


def run_both(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    ours = graph.compile(graph.from_onnx(model)).run(feeds)
    return ours, ref


def reference_outputs(model, feeds, onnx_reference: bool = False):
    """onnxruntime's outputs; onnx's numpy reference (ReferenceEvaluator) where onnxruntime
    has no kernel for the case's types, or with `onnx_reference`."""
    from onnx.reference import ReferenceEvaluator
    if onnx_reference:
        return ReferenceEvaluator(model).run(None, feeds)
    try:
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001  (onnxruntime's NOT_IMPLEMENTED has no own type)
        if "NOT_IMPLEMENTED" not in str(e):
            raise
        return ReferenceEvaluator(model).run(None, feeds)
    return sess.run(None, feeds)


def check_levels(model, feeds, rtol=1e-4, atol=1e-5, levels=("O0", "O1"),
                 onnx_reference: bool = False):
    """The model imported once, compiled at each level, against reference_outputs."""
    ref = reference_outputs(model, feeds, onnx_reference)
    g = graph.from_onnx(model)
    for level in levels:
        assert_close(graph.compile(g, level=level).run(feeds), ref, rtol, atol)


def assert_close(ours, ref, rtol=1e-4, atol=1e-5):
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert o.shape == r.shape, (o.shape, r.shape)
        if r.dtype.kind in "fc":
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
        else:
            assert o.dtype == r.dtype and (o == r).all()


def light_model(name: str, seed: int = 0):
    """onnx/backend/test/data/light/light_<name>.onnx with each ConstantOfShape weight
    replaced by seeded random data fitting its role (He-normal conv/gemm weights, positive
    batch-norm scale and variance, small biases), and the pre-softmax value (where the
    model ends in a Softmax) as a second output. Returns (model, feeds)."""
    import os
    rng = np.random.default_rng(seed)
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")
    model = onnx.load(path)
    g = model.graph
    consumers = {}
    for node in g.node:
        for k, inp in enumerate(node.input):
            consumers.setdefault(inp, (node, k))
    shapes = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    nodes, inits = [], [i for i in g.initializer]
    for node in g.node:
        if node.op_type != "ConstantOfShape":
            nodes.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        data = _weight(rng, shape, *consumers[node.output[0]])
        inits.append(numpy_helper.from_array(data.astype(np.float32), node.output[0]))
    used = {n for node in nodes for n in node.input}
    inits = [i for i in inits if i.name in used]
    init_names = {i.name for i in inits}
    # initializers are not inputs (onnxruntime would let feeds override them)
    inputs = [i for i in g.input if i.name not in init_names and i.name in used]
    last = nodes[-1]
    outputs = list(g.output)
    if last.op_type == "Softmax":
        outputs.append(helper.make_tensor_value_info(last.input[0], TensorProto.FLOAT, None))
    new = helper.make_graph(nodes, g.name, inputs, outputs, inits)
    model = helper.make_model(new, opset_imports=model.opset_import)
    model.ir_version = 8
    data = inputs
    assert len(data) == 1
    shape = [d.dim_value for d in data[0].type.tensor_type.shape.dim]
    return model, {data[0].name: rng.standard_normal(shape).astype(np.float32)}


def _weight(rng, shape, consumer, k):
    """Data for a weight by the role its first consumer gives it."""
    op = consumer.op_type
    if op in ("Conv", "Gemm") and k == 1:
        trans_b = any(a.name == "transB" and a.i for a in consumer.attribute)
        fan_in = int(np.prod(shape[1:])) if op == "Conv" or trans_b else shape[0]
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    if (op == "BatchNormalization" and k in (1, 4)) or op == "Mul":
        return rng.uniform(0.5, 1.5, shape)
    return rng.standard_normal(shape) * 0.1
