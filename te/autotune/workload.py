"""Workload identity: a structural hash of a compute graph (definition, shapes, dtypes).

Takes output tensors/ops or a template name with its arguments; gives a stable text key that
records are filed under and the package version that is part of it. Two graphs written
with different variable objects but the same structure hash the same. Imports te.compute
and te.schedule only.
"""
from __future__ import annotations

import hashlib
import json
import os

from ..compute import expr as E
from ..compute.tensor import ComputeOp, PlaceholderOp, Tensor
from ..errors import ArgumentError
from ..schedule.schedule import topo_order


def output_ops(outputs) -> list:
    items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    ops = []
    for o in items:
        op = o.op if isinstance(o, Tensor) else o
        if not isinstance(op, (ComputeOp, PlaceholderOp)):
            raise ArgumentError(f"te.autotune: outputs must be tensors or operations, got "
                                f"{type(o).__name__}")
        if op not in ops:
            ops.append(op)
    return ops


def _expr(e, names: dict, ops: dict):
    if isinstance(e, E.Var):
        return ["var", names.setdefault(e, f"v{len(names)}"), e.dtype]
    if isinstance(e, E.Const):
        return ["const", repr(e.value), e.dtype]
    kids = [_expr(c, names, ops) for c in E.children(e)]
    if isinstance(e, E.Binary):
        return ["bin", e.op, e.dtype] + kids
    if isinstance(e, E.Call):
        return ["call", e.name, e.extern, e.dtype] + kids
    if isinstance(e, E.TensorLoad):
        return ["load", ops[id(e.tensor.op)], e.tensor.value_index] + kids
    if isinstance(e, E.Reduce):
        comb = e.combiner
        for v in comb.lhs + comb.rhs:
            names.setdefault(v, f"v{len(names)}")
        for iv in e.axis:
            names.setdefault(iv.var, f"v{len(names)}")
        return ["reduce", e.value_index, [_expr(r, names, ops) for r in comb.result],
                [_expr(i, names, ops) for i in comb.identity],
                [[names[iv.var], _expr(iv.dom.min, names, ops), _expr(iv.dom.extent, names, ops)]
                 for iv in e.axis]] + kids
    return [type(e).__name__, e.dtype] + kids


def describe_graph(outputs) -> list:
    """A canonical JSON-able description of every operation the outputs depend on."""
    ops_index: dict = {}
    desc = []
    for op in topo_order(output_ops(outputs)):
        ops_index[id(op)] = len(desc)
        names: dict = {}
        if isinstance(op, PlaceholderOp):
            desc.append(["placeholder", op.name, [_expr(E.as_expr(d), names, ops_index)
                                                  for d in op.shape], op.dtype])
            continue
        axes = [[names.setdefault(iv.var, f"v{len(names)}"), _expr(iv.dom.extent, names,
                                                                   ops_index)]
                for iv in op.axis]
        desc.append(["compute", op.name, op.tag, axes,
                     [_expr(b, names, ops_index) for b in op.body]])
    return desc


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def graph_key(outputs) -> str:
    """'graph:<hash>' for an automatic-space workload."""
    return "graph:" + _digest(describe_graph(outputs))


def strategy_key(outputs, strategy: str = "auto") -> str:
    """The key records of `outputs` scheduled by `strategy` are filed under: graph_key for
    the automatic space, '<strategy>:<hash>' for another generator over the same compute
    (the conv2d strategy's), so records of two spaces of one graph never meet."""
    if strategy == "auto":
        return graph_key(outputs)
    return f"{strategy}:" + _digest(describe_graph(outputs))


def template_key(name: str, args) -> str:
    """'template:<name>:<hash>' for a template called with JSON-able `args`."""
    try:
        return f"template:{name}:" + _digest(list(args))
    except TypeError:
        raise ArgumentError(f"te.autotune: template '{name}' arguments must be JSON-able "
                            f"(ints, floats, strings, lists), got {args!r}") from None


def package_version() -> str:
    """The installed te-compiler version, or the one in the source tree's setup.cfg."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("te-compiler")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    cfg = os.path.join(os.path.dirname(__file__), "..", "..", "setup.cfg")
    try:
        with open(cfg) as fh:
            for line in fh:
                if line.startswith("version"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return "0+unknown"
