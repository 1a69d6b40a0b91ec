"""Parallel loops hand out their iterations in chunks: each thread claims the chunks of its
own contiguous share (slot) from that slot's counter, then those left in the other slots.
Every iteration runs once, for any extent and thread count, including extents smaller
than the thread count, threads that share slots and the single shared counter of
PER_THREAD_SLOTS=False (a loop that does not start at 0: tests/codegen/llvm/
test_codegen_llvm_vector.py).

Imports te, runtime, numpy and pytest.
"""
import re
import subprocess
import sys

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
    # one claim per chunk: an atomic add on a slot's 64-bit counter in the closure, so
    # claims past the end of an int32 loop cannot wrap around
    assert re.search(r"atomicrmw add ptr %\S+, i64 %\S+ monotonic", ll), ll
    assert codegen_llvm_parallel.CHUNKS_PER_THREAD >= 2
    # each thread finds its own slot from its number; the caller zeroes the counters of
    # as many slots as the team may have threads, each on a cache line of its own
    assert "omp_get_thread_num" in ll and "omp_get_max_threads" in ll
    assert re.search(r"alloca .*align 64", ll), ll
    assert re.search(r"call void @llvm\.memset", ll), ll


def test_the_loop_body_is_a_function_of_its_own():
    """The body is called per chunk, not inlined into the claiming loops: inlined, its
    registers were allocated with theirs, and a GEMM tile loop spilled vector registers
    (parallel.INLINE_BODY)."""
    assert codegen_llvm_parallel.INLINE_BODY is False
    mod, _, _ = _rows_kernel(1009)
    ll = mod.get_source("ll")
    body = re.search(r"define internal (?:fastcc )?void @(\S+_body)\(.*\) (?:unnamed_addr )?"
                     r"#(\d+)", ll)
    assert body, ll
    assert re.search(rf"call (?:fastcc )?void @{re.escape(body.group(1))}\(", ll), ll
    attrs = re.search(rf"attributes #{body.group(2)} = {{([^}}]*)}}", ll).group(1)
    assert "noinline" in attrs and "alwaysinline" not in attrs


STACK_SCRIPT = """
import threading, numpy as np, te
X = te.placeholder((64,), name="X")
stages, cur = [], X
for k in range(40):
    cur = (lambda p: te.compute((64,), lambda i: p[i] + 1.0, name=f"S{k}"))(cur)
    stages.append(cur)
s = te.create_schedule(cur.op)
for st in stages:
    s[st].parallel(st.op.axis[0])
mod = te.build(s, [X, cur])
threading.stack_size(64 * 1024)
out = {}
def run():
    y = np.zeros(64, "float32")
    mod(np.zeros(64, "float32"), y)
    out["y"] = y
t = threading.Thread(target=run)
t.start()
t.join()
assert (out["y"] == 40).all(), out
print("ok")
"""


@needs_libgomp
def test_many_parallel_stages_run_on_a_small_thread_stack():
    """Each task's closure holds 4 KiB of counters; it lives only around its task, so the
    tasks of one function share one stack slot. One slot per task made 40 parallel stages
    take 175 KiB of stack, and a thread with a 64 KiB stack crashed (review)."""
    proc = subprocess.run([sys.executable, "-c", STACK_SCRIPT], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def _uneven_kernel(rows, cols=64):
    """Y[i] = sum of X[i, :(i % 7 + 1) * cols / 8]: later rows are no costlier than early
    ones on average, but chunks differ, so threads finish their slots at different times
    and claim from each other's."""
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    Y = te.compute((rows,), lambda i: te.sum(
        te.if_then_else(k * 8 < (i % 7 + 1) * cols, X[i, k], 0.0), axis=k), name="Y")
    s = te.create_schedule(Y.op)
    s[Y].parallel(Y.op.axis[0])
    return te.build(s, [X, Y])


def _uneven_reference(x):
    rows, cols = x.shape
    lengths = ((np.arange(rows) % 7 + 1) * cols + 7) // 8
    return np.array([x[i, :lengths[i]].sum() for i in range(rows)], "float32")


@needs_libgomp
@pytest.mark.parametrize("threads, max_slots, per_thread", [
    (2, 64, True), (3, 64, True), (4, 64, True),   # more threads than these 2 cores
    (3, 2, True),                                   # threads 0 and 2 share slot 0
    (5, 1, True),                                   # one slot: every thread shares it
    (2, 64, False), (3, 64, False)])                # one counter (the scheme before)
@pytest.mark.parametrize("rows", [1, 2, 5, 33, 1000])
def test_every_iteration_runs_once_when_threads_claim_from_other_slots(
        rows, threads, max_slots, per_thread, restore_threads, monkeypatch):
    monkeypatch.setattr(codegen_llvm_parallel, "MAX_SLOTS", max_slots)
    monkeypatch.setattr(codegen_llvm_parallel, "PER_THREAD_SLOTS", per_thread)
    mod = _uneven_kernel(rows)
    runtime.set_num_threads(threads)
    x = np.random.default_rng(rows).uniform(0.5, 1.5, (rows, 64)).astype("float32")
    want = _uneven_reference(x)
    for _ in range(20):   # the claims race differently each run
        y = np.full(rows, np.nan, "float32")
        mod(x, y)
        np.testing.assert_allclose(y, want, rtol=1e-5)


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
