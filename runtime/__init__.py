"""The runtime: arrays, native compilation, kernel modules, threads and timing.

Takes LLVM IR text and KernelSignatures from the code generator; gives callable Modules and
the helpers listed in __all__. Re-exports only. Imports nothing from te or graph.
"""

from .cpu import CpuLibrary, compile_llvm
from .errors import ArgumentError, RuntimeBuildError
from .module import Module, load_module
from .ndarray import NDArray, array, empty
from .packed import get_global_func, register_func
from .signature import ArgSpec, KernelSignature, ScalarSpec
from .threadpool import num_threads, parallel_available, set_num_threads
from .timer import TimeResult, time_function

__all__ = [
    "ArgSpec", "ArgumentError", "CpuLibrary", "KernelSignature", "Module", "NDArray",
    "RuntimeBuildError", "ScalarSpec", "TimeResult", "array", "compile_llvm", "empty",
    "get_global_func", "load_module", "num_threads", "parallel_available", "register_func",
    "set_num_threads", "time_function",
]
