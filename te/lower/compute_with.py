"""Stage.compute_with in lowering: which stages share loops, and whether that is legal.

Takes a Schedule (and, per stage, the loop nest and reads that build_loops made); gives the
fusions grouped by the stage whose loops are shared, the part of a fused stage's nest that
goes inside the innermost shared loop (its loop variables renamed to the parent's), and a
LoweringError naming the stage and the rule whenever a fusion would change a result.
Imports te.compute, te.schedule, te.errors, ir, arith, passes.simplify, prefetch, printer.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.expr import Const, Reduce
from ..compute.tensor import REDUCE
from ..errors import LoweringError
from ..schedule.schedule import Schedule
from ..schedule.stage import INLINE, Stage
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
        if attr and (attr.kind != "serial" or attr.pragmas):
            what = attr.kind if attr.kind != "serial" else \
                "annotated with pragma " + ", ".join(repr(k) for k, _ in attr.pragmas)
            raise LoweringError(f"{who}: {name} is {what}; shared loops take the parent's "
                                f"annotations, so annotate the parent's")
        if attr and attr.pipeline is not None:
            raise LoweringError(f"{who}: {name} is pipelined; shared loops are the "
                                f"parent's, so pipeline the parent's")
        if level < depth and attr and attr.prefetch:
            raise LoweringError(f"{who}: {name} has a prefetch; only the innermost shared "
                                f"loop of the stage may prefetch")
        if level < depth and attached.get((st, iv)):
            raise LoweringError(f"{who}: stage '{attached[(st, iv)][0].name}' is computed at "
                                f"{name}; only the innermost shared loop may have stages "
                                f"computed at it")


def _check_in_between(sch: Schedule, st: Stage, parent: Stage, who: str,
                      attached: dict) -> None:
    """The stage's work moves to the parent's place: no stage running in between may read
    it (it would read it unwritten), and no stage computed inside the parent may (the
    same-iteration check covers only the parent's own reads). The stage itself cannot
    read a stage computed inside the parent: bound inference already refuses a reader
    outside the loop a producer is computed in."""
    stages = sch.stages
    here = (st.attach_stage, st.attach_ivar)
    between = [s for s in stages[stages.index(st) + 1:stages.index(parent)]
               if (s.attach_stage, s.attach_ivar) == here and s.attach_type == st.attach_type]
    inside = [s for (p, _), group in attached.items() if p is parent for s in group]
    for s in between:
        if sch.depends_on(s, st):
            raise LoweringError(f"{who}: stage '{s.name}' runs between the two and reads "
                                f"'{st.name}', which now runs later (a cache_write or "
                                f"rfactor of '{parent.name}' made after compute_with adds "
                                f"such a stage: make those first, then fuse into the stage "
                                f"they leave)")
    for s in inside:
        if sch.depends_on(s, st):
            raise LoweringError(f"{who}: stage '{s.name}' is computed inside "
                                f"'{parent.name}' and reads '{st.name}'; only "
                                f"'{parent.name}' itself may read a stage fused into it")


def check_extents(st: Stage, parent: Stage, depth: int, bounds: dict) -> None:
    ana = Analyzer()
    for a, b in zip(st.leaf_iter_vars[:depth + 1], parent.leaf_iter_vars[:depth + 1]):
        ea, eb = bounds[st].extent[a], bounds[parent].extent[b]
        if not ana.can_prove(E.binary("eq", ea, eb)):
            raise LoweringError(f"compute_with of '{st.name}' into '{parent.name}': loop "
                                f"'{a.var.name}' has extent {print_expr(ea)} but "
                                f"'{b.var.name}' has {print_expr(eb)}; shared loops need "
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
    same iteration of the stage computed. A read of the stage by the parent passes when
    (a) its index is the stage's own write index with the stage's inner loops renamed to
    the parent's (the same number of inner loops, of equal extents, position by
    position), so each inner step reads what the same step wrote; or (b) the stage's write
    index covers each dimension's range without gaps (see _dense_ranges) and the read's
    bounding box lies inside those ranges. A strided or floordiv/floormod write index
    has gaps in its bounding box, so it passes only by (a). A reduction parent sharing its
    reduction loops runs its init before them: an init that reads the stage is refused."""
    body, _, ana = reads[parent]
    _, own_idx, _ = reads[st]
    shared = dict(zip([iv.var for iv in st.leaf_iter_vars[:depth + 1]],
                      [iv.var for iv in parent.leaf_iter_vars[:depth + 1]]))
    written = [ana.simplify(E.substitute(i, shared)) for i in own_idx]
    who = f"compute_with of '{st.name}' into '{parent.name}'"
    _check_init(st, parent, depth, body, who)
    renamed = _renamed_inner(st, parent, depth, extents, ana)
    same_step = [ana.simplify(E.substitute(i, renamed)) for i in written] \
        if renamed is not None else None
    dense = _dense_ranges(written, _inner_ranges(st, depth, extents), ana)
    theirs = _inner_ranges(parent, depth, extents)
    for k in range(st.op.num_outputs):
        for load in reads_of(body, st.op.output(k)):
            if same_step is not None and all(
                    ana.can_prove(E.binary("eq", r, w))
                    for r, w in zip(load.indices, same_step)):
                continue
            read = [interval(i, theirs, ana) for i in load.indices]
            if dense is not None and all(
                    r is not None and ana.can_prove(E.binary("ge", r[0], w[0]))
                    and ana.can_prove(E.binary("le", r[1], w[1]))
                    for w, r in zip(dense, read)):
                continue
            raise LoweringError(
                f"{who}: an iteration of the shared loops reads {st.name}[{_box(read)}], "
                f"which that iteration cannot be shown to compute (it computes "
                f"{st.name}[{', '.join(print_expr(w) for w in written)}] over its inner "
                f"loops); share fewer loops, or give both stages the same inner loops")


def _check_init(st: Stage, parent: Stage, depth: int, body: tuple, who: str) -> None:
    red = body[0] if body and isinstance(body[0], Reduce) else None
    leaves = parent.leaf_iter_vars
    first_red = next((k for k, iv in enumerate(leaves) if iv.iter_type == REDUCE), None)
    if red is None or first_red is None or depth < first_red:
        return
    if any(reads_of(red.init, st.op.output(k)) for k in range(st.op.num_outputs)):
        k = leaves[first_red].var.name
        raise LoweringError(f"{who}: the reduction's init reads '{st.name}', but the init "
                            f"runs before reduction loop '{k}', and the stage's part now runs "
                            f"inside it; share only loops outside '{k}'")


def _renamed_inner(st: Stage, parent: Stage, depth: int, extents: dict, ana: Analyzer):
    """The stage's inner loop vars -> the parent's, position by position, when both have
    as many inner loops, of equal extents; else None."""
    mine, theirs = st.leaf_iter_vars[depth + 1:], parent.leaf_iter_vars[depth + 1:]
    if len(mine) != len(theirs):
        return None
    for a, b in zip(mine, theirs):
        if not ana.can_prove(E.binary("eq", extents[st][a], extents[parent][b])):
            return None
    return {a.var: b.var for a, b in zip(mine, theirs)}


def _dense_ranges(index: list, inner: dict, ana: Analyzer):
    """[lo, hi] per dimension when the write index covers exactly that range over the inner
    loops: each dimension is base + c_1 v_1 + ... + c_n v_n over its own inner loops
    (none shared with another dimension), with constant coefficients in mixed radix
    (sorted: 1, e_1, e_1 e_2, ... for extents e_k); else None (the box has gaps)."""
    used, out = set(), []
    for e in index:
        vs = [v for v in E.free_vars(e) if v in inner]
        if used & set(vs):
            return None
        used.update(vs)
        zero = {v: E.const(0, v.dtype) for v in vs}
        base = ana.simplify(E.substitute(e, zero))
        terms, linear = [], base
        for v in vs:
            c = ana.simplify(E.substitute(e, {**zero, v: E.const(1, v.dtype)}) - base)
            extent = ana.simplify(inner[v][1] + 1)
            if not isinstance(c, Const) or not isinstance(extent, Const):
                return None
            terms.append((c.value, extent.value))
            linear = linear + c * v
        if not ana.can_prove(E.binary("eq", e, linear)):
            return None
        span = 1
        for c, extent in sorted(terms):
            if c != span:
                return None
            span *= extent
        out.append((base, ana.simplify(base + (span - 1))))
    return out


def _inner_ranges(st: Stage, depth: int, extents: dict) -> dict:
    return {iv.var: (E.const(0, extents[st][iv].dtype), extents[st][iv] - 1)
            for iv in st.leaf_iter_vars[depth + 1:]}


def _box(box: list) -> str:
    return ", ".join("?" if b is None else f"{print_expr(b[0])}..{print_expr(b[1])}"
                     for b in box)
