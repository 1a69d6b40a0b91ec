"""Stage.compute_with in lowering: which stages share loops, and whether that is legal.

Takes a Schedule (and, per stage, the loop nest and reads that build_loops made); gives the
fusions grouped by the stage whose loops are shared, the part of a fused stage's nest that
goes inside the innermost shared loop (its loop variables renamed to the parent's), and a
LoweringError naming the stage and the rule whenever a fusion would change a result.
Imports te.compute, te.schedule, te.errors, ir, arith, passes.simplify, prefetch, printer.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.tensor import REDUCE
from ..errors import LoweringError
from ..schedule.schedule import INLINE, Schedule, Stage
from . import ir
from .arith import Analyzer, interval
from .passes.simplify import _substitute_stmt
from .prefetch import reads_of
from .printer import print_expr


def fusions(sch: Schedule, attached: dict) -> dict:
    """parent stage -> [(stage, depth)] in stage order, for every live compute_with, after
    checking what can be checked before bound inference. depth: the index of the innermost
    shared loop among the parent's leaf loops. attached: (stage, leaf) -> attached stages."""
    out: dict = {}
    for st in sch.stages:
        if st.fused_with is None:
            continue
        parent, scope = st.fused_with
        who = f"compute_with of '{st.name}' into '{parent.name}'"
        for s, role in ((st, "the stage"), (parent, f"'{parent.name}'")):
            if s.attach_type == INLINE:
                raise LoweringError(f"{who}: {role} was inlined afterwards and has no loops")
        if parent.fused_with is not None:
            raise LoweringError(f"{who}: '{parent.name}' is itself fused into "
                                f"'{parent.fused_with[0].name}'; fuse both into that stage")
        if scope not in parent.leaf_iter_vars:
            raise LoweringError(f"{who}: loop '{scope.var.name}' was split or fused "
                                f"afterwards; fuse at a current loop")
        where = (st.attach_type, st.attach_stage, st.attach_ivar)
        if where != (parent.attach_type, parent.attach_stage, parent.attach_ivar):
            raise LoweringError(f"{who}: the two stages are computed at different places "
                                f"({_place(st)} and {_place(parent)}); compute_at both to "
                                f"the same loop, or leave both at root")
        depth = parent.leaf_iter_vars.index(scope)
        _check_own_loops(st, depth, who, attached)
        _check_in_between(sch, st, parent, who, attached)
        out.setdefault(parent, []).append((st, depth))
    return out


def _place(st: Stage) -> str:
    if st.attach_stage is None:
        return "root"
    return f"loop '{st.attach_ivar.var.name}' of '{st.attach_stage.name}'"


def _check_own_loops(st: Stage, depth: int, who: str, attached: dict) -> None:
    """The fused stage's shared loops become the parent's: nothing of its own may hang on
    them except at the innermost one, whose body is what moves into the parent's loop."""
    leaves = st.leaf_iter_vars
    if len(leaves) <= depth:
        raise LoweringError(f"{who}: it shares {depth + 1} loops but the stage has only "
                            f"{len(leaves)}")
    for level, iv in enumerate(leaves[:depth + 1]):
        name = f"loop '{iv.var.name}' of '{st.name}'"
        if iv.iter_type == REDUCE:
            raise LoweringError(f"{who}: {name} is a reduction loop; a reduction's "
                                f"reduction loops cannot be shared")
        attr = st.iter_attrs.get(iv)
        if attr and (attr.kind != "serial" or attr.pragmas or attr.thread_tag):
            raise LoweringError(f"{who}: {name} is {attr.kind}"
                                f"{' with pragmas' if attr.pragmas else ''}; shared loops "
                                f"take the parent's annotations, so annotate the parent's")
        if level < depth and attr and attr.prefetch:
            raise LoweringError(f"{who}: {name} has a prefetch; only the innermost shared "
                                f"loop of the stage may prefetch")
        if level < depth and attached.get((st, iv)):
            raise LoweringError(f"{who}: stage '{attached[(st, iv)][0].name}' is computed at "
                                f"{name}; only the innermost shared loop may have stages "
                                f"computed at it")


def _check_in_between(sch: Schedule, st: Stage, parent: Stage, who: str,
                      attached: dict) -> None:
    """The stage's work moves to the parent's place: no stage running in between, nor any
    stage computed inside the parent, may read it, or it would read it unwritten. (The
    stage itself cannot read a stage computed inside the parent: bound inference already
    refuses a reader outside the loop a producer is computed in.)"""
    stages = sch.stages
    here = (st.attach_stage, st.attach_ivar)
    between = [s for s in stages[stages.index(st) + 1:stages.index(parent)]
               if (s.attach_stage, s.attach_ivar) == here and s.attach_type == st.attach_type]
    inside = [s for (p, _), group in attached.items() if p is parent for s in group]
    for s in between + inside:
        if sch.depends_on(s, st):
            role = "runs between the two" if s in between else \
                f"is computed inside '{parent.name}'"
            raise LoweringError(f"{who}: stage '{s.name}' {role} and reads "
                                f"'{st.name}', which now runs later")


def check_extents(st: Stage, parent: Stage, depth: int, bounds: dict) -> None:
    ana = Analyzer()
    for a, b in zip(st.leaf_iter_vars[:depth + 1], parent.leaf_iter_vars[:depth + 1]):
        ea, eb = bounds[st].extent[a], bounds[parent].extent[b]
        if not ana.can_prove(E.binary("eq", ea, eb)):
            raise LoweringError(f"compute_with of '{st.name}' into '{parent.name}': loop "
                                f"'{a.var.name}' runs {print_expr(ea)} times but "
                                f"'{b.var.name}' runs {print_expr(eb)}; shared loops need "
                                f"equal extents")


def inner_part(nest: ir.Stmt, st: Stage, parent: Stage, depth: int) -> ir.Stmt:
    """The body of the stage's innermost shared loop, over the parent's loop variables."""
    vmap = {}
    node = nest
    for iv, piv in zip(st.leaf_iter_vars[:depth + 1], parent.leaf_iter_vars[:depth + 1]):
        if not isinstance(node, ir.For) or node.loop_var is not iv.var:
            raise LoweringError(f"compute_with of '{st.name}': internal error, expected "
                                f"loop '{iv.var.name}' in its nest")
        vmap[iv.var] = piv.var
        node = node.body
    return _substitute_stmt(node, vmap)


def check_same_iteration(st: Stage, parent: Stage, depth: int, reads: dict,
                         extents: dict) -> None:
    """Each iteration of the shared loops must find, in the stage's output, only what the
    same iteration of the stage computed: the box the parent reads lies inside the box the
    stage writes, over the loops inside the innermost shared one."""
    body, _, ana = reads[parent]
    _, out_idx, _ = reads[st]
    shared = dict(zip([iv.var for iv in st.leaf_iter_vars[:depth + 1]],
                      [iv.var for iv in parent.leaf_iter_vars[:depth + 1]]))
    mine = _inner_ranges(st, depth, extents)
    theirs = _inner_ranges(parent, depth, extents)
    written = [interval(ana.simplify(E.substitute(i, shared)), mine, ana) for i in out_idx]
    for k in range(st.op.num_outputs):
        for load in reads_of(body, st.op.output(k)):
            read = [interval(i, theirs, ana) for i in load.indices]
            if not all(w is not None and r is not None
                       and ana.can_prove(E.binary("ge", r[0], w[0]))
                       and ana.can_prove(E.binary("le", r[1], w[1]))
                       for w, r in zip(written, read)):
                raise LoweringError(
                    f"compute_with of '{st.name}' into '{parent.name}': an iteration of the "
                    f"shared loops reads {st.name}[{_box(read)}] but computes only "
                    f"{st.name}[{_box(written)}]; share fewer loops, or split both stages "
                    f"alike")


def _inner_ranges(st: Stage, depth: int, extents: dict) -> dict:
    return {iv.var: (E.const(0, extents[st][iv].dtype), extents[st][iv] - 1)
            for iv in st.leaf_iter_vars[depth + 1:]}


def _box(box: list) -> str:
    return ", ".join("?" if b is None else f"{print_expr(b[0])}..{print_expr(b[1])}"
                     for b in box)
