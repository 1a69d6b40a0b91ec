"""lower(): schedule -> loop IR, through one ordered, named list of passes.

Takes a Schedule, the argument list and a target parsed once above this layer (a
te.target.Target: its kind picks the passes, its index_limit bounds sizes and dimensions);
gives a PrimFunc whose str() is the readable loop IR (te.lower, in te/build.py, parses
the target and calls lower()). Set dump_after to a pass name (or "all") to print the IR
after it; the TE_DUMP_IR environment variable does the same for debugging. A verifier runs
after every pass on the flattened IR. Imports te.compute, te.schedule, ir, build_loops,
passes, verify.
"""
from __future__ import annotations

import os

from ..compute import expr as E
from ..compute.expr import Var
from ..compute.tensor import Tensor
from ..errors import TOO_DEEP, LoweringError
from ..schedule.schedule import Schedule
from ..schedule.stage import INLINE, SCOPE
from . import ir
from .func import PrimFunc
from .bound import enclosing_loops
from .build_loops import schedule_to_stmt
from .scan_extern import check_scans
from .passes.bound_checkers import instrument_bound_checkers
from .passes.device_split import split_host_device
from .passes.loop_partition import partition_loops
from .passes.lower_intrinsics import lower_intrinsics
from .passes.parallel_outline import outline_parallel
from .passes.simplify import simplify_stmt
from .passes.software_pipeline import software_pipeline
from .passes.storage_flatten import storage_flatten
from .passes.unroll import unroll_loops
from .passes.vectorize import vectorize_loops
from .passes.virtual_thread import inject_virtual_thread
from .verify import verify_func
from .visitor import stmt_children, walk_stmts


def _sizes(func: PrimFunc) -> dict:
    """Size variables are never negative: tell the simplifier so."""
    return {v: (0, None) for v in func.scalar_params}


# The road from a schedule to the finished loop IR starts with two passes that build the
# function: the schedule's loop nests over tensors (build_loops.schedule_to_stmt; with
# stop_after it gives a function with no buffers yet), then flat buffers and the function's
# parameters (passes/storage_flatten).
FRONT = ("schedule_to_stmt", "storage_flatten")

# The passes that run on the flattened IR, in order; each takes and gives a PrimFunc body.
PASSES = (
    # loops bound to "vthread" / "cthread" -> serial loops (each thread runs them all)
    ("inject_virtual_thread", lambda f: inject_virtual_thread(f.body)),
    # intrinsic calls with a rule registered for the target (TVM's register_intrin_lowering)
    ("lower_intrinsics", lower_intrinsics),
    # Stage.pipeline: the marked loops as prologue, steady state and epilogue
    ("software_pipeline", lambda f: software_pipeline(f.body)),
    # fold constants, drop guards that the loop ranges prove
    ("simplify", lambda f: simplify_stmt(f.body, _sizes(f))),
    # split loops so the main part of a non-dividing split has no tail guard
    # (for 'cuda' only loops that hold no barrier: the split point may depend on threadIdx)
    ("loop_partition", lambda f, target: partition_loops(
        f.body, barrier_free_only=target.kind == "cuda")),
    ("simplify_partitioned", lambda f: simplify_stmt(f.body, _sizes(f))),
    # vectorized loops -> Ramp/Broadcast vector code (unvectorizable bodies stay serial)
    ("vectorize", lambda f: vectorize_loops(f.body)),
    # small unrolled loops -> straight-line copies
    ("unroll", lambda f: unroll_loops(f.body)),
    # fold what vectorize and unroll exposed
    ("simplify_final", lambda f: simplify_stmt(f.body, _sizes(f))),
    # on request only (OPT_IN): a run-time check on each Load and Store index that the loop
    # ranges do not prove inside its buffer
    ("instrument_bound_checkers", instrument_bound_checkers),
    # each outermost parallel loop -> a ParallelTask: a task function of its own and the
    # values it captures, which te/codegen/llvm emits as a function and a thread-pool call
    ("parallel_outline", lambda f: outline_parallel(f.body, f.name)),
)

# Passes that take the target as well as the function.
TAKE_TARGET = ("lower_intrinsics", "loop_partition")

# Passes that run only when lower() is asked for them, by the keyword of the same name.
OPT_IN = ("instrument_bound_checkers",)

# The last pass, for target 'cuda' (passes/device_split.py): which nests become kernels,
# their launches, how each cross-thread reduction runs in its kernel (TVM's
# lower_thread_allreduce: passes/thread_allreduce.py), and refusals where CUDA code could
# not agree with the IR. It changes no statement; it gives the plan te/codegen/cuda reads,
# kept on the function (device_plan).
# te.build asks for it (lower(..., split_host_device=True), or split_for_device() for a
# function lowered before); te.lower alone does not, so any function lowered for 'cuda'
# can still be printed.
DEVICE_SPLIT = "split_host_device"


# Target 'cuda' keeps vectorized loops as loops (each GPU thread runs them unrolled), and
# partitions only loops with no shared fill inside: a split point that depends on threadIdx
# makes a loop's trip count differ between threads (no barrier may sit inside it), and the
# copies it would make of shared buffers' allocations would each take shared memory. Its
# parallelism is the thread-bound loops; a CPU parallel loop is no task there.
SKIPPED_FOR = {"llvm": (), "cuda": ("vectorize", "parallel_outline")}


def lower(sch: Schedule, args: list, target, name: str = "main",
          dump_after: str | None = None, simple_mode: bool = False,
          instrument_bound_checkers: bool = False, stop_after: str | None = None,
          split_host_device: bool = False) -> PrimFunc:
    """The lowered function of schedule `sch` taking `args` (tensors) in order, for `target`
    (a te.target.Target; kind 'cuda' lowers for the GPU code generator, see SKIPPED_FOR).
    instrument_bound_checkers: check at run time every access not proven in bounds.
    stop_after: a pass name (PASS_NAMES); the function as that pass leaves it (a pass the
    target skips or nobody asked for leaves it as the passes before it did).
    split_host_device: run DEVICE_SPLIT (target 'cuda')."""
    try:
        func = _lower(sch, args, name, dump_after, target, instrument_bound_checkers,
                      stop_after)
        if split_host_device and stop_after in (None, DEVICE_SPLIT):
            func = split_for_device(func, target, dump_after)
        return func
    except RecursionError:
        # the passes walk expressions and nested statements with their own stacks; what
        # still recurses (an analysis of one deep index) ends here, not in a bare error
        raise LoweringError(TOO_DEEP.format(who="te.lower", what="lower")) from None


def _lower(sch: Schedule, args: list, name: str, dump_after: str | None, target,
           instrument_bound_checkers: bool, stop_after: str | None) -> PrimFunc:
    target_kind = target.kind
    skipped = set(SKIPPED_FOR[target_kind]) | _unrequested(
        instrument_bound_checkers=instrument_bound_checkers)
    if "instrument_bound_checkers" not in skipped and target_kind != "llvm":
        raise LoweringError(f"te.lower: instrument_bound_checkers is supported for "
                            f"target_kind 'llvm' only, got {target_kind!r}")
    if not isinstance(sch, Schedule):
        raise LoweringError(f"te.lower: sch must be a te.create_schedule(...) result, got "
                            f"{type(sch).__name__}")
    if not isinstance(name, str) or not name.isidentifier():
        raise LoweringError(f"te.lower: name must be an identifier, got {name!r}")
    if stop_after is not None and stop_after not in PASS_NAMES:
        raise LoweringError(f"te.lower: stop_after must be one of {', '.join(PASS_NAMES)}, "
                            f"got {stop_after!r}")
    dump_after = dump_after or os.environ.get("TE_DUMP_IR")
    tensors = _check_args(sch, args)
    passed = _passed_scalars(args, tensors)
    check_scans(sch, enclosing_loops)  # first: a split time loop would fail the next one
    _check_attachments(sch, tensors)
    func = _front(sch, tensors, passed, name, target, dump_after, stop_after)
    if stop_after in FRONT:
        return func
    for pass_name, fn in PASSES:
        if pass_name not in skipped:
            body = fn(func, target) if pass_name in TAKE_TARGET else fn(func)
            func = PrimFunc(func.name, func.params, func.scalar_params, body, func.attrs)
            verify_func(func, pass_name)
            _dump(func, pass_name, dump_after)
        if pass_name == stop_after:
            break
    return func


PASS_NAMES = FRONT + tuple(name for name, _ in PASSES) + (DEVICE_SPLIT,)


def outline_for_cpu(func: PrimFunc) -> PrimFunc:
    """The parallel_outline pass on a function lowered for 'llvm' before (with stop_after,
    or made by hand): te.build's CPU code generator runs parallel loops only as tasks. A
    function already outlined comes back as it is."""
    body = outline_parallel(func.body, func.name)
    if body is func.body:
        return func
    return PrimFunc(func.name, func.params, func.scalar_params, body, func.attrs,
                    func.device_plan)


def split_for_device(func: PrimFunc, target, dump_after: str | None = None) -> PrimFunc:
    """DEVICE_SPLIT on a function lowered for 'cuda': the same function with its
    device_plan."""
    if target.kind != "cuda":
        raise LoweringError(f"te.lower: {DEVICE_SPLIT} is for target_kind 'cuda' only, got "
                            f"{target.kind!r}")
    plan = split_host_device(func, target)
    func = PrimFunc(func.name, func.params, func.scalar_params, func.body, func.attrs,
                       plan)
    _dump(func, DEVICE_SPLIT, dump_after or os.environ.get("TE_DUMP_IR"))
    return func


def _front(sch: Schedule, tensors: list, passed: tuple, name: str, target,
           dump_after: str | None, stop_after: str | None) -> PrimFunc:
    """The FRONT passes: the function of the schedule's loop nests, flattened unless
    stop_after is 'schedule_to_stmt' (then its body reads and writes tensors, and it has
    no buffer parameters yet). dump_after='all' starts at storage_flatten, as it did."""
    body = schedule_to_stmt(sch, tensors, target.index_limit)
    scalars = _scalar_params(tensors) + tuple(v for v, _ in passed)
    attrs = {PASSED_SCALARS: passed} if passed else {}
    if stop_after == "schedule_to_stmt" or dump_after == "schedule_to_stmt":
        nests = PrimFunc(name, (), scalars, body, attrs)
        _dump(nests, "schedule_to_stmt", dump_after)
        if stop_after == "schedule_to_stmt":
            return nests
    params, body = storage_flatten(body, tensors)
    func = PrimFunc(name, params, scalars, body, attrs)
    _check_free_vars(func)
    verify_func(func, "storage_flatten")
    _dump(func, "storage_flatten", dump_after)
    return func


def _unrequested(**requested) -> set:
    """The OPT_IN passes not asked for; each keyword must be a bool."""
    for option, value in requested.items():
        if not isinstance(value, bool):
            raise LoweringError(f"te.lower: {option} must be True or False, got {value!r}")
    return {p for p in OPT_IN if not requested[p]}


def _dump(func: PrimFunc, pass_name: str, dump_after: str | None) -> None:
    if dump_after in (pass_name, "all"):
        print(f"// IR after {pass_name}\n{func}")


def _check_args(sch: Schedule, args) -> list:
    if not isinstance(args, (list, tuple)):
        raise LoweringError(f"te.lower: args must be a list of tensors, got "
                            f"{type(args).__name__}")
    tensors = []
    for k, a in enumerate(args):
        if isinstance(a, Var):  # a scalar the caller passes (_passed_scalars)
            continue
        if not isinstance(a, Tensor):
            raise LoweringError(f"te.lower: args[{k}] must be a tensor or a te.var, got "
                                f"{type(a).__name__}")
        st = sch.stage_map.get(a.op)
        if st is None:
            raise LoweringError(f"te.lower: args[{k}] '{a.name}' is not part of this "
                                f"schedule's compute graph (was it declared for another "
                                f"schedule?)")
        t = st.op.output(a.value_index)
        if t in tensors:
            raise LoweringError(f"te.lower: args[{k}] '{a.name}' appears twice in args")
        tensors.append(t)
    for op in sch.outputs:
        st = sch[op]
        for k in range(st.op.num_outputs):
            if st.op.output(k) not in tensors:
                raise LoweringError(f"te.lower: output '{st.op.output(k).name}' must be in "
                                    f"args, or its result would be lost")
    return tensors


# PrimFunc.attrs key: ((Var, its index in the argument list), ...) for the scalars that the
# caller passes (te.build(s, [A, B, bias]) with bias a te.var), after the size variables.
PASSED_SCALARS = "passed_scalars"


def _passed_scalars(args, tensors: list) -> tuple:
    sizes = set(_scalar_params(tensors))
    out = []
    for k, a in enumerate(args):
        if not isinstance(a, Var):
            continue
        if a in sizes:
            raise LoweringError(f"te.lower: args[{k}] '{a.name}' is a dimension of an argument "
                                f"tensor, so its value comes from that tensor's shape; leave "
                                f"it out of args")
        if a.dtype == "handle" or "x" in a.dtype or a.dtype == "bool":
            raise LoweringError(f"te.lower: args[{k}] '{a.name}' must be a number variable, "
                                f"got dtype {a.dtype}")
        if any(v is a for v, _ in out):
            raise LoweringError(f"te.lower: args[{k}] '{a.name}' appears twice in args")
        out.append((a, k))
    return tuple(out)


def _check_attachments(sch: Schedule, tensors: list) -> None:
    for st in sch.stages:
        if st.attach_type != SCOPE:
            continue
        parent = st.attach_stage
        if parent.attach_type == INLINE:
            raise LoweringError(f"stage '{st.name}' is computed at '{parent.name}', which is "
                                f"inlined and has no loops")
        if st.attach_ivar not in parent.leaf_iter_vars:
            raise LoweringError(f"stage '{st.name}' is computed at loop "
                                f"'{st.attach_ivar.var.name}' of '{parent.name}', which was "
                                f"split or fused afterwards; attach to a current loop")
        if not sch.depends_on(parent, st):
            raise LoweringError(f"stage '{st.name}' is computed at '{parent.name}', which "
                                f"does not read it")


def _scalar_params(tensors: list) -> tuple:
    seen: dict = {}
    for t in tensors:
        for dim in t.shape:
            for v in E.free_vars(dim):
                seen.setdefault(v, None)
    return tuple(seen)


def _check_free_vars(func: PrimFunc) -> None:
    bound = set(func.scalar_params)
    missing: dict = {}

    def visit_expr(e):
        if isinstance(e, Var) and e not in bound and e.dtype != "handle":
            missing.setdefault(e.name, None)

    for s in walk_stmts(func.body):
        if isinstance(s, (ir.For, ir.LetStmt)):
            v = s.loop_var if isinstance(s, ir.For) else s.var
            bound.add(v)
        elif isinstance(s, ir.ThreadAllreduce):
            bound.update(s.results)
        for x in stmt_children(s)[0]:
            E.pre_order(x, visit_expr)
    if missing:
        names = ", ".join(missing)
        raise LoweringError(f"te.lower: size variable(s) {names} are used but are not a "
                            f"dimension of any argument, so they cannot be bound at call "
                            f"time")
