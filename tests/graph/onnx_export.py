"""A small graph -> ONNX exporter for the ops the random graphs use (tests/graph/
random_graphs.py), so that onnxruntime can run the very graph that graph.compile runs.

to_onnx(g) maps each node to one ONNX node (opset 20: reduce axes, slice bounds, shapes
and split sizes as int64 initializers), constants to initializers and keeps every value's
name. An op missing from the table raises, naming the op: the test never silently drops a
node. Imports numpy and onnx.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper

OPSET = 20
ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
        "int64": TensorProto.INT64, "int32": TensorProto.INT32, "bool": TensorProto.BOOL}

# graph op -> ONNX op type, for ops whose attributes (if any) carry over by the table below
SIMPLE = {
    "relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "abs": "Abs", "negative": "Neg",
    "erf": "Erf", "softsign": "Softsign", "softplus": "Softplus", "exp": "Exp", "log": "Log",
    "sqrt": "Sqrt", "reciprocal": "Reciprocal", "identity": "Identity",
    "hard_swish": "HardSwish", "add": "Add", "subtract": "Sub", "multiply": "Mul",
    "divide": "Div", "power": "Pow", "maximum": "Max", "minimum": "Min",
    "greater": "Greater", "less": "Less", "equal": "Equal", "prelu": "PRelu",
    "where": "Where", "matmul": "MatMul", "global_avg_pool2d": "GlobalAveragePool",
    "elu": "Elu", "leaky_relu": "LeakyRelu", "selu": "Selu", "hard_sigmoid": "HardSigmoid",
    "gelu": "Gelu", "softmax": "Softmax", "log_softmax": "LogSoftmax",
    "concatenate": "Concat", "batch_norm": "BatchNormalization", "transpose": "Transpose",
}
# graph attribute -> ONNX attribute, for the SIMPLE ops that have attributes
RENAMED = {"alpha": "alpha", "beta": "beta", "gamma": "gamma", "approximate": "approximate",
           "axis": "axis", "epsilon": "epsilon", "axes": "perm"}
REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
          "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd", "reduce_l1": "ReduceL1",
          "reduce_l2": "ReduceL2", "reduce_sum_square": "ReduceSumSquare"}


class _Exporter:
    def __init__(self):
        self.nodes: list = []
        self.inits: list = []

    def ints(self, name: str, values) -> str:
        """An int64 initializer (a shape, axes or slice bound input); returns its name."""
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def node(self, op_type: str, ins, outs, name: str, **attrs):
        self.nodes.append(helper.make_node(op_type, list(ins), list(outs), name=name,
                                           **attrs))

    def convert(self, n):
        ins, outs, a = [v.name for v in n.inputs], [v.name for v in n.outputs], n.attr
        if n.op in SIMPLE:
            kw = {RENAMED[k]: list(v) if isinstance(v, tuple) else v for k, v in a.items()}
            return self.node(SIMPLE[n.op], ins, outs, n.name, **kw)
        if n.op in REDUCE:
            axes = self.ints(f"{n.name}/axes", a["axes"])
            return self.node(REDUCE[n.op], ins + [axes], outs, n.name,
                             keepdims=a["keepdims"])
        convert = getattr(self, f"_{n.op}", None)
        if convert is None:
            raise NotImplementedError(f"onnx_export: no ONNX form for op '{n.op}' (node "
                                      f"'{n.name}'); add it to tests/graph/onnx_export.py")
        return convert(n, ins, outs, a)

    def _cast(self, n, ins, outs, a):
        self.node("Cast", ins, outs, n.name, to=ELEM[a["dtype"]])

    def _reshape(self, n, ins, outs, a):
        self.node("Reshape", ins + [self.ints(f"{n.name}/shape", a["newshape"])], outs, n.name)

    def _expand(self, n, ins, outs, a):
        self.node("Expand", ins + [self.ints(f"{n.name}/shape", a["shape"])], outs, n.name)

    def _slice(self, n, ins, outs, a):
        bounds = [self.ints(f"{n.name}/{k}", a[k]) for k in ("starts", "ends", "axes", "steps")]
        self.node("Slice", ins + bounds, outs, n.name)

    def _split(self, n, ins, outs, a):
        self.node("Split", ins + [self.ints(f"{n.name}/sizes", a["sizes"])], outs, n.name,
                  axis=a["axis"])

    def _clip(self, n, ins, outs, a):
        bounds = []
        for k in ("min", "max"):
            if a[k] is None:
                bounds.append("")
                continue
            self.inits.append(numpy_helper.from_array(np.asarray(a[k], np.float32),
                                                      f"{n.name}/{k}"))
            bounds.append(f"{n.name}/{k}")
        self.node("Clip", ins + bounds, outs, n.name)

    def _pad(self, n, ins, outs, a):
        pads = self.ints(f"{n.name}/pads", a["pad_before"] + a["pad_after"])
        value = f"{n.name}/value"
        self.inits.append(numpy_helper.from_array(np.asarray(a["value"], np.float32), value))
        self.node("Pad", ins + [pads, value], outs, n.name, mode=a.get("mode", "constant"))

    def _layer_norm(self, n, ins, outs, a):
        self.node("LayerNormalization", ins, outs, n.name, axis=a["axis"][0],
                  epsilon=a["epsilon"])

    def _gemm(self, n, ins, outs, a):
        self.node("Gemm", ins, outs, n.name, alpha=a["alpha"], beta=a["beta"],
                  transA=a["trans_a"], transB=a["trans_b"])

    def _conv2d(self, n, ins, outs, a):
        kernel = list(n.inputs[1].shape[2:])
        self.node("Conv", ins, outs, n.name, kernel_shape=kernel, strides=list(a["strides"]),
                  pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"])

    def _max_pool2d(self, n, ins, outs, a):
        self.node("MaxPool", ins, outs, n.name, kernel_shape=list(a["kernel"]),
                  strides=list(a["strides"]), pads=list(a["padding"]), **_dilations(a))

    def _avg_pool2d(self, n, ins, outs, a):
        self.node("AveragePool", ins, outs, n.name, kernel_shape=list(a["kernel"]),
                  strides=list(a["strides"]), pads=list(a["padding"]),
                  count_include_pad=int(a["count_include_pad"]), **_dilations(a))


def _dilations(a) -> dict:
    """A pool's dilations attribute, where its node has one (only when it is not 1)."""
    return {"dilations": list(a["dilation"])} if "dilation" in a else {}


def _info(v):
    return helper.make_tensor_value_info(v.name, ELEM[v.dtype], list(v.shape))


def to_onnx(g):
    """g (static shapes) as a checked onnx.ModelProto with the same value names."""
    ex = _Exporter()
    for c in g.constants:
        ex.inits.append(numpy_helper.from_array(c.data, c.name))
    for n in g.nodes:
        ex.convert(n)
    body = helper.make_graph(ex.nodes, g.name, [_info(v) for v in g.inputs],
                             [_info(v) for v in g.outputs], ex.inits)
    model = helper.make_model(body, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    checker.check_model(model, full_check=True)
    return model
