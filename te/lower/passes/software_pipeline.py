"""software_pipeline: the loops that Stage.pipeline marks, as prologue, steady state and
epilogue.

Takes the flattened loop IR, in which build_loops gave each pipelined loop the
SOFTWARE_PIPELINE pragma (its value: the loop variable to interleave with, or None) and
wrapped the pipelined stage's own loops below it in a one-iteration loop with the
PIPELINE_LATE_PART pragma, after everything computed at the loop (the early part). Gives
the same computation with iteration v's late part run after iteration v + 1's early part:

    early(min); for v in [min + 1, min + extent): {early(v); late(v - 1)}; late(last)

Allocations inside the loop move out of it, and the ones that carry results from the early
part to the late part get two copies, used in alternate iterations. With an interleave
loop, the late part's outermost loop joins that loop of the early part in the steady state.
Imports te.dtype, te.compute, te.errors, ir, visitor, passes.simplify.
"""
from __future__ import annotations

import dataclasses

from ... import dtype as dt
from ...compute import expr as E
from ...compute.expr import Const
from ...errors import LoweringError
from .. import ir
from ..visitor import Mutator, Visitor, post_order_stmt
from .simplify import _substitute_stmt


def software_pipeline(body: ir.Stmt) -> ir.Stmt:
    return post_order_stmt(body, _pipeline_loop)


def _pipeline_loop(loop: ir.Stmt):
    if not isinstance(loop, ir.For) or not ir.has_pragma(loop, ir.SOFTWARE_PIPELINE):
        return None
    var = loop.loop_var
    who = f"pipeline of loop '{var.name}'"
    if loop.kind != ir.SERIAL:
        raise LoweringError(f"{who}: the loop is {loop.kind}; only a serial loop can be "
                            f"pipelined (split it and annotate the outer loop instead)")
    interleave = dict(loop.pragmas)[ir.SOFTWARE_PIPELINE]
    allocs, leaves = _peel(loop.body, interleave)
    if not leaves or not _is_late_marker(leaves[-1]) or \
            any(_is_late_marker(x) for x in leaves[:-1]):
        raise LoweringError(f"{who}: internal error: the pipelined stage's loops are not the "
                            f"last part of the loop body")
    early, late = leaves[:-1], leaves[-1].body
    if not early:
        raise LoweringError(f"{who}: no stage is computed at the loop, so nothing can run "
                            f"an iteration ahead; compute_at the stages it reads to it")
    for a in allocs:
        if var in E.free_vars(a.extent):
            raise LoweringError(f"{who}: the size of buffer '{a.buffer.name}' depends on the "
                                f"loop variable, so it cannot be allocated outside the loop")
    versioned = _double_buffered(who, allocs, early, late)

    def at(part, v):
        return _substitute_stmt(_versioned(part, var, loop.min, versioned), {var: v})
    lo, n = loop.min, loop.extent
    steady_early = [at(x, var) for x in early]
    steady_late = at(late, E.binary("sub", var, 1))
    if interleave is not None:
        steady = _interleave(who, steady_early, steady_late, interleave)
    else:
        steady = ir.seq(*steady_early, steady_late)
    other = tuple(p for p in loop.pragmas if p[0] != ir.SOFTWARE_PIPELINE)
    steady_loop = ir.For(var, E.binary("add", lo, 1), E.binary("sub", n, 1), ir.SERIAL,
                         steady, loop.thread_tag,
                         tuple(p for p in other if p[0] not in ir.BODY_PRAGMAS))
    last = E.binary("sub", E.binary("add", lo, n), 1)
    body = ir.seq(*[at(x, lo) for x in early], steady_loop, at(late, last))
    if not (isinstance(n, Const) and n.value >= 1):
        body = ir.IfThenElse(E.binary("gt", n, 0), body)
    for a in reversed(allocs):
        extent = E.binary("mul", a.extent, 2) if a.buffer in versioned else a.extent
        body = ir.Allocate(a.buffer, extent, body)
    return ir.keep_body_pragmas(dataclasses.replace(loop, pragmas=other), body)


def _peel(s: ir.Stmt, keep) -> tuple:
    """(the Allocates around and between the body's statements, outermost first; the
    statements themselves in order). One-iteration loops (an attached stage's loop over
    its one row, say) are opened, their variable replaced by its value, except the loop
    over `keep`, which the late part may join."""
    allocs, leaves = [], []

    def walk(x):
        if isinstance(x, ir.Allocate):
            allocs.append(x)
            walk(x.body)
        elif isinstance(x, ir.SeqStmt):
            for y in x.stmts:
                walk(y)
        elif isinstance(x, ir.For) and _one_iteration(x) and x.loop_var is not keep:
            walk(_substitute_stmt(x.body, {x.loop_var: x.min}))
        else:
            leaves.append(x)
    walk(s)
    return allocs, leaves


def _one_iteration(loop: ir.For) -> bool:
    return isinstance(loop.extent, Const) and loop.extent.value == 1 and not loop.pragmas \
        and loop.kind != ir.THREAD_BINDING


def _is_late_marker(s: ir.Stmt) -> bool:
    return isinstance(s, ir.For) and ir.has_pragma(s, ir.PIPELINE_LATE_PART)


class _Accesses(Visitor):
    """The buffers a statement reads and writes (a prefetch reads nothing), and the extern
    functions it calls."""

    def __init__(self):
        self.reads, self.writes, self.externs = set(), set(), set()

    def visit_Call(self, e: E.Call) -> None:
        if e.extern:
            self.externs.add(e.name)
        self.generic(e)

    def visit_Store(self, s: ir.Store) -> None:
        self.writes.add(s.buffer)
        self.generic(s)

    def visit_Load(self, e: ir.Load) -> None:
        self.reads.add(e.buffer)
        self.generic(e)

    def visit_Prefetch(self, e: ir.Prefetch) -> None:
        return None


def _accesses(stmts: list) -> _Accesses:
    v = _Accesses()
    for s in stmts:
        v.visit(s)
    return v


def _double_buffered(who: str, allocs: list, early: list, late: ir.Stmt) -> dict:
    """buffer -> size of each buffer that the early part writes and the late part reads,
    after checking that nothing else links the two parts."""
    early_use, late_use = _accesses(early), _accesses([late])
    r0, w0, r1, w1 = early_use.reads, early_use.writes, late_use.reads, late_use.writes
    if early_use.externs and late_use.externs:
        names = ", ".join(sorted(early_use.externs | late_use.externs))
        raise LoweringError(f"{who}: both the stages computed at the loop and the pipelined "
                            f"stage call extern functions ({names}), whose side effects "
                            f"pipelining would reorder")
    clash = w1 & (r0 | w0)
    if clash:
        raise LoweringError(f"{who}: the pipelined stage writes {_names(clash)}, which the "
                            f"stages computed at the loop also use, so they cannot run an "
                            f"iteration ahead of it")
    sizes = {a.buffer: a.extent for a in allocs}
    carried = w0 & r1
    outside = [b for b in carried if b not in sizes]
    if outside:
        raise LoweringError(f"{who}: {_names(outside)} carry results from the stages computed "
                            f"at the loop to the pipelined stage but are allocated outside the "
                            f"loop, so they cannot be double-buffered")
    return {b: sizes[b] for b in carried}


def _names(buffers) -> str:
    return ", ".join(sorted(f"'{b.name}'" for b in buffers))


class _Version(Mutator):
    """Accesses to double-buffered buffers go to copy (var - min) mod 2."""

    def __init__(self, sizes: dict, var, lo):
        self.sizes = sizes
        self.copy = E.binary("floormod", E.binary("sub", var, lo), 2)

    def _index(self, buffer, index):
        offset = E.binary("mul", self.copy, self.sizes[buffer])
        lanes = dt.lanes(index.dtype)
        if lanes > 1:
            offset = E.Broadcast(dt.with_lanes(offset.dtype, lanes), offset, lanes)
        return E.binary("add", index, offset)

    def visit_Store(self, s: ir.Store) -> ir.Stmt:
        s = self.generic_stmt(s)
        if s.buffer not in self.sizes:
            return s
        return dataclasses.replace(s, index=self._index(s.buffer, s.index))

    def visit_Load(self, e: ir.Load) -> E.Expr:
        e = self.generic_expr(e)
        if e.buffer not in self.sizes:
            return e
        return dataclasses.replace(e, index=self._index(e.buffer, e.index))


def _versioned(s: ir.Stmt, var, lo, sizes: dict) -> ir.Stmt:
    return _Version(sizes, var, lo).visit_stmt(s) if sizes else s


def _interleave(who: str, early: list, late: ir.Stmt, interleave) -> ir.Stmt:
    """The steady state with the late part's outermost loop inside the early part's loop
    over `interleave` (a top-level statement of the early part)."""
    spot = next((k for k, x in enumerate(early)
                 if isinstance(x, ir.For) and x.loop_var is interleave), None)
    if spot is None:
        raise LoweringError(f"{who}: interleave loop '{interleave.name}' is not the outermost "
                            f"loop of a stage computed at the loop (a stage fused by "
                            f"compute_with runs in its parent's loops: name the parent's)")
    host = early[spot]
    if not isinstance(late, ir.For):
        raise LoweringError(f"{who}: the pipelined stage's part below the loop is not a "
                            f"single loop, so it cannot run inside loop '{interleave.name}'")
    for x, role in ((host, f"loop '{interleave.name}'"),
                    (late, f"the pipelined stage's loop '{late.loop_var.name}'")):
        if x.kind != ir.SERIAL:
            raise LoweringError(f"{who}: {role} is {x.kind}; interleaving needs serial loops")
    if not (_same(host.extent, late.extent) and _same(host.min, late.min)):
        raise LoweringError(f"{who}: loop '{interleave.name}' runs {_show(host.extent)} and "
                            f"the pipelined stage's loop '{late.loop_var.name}' "
                            f"{_show(late.extent)}; interleaving needs the same count (split "
                            f"one of them)")
    own = [k for k, _ in late.pragmas if k not in ir.BODY_PRAGMAS]
    if own:
        raise LoweringError(f"{who}: the pipelined stage's loop '{late.loop_var.name}' has "
                            f"pragma {', '.join(map(repr, own))}, which would be lost inside "
                            f"loop '{interleave.name}'")
    moved = _substitute_stmt(late.body, {late.loop_var: host.loop_var})
    # the host's body pragmas (non-temporal stores) stay on its own part
    joined = dataclasses.replace(
        host, pragmas=tuple(p for p in host.pragmas if p[0] not in ir.BODY_PRAGMAS),
        body=ir.seq(ir.keep_body_pragmas(host, host.body), ir.keep_body_pragmas(late, moved)))
    return ir.seq(*early[:spot], joined, *early[spot + 1:])


def _same(a, b) -> bool:
    return isinstance(a, Const) and isinstance(b, Const) and a.value == b.value


def _show(extent) -> str:
    if not isinstance(extent, Const):
        return "a symbolic number of iterations"
    return f"{extent.value} iteration" + ("" if extent.value == 1 else "s")
