"""The tuning loop behind te.autotune: the tuner, measurement batches, progress.

Takes a task (task.py: an automatic space over a compute graph, or a template with arguments) and
its TuneOptions (options.py); gives a TuneResult (result.py). Each batch: the tuner proposes
configs, each is instantiated (ScheduleError -> instantiation_error) and lowered here, compiled,
checked and timed in the workers, appended to the log and told to the tuner. An existing log resumes
(result.resume). Target 'cuda' (a template that binds GPU threads, or the GPU space) measures on the
GPU, or where none is present in the CUDA emulator, with a warning: emulated times rank CPU
emulation, so they are taken once and not re-measured. Imports runtime, features, measure, options,
records, result, search, task and workload.
"""
from __future__ import annotations

import math
import sys
import time
import warnings

import runtime

from ..compute.tensor import PlaceholderOp
from ..errors import ArgumentError, TEError, TuningInterrupted
from . import features as F
from . import records as R
from . import result as H
from . import search
from .measure import LocalRunner
from .options import TuneOptions
from .task import TemplateTask, compile_job, estimate_flops, gpu_present, random_inputs
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
    check_log(options.log, "te.autotune")
    result = H.TuneResult(task, options.target, estimate_flops(task.outputs), log=options.log)
    progress = _Progress(options.verbose, options.trials, result.flops)
    try:
        with Session(task, options, result=result) as session:
            session.prepare()
            _search(session, progress, options)
    except KeyboardInterrupt:
        raise TuningInterrupted(H.interrupted_text(result), result) from None
    finally:
        progress.end()
    return result


def check_log(log, who: str) -> None:
    """Refuse a `log` that cannot be a tuning log, before anything is measured."""
    if log is not None:
        # the options hold a path; whether that file can be a log is decided as the run starts
        try:
            R.check_log_path(log)
        except ValueError as err:
            raise ArgumentError(f"{who}: {err}") from None


def _search(session: "Session", progress, options: TuneOptions) -> None:
    """The loop of tune(): measure batches until a limit, then re-measure the leaders."""
    result = session.result
    trials, timeout, early_stopping = options.trials, options.timeout, options.early_stopping
    while len(result.history) < trials and not session.exhausted:
        if timeout is not None and time.time() - session.start >= timeout:
            break
        if early_stopping is not None and \
                len(result.history) - session.best_at >= early_stopping:
            break
        if not session.measure(min(options.batch_size, trials - len(result.history))):
            break
        progress.show(result, session.new)
    session.finish()


class Session:
    """One task's tuning loop, a batch at a time: tune() runs it to its limits, and
    graph.autotune interleaves the sessions of a model's kernels. Made, it has resumed
    from the log (`result` holds the log's trials); measure(n) measures up to n new
    configs, finish() re-measures the leaders. `workers`: a LocalRunner whose worker
    processes this session borrows (its own inputs and reference stay its own)."""

    def __init__(self, task, options: TuneOptions, workers: LocalRunner | None = None,
                 result: H.TuneResult | None = None):
        self.task, self.options = task, options
        self.emulated = _check_cuda(task, options.target)   # before any worker starts
        self.start = time.time()
        self.result = result or H.TuneResult(task, options.target,
                                             estimate_flops(task.outputs), log=options.log)
        self.version = package_version()
        self.tuner = make_tuner(options.tuner, task.space, task, options.seed)
        H.resume(self.result, self.tuner, task, self.result.log, self.result.target,
                 self.version)
        self.result.saved = len(self.result.history) if self.result.log else 0
        self.parallel = runtime.parallel_available()
        self.best_at = len(self.result.history)
        self.best_time = self.result.best_time
        self.new = 0      # configs measured by this session (not resumed)
        self.runner = LocalRunner(options.measure_option, shared=workers)
        self._prepared = False

    @property
    def exhausted(self) -> bool:
        """Whether every config of the space has been measured."""
        return not self.tuner.has_next()

    def prepare(self) -> None:
        """Give the workers the task (its inputs and reference outputs), once."""
        if not self._prepared:
            _set_reference(self.runner, self.task, self.parallel, self.options.seed)
            self._prepared = True

    def measure(self, n: int) -> int:
        """Measure up to `n` configs the tuner proposes (logged and told as they come);
        how many were measured: 0 when the tuner has none left."""
        batch = self.tuner.next_batch(n)
        if not batch:
            return 0
        self.prepare()
        result = self.result
        res = _measure_batch(self.runner, self.task, batch, self.parallel, self.best_time,
                             self.options.target)
        for cfg, r in zip(batch, res):
            trial = H.Trial(cfg.to_json_dict(), r)
            result.history.append(trial)
            H.save(result, trial, self.version, is_trial=True)
            if r.ok and r.median < self.best_time:
                self.best_time, self.best_at = r.median, len(result.history)
        self.tuner.update(batch, res)
        self.new += len(batch)
        return len(batch)

    def finish(self) -> None:
        """Re-measure the leaders (H.confirm_leaders) where new trials came, or where the
        run that logged them stopped before this step; not emulated ones (their times say
        little about the GPU, and cost seconds each)."""
        if not self.emulated and (self.new or not H.leaders_confirmed(self.result)):
            self.prepare()
            H.confirm_leaders(self.runner, self.task, self.result, self.parallel,
                              self.version)

    def close(self) -> None:
        self.runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_cuda(task, target: str) -> bool:
    """Whether the run is emulated: target 'cuda' where no GPU is present (warned once per
    process). 'cuda' takes a template or the GPU space (strategy "gpu"), which only 'cuda'
    takes; the other spaces schedule for the CPU."""
    gpu_space = getattr(task, "strategy", None) == "gpu"
    if target.split()[0] != "cuda":
        if gpu_space:
            raise ArgumentError(f"te.autotune: strategy 'gpu' binds GPU threads and needs "
                                f"target 'cuda', got {target!r}")
        return False
    if not isinstance(task, TemplateTask) and not gpu_space:
        raise ArgumentError(f"te.autotune: target {target!r} needs a template "
                            f"(@te.autotune.template) whose schedule binds GPU threads or the "
                            f"GPU space (strategy 'gpu'); strategy '{task.strategy}' of "
                            f"{task.name} schedules for the CPU ('llvm')")
    if gpu_present():
        return False
    global _warned_emulated
    if not _warned_emulated:
        _warned_emulated = True
        warnings.warn(EMULATED, RuntimeWarning, stacklevel=5)
    return True


_warned_emulated = False
EMULATED = ("te.autotune: target 'cuda': no CUDA device (or no cuda-python or pycuda) here, "
            "so each config runs once in the CUDA emulator on the CPU "
            "(runtime/cuda_emulator.py): results are checked as on a GPU, but the times rank "
            "CPU emulation, not GPU speed; tune on a machine with a GPU for a config that is "
            "fast there")


def _set_reference(runner, task, parallel: bool, seed) -> None:
    """Give the workers the task: its inputs and the unscheduled schedule's outputs (run
    on this CPU, whatever the target: the reference of a 'cuda' run too)."""
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


def _measure_batch(runner, task, batch: list, parallel: bool, best: float,
                   target: str = "llvm") -> list:
    results: list = [None] * len(batch)
    jobs, where = [], []
    for k, cfg in enumerate(batch):
        job, err = compile_job(task, cfg, parallel, target)
        if err is not None:
            results[k] = err
        else:
            jobs.append(job)
            where.append(k)
    best_s = best if math.isfinite(best) else None
    for k, r in zip(where, runner.run(jobs, best=best_s) if jobs else []):
        results[k] = r
    return results

