"""The runtime: arrays, native compilation, kernel modules, threads and timing.

Takes LLVM IR text and KernelSignatures from the code generator; gives callable Modules and
the helpers in __all__. Re-exports only; imports nothing from te or graph, and the JIT
(runtime.cpu, llvmlite) only on first use: loading exported libraries needs no LLVM.
"""

from importlib import import_module

from .errors import ArgumentError, RuntimeBuildError
from .devices import Device, device
from .module import Module, link_shared, load_module
from .ndarray import NDArray, array, empty
from .packed import get_global_func, register_func
from .signature import ArgSpec, KernelSignature, ScalarSpec
from .threadpool import num_threads, parallel_available, set_num_threads
from .timer import TimeResult, time_function

_FROM_CPU = ("CpuLibrary", "compile_llvm")


def __getattr__(name: str):
    """The JIT's names and runtime's submodules, imported when first asked for."""
    if name in _FROM_CPU:
        return getattr(import_module(".cpu", __name__), name)
    if name in ("cpu", "cuda", "cuda_emulator"):
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    """The module's names and the lazy ones (dir(runtime), help(runtime) list them)."""
    return sorted(set(globals()) | set(_FROM_CPU) | {"cpu", "cuda", "cuda_emulator"})


# (runtime.cpu and runtime.cuda are modules: the device helpers are runtime.devices.cpu/cuda)
__all__ = [
    "ArgSpec", "ArgumentError", "CpuLibrary", "Device", "KernelSignature", "Module", "NDArray",
    "RuntimeBuildError", "ScalarSpec", "TimeResult", "array", "compile_llvm", "device",
    "empty", "get_global_func", "link_shared", "load_module", "num_threads",
    "parallel_available", "register_func",
    "set_num_threads", "time_function",
]
