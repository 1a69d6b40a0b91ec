"""Schedule -> loop nest: the statement tree before storage flattening.

Takes a Schedule and the argument tensors, gives a Stmt of For loops, ProducerRealize
scopes and ProducerStores: one loop nest per stage in its leaf order, attached stages
inside the loop they are attached to, stages fused by compute_with inside their parent's
innermost shared loop, inlined stages substituted into their readers, reductions split into
an init nest and an update nest, and guards where a split does not divide. Imports
te.compute, te.schedule, ir, bound, arith, compute_with, index_width, prefetch,
static_bounds.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.expr import Const, Reduce, TensorLoad, Var
from ..compute.scan_extern import ScanOp
from ..compute.tensor import DATA_PAR, REDUCE, ComputeOp
from ..errors import LoweringError
from ..schedule.schedule import Schedule
from ..schedule.stage import INLINE, ROOT, SCOPE, SplitRel, Stage
from . import ir
from .arith import Analyzer, interval
from .bound import covers_domain, enclosing_loops, infer_bounds, leaf_to_root, root_value
from .cross_thread import check_store_predicate, cross_thread_nest, thread_reduce_tags
from .compute_with import check_extents, check_same_iteration, fusions, inner_part
from .index_width import exact_indices
from .prefetch import prefetch_stmt
from .scan_extern import (WHOLE_OPS, aliased_ops, extern_nest, init_stages,
                          scan_nest, scan_updated_by, time_axes, whole_region)
from .printer import print_expr
from .static_bounds import check_static_reads
from .tensorize import tensorize


def inline_bodies(sch: Schedule) -> dict:
    """stage -> body exprs with every inlined producer substituted, for computed stages."""
    inlined: dict = {}  # op -> (axis vars, its body as written), substituted where read
    bodies: dict = {}
    for st in sch.stages:
        if not isinstance(st.op, ComputeOp):
            continue
        if st.attach_type == INLINE:
            inlined[st.op] = ([iv.var for iv in st.op.axis], st.op.body)
        else:
            bodies[st] = tuple(_substitute_inlined(b, inlined) for b in st.op.body)
    return bodies


def _substitute_inlined(e: E.Expr, inlined: dict) -> E.Expr:
    """e with each load of an inlined stage replaced by that stage's body at the load's
    indices, in one walk of the result: a chain of inlined stages is substituted once,
    not once per stage along it (which made a chain of n stages cost n^2)."""
    done: list = []
    todo: list = [(e, {}, None)]  # (node, its axis vars -> indices, children | load)
    while todo:
        node, env, kids = todo.pop()
        if kids is None:
            if isinstance(node, Var):
                done.append(env.get(node, node))
                continue
            kids = E.children(node)
            if kids:
                todo.append((node, env, kids))
                todo.extend((k, env, None) for k in reversed(kids))
            else:
                done.append(node)
            continue
        new = tuple(done[len(done) - len(kids):])
        del done[len(done) - len(kids):]
        if isinstance(node, TensorLoad) and node.tensor.op in inlined:
            axis_vars, body = inlined[node.tensor.op]
            todo.append((body[node.tensor.value_index], dict(zip(axis_vars, new)), None))
        else:
            done.append(E.with_children(node, new))
    return done[0]


def _readers(stages: list, bodies: dict) -> dict:
    """stage -> stages whose (inlined) bodies read its outputs."""
    by_op = {st.op: st for st in stages}
    out: dict = {}
    for q, body in bodies.items():
        found = []

        def visit(e):
            if isinstance(e, TensorLoad) and e.tensor.op in by_op:
                found.append(by_op[e.tensor.op])
        for b in body:
            E.pre_order(b, visit)
        for p in dict.fromkeys(found):
            out.setdefault(p, []).append(q)
    return out


class LoopBuilder:
    """Builds the loop nest of every stage, given inferred bounds."""

    def __init__(self, sch: Schedule, bodies: dict, bounds: dict, arg_tensors: list):
        self.sch, self.bodies, self.bounds = sch, bodies, bounds
        self.arg_ops = {t.op for t in arg_tensors}
        self.arg_tensors = set(arg_tensors)
        self.attached: dict = {}
        self.reads: dict = {}  # stage -> (body over leaf vars, Analyzer), for prefetch
        for st in sch.stages:
            if st in bounds and st.attach_type == SCOPE:
                self.attached.setdefault((st.attach_stage, st.attach_ivar), []).append(st)
        self.fusions = fusions(sch, self.attached)  # parent -> [(stage, depth)]
        self.fused_into = {st for group in self.fusions.values() for st, _ in group}
        self.shared_parts: dict = {}  # (parent, leaf) -> fused stages' parts in that loop
        self.scan_inits = init_stages(sch)  # built inside their scan's nest
        self.aliased = aliased_ops(sch)  # stored in a scan's output: no storage of their own
        self.scan_times = {st: st.op.axis[0] for st in bounds if scan_updated_by(st)}

    def build(self) -> ir.Stmt:
        for st in self.bounds:
            if st.attach_type == SCOPE and st.op in self.arg_ops \
                    and not covers_domain(st, self.bounds):
                # TVM writes what the loop's iterations compute and leaves the rest unwritten
                raise LoweringError(f"stage '{st.name}' is passed in args but computed inside "
                                    f"loop '{st.attach_ivar.var.name}' of "
                                    f"'{st.attach_stage.name}', whose iterations do not "
                                    f"provably compute all of it, so part of the argument "
                                    f"would never be written; use compute_root for a tensor "
                                    f"you pass in args")
            for iv, attr in st.iter_attrs.items():
                if attr.prefetch and iv not in st.leaf_iter_vars:
                    raise LoweringError(f"prefetch at loop '{iv.var.name}' of stage "
                                        f"'{st.name}': the loop was split or fused "
                                        f"afterwards; prefetch at a current loop")
                if attr.pipeline is not None:
                    _check_pipeline(st, iv, attr.pipeline)
        roots = [st for st in self.sch.stages if st in self.bounds and st.attach_type == ROOT
                 and st not in self.scan_inits]
        return self._wrap_stages(roots, None)

    def _wrap_stages(self, stages: list, inner: ir.Stmt | None) -> ir.Stmt:
        body = inner
        for st in reversed(stages):
            if st not in self.fused_into:  # else its nest is inside its parent's loops
                body = ir.seq(self.stage_nest(st), body)
            if isinstance(st.op, WHOLE_OPS) or (st.op not in self.arg_ops
                                                and st.op not in self.aliased):
                body = self._realize(st, body)
        return body

    def _realize(self, st: Stage, body: ir.Stmt) -> ir.Stmt:
        if isinstance(st.op, WHOLE_OPS):
            for k in reversed(range(st.op.num_outputs)):
                out = st.op.output(k)
                if out not in self.arg_tensors:
                    body = ir.ProducerRealize(out, whole_region(out), st.scope, body)
            return body
        b = self.bounds[st]
        region = tuple(b.root[iv] for iv in st.op.axis)
        aligns = tuple((list(st.op.axis).index(iv), f, o) for iv, f, o in st.storage_aligns)
        for k in reversed(range(st.op.num_outputs)):
            body = ir.ProducerRealize(st.op.output(k), region, st.scope, body, aligns)
        return body

    # -- one stage ----------------------------------------------------------------------
    def stage_nest(self, st: Stage) -> ir.Stmt:
        if isinstance(st.op, ScanOp):
            inits = [self.stage_nest(s) for s, scan in self.scan_inits.items() if scan is st]
            return scan_nest(st, inits, self._loops(st, st.leaf_iter_vars, ir.SeqStmt(())))
        if not isinstance(st.op, ComputeOp):
            return extern_nest(st)
        b = self.bounds[st]
        ana = Analyzer()
        for stage, iv in enclosing_loops(st) + [(st, iv) for iv in st.leaf_iter_vars]:
            ext = self.bounds[stage].extent[iv]
            ana.bind(iv.var, 0, int(ext.value) - 1 if isinstance(ext, Const) else None)
        offs = leaf_to_root(st, b)
        values = {iv: ana.simplify(root_value(iv, b.root[iv], offs[iv])) for iv in b.root}
        vmap = {iv.var: v for iv, v in values.items()}
        leaf_ranges = {iv.var: (E.const(0, b.extent[iv].dtype), b.extent[iv] - 1)
                       for iv in st.leaf_iter_vars}
        guards = {iv: self._guard(st, iv, offs[iv], values[iv], ana, leaf_ranges)
                  for iv in b.root}
        split_guards = _split_guards(st, b, offs, ana, leaf_ranges)
        body = tuple(E.substitute(x, vmap) for x in self.bodies[st])
        out_idx = tuple(values[iv] for iv in st.op.axis)
        self.reads[st] = (body, out_idx, ana)
        self._fuse_into(st)
        leaves = st.leaf_iter_vars
        check_store_predicate(st, leaves)
        first_red = next((k for k, iv in enumerate(leaves) if iv.iter_type == REDUCE), None)
        data_guard = _conj([guards[iv] for iv in st.op.axis] + split_guards[DATA_PAR])
        pos = next((k for k, iv in enumerate(leaves) if iv in st.iter_attrs
                    and st.iter_attrs[iv].tensorize is not None), None)
        if pos is not None:
            red_guard = _conj([guards[iv] for iv in st.op.reduce_axis] + split_guards[REDUCE])
            parts = tensorize(st, st.iter_attrs[leaves[pos]].tensorize, leaves, pos, values,
                              body, out_idx, b.extent)
            return self._tensorized(st, leaves, pos, first_red, parts,
                                    E.logical("and", data_guard, red_guard))
        if first_red is None or not isinstance(body[0], Reduce):
            stores = ir.seq(*[ir.ProducerStore(st.op.output(k), out_idx, v)
                              for k, v in enumerate(body)])
            return self._loops(st, leaves, _guarded(data_guard, stores))
        red_guard = _conj([guards[iv] for iv in st.op.reduce_axis] + split_guards[REDUCE])
        if thread_reduce_tags(st, leaves):
            return cross_thread_nest(self, st, body, out_idx, first_red, data_guard, red_guard)
        init = _guarded(data_guard, self._init_store(st, body, out_idx))
        update = _guarded(E.logical("and", data_guard, red_guard),
                          self._update_store(st, body, out_idx))
        init_loops = [iv for iv in leaves[first_red:] if iv.iter_type != REDUCE]
        init_nest = self._loops(st, init_loops, init, attach=False)
        update_nest = self._loops(st, leaves[first_red:], update)
        return self._loops(st, leaves[:first_red], ir.seq(init_nest, update_nest))

    def _tensorized(self, st: Stage, leaves: list, pos: int, first_red, parts,
                    guard: E.Expr) -> ir.Stmt:
        """The stage's nest with leaves[pos:] replaced by the intrinsic's statements: its
        body, or where loops of the reduction stay outside, reset in the init nest and
        update in the update nest."""
        who = f"tensorize on stage '{st.name}' at loop '{leaves[pos].var.name}'"
        if not (isinstance(guard, Const) and guard.value):
            raise LoweringError(f"{who}: the loops need a bounds guard ({print_expr(guard)}): "
                                f"split by factors that divide the extents")
        for iv in leaves[pos:]:
            if (st, iv) in self.attached:
                raise LoweringError(f"{who}: a stage is computed at loop '{iv.var.name}' "
                                    f"inside the tensorized loops; attach it further out")
        if first_red is None or first_red >= pos:
            return self._loops(st, leaves[:pos], parts.body)
        if parts.reset is None or parts.update is None:
            raise LoweringError(f"{who}: reduction loop '{leaves[first_red].var.name}' stays "
                                f"outside the tensorized loops, so the intrinsic must give "
                                f"(body, reset, update); it gives a body only")
        init_loops = [iv for iv in leaves[first_red:pos] if iv.iter_type != REDUCE]
        init_nest = self._loops(st, init_loops, parts.reset, attach=False)
        update_nest = self._loops(st, leaves[first_red:pos], parts.update)
        return self._loops(st, leaves[:first_red], ir.seq(init_nest, update_nest))

    def _fuse_into(self, parent: Stage) -> None:
        """Build the nests of the stages fused into `parent` (compute_with) and keep the
        body of each one's innermost shared loop for _loops to put in parent's loop."""
        for st, depth in self.fusions.get(parent, ()):
            check_extents(st, parent, depth, self.bounds)
            nest = self.stage_nest(st)
            check_same_iteration(st, parent, depth, self.reads,
                                 {s: self.bounds[s].extent for s in (st, parent)})
            self.shared_parts.setdefault((parent, parent.leaf_iter_vars[depth]), []).append(
                inner_part(nest, st, parent, depth))

    def _guard(self, st: Stage, iv, offset, value, ana: Analyzer, leaf_ranges: dict) -> E.Expr:
        """The condition under which root var iv's value lies in range (True if provable)."""
        r = self.bounds[st].root[iv]
        conds = []
        itv = interval(offset, leaf_ranges, ana)
        if itv is None or not ana.can_prove(E.binary("lt", itv[1], r.extent)):
            conds.append(ana.simplify(E.binary("lt", offset, r.extent)))
        inside = self.scan_times.get(st) is iv  # one time step of its scan: in the domain
        if r is not iv.dom and not inside:  # an attached region may reach outside the domain
            conds.append(ana.simplify(E.binary("ge", value, iv.dom.min)))
            conds.append(ana.simplify(E.binary("lt", value, iv.dom.min + iv.dom.extent)))
        return _conj(conds)

    def _init_store(self, st: Stage, body: tuple, idx: tuple) -> ir.Stmt:
        red = body[0]
        inits = red.init if red.init else red.combiner.identity
        return ir.seq(*[ir.ProducerStore(st.op.output(k), idx, inits[k])
                        for k in range(len(body))])

    def _update_store(self, st: Stage, body: tuple, idx: tuple) -> ir.Stmt:
        return self.update_store(body, [st.op.output(k) for k in range(len(body))], idx,
                                 st.name)

    def update_store(self, body: tuple, outputs: list, idx: tuple,
                     name: str = "") -> ir.Stmt:
        """outputs[k][idx] = the combination of its value and reduction body[k]'s source."""
        red = body[0]
        comb = red.combiner
        name = name or outputs[0].name
        current = [TensorLoad(t.dtype, t, idx) for t in outputs]
        vmap = dict(zip(comb.lhs, current))
        vmap.update(zip(comb.rhs, red.source))
        results = [E.substitute(r, vmap) for r in comb.result]
        if len(results) == 1:
            stmt = ir.ProducerStore(outputs[0], idx, results[0])
        else:  # every result reads every current value: compute all before storing
            temps = [Var(f"{name}_v{k}", r.dtype) for k, r in enumerate(results)]
            stmt = ir.seq(*[ir.ProducerStore(outputs[k], idx, t)
                            for k, t in enumerate(temps)])
            for t, r in reversed(list(zip(temps, results))):
                stmt = ir.LetStmt(t, r, stmt)
        if not (isinstance(red.condition, Const) and red.condition.value):
            # one If per conjunct, the first outermost: `a && b` would evaluate both sides
            # (codegen and the interpreter compute each operand), and b may read a tensor
            # at an index that only a holds in bounds (rfactor's tail check, then a `where`
            # that reads M[i, k])
            for cond in reversed(_conjuncts(red.condition)):
                stmt = ir.IfThenElse(cond, stmt)
        return stmt

    def loops(self, st: Stage, leaves: list, body: ir.Stmt) -> ir.Stmt:
        """The loops `leaves` of `st` around `body`, with what is attached to them."""
        return self._loops(st, leaves, body)

    def _loops(self, st: Stage, leaves: list, body: ir.Stmt, attach: bool = True) -> ir.Stmt:
        b = self.bounds[st]
        for iv in reversed(leaves):
            attr = st.iter_attrs.get(iv)
            pipelined = attach and attr is not None and attr.pipeline is not None
            if pipelined:  # the software_pipeline pass runs this part an iteration later
                body = ir.For(Var(iv.var.name + ".late", iv.var.dtype),
                              E.const(0, iv.var.dtype), E.const(1, iv.var.dtype), ir.SERIAL,
                              body, pragmas=((ir.PIPELINE_LATE_PART, None),))
            if attach and (st, iv) in self.attached:
                body = self._wrap_stages(self.attached[(st, iv)], body)
            if attach and attr and attr.prefetch:
                body = ir.seq(self._prefetches(st, iv, attr), body)
            if attach and (st, iv) in self.shared_parts:  # compute_with: theirs run first
                body = ir.seq(*self.shared_parts[(st, iv)], body)
            kind = attr.kind if attr else ir.SERIAL
            ext = b.extent[iv]
            pragmas = tuple(attr.pragmas) if attr else ()
            if pipelined:
                pragmas += ((ir.SOFTWARE_PIPELINE, attr.pipeline[1].var if attr.pipeline
                             else None),)
            body = ir.For(iv.var, E.const(0, ext.dtype), ext, kind, body,
                          attr.thread_tag if attr else "", pragmas)
        return body

    def _prefetches(self, st: Stage, iv, attr) -> ir.Stmt:
        if attr.kind == ir.VECTORIZED:
            raise LoweringError(f"prefetch at loop '{iv.var.name}' of stage '{st.name}': the "
                                f"loop is vectorized; prefetch at an enclosing loop")
        body, out_idx, ana = self.reads[st]
        extents = self.bounds[st].extent
        return ir.seq(*[prefetch_stmt(st, iv, t, off, body, out_idx, extents, ana, loc)
                        for t, off, loc in attr.prefetch])


def _split_guards(st: Stage, b, offs: dict, ana: Analyzer, leaf_ranges: dict) -> dict:
    """iter type -> conditions that each split loop below the root stays in its extent.

    The root guards alone are not enough: in split(k, 1) then split(k.inner, 3), the
    values k.outer + k.inner.inner cover 0..extent-1 several times over, each one in
    range, so k.inner < 1 must hold too (TVM's bound check on every non-dividing split)."""
    out: dict = {DATA_PAR: [], REDUCE: []}
    roots = set(b.root)
    for rel in st.relations:
        p = rel.parent if isinstance(rel, SplitRel) else None
        if p is None or p in roots:
            continue
        itv = interval(offs[p], leaf_ranges, ana)
        if itv is None or not ana.can_prove(E.binary("lt", itv[1], b.extent[p])):
            out[p.iter_type].append(ana.simplify(E.binary("lt", offs[p], b.extent[p])))
    return out


def _check_pipeline(st: Stage, iv, interleave: tuple) -> None:
    who = f"pipeline of loop '{iv.var.name}' of stage '{st.name}'"
    if iv not in st.leaf_iter_vars:
        raise LoweringError(f"{who}: the loop was split or fused afterwards; pipeline a "
                            f"current loop")
    if interleave and interleave[1] not in interleave[0].leaf_iter_vars:
        raise LoweringError(f"{who}: interleave loop '{interleave[1].var.name}' of stage "
                            f"'{interleave[0].name}' was split or fused afterwards; "
                            f"interleave with a current loop")


def _conjuncts(cond: E.Expr) -> list:
    """[a, b, c] for a && b && c, left to right."""
    if isinstance(cond, E.Binary) and cond.op == "and":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _conj(conds: list) -> E.Expr:
    out = E.const(True)
    for c in conds:
        out = E.logical("and", out, c)
    return out


def _guarded(cond: E.Expr, stmt: ir.Stmt) -> ir.Stmt:
    if isinstance(cond, Const):
        # Always false: the stage's region lies outside its domain (its only read is
        # behind a condition that never holds), so it has nothing to compute.
        return stmt if cond.value else ir.SeqStmt(())
    return ir.IfThenElse(cond, stmt)


def schedule_to_stmt(sch: Schedule, arg_tensors: list, index_limit: int) -> ir.Stmt:
    """The full loop nest of a schedule (before flattening); sizes and dimensions are below
    `index_limit` (the target's)."""
    bodies = inline_bodies(sch)
    check_static_reads(bodies, time_axes(sch))
    bodies = exact_indices(bodies, arg_tensors, index_limit)
    computed = [st for st in sch.stages if st in bodies]
    bounds = infer_bounds(sch.stages, bodies, _readers(computed, bodies))
    return LoopBuilder(sch, bodies, bounds, arg_tensors).build()
