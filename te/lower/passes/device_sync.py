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
from ..visitor import SKIP, walk_down, walk_stmts

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


def check_barriers(part, s: ir.Stmt) -> None:
    """Every thread of a block must reach each barrier (around a shared fill in a
    sequence): none may sit under a condition, a guarded thread loop, or a loop whose trip
    count varies by thread."""
    for _ in walk_down(s, initial_barrier_state(), lambda x, state: _barriers(part, x, state)):
        pass


def initial_barrier_state() -> tuple:
    """The state of check_barriers' walk at a kernel's top."""
    return frozenset(), "", False


def barrier_state(part, s: ir.Stmt, state: tuple) -> tuple:
    """What the statements inside `s` see in check_barriers' walk (a fill is walked into,
    with the state around it)."""
    inner = _barriers(part, s, state)
    return (state[0], state[1], False) if inner is SKIP else inner


def _barriers(part, s: ir.Stmt, state: tuple):
    """What the statements inside `s` see, from what `s` sees: (the Vars that differ
    between the threads of one block, what makes the position thread-dependent ("" if
    nothing), whether the statement is an item of a sequence); SKIP inside a fill."""
    thread_vars, divergent, in_sequence = state
    if in_sequence and part.is_shared_fill(s):
        if divergent:   # no barrier goes inside a fill: only around it
            raise BuildError(f"te.build: target 'cuda': the barrier around shared stage "
                             f"'{stage_name(s)}' would sit under {divergent}, which not "
                             f"every thread of the block reaches; give the loops bound "
                             f"to one thread axis the same extent, and split so that the "
                             f"shared stage's attach loop needs no bound check")
        return SKIP

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
    elif isinstance(s, ir.ThreadAllreduce) and not divergent:
        divergent = f"the store of the reduction across {', '.join(s.tags)} (its first " \
                    f"thread only)"
    return thread_vars, divergent, isinstance(s, ir.SeqStmt)


def check_in_place_updates(part, s: ir.Stmt) -> None:
    """A buffer the kernel both reads and writes (a reduction updated in place) must have
    its elements split among all the threads that run the update: a thread axis of the
    launch that the update's loops do not bind runs it again, at the same time, on the same
    elements."""
    # the path from the kernel's top: ("loop", tag) and ("alloc", data Var) items
    for node, path in walk_down(s, (), _path_step):
        if isinstance(node, ir.Store) and node.buffer.data in part.updated:
            _check_in_place_update(part, node, path)


def _path_step(s: ir.Stmt, path: tuple) -> tuple:
    if isinstance(s, ir.For) and s.kind == ir.THREAD_BINDING:
        return path + (("loop", s.thread_tag),)
    if isinstance(s, ir.Allocate):
        return path + (("alloc", s.buffer.data),)
    return path


def _check_in_place_update(part, s: ir.Store, path: tuple) -> None:
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


def _live_local_bytes(s: ir.Stmt) -> int:
    """The most bytes of per-thread arrays alive at once: nested allocations add up,
    allocations in sequence do not (the largest sum along one path from s down)."""
    return max(_add_local(node, live) for node, live in walk_down(s, 0, _add_local))


def _add_local(s: ir.Stmt, live: int) -> int:
    """The bytes of per-thread arrays alive inside `s`, given those alive around it."""
    if isinstance(s, ir.Allocate) and s.buffer.scope != "shared":
        return live + int(s.extent.value) * np.dtype(s.buffer.dtype).itemsize
    return live


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
