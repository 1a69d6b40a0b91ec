"""How te.scan and te.extern stages lower: their bounds, their nests and their checks.

Takes a Schedule's ScanOp and ExternOp stages (te/compute/scan_extern.py); gives what
bound.py and build_loops.py ask of them. A scan's nest is its init stages, then its time
loop with the body stages attached inside (schedule.py attaches them), in an AliasScope
that stores init, update and state tensors in the scan's output. An extern's nest is its
statement in a BufferBind of its declared buffers to its tensors. Imports te.compute,
te.schedule, ir.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.expr import Const
from ..compute.scan_extern import ExternOp, ScanOp
from ..compute.tensor import ComputeOp, Range
from ..errors import LoweringError
from ..schedule.stage import INLINE, ROOT, SCOPE, Stage
from . import ir

WHOLE_OPS = (ScanOp, ExternOp)


def whole_bounds(st: Stage) -> tuple:
    """(root ranges, leaf extents) of a scan or extern stage: all of its time axis, or
    nothing (an extern has no loops of its own)."""
    if isinstance(st.op, ScanOp):
        iv = st.op.scan_axis
        return {iv: iv.dom}, {iv: iv.dom.extent}
    return {}, {}


def scan_updated_by(st: Stage) -> Stage | None:
    """The scan stage whose update `st` computes, when st runs in that scan's time loop."""
    parent = st.attach_stage
    if st.attach_type != SCOPE or not isinstance(parent.op, ScanOp):
        return None
    if any(u.op is st.op for u in parent.op.update) and st.attach_ivar is parent.op.scan_axis:
        return parent
    return None


def update_region(st: Stage, scan: Stage) -> dict:
    """Root ranges of an update stage: the one time step its scan's loop is at, and the
    whole of every other axis."""
    time = scan.op.scan_axis
    root = {iv: iv.dom for iv in tuple(st.op.axis[1:]) + tuple(st.op.reduce_axis)}
    t0 = st.op.axis[0]
    step = time.dom.min + time.var
    if step.dtype != t0.var.dtype:
        step = E.cast(step, t0.var.dtype)
    root[t0] = Range(step, E.const(1, t0.var.dtype))
    return root


def time_axes(sch) -> dict:
    """axis IterVar -> (lo, hi): the time steps a scan body stage's first axis takes (its
    domain starts at 0, but it runs from the scan's init length on), where constant."""
    out = {}
    for st in sch.stages:
        if not isinstance(st.op, ScanOp):
            continue
        dom = st.op.scan_axis.dom
        if not (isinstance(dom.min, Const) and isinstance(dom.extent, Const)):
            continue
        lo = int(dom.min.value)
        for op in st.op.body_ops():
            if isinstance(op, ComputeOp):
                out[op.axis[0]] = (lo, lo + int(dom.extent.value) - 1)
    return out


def init_stages(sch) -> dict:
    """init stage -> its scan's stage: init stages are built inside the scan's nest."""
    return {sch[t.op]: st for st in sch.stages if isinstance(st.op, ScanOp)
            for t in st.op.init}


def aliased_ops(sch) -> set:
    """Operations stored in a scan's output rather than storage of their own."""
    return {t.op for st in sch.stages if isinstance(st.op, ScanOp)
            for t in st.op.init + st.op.update}


def check_scans(sch, enclosing_loops) -> None:
    """The placements a scan needs: its time loop whole, its inits at the top, its body
    stages inside its time loop (enclosing_loops: bound.enclosing_loops)."""
    for st in sch.stages:
        if not isinstance(st.op, ScanOp):
            continue
        if st.relations:
            raise LoweringError(f"scan '{st.name}': its time loop "
                                f"'{st.op.scan_axis.var.name}' cannot be split or fused")
        for t in st.op.init:
            init = sch[t.op]
            if init.attach_type != ROOT:
                raise LoweringError(f"scan '{st.name}': its init '{init.name}' must be "
                                    f"computed at the top (compute_root), it is "
                                    f"{_placement(init)}")
        for op in st.op.body_ops():
            body = sch[op]
            if body.attach_type == INLINE and any(u.op is op for u in st.op.update):
                raise LoweringError(f"scan '{st.name}': its update '{body.name}' cannot be "
                                    f"inlined; it is stored in the scan's output")
            if body.attach_type == INLINE:
                continue
            if (st, st.op.scan_axis) not in enclosing_loops(body):
                raise LoweringError(f"scan '{st.name}': stage '{body.name}' reads the scan's "
                                    f"state, so it must run inside the time loop "
                                    f"'{st.op.scan_axis.var.name}', but it is "
                                    f"{_placement(body)}")


def _placement(st: Stage) -> str:
    if st.attach_type == SCOPE:
        return f"computed at '{st.attach_stage.name}' loop '{st.attach_ivar.var.name}'"
    return "inlined" if st.attach_type == INLINE else "computed at the top (compute_root)"


def scan_nest(st: Stage, init_nests: list, time_loop: ir.Stmt) -> ir.Stmt:
    """The scan's inits, then its time loop, with every state tensor stored in its
    output."""
    op = st.op
    aliases = []
    for k in range(op.num_outputs):
        out = op.output(k)
        aliases += [(op.init[k], out), (op.update[k], out), (op.state[k], out)]
    return ir.AliasScope(tuple(aliases), ir.seq(*init_nests, time_loop))


def extern_nest(st: Stage) -> ir.Stmt:
    """The extern's statement, its declared buffers bound to whole tensors."""
    op = st.op
    binds = tuple((buf, t, None, False) for buf, t in zip(op.input_buffers, op.inputs))
    binds += tuple((buf, op.output(k), None, True) for k, buf in enumerate(op.output_buffers))
    body = op.body
    if isinstance(body, E.Expr):
        body = ir.Evaluate(body)
    return ir.BufferBind(binds, body)


def whole_region(tensor) -> tuple:
    return tuple(Range(E.const(0, d.dtype), d) for d in tensor.shape)
