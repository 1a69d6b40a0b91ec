"""CudaModule as a user meets it: argument checks, launch limits, timing, sources, and the
errors where the GPU path cannot run (no pycuda, no nvcc, no device). The numbers are
checked through the CPU emulator; on a machine with a GPU and pycuda the last test runs the
same module on the device."""
import pickle
import shutil

import numpy as np
import pytest
from helpers import rand_array

import runtime
import te
from runtime import cuda as rt_cuda


def _module(factor=64, target="cuda"):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 3 + 1, name="C")
    s = te.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], factor=factor)
    s[C].bind(o, te.thread_axis("blockIdx.x"))
    s[C].bind(i, te.thread_axis("threadIdx.x"))
    return te.build(s, [A, C], target=target)


def _threads_per_row_module():
    # one block per call, n threads: the block size comes from the arguments
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    return te.build(s, [A, C], target="cuda")


def test_arguments_are_checked_before_anything_runs():
    em = _module().emulator()
    with pytest.raises(te.ArgumentError, match=r"expected 2 arguments \(A, C\), got 1"):
        em(np.ones(4, "float32"))
    with pytest.raises(te.ArgumentError, match=r"argument 'C' shape\[0\]: expected 4 \(n, "
                                               r"bound from argument 'A' shape\[0\]\), got 5"):
        em(np.ones(4, "float32"), np.ones(5, "float32"))
    with pytest.raises(te.ArgumentError, match=r"argument 'A': expected dtype float32, got "
                                               r"float64"):
        em(np.ones(4), np.ones(4, "float32"))


def test_outputs_are_written_back_and_inputs_left_alone():
    em = _module().emulator()
    a = rand_array((130,))
    a_before = a.copy()
    c = te.nd.array(np.full(130, np.nan, "float32"))     # an NDArray works as well
    em(a, c)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_allclose(c.numpy(), a * 3 + 1, rtol=1e-6)


def test_a_block_larger_than_cuda_allows_is_refused_at_the_call():
    em = _threads_per_row_module().emulator()
    a = rand_array((1000,))
    c = np.zeros(1000, "float32")
    em(a, c)
    np.testing.assert_allclose(c, a + 1)
    with pytest.raises(RuntimeError, match=r"kernel 'main' \(main_kernel0\): 1025 threads per "
                                           r"block \(block \(1025, 1, 1\)\); CUDA allows at "
                                           r"most 1024"):
        em(rand_array((1025,)), np.zeros(1025, "float32"))


def test_each_block_axis_is_held_to_its_own_limit():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.z"))     # CUDA allows 64 along z
    em = te.build(s, [A, C], target="cuda").emulator()
    with pytest.raises(RuntimeError, match=r"kernel 'main' \(main_kernel0\): block \(1, 1, "
                                           r"100\) exceeds CUDA's limits \(1024, 1024, 64\)"):
        em(rand_array((100,)), np.zeros(100, "float32"))


def test_time_evaluator_times_the_kernels_and_checks_its_parameters():
    em = _module().emulator()
    a, c = rand_array((300,)), np.zeros(300, "float32")
    with pytest.warns(rt_cuda.EmulatedTimingWarning, match="CPU emulation times"):
        evaluator = em.time_evaluator(number=2, repeat=3)
    result = evaluator(a, c)
    assert len(result.results) == 3 and 0 < result.min <= result.median <= result.max
    assert result.emulated   # CPU emulation time, and the result says so
    with pytest.raises(ValueError, match=r"^repeat: expected an integer >= 1, got 0$"):
        em.time_evaluator(repeat=0)
    with pytest.raises(ValueError, match=r"^func_name: expected 'main' \(or None\), got 'x'$"):
        em.time_evaluator("x")


def test_get_source_formats():
    mod = _module()
    assert mod.get_source("cu") == mod.get_source("cuda") == mod.get_source()
    assert "__global__" in mod.get_source()
    with pytest.raises(ValueError, match=r"^fmt: expected 'cuda', 'cu' or 'ptx', got 'll'$"):
        mod.get_source("ll")
    assert repr(mod) == "CudaModule(main(A: float32['n'], C: float32['n']), 1 kernel(s))"


def test_without_nvcc_the_module_keeps_its_source_and_says_why_it_cannot_run(monkeypatch):
    monkeypatch.setattr(rt_cuda, "find_nvcc", lambda: None)
    mod = _module()
    assert mod.ptx is None
    why = r"nvcc was not on PATH when it was built \(install the CUDA toolkit\)"
    with pytest.raises(ValueError, match=r"^module 'main' has no PTX: " + why):
        mod.get_source("ptx")
    with pytest.raises(RuntimeError, match=r"^module 'main' cannot run on a GPU: " + why):
        mod(rand_array((8,)), np.zeros(8, "float32"))
    a, c = rand_array((8,)), np.zeros(8, "float32")
    mod.emulator()(a, c)                       # the CPU check still works
    np.testing.assert_allclose(c, a * 3 + 1, rtol=1e-6)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
def test_nvcc_errors_become_build_errors():
    with pytest.raises(runtime.RuntimeBuildError, match=r"^nvcc failed \(exit code 1\)"):
        rt_cuda.compile_ptx("this is not CUDA C")
    with pytest.raises(te.BuildError, match=r"^te.build: target 'cuda': nvcc failed"):
        _module(target="cuda -arch=sm_10")


def _gpu_available() -> bool:
    """A GPU that pycuda or cuda-python opens."""
    return runtime.devices.cuda(0).exist


def test_without_a_driver_package_or_a_gpu_a_call_says_what_is_missing():
    if _gpu_available():
        pytest.skip("a GPU and a driver package are here: the GPU test runs instead")
    mod = _module()
    if mod.ptx is None:
        pytest.skip("nvcc is not on PATH: the module cannot reach the driver")
    with pytest.raises(RuntimeError, match=r"needs cuda-python \(or pycuda\), and neither is "
                                           r"installed: pip install 'te-compiler\[cuda\]'|no "
                                           r"CUDA device could be opened"):
        mod(rand_array((8,)), np.zeros(8, "float32"))


@pytest.mark.skipif(not _gpu_available(), reason="needs a CUDA GPU and cuda-python or pycuda")
def test_on_a_gpu_the_module_matches_numpy_and_the_emulator():
    mod = _module()
    for size in (1, 1000, 4097):
        a = rand_array((size,))
        on_gpu, emulated = np.zeros(size, "float32"), np.zeros(size, "float32")
        mod(a, on_gpu)
        mod.emulator()(a, emulated)
        np.testing.assert_allclose(on_gpu, a * 3 + 1, rtol=1e-6)
        np.testing.assert_allclose(on_gpu, emulated, rtol=1e-6)
    assert mod.time_evaluator(number=5, repeat=2)(a, on_gpu).median > 0


def test_pickling_says_to_build_again_where_the_module_is_needed():
    message = (r"^cannot pickle CUDA module 'main': it holds a launch plan and a module loaded "
               r"in this process; build it again with te.build\(\.\.\., target='cuda'\) where "
               r"it is needed, or pass its source \(get_source\(\)\)$")
    for module in (_module(), _module().emulator()):
        with pytest.raises(TypeError, match=message):
            pickle.dumps(module)
