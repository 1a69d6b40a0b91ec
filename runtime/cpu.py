"""The CPU JIT: LLVM IR text -> optimized native code in this process (llvmlite MCJIT).

Takes LLVM IR text; gives compile_llvm(), CpuLibrary (addresses, IR, assembly, objects), host
CPU queries, emit_object() and prefix_symbols() (kernels linked into one library). Every
declared external function must resolve: MCJIT would otherwise jump to address 0 when called.
Imports llvmlite and runtime.errors / half_libcalls / packed / threadpool.
"""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
import threading
import warnings
from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

from . import half_libcalls, packed, threadpool
from .errors import RuntimeBuildError

_init_lock = threading.Lock()
_initialized = False


def _ensure_initialized() -> None:
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        # llvm.initialize() raises under llvmlite 0.50 / LLVM 22; the native pieces suffice.
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        # Kernels may call GOMP_*/omp_*, libm and __te_call_packed; make them all visible
        # to the JIT's resolver (libgomp is loaded once, by threadpool, which reads the spin
        # settings; this second load only adds it to LLVM's search).
        if threadpool.load():
            llvm.load_library_permanently(threadpool.LIBGOMP_NAME)
        packed.register_symbol()
        if llvm.address_of_symbol("expf") is None:
            libm = ctypes.util.find_library("m") or "libm.so.6"
            llvm.load_library_permanently(libm)
        half_libcalls.register()  # float16 code for CPUs without F16C calls them
        _initialized = True


@lru_cache(maxsize=64)
def is_known_cpu(name: str) -> bool:
    """Whether LLVM knows CPU `name` for the host target.

    LLVM only warns about an unknown CPU and then may abort the whole process while emitting
    code ("64-bit code requested on a subtarget that doesn't support it"), so the question is
    asked in a child process (~0.3 s, once per name).
    """
    if name == llvm.get_host_cpu_name():
        return True
    probe = (
        "import llvmlite.binding as llvm\n"
        "llvm.initialize_native_target(); llvm.initialize_native_asmprinter()\n"
        f"tm = llvm.Target.from_default_triple().create_target_machine(cpu={name!r})\n"
        "tm.emit_assembly(llvm.parse_assembly('define void @f() { ret void }'))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return result.returncode == 0 and "not a recognized processor" not in result.stderr


def _host_cpu(cpu: str | None, features: str | None) -> tuple[str, str]:
    """(cpu, features) for LLVM's target machine. No cpu: this host, with its features
    (without them LLVM targets generic x86-64: SSE2, no FMA) and what `features` adds or
    removes after them; never the defaults of the host's CPU name alone, which may include
    what a virtual machine hides (AVX-512 on a 'skylake-avx512' guest without it). A named
    cpu: that CPU's own features and what `features` adds or removes, never the host's, or
    -mcpu=haswell code built on an AVX-512 host would use AVX-512 and fail on a Haswell
    (te.build's target_features assumes the same)."""
    if cpu is None:
        host = llvm.get_host_cpu_features().flatten()
        return llvm.get_host_cpu_name(), ",".join(part for part in (host, features) if part)
    return cpu, features if features is not None else ""


# One probe of missing_host_features(): the callee is compiled for the target, the caller for
# the target without one feature.
_PROBE_PAIR = """
define internal void @callee{index}() #0 {{
  store volatile i32 {index}, ptr @sink
  ret void
}}
define void @caller{index}() #{index} {{
  call void @callee{index}()
  ret void
}}
"""


@lru_cache(maxsize=64)
def missing_host_features(cpu: str, features: str = "") -> tuple[str, ...]:
    """The features (LLVM names, sorted) that code for CPU `cpu` changed by `features`
    ("+f1,-f2") may use and this host lacks: code that uses one dies with SIGILL here.

    LLVM does not list what a CPU name implies, but its inliner compares it: a function
    is inlined into a caller only when the caller's features include the callee's. So for
    each feature f the host lacks, a callee compiled for the target is called from a caller
    compiled for the target with -f; the call stays exactly when the target has f. Gives ()
    where the inliner cannot tell (a target whose inliner wants equal feature strings)."""
    if not is_known_cpu(cpu):  # LLVM may abort on an unknown CPU
        raise ValueError(f"cpu: LLVM does not know the CPU {cpu!r}")
    absent = sorted(name for name, present in llvm.get_host_cpu_features().items()
                    if not present)
    if not absent:
        return ()
    _ensure_initialized()
    # Caller 0 has one absent feature more than the callee: a target whose inliner wants
    # equal feature strings instead of a subset keeps that call, and cannot answer.
    variants = [f"+{absent[0]}"] + [f"-{name}" for name in absent]
    text = ["@sink = global i32 0"] + [_PROBE_PAIR.format(index=i)
                                       for i in range(1, len(variants) + 1)]
    for group, variant in enumerate([""] + variants):
        changed = ",".join(part for part in (features, variant) if part)
        text.append(f'attributes #{group} = {{ "target-cpu"="{cpu}" '
                    f'"target-features"="{changed}" }}')
    module = _parse("\n".join(text))
    _optimize_for(module, _cached_target_machine(*_host_cpu(None, None), 2, False), 2,
                  slp=False)
    kept = [f"@callee{i}" in str(module.get_function(f"caller{i}"))
            for i in range(1, len(variants) + 1)]
    if kept[0]:
        return ()
    return tuple(name for name, stays in zip(absent, kept[1:]) if stays)


def _new_target_machine(cpu: str, features: str, opt_level: int, jit: bool) -> llvm.TargetMachine:
    target = llvm.Target.from_default_triple()
    if jit:
        return target.create_target_machine(cpu=cpu, features=features, opt=opt_level, jit=True)
    # Objects for shared libraries must be position independent with the small code model.
    return target.create_target_machine(
        cpu=cpu, features=features, opt=opt_level, reloc="pic", codemodel="default"
    )


@lru_cache(maxsize=16)
def _cached_target_machine(
    cpu: str, features: str, opt_level: int, jit: bool
) -> llvm.TargetMachine:
    # For optimization and text/object emission only: an MCJIT engine takes ownership of
    # its target machine, so every engine gets a fresh one (cheap beside the compile).
    return _new_target_machine(cpu, features, opt_level, jit)


def _optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, opt_level: int,
              slp: bool = True) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    vectorize = opt_level >= 2
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = vectorize and slp
    pto.loop_unrolling = opt_level >= 1
    pass_builder = llvm.create_pass_builder(tm, pto)
    pass_manager = pass_builder.getModulePassManager()
    try:
        pass_manager.run(module, pass_builder)
    finally:
        _dispose_pass_manager(pass_manager)


def _dispose_pass_manager(pass_manager: llvm.ModulePassManager) -> None:
    """Free a module pass manager's pipeline (and what its passes keep between runs).

    llvmlite 0.50 never does: in ModulePassManager's bases ObjectRef's no-op _dispose comes
    before NewPassManager's, so each optimized module left its whole pipeline behind.
    Detached afterwards, so a llvmlite that frees it itself cannot free it twice."""
    NewPassManager._dispose(pass_manager)
    pass_manager.detach()


def _optimized(module: llvm.ModuleRef, ll_text: str, tm: llvm.TargetMachine,
               opt_level: int) -> llvm.ModuleRef:
    """`module` (parsed from `ll_text`) optimized for `tm` and verified.

    LLVM 22's SLP vectorizer (llvmlite 0.50) can leave a function broken ("Instruction
    does not dominate all uses!", seen on an elementwise chain computed inside a split,
    vectorized loop), and MCJIT then aborts the whole process while it compiles. The
    optimized module is verified, which raises instead, and a broken one is optimized again
    from the text without the SLP vectorizer (the loop vectorizer still runs), with a
    RuntimeWarning: the kernel may then run slower than its schedule would suggest."""
    _optimize_for(module, tm, opt_level, slp=True)
    error = _verify_error(module)
    if error is None:
        return module
    if opt_level < 2:  # no SLP at these levels: nothing to retry without
        raise RuntimeBuildError(f"LLVM's optimizer (opt_level {opt_level}) produced invalid "
                                f"IR (a bug in LLVM): {error}")
    module = _parse(ll_text)
    _optimize_for(module, tm, opt_level, slp=False)
    second = _verify_error(module)
    if second is not None:
        raise RuntimeBuildError("LLVM's optimizer produced invalid IR with and without its SLP "
                                f"vectorizer (a bug in LLVM): {error}; without SLP: {second}")
    warnings.warn("LLVM's SLP vectorizer produced invalid IR for this kernel (a bug in LLVM); "
                  f"it was optimized without SLP vectorization: {error}", RuntimeWarning,
                  stacklevel=3)
    return module


def _optimize_for(module: llvm.ModuleRef, tm: llvm.TargetMachine, opt_level: int,
                  slp: bool) -> None:
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    _optimize(module, tm, opt_level, slp=slp)


def _verify_error(module: llvm.ModuleRef) -> str | None:
    """None when `module` is valid, else the first lines of LLVM's complaint."""
    try:
        module.verify()
    except RuntimeError as error:
        return " / ".join(line.strip() for line in str(error).splitlines()[:3])
    return None


def _unresolved_declarations(module: llvm.ModuleRef) -> list[str]:
    missing = []
    for function in module.functions:
        # Intrinsics are lowered by the code generator and never looked up as symbols.
        if function.is_declaration and not function.name.startswith("llvm."):
            if llvm.address_of_symbol(function.name) is None:
                missing.append(function.name)
    return missing


class CpuLibrary:
    """Native code for one LLVM module, kept alive as long as this object lives."""

    def __init__(
        self, engine: llvm.ExecutionEngine, ll: str, cpu: str, features: str, opt_level: int
    ) -> None:
        self._engine = engine
        self.ll = ll
        self.cpu = cpu
        self.features = features
        self.opt_level = opt_level
        self._asm: str | None = None

    def get_function_address(self, name: str) -> int:
        address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(f"function '{name}' is not defined in this library")
        return address

    @property
    def asm(self) -> str:
        """Assembly text of the optimized module (generated on first use)."""
        if self._asm is None:
            self._asm = emit_assembly(self.ll, self.cpu, self.features, self.opt_level)
        return self._asm

    def emit_object(self) -> bytes:
        """A position-independent ELF object of the optimized module, for linking a .so."""
        return emit_object(self.ll, self.cpu, self.features, self.opt_level)


def emit_object(ll_text: str, cpu: str | None = None, features: str | None = None,
                opt_level: int = 3) -> bytes:
    """Compile IR text (as is, without optimization passes) to a position-independent object."""
    _ensure_initialized()
    cpu, features = _host_cpu(cpu, features)
    tm = _cached_target_machine(cpu, features, opt_level, False)
    module = _parse(ll_text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    return tm.emit_object(module)


def prefix_symbols(ll_text: str, prefix: str) -> str:
    """IR text with every function and global it defines renamed `prefix` + name (what it
    only declares, libm's or libgomp's, untouched): kernels compiled apart, each with its
    own helpers, link into one library without two symbols of one name."""
    _ensure_initialized()
    module = _parse(ll_text)
    for value in list(module.functions) + list(module.global_variables):
        if not value.is_declaration and not value.name.startswith("llvm."):
            value.name = prefix + value.name
    return str(module)


def emit_assembly(ll_text: str, cpu: str | None = None, features: str | None = None,
                  opt_level: int = 3) -> str:
    """Assembly text for IR text (as is, without optimization passes) on the host CPU."""
    _ensure_initialized()
    cpu, features = _host_cpu(cpu, features)
    tm = _cached_target_machine(cpu, features, opt_level, True)
    return tm.emit_assembly(_parse(ll_text))


def _parse(ll_text: str) -> llvm.ModuleRef:
    try:
        module = llvm.parse_assembly(ll_text)
        module.verify()
    except RuntimeError as error:
        raise RuntimeBuildError(f"invalid LLVM IR: {error}") from None
    return module


def compile_llvm(
    ll_text: str, cpu: str | None = None, features: str | None = None, opt_level: int = 3
) -> CpuLibrary:
    """Parse, optimize at `opt_level` (0-3) and JIT-compile LLVM IR text for the host CPU.

    Raises RuntimeBuildError for invalid IR or an external function that does not resolve.
    """
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level: expected 0, 1, 2 or 3, got {opt_level!r}")
    _ensure_initialized()
    cpu, features = _host_cpu(cpu, features)
    module = _parse(ll_text)
    missing = _unresolved_declarations(module)
    if missing:
        # Checked before the JIT sees the module: MCJIT would link them to address 0.
        raise RuntimeBuildError(
            f"unresolved external symbol(s): {', '.join(missing)} (not found in this process; "
            "load the library that defines them with llvmlite.binding.load_library_permanently)"
        )
    tm = _cached_target_machine(cpu, features, opt_level, True)
    module = _optimized(module, ll_text, tm, opt_level)
    optimized_ll = str(module)
    engine = llvm.create_mcjit_compiler(module, _new_target_machine(cpu, features, opt_level, True))
    engine.finalize_object()
    # Optimization may introduce new calls (e.g. a loop turned into memset), so check again.
    missing = _unresolved_declarations(module)
    if missing:
        raise RuntimeBuildError(f"unresolved external symbol(s) after optimization: "
                                f"{', '.join(missing)}")
    return CpuLibrary(engine, optimized_ll, cpu, features, opt_level)
