"""time_function and Module.time_evaluator: structure of the results, never their values."""

import numpy as np
import pytest

import runtime
from runtime import TimeResult, time_function


def test_time_function_counts_calls_and_fills_the_result():
    calls = []
    result = time_function(lambda: calls.append(1), number=5, repeat=4)
    assert len(calls) == 1 + 5 * 4  # one warm-up call
    assert isinstance(result, TimeResult)
    assert len(result.results) == 4
    assert result.min <= result.median <= result.max
    assert result.min <= result.mean <= result.max
    assert result.std >= 0
    assert "median=" in repr(result) and "repeats=4" in repr(result)


def test_min_repeat_ms_grows_number():
    calls = []
    time_function(lambda: calls.append(1), number=1, repeat=1, min_repeat_ms=2)
    assert len(calls) > 2


@pytest.mark.parametrize(
    "kwargs, message",
    [({"number": 0}, "number: expected an integer >= 1, got 0"),
     ({"repeat": 0}, "repeat: expected an integer >= 1, got 0"),
     ({"min_repeat_ms": -1}, "min_repeat_ms: expected a value >= 0, got -1")],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        time_function(lambda: None, **kwargs)


def test_time_evaluator_returns_a_time_result(add_module):
    a = np.ones(257, np.float32)
    c = np.zeros_like(a)
    evaluator = add_module.time_evaluator(number=3, repeat=2)
    result = evaluator(a, a, c)
    assert isinstance(result, TimeResult) and len(result.results) == 2
    assert all(seconds > 0 for seconds in result.results)
    np.testing.assert_array_equal(c, 2 * a)  # the timed calls really ran the kernel


def test_time_evaluator_checks_arguments_and_name(add_module):
    with pytest.raises(runtime.ArgumentError, match=r"expected 3 arguments"):
        add_module.time_evaluator()(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"func_name: expected 'add' \(or None\), got 'main'"):
        add_module.time_evaluator("main")
    assert isinstance(add_module.time_evaluator("add", dev=None, number=1, repeat=1)(
        *(np.zeros(1, np.float32) for _ in range(3))), TimeResult)
