"""Row reductions in the automatic space: an output reduction over one axis k that reads
every input with k as its last, contiguous index (sum(X[i, k], axis=k), a mean, a norm).

Takes such an op and a config; defines its knobs (partial results per row `.kc`, rows
read side by side `.rows`, `.parallel`, `.prefetch`) and applies them: vector partial
results along the rows (rfactor) computed at the row loop, instead of the register tile
across outputs that micro_kernel.py gives other reductions. Used by auto_space.py.
Imports te.compute and micro_kernel.
"""
from __future__ import annotations

from ..compute import expr as E
from ..compute.tensor import PlaceholderOp
from .micro_kernel import (parallel_loops, rfactor_lanes, static_extent, tensor_loads,
                           vector_lanes)


def row_reduction_inputs(op) -> list:
    """The inputs of a one-output reduction over one axis k that reads every tensor with k
    as its last index and nowhere else (X in sum(X[i, k], axis=k)), with rows of at least
    two vectors; else []. Each step along k then reads contiguous memory in every input."""
    if op.num_outputs != 1 or len(op.reduce_axis) != 1:
        return []
    k = op.reduce_axis[0]
    if static_extent(k) < 2 * vector_lanes(op.output_dtype(0)):
        return []
    loads = tensor_loads(op)
    if not loads or any(not x.indices or x.indices[-1] is not k.var
                        or any(k.var in E.free_vars(e) for e in x.indices[:-1])
                        for x in loads):
        return []
    return list(dict.fromkeys(x.tensor for x in loads))


def define_row_reduction(cfg, op, pfx: str) -> None:
    """The knobs of a row reduction output (row_reduction_inputs): vector partial results
    along its rows (rfactor), kc vectors of them, `.rows` rows read side by side, parallel
    mode, and a prefetch ahead in its input rows. A register tile across rows would gather
    or pack the rows (a 4096^2 row sum: 57 ms packed, 4.5-5.9 ms as partial sums), so
    none of the tile's knobs is defined."""
    lanes = vector_lanes(op.output_dtype(0))
    k0 = static_extent(op.reduce_axis[0])
    cfg.define_knob(pfx + ".kc", [k for k in (4, 1, 2, 8) if k * lanes <= k0] or [1])
    cfg.define_knob(pfx + ".parallel", ["fused", "outer", "none"])
    # rows read side by side, one vector of each per step: a core whose L2 prefetcher
    # follows one stream per 4 KiB page keeps that many more lines in flight (Ice Lake
    # server, 4096^2: 16 rows, 5.7 -> 4.5 ms; on Zen 4, 2 or 4 rows were slower than one)
    k = _row_axis(op)
    rows = static_extent(op.axis[k]) if k is not None else 1
    cfg.define_knob(pfx + ".rows", [r for r in (1, 16, 8, 4) if r <= rows])
    placeholders = [t for t in row_reduction_inputs(op) if isinstance(t.op, PlaceholderOp)]
    cfg.define_knob(pfx + ".prefetch", ["ahead", "off"] if placeholders and op.axis
                    else ["off"])


def _row_axis(op):
    """The index of the innermost spatial axis with more than one row (a keepdims axis of
    extent 1 is not one), else of the last axis; None for a 0-d output."""
    if not op.axis:
        return None
    many = [k for k, iv in enumerate(op.axis) if static_extent(iv) > 1]
    return many[-1] if many else len(op.axis) - 1


def schedule_row_reduction(cfg, s, op, pfx: str, partials=None):
    """A row reduction: its partial results computed at its row loop, `.rows` rows read
    side by side (one vector of each per step, rows unrolled), prefetching ahead in the
    input rows. Returns the loop they are computed at (a stage that feeds the sum can be
    computed there too), or None for a 0-d output; with one row at a time the partial
    stage goes into `partials`, so such a stage can share its loop (compute_with)."""
    kc = cfg[pfx + ".kc"].val
    rf = rfactor_lanes(s, op, kc)
    k = _row_axis(op)
    if k is None:
        return None
    st, rst = s[op], s[rf]
    rows = cfg[pfx + ".rows"].val
    spatial = list(op.axis)
    if rows > 1:
        block, _ = st.split(spatial[k], factor=rows)
        outer = spatial[:k] + [block]
    else:
        outer = spatial[:k + 1]
    fused = parallel_loops(cfg, st, outer, pfx)
    attach = fused if fused is not None else outer[-1]
    rst.compute_at(st, attach)
    steps, lane = list(rst.op.reduce_axis), rst.op.axis[-1]
    if rows > 1:   # the block's rows inside each step
        row = rst.op.axis[k]
        rst.reorder(*[a for a in rst.op.axis[:-1] if a is not row], *steps, row, lane)
        rst.unroll(row)
    elif partials is not None:
        partials[op] = rf.op
    if cfg[pfx + ".prefetch"].val == "ahead":
        # one row at a time: the same lines of the next row; side by side: 16 lines ahead
        # in each row (the hand kernels of benchmarks/kernels.py row_sum)
        width = vector_lanes(op.output_dtype(0)) * kc
        ahead = -(-static_extent(op.reduce_axis[0]) // width) if rows == 1 else max(1, 16 // kc)
        for t in row_reduction_inputs(op):
            if isinstance(t.op, PlaceholderOp):
                rst.prefetch(t, steps[0], ahead)
    return attach
