"""RNN, GRU and LSTM against onnxruntime at O0 and O1 (O2 once): odd sizes (3 sequences of
4 steps, 7 inputs, 5 hidden units), each direction, bias, initial states, peepholes, clip,
linear_before_reset, input_forget, layout 1, activations with alpha/beta, omitted outputs;
then the refusals."""
import numpy as np
import pytest

import graph
from onnx_cases import Const, check_levels, make_model, rand

from onnx import TensorProto, numpy_helper  # noqa: E402  (onnx_cases skips without onnx)

STEPS, BATCH, SIZE, HIDDEN = 4, 3, 7, 5
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(op, attrs=None, bias=True, initial=False, peepholes=False, lens=None,
           outputs=None, steps=STEPS, weights_as_inputs=False, opset=22):
    """A one-node model and its feeds; `outputs` lists which of Y, Y_h (, Y_c) the node
    names (the others are ''), by default all."""
    attrs = {"hidden_size": HIDDEN, **(attrs or {})}
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gh = GATES[op] * HIDDEN
    layout = attrs.get("layout", 0)
    x = rand(BATCH, steps, SIZE) if layout else rand(steps, BATCH, SIZE)
    state = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    w, r = rand(dirs, gh, SIZE) * 0.5, rand(dirs, gh, HIDDEN) * 0.5
    wrap = (lambda a: a) if weights_as_inputs else Const
    ins = [x, wrap(w), wrap(r), Const(rand(dirs, 2 * gh)) if bias else None,
           None if lens is None else Const(np.asarray(lens, np.int32)),
           rand(*state) if initial else None]
    if op == "LSTM":
        ins += [rand(*state) if initial else None,
                Const(rand(dirs, 3 * HIDDEN)) if peepholes else None]
    n_out = 3 if op == "LSTM" else 2
    model, feeds = make_model(op, ins, attrs, opset, n_out=n_out)
    keep = outputs or ("Y", "Y_h", "Y_c")[:n_out]
    node = model.graph.node[0]
    for k, name in enumerate(("Y", "Y_h", "Y_c")[:n_out]):
        if name not in keep:
            node.output[k] = ""
    kept = [o for o in model.graph.output if o.name in node.output]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    return model, feeds


CASES = {
    # id: op, attributes, the _model options
    "rnn-initial-h": ("RNN", {}, {"initial": True}),
    "rnn-reverse-clip-no-bias": ("RNN", {"direction": "reverse", "clip": 0.7},
                                 {"bias": False}),
    "rnn-bidirectional-relu": ("RNN", {"direction": "bidirectional",
                                       "activations": ["Relu", "Tanh"]}, {}),
    "rnn-opset-7": ("RNN", {}, {"opset": 7}),
    "gru-initial-h": ("GRU", {}, {"initial": True}),
    "gru-reverse-linear-clip": ("GRU", {"direction": "reverse", "linear_before_reset": 1,
                                        "clip": 0.8}, {"initial": True}),
    "gru-bidirectional-linear-no-bias": ("GRU", {"direction": "bidirectional",
                                                 "linear_before_reset": 1}, {"bias": False}),
    # onnxruntime has no batch-first (layout 1) kernels: onnx's reference checks those
    "gru-bidirectional-layout-1": ("GRU", {"direction": "bidirectional", "layout": 1},
                                   {"initial": True}),
    "lstm-initial-peepholes": ("LSTM", {}, {"initial": True, "peepholes": True}),
    "lstm-reverse-clip-input-forget": ("LSTM", {"direction": "reverse", "clip": 0.6,
                                                "input_forget": 1}, {}),
    "lstm-bidirectional-layout-1": ("LSTM", {"direction": "bidirectional", "layout": 1},
                                    {"initial": True, "peepholes": True}),
    "lstm-activation-alpha-beta": (
        "LSTM", {"activations": ["HardSigmoid", "LeakyRelu", "ScaledTanh"],
                 "activation_alpha": [0.3, 0.2, 1.5], "activation_beta": [0.4, 0.7]}, {}),
    "gru-bidirectional-activations": (
        "GRU", {"direction": "bidirectional",
                "activations": ["Sigmoid", "Softsign", "HardSigmoid", "Elu"],
                "activation_alpha": [0.25, 0.9], "activation_beta": [0.45]}, {}),
}


@pytest.mark.parametrize("op,attrs,options", CASES.values(), ids=CASES.keys())
def test_recurrent_op_matches_onnxruntime(op, attrs, options):
    check_levels(*_model(op, attrs, **options), onnx_reference=attrs.get("layout") == 1)


@pytest.mark.parametrize("op,outputs", [("LSTM", ("Y_c",)), ("LSTM", ("Y", "Y_c")),
                                        ("GRU", ("Y",)), ("RNN", ("Y_h",))])
def test_omitted_outputs(op, outputs):
    model, feeds = _model(op, {"direction": "bidirectional"}, outputs=outputs)
    check_levels(model, feeds, levels=("O1",))


def test_weights_fed_as_inputs_and_full_sequence_lens_at_o2():
    model, feeds = _model("LSTM", {"direction": "bidirectional"}, initial=True,
                          lens=[STEPS] * BATCH, weights_as_inputs=True)
    check_levels(model, feeds, levels=("O2",))


def test_float64_matches_onnx_reference():
    # (onnxruntime's recurrent kernels take float32 only)
    model, feeds = _model("GRU", {"direction": "bidirectional"}, initial=True)
    for t in model.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64),
                                           t.name))
    for v in (*model.graph.input, *model.graph.output):
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    feeds = {k: a.astype(np.float64) for k, a in feeds.items()}
    check_levels(model, feeds, levels=("O1",), onnx_reference=True)


@pytest.mark.parametrize("op,attrs,options,message", [
    ("LSTM", {}, {"lens": [4, 2, 4]},
     r"input 'sequence_lens' must be a constant equal to the sequence length 4 for every "
     r"batch entry \(shorter sequences are not supported\), got \[4, 2, 4\]"),
    ("RNN", {}, {"steps": 257},
     r"a sequence of 257 steps is longer than supported \(256\): RNN is unrolled into the "
     r"graph step by step, which grows with the sequence length"),
    ("GRU", {"activations": ["Sigmoid", "Gelu"]}, {},
     r"activation 'Gelu' not supported \(supported: \['affine', 'elu', "),
    ("LSTM", {"activations": ["Sigmoid", "Tanh"]}, {},
     r"LSTM needs 3 activations per direction \(3 in all\), got \['Sigmoid', 'Tanh'\]"),
    ("RNN", {"activations": ["Affine"], "activation_alpha": [2.0]}, {},
     r"activation 'Affine' needs activation_alpha and activation_beta values"),
    ("GRU", {"direction": "sideways"}, {},
     r"attribute 'direction'.*value 'sideways' not supported \(supported: \['forward', "
     r"'reverse', 'bidirectional'\]\)"),
    ("RNN", {"hidden_size": 4}, {},
     r"input W must have shape \[1, 4, 7\] \(hidden_size 4, 1 direction\(s\)\), got "
     r"\[1, 5, 7\]"),
])
def test_unsupported_recurrent_op_is_refused_at_import(op, attrs, options, message):
    model, _ = _model(op, attrs, **options)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


def test_sequence_lens_fed_as_an_input_is_refused_naming_it():
    model, _ = _model("GRU", lens=[STEPS] * BATCH)
    init = model.graph.initializer
    lens = next(t for t in init if t.name == "in4")
    init.remove(lens)
    onnx = __import__("onnx")
    model.graph.input.append(onnx.helper.make_tensor_value_info(
        "in4", onnx.TensorProto.INT32, [BATCH]))
    with pytest.raises(graph.UnsupportedError,
                       match=r"input 'sequence_lens' must be a constant") as info:
        graph.from_onnx(model)
    assert info.value.constant_inputs == ["in4"]
