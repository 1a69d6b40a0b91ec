"""Runs CUDA C kernels on the CPU, one (block, thread) index after another, without a GPU.

Takes te's CUDA source and each kernel's C parameter types; gives EmulatorBackend, the
interface of cuda.PycudaBackend over numpy copies. Exact for kernels whose threads share no
memory (all te generates: no shared memory, no barriers). Imports numpy, runtime.errors.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np

from .errors import RuntimeBuildError

PRELUDE = """\
#include <math.h>
#include <stdint.h>
struct te_dim3 { unsigned int x, y, z; };
static te_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

LAUNCHER = """\
extern "C" void te_emulate_{name}(void** a, const unsigned int* d) {{
  gridDim = te_dim3{{d[0], d[1], d[2]}};
  blockDim = te_dim3{{d[3], d[4], d[5]}};
  for (unsigned int bz = 0; bz < d[2]; ++bz)
  for (unsigned int by = 0; by < d[1]; ++by)
  for (unsigned int bx = 0; bx < d[0]; ++bx)
  for (unsigned int tz = 0; tz < d[5]; ++tz)
  for (unsigned int ty = 0; ty < d[4]; ++ty)
  for (unsigned int tx = 0; tx < d[3]; ++tx) {{
    blockIdx = te_dim3{{bx, by, bz}};
    threadIdx = te_dim3{{tx, ty, tz}};
    {name}({args});
  }}
}}
"""


class EmulatorBackend:
    """Device memory and launches on the CPU (see the module docstring)."""

    def __init__(self, source: str, kernels: tuple, param_types: dict) -> None:
        compiler = shutil.which("c++") or shutil.which("g++")
        if compiler is None:
            raise RuntimeBuildError("the CUDA emulator needs a C++ compiler (c++ or g++) "
                                    "on PATH")
        parts = [PRELUDE, source]
        for kernel in kernels:
            types = param_types[kernel.name]
            args = ", ".join(f"({t})a[{k}]" if t.endswith("*") else f"*({t}*)a[{k}]"
                             for k, t in enumerate(types))
            parts.append(LAUNCHER.format(name=kernel.name, args=args))
        self.types = param_types
        with tempfile.TemporaryDirectory(prefix="te_emulate_") as tmp:
            src, lib = os.path.join(tmp, "kernels.cpp"), os.path.join(tmp, "kernels.so")
            with open(src, "w") as handle:
                handle.write("\n".join(parts))
            command = [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-o", lib, src, "-lm"]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeBuildError(f"the CUDA emulator could not compile the kernels "
                                        f"(exit code {result.returncode}): "
                                        f"{result.stderr.strip()[-2000:]}")
            self.library = ctypes.CDLL(lib)  # stays mapped after the file is removed
        self.launchers = {k.name: getattr(self.library, f"te_emulate_{k.name}")
                          for k in kernels}

    def upload(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    def empty(self, nbytes: int) -> np.ndarray:
        # NaN-like garbage, so a kernel that reads a temporary before writing it shows
        return np.full(max(1, nbytes), 0xA5, np.uint8)

    def download(self, handle: np.ndarray, array: np.ndarray) -> None:
        array.reshape(-1).view(np.uint8)[:] = handle.reshape(-1).view(np.uint8)[:array.nbytes]

    def scalar(self, dtype: str, value: int):
        return np.array(value, dtype=dtype)

    def launch(self, name: str, params: list, grid: tuple, block: tuple) -> None:
        pointers = (ctypes.c_void_p * max(1, len(params)))()
        for k, p in enumerate(params):
            pointers[k] = p.ctypes.data
        dims = (ctypes.c_uint * 6)(*grid, *block)
        self.launchers[name](pointers, dims)

    def synchronize(self) -> None:
        pass

    def release(self, handles: list) -> None:
        pass
