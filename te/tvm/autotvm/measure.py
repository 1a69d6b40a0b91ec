"""tvm.autotvm measure options: LocalBuilder, LocalRunner and measure_option over ours.

measure_option(builder=..., runner=LocalRunner(number=, repeat=, min_repeat_ms=, timeout=))
gives the te.autotune.MeasureOptions the tuners use: each config is compiled here and
timed in a worker process (number runs per measurement, repeat measurements; timeout the
worker's limit, the builder's timeout added). A 'cuda' task's configs run on the GPU, or
where none is present once each in the CUDA emulator (their times rank CPU emulation).
Imports te.autotune.measure.
"""
from __future__ import annotations

from ...autotune.measure import MeasureOptions
from ...errors import ArgumentError


class LocalBuilder:
    """Compiles each config (here, before the worker runs it). n_parallel and build_func
    are accepted for TVM's signature; compilation is serial, by te.build's LLVM path."""

    def __init__(self, timeout: float = 10, n_parallel=None, build_func="default", **_):
        self.timeout = timeout


class LocalRunner:
    """Times each config in a worker process (on this CPU; a 'cuda' task's on the GPU, or
    in the CUDA emulator where none is present). cooldown_interval and
    enable_cpu_cache_flush are accepted for TVM's signature and have no effect."""

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3,
                 min_repeat_ms: float = 0, cooldown_interval: float = 0.1,
                 enable_cpu_cache_flush: bool = False, **_):
        self.timeout, self.number, self.repeat = timeout, number, repeat
        self.min_repeat_ms = min_repeat_ms


def measure_option(builder="local", runner="local") -> MeasureOptions:
    """AutoTVM's measure_option: builder "local" or a LocalBuilder, runner "local" or a
    LocalRunner; gives our MeasureOptions (which tuner.tune takes as measure_option)."""
    if builder == "local":
        builder = LocalBuilder()
    if runner == "local":
        runner = LocalRunner()
    if not isinstance(builder, LocalBuilder):
        raise ArgumentError(f"autotvm.measure_option: builder must be 'local' or an "
                            f"autotvm.LocalBuilder (RPC builders are not supported), got "
                            f"{builder!r}")
    if not isinstance(runner, LocalRunner):
        raise ArgumentError(f"autotvm.measure_option: runner must be 'local' or an "
                            f"autotvm.LocalRunner (RPC runners are not supported), got "
                            f"{runner!r}")
    return MeasureOptions(number=runner.number, repeat=runner.repeat,
                          min_repeat_ms=float(runner.min_repeat_ms),
                          timeout=float(runner.timeout) + float(builder.timeout))
