"""TuneOptions: every option of a tuning run in one frozen dataclass, checked when made.

te.autotune builds it from its keywords (options_from_keywords), `python -m te tune` from
its command line; tune() takes it as it is. Each check names the option, what it must be
and what came. Imports measure (MeasureOptions) and search (the tuners' names).
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, fields, replace

from ..errors import ArgumentError, BuildError
from ..target import parse_target
from .measure import MeasureOptions
from .search import TUNERS


@dataclass(frozen=True)
class TuneOptions:
    """How te.autotune searches: `trials` configs measured at most (those already in `log`
    for this workload, target and version count and are not measured again), on `target`
    ("llvm": this CPU; "cuda": the GPU, or the CUDA emulator where none is present, for a
    template that binds GPU threads), appending each measurement to `log` (a JSON-lines
    file, resumed from) when given; proposed by `tuner` (xgb, optuna, ga, random or grid,
    seeded by `seed`) in batches of `batch_size`; stopping after `timeout` seconds or
    `early_stopping` trials without a better config; measured as `measure_option` says
    (MeasureOptions() when None); a progress line on stderr unless `verbose` is 0."""
    trials: int = 500
    target: str = "llvm"
    log: str | os.PathLike | None = None
    tuner: str = "xgb"
    timeout: float | None = None
    seed: int | None = None
    early_stopping: int | None = None
    verbose: int = 1
    measure_option: MeasureOptions | None = None
    batch_size: int = 16

    def __post_init__(self):
        for name, (ok, expected) in _CHECKS.items():
            value = getattr(self, name)
            if not ok(value):
                raise ArgumentError(f"te.autotune: {name} must be {expected}, got {value!r}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _positive_seconds(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) \
        and x > 0


def _measurable_here(target) -> bool:
    # Workers compile for this host; other CPUs (-mcpu/-mattr) cannot be measured here.
    # A 'cuda' target (with its -arch) runs on the GPU or in the CUDA emulator.
    try:
        parsed = parse_target(target)
    except BuildError:
        return False
    return isinstance(target, str) and (parsed.kind == "cuda" or
                                        (parsed.kind == "llvm" and not parsed.options))


def _log_path(log) -> bool:
    return log is None or (isinstance(log, (str, os.PathLike)) and os.fspath(log) != "")


# option -> (check, what it must be), in the order of the fields
_CHECKS = {
    "trials": (lambda v: _is_int(v) and v >= 1, "a positive int"),
    "target": (_measurable_here, "'llvm' (this CPU) or 'cuda'"),
    "log": (_log_path, "a file path (str or os.PathLike) or None"),
    "tuner": (lambda v: isinstance(v, str) and v in TUNERS, f"one of {', '.join(TUNERS)}"),
    "timeout": (lambda v: v is None or _positive_seconds(v),
                "a positive number of seconds or None"),
    "seed": (lambda v: v is None or _is_int(v), "an int or None"),
    "early_stopping": (lambda v: v is None or (_is_int(v) and v >= 1),
                       "a positive int or None"),
    "verbose": (lambda v: isinstance(v, int) and v >= 0, "an int >= 0 or a bool (0: quiet)"),
    "measure_option": (lambda v: v is None or isinstance(v, MeasureOptions),
                       "a te.autotune.MeasureOptions or None"),
    "batch_size": (lambda v: _is_int(v) and v >= 1, "a positive int"),
}


def options_from_keywords(options: TuneOptions | None, keywords: dict) -> TuneOptions:
    """te.autotune's options: `options` (TuneOptions() when None) with `keywords` in place
    of its fields; an unknown keyword is refused with the known ones."""
    if options is None:
        options = TuneOptions()
    elif not isinstance(options, TuneOptions):
        raise ArgumentError(f"te.autotune: options must be a te.autotune.TuneOptions (or give "
                            f"trials=... and the other options as keywords), got {options!r}")
    names = [f.name for f in fields(TuneOptions)]
    for key in keywords:
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ArgumentError(f"te.autotune: unknown option {key!r}; {hint}the options are "
                                f"{', '.join(names)}")
    return replace(options, **keywords) if keywords else options
