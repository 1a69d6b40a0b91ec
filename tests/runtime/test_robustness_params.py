"""Parameter validation of runtime entry points: thread counts, timing parameters (checked
before any kernel runs) and empty() shapes. Imports runtime, numpy and pytest."""

import math

import numpy as np
import pytest

import runtime
from runtime import threadpool


@pytest.mark.parametrize("n", [1025, 100000, 2**31 - 1, 2**64])
def test_set_num_threads_rejects_huge_counts(n):
    with pytest.raises(ValueError, match=rf"^set_num_threads: n: expected at most 1024 "
                                         rf"threads, got {n}$"):
        runtime.set_num_threads(n)


@pytest.mark.parametrize("bad", [True, 2.0, "4", None])
def test_set_num_threads_rejects_non_ints(bad):
    with pytest.raises(ValueError, match=r"^set_num_threads: n: expected an integer >= 1"):
        runtime.set_num_threads(bad)


def test_max_threads_is_accepted():
    if not threadpool.parallel_available():
        pytest.skip("libgomp is not installed")
    before = runtime.num_threads()
    try:
        runtime.set_num_threads(threadpool.MAX_THREADS)
        assert runtime.num_threads() == threadpool.MAX_THREADS
    finally:
        runtime.set_num_threads(before)


@pytest.mark.parametrize("kwargs, message", [
    ({"number": True}, "number: expected an integer >= 1, got True"),
    ({"number": 2.5}, "number: expected an integer >= 1, got 2.5"),
    ({"repeat": 0}, "repeat: expected an integer >= 1, got 0"),
    ({"repeat": "3"}, "repeat: expected an integer >= 1, got '3'"),
    ({"min_repeat_ms": math.nan}, "min_repeat_ms: expected a finite value >= 0, got nan"),
    ({"min_repeat_ms": math.inf}, "min_repeat_ms: expected a finite value >= 0, got inf"),
    ({"min_repeat_ms": "1"}, "min_repeat_ms: expected a finite value >= 0, got '1'"),
    ({"min_repeat_ms": -0.5}, "min_repeat_ms: expected a value >= 0, got -0.5"),
])
def test_time_evaluator_validates_before_running(add_module, kwargs, message):
    calls = []
    with pytest.raises(ValueError, match=f"^{message}$"):
        add_module.time_evaluator(**kwargs)
    with pytest.raises(ValueError, match=f"^{message}$"):
        runtime.time_function(lambda: calls.append(1), **kwargs)
    assert calls == []


@pytest.mark.parametrize("shape", [(2**40, 2**40), (2**62, 4), (2**63,)])
def test_empty_rejects_overflowing_shapes(shape):
    with pytest.raises(ValueError, match=r"^shape: expected a total size that fits in memory "
                                         r"addressing \(< 2\*\*63 bytes\), got "):
        runtime.empty(shape, "float32")


def test_empty_still_makes_small_arrays():
    assert np.asarray(runtime.empty((3, 4), "float64")).shape == (3, 4)
