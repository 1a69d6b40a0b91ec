"""The ONNX converter table: ONNX op type -> (the attributes it understands, a function
building the op from graph builder calls), for opsets 7 to 21.

A converter takes (inputs as graph Values or None, attributes as Python values, opset,
output names) and returns the output Values; it may return fewer than the node has (a
Dropout's mask): the importer refuses the model only if one of those is used. Where
opsets differ (an attribute that became an input, a changed default) the converter reads
whichever the model has. A value this layer cannot take (a shape input that is not a
constant, a mode it does not implement) raises Refused, collected by the importer.
Imports numpy and graph's builder modules only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import builder, nn, transform
from ..builder import apply


# ONNX TensorProto element types -> dtype names (the ones te has)
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
          7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class Refused(Exception):
    """This node cannot be imported: `attribute` ('' for the op) and why."""

    def __init__(self, attribute: str, reason: str):
        super().__init__(reason)
        self.attribute = attribute
        self.reason = reason


@dataclass(frozen=True)
class Converter:
    fn: Callable
    attrs: frozenset


def const(v, what: str):
    """The numpy data of a Value that must be a constant (a shape, axes, pads input)."""
    if v is None or not v.is_constant:
        raise Refused(what, f"input '{what}' must be a constant (an initializer or a "
                            f"Constant node)")
    return v.data


def _only(attrs: dict, name: str, allowed, default):
    value = attrs.get(name, default)
    if value not in allowed:
        raise Refused(name, f"value {value!r} not supported (supported: {list(allowed)})")
    return value


# ---- elementwise ---------------------------------------------------------------------

def _unary(op: str, onnx_attrs=()):
    """An ONNX unary op whose attributes map by lower-casing onto the table op's."""
    def fn(ins, attrs, opset, outs):
        kw = {k.lower(): float(attrs[k]) for k in onnx_attrs if k in attrs}
        return [apply(op, [ins[0]], kw, outs[0])]
    return Converter(fn, frozenset(onnx_attrs))


def _variadic(op: str, mean: bool = False):
    """Sum/Max/Min/Mean of any number of inputs (Add/Mul/... are the 2-input case): a
    chain of binary nodes, the last one named as the ONNX output."""
    def fn(ins, attrs, opset, outs):
        acc = ins[0]
        last = len(ins) - 1 if not mean else len(ins)
        for k, v in enumerate(ins[1:], start=1):
            acc = apply(op, [acc, v], {}, outs[0] if k == last else f"{outs[0]}/{k}")
        if mean:
            acc = apply("multiply", [acc, 1.0 / len(ins)], {}, outs[0])
        elif len(ins) == 1:
            acc = apply("identity", [acc], {}, outs[0])
        return [acc]
    return Converter(fn, frozenset())


def _gelu(ins, attrs, opset, outs):
    approx = _only(attrs, "approximate", ("none", "tanh"), "none")
    return [apply("gelu", [ins[0]], {"approximate": approx}, outs[0])]


def _clip(ins, attrs, opset, outs):
    if opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo = None if len(ins) < 2 or ins[1] is None else float(const(ins[1], "min"))
        hi = None if len(ins) < 3 or ins[2] is None else float(const(ins[2], "max"))
    return [transform.clip(ins[0], lo, hi, name=outs[0])]


def _cast(ins, attrs, opset, outs):
    if attrs["to"] not in DTYPES:
        raise Refused("to", f"element type {attrs['to']} not supported")
    return [transform.cast(ins[0], DTYPES[attrs["to"]], name=outs[0])]


def _dropout(ins, attrs, opset, outs):
    return [apply("identity", [ins[0]], {}, outs[0])]


# ---- nn --------------------------------------------------------------------------------

def _spatial(x, attrs, who: str, kernel) -> tuple:
    """(strides, dilations, pads as (top, left, bottom, right)) of a 2-d window op, with
    auto_pad resolved from the (constant) input size."""
    if len(x.shape) != 4 or len(kernel) != 2:
        raise Refused("kernel_shape", f"only 2-d {who} (4-d NCHW input) is supported, got "
                                      f"a {len(x.shape)}-d input")
    strides = tuple(attrs.get("strides", (1, 1)))
    dil = tuple(attrs.get("dilations", (1, 1)))
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        p = tuple(attrs.get("pads", (0, 0, 0, 0))) if auto == "NOTSET" else (0, 0, 0, 0)
        return strides, dil, (p[0], p[1], p[2], p[3])
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Refused("auto_pad", f"value {auto!r} not supported")
    pads = []
    for size, k, s, d in zip(x.shape[2:], kernel, strides, dil):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return strides, dil, (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def _conv(ins, attrs, opset, outs):
    w = ins[1]
    kernel = tuple(attrs.get("kernel_shape", w.shape[2:]))
    strides, dil, pads = _spatial(ins[0], attrs, "Conv", kernel)
    bias = ins[2] if len(ins) > 2 else None
    return [nn.conv2d(ins[0], w, bias, strides, pads, dil, int(attrs.get("group", 1)),
                      name=outs[0])]


def _ceil_pads(x, kernel, strides, pads) -> tuple:
    """Extra end padding that makes a floor-mode window count equal ceil mode's, for
    windows that start inside the (begin-padded) input."""
    extra = []
    for size, k, s, b, e in zip(x.shape[2:], kernel, strides, pads[:2], pads[2:]):
        span = size + b + e - k
        out = -(-span // s) + 1
        if (out - 1) * s >= size + b:  # the last window would start in the end padding
            out -= 1
        extra.append(max(0, (out - 1) * s + k - (size + b + e)))
    return (pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1])


def _pool(kind: str):
    def fn(ins, attrs, opset, outs):
        kernel = tuple(attrs["kernel_shape"])
        if any(d != 1 for d in attrs.get("dilations", (1, 1))):
            raise Refused("dilations", "pooling with dilation is not supported")
        if attrs.get("storage_order", 0):
            raise Refused("storage_order", "only row-major storage_order=0 is supported")
        strides, _, pads = _spatial(ins[0], attrs, kind, kernel)
        include = bool(attrs.get("count_include_pad", 0))
        if attrs.get("ceil_mode", 0):
            if include:
                raise Refused("ceil_mode", "ceil_mode with count_include_pad is not supported")
            pads = _ceil_pads(ins[0], kernel, strides, pads)
        if kind == "MaxPool":
            return [nn.max_pool2d(ins[0], kernel, strides, pads, name=outs[0])]
        return [nn.avg_pool2d(ins[0], kernel, strides, pads, include, name=outs[0])]
    return fn


def _batch_norm(ins, attrs, opset, outs):
    if attrs.get("training_mode", 0):
        raise Refused("training_mode", "only inference is supported")
    if opset < 9 and not attrs.get("spatial", 1):
        raise Refused("spatial", "spatial=0 is not supported")
    return [nn.batch_norm(*ins[:5], epsilon=attrs.get("epsilon", 1e-5), name=outs[0])]


def _lrn(ins, attrs, opset, outs):
    return [nn.lrn(ins[0], int(attrs["size"]), attrs.get("alpha", 1e-4),
                   attrs.get("beta", 0.75), attrs.get("bias", 1.0), name=outs[0])]


def _softmax(fn, op: str):
    def convert(ins, attrs, opset, outs):
        x = ins[0]
        ndim = len(x.shape)
        axis = attrs.get("axis", 1 if opset < 13 else -1) % ndim
        if opset >= 13 or axis == ndim - 1:
            return [fn(x, axis, name=outs[0])]
        # before opset 13: along the 2-d view (prod(shape[:axis]), prod(shape[axis:]))
        flat = transform.flatten(x, axis, name=f"{outs[0]}/flat")
        sm = fn(flat, -1, name=f"{outs[0]}/{op}")
        return [transform.reshape(sm, x.shape, name=outs[0])]
    return Converter(convert, frozenset(("axis",)))


def _gemm(ins, attrs, opset, outs):
    c = ins[2] if len(ins) > 2 else None
    return [nn.gemm(ins[0], ins[1], c, attrs.get("alpha", 1.0), attrs.get("beta", 1.0),
                    attrs.get("transA", 0), attrs.get("transB", 0), name=outs[0])]


def _layer_norm(ins, attrs, opset, outs):
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else builder.constant(
        np.zeros(ins[1].shape, ins[1].dtype), name=f"{outs[0]}/bias")
    return [nn.layer_norm(ins[0], ins[1], bias, attrs.get("axis", -1),
                          attrs.get("epsilon", 1e-5), name=outs[0])]


# ---- layout --------------------------------------------------------------------------

def _reshape(ins, attrs, opset, outs):
    x = ins[0]
    shape = [int(d) for d in (attrs["shape"] if opset < 5 else const(ins[1], "shape"))]
    if not attrs.get("allowzero", 0):  # 0 copies the input's dim
        shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    return [transform.reshape(x, shape, name=outs[0])]


def _axes(ins, attrs, opset, new_opset: int, name: str = "axes"):
    """Axes given as an attribute before `new_opset`, as an optional input from it on."""
    if opset < new_opset:
        return attrs.get(name)
    if len(ins) < 2 or ins[1] is None:
        return None
    return [int(a) for a in const(ins[1], name)]


def _squeeze(ins, attrs, opset, outs):
    return [transform.squeeze(ins[0], _axes(ins, attrs, opset, 13), name=outs[0])]


def _unsqueeze(ins, attrs, opset, outs):
    axes = _axes(ins, attrs, opset, 13)
    if axes is None:
        raise Refused("axes", "Unsqueeze needs axes")
    return [transform.unsqueeze(ins[0], list(axes), name=outs[0])]


def _flatten(ins, attrs, opset, outs):
    return [transform.flatten(ins[0], attrs.get("axis", 1), name=outs[0])]


def _transpose(ins, attrs, opset, outs):
    return [transform.transpose(ins[0], attrs.get("perm"), name=outs[0])]


def _concat(ins, attrs, opset, outs):
    return [transform.concatenate(ins, attrs["axis"], name=outs[0])]


def _pad(ins, attrs, opset, outs):
    _only(attrs, "mode", ("constant",), "constant")
    x = ins[0]
    n = len(x.shape)
    if opset < 11:
        pads, value = attrs["pads"], attrs.get("value", 0.0)
    else:
        pads = [int(p) for p in const(ins[1], "pads")]
        value = float(const(ins[2], "constant_value")) if len(ins) > 2 and ins[2] else 0.0
        if len(ins) > 3 and ins[3] is not None:
            axes = [int(a) % n for a in const(ins[3], "axes")]
            full = [0] * (2 * n)
            for k, a in enumerate(axes):
                full[a], full[n + a] = pads[k], pads[len(axes) + k]
            pads = full
    if min(pads) < 0:
        raise Refused("pads", "negative pads (cropping) are not supported")
    return [transform.pad(x, pads[:n], pads[n:], value, name=outs[0])]


def _slice(ins, attrs, opset, outs):
    x = ins[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = const(ins[1], "starts"), const(ins[2], "ends")
        axes = const(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = const(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    big = np.iinfo(np.int64).max // 2  # ONNX writes "to the end" as INT64_MAX
    clamp = [int(max(min(v, big), -big)) for v in ends]
    return [transform.slice(x, [int(v) for v in starts], clamp, axes, steps, name=outs[0])]


def _split(ins, attrs, opset, outs):
    x = ins[0]
    axis = attrs.get("axis", 0) % len(x.shape)
    sizes = attrs.get("split") if opset < 13 else (
        [int(s) for s in const(ins[1], "split")] if len(ins) > 1 and ins[1] is not None
        else None)
    if sizes is None:
        parts = attrs.get("num_outputs", len(outs))
        size = -(-x.shape[axis] // parts)
        sizes = [min(size, x.shape[axis] - k * size) for k in range(parts)]
    return list(transform.split(x, sizes, axis, name=outs[0], output_names=outs))


def _expand(ins, attrs, opset, outs):
    return [transform.expand(ins[0], [int(d) for d in const(ins[1], "shape")], name=outs[0])]


def _gather(ins, attrs, opset, outs):
    if len(ins[1].shape) == 0:
        raise Refused("indices", "0-d (scalar) indices are not supported")
    return [transform.take(ins[0], ins[1], attrs.get("axis", 0), name=outs[0])]


def _constant(ins, attrs, opset, outs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            data = np.asarray(attrs[key], dtype=np.float32 if "float" in key else
                              np.int64 if "int" in key else None)
            return [builder.constant(data, name=outs[0])]
    raise Refused("value", "Constant needs value, value_float(s) or value_int(s)")


def _constant_of_shape(ins, attrs, opset, outs):
    shape = [int(d) for d in const(ins[0], "input")]
    value = attrs.get("value", np.zeros(1, np.float32))
    return [builder.constant(np.full(shape, value.reshape(-1)[0], value.dtype), name=outs[0])]


def _shape(ins, attrs, opset, outs):
    dims = ins[0].shape[attrs.get("start", 0):attrs.get("end", len(ins[0].shape))]
    if any(not isinstance(d, int) for d in dims):
        raise Refused("", "Shape of a symbolic dim is not supported")
    return [builder.constant(np.asarray(dims, np.int64), name=outs[0])]


def _reduce(op: str, new_opset: int):
    def fn(ins, attrs, opset, outs):
        x = ins[0]
        axes = _axes(ins, attrs, opset, new_opset)
        if axes is None or len(axes) == 0:
            if attrs.get("noop_with_empty_axes", 0):
                return [apply("identity", [x], {}, outs[0])]
            axes = None
        keep = bool(attrs.get("keepdims", 1))
        return [builder.REDUCE_FUNCTIONS[op](x, axes, keep, name=outs[0])]
    return Converter(fn, frozenset(("axes", "keepdims", "noop_with_empty_axes")))


def _arg(op: str):
    def fn(ins, attrs, opset, outs):
        if attrs.get("select_last_index", 0):
            raise Refused("select_last_index", "only the first index (0) is supported")
        axis = attrs.get("axis", 0) % len(ins[0].shape)
        return [apply(op, [ins[0]], {"axis": axis, "keepdims": int(attrs.get("keepdims", 1))},
                      outs[0])]
    return Converter(fn, frozenset(("axis", "keepdims", "select_last_index")))


def _c(fn, *attrs) -> Converter:
    return Converter(fn, frozenset(attrs))


_WINDOW = ("auto_pad", "kernel_shape", "pads", "strides", "dilations")
CONVERTERS = {
    **{onnx_op: _unary(op) for onnx_op, op in (
        ("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Exp", "exp"),
        ("Log", "log"), ("Sqrt", "sqrt"), ("Erf", "erf"), ("Floor", "floor"),
        ("Ceil", "ceil"), ("Abs", "abs"), ("Neg", "negative"), ("Reciprocal", "reciprocal"),
        ("Sign", "sign"), ("Softplus", "softplus"), ("Softsign", "softsign"),
        ("HardSwish", "hard_swish"), ("Identity", "identity"), ("Not", "logical_not"))},
    "Elu": _unary("elu", ("alpha",)),
    "LeakyRelu": _unary("leaky_relu", ("alpha",)),
    "Selu": _unary("selu", ("alpha", "gamma")),
    "HardSigmoid": _unary("hard_sigmoid", ("alpha", "beta")),
    "Gelu": _c(_gelu, "approximate"),
    "Clip": _c(_clip, "min", "max"),
    "Cast": _c(_cast, "to", "saturate"),
    "Dropout": _c(_dropout, "ratio", "seed", "is_test"),
    **{onnx_op: _variadic(op) for onnx_op, op in (
        ("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply"), ("Div", "divide"),
        ("Pow", "power"), ("Equal", "equal"), ("Less", "less"), ("Greater", "greater"),
        ("And", "logical_and"), ("Or", "logical_or"), ("Sum", "add"), ("Max", "maximum"),
        ("Min", "minimum"))},
    "Mean": _variadic("add", mean=True),
    "PRelu": _variadic("prelu"),
    "Conv": _c(_conv, "group", *_WINDOW),
    "MaxPool": _c(_pool("MaxPool"), "ceil_mode", "storage_order", *_WINDOW),
    "AveragePool": _c(_pool("AveragePool"), "ceil_mode", "count_include_pad", *_WINDOW),
    "GlobalAveragePool": _c(lambda ins, a, o, outs: [nn.global_avg_pool2d(ins[0], outs[0])]),
    "GlobalMaxPool": _c(lambda ins, a, o, outs: [nn.global_max_pool2d(ins[0], outs[0])]),
    "BatchNormalization": _c(_batch_norm, "epsilon", "momentum", "spatial", "training_mode",
                             "is_test"),
    "LRN": _c(_lrn, "alpha", "beta", "bias", "size"),
    "Softmax": _softmax(nn.softmax, "softmax"),
    "LogSoftmax": _softmax(nn.log_softmax, "log_softmax"),
    "InstanceNormalization": _c(lambda ins, a, o, outs: [nn.instance_norm(
        *ins[:3], epsilon=a.get("epsilon", 1e-5), name=outs[0])], "epsilon"),
    "Gather": _c(_gather, "axis"),
    "Tile": _c(lambda ins, a, o, outs: [transform.tile(
        ins[0], [int(r) for r in const(ins[1], "repeats")], name=outs[0])]),
    "Where": _c(lambda ins, a, o, outs: [transform.where(*ins[:3], name=outs[0])]),
    "Gemm": _c(_gemm, "alpha", "beta", "transA", "transB"),
    "MatMul": _c(lambda ins, a, o, outs: [nn.matmul(ins[0], ins[1], name=outs[0])]),
    "LayerNormalization": _c(_layer_norm, "axis", "epsilon", "stash_type"),
    "Reshape": _c(_reshape, "allowzero"),
    "Flatten": _c(_flatten, "axis"),
    "Squeeze": _c(_squeeze, "axes"),
    "Unsqueeze": _c(_unsqueeze, "axes"),
    "Transpose": _c(_transpose, "perm"),
    "Concat": _c(_concat, "axis"),
    "Pad": _c(_pad, "mode", "pads", "value"),
    "Slice": _c(_slice, "starts", "ends", "axes"),
    "Split": _c(_split, "axis", "split", "num_outputs"),
    "Expand": _c(_expand),
    "Constant": _c(_constant, "value", "value_float", "value_floats", "value_int",
                   "value_ints"),
    "ConstantOfShape": _c(_constant_of_shape, "value"),
    "Shape": _c(_shape, "start", "end"),
    **{onnx_op: _reduce(op, 18 if onnx_op != "ReduceSum" else 13) for onnx_op, op in (
        ("ReduceSum", "reduce_sum"), ("ReduceMean", "reduce_mean"), ("ReduceMax", "reduce_max"),
        ("ReduceMin", "reduce_min"), ("ReduceProd", "reduce_prod"), ("ReduceL1", "reduce_l1"),
        ("ReduceL2", "reduce_l2"), ("ReduceSumSquare", "reduce_sum_square"))},
    "ArgMax": _arg("argmax"),
    "ArgMin": _arg("argmin"),
}
