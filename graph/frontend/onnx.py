"""ONNX import: an onnx.ModelProto (or a path to one) -> a graph.Graph.

The `onnx` package parses the protobuf and is imported here only, inside functions, so the
graph layer works without it. Initializers become constants, dim_param names become te.vars
(one per name), and every node goes through the converter table in onnx_ops, which builds
the same nodes a person would with the builder; an op without a converter that ONNX
defines as a function is replaced by its body (onnx_function). Unsupported ops, attributes
and non-constant shape inputs are collected over the whole model and refused in one
UnsupportedError. Imports numpy, te's public API, graph's builder, errors and ir, the
converter tables and onnx_function.
"""
from __future__ import annotations

import numpy as np

import te

from ..builder import constant, input as graph_input
from ..errors import GraphError, UnsupportedError
from ..ir import Graph
from .onnx_function import DEFAULT_DOMAINS, absent_inputs, expand, has_function
from .onnx_ops import CONVERTERS, DTYPES, FLOAT16_ACCUMULATING, Refused

OPSETS = (6, 28)


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("graph.from_onnx needs the onnx package: pip install '.[onnx]' "
                          "(or pip install onnx)") from None
    return onnx


def from_onnx(model, shapes: dict | None = None, constants: dict | None = None) -> Graph:
    """Import `model` (a path or an onnx.ModelProto); `shapes` maps input names to shapes
    (ints, or strings / te.var for symbolic dims) and overrides the model's; `constants`
    maps input names to arrays that replace those inputs by constants (a shape fed as an
    input, which the ops here need to know: UnsupportedError.constant_inputs lists them)."""
    onnx = _import_onnx()
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        from google.protobuf.message import DecodeError  # onnx's own dependency
        try:
            model = onnx.load(model)
        except DecodeError as error:
            raise GraphError(f"from_onnx: '{model}' is not an ONNX model ({error})") from None
    if not isinstance(model, onnx.ModelProto):
        raise GraphError(f"from_onnx: model must be a path or an onnx.ModelProto, got "
                         f"{type(model).__name__}")
    opset = _opset(model)
    g = model.graph
    env = {init.name: constant(onnx.numpy_helper.to_array(init), name=init.name)
           for init in g.initializer}
    env.update(_bound(g, env, dict(constants or {})))
    inputs = _inputs(g, env, dict(shapes or {}))
    env.update((v.name, v) for v in inputs)
    problems = [p for k, node in enumerate(g.node)
                for p in _node_problems(onnx, node, _node_name(node, k), opset)]
    refused = {name for _, _, name, _ in problems}
    # ('' is an absent input or output, never a value)
    used = {n for node in g.node for n in node.input if n} | {o.name for o in g.output}
    needs: list = []
    for k, node in enumerate(g.node):
        name = _node_name(node, k)
        if name not in refused:
            _import_node(onnx, node, name, opset, env, problems, used, needs)
    if problems:
        raise _unsupported(problems, needs)
    outs = [env[o.name] for o in g.output]
    return Graph(outs, inputs=inputs, name=g.name or "onnx")


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            if not OPSETS[0] <= imp.version <= OPSETS[1]:
                raise UnsupportedError(f"from_onnx: the model's opset is {imp.version}; "
                                       f"supported opsets are {OPSETS[0]} to {OPSETS[1]}")
            return imp.version
    raise UnsupportedError("from_onnx: the model imports no default-domain (ai.onnx) opset")


def _bound(g, env: dict, constants: dict) -> dict:
    """The inputs named in from_onnx's constants=, as constants of the model's dtype."""
    declared = {i.name: i for i in g.input if i.name not in env}
    out = {}
    for name, data in constants.items():
        if name not in declared:
            raise GraphError(f"from_onnx: constants names unknown input {name!r}; the "
                             f"model's inputs are {list(declared)}")
        elem = declared[name].type.tensor_type.elem_type
        data = np.asarray(data)
        if DTYPES.get(elem) != data.dtype.name:
            raise GraphError(f"from_onnx: constants['{name}'] must have dtype "
                             f"{DTYPES.get(elem, elem)} like the model's input, got "
                             f"{data.dtype.name}")
        out[name] = constant(data, name=name)
    return out


def _inputs(g, env: dict, shapes: dict) -> list:
    names = [i.name for i in g.input if i.name not in env]
    unknown = [k for k in shapes if k not in names]
    if unknown:
        raise GraphError(f"from_onnx: shapes names unknown input {unknown[0]!r}; the model's "
                         f"inputs are {names}")
    symbols: dict = {}
    out = []
    for i in g.input:
        if i.name in env:  # an initializer listed as an input (IR < 4): a constant
            continue
        t = i.type.tensor_type
        if t.elem_type not in DTYPES:
            raise UnsupportedError(f"from_onnx: input '{i.name}' has element type "
                                   f"{t.elem_type}, which is not supported")
        dtype = DTYPES[t.elem_type]
        if i.name in shapes:
            dims = list(shapes[i.name])
            if t.HasField("shape") and len(dims) != len(t.shape.dim):
                raise GraphError(f"from_onnx: shapes['{i.name}'] must have "
                                 f"{len(t.shape.dim)} dims like the model's input, got "
                                 f"{tuple(dims)}")
        elif t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                    for d in t.shape.dim]
        else:
            dims = [None]
        # empty: refused, but listed as bindable, since a bound empty input can still
        # serve as data a converter reads (an empty axes list)
        if any(isinstance(d, int) and d == 0 for d in dims):
            raise UnsupportedError(f"from_onnx: input '{i.name}' has a zero-size dim "
                                   f"{tuple(dims)}; empty tensors are not supported",
                                   [("", "", i.name, "zero-size input")], [i.name])
        if any(d is None for d in dims):
            raise GraphError(f"from_onnx: input '{i.name}' has a dim with neither a size nor "
                             f"a name; give its shape with shapes={{'{i.name}': (...)}}")
        dims = [symbols.setdefault(d, te.var(d)) if isinstance(d, str) else d for d in dims]
        out.append(graph_input(i.name, tuple(dims), dtype))
    return out


def attributes(onnx, node) -> dict:
    """A node's attributes as Python values: strings decoded, tensors as numpy arrays."""
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def _node_name(node, k: int) -> str:
    return node.name or f"{node.op_type}#{k}"


def _node_problems(onnx, node, name: str, opset: int) -> list:
    """`node`'s unknown op or unknown attributes, as (op, attribute, node name, why); an op
    without a converter that ONNX defines as a function is checked body node by body node
    when it is expanded, and the values of known attributes when the node is converted."""
    conv = CONVERTERS.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
    if conv is None:
        if has_function(onnx, node, opset):
            return []
        return [(node.op_type, "", name, "op not supported")]
    return [(node.op_type, a.name, name, "attribute not supported")
            for a in node.attribute if a.name not in conv.attrs] + [
        (node.op_type, "", name, f"required input '{formal}' is absent")
        for formal in absent_inputs(onnx, node, opset)]


MAX_FUNCTION_DEPTH = 8  # a function whose body holds a function op, and so on


def _import_node(onnx, node, name: str, opset: int, env: dict, problems: list, used: set,
                 needs: list, depth: int = 0) -> None:
    """Convert `node`, or expand an op ONNX defines as a function (graph.frontend.
    onnx_function) and import its body nodes, named `name/<op>#<k>`, at the body's opset."""
    if node.domain in DEFAULT_DOMAINS and node.op_type in CONVERTERS:
        _convert(onnx, node, name, opset, env, problems, used, needs)
        return
    ins = [env.get(n) if n else None for n in node.input]
    if any(n and v is None for n, v in zip(node.input, ins)):
        return  # fed by a refused node: its problem is already listed
    if depth >= MAX_FUNCTION_DEPTH:
        problems.append((node.op_type, "", name, f"functions nested more than "
                                                 f"{MAX_FUNCTION_DEPTH} deep"))
        return
    try:
        body, body_opset = expand(onnx, node, opset, ins, prefix=_fresh_prefix(name, env, used))
    except Refused as r:
        problems.append((node.op_type, r.attribute, name, r.reason))
        return
    inner_used = used | {n for inner in body for n in inner.input if n}
    listed = len(problems)
    for k, inner in enumerate(body):
        inner_name = f"{name}/{_node_name(inner, k)}"
        inner_problems = _node_problems(onnx, inner, inner_name, body_opset)
        if inner_problems:
            problems.extend(inner_problems)
            continue
        _import_node(onnx, inner, inner_name, body_opset, env, problems, inner_used, needs,
                     depth + 1)
    if len(problems) == listed:  # every body node imported, yet an output may be missing
        problems.extend((node.op_type, "", name, f"output '{out}' is not supported")
                        for out in node.output if out in used and out not in env)


def _fresh_prefix(name: str, env: dict, used: set) -> str:
    """'<node name>/' for the names of a body's own values, or '<node name>~<k>/' where a
    model value already has a name that starts so (a body value must never take the
    place of one)."""
    prefix, k = f"{name}/", 0
    while any(n.startswith(prefix) for n in (*env, *used)):
        k += 1
        prefix = f"{name}~{k}/"
    return prefix


def _convert(onnx, node, name: str, opset: int, env: dict, problems: list, used: set,
             needs: list) -> None:
    ins = [env.get(n) if n else None for n in node.input]
    if any(n and v is None for n, v in zip(node.input, ins)):
        return  # fed by a refused node: its problem is already listed
    if node.op_type in FLOAT16_ACCUMULATING and any(
            v is not None and v.dtype == "float16" for v in ins):
        problems.append((node.op_type, "", name, "float16 inputs are not supported (its "
                         "float16 accumulation rounds differently from ONNX's reference)"))
        return
    try:
        outs = CONVERTERS[node.op_type].fn(ins, attributes(onnx, node), opset,
                                           list(node.output))
    except Refused as r:
        problems.append((node.op_type, r.attribute, name, r.reason))
        needs.extend(n for n in r.needs if n not in needs)
        return
    except UnsupportedError as e:  # the builder's refusal (an empty tensor)
        problems.append((node.op_type, "", name, str(e)))
        return
    except GraphError as e:
        empty = [n for n, v in zip(node.input, ins) if v is not None and any(
            isinstance(d, int) and d == 0 for d in v.shape)]
        if empty:  # what the builder rejects about an empty input: refused as empty
            problems.append((node.op_type, "", name, f"input '{empty[0]}' is a zero-size "
                                                     f"(empty) tensor ({e})"))
            return
        raise GraphError(f"from_onnx: node '{name}' ({node.op_type}): {e}") from None
    for out_name, v in zip(node.output, outs):
        env[out_name] = v
    for out_name in node.output[len(outs):]:
        if out_name in used:
            problems.append((node.op_type, "", name, f"output '{out_name}' is not supported"))


def _unsupported(problems: list, needs: list) -> UnsupportedError:
    lines = [f"  {op}{', attribute ' + repr(attr) if attr else ''}, node '{name}': {why}"
             for op, attr, name, why in problems]
    return UnsupportedError(f"from_onnx: the model uses {len(problems)} unsupported "
                            f"op(s) or attribute(s):\n" + "\n".join(lines), problems, needs)
