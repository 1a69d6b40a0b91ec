"""What graph.plan_memory and graph.plan return: the memory plan as data and as a table.

A MemoryPlan lists, per value a step writes, its size, lifetime (first and last step in the
chosen order), where it lives (the arena at an offset, a graph output's own array, or an
input's or a constant's memory for a view of one) and how it got there (a view, written in
place over another value); and the totals: the planned arena (the peak), the naive total
(every intermediate its own buffer), the lower bound (the most bytes live at one step).
Imports nothing from the project.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorPlan:
    """One value a step writes: `where` is 'arena' (at `offset`), 'output' (the caller's
    array of a graph output), 'input' or 'constant' (a view of one); `first` and `last` are
    the steps that write it and read it last (first when nothing reads it)."""
    value: object
    step: str
    nbytes: int
    first: int
    last: int
    where: str
    offset: int | None
    note: str

    @property
    def name(self) -> str:
        return self.value.name


@dataclass(frozen=True)
class MemoryPlan:
    """The plan of one graph: `order` the steps in execution order, `tensors` one TensorPlan
    per value they write, `locations` id(value) -> ('input' | 'constant' | 'output', index)
    or ('arena', byte offset) for every value the steps read or write; `arena_bytes` the
    planned peak, `naive_bytes` every intermediate in its own (aligned) buffer, `lower_bound`
    the most bytes live at one step (of the buffers placed, in-place merges counted once),
    `heuristic` the order kept, `tried` (heuristic, arena bytes, lower bound) of every
    order tried (the first: the order the steps came in); `inputs`, `constants`, `outputs`
    the planned graph's (after the O1 passes at O1 and O2); `elided` the ids of the steps of
    `order` that do not run (concatenations whose blocks their producers wrote in place)."""
    order: list
    tensors: list
    locations: dict
    arena_bytes: int
    naive_bytes: int
    lower_bound: int
    heuristic: str
    tried: tuple
    alignment: int
    inputs: tuple
    constants: tuple
    outputs: tuple
    elided: frozenset = frozenset()

    def summary(self) -> str:
        lb = self.lower_bound or 1
        naive = self.naive_bytes or 1
        return (f"memory plan: {len(self.order)} steps ({self.heuristic} order), arena "
                f"{_mb(self.arena_bytes)} = {self.arena_bytes / lb:.3f}x the lower bound "
                f"{_mb(self.lower_bound)}, {self.arena_bytes / naive:.3f}x the naive total "
                f"{_mb(self.naive_bytes)}, offsets aligned to {self.alignment} bytes\n"
                + "orders tried (arena, lower bound): " + "; ".join(
                    f"{h} {_mb(a)}, {_mb(b)}" for h, a, b in self.tried))

    def __str__(self) -> str:
        rows = [(t.name, t.value.dtype + str(list(t.value.shape)), str(t.nbytes),
                 f"{t.first}-{t.last}", t.where if t.offset is None else str(t.offset),
                 t.note) for t in self.tensors]
        head = ("tensor", "type", "bytes", "steps", "offset", "note")
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
        right = (False, False, True, True, True, False)

        def line(cells) -> str:
            return "  ".join(c.rjust(w) if r else c.ljust(w)
                             for c, w, r in zip(cells, widths, right)).rstrip()

        return "\n".join([self.summary(), line(head)] + [line(r) for r in rows])


def _mb(n: int) -> str:
    if n < 2**10:
        return f"{n} B"
    return f"{n / 2**10:.1f} KiB" if n < 2**20 else f"{n / 2**20:.2f} MiB"
