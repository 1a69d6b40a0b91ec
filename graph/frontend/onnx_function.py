"""ONNX ops that have no converter of their own but that ONNX defines as a function of other
ops (Attention, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, CenterCropPad, SwiGLU,
DynamicQuantizeLinear, ...): the node is replaced by the body ONNX's schema gives for the
model's opset, and each body node is imported like any other node.

This is how onnxruntime runs a function op that no execution provider claims. The body is
the op's definition, so it gives the specified answer; a body node that is itself not
supported is refused like any other node, named after the node it came from
(`attention_1/Softmax#40`). Context-dependent bodies (those that depend on the inputs'
types or ranks, as Attention's does) are built from the types of the values the node reads.

Imports graph.frontend.onnx_base only; `onnx` is passed in by the importer.
"""
from __future__ import annotations

from .onnx_base import DTYPES, Refused

_ELEM_TYPES = {dtype: elem for elem, dtype in DTYPES.items()}

DEFAULT_DOMAINS = ("", "ai.onnx")


def _schema(onnx, op_type: str, opset: int):
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _version(versions, opset: int):
    """The function version ONNX uses for `opset`: the newest one not after it."""
    usable = [v for v in versions if v <= opset]
    return max(usable) if usable else None


def has_function(onnx, node, opset: int) -> bool:
    """Whether ONNX defines `node`'s op, at `opset`, as a function of other ops."""
    if node.domain not in DEFAULT_DOMAINS:
        return False
    schema = _schema(onnx, node.op_type, opset)
    return schema is not None and (
        _version(schema.function_opset_versions, opset) is not None
        or _version(schema.context_dependent_function_opset_versions, opset) is not None)


def absent_inputs(onnx, node, opset: int) -> list:
    """The names of `node`'s required inputs that it leaves out (''): ONNX's checker
    refuses such a model node, but a function body may hold one (LinearAttention's reshapes
    an absent decay unless update_rule says there is none)."""
    schema = _schema(onnx, node.op_type, opset) if node.domain in DEFAULT_DOMAINS else None
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    if schema is None:
        return []
    return [formal.name for k, formal in enumerate(schema.inputs)
            if formal.option == single and (k >= len(node.input) or not node.input[k])]


def _type_proto(onnx, value):
    """A value's type as ONNX sees it: element type and dims (a symbolic dim by its name);
    an absent optional input is an empty type, as ONNX's own expansion passes it."""
    if value is None:
        return onnx.TypeProto()
    dims = [d if isinstance(d, int) else str(d) for d in value.shape]
    return onnx.helper.make_tensor_type_proto(_ELEM_TYPES[value.dtype], dims)


def _body(onnx, node, opset: int, ins: list):
    """ONNX's FunctionProto for `node` at `opset` (context-dependent ones built from the
    types of `ins`), and the node with the schema's default attributes filled in."""
    schema = _schema(onnx, node.op_type, opset)
    caller = onnx.NodeProto()
    caller.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value.name:
            caller.attribute.append(attr.default_value)
    function = onnx.FunctionProto()
    version = _version(schema.function_opset_versions, opset)
    if version is not None:
        function.ParseFromString(schema.get_function_with_opset_version(version))
    else:
        version = _version(schema.context_dependent_function_opset_versions, opset)
        types = [_type_proto(onnx, v).SerializeToString() for v in ins]
        try:
            function.ParseFromString(schema.get_context_dependent_function_with_opset_version(
                version, caller.SerializeToString(), types))
        except Exception as e:  # noqa: BLE001  (onnx's C++ builder raises untyped errors)
            raise Refused("", f"ONNX's definition of {node.op_type} fails on these inputs "
                              f"and attributes ({e})") from None
    if not function.node:
        # what a context-dependent builder gives for inputs outside the op's definition
        raise Refused("", f"ONNX's definition of {node.op_type} gives no body for these "
                          f"inputs and attributes (see the op's specification)")
    return function, caller


def body_opset(function, opset: int) -> int:
    """The default-domain opset the body's nodes are written against."""
    for imp in function.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            return imp.version
    return opset


def expand(onnx, node, opset: int, ins: list, prefix: str):
    """`node` as ONNX's body for it: (body nodes with their edges renamed, the body's
    opset). The function's formal inputs and outputs become the node's own names (an
    absent optional one ''), every other name gets `prefix` so that two expansions never
    share a value, and attributes that refer to the caller's (ref_attr_name) take its
    values, or are dropped where the caller has none, as ONNX's inliner does. Refused
    where ONNX builds no body for the node's inputs and attributes."""
    function, caller = _body(onnx, node, opset, ins)
    names = {formal: (node.input[i] if i < len(node.input) else "")
             for i, formal in enumerate(function.input)}
    names.update((formal, node.output[i]) for i, formal in enumerate(function.output)
                 if i < len(node.output) and node.output[i])
    given = {a.name: a for a in caller.attribute}

    def rename(name: str) -> str:
        return names.get(name, prefix + name if name else "")

    nodes = []
    for inner in function.node:
        out = onnx.NodeProto()
        out.CopyFrom(inner)
        del out.input[:], out.output[:], out.attribute[:]
        out.input.extend(rename(n) for n in inner.input)
        out.output.extend(rename(n) for n in inner.output)
        for attr in inner.attribute:
            if attr.ref_attr_name:
                if attr.ref_attr_name in given:
                    bound = onnx.AttributeProto()
                    bound.CopyFrom(given[attr.ref_attr_name])
                    bound.name = attr.name
                    out.attribute.append(bound)
            else:
                out.attribute.append(attr)
        nodes.append(out)
    return nodes, body_opset(function, opset)
