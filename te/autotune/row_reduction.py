"""Row reductions in the automatic space: vector partial results along a row.

Outputs (define_row_reduction, schedule_row_reduction): a reduction over one axis k that
reads every input with k as its last, contiguous index (sum(X[i, k], axis=k), a mean, a
norm) sums rows of partial results at its row loop instead of the register tile of
micro_kernel.py. Reductions read by another stage (place_reduction: softmax's max and sum,
layernorm's mean): at the reader's row loop or root, optionally as partial results.
Used by auto_space.py. Imports te.compute, micro_kernel and stages.
"""
from __future__ import annotations

import math

from ..compute import expr as E
from ..compute.tensor import PlaceholderOp
from .micro_kernel import (lanes_innermost, parallel_loops, rfactor_lanes, static_extent,
                           tensor_loads, vector_lanes)
from .stages import PREFETCH, streamed_reduction_input

# A reduction whose reader runs fewer rows than this, each reading many of its values (a
# dense layer's bias on a batch of 1: one row of 1000 dot products), goes to root, where
# its own loop over those values is parallel; at the reader's row loop it ran on one thread
MIN_READER_ROWS = 8


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
    or pack the rows, many times slower than partial sums, so none of the tile's knobs is
    defined."""
    lanes = vector_lanes(op.output_dtype(0))
    k0 = static_extent(op.reduce_axis[0])
    cfg.define_knob(pfx + ".kc", [k for k in (4, 1, 2, 8) if k * lanes <= k0] or [1])
    cfg.define_knob(pfx + ".parallel", ["fused", "outer", "none"])
    # rows read side by side, one vector of each per step: a core whose L2 prefetcher
    # follows one stream per 4 KiB page keeps that many more lines in flight (faster on
    # Ice Lake server, slower than one row on Zen 4: benchmarks/kernels.py row_sum)
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


def place_reduction(cfg, s, op, g) -> None:
    """A reduction read by another stage (softmax's max and sum, layernorm's mean and
    variance). Knobs: `.at` (the reader's row loop or root), `.parallel` (at root),
    `.lanes` (vector partial results along its one reduction axis: four vectors, one, or
    none), `.prefetch` (the next row of a streamed input). At the reader, it and its
    partial results are computed at the row loop of the output all its readers run in."""
    pfx = g.prefix[op]
    reader = g.attach_target(op)
    streamed = _define_placed_reduction(cfg, op, pfx, g.streamed_by_producers())
    st = s[op]
    loop = g.main_loop.get(reader) if reader is not None else None
    rf = None
    if cfg[pfx + ".lanes"].val > 1:
        _, ki = st.split(op.reduce_axis[0], factor=cfg[pfx + ".lanes"].val)
        rf = lanes_innermost(s, s.rfactor(op.output(0), ki, factor_axis=len(op.axis)))
    folded = _fold_partials(s, op, vector_lanes(op.output_dtype(0))) if rf is not None \
        else None
    partial_stages = [t for t in (rf, folded) if t is not None]
    if cfg[pfx + ".at"].val != "reader" or loop is None or _few_rows_of_many(op, reader):
        _reduction_at_root(cfg, s, op, pfx, partial_stages)
        return
    for t in partial_stages:
        s[t].compute_at(s[reader], loop)
    if rf is not None:
        g.partials[op] = rf.op
    locality = PREFETCH[cfg[pfx + ".prefetch"].val]
    if rf is not None and locality is not None:
        step = cfg[pfx + ".lanes"].val
        rext = static_extent(op.reduce_axis[0])
        s[rf].prefetch(streamed, s[rf].op.reduce_axis[0], -(-rext // step), locality)
    st.compute_at(s[reader], loop)
    g.attached[op] = reader


def _few_rows_of_many(op, reader) -> bool:
    """Whether `reader`'s row loop (its axes but the last) runs fewer than
    MIN_READER_ROWS rows while `op` has more than one value per row."""
    rows = math.prod(static_extent(iv) for iv in reader.axis[:-1])
    return rows < MIN_READER_ROWS and math.prod(static_extent(iv) for iv in op.axis) > rows


def _define_placed_reduction(cfg, op, pfx: str, prefetched: set):
    """The knobs of place_reduction; returns the input it streams row by row (None when
    it reads no such input or cannot take partial results)."""
    cfg.define_knob(pfx + ".at", ["reader", "root"])
    cfg.define_knob(pfx + ".parallel", [True, False])
    lanes = vector_lanes(op.output_dtype(0))
    rext = [static_extent(iv) for iv in op.reduce_axis]
    can = op.num_outputs == 1 and len(rext) == 1 and rext[0] >= 2 * lanes
    # partial results: four vectors of them (independent add chains: the default for long
    # rows, as in the hand row kernels), one vector, or none
    wide = [4 * lanes] if can and rext[0] >= 8 * lanes else []
    cfg.define_knob(pfx + ".lanes", wide + [lanes, 1] if can else [1])
    streamed = streamed_reduction_input(op) if can else None
    # each pass that reads the row (layernorm's mean and variance) fetches the next row
    # meanwhile, into L2 by default unless a producer prefetches that input (`prefetched`,
    # softmax's exp): the row's DRAM read then overlaps this row's compute
    options = ["off"] if streamed is None else \
        ["off", "l2", "l1"] if streamed in prefetched else list(PREFETCH)
    cfg.define_knob(pfx + ".prefetch", options)
    return streamed


def _reduction_at_root(cfg, s, op, pfx: str, partial_stages: list) -> None:
    """The reduction at root: its fused spatial loop parallel (`.parallel`), its partial
    results computed in that loop."""
    spatial = list(op.axis)
    if not spatial:
        return
    st = s[op]
    row = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    if cfg[pfx + ".parallel"].val:
        st.parallel(row)
    for t in partial_stages:
        s[t].compute_at(st, row)


def _fold_partials(s, op, lanes: int):
    """Several vectors of partial results folded to one vector by vector adds (a second
    rfactor, lane axis innermost and vectorized), so the last step to one value is a chain
    of `lanes` scalar adds instead of 4 * lanes (the hand row kernels of
    benchmarks/kernels.py fold theirs too). None when there is one vector of partials or
    fewer."""
    partial = s[op].leaf_iter_vars[-1]
    if static_extent(partial) <= lanes or static_extent(partial) % lanes:
        return None
    _, lane = s[op].split(partial, factor=lanes)
    return lanes_innermost(s, s.rfactor(op.output(0), lane, factor_axis=len(op.axis)))
