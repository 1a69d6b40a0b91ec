"""te.build(): lower a schedule, generate LLVM IR and compile it into a runtime Module.

Takes a Schedule and its argument tensors (or an already lowered PrimFunc) and a target
string ("llvm", "llvm -mcpu=NAME -mattr=+f1,-f2", "cuda", "cuda -arch=sm_80"); gives a
runtime.Module that checks its arguments before any native code runs (target 'cuda' is
handed to build_cuda.py). Imports te.lower and runtime.
"""
from __future__ import annotations

import functools
import re
import shlex

import llvmlite.binding as llvm

import runtime
# The same headroom as the runtime's call-time check (loops split past the end).
from runtime.checker import INDEX_LIMIT

from .codegen.llvm.codegen import ModuleGen, refuse_thread_binding
from .compute.expr import Const, Var
from .errors import TOO_DEEP, BuildError
from .lower import ir
from .lower.passes.device_sync import stored_buffers
from .lower.pipeline import lower
from .schedule.schedule import Schedule

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


# The options each target kind takes (-key=value).
TARGET_OPTIONS = {"llvm": ("mcpu", "mattr", "num-cores", "opt-level"), "cuda": ("arch",)}


def parse_target(target: str) -> dict:
    """'llvm -mcpu=x -mattr=+a,-b' -> {'kind': 'llvm', 'mcpu': 'x', 'mattr': '+a,-b'}."""
    if not isinstance(target, str) or not target.strip():
        raise BuildError(f"te.build: target must be a string such as 'llvm', got {target!r}")
    try:
        words = shlex.split(target)
    except ValueError as err:  # unbalanced quotes
        raise BuildError(f"te.build: target {target!r} cannot be split into words: "
                         f"{err}") from None
    out = {"kind": words[0]}
    if out["kind"] not in TARGET_OPTIONS:
        raise BuildError(f"te.build: unknown target kind {out['kind']!r} (expected 'llvm' or "
                         f"'cuda')")
    allowed = TARGET_OPTIONS[out["kind"]]
    for w in words[1:]:
        if not w.startswith("-") or "=" not in w:
            raise BuildError(f"te.build: target option {w!r} must look like -key=value")
        k, v = w.lstrip("-").split("=", 1)
        if k not in allowed:
            raise BuildError(f"te.build: unknown target option -{k} for '{out['kind']}' "
                             f"(expected {', '.join('-' + a for a in allowed)})")
        out[k] = v
    if "arch" in out and not re.fullmatch(r"sm_\d{2,3}[a-z]?", out["arch"]):
        raise BuildError(f"te.build: target option -arch: expected sm_XX such as sm_80, got "
                         f"{out['arch']!r}")
    if "opt-level" in out and out["opt-level"] not in ("0", "1", "2", "3"):
        raise BuildError(f"te.build: target option -opt-level: expected 0, 1, 2 or 3, got "
                         f"{out['opt-level']!r}")
    if "num-cores" in out and not (out["num-cores"].isdigit() and int(out["num-cores"]) > 0):
        raise BuildError(f"te.build: target option -num-cores: expected an integer >= 1, got "
                         f"{out['num-cores']!r}")
    if "mcpu" in out and not runtime.cpu.is_known_cpu(out["mcpu"]):
        raise BuildError(f"te.build: unknown -mcpu {out['mcpu']!r}")
    return out


@functools.lru_cache(maxsize=64)   # the tuner asks once per candidate
def target_features(target: str = "llvm") -> frozenset:
    """The CPU features (LLVM names) code built for `target` may use: the host's, changed by
    -mattr. With -mcpu only what -mattr turns on is known, so codegen stays generic."""
    opts = parse_target(target)
    host = {} if opts.get("mcpu") else llvm.get_host_cpu_features()
    features = {name for name, on in host.items() if on}
    removed = set()
    for feature in (opts.get("mattr") or "").split(","):
        feature = feature.strip()
        if feature[:1] == "+":
            features.add(feature[1:])
        elif feature[:1] == "-":
            features.discard(feature[1:])
            removed.add(feature[1:])
    # LLVM turns off what depends on a removed feature: AVX-512 needs AVX2, FMA and F16C
    # (and through them AVX and SSE), and every AVX-512 extension needs AVX-512F. Keeping
    # them here would let codegen emit an AVX-512 intrinsic the target cannot select.
    if removed & AVX512_PREREQUISITES or "avx512f" not in features:
        features = {f for f in features if not f.startswith("avx512")}
    return frozenset(features)


AVX512_PREREQUISITES = {"avx2", "fma", "f16c", "avx", "sse4.2", "sse4.1", "ssse3", "sse3",
                        "sse2", "sse"}


# Without these LLVM cannot compile an x86-64 function at all, and says so by aborting the
# process (a fatal error, not an exception).
ABI_FEATURES = ("64bit", "sse")


def _missing_host_features(opts: dict) -> list:
    """The features ('+f1', ...) code for the target may use and this host lacks: what -mattr
    turns on and, with -mcpu, what that CPU implies. Unknown -mattr names raise."""
    mattr = opts.get("mattr") or ""
    host = llvm.get_host_cpu_features()
    missing = []
    for feature in mattr.split(","):
        feature = feature.strip()
        if not feature:
            continue
        if feature[0] not in "+-" or feature[1:] not in host:
            raise BuildError(f"te.build: unknown -mattr feature {feature!r} (expected "
                             f"+name or -name of a feature LLVM knows, such as +avx2)")
        if feature[0] == "-" and feature[1:] in ABI_FEATURES:
            raise BuildError(f"te.build: -mattr cannot turn off {feature[1:]!r}: the x86-64 "
                             f"calling convention the generated functions use needs it")
        if feature[0] == "+" and not host[feature[1:]]:
            missing.append(feature)
    if opts.get("mcpu"):
        missing = ["+" + name for name in runtime.cpu.missing_host_features(opts["mcpu"], mattr)]
    return missing


def _unavailable_message(opts: dict, missing: list) -> str | None:
    """Why a module built for `opts` must not run on this host, or None when it may."""
    if not missing:
        return None
    lacks = f"module was built for CPU features this host lacks ({','.join(missing)})"
    if not opts.get("mcpu"):
        return f"{lacks}; export it or rebuild with target='llvm'"
    options = " ".join(f"-{key}={opts[key]}" for key in ("mcpu", "mattr") if opts.get(key))
    turn_off = ",".join("-" + feature[1:] for feature in missing)
    return (f"{lacks}, which {options} implies; export it, rebuild with target='llvm', or "
            f"turn them off with -mattr={turn_off}")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        raise BuildError(f"te.build: name must be an ASCII identifier, got {name!r}")
    if name in RUNTIME_SYMBOLS or name.startswith("__te_"):
        raise BuildError(f"te.build: name {name!r} clashes with a runtime function; "
                         f"choose another")


def signature_of(func: ir.PrimFunc, heap_buffers: tuple = (),
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
            if isinstance(dim, Const):
                shape.append(int(dim.value))
            elif isinstance(dim, Var):
                shape.append(dim.name)
            else:
                raise BuildError(f"te.build: argument '{buf.name}' shape[{k}] is an expression; "
                                 f"argument dimensions must be ints or te.var sizes")
        _check_index_range(buf.name, shape)
        output = buf.data in written or buf.name in written
        args.append(runtime.ArgSpec(buf.name, buf.dtype, tuple(shape), output))
    scalars = tuple(runtime.ScalarSpec(v.name, v.dtype) for v in func.scalar_params)
    return runtime.KernelSignature(func.name, tuple(args), scalars, tuple(heap_buffers),
                                   tuple(checked_buffers))


def _check_index_range(name: str, shape: list) -> None:
    if any(isinstance(dim, str) for dim in shape):
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
    if isinstance(sch, ir.PrimFunc):
        raise BuildError("te.build: instrument_bound_checkers applies while lowering a "
                         "schedule; for a lowered function, pass instrument_bound_checkers="
                         "True to te.lower instead")


def build(sch, args=None, target: str = "llvm", name: str = "main",
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
        raise BuildError(TOO_DEEP.format(who="te.build", what=f"compile for target "
                                         f"{target!r}")) from None


def _build(sch, args, target: str, name: str, instrument_bound_checkers):
    opts = parse_target(target)
    missing = _missing_host_features(opts)
    _check_bound_checkers(instrument_bound_checkers, sch, opts["kind"])
    if isinstance(sch, ir.PrimFunc):
        _check_name(sch.name)
        func = sch
    elif isinstance(sch, Schedule):
        if args is None:
            raise BuildError("te.build: args must list the argument tensors of the schedule")
        _check_name(name)
        func = lower(sch, args, name=name, target_kind=opts["kind"],
                     instrument_bound_checkers=instrument_bound_checkers)
    else:
        raise BuildError(f"te.build: expected a schedule or a lowered function, got "
                         f"{type(sch).__name__}")
    if opts["kind"] == "cuda":
        from .build_cuda import build_cuda
        return build_cuda(func, signature_of(func), opts.get("arch"))
    refuse_thread_binding(func.body)
    signature_of(func)  # argument errors before code generation
    gen = ModuleGen(func, runtime.parallel_available(), target_features(target))
    ll = str(gen.module)
    signature = signature_of(func, tuple(gen.heap_buffers), gen.checked_buffers)
    try:
        lib = runtime.compile_llvm(ll, cpu=opts.get("mcpu"), features=opts.get("mattr"),
                                   opt_level=int(opts.get("opt-level", 3)))
    except runtime.RuntimeBuildError as err:
        raise BuildError(f"te.build: native compilation failed: {err}") from None
    mod = runtime.Module(lib, signature, {"ll_unoptimized": ll},
                         unavailable=_unavailable_message(opts, missing))
    mod.lowered = func
    return mod
