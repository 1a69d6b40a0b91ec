"""The automatic search space: a schedule generator for any te.compute graph.

Takes the output tensors (constant shapes) and a config (ConfigSpace to collect knobs,
ConfigEntity to apply them); gives (schedule, args). Knobs are defined unconditionally, in
the same order for every config, so the space is static; a knob that does not apply to a
branch is ignored. Option 0 of every knob is the expected best, so the default config (and
the xgb tuner's cold start around it) is already a good kernel. Policy, per stage:
  * reduction outputs: a register-blocked micro-kernel. Spatial axes ..., f, i, j get
    register tiles fr x mr x nr, nr a multiple of the host's vector width (AVX-512: 16
    float32 lanes, AVX2: 8); the tile accumulates in a cache_write local buffer computed at
    the row-block loop (mc tiles of rows), the reduction loops run outside the tile (k split
    by kc and unrolled, small reduction axes unrolled), the tile rows are unrolled and its
    last axis vectorized, and the outer tiles are fused and parallel. Knob `pack`: the input
    that the tile streams as a panel (B of A[i,k]*B[k,j], or B[j,k]) is first copied into
    [.., j // nr, k, j % nr] panels by a compute built from the operator's own index
    expressions (a graph rewrite, before the schedule exists). With little spatial
    parallelism, an rfactor knob instead. A row reduction (every input read along the
    one reduction axis as its last index: sum(X[i, k], axis=k)) defaults to vector
    partial results along its rows at its row loop (rfactor), `.rows` rows read side by
    side, `.prefetch` ahead in the input rows;
  * injective non-outputs: inlined, computed at their reader's row loop, or at root
    (read by several stages, like softmax's exp, the row loop is the default; a
    conditional producer of a reduction, like conv's padding, is never inlined);
  * injective outputs: fuse outer axes + parallel, split + vectorize the last axis, and
    for long rows a store policy (plain, write prefetch, or non-temporal); where a
    producer shares a row sum's loop (softmax) or the output reads a reduction streaming
    its input rows (layernorm's mean), rows in parallel blocks whose row loop is
    software-pipelined, the output's row i - 1 written inside that loop of row i;
  * non-output reductions: at the reader's row loop (or root), as vector-wide partial
    results when the row is long (rfactor over one or, the default for long rows, four
    vectors of lanes, vectorized; four are then folded into one vector by vector adds
    before the scalar step), optionally prefetching the next row of a streamed input.
The register-tile micro-kernel of reduction outputs and the packing rewrite live in
micro_kernel.py, the row reductions' partial results in row_reduction.py. Imports
te.compute, te.schedule, micro_kernel, row_reduction, workload.
"""
from __future__ import annotations

from .. import dtype as dt
from ..compute import expr as E
from ..compute.tensor import ComputeOp, PlaceholderOp
from ..schedule.schedule import create_schedule, topo_order
from .micro_kernel import (_define_micro_kernel, _pack_rewrite, _preferred,
                           _schedule_reduction, lanes_innermost, static_extent,
                           tensor_loads, vector_lanes)
from .row_reduction import (define_row_reduction, row_reduction_inputs,
                            schedule_row_reduction)
from .workload import output_ops

# An output this large streams past the caches by default (`out_store`): far more than the
# last-level cache of a core, so it is not read back from cache anyway.
STREAM_BYTES = 16 << 20


def default_args(outputs) -> list:
    """Placeholders in graph order, then the outputs, as te.build takes them."""
    ops = output_ops(outputs)
    phs = [op.output(0) for op in topo_order(ops) if isinstance(op, PlaceholderOp)]
    outs = [op.output(k) for op in ops for k in range(op.num_outputs)]
    return phs + outs


def _knob_prefix(ops: list) -> dict:
    names: dict = {}
    out = {}
    for k, op in enumerate(ops):
        base = op.name if op.name not in names else f"{op.name}#{k}"
        names[op.name] = True
        out[op] = base
    return out


def _consumers(ops: list) -> dict:
    cons = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            if t.op in cons:
                cons[t.op].append(op)
    return cons


def auto_schedule(cfg, outputs, args=None):
    """Build the schedule that `cfg` chooses; returns (schedule, args)."""
    out_ops = output_ops(outputs)
    args = list(args) if args is not None else default_args(outputs)
    ops = [op for op in topo_order(out_ops) if isinstance(op, ComputeOp)]
    for op in ops:
        for iv in list(op.axis) + list(op.reduce_axis):
            static_extent(iv)
    prefix = _knob_prefix(ops)
    # 0. register-tile knobs of the reduction outputs, and the packing rewrite they choose
    # (it changes the compute graph, so it comes before the schedule exists)
    swap, packs = {}, {}
    for op in out_ops:
        if isinstance(op, ComputeOp) and op.is_reduction:
            if row_reduction_inputs(op):
                define_row_reduction(cfg, op, prefix[op])
                continue
            _define_micro_kernel(cfg, op, prefix[op])
            # (partial results along k read the operands as they are: no packed panels)
            if cfg[prefix[op] + ".pack"].val and not cfg[prefix[op] + ".rfactor"].val:
                new, packed = _pack_rewrite(op, cfg[prefix[op] + ".nr"].val)
                swap[op], packs[new] = new, packed
                prefix[new] = prefix[op]
    if swap:
        out_ops = [swap.get(op, op) for op in out_ops]
        args = [swap[a.op].output(a.value_index) if a.op in swap else a for a in args]
        ops = [swap.get(op, op) for op in ops]
    cons = _consumers(ops)
    s = create_schedule(out_ops)
    inlined, deferred = set(), []
    for op in ops:  # 1. inline injective producers first: later steps read the result
        if op in out_ops or op.is_reduction or op in packs.values():
            continue
        name = prefix[op] + ".place"
        # read by several stages: inlining recomputes it in each (softmax's exp), so the
        # default computes it once per row of its reader instead; a conditional body
        # (padding) inlined into a reduction blocks its vectorization: root by default
        if len(cons[op]) > 1:
            places = ["reader", "inline", "root"]
        elif _has_select(op) and any(c.is_reduction for c in cons[op]):
            # not inlined: the condition would then sit in every step of the reduction's
            # register tile (conv2d 32x28x28: such candidates took LLVM 5-16 s to compile,
            # a fifth of them timed out at 30 s in tuning, and none was fast)
            places = ["root", "reader"]
        else:
            places = ["inline", "reader", "root"]
        cfg.define_knob(name, places)
        _define_injective(cfg, op, prefix[op] + ".root")
        cfg.define_knob(prefix[op] + ".prefetch",
                        list(PREFETCH) if _streamed_input(op) is not None else ["off"])
        cfg.define_knob(prefix[op] + ".sum_with",
                        ["fused", "own"] if _row_sum_of(op, cons) is not None else ["own"])
        if cfg[name].val == "inline":
            s[op].compute_inline()
            inlined.add(op)
        elif cfg[name].val == "reader":
            deferred.append(op)
        else:
            _schedule_injective(cfg, s, op, prefix[op] + ".root")
    main_loop = {}
    # outputs whose row loop may be software-pipelined: output -> (row loop, vector loop,
    # store policy), finished once the stages computed in the row loop are known
    pipelined: dict = {}
    shares_a_sum = any(_row_sum_of(op, cons) is not None for op in ops
                       if op not in out_ops and not op.is_reduction)
    partials: dict = {}  # reduction op -> its rfactor stage's op, when placed at a reader
    for op in out_ops:  # 2. the outputs
        if not isinstance(op, ComputeOp):
            continue
        if op.is_reduction and row_reduction_inputs(op):
            main_loop[op] = schedule_row_reduction(cfg, s, op, prefix[op], partials)
        elif op.is_reduction:
            main_loop[op] = _schedule_reduction(cfg, s, op, prefix[op], packs.get(op))
        else:
            can_pipeline = shares_a_sum or _streamed_reductions_read(op)
            main_loop[op] = _schedule_injective(cfg, s, op, prefix[op], output=True,
                                                pipelined=pipelined if can_pipeline else None)
    # 3. the other stages, consumers before producers: at their reader's row loop when
    # every stage that reads them runs in that loop too, else at root
    attached: dict = {}
    shared: dict = {}  # reader -> rfactor stage whose loop a stage shares (compute_with)
    # inputs that an injective stage already prefetches row by row (softmax's exp reads X
    # again after the max pass): a reduction over them does not prefetch by default
    streamed = {_streamed_input(op) for op in ops if op not in out_ops and
                not op.is_reduction} - {None}
    for op in reversed(ops):
        if op.is_reduction and op not in out_ops:
            reader = _attach_target(op, cons, inlined, out_ops, attached)
            if _place_reduction(cfg, s, op, prefix[op], reader, main_loop, streamed,
                                partials):
                attached[op] = reader
        elif op in deferred:
            reader = _attach_target(op, cons, inlined, out_ops, attached)
            loop = main_loop.get(reader) if reader is not None else None
            if loop is None:
                _schedule_injective(cfg, s, op, prefix[op] + ".root")
                continue
            attached[op] = reader
            s[op].compute_at(s[reader], loop)
            vec = cfg[prefix[op] + ".root.vec"].val
            row_sum = _row_sum_of(op, cons)
            # the sum's partial results at the same row loop: attached there, or the reader
            # itself (a row-sum output whose partial results are computed at its row loop)
            at_row = attached.get(row_sum) is reader or row_sum is reader
            rf = partials.get(row_sum) if at_row else None
            fuse = rf is not None and cfg[prefix[op] + ".sum_with"].val == "fused"
            if fuse:  # as many lanes as the sum's partial results, to share its loop
                vec = static_extent(s[rf].op.axis[-1])
            if op.axis and vec > 1:
                lo, li = s[op].split(op.axis[-1], factor=vec)
                s[op].vectorize(li)
                if fuse:
                    # each exp is added to the partial sums in the loop that computes it,
                    # not in a second pass over the row buffer (Zen 4, 4096^2 softmax:
                    # 1-2% faster from DRAM, more when the machine is loaded)
                    s[op].compute_with(s[rf], s[rf].op.reduce_axis[0])
                    shared[reader] = rf
                locality = PREFETCH[cfg[prefix[op] + ".prefetch"].val]
                if locality is not None:
                    # while this row is computed, fetch the same line of the next row of
                    # the input (the row's DRAM read then overlaps the compute phases)
                    row = static_extent(op.axis[-1])
                    s[op].prefetch(_streamed_input(op), lo, -(-row // vec), locality)
    for op, (row, lo, store) in pipelined.items():  # 4. the pipelined row loops
        # interleaved with the loop a producer shares with a row sum (softmax's exp), else
        # with the first pass over the row that the output reads (layernorm's mean)
        streaming = _streamed_reductions_read(op)
        first = next((partials[r] for r in ops if r in partials and attached.get(r) is op
                      and r in streaming), None)
        _pipeline_rows(s, op, row, lo, store, shared.get(op) or first)
    return s, args


def _streamed_reductions_read(op) -> list:
    """The reductions `op` reads that stream an input row by row along their one
    reduction axis (layernorm's mean and variance of X), in the order `op` reads them."""
    found = [x.tensor.op for x in tensor_loads(op) if isinstance(x.tensor.op, ComputeOp)
             and x.tensor.op.is_reduction and len(x.tensor.op.reduce_axis) == 1
             and _streamed_reduction_input(x.tensor.op) is not None]
    return list(dict.fromkeys(found))


# Prefetch of the next row of a streamed input (the `.prefetch` knobs), default first:
# into L2 (locality 2, x86 prefetcht1), into every level (3, prefetcht0), or none. L2 by
# default: the next 4096-wide row would take half of a 32 KiB L1 from the row being
# worked on (Zen 4, one thread, 4096^2: layernorm 5.7-6.0 -> 4.1-4.3 ms, softmax 5.8-6.2
# -> 5.0-5.1 ms).
PREFETCH = {"l2": 2, "l1": 3, "off": None}


def _streamed_input(op):
    """The input placeholder that `op` reads row by row along its last axis (X in
    softmax's exp(X[i, j] - max[i])), if the row is long enough for a prefetch of the
    next row to matter (>= 1 KiB); else None."""
    return _row_input(op, op.axis[-1], len(op.axis)) if op.axis else None


def _streamed_reduction_input(op):
    """The input placeholder that reduction `op` reads along its one reduction axis as the
    last index (X in layernorm's sum(X[i, k] / n)), with rows of >= 1 KiB; else None."""
    return _row_input(op, op.reduce_axis[0]) if len(op.reduce_axis) == 1 else None


def _row_input(op, iv, rank: int | None = None):
    """A placeholder `op` reads with `iv` as the last index (and `rank` indices, when
    given), if iv's rows are >= 1 KiB; else None."""
    if static_extent(iv) * 4 < 1024:
        return None
    return next((x.tensor for x in tensor_loads(op) if isinstance(x.tensor.op, PlaceholderOp)
                 and x.indices and x.indices[-1] is iv.var
                 and (rank is None or len(x.indices) == rank)), None)


def _row_sum_of(op, cons: dict):
    """The reduction over op's last axis that reads op only at [its own axes..., k] (the
    sum of softmax's exp), when it is op's only reduction reader; else None. Computed at
    the same row loop, op's loop can then be shared with that sum's partial-result stage
    (compute_with)."""
    sums = [c for c in cons[op] if c.is_reduction]
    if len(sums) != 1 or len(sums[0].reduce_axis) != 1 or not op.axis:
        return None
    r = sums[0]
    want = [iv.var for iv in r.axis] + [r.reduce_axis[0].var]
    loads = [x for x in tensor_loads(r) if x.tensor.op is op]
    if len(want) != len(op.axis) or not loads or \
            any(len(x.indices) != len(want) or any(a is not b for a, b in zip(x.indices, want))
                for x in loads):
        return None
    if static_extent(r.reduce_axis[0]) != static_extent(op.axis[-1]):
        return None
    return r


def _has_select(op) -> bool:
    found = []
    E.pre_order(op.body[0], lambda x: found.append(x) if isinstance(x, E.Select) else None)
    return bool(found)


def _attach_target(op, cons: dict, inlined: set, out_ops: list, attached: dict):
    """The one output in whose row loop every reader of `op` (through inlined stages)
    runs: the output itself, or a stage attached there. None if there is no such output."""
    targets, todo = set(), list(cons[op])
    while todo:
        r = todo.pop()
        if r in inlined:
            todo.extend(cons[r])
        elif r in out_ops:
            targets.add(r)
        else:
            targets.add(attached.get(r))
    if len(targets) == 1:
        (t,) = targets
        return t
    return None


def _define_injective(cfg, op, pfx: str) -> None:
    last = static_extent(op.axis[-1]) if op.axis else 1
    vec_opts = [v for v in (8, 16, 4, 1) if v <= max(last, 1)] or [1]
    vec_opts = _preferred(vec_opts, vector_lanes(op.output_dtype(0)))
    cfg.define_knob(pfx + ".vec", vec_opts)
    cfg.define_knob(pfx + ".parallel", [True, False])


def _schedule_injective(cfg, s, op, pfx: str, output: bool = False,
                        pipelined: dict | None = None):
    """Fuse the outer axes (parallel), split the last one and vectorize it. An output with
    long rows picks how its vectors are stored (`out_store`): "plain"; "prefetch", a write
    prefetch 32 vectors ahead, so the stores do not miss one by one when the row is
    written after other per-row phases; or "stream", non-temporal stores that skip the
    read-for-ownership of every written line, for an output much larger than the caches.
    With `pipelined` (the output reads a row sum whose producer can share the sum's loop,
    as softmax's exp does, or reads a reduction that streams an input row by row, as
    layernorm's mean does), knob `pipeline`: "rows" splits the rows into parallel blocks
    whose row loop is software-pipelined (_pipeline_rows); the output's row loop, vector
    loop and store policy then go into `pipelined`, and the stores are set up later."""
    _define_injective(cfg, op, pfx)
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
        # ends with a row that overlaps nothing (Zen 4, 4096^2 softmax: 32-128 time alike)
        row, inner = st.split(row, factor=max(1, min(64, rows // 8)))
        pipelined[op] = (inner, lo, store)
    if cfg[pfx + ".parallel"].val:
        st.parallel(row)
    if pipeline:
        return pipelined[op][0]
    return row if outer is not None else None


def _store_policy(st, op, loop, store: str, ahead: int = 32) -> None:
    if store == "prefetch":
        st.prefetch(op.output(0), loop, ahead)  # 32 vectors ahead: 2 KiB at 16 lanes
    elif store == "stream":
        st.pragma(loop, "nontemporal_store")


def _pipeline_rows(s, op, row, lo, store: str, rf) -> None:
    """Software-pipeline output `op`'s row loop (Stage.pipeline): row i - 1 is written
    inside the loop of row i's partial sums `rf` (softmax's, which its exp shares; the
    mean's in layernorm) instead of in a burst after row i's arithmetic that nothing
    overlaps (Zen 4, 4096^2 softmax, alternating: 4.97 -> 4.17 ms at one thread; Ice Lake
    server, layernorm: 0.65 -> 0.78 of copy's speed). The output's vector loop is split to
    as many steps as that loop has. Without such a loop at `row` (the sum at root, or a
    producer with a loop of its own) only the store policy is applied."""
    st = s[op]
    attached = [x for x in s.stages if x.attach_stage is st and x.attach_ivar is row]
    vec = static_extent(st.leaf_iter_vars[-1])
    if rf is None or s[rf] not in attached or static_extent(s[rf].op.axis[-1]) % vec:
        _store_policy(st, op, lo, store)
        return
    sum_loop = s[rf].op.reduce_axis[0]
    step = static_extent(s[rf].op.axis[-1]) // vec
    if step > 1:
        lo, _ = st.split(lo, factor=step)
    _store_policy(st, op, lo, store, ahead=max(1, 32 // step))
    st.pipeline(row, interleave=(s[rf], sum_loop))


def _out_store_options(op) -> list:
    """The `out_store` options of an output, default first. Rows under 1 KiB: plain. An
    output of STREAM_BYTES or more streams by default (Zen 4, 4096^2 float32, one thread:
    softmax 10.2 -> 8.0 ms, layernorm 9.6 -> 6.5 ms); a smaller one is likely still in
    cache when the caller reads it, so streaming comes last. Below that, a row written
    after per-row reductions (softmax, layernorm) write-prefetches by default (Zen 5, 2
    threads: softmax 2.37 -> 2.25 ms), a plain streaming kernel does not (relu(x*a+b):
    3.54 -> 3.76-3.92 ms with it)."""
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


def _place_reduction(cfg, s, op, pfx: str, reader, main_loop: dict,
                     prefetched: set = frozenset(), partials: dict | None = None) -> bool:
    """A reduction feeding an output (softmax max/sum, layernorm mean/var): computed at
    the reader's row loop or at root, optionally as vector-wide partial results (rfactor
    over `lanes` of the reduction axis, the lane axis innermost and vectorized; several
    vectors of them are folded into one by `_fold_partials`)."""
    name = pfx + ".at"
    cfg.define_knob(name, ["reader", "root"])
    cfg.define_knob(pfx + ".parallel", [True, False])
    lanes = vector_lanes(op.output_dtype(0))
    rext = [static_extent(iv) for iv in op.reduce_axis]
    can = op.num_outputs == 1 and len(rext) == 1 and rext[0] >= 2 * lanes
    # partial results: four vectors of them (independent add chains: the default for long
    # rows, as in the hand row kernels), one vector, or none
    wide = [4 * lanes] if can and rext[0] >= 8 * lanes else []
    cfg.define_knob(pfx + ".lanes", wide + [lanes, 1] if can else [1])
    streamed = _streamed_reduction_input(op) if can else None
    # each pass that reads the row (layernorm's mean and variance) fetches the next row
    # meanwhile, into L2 by default unless an injective stage prefetches that input
    # (`prefetched`, softmax's exp): the row's DRAM read then overlaps this row's compute
    options = ["off"] if streamed is None else \
        ["off", "l2", "l1"] if streamed in prefetched else list(PREFETCH)
    cfg.define_knob(pfx + ".prefetch", options)
    st = s[op]
    loop = main_loop.get(reader) if reader is not None else None
    at_reader = cfg[name].val == "reader" and loop is not None
    rf = None
    if cfg[pfx + ".lanes"].val > 1:
        _, ki = st.split(op.reduce_axis[0], factor=cfg[pfx + ".lanes"].val)
        rf = lanes_innermost(s, s.rfactor(op.output(0), ki, factor_axis=len(op.axis)))
    folded = _fold_partials(s, op, lanes) if rf is not None else None
    partial_stages = [t for t in (rf, folded) if t is not None]
    if at_reader:
        for t in partial_stages:
            s[t].compute_at(s[reader], loop)
        if rf is not None and partials is not None:
            partials[op] = rf.op
        locality = PREFETCH[cfg[pfx + ".prefetch"].val]
        if rf is not None and locality is not None:
            step = cfg[pfx + ".lanes"].val
            s[rf].prefetch(streamed, s[rf].op.reduce_axis[0], -(-rext[0] // step), locality)
        st.compute_at(s[reader], loop)
        return True
    spatial = list(op.axis)
    if not spatial:
        return False
    row = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    if cfg[pfx + ".parallel"].val:
        st.parallel(row)
    for t in partial_stages:
        s[t].compute_at(st, row)
    return False


def _fold_partials(s, op, lanes: int):
    """Several vectors of partial results folded to one vector by vector adds (a second
    rfactor, lane axis innermost and vectorized), so the last step to one value is a chain
    of `lanes` scalar adds instead of 4 * lanes: 3-7% of a 4096-wide layernorm or softmax
    row (Zen 4, one thread). None when there is one vector of partials or fewer."""
    partial = s[op].leaf_iter_vars[-1]
    if static_extent(partial) <= lanes or static_extent(partial) % lanes:
        return None
    _, lane = s[op].split(partial, factor=lanes)
    return lanes_innermost(s, s.rfactor(op.output(0), lane, factor_axis=len(op.axis)))
