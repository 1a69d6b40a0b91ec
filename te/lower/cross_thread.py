"""The loop nest of a reduction whose reduction loops are bound to GPU threads.

Takes a stage from build_loops whose leaf reduction axes include one bound to threadIdx.*
(TVM's cross-thread reduction: the reduction tutorial's `bind(B.op.reduce_axis[0], tx)`),
gives its nest: each thread accumulates its own partial result in a per-thread ('local')
buffer over the reduction loops, then an ir.ThreadAllreduce combines the partials of the
threads that share the stage's output element and runs the store once per element. The
data axes' guard holds back the accumulation and the store, never the combine itself,
which every thread of the block must reach. Read serially (the interpreter, the printed
IR), the same nest is an ordinary reduction into the partial buffer. Imports te.compute,
te.schedule's stage and ir.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.expr import Const, Reduce, TensorLoad, Var
from ..compute.tensor import REDUCE, PlaceholderOp, Range
from ..errors import LoweringError
from . import ir


def thread_reduce_tags(st, leaves: list) -> tuple:
    """The thread tags of `st`'s leaf reduction loops that are bound to threads."""
    tags = []
    for iv in leaves:
        attr = st.iter_attrs.get(iv)
        if iv.iter_type == REDUCE and attr is not None and attr.kind == ir.THREAD_BINDING:
            tags.append(attr.thread_tag)
    return tuple(tags)


def check_store_predicate(st, leaves: list) -> None:
    """Stage.set_store_predicate's thread tags must be those a reduction axis of `st` is
    bound to: the combined result is stored by the first thread of its group, where each
    of their indices is 0, so the predicate holds and adds no condition."""
    extra = set(st.store_predicate) - set(thread_reduce_tags(st, leaves))
    if extra:
        raise LoweringError(f"stage '{st.name}': set_store_predicate on {', '.join(sorted(extra))}"
                            f" is supported only for a thread axis that a reduction axis of "
                            f"the stage is bound to (TVM's cross-thread reduction)")


def cross_thread_nest(builder, st, body: tuple, out_idx: tuple, first_red: int,
                      data_guard: E.Expr, red_guard: E.Expr) -> ir.Stmt:
    """The nest of stage `st` (see the module docstring); `builder` is build_loops'
    LoopBuilder (for its loops, attachments and update statement)."""
    leaves = st.leaf_iter_vars
    tags = thread_reduce_tags(st, leaves)
    who = f"stage '{st.name}'"
    _check(st, leaves, first_red, body, tags, who)
    red = body[0]
    partials = [PlaceholderOp(f"{st.name}.red_local{'' if len(body) == 1 else k}", (1,),
                              st.op.output_dtype(k)).output(0) for k in range(len(body))]
    zero = (E.const(0, "int32"),)
    init = ir.seq(*[ir.ProducerStore(p, zero, red.combiner.identity[k])
                    for k, p in enumerate(partials)])
    update = builder.update_store(body, partials, zero)
    guard = E.logical("and", data_guard, red_guard)
    if not (isinstance(guard, Const) and guard.value):
        update = ir.IfThenElse(guard, update)
    update_nest = builder.loops(st, leaves[first_red:], update)
    results = tuple(Var(f"{st.name}.red{'' if len(body) == 1 else k}", p.dtype)
                    for k, p in enumerate(partials))
    stored = _with_init(red, results) if red.init else results
    stores = ir.seq(*[ir.ProducerStore(st.op.output(k), out_idx, v)
                      for k, v in enumerate(stored)])
    if not (isinstance(data_guard, Const) and data_guard.value):
        stores = ir.IfThenElse(data_guard, stores)
    values = tuple(TensorLoad(p.dtype, p, zero) for p in partials)
    combine = ir.ThreadAllreduce(red.combiner, values, results, tags, stores)
    nest = ir.seq(init, update_nest, combine)
    for p in reversed(partials):
        nest = ir.ProducerRealize(p, (Range(E.const(0, "int32"), E.const(1, "int32")),),
                                  "local", nest)
    return builder.loops(st, leaves[:first_red], nest)


def _with_init(red: Reduce, results: tuple) -> tuple:
    """The combination of the reduction's init= values with the combined `results`: the
    partials start at the combiner's identity, the initial value joins once, at the end."""
    vmap = dict(zip(red.combiner.lhs, red.init))
    vmap.update(zip(red.combiner.rhs, results))
    return tuple(E.substitute(r, vmap) for r in red.combiner.result)


def _check(st, leaves: list, first_red: int, body: tuple, tags: tuple, who: str) -> None:
    if len(set(tags)) != len(tags):
        raise LoweringError(f"{who}: two of its reduction loops are bound to the same thread "
                            f"axis; bind each reduction loop to a different threadIdx axis")
    late = [iv for iv in leaves[first_red:] if iv.iter_type != REDUCE]
    if late:
        raise LoweringError(f"{who}: its reduction loop is bound to a thread, so every data "
                            f"loop must come before the reduction loops, but "
                            f"'{late[0].var.name}' comes after "
                            f"'{leaves[first_red].var.name}'; reorder it outward")
    if not all(isinstance(b, Reduce) for b in body):
        raise LoweringError(f"{who}: every output must be a reduction")
