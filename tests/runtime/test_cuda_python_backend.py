"""runtime.cuda_driver: the GPU backend on NVIDIA's cuda-python, checked against a stand-in
`cuda.bindings.driver` that keeps device memory in numpy and runs each launch's kernel as
numpy code (the scale kernel of _module), reading its arguments back through the
kernelParams pointers the backend packs.
This checks the call sequence, the copies and the argument packing without a GPU (on a GPU
machine tests/runtime/test_cuda_module.py runs the real one). Also: the [cuda] extra names
binary wheels only.
"""
import configparser
import ctypes
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from helpers import rand_array

import te
from runtime import cuda as rt_cuda
from runtime.cuda_driver import CudaPythonBackend


def _fake_driver(memory: dict, launches: list, fail_init: bool = False):
    """A module with the cuda.bindings.driver calls the backend makes; `memory` maps device
    pointers to numpy bytes, `launches` records each launch."""
    ok = "CUDA_SUCCESS"
    d = types.SimpleNamespace(CUresult=types.SimpleNamespace(CUDA_SUCCESS=ok))
    d.cuInit = lambda flags: ("CUDA_ERROR_NO_DEVICE",) if fail_init else (ok,)
    d.cuGetErrorString = lambda err: (ok, b"no CUDA-capable device is detected")
    d.cuDeviceGet = lambda k: (ok, 0)
    d.cuDevicePrimaryCtxRetain = lambda dev: (ok, "ctx")
    d.cuCtxSetCurrent = lambda ctx: (ok,)
    d.cuModuleLoadData = lambda image: (ok, image)
    d.cuModuleGetFunction = lambda module, name: (ok, name.decode())
    d.cuCtxSynchronize = lambda: (ok,)

    def alloc(n):
        memory[len(memory) + 1] = np.zeros(n, np.uint8)
        return ok, len(memory)
    d.cuMemAlloc = alloc

    def htod(dst, src, n):
        memory[dst][:n] = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(src))
        return (ok,)
    d.cuMemcpyHtoD = htod

    def dtoh(dst, src, n):
        ctypes.memmove(dst, memory[src].ctypes.data, n)
        return (ok,)
    d.cuMemcpyDtoH = dtoh
    d.cuMemFree = lambda h: (memory.pop(h), (ok,))[1]

    def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launches.append((f, (gx, gy, gz), (bx, by, bz), params))
        if f == "main_kernel0":
            _run_scale_kernel(memory, params)
        return (ok,)
    d.cuLaunchKernel = launch
    return d


@pytest.fixture
def fake_cuda(monkeypatch):
    memory, launches = {}, []
    driver = _fake_driver(memory, launches)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver
    package = types.ModuleType("cuda")
    package.bindings = bindings
    monkeypatch.setitem(sys.modules, "cuda", package)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    monkeypatch.setitem(sys.modules, "pycuda", None)   # not installed
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    return memory, launches


def _module():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 3 + 1, name="C")
    s = te.create_schedule(C.op)
    bo, bi = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bo, te.thread_axis("blockIdx.x"))
    s[C].bind(bi, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C], target="cuda")
    mod.ptx = mod.ptx or "// PTX stand-in: nvcc is not on PATH"
    return mod


def _run_scale_kernel(memory, params):
    """What the module's one kernel does (C = A * 3 + 1), on the stand-in's memory, with the
    arguments read through the packed pointers: A's and C's device pointers, then n."""
    pointers = np.ctypeslib.as_array((ctypes.c_uint64 * 3).from_address(params))
    a_ptr = ctypes.c_uint64.from_address(int(pointers[0])).value
    c_ptr = ctypes.c_uint64.from_address(int(pointers[1])).value
    size = ctypes.c_int32.from_address(int(pointers[2])).value
    memory[c_ptr].view("float32")[:size] = memory[a_ptr].view("float32")[:size] * 3 + 1


def test_a_call_copies_in_launches_with_packed_arguments_and_copies_out(fake_cuda):
    memory, launches = fake_cuda
    mod = _module()
    for size in (1, 100, 129):
        a = rand_array((size,))
        c = np.zeros(size, "float32")
        mod(a, c)
        ((_, grid, block, _),) = launches
        launches.clear()
        assert grid == (-(-size // 64), 1, 1) and block == (64, 1, 1)
        np.testing.assert_allclose(c, a * 3 + 1, rtol=1e-6)
        assert memory == {}   # every allocation freed


def test_launch_shape_and_function(fake_cuda):
    _, launches = fake_cuda
    backend = CudaPythonBackend("ptx", (rt_cuda.CudaKernel("k0", ()),))   # not run
    backend.launch("k0", [backend.empty(8), backend.scalar("int32", 7)], (3, 1, 1), (64, 1, 1))
    ((f, grid, block, params),) = launches
    assert (f, grid, block) == ("k0", (3, 1, 1), (64, 1, 1))


def test_no_device_says_so_with_the_drivers_words(monkeypatch, fake_cuda):
    driver = _fake_driver({}, [], fail_init=True)
    monkeypatch.setattr(sys.modules["cuda.bindings"], "driver", driver)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    with pytest.raises(RuntimeError, match=r"^no CUDA device could be opened: cuInit failed: "
                                           r"no CUDA-capable device is detected; without a "
                                           r"GPU, run the module in the CUDA emulator"):
        _module()(rand_array((8,)), np.zeros(8, "float32"))


def test_the_cuda_extra_is_binary_wheels_only():
    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    extra = [r for r in config["options.extras_require"]["cuda"].split("\n")
             if r.strip() and not r.startswith("#")]
    assert extra == ["cuda-bindings>=12.0"]   # no pycuda: its source build needs cuda.h
