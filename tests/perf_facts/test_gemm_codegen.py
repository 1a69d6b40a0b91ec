"""Deterministic facts of the code generated for the benchmark GEMM schedules (never
timings): vector FMAs, accumulators promoted to registers, one GOMP launch per parallel
loop, noalias buffer parameters. Holds on AVX2 (ymm) and AVX-512 (zmm) hosts alike."""
import os
import re
import sys

import numpy as np
import pytest

import te

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import gemm_chain  # noqa: E402

FMA = re.compile(r"vfmadd\d+ps\s+[^\n]*%[yz]mm")


@pytest.fixture(scope="module")
def best():
    s, args = gemm_chain.best_matmul(64, 96, 40)
    return te.build(s, args)


def test_best_matmul_is_correct_on_odd_shapes():
    rng = np.random.default_rng(1)
    for m, n, k in ((13, 37, 9), (64, 96, 40)):
        s, args = gemm_chain.best_matmul(m, n, k)
        mod = te.build(s, args)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_micro_kernel_uses_vector_fma(best):
    assert len(FMA.findall(best.get_source("asm"))) >= 8


def test_accumulators_live_in_registers(best):
    # The MR x NR local accumulator tile is promoted (SROA): no stack slot of its size is
    # left in the optimized IR (packed B and the GOMP closures may stay on the stack).
    mr, nr = gemm_chain.micro_kernel_shape()
    ll = best.get_source("ll")
    assert f"alloca [{mr * nr} x float]" not in ll


def test_one_launch_per_parallel_loop(best):
    ll = best.get_source("ll")
    # packing of B and the GEMM proper: two parallel loops, two launches, none in a loop.
    assert len(re.findall(r"call void @GOMP_parallel", ll)) == 2


def test_buffer_params_are_noalias(best):
    ll = best.get_source("ll")
    header = next(line for line in ll.splitlines()
                  if line.startswith("define") and "@main(" in line)
    assert header.count("noalias") == 3


def test_chain_steps_match_numpy():
    rng = np.random.default_rng(2)
    n = 64
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    for name, fn in gemm_chain.CHAIN:
        s, args = fn(n, n, n)
        c = np.empty((n, n), np.float32)
        te.build(s, args)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4, err_msg=name)
