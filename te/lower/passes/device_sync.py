"""What the threads of a kernel share, and the checks that keep them from racing.

Takes one kernel's statement (device_split.py) and gives: which statements fill shared
memory (barriers go around them, te/codegen/cuda/codegen.py), and refusals where the CUDA
code would differ from the loop IR's meaning: a barrier not every thread of a block
reaches; a buffer updated in place (a reduction) by threads that do not split its elements
among them; shared or per-thread memory over CUDA's limits. Imports ir, buffers, visitor,
printer, te.compute.
"""
from __future__ import annotations

import numpy as np

from ...compute import expr as E
from ...errors import BuildError
from .. import ir
from ..buffers import allocated_buffers, stored_buffers
from ..printer import print_expr
from ..visitor import stmt_children, walk_stmts

BLOCK_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
MAX_SHARED_BYTES = 48 * 1024         # static __shared__ per block
MAX_LOCAL_BYTES = 512 * 1024         # per-thread arrays (CUDA's local memory per thread)


def shared_arrays(s: ir.Stmt) -> dict:
    """data Var -> (Buffer, elements) of each shared buffer allocated in `s`: the largest of
    its allocations (passes may copy one)."""
    out: dict = {}
    for node in walk_stmts(s, reverse=True):
        if isinstance(node, ir.Allocate) and node.buffer.scope == "shared":
            size = int(node.extent.value)
            if node.buffer.data not in out or out[node.buffer.data][1] < size:
                out[node.buffer.data] = (node.buffer, size)
    return dict(sorted(out.items(), key=lambda kv: kv[1][0].name))


def updated_buffers(s: ir.Stmt) -> set:
    """The data Vars of buffers updated in place: stored with a value that reads them."""
    found: set = set()
    for node in walk_stmts(s):
        if isinstance(node, ir.Store):
            def visit(e, data=node.buffer.data):
                if isinstance(e, ir.Load) and e.buffer.data is data:
                    found.add(data)
            E.pre_order(node.value, visit)
    return found


def fills_shared_only(s: ir.Stmt, shared: set) -> bool:
    """Whether what `s` leaves behind (stores to buffers allocated outside it) is shared
    memory only, and something: a fill, which barriers go around."""
    left = stored_buffers(s) - allocated_buffers(s)
    return bool(left) and left <= shared


def filled_name(s: ir.Stmt) -> str:
    """The name of a buffer `s` leaves behind (for a fill: the shared stage it fills)."""
    left = stored_buffers(s) - allocated_buffers(s)
    for node in walk_stmts(s, reverse=True):
        if isinstance(node, ir.Store) and node.buffer.data in left:
            return node.buffer.name
    return "?"


def stage_name(s: ir.Stmt) -> str:
    """The name of the last buffer `s` stores to (the stage it computes: the producers
    computed inside its nest store first)."""
    for node in walk_stmts(s, reverse=True):
        if isinstance(node, ir.Store):
            return node.buffer.name
    return "?"


def check_barriers(part, s: ir.Stmt, thread_vars: set = frozenset(),
                   divergent: str = "") -> None:
    """Every thread of a block must reach each barrier (around a shared fill): none may sit
    under a condition, a guarded thread loop, or a loop whose trip count varies by thread.
    `divergent` names what makes the current position thread-dependent ("" if nothing)."""
    if isinstance(s, ir.SeqStmt):
        for x in s.stmts:
            if not part.is_shared_fill(x):
                check_barriers(part, x, thread_vars, divergent)
            elif divergent:   # no barrier goes inside a fill: only around it
                raise BuildError(f"te.build: target 'cuda': the barrier around shared stage "
                                 f"'{stage_name(x)}' would sit under {divergent}, which not "
                                 f"every thread of the block reaches; give the loops bound "
                                 f"to one thread axis the same extent, and split so that the "
                                 f"shared stage's attach loop needs no bound check")
        return

    def varies(x) -> bool:   # differs between the threads of one block
        return any(v in thread_vars for v in E.free_vars(x))
    if isinstance(s, ir.For):
        if s.kind == ir.THREAD_BINDING and s.thread_tag in BLOCK_TAGS:
            if part.needs_guard(s) and not divergent:
                divergent = f"the guard of loop '{s.loop_var.name}' ({s.thread_tag})"
            thread_vars = thread_vars | {s.loop_var}
        elif not divergent and (varies(s.min) or varies(s.extent)):
            divergent = f"loop '{s.loop_var.name}', whose extent differs between threads"
    elif isinstance(s, ir.IfThenElse) and not divergent and varies(s.cond):
        divergent = f"the condition ({print_expr(s.cond)})"
    elif isinstance(s, ir.LetStmt) and varies(s.value):
        thread_vars = thread_vars | {s.var}
    for x in stmt_children(s)[1]:
        check_barriers(part, x, thread_vars, divergent)


def check_in_place_updates(part, s: ir.Stmt, path: tuple = ()) -> None:
    """A buffer the kernel both reads and writes (a reduction updated in place) must have
    its elements split among all the threads that run the update: a thread axis of the
    launch that the update's loops do not bind runs it again, at the same time, on the same
    elements. `path`: ("loop", tag) and ("alloc", data Var) items from the kernel's top."""
    if isinstance(s, ir.Store) and s.buffer.data in part.updated:
        shared = s.buffer.data in part.shared
        if shared:   # one copy per block: only the loops inside its allocation split it
            start = max(k for k, (kind, what) in enumerate(path)
                        if kind == "alloc" and what is s.buffer.data)
            tags = {item[1] for item in path[start:] if item[0] == "loop"}
        else:
            tags = {item[1] for item in path if item[0] == "loop"}
        needed = {t for t, x in part.extents.items()
                  if not (isinstance(x, E.Const) and int(x.value) == 1)
                  and (t in BLOCK_TAGS or not shared)}
        missing = sorted(needed - tags)
        if missing:
            raise BuildError(f"te.build: target 'cuda': stage '{s.buffer.name}' is updated in "
                             f"place (a reduction), and the threads along "
                             f"{', '.join(missing)} would all update the same elements at "
                             f"once; bind its loops to {', '.join(missing)} too, or compute "
                             f"it per thread (cache_write with scope 'local' at the thread "
                             f"loop)")
        return
    if isinstance(s, ir.For) and s.kind == ir.THREAD_BINDING:
        path = path + (("loop", s.thread_tag),)
    elif isinstance(s, ir.Allocate):
        path = path + (("alloc", s.buffer.data),)
    for x in stmt_children(s)[1]:
        check_in_place_updates(part, x, path)


def _live_local_bytes(s: ir.Stmt) -> int:
    """The most bytes of per-thread arrays alive at once: nested allocations add up,
    allocations in sequence do not."""
    inner = max((_live_local_bytes(x) for x in stmt_children(s)[1]), default=0)
    if isinstance(s, ir.Allocate) and s.buffer.scope != "shared":
        return inner + int(s.extent.value) * np.dtype(s.buffer.dtype).itemsize
    return inner


def check_memory_limits(kernel_name: str, s: ir.Stmt) -> None:
    """CUDA's per-block shared memory and per-thread local memory (nvcc --ptx does not
    check them; loading the module would fail)."""
    totals = {"shared": sum(size * np.dtype(b.dtype).itemsize
                            for b, size in shared_arrays(s).values()),
              "local": _live_local_bytes(s)}
    for kind, limit, what in (("shared", MAX_SHARED_BYTES, "shared memory per block"),
                              ("local", MAX_LOCAL_BYTES, "per-thread arrays")):
        if totals[kind] > limit:
            raise BuildError(f"te.build: target 'cuda': kernel '{kernel_name}' needs "
                             f"{totals[kind]} bytes of {what}; CUDA allows {limit}: use "
                             f"smaller tiles")
