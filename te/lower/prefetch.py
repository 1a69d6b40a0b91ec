"""Prefetch statements for Stage.prefetch: what iteration var + offset of a loop will read.

Takes a stage's body (its reads expressed over its leaf loop variables), the prefetch loop
and offset; gives the statements that build_loops puts at the start of that loop's body:
one Evaluate(Prefetch(...)) per cache line of the region, behind a guard that keeps the
address inside the tensor. Imports te.compute, te.schedule, te.errors, ir, arith.
"""
from __future__ import annotations

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Const, TensorLoad, Var
from ..compute.tensor import PlaceholderOp
from ..errors import LoweringError
from ..schedule.stage import ROOT, Stage
from . import ir
from .arith import Analyzer, interval

CACHE_LINE_BYTES = 64


def prefetch_stmt(st: Stage, iv, tensor, offset: int, body: tuple, out_idx: tuple,
                  extents: dict, ana: Analyzer, locality: int = 3) -> ir.Stmt:
    """Prefetches of the region of `tensor` that iteration iv + offset of stage `st` reads,
    or writes when `tensor` is the stage's own output (a prefetch for writing).

    body: the stage's expressions over its leaf variables; out_idx: the index it stores
    to, over the same variables; extents: leaf IterVar -> extent.
    The region is bounded per dimension over the loops inside iv; an index past the end of
    an inner dimension runs on into the next row (row-major), and a guard on the linear
    index drops prefetches that would leave the tensor."""
    where = f"prefetch of '{tensor.name}' at loop '{iv.var.name}' of stage '{st.name}'"
    producer = st.schedule.stage_map.get(tensor.op)
    if producer is not None:  # rfactor / cache_write may have rebuilt the operation
        tensor = producer.op.output(tensor.value_index)
    _check_storage(st, tensor, where)
    write = producer is st
    loads = [TensorLoad(tensor.dtype, tensor, out_idx)] if write else reads_of(body, tensor)
    if not loads:
        raise LoweringError(f"{where}: the stage does not read '{tensor.name}' (was it "
                            f"inlined into the stage, or cached, after prefetch?)")
    # a read whose index does not move with iv (layer_norm's shift x[i, 0] inside its row
    # loop) is the one this iteration already makes: its cache line is in, and its hull
    # with the moving reads would stretch the region back over the lines already read
    moving = [x for x in loads if any(iv.var in E.free_vars(i) for i in x.indices)]
    loads = moving or loads
    leaves = st.leaf_iter_vars
    inner = leaves[leaves.index(iv) + 1:]
    ranges = {x.var: (E.const(0, extents[x].dtype), extents[x] - 1) for x in inner}
    shift = {iv.var: iv.var + offset}
    lo, hi = None, None
    for load in loads:
        _check_direct(load, where)
        box = [interval(ana.simplify(E.substitute(i, shift)), ranges, ana)
               for i in load.indices]
        if any(b is None for b in box):
            raise LoweringError(f"{where}: cannot bound the region it reads")
        lo = [b[0] for b in box] if lo is None else \
            [ana.simplify(E.binary("min", a, b[0])) for a, b in zip(lo, box)]
        hi = [b[1] for b in box] if hi is None else \
            [ana.simplify(E.binary("max", a, b[1])) for a, b in zip(hi, box)]
    return _line_nest(tensor, lo, hi, ana, iv.var.name, write, locality)


def _check_storage(st: Stage, tensor, where: str) -> None:
    """Only whole, row-major tensors: an attached stage realizes just a region of its
    tensor, so the linear-index guard could not keep the address inside its buffer."""
    if isinstance(tensor.op, PlaceholderOp):
        return
    producer = st.schedule.stage_map.get(tensor.op)
    if producer is None or producer.attach_type != ROOT:
        raise LoweringError(f"{where}: '{tensor.name}' is not stored whole (it is computed "
                            f"inside another stage's loop or inlined); prefetch an input or "
                            f"a compute_root tensor")


def _check_direct(load: TensorLoad, where: str) -> None:
    """An index read from memory (A[I[i]]) cannot be evaluated ahead: at var + offset it
    may read past the end of I, and so would the guard."""
    inner = []
    for i in load.indices:
        E.pre_order(i, lambda e: inner.append(e) if isinstance(e, TensorLoad) else None)
    if inner:
        raise LoweringError(f"{where}: its index reads tensor '{inner[0].tensor.name}' (an "
                            f"indirect access), which cannot be evaluated ahead; prefetch "
                            f"'{inner[0].tensor.name}' instead")


def reads_of(body: tuple, tensor) -> list:
    """Every load of output `tensor` in the expressions of `body`."""
    found = []

    def visit(e):
        if isinstance(e, TensorLoad) and e.tensor.op is tensor.op \
                and e.tensor.value_index == tensor.value_index:
            found.append(e)
    for b in body:
        E.pre_order(b, visit)
    return found


def _line_nest(tensor, lo: list, hi: list, ana: Analyzer, name: str, write: bool,
               locality: int) -> ir.Stmt:
    """Loops over the outer dimensions of [lo, hi] and over the cache lines of the last."""
    line = max(1, CACHE_LINE_BYTES // max(1, dt.bits(tensor.dtype) // 8))
    loops, index = [], []
    for k, (a, b) in enumerate(zip(lo, hi)):
        last = k == len(lo) - 1
        step = line if last else 1
        count = ana.simplify(E.binary("floordiv", b - a + step, step))
        if isinstance(count, Const) and count.value == 1:
            index.append(a)
            continue
        v = Var(f"{name}.pf{k}", count.dtype)
        ana.bind(v, 0, int(count.value) - 1 if isinstance(count, Const) else None)
        loops.append((v, count))
        index.append(ana.simplify(a + v * step) if last else ana.simplify(a + v))
    stmt = ir.Evaluate(ir.Prefetch("handle", TensorLoad(tensor.dtype, tensor, tuple(index)),
                                   write, locality))
    guard = _inside(tensor, index, ana)
    if not (isinstance(guard, Const) and guard.value):
        stmt = ir.IfThenElse(guard, stmt)
    for v, count in reversed(loops):
        stmt = ir.For(v, E.const(0, count.dtype), count, ir.SERIAL, stmt)
    return stmt


def _inside(tensor, index: list, ana: Analyzer) -> E.Expr:
    """0 <= the row-major linear index < the number of elements."""
    linear, size = None, None
    for i, n in zip(index, tensor.shape):
        linear = i if linear is None else linear * n + i
        size = n if size is None else size * n
    cond = E.logical("and", E.binary("ge", linear, E.const(0, linear.dtype)),
                     E.binary("lt", linear, size))
    return ana.simplify(cond)
