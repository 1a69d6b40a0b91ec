"""Wall-clock timing of a zero-argument callable.

Takes a callable; gives time_function() and the TimeResult it returns (seconds per call for each
repeat plus summary statistics). Follows TVM's time_evaluator: one warm-up call, `repeat`
rounds of `number` calls each, `number` grown until a round lasts min_repeat_ms;
check_timing_parameters(). Imports stdlib.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class TimeResult:
    """Seconds per call, one entry per repeat, and their summary."""

    results: tuple[float, ...]
    mean: float
    median: float
    std: float
    min: float
    max: float
    # True for a CUDA module in the CPU emulator: CPU emulation times, not GPU times
    emulated: bool = False

    @classmethod
    def from_results(cls, results: tuple[float, ...]) -> TimeResult:
        std = statistics.pstdev(results) if len(results) > 1 else 0.0
        return cls(
            results=results, mean=statistics.fmean(results), median=statistics.median(results),
            std=std, min=min(results), max=max(results),
        )

    def __repr__(self) -> str:
        return (
            f"TimeResult(median={self.median * 1e6:.2f} us, mean={self.mean * 1e6:.2f} us, "
            f"std={self.std * 1e6:.2f} us, min={self.min * 1e6:.2f} us, "
            f"max={self.max * 1e6:.2f} us, repeats={len(self.results)}"
            + (", emulated: CPU emulation time, not GPU time)" if self.emulated else ")")
        )


def time_function(
    fn: Callable[[], object], number: int = 10, repeat: int = 3, min_repeat_ms: float = 0
) -> TimeResult:
    """Time `fn`: returns the per-call seconds of each of `repeat` rounds of `number` calls."""
    check_timing_parameters(number, repeat, min_repeat_ms)
    fn()  # warm-up: first-touch page faults and cold caches are not part of the answer
    results = []
    for _ in range(repeat):
        while True:
            elapsed = _time_round(fn, number)
            if elapsed * 1e3 >= min_repeat_ms:
                break
            # Like TVM: jump toward the target in one step (capped at 10x) so that tiny
            # kernels settle in a few rounds; number stays fixed for the later repeats.
            ratio = min_repeat_ms / (elapsed * 1e3) if elapsed > 0 else 10.0
            number = max(number + 1, int(number * min(10.0, max(1.618, ratio))))
        results.append(elapsed / number)
    return TimeResult.from_results(tuple(results))


def check_timing_parameters(number: int, repeat: int, min_repeat_ms: float) -> None:
    """ValueError naming the first bad parameter: counts are ints >= 1, the time finite >= 0."""
    for name, value in (("number", number), ("repeat", repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    if (isinstance(min_repeat_ms, bool) or not isinstance(min_repeat_ms, (int, float))
            or not math.isfinite(min_repeat_ms)):
        raise ValueError(f"min_repeat_ms: expected a finite value >= 0, got {min_repeat_ms!r}")
    if min_repeat_ms < 0:
        raise ValueError(f"min_repeat_ms: expected a value >= 0, got {min_repeat_ms!r}")


def _time_round(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - start
