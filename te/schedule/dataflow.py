"""Schedule primitives that rewrite the dataflow graph: cache_read, cache_write, rfactor.

Takes a Schedule and gives new stages whose operations read or produce copies of a tensor;
readers are rebuilt with the same axes and a rewritten body, so loop transformations
already recorded on them stay valid. Imports te.compute, stage and steps (schedule.py, which
calls these functions, only for annotations).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..compute import expr as E
from ..compute.api import thread_axis
from ..compute.expr import Reduce, TensorLoad, Var
from ..compute.tensor import DATA_PAR, REDUCE, ComputeOp, IterVar, Range, Tensor
from ..errors import ScheduleError
from . import steps as S
from .stage import FuseRel, SplitRel, Stage

if TYPE_CHECKING:  # for annotations only: schedule.py imports this module
    from .schedule import Schedule


def _replace_loads(body: tuple, mapping: dict) -> tuple:
    def rewrite(e):
        if isinstance(e, TensorLoad) and e.tensor in mapping:
            return TensorLoad(e.dtype, mapping[e.tensor], e.indices)
        return None
    return tuple(E.transform(b, rewrite) for b in body)


def _rebuild(op: ComputeOp, body: tuple) -> ComputeOp:
    return ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis, body)


def replace_dataflow(sch: Schedule, mapping: dict, only: list | None = None) -> None:
    """Make stages (all, or `only`) read mapping[t] instead of t, propagating op rebuilds."""
    mapping = dict(mapping)
    for st in sch.stages:
        if not isinstance(st.op, ComputeOp) or (only is not None and st not in only):
            continue
        if not any(t in mapping for t in st.op.input_tensors):
            continue
        old = st.op
        st.op = _rebuild(old, _replace_loads(old.body, mapping))
        sch.stage_map[st.op] = st
        if only is None:
            for k in range(old.num_outputs):
                mapping[old.output(k)] = st.op.output(k)
        else:  # downstream readers of a rebuilt reader must follow it
            _follow(sch, old, st.op)


def _follow(sch: Schedule, old, new) -> None:
    mapping = {old.output(k): new.output(k) for k in range(old.num_outputs)}
    replace_dataflow(sch, mapping)


def _check_scope(scope: str, who: str) -> None:
    if scope not in S.SCOPES:
        raise ScheduleError(f"{who}: scope must be one of {', '.join(S.SCOPES)}, got {scope!r}")


def cache_read(sch: Schedule, tensor: Tensor, scope: str, readers) -> Tensor:
    """A copy of `tensor` in `scope` that the given readers read instead."""
    _check_scope(scope, "cache_read")
    if not isinstance(tensor, Tensor):
        raise ScheduleError(f"cache_read: tensor must be a Tensor, got {type(tensor).__name__}")
    src_stage = sch[tensor]
    tensor = src_stage.op.output(tensor.value_index)
    readers = readers if isinstance(readers, (list, tuple)) else [readers]
    reader_stages = []
    for r in readers:
        st = sch[r]
        if tensor not in st.op.input_tensors:
            raise ScheduleError(f"cache_read: '{st.name}' does not read '{tensor.name}'")
        reader_stages.append(st)
    if not reader_stages:
        raise ScheduleError("cache_read: readers must name at least one stage")
    sch.steps.append(S.CacheRead(src_stage._ref(), tensor.value_index, scope,
                                 tuple(st._ref() for st in reader_stages)))
    names = [iv.var.name for iv in src_stage.op.axis] if isinstance(src_stage.op, ComputeOp) \
        else [f"ax{k}" for k in range(tensor.ndim)]
    axis = tuple(IterVar(Range(E.const(0, s.dtype), s), Var(n, s.dtype), DATA_PAR)
                 for n, s in zip(names, tensor.shape))
    body = (TensorLoad(tensor.dtype, tensor, tuple(iv.var for iv in axis)),)
    cache_op = ComputeOp(f"{tensor.name}.{scope}", "", {}, axis, (), body)
    pos = sch.stages.index(src_stage) + 1
    cache_stage = sch._add_stage(cache_op, pos)
    cache_stage.scope = scope
    replace_dataflow(sch, {tensor: cache_op.output(0)}, only=reader_stages)
    return cache_op.output(0)


def cache_write(sch: Schedule, tensor, scope: str):
    """Compute `tensor` into a cache in `scope`; the original stage becomes a copy-out."""
    _check_scope(scope, "cache_write")
    tensors = tensor if isinstance(tensor, (list, tuple)) else [tensor]
    st = sch[tensors[0]]
    op = st.op
    if not isinstance(op, ComputeOp):
        raise ScheduleError(f"cache_write: '{st.name}' is a placeholder; only computed "
                            f"tensors can be cached")
    if st.relations or st.iter_attrs or st.attach_type != "root":
        raise ScheduleError(f"cache_write on stage '{st.name}': apply cache_write before "
                            f"any other primitive on this stage")
    sch.steps.append(S.CacheWrite(st._ref(), scope))
    axis = tuple(IterVar(iv.dom, Var(iv.var.name + ".c", iv.var.dtype), DATA_PAR)
                 for iv in op.axis)
    vmap = {old.var: new.var for old, new in zip(op.axis, axis)}
    body = tuple(E.substitute(b, vmap) for b in op.body)
    cache_op = ComputeOp(f"{op.name}.{scope}", op.tag, op.attrs, axis, op.reduce_axis, body)
    pos = sch.stages.index(st)
    cache_stage = sch._add_stage(cache_op, pos)
    cache_stage.scope = scope
    copy_body = tuple(TensorLoad(cache_op.output_dtype(k), cache_op.output(k),
                                 tuple(iv.var for iv in op.axis))
                      for k in range(op.num_outputs))
    new_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, (), copy_body)
    st.op = new_op
    sch.stage_map[new_op] = st
    st.reset_loops()
    _follow(sch, op, new_op)
    outs = [cache_op.output(k) for k in range(cache_op.num_outputs)]
    return outs if isinstance(tensor, (list, tuple)) else outs[0]


def _root_values(st: Stage, leaf_values: dict) -> dict:
    """Express every iter var reachable upward from the given leaf values (pass-up)."""
    vals = dict(leaf_values)
    for rel in reversed(st.relations):
        if isinstance(rel, SplitRel) and rel.outer in vals and rel.inner in vals:
            f = rel.factor if rel.factor is not None else rel.inner.dom.extent
            vals[rel.parent] = E.binary("add", E.binary("mul", vals[rel.outer], f),
                                        vals[rel.inner])
        elif isinstance(rel, FuseRel) and rel.fused in vals:
            ext = rel.inner.dom.extent
            vals[rel.outer] = E.binary("floordiv", vals[rel.fused], ext)
            vals[rel.inner] = E.binary("floormod", vals[rel.fused], ext)
    return vals


def rfactor(sch: Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
    """Factor the reduction over `axis` into a new data axis of an intermediate tensor."""
    st = sch[tensor]
    op = st.op
    if not isinstance(op, ComputeOp) or not op.is_reduction:
        raise ScheduleError(f"rfactor: '{st.name}' is not a reduction")
    st._check_leaf(axis, "rfactor")
    if axis.iter_type != REDUCE:
        raise ScheduleError(f"rfactor on stage '{st.name}': axis '{axis.var.name}' is not a "
                            f"reduction axis")
    if not 0 <= factor_axis <= len(op.axis):
        raise ScheduleError(f"rfactor on stage '{st.name}': factor_axis must be in "
                            f"0..{len(op.axis)}, got {factor_axis}")
    if any(isinstance(r, FuseRel) and r.fused.iter_type == DATA_PAR for r in st.relations) \
            or any(r.parent.iter_type == DATA_PAR for r in st.relations
                   if isinstance(r, SplitRel)) or st.iter_attrs:
        raise ScheduleError(f"rfactor on stage '{st.name}': apply rfactor before transforming "
                            f"the data-parallel axes of the stage")
    sch.steps.append(S.RFactor(st._ref(), st._axis_ref(axis), factor_axis))
    red_leaves = [iv for iv in st.leaf_iter_vars if iv.iter_type == REDUCE]
    rf_iv = IterVar(Range(E.const(0, axis.dom.extent.dtype), axis.dom.extent),
                    Var(axis.var.name, axis.var.dtype), DATA_PAR)
    new_red = {iv: IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), REDUCE)
               for iv in red_leaves if iv is not axis}
    leaf_vals = {axis: rf_iv.var}
    leaf_vals.update({iv: new.var for iv, new in new_red.items()})
    vals = _root_values(st, leaf_vals)
    first = op.body[0]
    vmap, cond = {}, first.condition
    for r in op.reduce_axis:
        vmap[r.var] = E.cast(E.binary("add", r.dom.min, vals[r]), r.var.dtype)  # int64 loops
    # the bounds first: the update nests the conjuncts in order (build_loops), so a `where`
    # that reads a tensor is evaluated only inside the axes' extents
    for bound in reversed(_split_bounds(st, vals)):
        cond = E.logical("and", bound, cond)
    cond = E.substitute(cond, vmap)
    new_axis = tuple(IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), DATA_PAR)
                     for iv in op.axis)
    vmap.update({old.var: new.var for old, new in zip(op.axis, new_axis)})
    cond = E.substitute(cond, {old.var: new.var for old, new in zip(op.axis, new_axis)})
    source = tuple(E.substitute(s, vmap) for s in first.source)
    rf_reduce = tuple(new_red.values())
    rf_axes = new_axis[:factor_axis] + (rf_iv,) + new_axis[factor_axis:]
    if rf_reduce:
        rf_body = tuple(Reduce(b.dtype, first.combiner, source, rf_reduce, cond, b.value_index)
                        for b in op.body)
        rf_op = ComputeOp(f"{op.name}.rf", op.tag, op.attrs, rf_axes, rf_reduce, rf_body)
    else:
        rf_op = ComputeOp(f"{op.name}.rf", op.tag, op.attrs, rf_axes, (),
                          tuple(E.select(cond, s, i) for s, i in
                                zip(source, first.combiner.identity)))
    pos = sch.stages.index(st)
    sch._add_stage(rf_op, pos)
    kr = IterVar(rf_iv.dom, Var(axis.var.name + ".v", axis.var.dtype), REDUCE)
    idx = [iv.var for iv in op.axis]
    idx.insert(factor_axis, kr.var)
    loads = tuple(TensorLoad(rf_op.output_dtype(k), rf_op.output(k), tuple(idx))
                  for k in range(rf_op.num_outputs))
    # init= (if any) applies once, to the final reduction; the partial sums start at the
    # combiner's identity. Its axis references stay valid: new_op keeps op.axis.
    new_body = tuple(Reduce(b.dtype, first.combiner, loads, (kr,), E.const(True), b.value_index,
                            first.init) for b in op.body)
    new_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, (kr,), new_body)
    st.op = new_op
    sch.stage_map[new_op] = st
    st.reset_loops()
    _follow(sch, op, new_op)
    outs = [rf_op.output(k) for k in range(rf_op.num_outputs)]
    return outs if rf_op.num_outputs > 1 else outs[0]


def _split_bounds(st: Stage, vals: dict) -> list:
    """`value < extent` for the parent of every split that may not divide it, root or not:
    in split(k, 1) then split(k.inner, 3), k.inner < 1 must hold as well as k < extent,
    or k.outer + k.inner.inner reaches each k several times."""
    out = []
    for rel in st.relations:
        if not isinstance(rel, SplitRel) or rel.parent not in vals:
            continue
        ext = rel.parent.dom.extent
        by = rel.factor if rel.factor is not None else rel.nparts
        if not isinstance(ext, E.Const) or ext.value % by.value:
            out.append(E.binary("lt", vals[rel.parent], ext))
    return out


def apply_steps(sch: Schedule, steps) -> Schedule:
    """Replay recorded steps (from Schedule.steps or JSON) onto a fresh schedule."""
    for k, step in enumerate(steps):
        try:
            _apply_one(sch, step)
        except (IndexError, KeyError, AttributeError) as err:
            raise ScheduleError(f"schedule replay: step {k} ({type(step).__name__}) does not "
                                f"fit this compute graph ({err})") from None
    return sch


def _stage(sch: Schedule, ref: S.StageRef) -> Stage:
    st = sch.stages[ref.index]
    if st.name != ref.name:
        raise ScheduleError(f"schedule replay: stage {ref.index} is '{st.name}', the step "
                            f"expects '{ref.name}'")
    return st


def _axis(st: Stage, ref: S.AxisRef) -> IterVar:
    iv = st.all_iter_vars[ref.index]
    if iv.var.name != ref.name:
        raise ScheduleError(f"schedule replay: axis {ref.index} of '{st.name}' is "
                            f"'{iv.var.name}', the step expects '{ref.name}'")
    return iv


def _apply_one(sch: Schedule, step) -> None:
    st = _stage(sch, step.stage)
    if isinstance(step, S.Split):
        st.split(_axis(st, step.axis), factor=step.factor, nparts=step.nparts)
    elif isinstance(step, S.Fuse):
        st.fuse(*[_axis(st, a) for a in step.axes])
    elif isinstance(step, S.Reorder):
        st.reorder(*[_axis(st, a) for a in step.axes])
    elif isinstance(step, S.Annotate):
        {"vectorized": st.vectorize, "unrolled": st.unroll,
         "parallel": st.parallel}[step.kind](_axis(st, step.axis))
    elif isinstance(step, S.Bind):
        st.bind(_axis(st, step.axis), thread_axis(step.thread_tag))
    elif isinstance(step, S.ComputeAt):
        parent = _stage(sch, step.parent)
        st.compute_at(parent, _axis(parent, step.axis))
    elif isinstance(step, S.ComputeWith):
        parent = _stage(sch, step.parent)
        st.compute_with(parent, _axis(parent, step.axis))
    elif isinstance(step, S.Pipeline):
        with_stage = None if step.with_stage is None else _stage(sch, step.with_stage)
        st.pipeline(_axis(st, step.axis), None if with_stage is None else
                    (with_stage, _axis(with_stage, step.with_axis)))
    elif isinstance(step, S.ComputeInline):
        st.compute_inline()
    elif isinstance(step, S.ComputeRoot):
        st.compute_root()
    elif isinstance(step, S.StorageAlign):
        st.storage_align(_axis(st, step.axis), step.factor, step.offset)
    elif isinstance(step, S.Pragma):
        st.pragma(_axis(st, step.axis), step.key, step.value)
    elif isinstance(step, S.StorePredicate):
        thread_vars = {tag: var for var, tag in st.thread_vars.items()}
        terms = [E.binary("eq", thread_vars[tag], 0) for tag in step.tags.split(",")
                 if tag in thread_vars]
        if len(terms) != len(step.tags.split(",")):
            raise ScheduleError(f"schedule replay: set_store_predicate on stage '{st.name}' "
                                f"names thread axes {step.tags!r}, not all bound to its loops")
        predicate = terms[0]
        for term in terms[1:]:
            predicate = E.logical("and", predicate, term)
        st.set_store_predicate(predicate)
    elif isinstance(step, S.Tensorize):
        raise ScheduleError(f"schedule replay: stage '{st.name}' was tensorized with "
                            f"intrinsic '{step.intrin}', a Python object that recorded steps "
                            f"do not hold; call tensorize on the replayed schedule")
    elif isinstance(step, S.Prefetch):
        tensor = _stage(sch, step.tensor).op.output(step.value_index)
        st.prefetch(tensor, _axis(st, step.axis), step.offset, step.locality)
    elif isinstance(step, S.CacheRead):
        readers = [_stage(sch, r).op for r in step.readers]
        sch.cache_read(st.op.output(step.value_index), step.scope, readers)
    elif isinstance(step, S.CacheWrite):
        sch.cache_write(st.op.output(0) if st.op.num_outputs == 1 else
                        [st.op.output(k) for k in range(st.op.num_outputs)], step.scope)
    elif isinstance(step, S.SetScope):
        st.set_scope(step.scope)
    elif isinstance(step, S.RFactor):
        sch.rfactor(st.op.output(0), _axis(st, step.axis), step.factor_axis)
    else:
        raise ScheduleError(f"schedule replay: unknown step {step!r}")
