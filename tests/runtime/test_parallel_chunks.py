"""Parallel loops hand out their iterations in chunks that threads claim from a shared
counter: every iteration runs, for any extent and thread count, including extents smaller
than the thread count (a loop that does not start at 0: tests/codegen/llvm/
test_codegen_llvm_vector.py).

Imports te, runtime, numpy and pytest.
"""
import re

import numpy as np
import pytest

import runtime
import te
from runtime import threadpool
from te.codegen.llvm import parallel as codegen_llvm_parallel

needs_libgomp = pytest.mark.skipif(not threadpool.parallel_available(),
                                   reason="libgomp is not installed")


@pytest.fixture
def restore_threads():
    before = runtime.num_threads()
    yield
    runtime.set_num_threads(before)


def _rows_kernel(rows, cols=5):
    X = te.placeholder((rows, cols), name="X")
    Y = te.compute((rows, cols), lambda i, j: X[i, j] * 2.0 + i, name="Y")
    s = te.create_schedule(Y.op)
    s[Y].parallel(Y.op.axis[0])
    return te.build(s, [X, Y]), X, Y


@needs_libgomp
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows", [1, 2, 3, 17, 33, 1009])
def test_every_iteration_runs_once_whatever_the_extent(rows, threads, restore_threads):
    mod, _, _ = _rows_kernel(rows)
    runtime.set_num_threads(threads)
    x = np.random.default_rng(rows).uniform(0.5, 1.5, (rows, 5)).astype("float32")
    y = np.full((rows, 5), np.nan, "float32")
    mod(x, y)
    np.testing.assert_array_equal(y, x * 2.0 + np.arange(rows, dtype="float32")[:, None])


def test_threads_claim_chunks_from_a_64_bit_counter():
    mod, _, _ = _rows_kernel(1009)
    ll = mod.get_source("ll")
    assert len(re.findall(r"call void @GOMP_parallel", ll)) == 1
    # one claim per chunk: an atomic add on the 64-bit counter in the closure, so claims
    # past the end of an int32 loop cannot wrap around
    assert re.search(r"atomicrmw add ptr %\S+, i64 %\S+ monotonic", ll), ll
    assert codegen_llvm_parallel.CHUNKS_PER_THREAD >= 2


def test_no_chunk_is_claimed_after_a_body_fails():
    """A body that allocates a heap buffer (here a symbolic-size row) may fail: after each
    chunk the thread reads the status, and stops claiming once a failure is recorded.
    A body that cannot fail claims without that check."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    T = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="T")
    B = te.compute((n, m), lambda i, j: T[i, m - 1 - j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[T].compute_at(s[B], B.op.axis[0])
    s[B].parallel(B.op.axis[0])
    mod = te.build(s, [A, B])
    claim = mod.get_source("ll").split("\nclaimed")[1].split("\nall_claimed")[0]
    assert re.search(r"load atomic i32, ptr %\S+ monotonic", claim), claim
    a = np.random.default_rng(0).uniform(0.5, 1.5, (37, 9)).astype("float32")
    b = np.full_like(a, np.nan)
    mod(a, b)
    np.testing.assert_allclose(b, (a[:, ::-1] + 1.0) * 2.0, rtol=1e-6)
    plain, _, _ = _rows_kernel(1009)
    assert "load atomic" not in plain.get_source("ll")
