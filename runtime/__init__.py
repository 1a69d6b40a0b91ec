"""The runtime: arrays, native compilation, kernel modules, threads and timing.

Takes LLVM IR text and KernelSignatures from the code generator; gives callable Modules and
the helpers listed in __all__. Re-exports only. Imports nothing from te or graph.
"""

from .cpu import CpuLibrary, compile_llvm
from .errors import ArgumentError, RuntimeBuildError
from .devices import Device, device
from .module import Module, link_shared, load_module
from .ndarray import NDArray, array, empty
from .packed import get_global_func, register_func
from .signature import ArgSpec, KernelSignature, ScalarSpec
from .threadpool import num_threads, parallel_available, set_num_threads
from .timer import TimeResult, time_function

# (runtime.cpu and runtime.cuda are modules: the device helpers are runtime.devices.cpu/cuda)
__all__ = [
    "ArgSpec", "ArgumentError", "CpuLibrary", "Device", "KernelSignature", "Module", "NDArray",
    "RuntimeBuildError", "ScalarSpec", "TimeResult", "array", "compile_llvm", "device",
    "empty", "get_global_func", "link_shared", "load_module", "num_threads",
    "parallel_available", "register_func",
    "set_num_threads", "time_function",
]
