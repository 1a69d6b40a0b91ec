"""Stage and its loop relations: how one operation is computed.

Takes an operation of the compute graph (te.compute); gives a Stage whose loop relations
(split/fuse), leaf loop order, annotations and attach point the schedule primitives edit.
Every primitive validates its input, raises ScheduleError with a plain explanation, then
records a Step (steps.py) on its Schedule so the schedule can be serialized and replayed.
Imports te.compute and steps; schedule.py (the Schedule that holds the stages) and
dataflow.py build on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Const, Var
from ..compute.scan_extern import ExternOp, ScanOp, TensorIntrin
from ..compute.tensor import (REDUCE, THREAD, ComputeOp, IterVar, Operation, PlaceholderOp, Range,
                              Tensor)
from ..errors import ScheduleError
from . import steps as S

if TYPE_CHECKING:  # for annotations only: schedule.py imports this module
    from .schedule import Schedule


@dataclass(frozen=True, eq=False)
class SplitRel:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Const | None
    nparts: Const | None


@dataclass(frozen=True, eq=False)
class FuseRel:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass
class IterAttr:
    kind: str = "serial"          # serial / vectorized / unrolled / parallel / thread_binding
    thread_tag: str = ""
    pragmas: list = field(default_factory=list)
    prefetch: list = field(default_factory=list)  # (tensor, offset, locality): Stage.prefetch
    # Stage.pipeline: None, or (stage, loop) to interleave with, or () for no interleaving
    pipeline: tuple | None = None
    tensorize: object = None  # Stage.tensorize: the TensorIntrin replacing this loop nest


ROOT, INLINE, SCOPE = "root", "inline", "scope"


def _ceil_div(a: E.Expr, b: E.Expr) -> E.Expr:
    return E.binary("floordiv", E.binary("add", a, E.binary("sub", b, 1)), b)


def loop_extent_max(dtype: str) -> int:
    """The largest value of a loop variable of `dtype`."""
    bits = dt.bits(dtype)
    return 2 ** bits - 1 if dt.is_uint(dtype) else 2 ** (bits - 1) - 1


def loop_dtype(dtype: str, iterations: int) -> str | None:
    """`dtype` if a loop of that many iterations counts in it, else int64 (int32 would
    wrap past 2**31 - 1: a split padded beyond it, or fused axes whose product is), or
    None if int64 cannot count them either."""
    for candidate in (dtype, "int64"):
        if iterations - 1 <= loop_extent_max(candidate):
            return candidate
    return None


# The call-time checker keeps sizes below 2**31 - 2**20 (runtime.checker.INDEX_LIMIT), so
# a symbolic extent split by up to this much pads to fewer than 2**31 iterations. A split
# is recorded before any target exists, so this cannot come from Target.index_limit, and
# the schedule layer may not import runtime: tests/test_build_target_object.py holds the
# two equal.
_SYMBOLIC_HEADROOM = 2**20


def split_extents(extent: E.Expr, by: int, by_factor: bool, who: str) -> tuple:
    """(outer, inner) extents of a split of a loop of `extent` by factor or nparts `by`.
    A constant extent is split exactly (extent + by - 1 may not fit its dtype), in the
    loop_dtype of the padded iteration count; a symbolic one in int64 if `by` is beyond
    the headroom that its sizes leave below 2**31."""
    if not isinstance(extent, Const):
        wide = dt.bits(extent.dtype) < 64 and by > _SYMBOLIC_HEADROOM
        cval = E.const(by, "int64" if wide else extent.dtype)
        return (_ceil_div(extent, cval), cval) if by_factor else (cval, _ceil_div(extent, cval))
    parts = -(-int(extent.value) // by)
    outer, inner = (parts, by) if by_factor else (by, parts)
    dtype = loop_dtype(extent.dtype, outer * inner)
    if dtype is None:
        raise ScheduleError(f"{who}: {outer} x {inner} iterations (a loop of extent "
                            f"{int(extent.value)} split by {by}) do not fit an int64 loop "
                            f"variable")
    return E.const(outer, dtype), E.const(inner, dtype)


def fused_extent(outer: E.Expr, inner: E.Expr, who: str, reduce: bool = False) -> E.Expr:
    """The extent of two fused loops: for constants the exact product, in its loop_dtype.
    A symbolic product of data-parallel loops stays in their dtype (it is at most the size
    of the stage, which the sizes' limit keeps below 2**31); of reduction loops, int64."""
    if not (isinstance(outer, Const) and isinstance(inner, Const)):
        if reduce and dt.bits(dt.promote(outer.dtype, inner.dtype)) < 64:
            outer = E.cast(outer, "int64")
        return E.binary("mul", outer, inner)
    n = int(outer.value) * int(inner.value)
    dtype = loop_dtype(dt.promote(outer.dtype, inner.dtype), n)
    if dtype is None:
        raise ScheduleError(f"{who}: {int(outer.value)} x {int(inner.value)} iterations do "
                            f"not fit an int64 loop variable")
    return E.const(n, dtype)


class Stage:
    """How one operation is computed: its loops (leaf_iter_vars) and where it is placed."""

    def __init__(self, op: Operation, schedule: "Schedule"):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.attach_type = ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.is_output = False
        self.storage_aligns: list = []  # (root IterVar, factor, offset)
        # set_store_predicate: the thread tags whose index must be 0 where the stage stores
        self.store_predicate: tuple = ()
        self.thread_vars: dict = {}  # Var of a te.thread_axis bound here -> its tag
        self.fused_with: tuple | None = None  # (stage, its leaf IterVar): compute_with
        self.reset_loops()

    def reset_loops(self) -> None:
        roots = list(self.op.axis) + list(self.op.reduce_axis) \
            if isinstance(self.op, ComputeOp) else []
        if isinstance(self.op, ScanOp):
            roots = [self.op.scan_axis]  # its one loop: time
        self.all_iter_vars: list = list(roots)
        self.leaf_iter_vars: list = list(roots)
        self.relations: list = []
        self.iter_attrs: dict = {}

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self):
        return f"stage({self.name}, {self.attach_type})"

    # -- references used by steps -------------------------------------------------------
    def _ref(self) -> S.StageRef:
        return S.StageRef(self.schedule.stages.index(self), self.name)

    def _axis_ref(self, iv: IterVar) -> S.AxisRef:
        return S.AxisRef(self.all_iter_vars.index(iv), iv.var.name)

    def _record(self, step) -> None:
        self.schedule.steps.append(step)

    def _check_leaf(self, iv, who: str, param: str = "axis") -> IterVar:
        if not isinstance(iv, IterVar):
            raise ScheduleError(f"{who} on stage '{self.name}': {param} must be an IterVar of "
                                f"this stage, got {type(iv).__name__}")
        if iv not in self.leaf_iter_vars:
            state = "has already been split or fused" if iv in self.all_iter_vars else \
                "does not belong to this stage"
            if iv.iter_type == REDUCE and iv not in self.all_iter_vars and \
                    isinstance(self.op, ComputeOp) and self.op.reduce_axis:
                state += (" (a reduce axis shared by several computes belongs to the first; "
                          "use s[T].op.reduce_axis for this one)")
            leaves = ", ".join(v.var.name for v in self.leaf_iter_vars)
            raise ScheduleError(f"{who} on stage '{self.name}': {param} '{iv.var.name}' "
                                f"{state}; the current loops are: {leaves}")
        return iv

    def _new_iv(self, name: str, extent: E.Expr, iter_type: str) -> IterVar:
        return IterVar(Range(E.const(0, extent.dtype), extent), Var(name, extent.dtype),
                       iter_type)

    # -- loop transformations ------------------------------------------------------------
    def split(self, parent: IterVar, factor=None, nparts=None) -> tuple:
        """Split `parent` into (outer, inner) with inner extent `factor` (or outer `nparts`)."""
        self._check_leaf(parent, "split", "parent")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split on stage '{self.name}': give exactly one of factor "
                                f"and nparts")
        val = factor if factor is not None else nparts
        pname = "factor" if factor is not None else "nparts"
        if isinstance(val, bool) or not isinstance(val, int):
            if isinstance(val, Const) and E.dt.is_integral(val.dtype):
                val = int(val.value)
            else:
                raise ScheduleError(f"split on stage '{self.name}': {pname} must be a positive "
                                    f"int, got {val!r}")
        if val <= 0:
            raise ScheduleError(f"split on stage '{self.name}': {pname} must be a positive "
                                f"int, got {val}")
        outer_ext, inner_ext = split_extents(parent.dom.extent, val, factor is not None,
                                             f"split on stage '{self.name}'")
        cval = inner_ext if factor is not None else outer_ext
        outer = self._new_iv(parent.var.name + ".outer", outer_ext, parent.iter_type)
        inner = self._new_iv(parent.var.name + ".inner", inner_ext, parent.iter_type)
        self._record(S.Split(self._ref(), self._axis_ref(parent), factor, nparts))
        self.relations.append(SplitRel(parent, outer, inner,
                                       cval if factor is not None else None,
                                       cval if nparts is not None else None))
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        self.all_iter_vars += [outer, inner]
        return outer, inner

    def fuse(self, *args) -> IterVar:
        """Fuse adjacent loops (outermost first) into one."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if len(args) < 1:
            raise ScheduleError(f"fuse on stage '{self.name}': give at least one axis")
        for a in args:
            self._check_leaf(a, "fuse")
        positions = [self.leaf_iter_vars.index(a) for a in args]
        if positions != list(range(positions[0], positions[0] + len(args))):
            names = ", ".join(a.var.name for a in args)
            order = ", ".join(v.var.name for v in self.leaf_iter_vars)
            raise ScheduleError(f"fuse on stage '{self.name}': axes {names} must be adjacent "
                                f"and in loop order (outermost first); the loop order is "
                                f"{order}")
        kinds = {a.iter_type for a in args}
        if len(kinds) > 1:
            raise ScheduleError(f"fuse on stage '{self.name}': cannot fuse a reduction axis "
                                f"with a data-parallel axis")
        if len(args) == 1:
            return args[0]
        self._record(S.Fuse(self._ref(), tuple(self._axis_ref(a) for a in args)))
        fused = args[0]
        for nxt in args[1:]:
            fused = self._fuse2(fused, nxt)
        return fused

    def _fuse2(self, outer: IterVar, inner: IterVar) -> IterVar:
        ext = fused_extent(outer.dom.extent, inner.dom.extent, f"fuse on stage '{self.name}'",
                           outer.iter_type == REDUCE)
        fused = self._new_iv(f"{outer.var.name}.{inner.var.name}.fused", ext, outer.iter_type)
        self.relations.append(FuseRel(outer, inner, fused))
        pos = self.leaf_iter_vars.index(outer)
        self.leaf_iter_vars[pos:pos + 2] = [fused]
        self.all_iter_vars.append(fused)
        return fused

    def reorder(self, *args) -> None:
        """Put the given loops in this order, in the positions they occupy together."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        for a in args:
            self._check_leaf(a, "reorder")
        if len(set(args)) != len(args):
            raise ScheduleError(f"reorder on stage '{self.name}': an axis appears twice")
        self._record(S.Reorder(self._ref(), tuple(self._axis_ref(a) for a in args)))
        positions = sorted(self.leaf_iter_vars.index(a) for a in args)
        for pos, a in zip(positions, args):
            self.leaf_iter_vars[pos] = a

    def tile(self, x_parent, y_parent, x_factor, y_factor) -> tuple:
        """Split two axes and order them (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    # -- annotations ---------------------------------------------------------------------
    def _annotate(self, iv: IterVar, kind: str) -> None:
        who = {"vectorized": "vectorize", "unrolled": "unroll", "parallel": "parallel"}[kind]
        self._check_leaf(iv, who)
        if kind in ("vectorized", "parallel") and iv.iter_type == REDUCE:
            verb = "parallelize" if who == "parallel" else who
            raise ScheduleError(f"{who} on stage '{self.name}': cannot {verb} reduction axis "
                                f"'{iv.var.name}' (its iterations update the same element); "
                                f"use rfactor first")
        if kind in ("vectorized", "unrolled") and not isinstance(iv.dom.extent, Const):
            raise ScheduleError(f"{who} on stage '{self.name}': axis '{iv.var.name}' must have "
                                f"a constant extent, but its extent is symbolic; split it "
                                f"by a constant factor first")
        self._record(S.Annotate(self._ref(), self._axis_ref(iv), kind))
        self.iter_attrs.setdefault(iv, IterAttr()).kind = kind

    def vectorize(self, iv: IterVar) -> None:
        self._annotate(iv, "vectorized")

    def unroll(self, iv: IterVar) -> None:
        self._annotate(iv, "unrolled")

    def parallel(self, iv: IterVar) -> None:
        self._annotate(iv, "parallel")

    def bind(self, iv: IterVar, thread_ivar: IterVar) -> None:
        self._check_leaf(iv, "bind")
        if not isinstance(thread_ivar, IterVar) or thread_ivar.iter_type != THREAD:
            raise ScheduleError(f"bind on stage '{self.name}': thread_ivar must come from "
                                f"te.thread_axis, got {thread_ivar!r}")
        if iv.iter_type == REDUCE and not thread_ivar.thread_tag.startswith("threadIdx."):
            # the threads of one block combine their partial results (cross-thread
            # allreduce, te/lower/cross_thread.py); blocks and virtual threads cannot
            raise ScheduleError(f"bind on stage '{self.name}': reduction axis "
                                f"'{iv.var.name}' can be bound to threadIdx.x, .y or .z only "
                                f"(the threads of one block combine their partial results), "
                                f"got '{thread_ivar.thread_tag}'; rfactor it and bind the "
                                f"rfactor stage's spatial axes to blocks instead")
        _check_thread_extent(self.name, iv, thread_ivar)
        self._record(S.Bind(self._ref(), self._axis_ref(iv), thread_ivar.thread_tag))
        attr = self.iter_attrs.setdefault(iv, IterAttr())
        attr.kind, attr.thread_tag = "thread_binding", thread_ivar.thread_tag
        self.thread_vars[thread_ivar.var] = thread_ivar.thread_tag

    def set_store_predicate(self, predicate) -> None:
        """Store only where `predicate` holds. Supported: TVM's reduction tutorial's
        `tx.var.equal(0)` (conjunctions of them), for thread axes tx that a reduction axis
        of this stage is bound to: the combined result is stored by the first thread of
        each group already (te/lower/cross_thread.py), so the predicate holds there."""
        tags = []
        for term in _conjuncts(predicate):
            tag = self.thread_vars.get(term.a) if isinstance(term, E.Binary) and \
                term.op == "eq" and isinstance(term.b, Const) and term.b.value == 0 else None
            if tag is None:
                raise ScheduleError(f"set_store_predicate on stage '{self.name}': predicate "
                                    f"must be tx.var.equal(0) for a thread axis tx bound to "
                                    f"a loop of this stage (or several joined with &), got "
                                    f"{predicate!r}")
            tags.append(tag)
        self._record(S.StorePredicate(self._ref(), ",".join(tags)))
        self.store_predicate = tuple(dict.fromkeys(self.store_predicate + tuple(tags)))

    def pragma(self, iv: IterVar, key: str, value=None) -> None:
        """Annotate loop `iv` with `key` (and an optional value); the lowered loop carries
        it and te.lower's text shows it. The LLVM CPU backend acts on one key:
        "nontemporal_store": inside the loop, dense vector stores to the kernel's argument
        buffers bypass the caches (x86 `vmovntps` where the address is aligned), for a
        large output written once and not read back soon (one the loop also reads, such
        as an accumulator, is correct but slow: every store evicts its line); stores to
        local buffers are unchanged. Other keys are hints that only the loop IR records."""
        self._check_leaf(iv, "pragma")
        if not isinstance(key, str) or not key:
            raise ScheduleError(f"pragma on stage '{self.name}': key must be a non-empty "
                                f"string, got {key!r}")
        self._record(S.Pragma(self._ref(), self._axis_ref(iv), key, value))
        self.iter_attrs.setdefault(iv, IterAttr()).pragmas.append((key, value))

    def tensorize(self, var: IterVar, tensor_intrin) -> None:
        """Replace loop `var` and every loop inside it by `tensor_intrin`
        (te.decl_tensor_intrin), whose compute must match what those loops compute;
        lowering checks the match and names the first difference."""
        self._check_leaf(var, "tensorize")
        if not isinstance(tensor_intrin, TensorIntrin):
            raise ScheduleError(f"tensorize on stage '{self.name}': tensor_intrin must be a "
                                f"te.decl_tensor_intrin(...) result, got "
                                f"{type(tensor_intrin).__name__}")
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"tensorize on stage '{self.name}': only a te.compute stage "
                                f"can be tensorized")
        self._record(S.Tensorize(self._ref(), self._axis_ref(var), tensor_intrin.name))
        self.iter_attrs.setdefault(var, IterAttr()).tensorize = tensor_intrin

    def prefetch(self, tensor: Tensor, var: IterVar, offset: int, locality: int = 3) -> None:
        """At the start of each iteration of loop `var`, prefetch the part of `tensor` that
        iteration var + offset will read (one prefetch per cache line), or write if `tensor`
        is this stage's own output. An index that runs past the end of a dimension
        continues into the next row of the row-major tensor, so an inner loop can prefetch
        the next row; nothing past the tensor is touched.

        `locality` is LLVM's (and `__builtin_prefetch`'s) temporal-locality hint, 0 to 3:
        3 keeps the line in every cache level (x86 `prefetcht0`), 2 and 1 in the outer
        levels (`prefetcht1`, `prefetcht2`: on AMD Zen into L2, not L1), 0 marks it
        non-temporal (`prefetchnta`); a write prefetch is x86 `prefetchw` whatever the
        hint. Fetching the next row into L2 (locality 2) leaves L1 to the row being worked
        on, which made softmax and layernorm faster on Zen 4 (benchmarks/ANALYSIS.md)."""
        who = f"prefetch on stage '{self.name}'"
        if not isinstance(tensor, Tensor):
            raise ScheduleError(f"{who}: tensor must be a tensor that the stage reads or "
                                f"writes, got {type(tensor).__name__}")
        producer = self.schedule.stage_map.get(tensor.op)
        if producer is None or (producer is not self
                                and not self.schedule.consumes(self, producer)):
            raise ScheduleError(f"{who}: tensor '{tensor.name}' is neither read nor written "
                                f"by this stage")
        self._check_leaf(var, "prefetch", "var")
        if self.iter_attrs.get(var, IterAttr()).kind == "vectorized":
            raise ScheduleError(f"{who}: var '{var.var.name}' is vectorized; prefetch at an "
                                f"enclosing loop")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 1:
            raise ScheduleError(f"{who}: offset must be a positive int (iterations ahead), "
                                f"got {offset!r}")
        if isinstance(locality, bool) or not isinstance(locality, int) \
                or not 0 <= locality <= 3:
            raise ScheduleError(f"{who}: locality must be an int from 0 (non-temporal) to 3 "
                                f"(keep in all cache levels), got {locality!r}")
        self._record(S.Prefetch(self._ref(), producer._ref(), tensor.value_index,
                                self._axis_ref(var), offset, locality))
        self.iter_attrs.setdefault(var, IterAttr()).prefetch.append((tensor, offset, locality))

    def pipeline(self, var: IterVar, interleave=None) -> None:
        """Software-pipeline loop `var`: the stages computed at `var` (compute_at, with what
        is computed inside them) run one iteration ahead of this stage's own loops below
        `var`, which work on the previous iteration's results. Buffers that carry results
        from the one part to the other get two copies, used in alternate iterations; the
        first iteration runs only the stages computed at `var`, the last only this stage.

        interleave=(stage, loop): in every iteration after the first, this stage's outermost
        loop below `var` runs inside `loop` of `stage`, one of the stages computed at `var`
        (or fused into one with compute_with), with the same extent: each iteration does
        that stage's part, then this stage's part for the previous iteration of `var`. A
        row kernel whose last pass writes memory (softmax's scaling, with non-temporal
        stores) then writes row i - 1 while it computes row i, instead of writing in a
        burst that nothing overlaps. Lowering checks that the two parts touch no common
        buffer except the double-buffered ones, and that `var` is a serial loop."""
        who = f"pipeline on stage '{self.name}'"
        self._check_leaf(var, "pipeline", "var")
        if self.attach_type == INLINE:
            raise ScheduleError(f"{who}: the stage is inlined and has no loops")
        with_ref = None
        if interleave is not None:
            if not (isinstance(interleave, tuple) and len(interleave) == 2
                    and isinstance(interleave[0], Stage) and isinstance(interleave[1], IterVar)):
                raise ScheduleError(f"{who}: interleave must be a (stage, loop) pair such as "
                                    f"(s[T], s[T].op.reduce_axis[0]), got {interleave!r}")
            stage, loop = interleave
            if stage.schedule is not self.schedule or stage is self:
                raise ScheduleError(f"{who}: interleave stage must be another stage of the "
                                    f"same schedule, got {stage!r}")
            stage._check_leaf(loop, "pipeline interleave", "loop")
            with_ref = (stage._ref(), stage._axis_ref(loop))
        self._record(S.Pipeline(self._ref(), self._axis_ref(var),
                                *(with_ref if with_ref else (None, None))))
        self.iter_attrs.setdefault(var, IterAttr()).pipeline = \
            tuple(interleave) if interleave is not None else ()

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the stride of dimension `axis` so that stride % factor == offset."""
        roots = list(self.op.axis) if isinstance(self.op, ComputeOp) else []
        if axis not in roots:
            raise ScheduleError(f"storage_align on stage '{self.name}': axis must be one of "
                                f"the stage's original data axes")
        if roots.index(axis) == len(roots) - 1:
            raise ScheduleError(f"storage_align on stage '{self.name}': the innermost axis "
                                f"'{axis.var.name}' has stride 1 and cannot be aligned; "
                                f"align an outer axis")
        if not isinstance(factor, int) or factor <= 0 or not isinstance(offset, int) \
                or not 0 <= offset < factor:
            raise ScheduleError(f"storage_align on stage '{self.name}': need factor > 0 and "
                                f"0 <= offset < factor, got factor={factor!r}, "
                                f"offset={offset!r}")
        self._record(S.StorageAlign(self._ref(), self._axis_ref(axis), factor, offset))
        self.storage_aligns.append((axis, factor, offset))

    def set_scope(self, scope: str) -> None:
        """Keep this stage's buffer in storage `scope` (TVM's Stage.set_scope): "global",
        "shared" (one per CUDA thread block: bound inference makes it cover what all the
        block's threads read, and barriers surround its fill), "local" (per thread) or
        "warp". On target 'llvm' every scope is an ordinary buffer of the function, as in
        TVM; target 'cuda' declares "shared" `__shared__` and refuses "warp".

        Inputs and outputs are buffers the caller passes, in global memory: for them only
        "global" is accepted (TVM ignores any other scope there; we say so instead)."""
        who = f"set_scope on stage '{self.name}'"
        if not isinstance(scope, str) or scope not in S.SCOPES:
            raise ScheduleError(f"{who}: scope must be one of "
                                f"{', '.join(repr(s) for s in S.SCOPES)}, got {scope!r}")
        if isinstance(self.op, (ScanOp, ExternOp)):
            kind = "te.scan" if isinstance(self.op, ScanOp) else "te.extern"
            raise ScheduleError(f"{who}: '{self.name}' is a {kind} result; only a te.compute "
                                f"stage's scope can be set")
        if scope != "global" and (isinstance(self.op, PlaceholderOp) or self.is_output):
            if isinstance(self.op, PlaceholderOp):
                role, copy = "a placeholder (an input)", \
                    f"s.cache_read({self.name}, {scope!r}, readers) reads it into a copy there"
            else:
                role, copy = "an output of the schedule", \
                    f"s.cache_write({self.name}, {scope!r}) computes it there and copies it out"
            raise ScheduleError(f"{who}: '{self.name}' is {role}, a buffer the caller passes "
                                f"in global memory, so its scope can only be 'global', got "
                                f"{scope!r}; {copy}")
        self._record(S.SetScope(self._ref(), scope))
        self.scope = scope

    # -- placement -------------------------------------------------------------------------
    def compute_at(self, parent: "Stage", scope: IterVar) -> None:
        """Compute this stage inside loop `scope` of stage `parent`, as much as it needs."""
        if not isinstance(parent, Stage) or parent.schedule is not self.schedule:
            raise ScheduleError(f"compute_at on stage '{self.name}': parent must be a stage "
                                f"of the same schedule (s[tensor]), got {parent!r}")
        self._check_placeable("compute_at")
        if parent is self:
            raise ScheduleError(f"compute_at on stage '{self.name}': cannot attach a stage "
                                f"to itself")
        if self.is_output:
            raise ScheduleError(f"compute_at on stage '{self.name}': it is an output of the "
                                f"schedule and must be computed whole; only intermediate "
                                f"stages can be computed inside another stage's loops")
        parent._check_leaf(scope, "compute_at", "scope")
        if not self.schedule.depends_on(parent, self):
            raise ScheduleError(f"compute_at on stage '{self.name}': stage '{parent.name}' "
                                f"does not read '{self.name}', so '{self.name}' cannot be "
                                f"computed inside its loops")
        self._record(S.ComputeAt(self._ref(), parent._ref(), parent._axis_ref(scope)))
        self.attach_type, self.attach_stage, self.attach_ivar = SCOPE, parent, scope

    def compute_with(self, parent: "Stage", scope: IterVar) -> None:
        """Run this stage's loops fused with `parent`'s, from the outermost loop down to
        loop `scope` of `parent` (Halide's compute_with): each iteration of the shared
        loops first does this stage's part, then `parent`'s, so a value this stage
        computes is consumed while it is still in registers or L1 instead of in a second
        pass over a buffer. The two stages must be computed at the same place (both at
        root, or at the same loop), and this stage must come first in the schedule.

        Lowering checks the rest: the shared loops have equal extents; this stage's shared
        loops carry no annotation, prefetch (above the innermost shared loop) or attached
        stage (above it), and no reduction axis; and each iteration of `parent` reads
        only what the same iteration of this stage has computed: the same elements at the
        same inner step (both stages with alike inner loops), or elements inside the
        range this iteration writes without gaps. A fusion that cannot be shown legal is
        refused, not run. Make cache_write and rfactor of `parent` before compute_with."""
        who = f"compute_with on stage '{self.name}'"
        if not isinstance(parent, Stage) or parent.schedule is not self.schedule:
            raise ScheduleError(f"{who}: parent must be a stage of the same schedule "
                                f"(s[tensor]), got {parent!r}")
        self._check_placeable("compute_with")
        if parent is self:
            raise ScheduleError(f"{who}: cannot fuse a stage with itself")
        if isinstance(parent.op, PlaceholderOp):
            raise ScheduleError(f"{who}: parent '{parent.name}' is a placeholder (an input) "
                                f"and has no loops")
        for st, role in ((self, "the stage"), (parent, f"parent '{parent.name}'")):
            if st.attach_type == INLINE:
                raise ScheduleError(f"{who}: {role} is inlined and has no loops")
        if not isinstance(scope, IterVar) or scope not in parent.leaf_iter_vars:
            leaves = ", ".join(v.var.name for v in parent.leaf_iter_vars)
            got = type(scope).__name__ if not isinstance(scope, IterVar) else \
                f"'{scope.var.name}'" + ("" if scope in parent.all_iter_vars else
                                         " of another stage")
            raise ScheduleError(f"{who}: scope must be a current loop of '{parent.name}' "
                                f"({leaves}), got {got}")
        stages = self.schedule.stages
        if stages.index(self) > stages.index(parent):
            raise ScheduleError(f"{who}: it must come before '{parent.name}' in the "
                                f"schedule's stage order (producers first), since its part "
                                f"of each shared iteration runs first")
        self._record(S.ComputeWith(self._ref(), parent._ref(), parent._axis_ref(scope)))
        self.fused_with = (parent, scope)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into every reader; it gets no loops."""
        self._check_placeable("compute_inline")
        if isinstance(self.op, ComputeOp) and self.op.is_reduction:
            raise ScheduleError(f"compute_inline on stage '{self.name}': cannot inline a "
                                f"reduction; use compute_at to place it instead")
        if self.is_output:
            raise ScheduleError(f"compute_inline on stage '{self.name}': cannot inline an "
                                f"output of the schedule")
        if self.relations or self.iter_attrs:
            raise ScheduleError(f"compute_inline on stage '{self.name}': the stage has loop "
                                f"transformations that inlining would discard")
        self._record(S.ComputeInline(self._ref()))
        self.attach_type, self.attach_stage, self.attach_ivar = INLINE, None, None

    def compute_root(self) -> None:
        """Compute this stage in its own loop nest at the top of the function."""
        self._check_placeable("compute_root")
        self._record(S.ComputeRoot(self._ref()))
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None

    def _check_placeable(self, who: str) -> None:
        if isinstance(self.op, PlaceholderOp):
            raise ScheduleError(f"{who}: '{self.name}' is a placeholder (an input); it has "
                                f"no computation to place")
        if isinstance(self.op, (ScanOp, ExternOp)):
            kind = "te.scan" if isinstance(self.op, ScanOp) else "te.extern"
            raise ScheduleError(f"{who}: '{self.name}' is a {kind} result, computed whole "
                                f"at the top of the function; it cannot be placed elsewhere")




def _check_thread_extent(stage: str, iv: IterVar, thread_ivar: IterVar) -> None:
    """A thread axis declared with an extent (te.thread_axis((0, n), tag)) binds only a loop
    of that extent, where both are known constants."""
    if thread_ivar.dom is None or iv.dom is None:
        return
    want, have = thread_ivar.dom.extent, iv.dom.extent
    if isinstance(want, Const) and isinstance(have, Const) and want.value != have.value:
        raise ScheduleError(f"bind on stage '{stage}': loop '{iv.var.name}' has extent "
                            f"{have.value} but thread axis '{thread_ivar.thread_tag}' was "
                            f"declared with extent {want.value}")


def _conjuncts(predicate) -> list:
    """[a, b] for a & b; the terms of a predicate."""
    if isinstance(predicate, E.Binary) and predicate.op == "and":
        return _conjuncts(predicate.a) + _conjuncts(predicate.b)
    return [predicate]
