"""Native memory of compiled modules: a tuner builds thousands, so what one module holds must
go when the module goes. RSS from /proc/self/statm (tracemalloc does not see LLVM's heap).
Imports runtime, numpy, pytest and the test kernels."""

import gc
import os

import numpy as np
import pytest
from rt_kernels import ADD_LL, ADD_SIGNATURE

import runtime

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="needs /proc/self/statm to read the resident set size")

COMPILES = 120
# Each compile kept its whole optimization pipeline (llvmlite never freed the module pass
# manager): tens of KiB. What is left (MCJIT bookkeeping, allocator slack) is far below this.
BOUND_PER_COMPILE = 16 * 1024


def _resident_bytes() -> int:
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _compile_call_and_drop() -> None:
    module = runtime.Module(runtime.compile_llvm(ADD_LL), ADD_SIGNATURE)
    a = np.arange(5, dtype=np.float32)
    c = np.zeros(5, np.float32)
    module(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_dropped_modules_give_their_native_memory_back():
    for _ in range(30):  # warm up caches and the allocator's arenas
        _compile_call_and_drop()
    before = _resident_bytes()
    for _ in range(COMPILES):
        _compile_call_and_drop()
    growth = _resident_bytes() - before
    assert growth < COMPILES * BOUND_PER_COMPILE, (
        f"{COMPILES} compiled and dropped modules grew the resident set by "
        f"{growth / 1024:.0f} KiB ({growth / COMPILES / 1024:.1f} KiB each)")
