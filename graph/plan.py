"""Static memory planning (MindSpore's SOMAS in spirit): an execution order, lifetimes, and
an offset for every intermediate in one arena.

plan(steps, inputs, constants, outputs) takes PlanSteps (a kernel's reads and writes; a view
writes nothing) and returns a MemoryPlan:
  storage  a view shares its source's storage; graph inputs and constants stay where the
           caller's arrays are; the storage of a graph output is a fresh array the caller
           owns (never in the arena); every other value is an intermediate in the arena;
  order    the steps' order given, and graph.schedule_order's memory-aware ones; the plan
           keeps the order whose arena is smallest (ties: the order given);
  in-place an elementwise step writes its output over an input of the same dtype and shape
           whose storage it reads last (merged into one buffer, its lifetime the union);
  concat   a concatenate of contiguous blocks (PlanStep.slices) has its inputs written by
           their producers straight into its output's buffer, each at its block's offset
           (nested ones too: DenseNet's growing concatenations are one buffer), and does not
           run (MemoryPlan.elided); where every input is an intermediate of the arena that
           no other such concatenate took;
  offsets  best-fit over size and lifetime: buffers placed one by one (several placement
           orders tried, the smallest arena kept), each in the smallest gap left by the
           buffers whose lifetimes overlap it, or above them all; sizes and offsets are
           multiples of ALIGNMENT.
Lifetimes are inclusive step ranges [first, last] in the chosen order: a buffer is written at
`first` and last read at `last`. Imports numpy and graph.{order,plan_report}.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .order import schedule_orders
from .plan_report import MemoryPlan, TensorPlan

ALIGNMENT = 64  # bytes: a cache line, and what AVX-512 loads want
CONCAT_IN_PLACE = True  # (benchmarks turn it off to compare)


@dataclass(frozen=True)
class PlanStep:
    """What the planner knows of one step: the values it reads and writes; `view` when it
    writes nothing (its one output is its one input in another shape); `elementwise` when
    its kernel reads an input of the output's dtype and shape only at the index it writes
    (so it may write its output over that input); `slices` when it concatenates its inputs
    as contiguous blocks of its one output, in order (graph.fuse.slices_concat); `label`
    names it in the report."""
    inputs: tuple
    outputs: tuple
    label: str
    view: bool = False
    elementwise: bool = False
    slices: bool = False


def nbytes(v) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.dtype).itemsize


def aligned(n: int) -> int:
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)


class _Storage:
    """Who owns each value's memory: root[id(v)] is the value whose buffer holds v (itself,
    a view's source's root, or the root of the concatenation whose block it is), at byte
    offset[id(v)] in it; external roots are inputs and constants; out_root maps a root
    holding a graph output to that output's index; elided holds the ids of the concatenate
    steps whose blocks their producers write in place (concat)."""

    def __init__(self, steps: list, inputs: list, constants: list, outputs: list,
                 concat: bool = True):
        self.root = {id(v): v for v in list(inputs) + list(constants)}
        self.external = {id(v) for v in self.root.values()}
        for step in steps:
            if step.view:
                self.root[id(step.outputs[0])] = self.root[id(step.inputs[0])]
            else:
                self.root.update((id(v), v) for v in step.outputs)
        self.out_root: dict = {}
        for k, v in enumerate(outputs):
            r = self.root[id(v)]
            if id(r) not in self.external:
                self.out_root.setdefault(id(r), k)
        self.offset: dict = {}
        self.elided: set = set()
        self.blocks: set = set()    # ids of the values moved into a concatenation
        if concat:
            self._concat_in_place(steps)

    def in_arena(self, v) -> bool:
        r = self.root[id(v)]
        return id(r) not in self.external and id(r) not in self.out_root

    def _own_intermediate(self, v, taken: dict) -> bool:
        """Whether v holds its own arena buffer that no concatenation took yet."""
        return self.root[id(v)] is v and self.in_arena(v) and id(v) not in taken

    def _concat_in_place(self, steps: list) -> None:
        """Each concatenate of contiguous blocks whose output and inputs are arena
        intermediates of their own: every value rooted at an input moves into the output's
        root, at the input's block offset; the step is elided."""
        parent: dict = {}   # id(input) -> (the concatenation's output, byte offset)
        for step in steps:
            if not step.slices or step.view:
                continue
            (out,) = step.outputs
            # every block starts on an ALIGNMENT boundary, as every buffer of the arena does
            if not (self.root[id(out)] is out and self.in_arena(out)) or not all(
                    self._own_intermediate(v, parent) and v.dtype == out.dtype
                    for v in step.inputs) or any(nbytes(v) % ALIGNMENT
                                                 for v in step.inputs[:-1]):
                continue
            at = 0
            for v in step.inputs:
                parent[id(v)] = (out, at)
                at += nbytes(v)
            self.elided.add(id(step))
        if not parent:
            return
        for key, r in list(self.root.items()):
            at = 0
            if id(r) in parent:
                self.blocks.add(key)
            while id(r) in parent:
                r, step_at = parent[id(r)]
                at += step_at
            self.root[key] = r
            if at:
                self.offset[key] = at


def plan(steps: list, inputs: list, constants: list, outputs: list, reorder: bool = True,
         inplace: bool = True) -> MemoryPlan:
    """The MemoryPlan of `steps` (PlanSteps in a valid order) of a graph with these inputs,
    constants and outputs (graph Values); `inplace=False` writes no value over another
    and no concatenation's blocks in place."""
    storage = _Storage(steps, inputs, constants, outputs, concat=inplace and CONCAT_IN_PLACE)
    candidates = [("given", list(steps))]
    if reorder:
        candidates += schedule_orders(steps, storage, nbytes)
    best, tried = None, []
    for heuristic, order in candidates:
        layout = _layout(order, storage, inplace)
        tried.append((heuristic, layout[0], layout[2]))
        if best is None or layout[0] < best[1][0]:
            best = (heuristic, layout, order)
    heuristic, (arena, buffers, lower_bound), order = best
    return _report(order, storage, buffers, arena, lower_bound, tried, heuristic,
                   inputs, constants, outputs)


@dataclass
class _Buffer:
    """One block of the arena: the values (a root and what was written over it in place)."""
    values: list
    size: int
    first: int
    last: int
    offset: int = -1


def _layout(order: list, storage: _Storage, inplace: bool) -> tuple:
    """(arena bytes, [_Buffer] placed, lower bound) of the steps run in `order`."""
    last_use: dict = {}
    for k, step in enumerate(order):
        if not step.view and id(step) not in storage.elided:
            for v in step.inputs:
                last_use[id(storage.root[id(v)])] = k
    buffers: dict = {}  # id(root) -> _Buffer
    for k, step in enumerate(order):
        if step.view or id(step) in storage.elided:
            continue
        for v in step.outputs:
            if not storage.in_arena(v):
                continue
            r = storage.root[id(v)]
            if r is not v:     # a block of a concatenation: its buffer starts here
                if id(r) not in buffers:
                    buffers[id(r)] = _Buffer([r], aligned(nbytes(r)), k,
                                             last_use.get(id(r), k))
                continue
            host = _inplace_host(step, k, v, storage, buffers, last_use) if inplace else None
            if host is not None:
                host.values.append(v)
                host.last = last_use.get(id(v), k)
                buffers[id(v)] = host
            else:
                buffers[id(v)] = _Buffer([v], aligned(nbytes(v)), k, last_use.get(id(v), k))
    unique = list({id(b): b for b in buffers.values()}.values())
    live = [0] * (len(order) + 1)
    for b in unique:
        for k in range(b.first, b.last + 1):
            live[k] += b.size
    arena = _place(unique)
    return arena, unique, max(live)


def _inplace_host(step, k: int, out, storage: _Storage, buffers: dict, last_use: dict):
    """The buffer `out` may take over: an input's, read last by this elementwise step, of
    the output's dtype, shape and size, read by no other input of the step through
    another value (a view in another shape would be read at other indices)."""
    if not step.elementwise or len(step.outputs) != 1:
        return None
    for v in step.inputs:
        r = storage.root[id(v)]
        host = buffers.get(id(r))
        if (host is None or host.last != k or last_use.get(id(r)) != k
                or v.dtype != out.dtype or tuple(v.shape) != tuple(out.shape)
                or nbytes(r) != nbytes(out)):
            continue
        if all(w is v or storage.root[id(w)] is not r for w in step.inputs):
            return host
    return None


# Placement orders tried: the TFLite / SOMAS greedy-by-size first, then others that win
# on some graphs (long-lived buffers first, the area of a buffer in (bytes x steps), time).
_PLACEMENT_KEYS = (
    lambda b: (-b.size, b.first),
    lambda b: (-(b.last - b.first), -b.size, b.first),
    lambda b: (-b.size * (b.last - b.first + 1), b.first),
    lambda b: (b.first, -b.size),
)


def _place(buffers: list) -> int:
    """Set each buffer's offset by best fit (the placement order giving the smallest arena);
    returns the arena's size."""
    best = None
    for key in _PLACEMENT_KEYS:
        offsets, top = _best_fit(sorted(buffers, key=key))
        if best is None or top < best[1]:
            best = (offsets, top)
    for b in buffers:
        b.offset = best[0][id(b)]
    return best[1]


def _best_fit(buffers: list) -> tuple:
    """({id(buffer): offset}, arena size) placing `buffers` in this order."""
    offsets: dict = {}
    placed: list = []
    top = 0
    for b in buffers:
        busy = sorted((offsets[id(p)], offsets[id(p)] + p.size) for p in placed
                      if p.first <= b.last and b.first <= p.last)
        choice, end = None, 0
        for start, stop in busy:
            gap = start - end
            if gap >= b.size and (choice is None or gap < choice[1]):
                choice = (end, gap)
            end = max(end, stop)
        offsets[id(b)] = choice[0] if choice is not None else end
        placed.append(b)
        top = max(top, offsets[id(b)] + b.size)
    return offsets, top


def _report(order, storage, buffers, arena, lower_bound, tried, heuristic,
            inputs, constants, outputs) -> MemoryPlan:
    """The MemoryPlan: one TensorPlan per value the steps write, in execution order, and
    where every value lives (graph.plan_report.MemoryPlan.locations)."""
    of_buffer = {id(v): b for b in buffers for v in b.values}
    locations = {id(v): ("input", k) for k, v in enumerate(inputs)}
    locations.update((id(v), ("constant", k)) for k, v in enumerate(constants))
    first, last = {}, {}
    for k, step in enumerate(order):
        for v in step.inputs:
            last[id(v)] = k
        for v in step.outputs:
            first[id(v)] = k
    tensors = []
    for step in order:
        for v in step.outputs:
            r = storage.root[id(v)]
            at = storage.offset.get(id(v), 0)
            view = "" if r is v else f"block of %{r.name} at +{at}" \
                if id(v) in storage.blocks else f"view of %{r.name}"
            if id(step) in storage.elided:
                view = ", ".join(x for x in (view, "its blocks written in place") if x)
            if id(r) in storage.external:
                where, offset, note = locations[id(r)][0], None, view
                locations[id(v)] = locations[id(r)]
            elif id(r) in storage.out_root:
                k = storage.out_root[id(r)]
                where, offset = "output", None
                note = ", ".join(x for x in (f"output {k}", view) if x)
                locations[id(v)] = ("output", k)
            else:
                b = of_buffer[id(r)]
                where, offset = "arena", b.offset + at
                k = b.values.index(r)
                note = view or (f"in place of %{b.values[k - 1].name}" if k else "")
                locations[id(v)] = ("arena", offset)
            tensors.append(TensorPlan(v, step.label, nbytes(v), first[id(v)],
                                      last.get(id(v), first[id(v)]), where, offset, note))
    naive = sum(aligned(nbytes(v)) for step in order if not step.view
                for v in step.outputs if storage.in_arena(v))
    return MemoryPlan(order, tensors, locations, arena, naive, lower_bound, heuristic,
                      tuple(tried), ALIGNMENT, tuple(inputs), tuple(constants),
                      tuple(outputs), frozenset(storage.elided))
