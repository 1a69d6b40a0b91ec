"""The CUDA emulator's fibers: a kernel with __syncthreads() runs a block's threads as
fibers that switch at each barrier, in turn, every other block in reverse order; each test
runs with the x86-64 stack switch (where the host is one) and with the ucontext fallback
other hosts use. Hand-written CUDA C: a shared exchange across a barrier, a missing barrier
(its read-before-write shows as NaN in one of the two orders), barriers that only some
threads pass (an error), the per-thread arrays te allows (512 KiB each, on the fibers'
stacks), and a block of 1024 threads through 300 barriers."""
from __future__ import annotations

import numpy as np
import pytest

from runtime import cuda_emulator
from runtime.cuda import CudaKernel, CudaModule
from runtime.signature import ArgSpec, KernelSignature


@pytest.fixture(autouse=True, params=["stack switch", "ucontext"])
def fiber_switch(request, monkeypatch):
    if request.param == "ucontext":
        fibers = cuda_emulator.FIBERS
        fallback = (fibers.replace("#if !defined(__x86_64__)", "#if 1")
                    .replace("#if defined(__x86_64__)", "#if 0"))
        assert fallback != fibers
        monkeypatch.setattr(cuda_emulator, "FIBERS", fallback)
    return request.param


def _module(body: str, n: int, grid: int, block: int) -> CudaModule:
    """One kernel k(const float* A, float* B) over `n` floats, launched grid x block."""
    source = ('extern "C" __global__ void k(const float* __restrict__ A, '
              'float* __restrict__ B) {\n' + body + "\n}\n")
    sig = KernelSignature("k", (ArgSpec("A", "float32", (n,)),
                                ArgSpec("B", "float32", (n,), output=True)))
    kernel = CudaKernel("k", (("buffer", 0), ("buffer", 1)), uses_barriers=True)
    mod = CudaModule(sig, source, (kernel,), (),
                     lambda sizes: ([], [((grid, 1, 1), (block, 1, 1))]))
    return mod.emulator()


def _run(mod, a):
    b = np.full_like(a, np.nan)
    mod(a, b)
    return b


EXCHANGE = """
  __shared__ float S[32];
  int t = threadIdx.x, base = blockIdx.x * 32;
  S[t] = A[base + t] * 2.0f;
  __syncthreads();
  B[base + t] = S[31 - t];
"""


def test_threads_exchange_through_shared_memory_across_a_barrier():
    a = np.random.default_rng(0).uniform(-1, 1, 96).astype("float32")
    b = _run(_module(EXCHANGE, 96, 3, 32), a)
    np.testing.assert_array_equal(b, (a * 2).reshape(3, 32)[:, ::-1].reshape(-1))


def test_a_missing_barrier_shows_as_nan_in_one_of_the_orders():
    a = np.random.default_rng(1).uniform(-1, 1, 64).astype("float32")
    b = _run(_module(EXCHANGE.replace("__syncthreads();", ""), 64, 2, 32), a)
    # block 0 runs threads 0..31 in turn: thread t reads S[31 - t] before thread 31 - t
    # wrote it for t < 16; block 1 runs them in reverse, so t >= 16 reads too early
    assert np.isnan(b[:16]).all() and np.isnan(b[48:]).all()
    np.testing.assert_array_equal(b[16:32], 2 * a[15::-1])     # thread t: S[31 - t]
    np.testing.assert_array_equal(b[32:48], 2 * a[63:47:-1])


def test_barriers_that_only_some_threads_pass_are_an_error():
    body = EXCHANGE.replace("__syncthreads();",
                            "__syncthreads();\n  if (t == 3) __syncthreads();")
    with pytest.raises(RuntimeError, match=r"^the CUDA emulator ran kernel 'k': the threads of "
                       r"a block passed different numbers of __syncthreads\(\) barriers"):
        _run(_module(body, 32, 1, 32), np.ones(32, "float32"))


def test_each_thread_may_have_512_kib_of_local_arrays():
    body = """
  __shared__ float S[4];
  float local[131072];
  int t = threadIdx.x;
  for (int i = 0; i < 131072; ++i) local[i] = A[t] + (float)(i % 7);
  S[t] = local[131071] + local[5];
  __syncthreads();
  B[t] = S[3 - t];
"""
    a = np.arange(4, dtype="float32")
    b = _run(_module(body, 4, 1, 4), a)
    np.testing.assert_array_equal(b, (2 * a + 5.0 + (131071 % 7))[::-1])


def test_a_block_of_1024_threads_through_300_barriers():
    body = """
  __shared__ float S[1024];
  int t = threadIdx.x;
  float acc = A[t];
  for (int r = 0; r < 150; ++r) {
    S[t] = acc;
    __syncthreads();
    acc = S[(t + 1) % 1024] + 1.0f;
    __syncthreads();
  }
  B[t] = acc;
"""
    a = np.random.default_rng(2).integers(0, 100, 1024).astype("float32")
    b = _run(_module(body, 1024, 1, 1024), a)
    np.testing.assert_array_equal(b, np.roll(a, -150) + 150)
