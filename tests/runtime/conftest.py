"""Fixtures for the runtime tests: compiled Modules of the kernels in rt_kernels.py.

Sets OMP_WAIT_POLICY before libgomp loads, so that idle pool threads sleep instead of spinning
against the other tests. Imports runtime and the test kernels.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import pytest  # noqa: E402
from rt_kernels import (  # noqa: E402
    ADD_LL, ADD_SIGNATURE, PARALLEL_LL, PARALLEL_SIGNATURE, SCALE2D_LL, SCALE2D_SIGNATURE,
)

import runtime  # noqa: E402


@pytest.fixture(scope="session")
def add_module() -> runtime.Module:
    return runtime.Module(runtime.compile_llvm(ADD_LL), ADD_SIGNATURE)


@pytest.fixture(scope="session")
def scale2d_module() -> runtime.Module:
    return runtime.Module(runtime.compile_llvm(SCALE2D_LL), SCALE2D_SIGNATURE)


@pytest.fixture(scope="session")
def parallel_module() -> runtime.Module:
    return runtime.Module(runtime.compile_llvm(PARALLEL_LL), PARALLEL_SIGNATURE)
