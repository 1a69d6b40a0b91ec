"""The automatic search space: a schedule generator for any te.compute graph.

Takes the output tensors (constant shapes) and a config (ConfigSpace to collect knobs,
ConfigEntity to apply them); gives (schedule, args). Knobs are defined unconditionally, in
the same order for every config, so the space is static; a knob that does not apply to a
branch is ignored. Policy, per stage of the original graph:
  * injective non-outputs: inlined (knob: compute_root instead);
  * outputs with a reduction: cache_write local (knob) + compute_at the outer tile,
    multi-level splits of spatial axes (3 levels) and of the first reduction axis
    (2 levels), loop-order knob, vectorize innermost, unroll knob, parallel over fused
    outer loops; with little spatial parallelism, an rfactor knob instead;
  * injective outputs: fuse outer axes + parallel, split + vectorize the last axis;
  * non-output reductions: computed at the output's row loop (knob) or at root.
Imports te.compute, te.schedule and space.
"""
from __future__ import annotations

import math

from ..compute.tensor import ComputeOp, PlaceholderOp
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule, topo_order
from .space import apply_split
from .workload import output_ops

MAX_TILE = 64
MAX_UNROLL = 256
ORDERS = ("ko_m_ki_i", "m_ko_ki_i", "ko_ki_m_i")


def static_extent(iv) -> int:
    ext = iv.dom.extent
    if not hasattr(ext, "value"):
        raise ArgumentError(f"te.autotune: axis '{iv.var.name}' has a symbolic extent; the "
                            f"automatic space needs constant shapes")
    return int(ext.value)


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
    cons = _consumers(ops)
    s = create_schedule(out_ops)
    inlined = set()
    for op in ops:  # 1. inline injective producers first: later steps read the result
        if op in out_ops or op.is_reduction:
            continue
        name = prefix[op] + ".inline"
        cfg.define_knob(name, [True, False])
        _define_injective(cfg, op, prefix[op] + ".root")
        if cfg[name].val:
            s[op].compute_inline()
            inlined.add(op)
        else:
            _schedule_injective(cfg, s, op, prefix[op] + ".root")
    main_loop = {}
    for op in out_ops:  # 2. the outputs
        if not isinstance(op, ComputeOp):
            continue
        if op.is_reduction:
            main_loop[op] = _schedule_reduction(cfg, s, op, prefix[op])
        else:
            main_loop[op] = _schedule_injective(cfg, s, op, prefix[op])
    for op in ops:  # 3. reductions that feed an output
        if op in out_ops or not op.is_reduction:
            continue
        _place_reduction(cfg, s, op, prefix[op], _final_reader(op, cons, inlined, out_ops),
                         main_loop)
    return s, args


def _final_reader(op, cons: dict, inlined: set, out_ops: list):
    """The one output that reads `op` (through inlined stages only), or None."""
    readers, todo = set(), list(cons[op])
    while todo:
        r = todo.pop()
        if r in inlined:
            todo.extend(cons[r])
        else:
            readers.add(r)
    if len(readers) == 1:
        (r,) = readers
        if r in out_ops:
            return r
    return None


def _define_injective(cfg, op, pfx: str) -> None:
    last = static_extent(op.axis[-1]) if op.axis else 1
    vec_opts = [v for v in (8, 16, 4, 1) if v <= max(last, 1)] or [1]
    cfg.define_knob(pfx + ".vec", vec_opts)
    cfg.define_knob(pfx + ".parallel", [True, False])


def _schedule_injective(cfg, s, op, pfx: str):
    """Fuse the outer axes (parallel), split the last one and vectorize it."""
    _define_injective(cfg, op, pfx)
    axes = list(op.axis)
    st = s[op]
    if not axes:
        return None
    outer = st.fuse(*axes[:-1]) if len(axes) > 1 else None
    vec = cfg[pfx + ".vec"].val
    lo, li = st.split(axes[-1], factor=vec) if vec > 1 else (axes[-1], None)
    if li is not None:
        st.vectorize(li)
    row = outer if outer is not None else lo
    if cfg[pfx + ".parallel"].val:
        st.parallel(row)
    return row if outer is not None else None


def _place_reduction(cfg, s, op, pfx: str, reader, main_loop: dict) -> None:
    name = pfx + ".at"
    cfg.define_knob(name, ["root", "reader"])
    cfg.define_knob(pfx + ".parallel", [True, False])
    st = s[op]
    loop = main_loop.get(reader) if reader is not None else None
    if cfg[name].val == "reader" and loop is not None:
        st.compute_at(s[reader], loop)
        return
    spatial = list(op.axis)
    if spatial and cfg[pfx + ".parallel"].val:
        st.parallel(st.fuse(*spatial) if len(spatial) > 1 else spatial[0])


def _schedule_reduction(cfg, s, op, pfx: str):
    """The tiling schedule of an output with a reduction (matmul, conv, pool, sums)."""
    spatial, reduce = list(op.axis), list(op.reduce_axis)
    ext = [static_extent(iv) for iv in spatial]
    rext = [static_extent(iv) for iv in reduce]
    for iv, e in zip(spatial, ext):
        cfg.define_split(f"{pfx}.tile_{iv.var.name}", e, num_outputs=3, policy="all",
                         max_factor=MAX_TILE)
    cfg.define_split(f"{pfx}.tile_{reduce[0].var.name}", rext[0], num_outputs=2, policy="all",
                     max_factor=MAX_TILE)
    cfg.define_knob(pfx + ".order", list(ORDERS))
    cfg.define_knob(pfx + ".vec", [True, False])
    cfg.define_knob(pfx + ".unroll", ["none", "ki", "m"])
    cfg.define_knob(pfx + ".fuse_parallel", list(range(len(spatial), -1, -1)))
    few = math.prod(ext) < 64 and rext[0] >= 64
    cfg.define_knob(pfx + ".rfactor", [True, False] if few else [False])
    cfg.define_knob(pfx + ".cache", [True, False] if op.num_outputs == 1 else [False])
    if cfg[pfx + ".rfactor"].val:
        return _schedule_rfactor(cfg, s, op, pfx)
    tiles = [cfg[f"{pfx}.tile_{iv.var.name}"].val for iv in spatial]
    ktile = cfg[f"{pfx}.tile_{reduce[0].var.name}"].val
    if cfg[pfx + ".cache"].val:
        cache = s.cache_write(op.output(0), "local")
        st = s[op]
        outer, inner = [], []
        for iv, t in zip(spatial, tiles):
            o, i = st.split(iv, factor=t[1] * t[2])
            outer.append(o)
            inner.append(i)
        st.reorder(*(outer + inner))
        if cfg[pfx + ".vec"].val and tiles[-1][1] * tiles[-1][2] > 1:
            st.vectorize(inner[-1])
        row = _fuse_parallel(cfg, st, outer, pfx)
        cst = s[cache]
        cst.compute_at(st, row)
        mids, ins = [], []
        for iv, t in zip(cst.op.axis, tiles):
            m, i = apply_split([-1, t[2]], s, cst, iv)
            mids.append(m)
            ins.append(i)
        _order_and_annotate(cfg, cst, list(cst.op.reduce_axis), ktile, [], mids, ins, pfx)
        return row
    st = s[op]
    outer, mids, ins = [], [], []
    for iv, t in zip(spatial, tiles):
        o, m, i = apply_split(t, s, st, iv)
        outer.append(o)
        mids.append(m)
        ins.append(i)
    _order_and_annotate(cfg, st, reduce, ktile, outer, mids, ins, pfx)
    return _fuse_parallel(cfg, st, outer, pfx)


def _fuse_parallel(cfg, st, outer: list, pfx: str):
    """Fuse the first p outer loops and run them in parallel; the loop to attach at."""
    p = cfg[pfx + ".fuse_parallel"].val
    if p >= 2:
        fused = st.fuse(*outer[:p])
        outer[:p] = [fused]
    if p >= 1:
        st.parallel(outer[0])
    return outer[-1]


def _order_and_annotate(cfg, st, reduce: list, ktile, outer: list, mids: list, ins: list,
                        pfx: str):
    """Split the reduction, order the loops (after `outer`), vectorize and unroll."""
    ko, ki = apply_split(ktile, None, st, reduce[0])
    rest = reduce[1:]
    order = cfg[pfx + ".order"].val
    if order == "ko_m_ki_i":
        loops = [ko] + rest + mids + [ki] + ins
    elif order == "m_ko_ki_i":
        loops = mids + [ko] + rest + [ki] + ins
    else:
        loops = [ko] + rest + [ki] + mids + ins
    st.reorder(*(outer + loops))
    if cfg[pfx + ".vec"].val and _const_extent(ins[-1]) > 1:
        st.vectorize(ins[-1])
    unroll = cfg[pfx + ".unroll"].val
    # Unrolling multiplies code size: only a loop right above the inner tile, and only
    # when the unrolled body stays small (LLVM time grows fast with it).
    below = math.prod(_const_extent(iv) for iv in ins[:-1]) * \
        (1 if cfg[pfx + ".vec"].val else _const_extent(ins[-1]))
    if unroll == "ki" and order != "ko_ki_m_i" and 1 < _const_extent(ki) * below <= MAX_UNROLL:
        st.unroll(ki)
    elif unroll == "m" and len(ins) >= 2 and 1 < _const_extent(ins[-2]) <= MAX_UNROLL:
        st.unroll(ins[-2])


def _const_extent(iv) -> int:
    ext = iv.dom.extent
    return int(ext.value) if hasattr(ext, "value") else 0


def _schedule_rfactor(cfg, s, op, pfx: str):
    """Little spatial parallelism: factor the reduction into a vectorized partial stage."""
    reduce = list(op.reduce_axis)
    ktile = cfg[f"{pfx}.tile_{reduce[0].var.name}"].val
    st = s[op]
    ko, ki = apply_split(ktile, None, st, reduce[0])
    rf = s.rfactor(op.output(0), ki, factor_axis=len(op.axis))
    rst = s[rf]
    lanes = rst.op.axis[-1]
    red = list(rst.op.reduce_axis)
    rst.reorder(*(list(rst.op.axis[:-1]) + red + [lanes]))
    if cfg[pfx + ".vec"].val:
        rst.vectorize(lanes)
    if op.axis and cfg[pfx + ".fuse_parallel"].val >= 1:
        st.parallel(op.axis[0])
    return None
