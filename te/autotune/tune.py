"""The tuning loop behind te.autotune: the tuner, measurement batches, progress.

Takes a task (task.py: an automatic space over a compute graph, or a template with
arguments) and the tuning options; gives a TuneResult (result.py). Each batch: the tuner
proposes configs, each is instantiated (ScheduleError -> instantiation_error) and lowered
here, compiled, checked and timed in the workers, appended to the log and told to the
tuner. An existing log resumes (result.resume). Imports runtime, features, measure,
records, result, task and workload.
"""
from __future__ import annotations

import math
import sys
import time

import runtime

from ..compute.tensor import PlaceholderOp
from ..errors import ArgumentError, TEError, TuningInterrupted
from . import features as F
from . import records as R
from . import result as H
from .measure import LocalRunner, MeasureOptions
from .task import compile_job, estimate_flops, random_inputs
from .workload import package_version


def featurizer(task, knobs: bool = True):
    """cfg -> program features (features.py) followed, with `knobs`, by each knob's option
    index: within one task the knobs are the search's own coordinates (AutoTVM's "knob"
    features), and the trees split on them directly where the program features only
    reflect them indirectly."""
    names = list(task.space.knobs)

    def featurize(cfg):
        try:
            s, args = task.instantiate(cfg)
            program = F.extract(F.lower_for_features(s, args))
        except Exception:  # noqa: BLE001 - an unbuildable candidate ranks last
            return None
        if not knobs:
            return program
        return list(program) + [float(task.space.option_index(n, cfg.values[n]))
                                for n in names]
    return featurize


def make_tuner(name: str, space, task, seed):
    from . import search
    if name not in search.TUNERS:
        raise ArgumentError(f"te.autotune: tuner must be one of "
                            f"{', '.join(search.TUNERS)}, got {name!r}")
    if name == "xgb":
        return search.XGBTuner(space, featurizer(task), seed=seed)
    return search.TUNERS[name](space, seed=seed)


class _Progress:
    def __init__(self, verbose: int, total: int, flops: float):
        self.verbose, self.total, self.flops = verbose, total, flops
        self.start = time.time()
        self.shown = False

    def end(self) -> None:
        """End the progress line (before the next output, a message or a traceback)."""
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.shown = False

    def show(self, result: H.TuneResult, new: int) -> None:
        if not self.verbose:
            return
        dt = max(time.time() - self.start, 1e-9)
        errs = sum(result.errors.values())
        line = (f"\r[te.autotune {result.task.name}] {len(result.history)}/{self.total} "
                f"trials  best {result.best_gflops:.2f} GFLOP/s  {new / dt:.2f} trials/s  "
                f"errors {errs}")
        sys.stderr.write(line)
        sys.stderr.flush()
        self.shown = True


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_tune_args(trials, timeout, early_stopping, batch_size, seed, measure_option) -> None:
    def bad(name, expected, got):
        raise ArgumentError(f"te.autotune: {name} must be {expected}, got {got!r}")
    if not _is_int(trials) or trials < 1:
        bad("trials", "a positive int", trials)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        bad("timeout", "a positive number of seconds or None", timeout)
    if early_stopping is not None and (not _is_int(early_stopping) or early_stopping < 1):
        bad("early_stopping", "a positive int or None", early_stopping)
    if not _is_int(batch_size) or batch_size < 1:
        bad("batch_size", "a positive int", batch_size)
    if seed is not None and not _is_int(seed):
        bad("seed", "an int or None", seed)
    if measure_option is not None and not isinstance(measure_option, MeasureOptions):
        bad("measure_option", "a te.autotune.measure.MeasureOptions", measure_option)


def tune(task, trials: int = 500, target: str = "llvm", log: str | None = None,
         tuner: str = "xgb", timeout: float | None = None, seed: int | None = None,
         early_stopping: int | None = None, verbose: int = 1,
         measure_option: MeasureOptions | None = None, batch_size: int = 16) -> H.TuneResult:
    """Run the tuning loop on `task`; see te.autotune for the parameters. Ctrl-C raises
    TuningInterrupted and a failed append to the log TuningLogError, each carrying the
    TuneResult so far, once the log holds whole records only and the workers are gone."""
    _check_tune_args(trials, timeout, early_stopping, batch_size, seed, measure_option)
    if log is not None:
        try:
            R.check_log_path(log)
        except ValueError as err:
            raise ArgumentError(f"te.autotune: {err}") from None
    result = H.TuneResult(task, target, estimate_flops(task.outputs), log=log)
    progress = _Progress(verbose, trials, result.flops)
    try:
        _search(result, progress, trials=trials, tuner=tuner, timeout=timeout, seed=seed,
                early_stopping=early_stopping, measure_option=measure_option,
                batch_size=batch_size)
    except KeyboardInterrupt:
        raise TuningInterrupted(H.interrupted_text(result), result) from None
    finally:
        progress.end()
    return result


def _search(result: H.TuneResult, progress, trials, tuner, timeout, seed, early_stopping,
            measure_option, batch_size) -> None:
    """The loop of tune(): resume from the log, measure batches, re-measure the leaders."""
    start = time.time()
    task = result.task
    version = package_version()
    tuner_obj = make_tuner(tuner, task.space, task, seed)
    H.resume(result, tuner_obj, task, result.log, result.target, version)
    result.saved = len(result.history) if result.log else 0
    parallel = runtime.parallel_available()
    best_at = len(result.history)
    best_time = result.best_time
    new = 0
    with LocalRunner(measure_option) as runner:
        _set_reference(runner, task, parallel, seed)
        while len(result.history) < trials and tuner_obj.has_next():
            if timeout is not None and time.time() - start >= timeout:
                break
            if early_stopping is not None and len(result.history) - best_at >= early_stopping:
                break
            batch = tuner_obj.next_batch(min(batch_size, trials - len(result.history)))
            if not batch:
                break
            res = _measure_batch(runner, task, batch, parallel, best_time)
            for cfg, r in zip(batch, res):
                trial = H.Trial(cfg.to_json_dict(), r)
                result.history.append(trial)
                H.save(result, trial, version, is_trial=True)
                if r.ok and r.median < best_time:
                    best_time, best_at = r.median, len(result.history)
            tuner_obj.update(batch, res)
            new += len(batch)
            progress.show(result, new)
        if new or not H.leaders_confirmed(result):
            H.confirm_leaders(runner, task, result, parallel, version)


def _set_reference(runner, task, parallel: bool, seed) -> None:
    """Give the workers the task: its inputs and the unscheduled schedule's outputs."""
    s, args = task.reference()
    ref_job, err = compile_job(_Fixed(s, args), None, parallel)
    if err is not None:
        raise TEError(f"te.autotune: the unscheduled reference does not build: {err.msg}")
    outs = [(tuple(int(d.value) for d in a.shape), a.dtype) for a in args
            if not isinstance(a.op, PlaceholderOp)]
    ref = runner.set_task(random_inputs(args, seed or 0), outs, ref_job)
    if not ref.ok and ref.error != R.WRONG_ANSWER:
        raise TEError(f"te.autotune: the reference run failed ({ref.error}): {ref.msg}")


class _Fixed:
    """A task-like wrapper that always gives one schedule (the reference)."""

    def __init__(self, s, args):
        self.s, self.args = s, args

    def instantiate(self, cfg):
        return self.s, self.args


def _measure_batch(runner, task, batch: list, parallel: bool, best: float) -> list:
    results: list = [None] * len(batch)
    jobs, where = [], []
    for k, cfg in enumerate(batch):
        job, err = compile_job(task, cfg, parallel)
        if err is not None:
            results[k] = err
        else:
            jobs.append(job)
            where.append(k)
    best_s = best if math.isfinite(best) else None
    for k, r in zip(where, runner.run(jobs, best=best_s) if jobs else []):
        results[k] = r
    return results

