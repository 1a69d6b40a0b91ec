"""The libgomp pool: thread count control and a parallel kernel with an outlined body."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import threadpool

REPO_ROOT = Path(__file__).resolve().parents[2]

needs_libgomp = pytest.mark.skipif(
    not threadpool.parallel_available(), reason="libgomp is not installed"
)


@pytest.fixture
def restore_threads():
    before = runtime.num_threads()
    yield
    runtime.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "2"])
def test_set_num_threads_rejects_non_positive_ints(bad):
    with pytest.raises(ValueError, match=r"set_num_threads: n: expected an integer >= 1, got"):
        runtime.set_num_threads(bad)


@needs_libgomp
def test_default_is_every_usable_core():
    # A fresh process, because other tests in this session may have changed the count.
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", "import runtime; print(runtime.num_threads())"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(os.sched_getaffinity(0))


@needs_libgomp
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_kernel_splits_work_by_thread(parallel_module, restore_threads, threads):
    runtime.set_num_threads(threads)
    assert runtime.num_threads() == threads
    n = 1009
    out = np.full(n, -1, np.int32)
    owner = np.full(n, -1, np.int32)
    team = np.zeros(1, np.int32)
    parallel_module(out, owner, team)
    np.testing.assert_array_equal(out, np.arange(n))
    # libgomp may hand out fewer threads than asked (dynamic adjustment), never more.
    assert 1 <= team[0] <= threads
    np.testing.assert_array_equal(owner, np.arange(n) % team[0])


@needs_libgomp
def test_parallel_kernel_with_fewer_items_than_threads(parallel_module, restore_threads):
    runtime.set_num_threads(4)
    out, owner, team = np.full(2, -1, np.int32), np.full(2, -1, np.int32), np.zeros(1, np.int32)
    parallel_module(out, owner, team)
    np.testing.assert_array_equal(out, [0, 1])
