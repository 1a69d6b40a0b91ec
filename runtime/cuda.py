"""CUDA modules: CUDA C compiled to PTX with nvcc, run on a GPU through NVIDIA's cuda-python
or pycuda (lazily).

Takes the source and launch description te generates for target 'cuda'; gives CudaModule
(check, copy in, launch in order, copy out; time; show source and PTX), and emulator()
for running the same source on the CPU (cuda_emulator.py). Imports numpy and runtime.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

import numpy as np

from .checker import ArgumentChecker
from .cuda_driver import CudaPythonBackend, cuda_python_installed
from .cuda_resources import KernelResources, check_fits
from .errors import RuntimeBuildError
from .ndarray import NDArray
from .signature import KernelSignature
from .timer import TimeResult, check_timing_parameters, time_function

# te dtype -> the C type of a kernel parameter or local array.
C_TYPES = {"float16": "half", "float32": "float", "float64": "double", "int8": "signed char",
           "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
           "uint16": "unsigned short", "uint32": "unsigned int",
           "uint64": "unsigned long long", "bool": "bool"}
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_ARCH = "sm_75"   # the oldest architecture nvcc 13 compiles for; PTX runs on newer
NVCC_TIMEOUT_S = 120


@dataclass(frozen=True)
class CudaKernel:
    """One __global__ function: ("buffer", k) slots index the module's arguments followed by
    its temporaries; ("scalar", k) slots index the signature's size variables."""
    name: str
    params: tuple
    uses_barriers: bool = False   # __syncthreads(): the emulator runs its threads as fibers
    # what ptxas says it needs (None where ptxas was not there): a launch checks its block
    # fits an SM, in the emulator too
    resources: KernelResources | None = None


@dataclass(frozen=True)
class CudaTemporary:
    """Device memory a call allocates for a stage that is neither input nor output."""
    name: str
    dtype: str


# sizes (one int per size variable) -> (temporary element counts, [(grid, block)] per kernel)
LaunchPlan = Callable[[tuple], tuple]


def find_nvcc() -> str | None:
    return shutil.which("nvcc")


def compile_ptx(source: str, arch: str = DEFAULT_ARCH, fast_math: bool = False) -> str:
    """PTX text of `source` for `arch` (sm_XX), with nvcc's --use_fast_math if `fast_math`;
    RuntimeBuildError with nvcc's message."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeBuildError("nvcc is not on PATH; install the CUDA toolkit to compile "
                                "CUDA C")
    with tempfile.TemporaryDirectory(prefix="te_cuda_") as tmp:
        src, out = os.path.join(tmp, "kernels.cu"), os.path.join(tmp, "kernels.ptx")
        with open(src, "w") as handle:
            handle.write(source)
        command = [nvcc, "--ptx", f"-arch={arch}", "-o", out, src]
        command += ["--use_fast_math"] if fast_math else []
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=NVCC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeBuildError(f"nvcc took more than {NVCC_TIMEOUT_S} s") from None
        if result.returncode != 0:
            raise RuntimeBuildError(f"nvcc failed (exit code {result.returncode}): "
                                    f"{result.stderr.strip()[-2000:]}")
        with open(out) as handle:
            return handle.read()


class CudaModule:
    """Kernels for a GPU behind one call: check, copy in, launch in order, copy out."""

    def __init__(self, signature: KernelSignature, source: str, kernels: tuple,
                 temporaries: tuple, launch_plan: LaunchPlan, ptx: str | None = None,
                 ptx_missing: str | None = None, backend: Any = None) -> None:
        """`ptx_missing` says why there is no PTX (no nvcc at build time)."""
        self.signature = signature
        self.source = source
        self.kernels = tuple(kernels)
        self.temporaries = tuple(temporaries)
        self.launch_plan = launch_plan
        self.ptx = ptx
        self._ptx_missing = ptx_missing
        self._checker = ArgumentChecker(signature)
        self._backend = backend
        # (sizes, blocks=, iterations=) -> a memory access report; te.build sets it
        self.memory_analysis: Callable | None = None

    @property
    def entry_name(self) -> str:
        return self.signature.name

    def __reduce__(self) -> NoReturn:
        # Its launch plan is a closure over the build and its backend holds a loaded GPU (or
        # emulator) module: neither exists in another process.
        raise TypeError(
            f"cannot pickle CUDA module '{self.entry_name}': it holds a launch plan and a "
            "module loaded in this process; build it again with te.build(..., "
            "target='cuda') where it is needed, or pass its source (get_source())"
        )

    def emulator(self) -> "CudaModule":
        """This module running its CUDA C on the CPU (cuda_emulator.py), block after block:
        for checking results where there is no GPU. Slow; a race between threads of a
        kernel without barriers cannot show, as its threads run one after another."""
        from .cuda_emulator import EmulatorBackend
        backend = EmulatorBackend(self.source, self.kernels, self._param_types())
        emulated = CudaModule(self.signature, self.source, self.kernels, self.temporaries,
                              self.launch_plan, self.ptx, self._ptx_missing, backend)
        emulated.memory_analysis = self.memory_analysis
        emulated.lowered = getattr(self, "lowered", None)
        return emulated

    @property
    def emulated(self) -> bool:
        """Whether calls run in the CPU emulator (emulator()) rather than on a GPU."""
        from .cuda_emulator import EmulatorBackend
        return isinstance(self._backend, EmulatorBackend)

    def memory_report(self, *args: Any, blocks: int | None = 3,
                      iterations: int | None = 8):
        """How the kernels use memory, from their addresses traced on the CPU (no GPU
        needed): per kernel and buffer, the warp requests to global memory with the 32-byte
        sectors they touch against the fewest needed (coalescing), and to shared memory
        with their bank conflicts. `args`: a call's arguments, needed where the shapes have
        size variables. blocks: how many blocks of each grid to trace (first to last), None
        for all; iterations: serial loops longer than this are sampled, None for none."""
        if self.memory_analysis is None:
            raise ValueError(f"module '{self.entry_name}' has no lowered function to analyse "
                             f"(build it with te.build(..., target='cuda'))")
        if args:
            sizes = self._check(args)[1]
        elif self.signature.scalars:
            names = ", ".join(s.name for s in self.signature.scalars)
            raise ValueError(f"memory_report of '{self.entry_name}': args: expected the "
                             f"call's arguments, which give the sizes {names}; got none")
        else:
            sizes = ()
        return self.memory_analysis(sizes, blocks=blocks, iterations=iterations)

    def __call__(self, *args: Any) -> None:
        arrays, sizes = self._check(args)
        backend = self._get_backend()
        handles, temps, launches = self._upload(backend, arrays, sizes)
        try:
            for launch in launches:
                launch()
            backend.synchronize()
            for k, arg in enumerate(self.signature.args):
                if arg.output:
                    backend.download(handles[k], arrays[k])
        finally:
            backend.release(handles + temps)

    def time_evaluator(self, func_name: str | None = None, dev: Any = None, number: int = 10,
                       repeat: int = 3, min_repeat_ms: float = 0) -> Callable[..., TimeResult]:
        """f(*args) -> TimeResult: seconds per call of the kernels alone, on data copied to
        the device once (as TVM times device kernels); `dev` is accepted and ignored. In
        the emulator these are CPU emulation times: the result says so (its `emulated`)
        and an EmulatedTimingWarning is raised when the evaluator is made."""
        if func_name is not None and func_name != self.entry_name:
            raise ValueError(f"func_name: expected '{self.entry_name}' (or None), got "
                             f"{func_name!r}")
        check_timing_parameters(number, repeat, min_repeat_ms)
        emulated = self.emulated
        if emulated:
            warnings.warn(EmulatedTimingWarning(
                f"time_evaluator of CUDA module '{self.entry_name}' in the emulator: the "
                f"times are CPU emulation times, not GPU times (their TimeResult says "
                f"emulated=True); use mod.memory_report() to judge the kernels' memory "
                f"access without a GPU"), stacklevel=2)

        def evaluate(*args: Any) -> TimeResult:
            arrays, sizes = self._check(args)
            backend = self._get_backend()
            handles, temps, launches = self._upload(backend, arrays, sizes)

            def run() -> None:
                for launch in launches:
                    launch()
                backend.synchronize()
            try:
                result = time_function(run, number=number, repeat=repeat,
                                       min_repeat_ms=min_repeat_ms)
                return dataclasses.replace(result, emulated=True) if emulated else result
            finally:
                backend.release(handles + temps)
        return evaluate

    def get_source(self, fmt: str = "cuda") -> str:
        """The CUDA C source ("cuda" or "cu") or the PTX ("ptx") nvcc made of it."""
        if fmt in ("cuda", "cu"):
            return self.source
        if fmt == "ptx":
            if self.ptx is None:
                raise ValueError(f"module '{self.entry_name}' has no PTX: {self._ptx_missing}")
            return self.ptx
        raise ValueError(f"fmt: expected 'cuda', 'cu' or 'ptx', got {fmt!r}")

    @property
    def imported_modules(self) -> list:
        """TVM's device modules of a host module: this one, whose get_source() is the CUDA C
        (there is no separate host module; calls launch the kernels from Python)."""
        return [self]

    def save(self, path: str | os.PathLike, fmt: str = "") -> None:
        """Write the CUDA C (".cu") or the PTX (".ptx"); `fmt` overrides the suffix."""
        path = os.fspath(path)
        fmt = fmt or os.path.splitext(path)[1].lstrip(".")
        if fmt not in ("cu", "cuda", "ptx"):
            raise ValueError(f"save: expected a path ending in .cu or .ptx (or fmt='cu' or "
                             f"'ptx'), got {path!r}")
        with open(path, "w") as handle:
            handle.write(self.get_source(fmt))

    def __repr__(self) -> str:
        args = ", ".join(f"{a.name}: {a.dtype}{list(a.shape)}" for a in self.signature.args)
        where = ", emulated on the CPU" if self.emulated else ""
        return f"CudaModule({self.entry_name}({args}), {len(self.kernels)} kernel(s){where})"

    # -- internals ---------------------------------------------------------------------
    def _check(self, args) -> tuple:
        raw = self._checker.convert(args)
        arrays = [a._data if isinstance(a, NDArray) else a for a in args]
        return arrays, tuple(raw[len(arrays):])

    def _get_backend(self):
        if self._backend is None:
            if self.ptx is None:
                raise RuntimeError(f"module '{self.entry_name}' cannot run on a GPU: "
                                   f"{self._ptx_missing}{USE_EMULATOR}")
            self._backend = open_gpu_backend(self.ptx, self.kernels)
        return self._backend

    def _upload(self, backend, arrays: list, sizes: tuple) -> tuple:
        """Device copies of the arguments, fresh temporaries, and one closure per launch."""
        counts, dims = self.launch_plan(sizes)
        for kernel, (grid, block) in zip(self.kernels, dims):
            _check_launch(self.entry_name, kernel, grid, block)
        handles: list = []
        temps: list = []
        try:
            handles += [backend.upload(a) for a in arrays]
            temps += [backend.empty(max(0, n) * np.dtype(t.dtype).itemsize)
                      for t, n in zip(self.temporaries, counts)]
        except BaseException:
            backend.release(handles + temps)
            raise
        buffers = handles + temps
        scalar_dtypes = [s.dtype for s in self.signature.scalars]
        launches = []
        for kernel, (grid, block) in zip(self.kernels, dims):
            if min(grid + block) <= 0:
                continue   # an empty launch: nothing to compute (CUDA rejects it)
            params = [buffers[k] if kind == "buffer"
                      else backend.scalar(scalar_dtypes[k], sizes[k])
                      for kind, k in kernel.params]
            launches.append(lambda kernel=kernel, params=params, grid=grid, block=block:
                            backend.launch(kernel.name, params, grid, block))
        return handles, temps, launches

    def _param_types(self) -> dict:
        """kernel name -> the C type of each parameter (pointers for buffers)."""
        dtypes = [a.dtype for a in self.signature.args] + [t.dtype for t in self.temporaries]
        scalars = [s.dtype for s in self.signature.scalars]
        return {k.name: [C_TYPES[dtypes[i]] + "*" if kind == "buffer" else C_TYPES[scalars[i]]
                         for kind, i in k.params] for k in self.kernels}


def _check_launch(entry: str, k: CudaKernel, grid: tuple, block: tuple) -> None:
    kernel = k.name
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise RuntimeError(f"kernel '{entry}' ({kernel}): {threads} threads per block "
                           f"(block {tuple(block)}); CUDA allows at most "
                           f"{MAX_THREADS_PER_BLOCK}")
    for what, dims, limits in (("block", block, MAX_BLOCK), ("grid", grid, MAX_GRID)):
        if any(d > limit for d, limit in zip(dims, limits)):
            raise RuntimeError(f"kernel '{entry}' ({kernel}): {what} {tuple(dims)} exceeds "
                               f"CUDA's limits {limits}")
    if k.resources is not None and threads > 0:
        check_fits(f"'{entry}' ({kernel})", k.resources, threads)


class EmulatedTimingWarning(RuntimeWarning):
    """A time_evaluator of a CUDA module in the CPU emulator: its times are not GPU times."""


# Where no GPU can run a module, what can: its results checked on the CPU.
USE_EMULATOR = ("; without a GPU, run the module in the CUDA emulator on the CPU: "
                "mod.emulator()(*args) (slow; te.tvm.build falls back to it by itself)")


def open_gpu_backend(ptx: str, kernels: tuple):
    """The GPU backend: pycuda where it is installed (as before), else NVIDIA's cuda-python
    (cuda_driver.py), which the [cuda] extra installs."""
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        if not cuda_python_installed():
            raise RuntimeError("running a 'cuda' module needs cuda-python (or pycuda), and "
                               "neither is installed: pip install 'te-compiler[cuda]'"
                               + USE_EMULATOR) from None
        return CudaPythonBackend(ptx, kernels, USE_EMULATOR)
    return PycudaBackend(ptx, kernels)


class PycudaBackend:
    """Device memory and launches through pycuda (a context on the first GPU)."""

    def __init__(self, ptx: str, kernels: tuple) -> None:
        import pycuda.driver as drv
        try:
            import pycuda.autoinit  # noqa: F401  (creates the context, releases it at exit)
        except Exception as err:  # pycuda raises its own error types when no GPU is found
            raise RuntimeError(f"no CUDA device could be opened: {err}{USE_EMULATOR}") from None
        self.drv = drv
        self.module = drv.module_from_buffer(ptx.encode())
        self.functions = {k.name: self.module.get_function(k.name) for k in kernels}

    def upload(self, array: np.ndarray):
        handle = self.drv.mem_alloc(max(1, array.nbytes))
        if array.nbytes:
            self.drv.memcpy_htod(handle, array)
        return handle

    def empty(self, nbytes: int):
        return self.drv.mem_alloc(max(1, nbytes))

    def download(self, handle, array: np.ndarray) -> None:
        if array.nbytes:
            self.drv.memcpy_dtoh(array, handle)

    def scalar(self, dtype: str, value: int):
        return np.dtype(dtype).type(value)

    def launch(self, name: str, params: list, grid: tuple, block: tuple) -> None:
        self.functions[name](*params, grid=tuple(grid), block=tuple(block))

    def synchronize(self) -> None:
        self.drv.Context.synchronize()

    def release(self, handles: list) -> None:
        for handle in handles:
            handle.free()
