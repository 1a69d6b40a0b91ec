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


@pytest.mark.parametrize("environ, expected", [
    ({}, {"GOMP_SPINCOUNT": str(threadpool.IDLE_SPIN_COUNT)}),
    ({"OMP_WAIT_POLICY": "passive"}, {"GOMP_SPINCOUNT": str(threadpool.IDLE_SPIN_COUNT)}),
    ({"OMP_WAIT_POLICY": " Active "}, {}),          # the user asked for spinning pools
    ({"GOMP_SPINCOUNT": "0"}, {}),                  # the user's spin count wins
    ({"GOMP_SPINCOUNT": "infinite", "OMP_WAIT_POLICY": "passive"}, {}),
])
def test_spin_env_respects_the_users_choice(environ, expected):
    assert threadpool.spin_env(environ) == expected


@needs_libgomp
@pytest.mark.parametrize("preset", [None, "250"])
def test_loading_the_pool_leaves_the_environment_as_it_was(preset):
    # A fresh process: libgomp reads GOMP_SPINCOUNT once, when it loads; children must still
    # see the user's environment (no GOMP_SPINCOUNT appears, a preset one is kept).
    env = {key: value for key, value in os.environ.items() if key != "GOMP_SPINCOUNT"}
    if preset is not None:
        env["GOMP_SPINCOUNT"] = preset
    env["PYTHONPATH"] = str(REPO_ROOT)
    code = ("import os, runtime; from runtime import threadpool; "
            "assert threadpool.parallel_available(); print(os.environ.get('GOMP_SPINCOUNT'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(preset)
