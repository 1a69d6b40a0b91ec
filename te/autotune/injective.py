"""Injective stages in the automatic space (elementwise, broadcast, transpose, padding).

Takes such a stage, a config and the Stages record; defines its knobs and applies them.
Outputs: rows vectorized and in parallel, a store policy, software-pipelined row loops.
Producers: inlined, at their reader's row loop, or at root. Used by auto_space.py. Imports
te.compute, te.dtype, micro_kernel and stages.
"""
from __future__ import annotations

from .. import dtype as dt
from ..compute import expr as E
from ..compute.tensor import ComputeOp
from .micro_kernel import _preferred, static_extent, tensor_loads, vector_lanes
from .stages import PREFETCH, row_sum_of, streamed_input, streamed_reductions_read

# An output this large streams past the caches by default (`out_store`): far more than the
# last-level cache of a core, so it is not read back from cache anyway.
STREAM_BYTES = 16 << 20


# -- producers: injective stages that are not outputs -------------------------------------

def place_producer(cfg, s, op, g) -> None:
    """An injective stage read by other stages (softmax's exp, conv's padding). Knobs:
    `.place` (inline, at the reader's row loop, or root), `.root.vec`/`.root.parallel`
    (its own loops), `.prefetch` (the next row of a streamed input), `.sum_with` (join the
    loop of a row sum's partial results). Inlined or at root now; a stage placed at its
    reader goes into g.deferred, for attach_producer once the readers' loops exist."""
    pfx = g.prefix[op]
    cfg.define_knob(pfx + ".place", _place_options(op, g.cons))
    define_injective(cfg, op, pfx + ".root")
    cfg.define_knob(pfx + ".prefetch",
                    list(PREFETCH) if streamed_input(op) is not None else ["off"])
    cfg.define_knob(pfx + ".sum_with",
                    ["fused", "own"] if row_sum_of(op, g.cons) is not None else ["own"])
    place = cfg[pfx + ".place"].val
    if place == "inline":
        s[op].compute_inline()
        g.inlined.add(op)
    elif place == "reader":
        g.deferred.append(op)
    else:
        schedule_injective(cfg, s, op, pfx + ".root")


def _place_options(op, cons: dict) -> list:
    """The `.place` options of a producer, default first."""
    if op.attrs.get("table"):
        # a small table its compute marks as read by every output element (resize's filter
        # taps and weights): computed once at root; inlined, each reader recomputes all of
        # its expression
        return ["root", "inline", "reader"]
    # read by several stages: inlining recomputes it in each (softmax's exp), so the
    # default computes it once per row of its reader instead
    if len(cons[op]) > 1:
        return ["reader", "inline", "root"]
    if _has_select(op) and any(c.is_reduction for c in cons[op]):
        # a conditional body (conv's padding) is not inlined into a reduction: the
        # condition would then sit in every step of the register tile, which blocks its
        # vectorization, and such candidates took LLVM many seconds to compile (a fifth of
        # them timed out in tuning) without one of them being fast
        return ["root", "reader"]
    return ["inline", "reader", "root"]


def _has_select(op) -> bool:
    found = []
    E.pre_order(op.body[0], lambda x: found.append(x) if isinstance(x, E.Select) else None)
    return bool(found)


def attach_producer(cfg, s, op, g) -> None:
    """A producer placed at its reader (`.place` "reader"): computed at the row loop of the
    output all its readers run in, its last axis vectorized (as wide as the row sum's
    partial results when it joins their loop, `.sum_with` "fused"), prefetching the next
    row of its streamed input; at root when its readers share no such loop."""
    pfx = g.prefix[op]
    reader = g.attach_target(op)
    loop = g.main_loop.get(reader) if reader is not None else None
    if loop is None:
        schedule_injective(cfg, s, op, pfx + ".root")
        return
    g.attached[op] = reader
    s[op].compute_at(s[reader], loop)
    rf = _joined_sum(cfg, op, reader, g)
    # as many lanes as the sum's partial results, to share its loop
    vec = static_extent(s[rf].op.axis[-1]) if rf is not None else cfg[pfx + ".root.vec"].val
    if not op.axis or vec <= 1:
        return
    lo, li = s[op].split(op.axis[-1], factor=vec)
    s[op].vectorize(li)
    if rf is not None:
        # each value is added to the partial sums in the loop that computes it, not in a
        # second pass over the row buffer (the hand softmax of benchmarks/kernels.py)
        s[op].compute_with(s[rf], s[rf].op.reduce_axis[0])
        g.shared[reader] = rf
    locality = PREFETCH[cfg[pfx + ".prefetch"].val]
    if locality is not None:
        # while this row is computed, fetch the same line of the next row of the input
        # (the row's DRAM read then overlaps the compute phases)
        row = static_extent(op.axis[-1])
        s[op].prefetch(streamed_input(op), lo, -(-row // vec), locality)


def _joined_sum(cfg, op, reader, g):
    """The partial-result stage of op's row sum whose loop op joins (`.sum_with` "fused"),
    when those partial results are computed at the same row loop: attached there, or the
    reader itself (a row-sum output whose partial results are computed at its row loop).
    Else None."""
    row_sum = row_sum_of(op, g.cons)
    at_row = g.attached.get(row_sum) is reader or row_sum is reader
    rf = g.partials.get(row_sum) if at_row else None
    return rf if rf is not None and cfg[g.prefix[op] + ".sum_with"].val == "fused" else None


# -- outputs -------------------------------------------------------------------------------

def schedule_output(cfg, s, op, g):
    """An injective output: schedule_injective with the output's knobs (`.vec`,
    `.parallel`, `.out_store`, `.pipeline`). Its row loop may be pipelined when a producer
    shares a row sum's loop (softmax) or it reads a reduction streaming its input rows
    (layernorm's mean). Returns the row loop that other stages are computed at."""
    can_pipeline = any(row_sum_of(p, g.cons) is not None for p in g.producers()) or \
        streamed_reductions_read(op)
    return schedule_injective(cfg, s, op, g.prefix[op], output=True,
                              pipelined=g.pipelined if can_pipeline else None)


def define_injective(cfg, op, pfx: str) -> None:
    last = static_extent(op.axis[-1]) if op.axis else 1
    vec_opts = [v for v in (8, 16, 4, 1) if v <= max(last, 1)] or [1]
    vec_opts = _preferred(vec_opts, vector_lanes(op.output_dtype(0)))
    cfg.define_knob(pfx + ".vec", vec_opts)
    cfg.define_knob(pfx + ".parallel", [True, False])


def schedule_injective(cfg, s, op, pfx: str, output: bool = False,
                       pipelined: dict | None = None):
    """Fuse the outer axes (parallel), split the last one and vectorize it. An output
    with long rows picks how its vectors are stored (`out_store`, _store_policy). With
    `pipelined`, knob `pipeline`: "rows" splits the rows into parallel blocks whose row
    loop is software-pipelined (pipeline_rows); the output's row loop, vector loop and
    store policy then go into `pipelined`, and the stores are set up later."""
    define_injective(cfg, op, pfx)
    if output:
        cfg.define_knob(pfx + ".out_store", _out_store_options(op))
        cfg.define_knob(pfx + ".pipeline", ["rows", "off"] if pipelined is not None and
                        len(op.axis) > 1 and static_extent(op.axis[-1]) * 4 >= 1024
                        else ["off"])
    axes = list(op.axis)
    st = s[op]
    if not axes:
        return None
    outer = st.fuse(*axes[:-1]) if len(axes) > 1 else None
    vec = cfg[pfx + ".vec"].val
    lo, li = st.split(axes[-1], factor=vec) if vec > 1 else (axes[-1], None)
    pipeline = output and cfg[pfx + ".pipeline"].val == "rows" and li is not None
    if li is not None:
        st.vectorize(li)
        store = cfg[pfx + ".out_store"].val if output else "plain"
        if not pipeline:
            _store_policy(st, op, lo, store)
    row = outer if outer is not None else lo
    if pipeline:
        rows = 1
        for iv in axes[:-1]:
            rows *= static_extent(iv)
        # blocks of up to 64 rows, at least 8 of them to share out; each block starts and
        # ends with a row that overlaps nothing (blocks of 32-128 rows time alike)
        row, inner = st.split(row, factor=max(1, min(64, rows // 8)))
        pipelined[op] = (inner, lo, store)
    if cfg[pfx + ".parallel"].val:
        st.parallel(row)
    if pipeline:
        return pipelined[op][0]
    return row if outer is not None else None


def _store_policy(st, op, loop, store: str, ahead: int = 32) -> None:
    """"plain" stores; "prefetch", a write prefetch `ahead` vectors ahead, so the stores do
    not miss one by one when the row is written after other per-row phases; or "stream",
    non-temporal stores that skip the read-for-ownership of every written line."""
    if store == "prefetch":
        st.prefetch(op.output(0), loop, ahead)  # 32 vectors ahead: 2 KiB at 16 lanes
    elif store == "stream":
        st.pragma(loop, "nontemporal_store")


def _out_store_options(op) -> list:
    """The `out_store` options of an output, default first. Rows under 1 KiB: plain. An
    output of STREAM_BYTES or more streams by default; a smaller one is likely still in
    cache when the caller reads it, so streaming comes last. Below that, a row written
    after per-row reductions (softmax, layernorm) write-prefetches by default, a plain
    streaming kernel (relu(x*a+b)) does not: there the prefetches only cost."""
    if len(op.axis) < 2 or static_extent(op.axis[-1]) * 4 < 1024:
        return ["plain"]
    after_reduction = any(isinstance(x.tensor.op, ComputeOp) and x.tensor.op.is_reduction
                          for x in tensor_loads(op))
    cached = ["prefetch", "plain"] if after_reduction else ["plain", "prefetch"]
    size = 1
    for iv in op.axis:
        size *= static_extent(iv)
    if size * max(dt.bits(op.output_dtype(0)) // 8, 1) >= STREAM_BYTES:
        return ["stream"] + cached
    return cached + ["stream"]


def pipeline_rows(s, op, g) -> None:
    """Finish a pipelined output (g.pipelined): its row loop is interleaved with the loop
    a producer shares with a row sum (softmax's exp), else with the first pass over the
    row that the output reads (layernorm's mean), see _pipeline_rows."""
    row, lo, store = g.pipelined[op]
    streaming = streamed_reductions_read(op)
    first = next((g.partials[r] for r in g.ops if r in g.partials
                  and g.attached.get(r) is op and r in streaming), None)
    _pipeline_rows(s, op, row, lo, store, g.shared.get(op) or first)


def _pipeline_rows(s, op, row, lo, store: str, rf) -> None:
    """Software-pipeline output `op`'s row loop (Stage.pipeline): row i - 1 is written
    inside the loop of row i's partial sums `rf` instead of in a burst after row i's
    arithmetic that nothing overlaps (the hand softmax and layernorm of
    benchmarks/kernels.py). The output's vector loop is split to as many steps as that
    loop has. Without such a loop at `row` (the sum at root, or a producer with a loop of
    its own) only the store policy is applied."""
    st = s[op]
    attached = [x for x in s.stages if x.attach_stage is st and x.attach_ivar is row]
    vec = static_extent(st.leaf_iter_vars[-1])
    if rf is None or s[rf] not in attached or static_extent(s[rf].op.axis[-1]) % vec \
            or not _sum_loop_leads(s[rf], len(op.axis) - 1):
        _store_policy(st, op, lo, store)
        return
    sum_loop = s[rf].op.reduce_axis[0]
    step = static_extent(s[rf].op.axis[-1]) // vec
    if step > 1:
        lo, _ = st.split(lo, factor=step)
    _store_policy(st, op, lo, store, ahead=max(1, 32 // step))
    st.pipeline(row, interleave=(s[rf], sum_loop))


def _sum_loop_leads(rf_stage, row_dims: int) -> bool:
    """Whether the partial sums' loop over the row comes right after the `row_dims` loops
    of the row itself, which are one iteration each at the output's row loop: then it is
    the outermost loop left there, the one Stage.pipeline interleaves with. A dense layer
    over few rows (the micro kernel's sum) keeps a loop over the output's columns first."""
    leaves = list(rf_stage.leaf_iter_vars)
    sum_loop = rf_stage.op.reduce_axis[0]
    return sum_loop in leaves and leaves.index(sum_loop) == row_dims

