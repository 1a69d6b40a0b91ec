"""Matmul-like reductions that are not outputs, in the automatic space.

A contraction (matmul, batch matmul, conv) read by elementwise stages (bias, GELU, a
residual add) is scheduled as TVM schedules a dense layer: the output's loops are tiled as
the contraction's register tile would be, the contraction is computed into that tile at
the tile loop and the elementwise stages are inlined into the output's store of the tile
(matmul_epilogue finds such an output). A contraction read any other way gets its own
register-tile loop nest at root. Either way it is packed like an output (rebuild swaps the
packed op in for its readers). Used by auto_space.py. Imports te.compute, micro_kernel and
row_reduction.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.tensor import ComputeOp, PlaceholderOp
from .micro_kernel import static_extent, tensor_loads
from .row_reduction import row_reduction_inputs


def is_contraction(op) -> bool:
    """Whether reduction `op` reads two loads that each depend on the reduction and each
    miss a spatial axis that the other uses (A[i, k] and B[k, j]: every value is reused
    across the axis its load misses), and is no row reduction (those keep partial sums
    along their rows): a register tile pays off. Softmax's max and layernorm's variance are
    not contractions; a dot product over long contiguous rows (A[i, k] * B[j, k]) is a row
    reduction."""
    if not isinstance(op, ComputeOp) or not op.is_reduction or op.num_outputs != 1 \
            or not op.axis or row_reduction_inputs(op):
        return False
    spatial = {iv.var for iv in op.axis}
    rvars = {iv.var for iv in op.reduce_axis}
    uses = []
    for load in tensor_loads(op):
        used = {v for e in load.indices for v in E.free_vars(e)}
        if used & rvars:
            uses.append(used & spatial)
    return any(a - b and b - a for a in uses for b in uses)


def matmul_epilogue(op, out_ops: list, cons: dict):
    """(the contraction, the stages between it and `op`) when injective output `op` is an
    elementwise epilogue of one contraction R: the non-reduction stages `op` reads reach
    exactly one reduction, R, a contraction of op's shape; each stage on a path from R to
    `op` reads R and the other such stages at its own axes, in order, and is read only by
    such stages (R too); neither R nor those stages is an output. Else None."""
    if op.is_reduction or not op.axis:
        return None
    seen, reductions, todo = {}, set(), [op]
    while todo:
        x = todo.pop()
        for t in x.input_tensors:
            p = t.op
            if isinstance(p, PlaceholderOp) or p in seen:
                continue
            if p.is_reduction:
                reductions.add(p)
            else:
                seen[p] = True
                todo.append(p)
    if len(reductions) != 1:
        return None
    (r,) = reductions
    if r in out_ops or not is_contraction(r) or \
            [static_extent(iv) for iv in r.axis] != [static_extent(iv) for iv in op.axis]:
        return None
    chain = _paths_to(r, [op] + list(seen))
    for x in chain | {r}:
        if any(c not in chain and c is not op for c in cons[x]) or \
                (x in out_ops and x is not op):
            return None
    for x in chain | {op}:
        if not _reads_elementwise(x, chain | {r}):
            return None
    return r, chain - {op}


def _paths_to(r, stages: list) -> set:
    """The stages of `stages` (non-reductions, the output first) that read r, directly or
    through one another."""
    reach = {r}
    changed = True
    while changed:
        changed = False
        for x in stages:
            if x not in reach and any(t.op in reach for t in x.input_tensors):
                reach.add(x)
                changed = True
    return reach - {r}


def _reads_elementwise(x, ops: set) -> bool:
    """Whether stage x reads every op of `ops` at exactly its own axes, in order."""
    own = [iv.var for iv in x.axis]
    for load in tensor_loads(x):
        if load.tensor.op in ops:
            if load.tensor.value_index != 0 or len(load.indices) != len(own) or \
                    any(a is not b for a, b in zip(load.indices, own)):
                return False
    return True


def rebuild(ops: list, swap: dict) -> dict:
    """`swap` (old op -> new op) extended by every op of `ops` (graph order) that reads a
    swapped op: a copy reading the new ops, so nothing reads a replaced op any more (a
    packed matmul's readers would otherwise read, and so compute, the unpacked one)."""
    swap = dict(swap)
    for op in ops:
        if op in swap or not any(t.op in swap for t in op.input_tensors):
            continue

        def fix(x):
            if isinstance(x, E.TensorLoad) and x.tensor.op in swap:
                return swap[x.tensor.op].output(x.tensor.value_index)(
                    *[E.transform(i, fix) for i in x.indices])
            return None
        body = tuple(E.transform(b, fix) for b in op.body)
        swap[op] = ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis, body)
    return swap
