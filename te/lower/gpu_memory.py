"""The memory access oracle of target 'cuda': coalescing and bank conflicts without a GPU.

Takes a function split for 'cuda' (its DevicePlan) and the values of its size variables;
gives a MemoryReport (gpu_memory_report.py). Each kernel runs symbolically, block after
block of a sample, all threads of a block at once as numpy vectors (SIMT: a serial loop
steps every thread together, a guard masks threads off), evaluating addresses only: every
Load and Store of a global or shared buffer becomes one request per warp (32 consecutive
threads, threadIdx.x fastest), costed by gpu_memory_count.py. An address that depends on
loaded data cannot be followed: such requests are counted as unresolved. Imports ir, the
device split, printer, visitor and te.compute.
"""
from __future__ import annotations

import sys

import numpy as np

from .. import dtype as dt
from ..compute import expr as E
from ..errors import LoweringError
from . import ir
from .arith import key
from .func import PrimFunc
from .gpu_memory_count import Site, warps
from .gpu_memory_report import AccessStats, KernelMemory, MemoryReport
from .passes.device_split import BLOCK_TAGS, GRID_TAGS, evaluate_on_host
from .printer import print_expr
from .visitor import stmt_children, walk_stmts


class _Unknown:
    """The value of an expression that reads memory: addresses built from it are unknown."""


UNKNOWN = _Unknown()


def memory_report(func: PrimFunc, sizes: tuple, blocks=3, iterations=8,
                  vector_form=None) -> MemoryReport:
    """The access statistics of every kernel of `func` (split for 'cuda') for one call
    with size variables `sizes` (in func.scalar_params order). blocks: how many blocks of
    each grid to run (evenly spaced from the first to the last), or None for all.
    iterations: a serial loop longer than this runs its first and last iterations/2 only,
    its counts scaled to the whole loop; None runs every iteration. vector_form: the code
    generator's vector form of a vectorized loop (vector_access.py's vector_loop), None
    where it runs lane by lane; without it, every one does."""
    if func.device_plan is None:
        raise LoweringError(f"memory_report: function '{func.name}' has no device plan; "
                            f"lower it for 'cuda' with split_host_device=True")
    for name, value in (("blocks", blocks), ("iterations", iterations)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < (1 if name == "blocks" else 2)):
            raise ValueError(f"memory_report: {name}: expected None or an integer >= "
                             f"{1 if name == 'blocks' else 2}, got {value!r}")
    env = dict(zip(func.scalar_params, sizes))
    kernels = []
    for part in func.device_plan.kernels:
        grid, block = ([evaluate_on_host(part.extents[t], env) if t in part.extents else 1
                        for t in tags] for tags in (GRID_TAGS, BLOCK_TAGS))
        kernels.append(_KernelRun(part, env, grid, block, iterations, vector_form)
                       .run(blocks))
    return MemoryReport(func.name, tuple(kernels))


class _KernelRun:
    """One kernel run over sampled blocks, every thread of a block at once."""

    def __init__(self, part, env: dict, grid: list, block: list, iterations, vector_form):
        self.part, self.grid, self.block = part, grid, block
        self.iterations = iterations
        self.vector_form = vector_form
        self.vector_forms: dict = {}   # id(For) -> (vector_form's answer, its keys) or None
        self.node_keys: dict = {}      # id(Load or Store) -> node_key
        self.env = dict(env)
        self.sites: dict = {}          # id(Load or Store) -> Site
        self.memory_stmts: dict = {}   # id(Stmt) -> whether it touches global or shared
        self.plans: dict = {}          # id(Expr) -> its load_plan
        self.closures: dict = {}       # id(Expr) -> its value as a closure
        # storage allocated inside the kernel other than shared is each thread's own
        # (registers, whatever its scope says), as the code generator makes it
        self.private = {x.buffer.data for x in walk_stmts(part.body)
                        if isinstance(x, ir.Allocate) and x.buffer.scope != "shared"}
        self.sampled_loops = False
        self.data_dependent_control = False
        # inside a loop the code runs in vector form: (the keys of its vector accesses,
        # their requests by site)
        self.vector_group = None
        threads = block[0] * block[1] * block[2]
        tid = np.arange(threads, dtype=np.int64)
        self.thread_index = {"threadIdx.x": tid % block[0],
                             "threadIdx.y": tid // block[0] % block[1],
                             "threadIdx.z": tid // (block[0] * block[1])}
        self.all_threads = np.ones(threads, dtype=bool)

    def run(self, blocks) -> KernelMemory:
        count = self.grid[0] * self.grid[1] * self.grid[2]
        if count <= 0 or self.all_threads.size == 0:
            picked = []
        elif blocks is None or blocks >= count:
            picked = list(range(count))
        else:
            picked = sorted({round(k * (count - 1) / max(1, blocks - 1))
                             for k in range(blocks)})
        for b in picked:
            gx, gy = self.grid[0], self.grid[1]
            self.block_index = {"blockIdx.x": b % gx, "blockIdx.y": b // gx % gy,
                                "blockIdx.z": b // (gx * gy)}
            try:
                self.stmt(self.part.body, self.all_threads, 1.0)
            except RecursionError:
                raise LoweringError(f"memory_report: kernel '{self.part.name}' nests too "
                                    f"deeply to analyse (Python's recursion limit, "
                                    f"{sys.getrecursionlimit()})") from None
        accesses = tuple(site.finish() for site in self.sites.values())
        return KernelMemory(self.part.name, tuple(self.grid), tuple(self.block),
                            len(picked), max(count, 0), self.iterations
                            if self.sampled_loops else None,
                            self.data_dependent_control, accesses)

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: ir.Stmt, mask: np.ndarray, weight: float) -> None:
        if not mask.any() or not self.touches_memory(s):
            return
        if isinstance(s, ir.SeqStmt):
            for x in s.stmts:
                self.stmt(x, mask, weight)
        elif isinstance(s, ir.For):
            self.loop(s, mask, weight)
        elif isinstance(s, ir.IfThenElse):
            self.loads(s.cond, mask, weight)
            cond = self.value(s.cond)
            if cond is UNKNOWN:     # a data-dependent branch: both sides, all threads
                self.data_dependent_control = True
                then_mask = else_mask = mask
            else:
                then_mask, else_mask = mask & cond, mask & ~np.asarray(cond, dtype=bool)
            self.stmt(s.then_case, then_mask, weight)
            if s.else_case is not None:
                self.stmt(s.else_case, else_mask, weight)
        elif isinstance(s, ir.LetStmt):
            self.loads(s.value, mask, weight)
            self.env[s.var] = self.value(s.value)
            self.stmt(s.body, mask, weight)
        elif isinstance(s, ir.Store):
            self.loads(s.index, mask, weight)
            self.loads(s.value, mask, weight)
            self.request(s, s.buffer, "store", s.index, mask, weight)
        elif isinstance(s, ir.ThreadAllreduce):
            # the combine itself moves registers (shuffles) and a few shared slots, left
            # out; the body runs on the first thread of each group
            for x in s.values:
                self.loads(x, mask, weight)
            for v in s.results:
                self.env[v] = UNKNOWN
            first = mask.copy()
            for tag in s.tags:
                first &= self.thread_index[tag] == 0
            self.stmt(s.body, first, weight)
        elif isinstance(s, ir.Allocate):
            self.stmt(s.body, mask, weight)
        elif isinstance(s, ir.Evaluate):
            if not isinstance(s.value, ir.Prefetch):
                self.loads(s.value, mask, weight)
        else:
            raise LoweringError(f"memory_report: cannot analyse {type(s).__name__} in "
                                f"kernel '{self.part.name}'")

    def loop(self, s: ir.For, mask: np.ndarray, weight: float) -> None:
        if s.kind == ir.THREAD_BINDING:
            index = self.thread_index.get(s.thread_tag, self.block_index.get(s.thread_tag))
            if index is None:
                raise LoweringError(f"memory_report: loop '{s.loop_var.name}' in kernel "
                                    f"'{self.part.name}' is bound to {s.thread_tag}")
            self.env[s.loop_var] = self.value(s.min) + index
            self.stmt(s.body, mask & (index < self.value(s.extent)), weight)
            return
        low, extent = self.value(s.min), self.value(s.extent)
        if low is UNKNOWN or extent is UNKNOWN:
            raise LoweringError(f"memory_report: loop '{s.loop_var.name}' in kernel "
                                f"'{self.part.name}' has bounds that depend on loaded data")
        extent = np.asarray(extent)
        longest = int(extent[mask].max() if extent.ndim else extent)
        steps, scale = range(max(0, longest)), 1.0
        if self.iterations is not None and longest > self.iterations and \
                s.kind != ir.VECTORIZED:
            half = self.iterations // 2
            steps = list(range(half)) + list(range(longest - half, longest))
            scale = longest / len(steps)
            self.sampled_loops = True
        vec = group = None
        if s.kind == ir.VECTORIZED and self.vector_group is None and \
                self.vector_form is not None:
            # once per loop: its guard's value is cached by id like every expression's
            if id(s) not in self.vector_forms:
                found = self.vector_form(s)
                self.vector_forms[id(s)] = found and (found, {
                    (id(a.buffer.data), key(a.index))
                    for a in [found.store] + [load for load, _ in found.loads]})
            vec, keys = self.vector_forms[id(s)] or (None, None)
        if vec is not None:
            # the threads that run the vector form: where its guard holds for every lane
            # (the others run the loop lane by lane); a guard on loaded data: none
            guard = mask if vec.guard is None else self.value(vec.guard)
            wide = np.zeros_like(mask) if guard is UNKNOWN else mask & guard
            group = {}
        outer = self.vector_group
        if group is not None:
            self.vector_group = (keys, group)
        try:
            for step in steps:
                self.env[s.loop_var] = low + step
                inside = mask if extent.ndim == 0 else mask & (step < extent)
                self.stmt(s.body, inside, weight * scale)
        finally:
            self.vector_group = outer
        if group is not None:
            for site_id, requests in group.items():
                self.vector_requests(self.sites[site_id], requests, vec.lanes, wide)

    def touches_memory(self, s: ir.Stmt) -> bool:
        """Whether `s` loads or stores a global or shared buffer: a nest over registers
        only (a thread's tile of sums) is skipped, which is most of a tiled kernel's work."""
        found = self.memory_stmts.get(id(s))
        if found is None:
            found = False

            def visit(e):
                nonlocal found
                found = found or (isinstance(e, ir.Load) and self.shared_or_global(e.buffer))
            for node in walk_stmts(s):
                if isinstance(node, ir.Store) and self.shared_or_global(node.buffer):
                    found = True
                    break
                for x in stmt_children(node)[0]:
                    E.pre_order(x, visit)
                if found:
                    break
            self.memory_stmts[id(s)] = found
        return found

    def shared_or_global(self, buffer: ir.Buffer) -> bool:
        return buffer.scope in ("global", "shared") and buffer.data not in self.private

    # -- requests ----------------------------------------------------------------------
    def request(self, node, buffer: ir.Buffer, access: str, index: E.Expr,
                mask: np.ndarray, weight: float) -> None:
        if not self.shared_or_global(buffer):
            return   # per-thread storage: registers
        site = self.sites.get(id(node))
        if site is None:
            site = self.sites[id(node)] = Site(AccessStats(
                buffer.name, buffer.scope, access, buffer.dtype,
                example=f"{buffer.name}[{print_expr(ir.unchecked(index))}]"))
        address = self.value(index)
        if address is UNKNOWN:
            site.stats.unresolved += weight * warps(mask)
            return
        if dt.lanes(index.dtype) > 1:
            raise LoweringError(f"memory_report: vector index of '{buffer.name}' in kernel "
                                f"'{self.part.name}' (a function lowered for the CPU?)")
        width = _element_bytes(buffer.dtype)
        if self.vector_group is not None and self.node_key(node) in self.vector_group[0]:
            self.vector_group[1].setdefault(id(node), []).append(
                (np.asarray(address) * width, mask, weight))
        else:
            site.add(np.asarray(address) * width, mask, weight, width)

    def node_key(self, node) -> tuple:
        """A Load's or Store's buffer and index, as vector_form names its accesses."""
        found = self.node_keys.get(id(node))
        if found is None:
            found = self.node_keys[id(node)] = (id(node.buffer.data), key(node.index))
        return found

    def vector_requests(self, site: Site, requests: list, lanes: int,
                        wide: np.ndarray) -> None:
        """A vector access's requests, one per lane: the threads in `wide` make one wide
        request (float2, float4: the lanes are consecutive and aligned, as the code
        generator checked), the others one request per lane, as the code runs them."""
        width = _element_bytes(site.stats.dtype)
        first, _, weight = requests[0]
        if wide.any():
            site.add(first, wide, weight, width * lanes)
        for address, m, w in requests:
            rest = m & ~wide
            if rest.any():
                site.add(address, rest, w, width)

    def loads(self, e: E.Expr, mask: np.ndarray, weight: float) -> None:
        """Every global or shared Load in `e` as a request."""
        self.run_plan(self.load_plan(e), mask, weight)

    def run_plan(self, plan: tuple, mask: np.ndarray, weight: float) -> None:
        """The requests of a load_plan; the unchosen side of a select reads nothing."""
        if not plan or not mask.any():
            return
        for step in plan:
            if step[0] == "load":
                _, node, inner = step
                self.run_plan(inner, mask, weight)
                self.request(node, node.buffer, "load", node.index, mask, weight)
                continue
            _, cond_expr, inner, true_plan, false_plan = step
            self.run_plan(inner, mask, weight)
            cond = self.value(cond_expr)
            if cond is UNKNOWN:
                self.run_plan(true_plan, mask, weight)
                self.run_plan(false_plan, mask, weight)
            else:
                cond = np.asarray(cond, dtype=bool)
                self.run_plan(true_plan, mask & cond, weight)
                self.run_plan(false_plan, mask & ~cond, weight)

    def load_plan(self, e: E.Expr) -> tuple:
        """The steps that visit `e`'s loads: ("load", node, plan of its index) for a load
        of global or shared memory (or of any buffer whose index loads), ("select", cond,
        plan of cond, plan of the true side, plan of the false side) for a select with
        loads on a side; what has no such load (arithmetic on registers) has no step."""
        plan = self.plans.get(id(e))
        if plan is None:
            plan = self.plans[id(e)] = self._make_plan(e)
        return plan

    def _make_plan(self, e: E.Expr) -> tuple:
        if isinstance(e, ir.Load):
            inner = self.load_plan(e.index)
            if not self.shared_or_global(e.buffer) and not inner:
                return ()
            return (("load", e, inner),)
        if isinstance(e, E.Select):
            cond = self.load_plan(e.cond)
            sides = self.load_plan(e.true_value), self.load_plan(e.false_value)
            return (("select", e.cond, cond) + sides,) if any(sides) else cond
        return tuple(step for child in E.children(e) for step in self.load_plan(child))

    # -- values ------------------------------------------------------------------------
    def value(self, e: E.Expr):
        """An int or bool (one value for all threads), a numpy array (one per thread), or
        UNKNOWN where the value reads memory."""
        fn = self.closures.get(id(e))
        if fn is None:
            fn = self.closures[id(e)] = self._compile(e)
        try:
            return fn()
        except _Unresolved:
            return UNKNOWN

    def _compile(self, e: E.Expr):
        """`e` as a closure over self.env; it raises _Unresolved where `e` reads memory
        or computes on data (floats)."""
        if isinstance(e, E.Const):
            value = int(e.value) if dt.is_integral(e.dtype) or dt.is_bool(e.dtype) else None
            return _unresolved if value is None else (lambda: value)
        if isinstance(e, E.Var):
            env = self.env

            def var():
                x = env.get(e, UNKNOWN)
                if x is UNKNOWN:
                    raise _Unresolved
                return x
            return var
        if isinstance(e, E.Binary):
            fn = _OPS.get("truncdiv" if e.op == "div" else e.op)
            if fn is None or not (dt.is_integral(e.a.dtype) or dt.is_bool(e.a.dtype)):
                return _unresolved
            fa, fb = self._compile(e.a), self._compile(e.b)
            return lambda: fn(fa(), fb())
        if isinstance(e, E.Not):
            fa = self._compile(e.a)
            return lambda: np.logical_not(fa())
        if isinstance(e, E.Cast):
            fv = self._compile(e.value)
            if dt.is_bool(e.dtype):
                return lambda: fv() != 0
            if dt.is_integral(e.dtype) and (dt.is_integral(e.value.dtype)
                                            or dt.is_bool(e.value.dtype)):
                return lambda: _as_int(fv())
            return _unresolved
        if isinstance(e, E.Select):
            fc, ft, ff = (self._compile(x) for x in (e.cond, e.true_value, e.false_value))
            return lambda: np.where(fc(), ft(), ff())
        if isinstance(e, ir.CheckedIndex):
            return self._compile(e.index)
        if isinstance(e, E.Call) and e.name == "likely":
            return self._compile(e.args[0])
        return _unresolved


class _Unresolved(Exception):
    """Raised by a compiled expression whose value reads memory."""


def _unresolved():
    raise _Unresolved


def _as_int(x):
    return int(x) if isinstance(x, (bool, int, np.integer, np.bool_)) else \
        np.asarray(x).astype(np.int64)


def _element_bytes(dtype: str) -> int:
    return max(1, dt.bits(dtype) // 8)


def _truncdiv(a, b):
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where(b == 0, 0, np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q))


_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "floordiv": lambda a, b: np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b))),
    "floormod": lambda a, b: np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b))),
    "truncdiv": _truncdiv, "truncmod": lambda a, b: a - _truncdiv(a, b) * b,
    "min": np.minimum, "max": np.maximum, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or,
    # exact on in-range operands; shifts are left unresolved (their dtype decides them)
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
}
