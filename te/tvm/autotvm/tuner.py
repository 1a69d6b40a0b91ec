"""tvm.autotvm.tuner: XGBTuner, GATuner, RandomTuner, GridSearchTuner over te.autotune.

`Tuner(task).tune(n_trial=, measure_option=, early_stopping=, callbacks=[...])` runs our
tuning loop (te.autotune.tune) on the task's template: XGBTuner is our xgb tuner (an
xgboost ranking model over program and knob features), GATuner optuna's NSGA-II genetic
sampler, RandomTuner and GridSearchTuner ours. TVM's tuning keywords (plan_size,
loss_type, pop_size, ...) are accepted and have no effect; an unknown one is refused.
After tune: `best_config`, `best_flops` and `result` (our TuneResult). Imports
te.autotune.
"""
from __future__ import annotations

from ...autotune.measure import MeasureOptions
from ...autotune.options import TuneOptions
from ...errors import ArgumentError
from .callback import log_to_file, progress_bar
from .task import Task

_TVM_KEYWORDS = {"plan_size", "feature_type", "loss_type", "num_threads", "optimizer",
                 "diversity_filter_ratio", "log_interval", "pop_size", "elite_num",
                 "mutation_prob", "range_idx"}


class Tuner:
    """Base: tunes `task` (an autotvm Task) with our tuner named `tuner_name`."""
    tuner_name = "random"

    def __init__(self, task, **kwargs):
        if not isinstance(task, Task):
            raise ArgumentError(f"autotvm.tuner.{type(self).__name__}: task must be an "
                                f"autotvm.task.create(...) Task, got {task!r}")
        unknown = set(kwargs) - _TVM_KEYWORDS
        if unknown:
            raise ArgumentError(f"autotvm.tuner.{type(self).__name__}: unknown keyword(s) "
                                f"{sorted(unknown)}")
        self.task = task
        self.seed = None
        self.result = None

    def tune(self, n_trial: int, measure_option=None, early_stopping=None, callbacks=(),
             si_prefix: str = "G"):
        """Measure up to `n_trial` configs (those already in the log_to_file log for this
        task count and are not measured again)."""
        log, verbose = None, 0
        for cb in callbacks or ():
            if isinstance(cb, log_to_file):
                if log is not None and log != cb.path:
                    raise ArgumentError("tune: give at most one autotvm.callback.log_to_file")
                log = cb.path
            elif isinstance(cb, progress_bar):
                verbose = 1
            else:
                raise ArgumentError(f"tune: callbacks may be autotvm.callback.log_to_file "
                                    f"and progress_bar; other callbacks are not supported, "
                                    f"got {cb!r}")
        if measure_option is not None and not isinstance(measure_option, MeasureOptions):
            raise ArgumentError(f"tune: measure_option must come from "
                                f"autotvm.measure_option(...), got {measure_option!r}")
        options = TuneOptions(trials=n_trial, target=self.task.target, log=log,
                              tuner=self.tuner_name, seed=self.seed,
                              early_stopping=early_stopping, verbose=verbose,
                              measure_option=measure_option)
        from ...autotune.tune import tune as run_tuning   # optuna/xgboost: when tuning
        self.result = run_tuning(self.task.inner, options)
        return None

    @property
    def best_config(self):
        return None if self.result is None else self.result.best_config

    @property
    def best_flops(self) -> float:
        return 0.0 if self.result is None else self.result.best_gflops * 1e9


class XGBTuner(Tuner):
    tuner_name = "xgb"


class GATuner(Tuner):
    tuner_name = "ga"


class RandomTuner(Tuner):
    tuner_name = "random"


class GridSearchTuner(Tuner):
    tuner_name = "grid"


__all__ = ["GATuner", "GridSearchTuner", "RandomTuner", "Tuner", "XGBTuner"]
