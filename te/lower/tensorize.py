"""Tensorize: the loops from a tensorized loop inward, replaced by a tensor intrinsic.

Takes one stage's body (over its leaf loop variables), its leaf loops and the intrinsic
(te/compute/scan_extern.TensorIntrin); gives the intrinsic's statements, each in a
BufferBind of its declared buffers to the regions of the stage's tensors that the inner
loops cover. The intrinsic's compute must be the stage's, read in the region's local
coordinates: otherwise a LoweringError names the first part that differs. Imports
te.compute, ir, arith, printer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..compute import expr as E
from ..compute.expr import Const, Reduce, TensorLoad, Var
from ..errors import LoweringError
from . import ir
from .arith import Analyzer
from .printer import print_expr


@dataclass
class Tensorized:
    """The intrinsic's statements, bound to the stage's regions (reset/update: None when
    the intrinsic gives only a body)."""
    body: ir.Stmt
    reset: ir.Stmt | None
    update: ir.Stmt | None


def tensorize(st, intrin, leaves: list, pos: int, values: dict, body: tuple,
              out_idx: tuple, extents: dict) -> Tensorized:
    """Match stage `st` (body over its leaf vars; values: root IterVar -> its value in
    them) against `intrin` for the loops leaves[pos:]; extents: leaf -> loop extent."""
    who = f"tensorize on stage '{st.name}' at loop '{leaves[pos].var.name}'"
    inner = {iv.var: iv for iv in leaves[pos:]}
    ana = Analyzer()
    data, red = _inner_axes(st, who, inner, values, ana)
    local = {}
    for mine, theirs, kind in ((data, intrin.op.axis, "axes"),
                               (red, intrin.op.reduce_axis, "reduce axes")):
        if len(mine) != len(theirs):
            raise LoweringError(f"{who}: the loops inside cover {len(mine)} {kind} "
                                f"({_names(mine)}) but intrinsic '{intrin.name}' has "
                                f"{len(theirs)} ({_names(theirs)})")
        for (root, leaf), iv in zip(mine, theirs):
            ext = extents[leaf]
            if not (isinstance(ext, Const) and isinstance(iv.dom.extent, Const)
                    and int(ext.value) == int(iv.dom.extent.value)):
                raise LoweringError(f"{who}: loop '{leaf.var.name}' (of axis "
                                    f"'{root.var.name}') runs {_text(ext)} iterations but "
                                    f"intrinsic '{intrin.name}' axis '{iv.var.name}' has "
                                    f"{_text(iv.dom.extent)}")
            local[leaf.var] = iv.var
    if len(body) != 1 or intrin.op.num_outputs != 1:
        raise LoweringError(f"{who}: only a compute of one output can be tensorized")
    mine = E.substitute(body[0], local)
    at_zero = {iv.var: E.const(0, iv.var.dtype)
               for iv in tuple(intrin.op.axis) + tuple(intrin.op.reduce_axis)}
    stage_tensors = _tensors_read(mine)
    intrin_tensors = _tensors_read(intrin.op.body[0])
    if len(stage_tensors) != len(intrin_tensors):
        raise LoweringError(f"{who}: the stage reads {len(stage_tensors)} tensors "
                            f"({_names(stage_tensors)}) but intrinsic '{intrin.name}' reads "
                            f"{len(intrin_tensors)} ({_names(intrin_tensors)})")
    mins = {}
    for t, load in stage_tensors.items():
        mins[t] = tuple(ana.simplify(E.substitute(i, at_zero)) for i in load.indices)
    rename = dict(zip(intrin_tensors, stage_tensors))
    theirs = _in_stage_coordinates(intrin.op.body[0], rename, mins, who, intrin, ana)
    diff = _first_difference(mine, theirs, ana)
    if diff is not None:
        raise LoweringError(f"{who}: the stage computes {_text(diff[0])} where intrinsic "
                            f"'{intrin.name}' computes {_text(diff[1])} (in the stage's "
                            f"coordinates); the loops inside compute {_text(mine)}, the "
                            f"intrinsic {_text(theirs)}")
    out = st.op.output(0)
    out_mins = tuple(ana.simplify(E.substitute(E.substitute(i, local), at_zero))
                     for i in out_idx)
    binds = tuple((buf, t, mins[t], False)
                  for buf, t in zip(intrin.input_buffers, stage_tensors))
    binds += ((intrin.output_buffers[0], out, out_mins, True),)

    def bound(s, which=binds):
        return None if s is None else ir.BufferBind(which, s)
    # reset (TVM's reduce_init) gets the output alone: it runs before the reduction's outer
    # loop, where stages attached inside that loop (an input's shared chunk) do not exist
    return Tensorized(bound(intrin.body), bound(intrin.reset, binds[-1:]),
                      bound(intrin.update))


def _inner_axes(st, who: str, inner: dict, values: dict, ana: Analyzer) -> tuple:
    """([(root, inner leaf)] of data axes, same of reduce axes): each root axis that the
    inner loops move must be base + one inner loop's variable."""
    zero = {v: E.const(0, v.dtype) for v in inner}
    data, red, used = [], [], {}
    for root in tuple(st.op.axis) + tuple(st.op.reduce_axis):
        value = values[root]
        local = ana.simplify(value - E.substitute(value, zero))
        if isinstance(local, Const) and local.value == 0:
            continue
        if not (isinstance(local, Var) and local in inner):
            raise LoweringError(f"{who}: axis '{root.var.name}' is {_text(local)} inside the "
                                f"tensorized loops; each loop inside must be a whole axis or "
                                f"the inner part of a split")
        if local in used:
            raise LoweringError(f"{who}: loop '{local.name}' moves two axes, "
                                f"'{used[local].var.name}' and '{root.var.name}'")
        used[local] = root
        (red if root in st.op.reduce_axis else data).append((root, inner[local]))
    return data, red


def _tensors_read(e: E.Expr) -> dict:
    """tensor -> its first load, in order of first appearance."""
    found: dict = {}

    def visit(node):
        if isinstance(node, TensorLoad):
            found.setdefault(node.tensor, node)
    E.pre_order(e, visit)
    return found


def _in_stage_coordinates(e: E.Expr, rename: dict, mins: dict, who: str, intrin,
                          ana: Analyzer) -> E.Expr:
    """The intrinsic's body reading the stage's tensors: its tensor's index k becomes the
    region's min plus that index, the intrinsic's dimensions aligned to the last ones."""
    def load(node):
        if not isinstance(node, TensorLoad) or node.tensor not in rename:
            return None
        t = rename[node.tensor]
        lead = t.ndim - node.tensor.ndim
        if lead < 0:
            raise LoweringError(f"{who}: intrinsic '{intrin.name}' reads '{node.tensor.name}' "
                                f"with {node.tensor.ndim} dimensions where the stage reads "
                                f"'{t.name}' with {t.ndim}")
        idx = tuple(mins[t][:lead]) + tuple(ana.simplify(m + i) for m, i in zip(mins[t][lead:],
                                                                   node.indices))
        return TensorLoad(t.dtype, t, idx)
    return E.transform(e, load)


def _first_difference(a: E.Expr, b: E.Expr, ana: Analyzer):
    """None when a and b compute the same, else the first differing pair (indices are
    compared by value, the rest by structure)."""
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if isinstance(x, TensorLoad) and isinstance(y, TensorLoad):
            if x.tensor != y.tensor or len(x.indices) != len(y.indices) or not all(
                    _same_value(i, j, ana) for i, j in zip(x.indices, y.indices)):
                return x, y
            continue
        if type(x) is not type(y) or x.dtype != y.dtype:
            return x, y
        if isinstance(x, Var):
            if x is not y:
                return x, y
            continue
        if isinstance(x, Const):
            if x.value != y.value:
                return x, y
            continue
        if isinstance(x, Reduce):
            if x.combiner.name != y.combiner.name or len(x.axis) != len(y.axis) or \
                    x.value_index != y.value_index:
                return x, y
        elif _fields(x) != _fields(y):
            return x, y
        kx, ky = E.children(x), E.children(y)
        if len(kx) != len(ky):
            return x, y
        todo.extend(reversed(list(zip(kx, ky))))
    return None


def _fields(e: E.Expr) -> tuple:
    """The non-expression fields of a node (an operator's name, a call's name)."""
    return tuple(getattr(e, f) for f in ("op", "name", "extern", "lanes") if hasattr(e, f))


def _same_value(a: E.Expr, b: E.Expr, ana: Analyzer) -> bool:
    diff = ana.simplify(E.as_expr(a) - E.as_expr(b))
    return isinstance(diff, Const) and diff.value == 0


def _names(items) -> str:
    out = []
    for x in items:
        x = x[0] if isinstance(x, tuple) else x
        out.append(x.var.name if hasattr(x, "var") else x.name)
    return ", ".join(out) or "none"


def _text(e) -> str:
    return print_expr(E.as_expr(e))
