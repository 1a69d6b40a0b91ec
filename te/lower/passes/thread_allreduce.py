"""lower_thread_allreduce for target 'cuda': how each cross-thread reduction runs.

Takes one kernel (device_split.py: its body and launch extents) and gives, for each
ir.ThreadAllreduce in it, an AllreducePlan: the layout of its groups of threads in the
block and warps, from which te/codegen/cuda/allreduce.py writes warp shuffles within a
warp and a shared-memory step across warps (TVM's lower_thread_allreduce design). Refuses
what CUDA could not run as the IR means it: a combine that not every thread of the block
reaches (under a thread-dependent condition), reduction threads that are not the
innermost axes of the block, thread extents that are not constants, or shared memory
over CUDA's limit. Imports ir, visitor, printer, device_sync and te.compute.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...compute import expr as E
from ...errors import BuildError
from .. import ir
from ..printer import print_expr
from ..visitor import walk_down, walk_stmts
from .device_sync import (BLOCK_TAGS, MAX_SHARED_BYTES, barrier_state,
                          initial_barrier_state, shared_arrays)

WARP = 32


@dataclass(frozen=True)
class AllreducePlan:
    """Threads are numbered tid = x + X*(y + Y*z); a group is `size` consecutive tids (the
    reduction's axes are the block's innermost), `groups` of them fill the block."""
    size: int        # threads per group: the product of the reduction tags' launch extents
    groups: int      # groups per block
    segments: int    # warps a group touches at most (1: shuffles only, no shared memory)
    extents: tuple   # the block's launch extents (x, y, z), for the thread number

    @property
    def threads(self) -> int:
        return self.size * self.groups

    @property
    def full_warps(self) -> bool:
        """Every group fills whole warps: a butterfly (__shfl_xor_sync) needs no checks."""
        return self.size % WARP == 0


def partial_buffers(s: ir.Stmt) -> set:
    """The data Vars of the buffers whose values the allreduces in `s` combine: each thread
    has its own, filled by the reduction's thread-bound loops."""
    found: set = set()
    for node in walk_stmts(s):
        if isinstance(node, ir.ThreadAllreduce):
            for v in node.values:
                E.pre_order(v, lambda e: found.add(e.buffer.data)
                            if isinstance(e, ir.Load) else None)
    return found


def plan_allreduces(part) -> dict:
    """id(ThreadAllreduce) -> AllreducePlan for the kernel `part` (a KernelPart)."""
    plans: dict = {}
    for node, state in walk_down(part.body, initial_barrier_state(),
                                 lambda x, st: barrier_state(part, x, st)):
        if not isinstance(node, ir.ThreadAllreduce):
            continue
        who = f"te.build: target 'cuda': the reduction of '{_stored_name(node)}' across " \
              f"{', '.join(node.tags)}"
        divergent = state[1]
        if divergent:
            raise BuildError(f"{who} needs every thread of the block, but it sits under "
                             f"{divergent}; give the loops bound to one thread axis the "
                             f"same extent, and split the data axes so no bound check "
                             f"encloses the reduction")
        plans[id(node)] = _plan(part, node, who)
        _check_scratch(part, node, plans[id(node)], who)
    return plans


def _check_scratch(part, node: ir.ThreadAllreduce, plan: AllreducePlan, who: str) -> None:
    """The shared slots across warps, with the kernel's shared arrays, within CUDA's limit."""
    if plan.segments == 1:
        return
    scratch = sum(plan.groups * plan.segments * np.dtype(v.dtype).itemsize
                  for v in node.results)
    arrays = sum(size * np.dtype(b.dtype).itemsize for b, size in
                 shared_arrays(part.body).values())
    if scratch + arrays > MAX_SHARED_BYTES:
        raise BuildError(f"{who}: its {scratch} bytes of shared memory across warps and the "
                         f"kernel's {arrays} exceed CUDA's {MAX_SHARED_BYTES} per block; use "
                         f"smaller tiles")


def _plan(part, node: ir.ThreadAllreduce, who: str) -> AllreducePlan:
    extents = []
    for tag in BLOCK_TAGS:
        x = part.extents.get(tag)
        if x is not None and not isinstance(x, E.Const):
            raise BuildError(f"{who}: the launch extent of {tag} must be a constant, got "
                             f"{print_expr(x)}; split the loop bound to it by a constant "
                             f"factor")
        extents.append(1 if x is None else int(x.value))
    leading = BLOCK_TAGS[:len(node.tags)]
    if set(node.tags) != set(leading):
        raise BuildError(f"{who}: the reduction must be bound to the block's innermost thread "
                         f"axes ({', '.join(leading)}), and its data axes to the outer ones "
                         f"(TVM's layout: reduce on threadIdx.x, rows on threadIdx.y)")
    size = 1
    for x in extents[:len(node.tags)]:
        size *= x
    groups = extents[0] * extents[1] * extents[2] // size
    segments = max((g * size + size - 1) // WARP - (g * size) // WARP + 1
                   for g in range(groups))
    return AllreducePlan(size, groups, segments, tuple(extents))


def _stored_name(node: ir.ThreadAllreduce) -> str:
    for s in walk_stmts(node.body):
        if isinstance(s, ir.Store):
            return s.buffer.name
    return node.results[0].name
