"""What the automatic space's stage policies share while one graph is scheduled.

Takes the ComputeOps of a graph; gives the Stages record (the stages in order, their
readers and knob prefixes, and where each stage has been placed so far) and the facts about
how a stage reads rows that several policies consult: the input it streams row by row, the
row sum of a producer, the reductions an output reads streaming. Imports te.compute and
micro_kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..compute.tensor import ComputeOp, PlaceholderOp
from .micro_kernel import static_extent, tensor_loads

# Prefetch of the next row of a streamed input (the `.prefetch` knobs), default first:
# into L2 (locality 2, x86 prefetcht1), into every level (3, prefetcht0), or none. L2 by
# default: the next 4096-wide row would take half of a 32 KiB L1 from the row being
# worked on (benchmarks/kernels.py NEXT_ROW).
PREFETCH = {"l2": 2, "l1": 3, "off": None}


@dataclass
class Stages:
    """The stages of one graph and their placements, filled in as auto_schedule's passes
    run: a policy reads what earlier passes decided (which producers are inlined, the row
    loop of each output, the partial-result stages at a row loop) and records its own."""
    ops: list                 # the ComputeOps, producers first (after the packing rewrite)
    out_ops: list             # the output ops
    prefix: dict              # op -> its knob names' prefix
    cons: dict                # op -> the ComputeOps that read it
    packs: dict               # output op -> the packed panel it reads (micro_kernel)
    inlined: set = field(default_factory=set)
    deferred: list = field(default_factory=list)   # producers to place at a reader's loop
    main_loop: dict = field(default_factory=dict)  # output -> the row loop stages go to
    # outputs whose row loop is software-pipelined: op -> (row loop, vector loop, store
    # policy), finished once the stages computed in that row loop are known
    pipelined: dict = field(default_factory=dict)
    partials: dict = field(default_factory=dict)   # reduction -> its rfactor stage's op
    attached: dict = field(default_factory=dict)   # stage -> the output it is computed at
    shared: dict = field(default_factory=dict)     # reader -> rfactor op a producer joins
    # contractions given a register tile though not outputs (epilogue.py), and the outputs
    # that store such a tile: output -> (contraction, the stages inlined into the store)
    contractions: set = field(default_factory=set)
    epilogues: dict = field(default_factory=dict)

    def producers(self) -> list:
        """The injective stages that are not outputs, in graph order."""
        return [op for op in self.ops if op not in self.out_ops and not op.is_reduction]

    def streamed_by_producers(self) -> set:
        """The inputs that a producer reads row by row (softmax's exp reads X again after
        the max pass): a reduction over them does not prefetch them by default."""
        return {streamed_input(op) for op in self.producers()} - {None}

    def attach_target(self, op):
        """The one output in whose row loop every reader of `op` (through inlined stages)
        runs: the output itself, or a stage attached there. None if there is no such
        output."""
        targets, todo = set(), list(self.cons[op])
        while todo:
            r = todo.pop()
            if r in self.inlined:
                todo.extend(self.cons[r])
            elif r in self.out_ops:
                targets.add(r)
            else:
                targets.add(self.attached.get(r))
        if len(targets) == 1:
            (t,) = targets
            return t
        return None


def consumers(ops: list) -> dict:
    """op -> the ops of `ops` that read it."""
    cons = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            if t.op in cons:
                cons[t.op].append(op)
    return cons


def streamed_input(op):
    """The input placeholder that `op` reads row by row along its last axis (X in
    softmax's exp(X[i, j] - max[i])), if the row is long enough for a prefetch of the
    next row to matter (>= 1 KiB); else None."""
    return _row_input(op, op.axis[-1], len(op.axis)) if op.axis else None


def streamed_reduction_input(op):
    """The input placeholder that reduction `op` reads along its one reduction axis as the
    last index (X in layernorm's sum(X[i, k] / n)), with rows of >= 1 KiB; else None."""
    return _row_input(op, op.reduce_axis[0]) if len(op.reduce_axis) == 1 else None


def streamed_reductions_read(op) -> list:
    """The reductions `op` reads that stream an input row by row along their one
    reduction axis (layernorm's mean and variance of X), in the order `op` reads them."""
    found = [x.tensor.op for x in tensor_loads(op) if isinstance(x.tensor.op, ComputeOp)
             and x.tensor.op.is_reduction and len(x.tensor.op.reduce_axis) == 1
             and streamed_reduction_input(x.tensor.op) is not None]
    return list(dict.fromkeys(found))


def _row_input(op, iv, rank: int | None = None):
    """A placeholder `op` reads with `iv` as the last index (and `rank` indices, when
    given), if iv's rows are >= 1 KiB; else None."""
    if static_extent(iv) * 4 < 1024:
        return None
    return next((x.tensor for x in tensor_loads(op) if isinstance(x.tensor.op, PlaceholderOp)
                 and x.indices and x.indices[-1] is iv.var
                 and (rank is None or len(x.indices) == rank)), None)


def row_sum_of(op, cons: dict):
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
