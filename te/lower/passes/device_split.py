"""Host/device split for target 'cuda': which statements become kernels, and their launches.

Takes a lowered PrimFunc; gives a DevicePlan: the device temporaries the host allocates
(global-scope Allocates at the top of the function), and one KernelPart per top-level nest,
with the buffers and size variables it takes and its grid and block extents (expressions of
the size variables, evaluated on the host at each call). Refuses, naming the loop or stage,
what the CUDA code could not make agree with the loop IR: a nest with no thread-bound loop,
a parallel loop, an axis bound twice on one path outside a shared fill, threads sharing
storage other than 'shared' buffers; device_sync.py checks barriers, in-place updates and
memory. CUDA's launch limits come with the target (te.target, from runtime.cuda). Imports
ir, buffers, visitor, printer, device_sync and te.compute.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ... import dtype as dt
from ...compute import expr as E
from ...errors import BuildError
from .. import ir
from ..func import PrimFunc
from ..buffers import allocated_buffers, loaded_buffers, stored_buffers
from ..printer import print_expr
from ..visitor import SKIP, stmt_children, walk_down, walk_stmts
from .device_carried import check_carried_reads
from .thread_allreduce import partial_buffers, plan_allreduces
from .warp_calls import with_warp_lanes
from .device_sync import (BLOCK_TAGS, check_barriers, check_in_place_updates,
                          check_memory_limits, filled_name, fills_shared_only, stage_name,
                          updated_buffers)

GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


@dataclass(frozen=True)
class KernelPart:
    """One kernel: `body` runs once per thread of a grid x block launch."""
    name: str
    body: ir.Stmt
    buffers: tuple       # Buffers the kernel reads or writes (arguments or temporaries)
    scalars: tuple       # size Vars the kernel uses
    extents: dict        # thread tag -> launch extent Expr (max over the loops bound to it)
    shared: frozenset    # data Vars of the block's shared buffers
    updated: frozenset   # data Vars of the buffers (not per-thread) it updates in place
    # id(ir.ThreadAllreduce) -> its AllreducePlan (passes/thread_allreduce.py)
    allreduces: dict = field(default_factory=dict)

    def needs_guard(self, loop: ir.For) -> bool:
        """A loop shorter than its axis's launch extent runs on the first threads only."""
        return not E.structural_equal(loop.extent, self.extents[loop.thread_tag])

    def is_shared_fill(self, s: ir.Stmt) -> bool:
        """A statement that stores only to shared buffers: barriers go around it."""
        return fills_shared_only(s, self.shared)


@dataclass(frozen=True)
class DevicePlan:
    temporaries: tuple   # (Buffer, element count Expr), allocated on the device per call
    kernels: tuple       # KernelParts, launched in order


def split_host_device(func: PrimFunc, target) -> DevicePlan:
    """The kernels of `func` and their launches; `target` (a te.target.Target for 'cuda')
    gives the launch limits."""
    temporaries: list = []
    nests: list = []
    _collect_top(func.body, temporaries, nests)
    host_vars = set(func.scalar_params)
    known = {b.data for b in func.params} | {b.data for b, _ in temporaries}
    for buf, extent in temporaries:
        _require_host(extent, host_vars, f"the size of temporary '{buf.name}'")
    kernels = []
    for k, nest in enumerate(nests):
        name = f"{func.name}_kernel{k}"
        checker = _KernelChecker(allocated_buffers(nest, "shared"))
        checker.visit(nest)
        if not checker.extents:
            if next(_loops(nest), None) is None:
                raise BuildError(f"te.build: target 'cuda': stage '{stage_name(nest)}' has no "
                                 f"loop (a 0-d result), so no thread can be bound to it; "
                                 f"target 'cuda' cannot compute it yet")
            raise BuildError(f"te.build: target 'cuda': stage '{stage_name(nest)}' has no "
                             f"loop bound to a GPU thread axis, so it would run on the host; "
                             f"bind its outer loops with s[...].bind(axis, "
                             f"te.thread_axis('blockIdx.x')) and te.thread_axis('threadIdx.x')")
        extents = {tag: _launch_extent(tag, exprs, host_vars)
                   for tag, exprs in checker.extents.items()}
        extents = with_warp_lanes(name, nest, extents)
        _check_static_limits(extents, target)
        for b in checker.buffers.values():
            if b.data not in known and b.data not in checker.local:
                raise BuildError(f"te.build: target 'cuda': buffer '{b.name}' is neither an "
                                 f"argument nor a temporary of '{func.name}'")
        per_thread = checker.local - checker.shared
        part = KernelPart(name, nest,
                          tuple(b for b in checker.buffers.values()
                                if b.data not in checker.local),
                          tuple(v for v in func.scalar_params if v in checker.vars),
                          extents, frozenset(checker.shared),
                          frozenset(updated_buffers(nest) - per_thread))
        part = replace(part, allreduces=plan_allreduces(part))
        check_memory_limits(name, nest)
        if part.shared:
            check_barriers(part, nest)
        check_in_place_updates(part, nest)
        check_carried_reads(name, nest)
        kernels.append(part)
    return DevicePlan(tuple(temporaries), tuple(kernels))


def _launch_extent(tag: str, exprs: list, host_vars: set) -> E.Expr:
    for x in exprs:
        _require_host(x, host_vars, f"the extent of the loop bound to {tag}")
    if all(isinstance(x, E.Const) for x in exprs):
        return max(exprs, key=lambda x: int(x.value))
    extent = exprs[0]
    for x in exprs[1:]:
        if not E.structural_equal(extent, x):
            extent = E.binary("max", extent, x)
    return extent


def _collect_top(s: ir.Stmt, temporaries: list, nests: list) -> None:
    """Top-level sequences and global Allocates stay on the host; the rest are kernels."""
    for _ in walk_down(s, None, lambda x, _: _host_or_kernel(x, temporaries, nests)):
        pass


def _host_or_kernel(s: ir.Stmt, temporaries: list, nests: list):
    """None to walk on into a host statement (a sequence, a global allocation); SKIP after
    taking a kernel nest, or a cache hint, which means nothing to a GPU."""
    if isinstance(s, ir.SeqStmt):
        return None
    if isinstance(s, ir.Allocate) and s.buffer.scope == "global":
        temporaries.append((s.buffer, s.extent))
        return None
    if isinstance(s, ir.Allocate):
        where = ("per block: compute_at it inside the block's loops (below every loop bound "
                 "to blockIdx)" if s.buffer.scope == "shared" else
                 "per thread: compute_at it at a loop bound to threadIdx")
        raise BuildError(f"te.build: target 'cuda': stage '{s.buffer.name}' has scope "
                         f"'{s.buffer.scope}' but is computed at the root, outside every "
                         f"kernel; that memory exists {where}, or use scope 'global'")
    if not (isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Prefetch)):
        nests.append(s)
    return SKIP


class _KernelChecker:
    """Walks one kernel nest: thread extents, buffers and variables it uses, and refusals.

    Threads of a block communicate only through shared buffers, filled by loops that store
    nothing else (a "cooperative" loop may then reuse an axis bound further out: it runs
    on the same threads). Any other storage inside a kernel is per thread, so a stage's own
    loops must not be bound there; and two stages in one sequence, the second reading what
    the first's threads wrote, would need a barrier this code generator does not place."""

    def __init__(self, shared: set):
        self.extents: dict = {}   # tag -> [extent Expr]
        self.buffers: dict = {}   # data Var -> Buffer, first use first
        self.local: set = set()   # data Vars allocated inside the kernel
        self.shared = shared      # ... of those, the block's shared buffers
        self.vars: set = set()

    def visit(self, nest: ir.Stmt) -> None:
        """Check kernel nest `nest` and note what it uses."""
        for _ in walk_down(nest, ((), ""), self._step):
            pass

    def _step(self, s: ir.Stmt, state: tuple) -> tuple:
        """Check `s` itself; gives what the statements inside it see. `state`: (the
        (tag, loop name) of the thread-bound loops around `s`, the shared stage whose fill
        `s` is part of ("" if none))."""
        bound, in_fill = state
        if not in_fill and not isinstance(s, (ir.Store, ir.Evaluate)) and self._cooperative(s):
            in_fill = filled_name(s)
            _refuse_fills_reading_each_other(s)
        if isinstance(s, ir.For):
            if s.kind == ir.PARALLEL:
                raise BuildError(f"te.build: target 'cuda': loop '{s.loop_var.name}' is "
                                 f"parallel; on a GPU, bind it to a thread axis instead")
            if s.kind == ir.THREAD_BINDING:
                self._thread_loop(s, bound)
                bound = bound + ((s.thread_tag, s.loop_var.name),)
        elif isinstance(s, ir.SeqStmt):
            # parts of one stage (its init and update, or a loop split by partitioning)
            # may follow each other: each thread reads only what it wrote
            def stage(x) -> frozenset:
                return frozenset(stored_buffers(x) - allocated_buffers(x) - self.shared)
            partials = partial_buffers(s)
            threaded = [x for x in s.stmts
                        if self._private_thread_loop(x, partials) is not None]
            stages = {stage(x): x for x in threaded}
            # a later statement of another stage that reads what threads wrote (even
            # with no thread loop of its own, e.g. fused by compute_with)
            for k, x in enumerate(s.stmts):
                if x in threaded:
                    for y in s.stmts[k + 1:]:
                        if isinstance(y, ir.ThreadAllreduce) and stage(x) <= partial_buffers(y):
                            continue   # combines what the threads wrote, across them
                        if stage(y) != stage(x) and loaded_buffers(y) & stage(x):
                            stages.setdefault(stage(y), y)
            if len(stages) > 1:
                a, b = (stage_name(x) for x in list(stages.values())[:2])
                raise BuildError(f"te.build: target 'cuda': stages '{a}' and '{b}' run in one "
                                 f"kernel with loops bound to GPU threads; the second would "
                                 f"read the first's results before other threads wrote "
                                 f"them (a barrier is needed, which target 'cuda' places only "
                                 f"around stages in shared memory); compute_root the first "
                                 f"stage and bind its own loops, or cache it in 'shared'")
        elif isinstance(s, ir.Allocate):
            self._allocate(s, bound, in_fill)
        elif isinstance(s, (ir.ProducerStore, ir.ProducerRealize)):
            raise BuildError("te.build: target 'cuda' needs a flattened function (te.lower)")
        if isinstance(s, ir.Store):
            self.buffers.setdefault(s.buffer.data, s.buffer)
        for x in stmt_children(s)[0]:
            E.pre_order(x, self._visit_expr)
        return bound, in_fill

    def _thread_loop(self, s: ir.For, bound: tuple) -> None:
        if s.thread_tag not in GRID_TAGS + BLOCK_TAGS:
            raise BuildError(f"te.build: target 'cuda': loop '{s.loop_var.name}' is bound to "
                             f"'{s.thread_tag}', which target 'cuda' does not support yet "
                             f"(use blockIdx.* or threadIdx.*)")
        if not (s.thread_tag in BLOCK_TAGS and self._cooperative(s)):
            _refuse_reused_axis(s, bound)
        self.extents.setdefault(s.thread_tag, []).append(s.extent)

    def _allocate(self, s: ir.Allocate, bound: tuple, in_fill: str) -> None:
        # 'wmma.accumulator': a warp's fragments, per thread as 'local' (each lane its share)
        if s.buffer.scope not in ("shared", "local", "global", "wmma.accumulator"):
            raise BuildError(f"te.build: target 'cuda' does not support scope "
                             f"'{s.buffer.scope}' (buffer '{s.buffer.name}') yet")
        if s.buffer.scope == "shared":
            self._shared_allocate(s, in_fill)
        else:
            # Every thread has its own copy: right if each computes all of it (its loops
            # serial), wrong if loops bound to threads split it among them.
            own = _thread_loop_storing(s.body, s.buffer.data)
            if own is not None and s.buffer.data not in partial_buffers(s.body):
                _refuse_reused_axis(own, bound)   # the more precise complaint first
                raise BuildError(f"te.build: target 'cuda': stage '{s.buffer.name}' is "
                                 f"stored per thread (scope '{s.buffer.scope}' inside a "
                                 f"kernel), but its loop '{own.loop_var.name}' bound to "
                                 f"{own.thread_tag} gives each thread only part of it to "
                                 f"compute; cache it with scope 'shared' for the threads of "
                                 f"a block to share it, leave its loops unbound, or "
                                 f"compute_root it")
        if not isinstance(s.extent, E.Const):
            raise BuildError(f"te.build: target 'cuda': buffer '{s.buffer.name}' "
                             f"(scope '{s.buffer.scope}') needs a constant size, got "
                             f"{print_expr(s.extent)}")
        self.local.add(s.buffer.data)

    def _shared_allocate(self, s: ir.Allocate, in_fill: str) -> None:
        if in_fill:
            raise BuildError(f"te.build: target 'cuda': shared stage '{s.buffer.name}' is "
                             f"computed inside the fill of shared stage '{in_fill}'; the "
                             f"barriers it needs would sit inside that fill: compute both at "
                             f"the same loop")
        for node in _loops(s.body):
            if node.kind == ir.THREAD_BINDING and node.thread_tag in GRID_TAGS:
                raise BuildError(f"te.build: target 'cuda': shared stage '{s.buffer.name}' "
                                 f"spans several blocks (loop '{node.loop_var.name}' inside "
                                 f"it is bound to {node.thread_tag}), but shared memory "
                                 f"belongs to one block; bind only threadIdx axes inside it")

    def _cooperative(self, s: ir.Stmt) -> bool:
        return fills_shared_only(s, self.shared)

    def _private_thread_loop(self, s: ir.Stmt, partials: set = frozenset()):
        """The first statement in `s` whose threads write memory other threads may not see
        yet, or None: a loop bound to threads that is not a shared-memory fill (nor the
        threads' partial results of a cross-thread reduction, which it combines), or a
        cross-thread reduction whose first thread stores outside shared memory."""
        partials = partials | partial_buffers(s)
        for x in walk_stmts(s):
            if isinstance(x, ir.For) and x.kind == ir.THREAD_BINDING \
                    and not self._cooperative(x) \
                    and not stored_buffers(x) - allocated_buffers(x) <= partials:
                return x
            if isinstance(x, ir.ThreadAllreduce) and not self._cooperative(x):
                return x
        return None

    def _visit_expr(self, e) -> None:
        if isinstance(e, (ir.Load, ir.AccessPtr)):   # AccessPtr: an extern call's pointer
            self.buffers.setdefault(e.buffer.data, e.buffer)
        elif isinstance(e, E.Var):
            self.vars.add(e)


def _refuse_reused_axis(loop: ir.For, bound: tuple) -> None:
    for tag, name in bound:
        if tag == loop.thread_tag:
            raise BuildError(f"te.build: target 'cuda': loop '{loop.loop_var.name}' is bound "
                             f"to {tag} inside loop '{name}', which is bound to it too (only a "
                             f"stage in shared memory may reuse a thread axis)")


def _loops(s: ir.Stmt):
    """Every For statement inside `s` (and `s` itself), later statements first: errors name
    the consumer's loop before those of the stages computed inside it."""
    return (node for node in walk_stmts(s, reverse=True) if isinstance(node, ir.For))


def _refuse_fills_reading_each_other(fill: ir.Stmt) -> None:
    """A fill of several shared stages where one reads another (fused by compute_with)
    needs a barrier inside it, where none can go."""
    filled = stored_buffers(fill) - allocated_buffers(fill)
    if len(filled) < 2:
        return
    readers = [(b, _loaded_by_stores_to(fill, b) & (filled - {b})) for b in filled]
    for b, read in readers:
        if read:
            names = {n.buffer.data: n.buffer.name for n in _stores(fill)}
            raise BuildError(f"te.build: target 'cuda': shared stages '{names[next(iter(read))]}'"
                             f" and '{names[b]}' are filled in one loop (compute_with) and "
                             f"the second reads the first: the barrier between them would "
                             f"sit inside that loop; fill them at separate loops")


def _stores(s: ir.Stmt):
    return (node for node in walk_stmts(s, reverse=True) if isinstance(node, ir.Store))


def _loaded_by_stores_to(s: ir.Stmt, data) -> set:
    """The buffers read by the values stored to `data` inside `s`."""
    found: set = set()

    def visit(e):
        if isinstance(e, ir.Load):
            found.add(e.buffer.data)
    for node in _stores(s):
        if node.buffer.data is data:
            E.pre_order(node.value, visit)
    return found


def _thread_loop_storing(s: ir.Stmt, data):
    """The outermost loop in `s` bound to a thread that stores to buffer `data`, or None."""
    for node in _loops(s):
        if node.kind == ir.THREAD_BINDING and data in stored_buffers(node):
            return node
    return None


def _require_host(x: E.Expr, host_vars: set, what: str) -> None:
    inner = [v.name for v in E.free_vars(x) if v not in host_vars]
    if inner:
        raise BuildError(f"te.build: target 'cuda': {what} depends on loop variable(s) "
                         f"{', '.join(sorted(set(inner)))}, but a launch's size must be known "
                         f"before it starts (bind loops whose extents are fixed or size "
                         f"variables)")
    if not _host_computable(x):
        raise BuildError(f"te.build: target 'cuda': {what} ({print_expr(x)}) cannot be "
                         f"computed on the host")


def _host_computable(x: E.Expr) -> bool:
    if isinstance(x, (E.Const, E.Var)):
        return dt.is_integral(x.dtype)
    if isinstance(x, E.Binary) and (x.op in _INT_OPS or x.op in E.SHIFT_OPS):
        return _host_computable(x.a) and _host_computable(x.b)
    if isinstance(x, E.Cast):
        return dt.is_integral(x.dtype) and _host_computable(x.value)
    return False


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_INT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
    "truncdiv": _truncdiv, "div": _truncdiv,
    "truncmod": lambda a, b: a - _truncdiv(a, b) * b,
    "min": min, "max": max,
    # exact on in-range operands (shifts: evaluate_on_host, their answers take the dtype)
    "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
}


def evaluate_on_host(x: E.Expr, sizes: dict) -> int:
    """The value of an integer expression of size Vars, given {Var: int}."""
    if isinstance(x, E.Const):
        return int(x.value)
    if isinstance(x, E.Var):
        return int(sizes[x])
    if isinstance(x, E.Cast):
        return evaluate_on_host(x.value, sizes)
    a, b = evaluate_on_host(x.a, sizes), evaluate_on_host(x.b, sizes)
    if x.op in E.SHIFT_OPS:
        return E.fold_shift(x.op, a, b, x.dtype)
    return _INT_OPS[x.op](a, b)


def _check_static_limits(extents: dict, target) -> None:
    """Limits CUDA puts on every launch, checked now when the extents are constants."""
    max_threads = target.max_threads_per_block
    block = [extents.get(tag) for tag in BLOCK_TAGS]
    if all(x is None or isinstance(x, E.Const) for x in block):
        values = [1 if x is None else int(x.value) for x in block]
        total = values[0] * values[1] * values[2]
        if total > max_threads:
            raise BuildError(f"te.build: target 'cuda': {total} threads per block "
                             f"(threadIdx x, y, z = {values}); CUDA allows at most "
                             f"{max_threads}")
    for tags, limits in ((BLOCK_TAGS, target.max_block), (GRID_TAGS, target.max_grid)):
        for tag, limit in zip(tags, limits):
            x = extents.get(tag)
            if isinstance(x, E.Const) and int(x.value) > limit:
                raise BuildError(f"te.build: target 'cuda': the loop bound to {tag} has "
                                 f"extent {int(x.value)}; CUDA allows at most {limit}")
