"""te.build() and te.lower(): the target parsed once, then the one road down: lower a
schedule, generate LLVM IR and compile it into a runtime Module.

Takes a Schedule and its argument tensors (or an already lowered PrimFunc) and a target
(a string: "llvm", "llvm -mcpu=NAME -mattr=+f1,-f2", "cuda", "cuda -arch=sm_80", or a
te.target.Target); gives a runtime.Module that checks its arguments before any native code
runs (target 'cuda' is handed to build_cuda.py). Imports te.target, te.lower, te.codegen
and runtime.
"""
from __future__ import annotations

import runtime
# The same headroom as the runtime's call-time check (loops split past the end).
from runtime.checker import INDEX_LIMIT

from .codegen.llvm.codegen import ModuleGen, refuse_thread_binding
from .codegen.llvm.link import imported_llvm, link_imports
from .compute.expr import Binary, Const, Var
from .errors import TOO_DEEP, BuildError
from .lower import pipeline
from .lower.func import PrimFunc
from .lower.buffers import stored_buffers
from .schedule.schedule import Schedule
from .target import Target, parse_target

_LIBM_BASES = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "floor", "ceil",
    "trunc", "round", "roundeven", "rint", "nearbyint", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "pow",
    "fabs", "fmin", "fmax", "fmod", "fma", "hypot", "ldexp", "frexp", "modf", "copysign",
    "sincos", "exp10",
)
# Symbols generated code calls (libc, libgomp, libm in every precision): a kernel of the same
# name would be called in their place.
RUNTIME_SYMBOLS = frozenset(
    ["free", "malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memset",
     "memcpy", "memmove", "abort", "GOMP_parallel", "omp_get_thread_num",
     "omp_get_num_threads", "omp_get_max_threads", "omp_set_num_threads"]
    + [name + suffix for name in _LIBM_BASES for suffix in ("", "f", "l")]
)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        raise BuildError(f"te.build: name must be an ASCII identifier, got {name!r}")
    if name in RUNTIME_SYMBOLS or name.startswith("__te_"):
        raise BuildError(f"te.build: name {name!r} clashes with a runtime function; "
                         f"choose another")


def signature_of(func: PrimFunc, heap_buffers: tuple = (),
                 checked_buffers: tuple = ()) -> runtime.KernelSignature:
    """The runtime description of a lowered function's arguments.

    An argument the body stores to is an output (computed tensors; for a hand-made PrimFunc,
    also those named in func.attrs['output_params']).
    """
    scalar_names = {}
    for v in func.scalar_params:
        if v.name in scalar_names and scalar_names[v.name] is not v:
            raise BuildError(f"te.build: two different size variables are both named "
                             f"'{v.name}'; give them distinct names")
        scalar_names[v.name] = v
    written = stored_buffers(func.body) | set(func.attrs.get("output_params", ()))
    args = []
    for buf in func.params:
        shape = []
        for k, dim in enumerate(buf.shape):
            entry = _shape_entry(dim)
            if entry is None:
                raise BuildError(f"te.build: argument '{buf.name}' shape[{k}] is {dim}; "
                                 f"argument dimensions must be ints, te.var sizes, or +, -, *, "
                                 f"//, %, min, max of them")
            shape.append(entry)
        _check_index_range(buf.name, shape)
        output = buf.data in written or buf.name in written
        args.append(runtime.ArgSpec(buf.name, buf.dtype, tuple(shape), output))
    positions = {v: k for v, k in func.attrs.get(pipeline.PASSED_SCALARS, ())}
    scalars = tuple(runtime.ScalarSpec(v.name, v.dtype, positions.get(v))
                    for v in func.scalar_params)
    return runtime.KernelSignature(func.name, tuple(args), scalars, tuple(heap_buffers),
                                   tuple(checked_buffers))


def _shape_entry(dim):
    """A dimension as the runtime's ShapeEntry (int, size variable name, or (op, a, b)), or
    None when the runtime cannot evaluate it."""
    if isinstance(dim, Const) and isinstance(dim.value, int):
        return int(dim.value)
    if isinstance(dim, Var):
        return dim.name
    if isinstance(dim, Binary) and dim.op in runtime.signature.SHAPE_OPS:
        a, b = _shape_entry(dim.a), _shape_entry(dim.b)
        if a is not None and b is not None:
            return (dim.op, a, b)
    return None


def _check_index_range(name: str, shape: list) -> None:
    if any(not isinstance(dim, int) for dim in shape):
        return  # checked at call time by the runtime
    count = 1
    for dim in shape:
        count *= dim
    if count >= INDEX_LIMIT:
        raise BuildError(f"te.build: argument '{name}' has {count} elements, beyond the int32 "
                         f"index range; int64 indexing is not supported yet")


def _check_bound_checkers(on, sch, kind: str) -> None:
    if not isinstance(on, bool):
        raise BuildError(f"te.build: instrument_bound_checkers must be True or False, got "
                         f"{on!r}")
    if not on:
        return
    if kind != "llvm":
        raise BuildError(f"te.build: instrument_bound_checkers is supported for target "
                         f"'llvm' only, got target '{kind}'")
    if isinstance(sch, PrimFunc):
        raise BuildError("te.build: instrument_bound_checkers applies while lowering a "
                         "schedule; for a lowered function, pass instrument_bound_checkers="
                         "True to te.lower instead")


def emit_llvm(func: PrimFunc, target: Target, parallel: bool) -> tuple:
    """(LLVM IR text, KernelSignature) of a function lowered for `target` (kind 'llvm'):
    what te.build compiles here and the tuner's workers compile in their processes.
    parallel=False runs parallel loops serially."""
    refuse_thread_binding(func.body)
    signature_of(func)  # argument errors before code generation
    gen = ModuleGen(func, parallel, target.features, target.index_limit)
    ll = link_imports(str(gen.module), imported_llvm(func.body))
    return ll, signature_of(func, tuple(gen.heap_buffers), gen.checked_buffers)


def lower(sch, args, name: str = "main", dump_after: str | None = None,
          simple_mode: bool = False, target="llvm", instrument_bound_checkers: bool = False,
          target_kind: str | None = None, stop_after: str | None = None) -> PrimFunc:
    """te.lower: the lowered function of schedule `sch` taking `args` (tensors) in order,
    through te/lower/pipeline.py's passes for `target` (a string or te.target.Target;
    target_kind, its kind alone, is the older spelling). dump_after: a pass name or "all"
    prints the IR after it; stop_after: a pass name, the function as it leaves it.
    instrument_bound_checkers: check at run time every access not proven in bounds."""
    target = parse_target(target if target_kind is None else target_kind, who="te.lower")
    return pipeline.lower(sch, args, target, name=name, dump_after=dump_after,
                          simple_mode=simple_mode,
                          instrument_bound_checkers=instrument_bound_checkers,
                          stop_after=stop_after)


def build(sch, args=None, target="llvm", name: str = "main",
          instrument_bound_checkers: bool = False):
    """te.build: compile schedule `sch` with arguments `args` for `target`: a runtime.Module
    for 'llvm', a runtime.cuda.CudaModule for 'cuda' (build_cuda.py).

    instrument_bound_checkers=True (TVM's name): every load and store that the loop ranges
    do not prove inside its buffer is checked when the kernel runs, and an access outside
    raises IndexError naming the buffer, the index and the extent instead of touching
    memory. Target 'llvm' only."""
    try:
        return _build(sch, args, target, name, instrument_bound_checkers)
    except RecursionError:
        # a walk that still recurses (the CUDA C printer) on a very deep program
        text = target.text if isinstance(target, Target) else target
        raise BuildError(TOO_DEEP.format(who="te.build", what=f"compile for target "
                                         f"{text!r}")) from None


def _build(sch, args, target, name: str, instrument_bound_checkers):
    target = parse_target(target)
    _check_bound_checkers(instrument_bound_checkers, sch, target.kind)
    if isinstance(sch, PrimFunc):
        _check_name(sch.name)
        # lowered before: with stop_after, or by hand, its parallel loops may be loops yet
        func = pipeline.outline_for_cpu(sch) if target.kind == "llvm" else sch
    elif isinstance(sch, Schedule):
        if args is None:
            raise BuildError("te.build: args must list the argument tensors of the schedule")
        _check_name(name)
        scalars = [a.name for a in args if isinstance(a, Var)] \
            if isinstance(args, (list, tuple)) else []
        if scalars and target.kind == "cuda":
            raise BuildError(f"te.build: target 'cuda' takes tensors only in args; scalar "
                             f"argument(s) {', '.join(scalars)} are supported for target "
                             f"'llvm'")
        func = pipeline.lower(sch, args, target, name=name,
                              instrument_bound_checkers=instrument_bound_checkers,
                              split_host_device=target.kind == "cuda")
    else:
        raise BuildError(f"te.build: expected a schedule or a lowered function, got "
                         f"{type(sch).__name__}")
    if target.kind == "cuda":
        from .build_cuda import build_cuda
        return build_cuda(func, signature_of(func), target)
    ll, signature = emit_llvm(func, target, runtime.parallel_available())
    try:
        lib = runtime.compile_llvm(ll, cpu=target.get("mcpu"), features=target.get("mattr"),
                                   opt_level=int(target.get("opt-level", 3)))
    except runtime.RuntimeBuildError as err:
        raise BuildError(f"te.build: native compilation failed: {err}") from None
    mod = runtime.Module(lib, signature, {"ll_unoptimized": ll},
                         unavailable=target.unavailable_message())
    mod.lowered = func
    return mod
