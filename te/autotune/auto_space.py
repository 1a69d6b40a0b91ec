"""The automatic search space: a schedule generator for any te.compute graph.

Takes the output tensors (constant shapes) and a config (ConfigSpace to collect knobs,
ConfigEntity to apply them); gives (schedule, args). auto_schedule sorts the stages by kind
and hands each to the policy of its kind; the knobs are defined unconditionally, in the
same order for every config, and option 0 of each is the expected best. Imports
te.compute, te.schedule, micro_kernel, row_reduction, injective, stages, workload.
"""
from __future__ import annotations

from ..compute.tensor import ComputeOp, PlaceholderOp
from ..schedule.schedule import create_schedule, topo_order
from .injective import attach_producer, pipeline_rows, place_producer, schedule_output
from .epilogue import is_contraction, matmul_epilogue, rebuild
from .micro_kernel import define_matmul_like, schedule_matmul_like, static_extent
from .micro_kernel import vector_lanes  # noqa: F401  (features.py reads the host's width here)
from .row_reduction import (define_row_reduction, place_reduction, row_reduction_inputs,
                            schedule_row_reduction)
from .stages import Stages, consumers
from .workload import output_ops


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


# The kinds of ComputeOp stage (stage_kind) and the policy that schedules each:
#   matmul-like output    micro_kernel: a register tile (define_ / schedule_matmul_like)
#   row-reduction output  row_reduction: partial sums along its input rows
#   injective output      injective.schedule_output: vector rows, stores, pipelined rows
#   producer              injective.place_producer, attach_producer: inline, reader or root
#   reduction             row_reduction.place_reduction: at the reader's row loop or root
MATMUL_LIKE = "matmul-like output"
ROW_REDUCTION = "row-reduction output"
INJECTIVE_OUTPUT = "injective output"
PRODUCER = "producer"
REDUCTION = "reduction"


def stage_kind(op, out_ops: list) -> str:
    """The kind of ComputeOp `op` in a graph with outputs `out_ops`: picks its policy."""
    if op not in out_ops:
        return REDUCTION if op.is_reduction else PRODUCER
    if not op.is_reduction:
        return INJECTIVE_OUTPUT
    return ROW_REDUCTION if row_reduction_inputs(op) else MATMUL_LIKE


def auto_schedule(cfg, outputs, args=None):
    """Build the schedule that `cfg` chooses; returns (schedule, args). The policies run in
    passes over the stages, each reading what the earlier ones placed: the outputs' knobs
    that may rewrite the graph, producers (inlined ones vanish), the outputs (their row
    loops), the other stages readers first (at those loops), and the pipelined rows."""
    g, args = _prepare(cfg, outputs, args)
    s = create_schedule(g.out_ops)
    epilogue_stages = {x for _, stages in g.epilogues.values() for x in stages}
    for op in g.producers():
        if op in epilogue_stages:
            s[op].compute_inline()      # into the store of the contraction's tile
            g.inlined.add(op)
        else:
            place_producer(cfg, s, op, g)
    for op in g.ops:
        if op in g.contractions and not any(op is r for r, _ in g.epilogues.values()):
            schedule_matmul_like(cfg, s, op, g.prefix[op], g.packs.get(op))
    for op in g.out_ops:
        if isinstance(op, ComputeOp):
            g.main_loop[op] = _schedule_output(cfg, s, op, g)
    for op in reversed(g.ops):
        kind = stage_kind(op, g.out_ops)
        if kind == REDUCTION and op not in g.contractions:
            place_reduction(cfg, s, op, g)
        elif kind == PRODUCER and op in g.deferred:
            attach_producer(cfg, s, op, g)
    for op in list(g.pipelined):
        pipeline_rows(s, op, g)
    return s, args


def _prepare(cfg, outputs, args):
    """(Stages, args) of the graph, once the knobs that must exist before the schedule are
    defined: those of reduction outputs, whose packing rewrite (micro_kernel) replaces an
    output by one reading packed panels, in the stages and in `args`."""
    out_ops = output_ops(outputs)
    args = list(args) if args is not None else default_args(outputs)
    ops = [op for op in topo_order(out_ops) if isinstance(op, ComputeOp)]
    for op in ops:
        for iv in list(op.axis) + list(op.reduce_axis):
            static_extent(iv)
    prefix = _knob_prefix(ops)
    cons = consumers(ops)
    swap, packs = {}, {}
    epilogues = {op: found for op in out_ops if isinstance(op, ComputeOp)
                 and stage_kind(op, out_ops) == INJECTIVE_OUTPUT
                 and (found := matmul_epilogue(op, out_ops, cons)) is not None}
    # the register tiles: outputs first, then the contractions read by other stages (at
    # the tile of their epilogue output, or at root)
    tiled = [op for op in out_ops if isinstance(op, ComputeOp)]
    tiled += [op for op in ops if op not in out_ops and is_contraction(op)]
    contractions = set()
    for op in tiled:
        kind = stage_kind(op, out_ops)
        if kind == ROW_REDUCTION:
            define_row_reduction(cfg, op, prefix[op])
        elif kind in (MATMUL_LIKE, REDUCTION):
            if kind == REDUCTION:
                contractions.add(op)
            new, packed = define_matmul_like(cfg, op, prefix[op])
            if packed is not None:
                swap[op], packs[new] = new, packed
    if swap:
        swap = rebuild(ops, swap)
        out_ops = [swap.get(op, op) for op in out_ops]
        args = [swap[a.op].output(a.value_index) if a.op in swap else a for a in args]
        panels = {t.op for t in packs.values()}   # scheduled by the tile's policy
        ops = [op for op in topo_order(out_ops) if isinstance(op, ComputeOp)
               and op not in panels]
        for old, new in swap.items():
            prefix[new] = prefix[old]
        contractions = {swap.get(op, op) for op in contractions}
        epilogues = {swap.get(op, op): (swap.get(r, r), [swap.get(x, x) for x in chain])
                     for op, (r, chain) in epilogues.items()}
    return Stages(ops, out_ops, prefix, consumers(ops), packs, contractions=contractions,
                  epilogues=epilogues), args


def _schedule_output(cfg, s, op, g):
    """An output by the policy of its kind; returns its row loop (or None)."""
    kind = stage_kind(op, g.out_ops)
    if kind == ROW_REDUCTION:
        return schedule_row_reduction(cfg, s, op, g.prefix[op], g.partials)
    if kind == MATMUL_LIKE:
        return schedule_matmul_like(cfg, s, op, g.prefix[op], g.packs.get(op))
    if op in g.epilogues:
        r = g.epilogues[op][0]
        return schedule_matmul_like(cfg, s, r, g.prefix[r], g.packs.get(r), epilogue=op)
    return schedule_output(cfg, s, op, g)
