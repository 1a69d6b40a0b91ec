"""The tuning loop behind te.autotune: the tuner, measurement batches, progress.

Takes a task (task.py: an automatic space over a compute graph, or a template with
arguments) and its TuneOptions (options.py); gives a TuneResult (result.py). Each batch: the tuner
proposes configs, each is instantiated (ScheduleError -> instantiation_error) and lowered
here, compiled, checked and timed in the workers, appended to the log and told to the
tuner. An existing log resumes (result.resume). Imports runtime, features, measure,
options, records, result, search, task and workload.
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
from . import search
from .measure import LocalRunner
from .options import TuneOptions
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
    """The tuner named `name` (one of search.TUNERS, as TuneOptions checked) over `space`."""
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


def tune(task, options: TuneOptions) -> H.TuneResult:
    """Run the tuning loop on `task` as `options` say. Ctrl-C raises TuningInterrupted and
    a failed append to the log TuningLogError, each carrying the TuneResult so far, once
    the log holds whole records only and the workers are gone."""
    if options.log is not None:
        # the options hold a path; whether that file can be a log is decided as the run starts
        try:
            R.check_log_path(options.log)
        except ValueError as err:
            raise ArgumentError(f"te.autotune: {err}") from None
    result = H.TuneResult(task, options.target, estimate_flops(task.outputs), log=options.log)
    progress = _Progress(options.verbose, options.trials, result.flops)
    try:
        _search(result, progress, options)
    except KeyboardInterrupt:
        raise TuningInterrupted(H.interrupted_text(result), result) from None
    finally:
        progress.end()
    return result


def _search(result: H.TuneResult, progress, options: TuneOptions) -> None:
    """The loop of tune(): resume from the log, measure batches, re-measure the leaders."""
    start = time.time()
    task = result.task
    version = package_version()
    trials, timeout, early_stopping = options.trials, options.timeout, options.early_stopping
    tuner_obj = make_tuner(options.tuner, task.space, task, options.seed)
    H.resume(result, tuner_obj, task, result.log, result.target, version)
    result.saved = len(result.history) if result.log else 0
    parallel = runtime.parallel_available()
    best_at = len(result.history)
    best_time = result.best_time
    new = 0
    with LocalRunner(options.measure_option) as runner:
        _set_reference(runner, task, parallel, options.seed)
        while len(result.history) < trials and tuner_obj.has_next():
            if timeout is not None and time.time() - start >= timeout:
                break
            if early_stopping is not None and len(result.history) - best_at >= early_stopping:
                break
            batch = tuner_obj.next_batch(min(options.batch_size, trials - len(result.history)))
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

