"""Bound inference: how much of each attached stage must be computed, and loop extents.

Takes a schedule's stages (with inlined bodies already substituted) and gives, for each
stage, the Range of every root iteration variable and the extent of every leaf loop. A
stage computed at a consumer's loop computes the region its readers touch inside that
loop, found by symbolic interval analysis with the enclosing loops held fixed (all but
the threadIdx loops, for a stage in GPU shared memory).
Imports te.compute, te.schedule (data only), arith.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..compute import expr as E
from ..compute.expr import Const, TensorLoad
from ..compute.tensor import REDUCE, ComputeOp, Range
from ..errors import LoweringError
from ..schedule.stage import (INLINE, ROOT, SCOPE, FuseRel, SplitRel, Stage, fused_extent,
                              loop_dtype, loop_extent_max, split_extents)
from .arith import Analyzer, interval
from .scan_extern import WHOLE_OPS, scan_updated_by, update_region, whole_bounds


@dataclass
class StageBounds:
    """Inferred ranges of one stage: root var -> Range, leaf var -> extent."""
    root: dict = field(default_factory=dict)
    extent: dict = field(default_factory=dict)


def enclosing_loops(st: Stage) -> list:
    """(stage, leaf IterVar) of every loop around st's own loops, outermost first."""
    if st.attach_type != SCOPE:
        return []
    parent = st.attach_stage
    upto = parent.leaf_iter_vars.index(st.attach_ivar) + 1
    return enclosing_loops(parent) + [(parent, iv) for iv in parent.leaf_iter_vars[:upto]]


def pass_down(st: Stage, root: dict, ana: Analyzer) -> dict:
    """Leaf loop extents from root ranges, following the stage's split/fuse relations."""
    ext = {iv: r.extent for iv, r in root.items()}
    who = f"stage '{st.name}'"
    for rel in st.relations:
        if isinstance(rel, SplitRel):
            by = rel.factor if rel.factor is not None else rel.nparts
            outer, inner = split_extents(ext[rel.parent], int(by.value),
                                         rel.factor is not None, who)
            ext[rel.outer] = _in_loop_dtype(st, rel.outer, ana.simplify(outer))
            ext[rel.inner] = _in_loop_dtype(st, rel.inner, ana.simplify(inner))
        elif isinstance(rel, FuseRel):
            fused = fused_extent(ext[rel.outer], ext[rel.inner], who,
                                 rel.fused.iter_type == REDUCE)
            ext[rel.fused] = _in_loop_dtype(st, rel.fused, ana.simplify(fused))
    return ext


def _in_loop_dtype(st: Stage, iv, extent: E.Expr) -> E.Expr:
    """The extent in the dtype of iv's loop variable (chosen by the schedule for the whole
    domain; an attached stage's region is usually smaller, but may not be)."""
    dtype = iv.var.dtype
    if extent.dtype == dtype:
        return extent
    if not isinstance(extent, Const):
        return E.cast(extent, dtype)
    if loop_dtype(dtype, int(extent.value)) != dtype:
        raise LoweringError(f"stage '{st.name}': loop '{iv.var.name}' would run "
                            f"{int(extent.value)} iterations, more than its {dtype} loop "
                            f"variable counts")
    return E.const(int(extent.value), dtype)


def leaf_to_root(st: Stage, bounds: StageBounds) -> dict:
    """Root var -> offset expression in the stage's leaf loop vars (without range.min)."""
    vals = {iv: iv.var for iv in st.leaf_iter_vars}
    for rel in reversed(st.relations):
        if isinstance(rel, SplitRel):
            f = rel.factor if rel.factor is not None else bounds.extent[rel.inner]
            vals[rel.parent] = vals[rel.outer] * f + vals[rel.inner]
        else:
            inner_ext = bounds.extent[rel.inner]
            vals[rel.outer] = E.binary("floordiv", vals[rel.fused], inner_ext)
            vals[rel.inner] = E.binary("floormod", vals[rel.fused], inner_ext)
    return vals


def root_values(st: Stage, bounds: StageBounds) -> dict:
    """Root var -> its value (range.min + offset) in terms of the leaf loop vars."""
    offs = leaf_to_root(st, bounds)
    return {iv: root_value(iv, r, offs[iv]) for iv, r in bounds.root.items()}


def root_value(iv, r: Range, offset: E.Expr) -> E.Expr:
    """range.min + offset in the root var's dtype: the offset is int64 where split or fused
    loops count past int32, but a value that passes its guard fits the root's dtype."""
    value = offset if _is_zero(r.min) else r.min + offset
    return value if value.dtype == iv.var.dtype else E.cast(value, iv.var.dtype)


def _is_zero(e) -> bool:
    return isinstance(e, Const) and e.value == 0


def _roots(st: Stage) -> list:
    return list(st.op.axis) + list(st.op.reduce_axis)


def infer_bounds(stages: list, bodies: dict, readers: dict) -> dict:
    """stage -> StageBounds for every computed (non-inline, non-placeholder) stage.

    bodies: stage -> body exprs with inlined stages substituted; readers: stage -> the
    stages whose (inlined) bodies read it.
    """
    result: dict = {}
    for st in reversed(stages):
        if isinstance(st.op, WHOLE_OPS):
            result[st] = StageBounds(*whole_bounds(st))
            continue
        if not isinstance(st.op, ComputeOp) or st.attach_type == INLINE:
            continue
        ana = Analyzer()
        scan = scan_updated_by(st)
        if st.attach_type == ROOT:
            root = {iv: iv.dom for iv in _roots(st)}
        elif scan is not None:
            root = update_region(st, scan)
        else:
            root = _attached_region(st, bodies, readers, result, ana)
        b = StageBounds(root=root)
        b.extent = pass_down(st, root, ana)
        result[st] = b
    return result


def thread_relaxed_loops(st: Stage, loops: list) -> set:
    """The enclosing loops over which `st` is shared rather than per-iteration: a stage in
    GPU shared memory is one per thread block, so it covers what all the block's threads
    (its enclosing threadIdx loops and virtual threads) read, as in TVM."""
    if st.scope != "shared":
        return set()
    out = set()
    for stage, iv in loops:
        attr = stage.iter_attrs.get(iv)
        if attr is not None and attr.kind == "thread_binding" and \
                (attr.thread_tag.startswith("threadIdx")
                 or attr.thread_tag in ("vthread", "cthread")):
            out.add(iv)
    return out


def _loop_range_map(loops: list, bounds: dict, fixed: set) -> dict:
    """Var -> (0, extent-1) for every loop not held fixed."""
    out = {}
    for stage, iv in loops:
        if iv.var in fixed:
            continue
        ext = bounds[stage].extent[iv]
        out[iv.var] = (E.const(0, ext.dtype), ext - 1)
    return out


def _attached_region(st: Stage, bodies: dict, readers: dict, bounds: dict,
                     ana: Analyzer) -> dict:
    fixed_loops = enclosing_loops(st)
    shared_by = thread_relaxed_loops(st, fixed_loops)
    fixed = {iv.var for _, iv in fixed_loops if iv not in shared_by}
    _bind_const_loop_ranges(fixed_loops, bounds, ana)
    ndim = len(st.op.axis)
    lo: list = [None] * ndim
    hi: list = [None] * ndim
    unbounded = [False] * ndim
    span: list = [(None, None)] * ndim  # exact int bounds of the reads, where known
    for q in readers.get(st, []):
        q_loops = enclosing_loops(q) + [(q, iv) for iv in q.leaf_iter_vars]
        if not fixed <= {iv.var for _, iv in q_loops}:
            raise LoweringError(f"stage '{st.name}' is computed inside loop "
                                f"'{st.attach_ivar.var.name}' of '{st.attach_stage.name}', but "
                                f"its reader '{q.name}' runs outside that loop; use "
                                f"compute_root or attach it at an outer loop")
        ranges = _loop_range_map(q_loops, bounds, fixed)
        exact = _int_ranges(ana, ranges)
        vals = root_values(q, bounds[q])
        vmap = {iv.var: v for iv, v in vals.items()}
        for load in _loads_of(bodies[q], st):
            for k, idx in enumerate(load.indices):
                idx = ana.simplify(E.substitute(idx, vmap))
                span[k] = _union(span[k], exact.const_bound(idx))
                itv = interval(idx, ranges, ana)
                if itv is None:
                    unbounded[k] = True
                    continue
                lo[k] = itv[0] if lo[k] is None else ana.simplify(E.binary("min", lo[k], itv[0]))
                hi[k] = itv[1] if hi[k] is None else ana.simplify(E.binary("max", hi[k], itv[1]))
    root = {}
    for k, iv in enumerate(st.op.axis):
        if unbounded[k] or lo[k] is None or _wider_than(span[k], iv.var.dtype):
            root[iv] = iv.dom  # the whole domain: the guards keep reads outside it out
            continue
        extent = ana.simplify(hi[k] - lo[k] + 1)
        if not isinstance(extent, Const):
            ub = ana.const_bound(extent)[1]
            if ub is None or ub <= 0:
                root[iv] = iv.dom
                continue
            extent = E.const(ub, extent.dtype)
        root[iv] = Range(lo[k], extent)
    for iv in st.op.reduce_axis:
        root[iv] = iv.dom
    return root


def _int_ranges(ana: Analyzer, ranges: dict) -> Analyzer:
    """ana's constant loop ranges and those of the loops `ranges` spans: its const_bound
    is exact, where interval()'s constant ends are folded in the index's dtype (and wrap).
    It bounds the reads over the fixed loops' whole ranges too, more than one iteration's
    region: enough to tell a region int32 cannot count, which needs reads 2**31 apart."""
    out = Analyzer(dict(ana.ranges))
    for v, (lo, hi) in ranges.items():
        if isinstance(lo, Const) and isinstance(hi, Const):
            out.bind(v, int(lo.value), int(hi.value))
    return out


def _union(a: tuple, b: tuple) -> tuple:
    if a == (None, None):
        return b
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def _wider_than(span: tuple, dtype: str) -> bool:
    """Do reads spanning `span` cover more elements than `dtype` counts? (Their region's
    extent, folded in that dtype, wrapped.)"""
    lo, hi = span
    return lo is not None and hi is not None and hi - lo + 1 > loop_extent_max(dtype)


def _bind_const_loop_ranges(loops: list, bounds: dict, ana: Analyzer) -> None:
    """Let the analyzer know constant extents of the enclosing loops (for upper bounds)."""
    for stage, iv in loops:
        ext = bounds[stage].extent[iv]
        if isinstance(ext, Const):
            ana.bind(iv.var, 0, int(ext.value) - 1)


def _loads_of(body: tuple, st: Stage) -> list:
    outs = {st.op.output(k) for k in range(st.op.num_outputs)}
    found = []

    def visit(e):
        if isinstance(e, TensorLoad) and e.tensor in outs:
            found.append(e)
    for b in body:
        E.pre_order(b, visit)
    return found


def covers_domain(st: Stage, bounds: dict) -> bool:
    """Whether an attached stage's regions, over all iterations of the loops around it,
    provably cover its whole domain (each element written): what passing it in args needs.

    Sufficient, not necessary: on each axis the region starts at sum(c_j * v_j) over
    enclosing loops v_j (from 0, V_j iterations) that no other axis uses; taken by growing
    c_j, each step c_j is at most the span L covered so far (first the region's extent),
    which then grows to (V_j - 1) * c_j + L, and the last span reaches the domain's extent.
    """
    loop_extent = {iv.var: bounds[stage].extent[iv] for stage, iv in enclosing_loops(st)}
    ana = Analyzer({v: (0, None) for v in _size_vars(st)})
    used: set = set()
    for iv in st.op.axis:
        region, dom = bounds[st].root[iv], iv.dom
        lin = ana.linear(region.min)
        if lin.const != 0 or any(atom not in loop_extent or atom in used or c <= 0
                                 for atom, c in lin.terms.values()):
            return False
        used.update(atom for atom, _ in lin.terms.values())
        span, exact_split = region.extent, False
        for atom, c in sorted(lin.terms.values(), key=lambda term: term[1]):
            step = E.const(c, span.dtype)
            if not ana.can_prove(E.binary("le", step, span)):
                return False
            trips = loop_extent[atom]
            # a split by c loops ceil(extent / c) times over spans of c: that covers it
            exact_split = ana.can_prove(E.binary("eq", step, span)) and E.structural_equal(
                ana.simplify(trips),
                ana.simplify(E.binary("floordiv", dom.extent + (c - 1), step)))
            span = ana.simplify((trips - 1) * c + span)
        if not (exact_split or ana.can_prove(E.binary("ge", span, dom.extent))):
            return False
    return True


def _size_vars(st: Stage) -> list:
    """The symbolic sizes in the stage's domain (never negative)."""
    out: list = []
    for iv in st.op.axis:
        out += [v for v in E.free_vars(iv.dom.extent) if v not in out]
    return out
