"""The tuning loop behind te.autotune: tasks, measurement, records, progress, the result.

Takes a task (an automatic space over a compute graph, or a template with arguments) and
the tuning options; gives a TuneResult. Each batch: the tuner proposes configs, each is
instantiated (ScheduleError -> instantiation_error) and lowered here, compiled, checked and
timed in the workers, appended to the log and told to the tuner. An existing log resumes:
configs already measured for this workload/target/version count toward `trials` and are
never measured again. Imports te.compute, te.schedule, te.lower, te.build and runtime.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import runtime

from ..build import build, signature_of, target_features
from ..compute import expr as E
from ..compute.tensor import ComputeOp, PlaceholderOp
from ..errors import ArgumentError, ScheduleError, TEError, TuningInterrupted, TuningLogError
from ..lower.codegen_llvm import codegen_llvm
from ..lower.pipeline import lower
from ..schedule.schedule import create_schedule, topo_order
from . import features as F
from . import records as R
from .auto_space import auto_schedule, default_args
from .measure import Job, LocalRunner, MeasureOptions
from .space import ConfigEntity, ConfigSpace
from .workload import graph_key, output_ops, package_version


def _check_outputs(outputs) -> None:
    items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    if not items:
        raise ArgumentError("te.autotune: outputs must name at least one computed tensor, "
                            "got an empty list")
    for o in items:
        op = getattr(o, "op", o)
        if isinstance(op, PlaceholderOp):
            raise ArgumentError(f"te.autotune: outputs must be computed tensors, got "
                                f"placeholder '{op.name}' (an input)")
        if not isinstance(op, ComputeOp):
            raise ArgumentError(f"te.autotune: outputs must be tensors or operations of "
                                f"te.compute, got {type(o).__name__}")


class AutoTask:
    """The automatic space over a compute graph."""

    def __init__(self, outputs, args=None):
        _check_outputs(outputs)
        self.outputs = outputs
        self.args = list(args) if args is not None else default_args(outputs)
        self.key = graph_key(outputs)
        self.space = ConfigSpace()
        auto_schedule(self.space, outputs, self.args)
        self.name = "+".join(op.name for op in output_ops(outputs))

    def instantiate(self, cfg):
        return auto_schedule(cfg, self.outputs, self.args)

    def reference(self):
        return create_schedule(output_ops(self.outputs)), self.args


class TemplateTask:
    """A @te.autotune.template with its (JSON-able) arguments."""

    def __init__(self, template, args):
        self.template, self.targs = template, tuple(args)
        self.key = template.workload_key(self.targs)
        self.space = template.space(*self.targs)
        _, self.args = template.instantiate(self.space, *self.targs)
        self.outputs = [a for a in self.args if not isinstance(a.op, PlaceholderOp)]
        self.name = template.name

    def instantiate(self, cfg):
        return self.template.instantiate(cfg, *self.targs)

    def reference(self):
        return create_schedule(output_ops(self.outputs)), self.args


def estimate_flops(outputs) -> float:
    """Arithmetic operations of the compute definition (a multiply-add counts 2)."""
    total = 0.0
    for op in topo_order(output_ops(outputs)):
        if not isinstance(op, ComputeOp):
            continue
        points = 1.0
        for iv in list(op.axis) + list(op.reduce_axis):
            ext = iv.dom.extent
            points *= float(ext.value) if isinstance(ext, E.Const) else 1.0
        total += points * max(_value_ops(op.body[0]), 1)
    return total


def _value_ops(e) -> int:
    """Arithmetic on values; index arithmetic inside tensor reads is addressing, not work."""
    if isinstance(e, E.TensorLoad):
        return 0
    own = 1 if (isinstance(e, E.Binary) and e.op in E.ARITH_OPS) or \
        (isinstance(e, E.Call) and not e.extern) or isinstance(e, E.Reduce) else 0
    return own + sum(_value_ops(k) for k in E.children(e))


def random_inputs(args: list, seed: int = 0) -> list:
    """Non-zero random inputs for the placeholders among `args`: floats of magnitude 0.5 to
    1.5 and either sign, integers 1 to 9. Made in place in the input's own dtype (float32
    for float16), so an input near the memory limit needs no float64 temporaries."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        if not isinstance(a.op, PlaceholderOp):
            continue
        shape = tuple(int(d.value) for d in a.shape)
        dtype = np.dtype(a.dtype)
        if dtype.kind == "f":
            x = rng.random(shape, dtype=np.float64 if dtype.itemsize > 4 else np.float32)
            x *= 2.0
            x -= 1.0                        # [-1, 1)
            negative = x < 0
            x += 0.5                        # [0, 1) -> [0.5, 1.5)
            np.subtract(x, 1.0, out=x, where=negative)   # [-1, 0) -> [-1.5, -0.5)
            out.append(x.astype(dtype, copy=False))
        elif dtype.kind == "b":
            out.append(np.ones(shape, dtype))
        else:
            out.append(rng.integers(1, 10, size=shape, dtype=dtype))
    return out


@dataclass
class Trial:
    config: dict
    result: R.MeasureResult


@dataclass
class TuneResult:
    """What te.autotune returns: the best config and time, the history, and rebuilders."""
    task: object
    target: str
    flops: float
    history: list = field(default_factory=list)     # Trial, in measurement order
    log: str | None = None
    # Repeated measurements of configs already in the history (the leaders, re-measured at
    # the end of a run: CONFIRM_TOP); they count toward a config's cost, not as trials.
    confirmations: list = field(default_factory=list)
    saved: int = 0      # trials whose records are in the log (resumed ones included)

    def _ranked(self) -> list:
        return R.rank_by_config([(t.config, t.result, t)
                                 for t in self.history + self.confirmations])

    @property
    def best(self):
        """The fastest Trial of the best config (R.rank_by_config: the leaders re-measured
        at the end of a run by those measurements, then the rest), or None when nothing
        succeeded."""
        ranked = self._ranked()
        return ranked[0][1] if ranked else None

    @property
    def best_config(self) -> ConfigEntity | None:
        b = self.best
        return None if b is None else ConfigEntity.from_json_dict(self.task.space, b.config)

    @property
    def best_time(self) -> float:
        """The best config's cost: the median of its re-measurements' medians, or its
        trial's median when it was not re-measured."""
        ranked = self._ranked()
        return ranked[0][0] if ranked else math.inf

    @property
    def best_gflops(self) -> float:
        return self.flops / self.best_time / 1e9 if math.isfinite(self.best_time) else 0.0

    @property
    def errors(self) -> dict:
        out: dict = {}
        for t in self.history:
            if t.result.error:
                out[t.result.error] = out.get(t.result.error, 0) + 1
        return out

    def schedule(self):
        """(schedule, args) of the best config (the default config if none succeeded)."""
        cfg = self.best_config or self.task.space.default()
        return self.task.instantiate(cfg)

    def build(self):
        s, args = self.schedule()
        return build(s, args, target=self.target)

    def __repr__(self):
        return (f"TuneResult({self.task.name}: {len(self.history)} trials, best "
                f"{self.best_time * 1e3:.3f} ms = {self.best_gflops:.1f} GFLOP/s, "
                f"errors {self.errors})")


def _compile_job(task, cfg, parallel: bool):
    """(Job, None) or (None, MeasureResult with the error) for one config."""
    try:
        s, args = task.instantiate(cfg)
    except ScheduleError as err:
        return None, R.MeasureResult(error=R.INSTANTIATION_ERROR, msg=str(err))
    try:
        func = lower(s, args, name="main")
        # Workers compile for this host (api.py), with the host's features, as te.build does.
        ll = codegen_llvm(func, parallel=parallel, features=target_features("llvm"))
        sig = signature_of(func).to_json()
    except Exception as err:  # noqa: BLE001 - a lowering bug fails one trial, not the run
        return None, R.MeasureResult(error=R.LOWER_ERROR, msg=f"{type(err).__name__}: {err}")
    return Job(ll, sig, cfg.to_json_dict() if cfg is not None else {}), None


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

    def show(self, result: TuneResult, new: int) -> None:
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
         measure_option: MeasureOptions | None = None, batch_size: int = 16) -> TuneResult:
    """Run the tuning loop on `task`; see te.autotune for the parameters. Ctrl-C raises
    TuningInterrupted and a failed append to the log TuningLogError, each carrying the
    TuneResult so far, once the log holds whole records only and the workers are gone."""
    _check_tune_args(trials, timeout, early_stopping, batch_size, seed, measure_option)
    if log is not None:
        try:
            R.check_log_path(log)
        except ValueError as err:
            raise ArgumentError(f"te.autotune: {err}") from None
    result = TuneResult(task, target, estimate_flops(task.outputs), log=log)
    progress = _Progress(verbose, trials, result.flops)
    try:
        _search(result, progress, trials=trials, tuner=tuner, timeout=timeout, seed=seed,
                early_stopping=early_stopping, measure_option=measure_option,
                batch_size=batch_size)
    except KeyboardInterrupt:
        raise TuningInterrupted(_interrupted_text(result), result) from None
    finally:
        progress.end()
    return result


def _search(result: TuneResult, progress, trials, tuner, timeout, seed, early_stopping,
            measure_option, batch_size) -> None:
    """The loop of tune(): resume from the log, measure batches, re-measure the leaders."""
    start = time.time()
    task = result.task
    version = package_version()
    tuner_obj = make_tuner(tuner, task.space, task, seed)
    _resume(result, tuner_obj, task, result.log, result.target, version)
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
                trial = Trial(cfg.to_json_dict(), r)
                result.history.append(trial)
                _save(result, trial, version, is_trial=True)
                if r.ok and r.median < best_time:
                    best_time, best_at = r.median, len(result.history)
            tuner_obj.update(batch, res)
            new += len(batch)
            progress.show(result, new)
        if new or not _leaders_confirmed(result):
            _confirm_leaders(runner, task, result, parallel, version)


def _set_reference(runner, task, parallel: bool, seed) -> None:
    """Give the workers the task: its inputs and the unscheduled schedule's outputs."""
    s, args = task.reference()
    ref_job, err = _compile_job(_Fixed(s, args), None, parallel)
    if err is not None:
        raise TEError(f"te.autotune: the unscheduled reference does not build: {err.msg}")
    outs = [(tuple(int(d.value) for d in a.shape), a.dtype) for a in args
            if not isinstance(a.op, PlaceholderOp)]
    ref = runner.set_task(random_inputs(args, seed or 0), outs, ref_job)
    if not ref.ok and ref.error != R.WRONG_ANSWER:
        raise TEError(f"te.autotune: the reference run failed ({ref.error}): {ref.msg}")


def _save(result: TuneResult, trial: Trial, version: str, is_trial: bool) -> None:
    """Append a measurement to the log, if there is one; a failed append (a full disk)
    leaves the log as it was and stops the run with TuningLogError."""
    if not result.log:
        return
    try:
        R.append_record(result.log, R.Record(result.task.key, result.target, version,
                                              trial.config, trial.result, result.flops))
    except OSError as err:
        raise TuningLogError(f"te.autotune: cannot append to the log '{result.log}' "
                             f"({err.strerror or err}); it holds {result.saved} whole trials "
                             f"of {result.task.name}, which a run with the same log resumes "
                             f"from; {_best_text(result)}", result) from err
    if is_trial:
        result.saved += 1


def _best_text(result: TuneResult) -> str:
    best = result.best
    if best is None:
        return "no config has succeeded yet"
    return (f"best so far {result.best_time * 1e3:.4g} ms ({result.best_gflops:.1f} "
            f"GFLOP/s), config {R.config_key(best.config)}")


def _interrupted_text(result: TuneResult) -> str:
    if result.log:
        return (f"te.autotune interrupted: {result.saved} trials of {result.task.name} saved "
                f"in '{result.log}'; run it again with the same log to resume")
    return (f"te.autotune interrupted after {len(result.history)} trials; none saved (give "
            f"log= to be able to resume)")


# The leading configs are measured once more when a run ends: on a noisy machine the
# fastest of hundreds of single measurements is partly luck (a softmax config that won by
# 3% in its tuning worker was 3% slower than the default when timed again).
CONFIRM_TOP = 3
# Rounds of the leaders' re-measurement, each measuring every leader once, in turn: a
# drift of the machine during the rounds reaches all leaders alike. One round left the
# winner to noise: a layernorm 4096^2 run (Zen 4, 2 threads) ended on a 4-lane output
# loop 11% slower than the 16-lane config it had also measured. Five rounds, ranked by
# their median, let a step change of the machine's speed during the rounds (seen here:
# 4.5 -> 6.7 ms for the same kernel) spoil at most two of a leader's measurements.
CONFIRM_ROUNDS = 5


def _leaders(result: TuneResult) -> list:
    """The CONFIRM_TOP configs of the best trials (Trials), best first."""
    return [trial for _, trial in R.rank_trials(
        [(t.config, t.result, t) for t in result.history])[:CONFIRM_TOP]]


def _leaders_confirmed(result: TuneResult) -> bool:
    """Whether each leader has its CONFIRM_ROUNDS re-measurements (failed ones count): a
    resumed run whose last run stopped before re-measuring finishes that step."""
    leaders = _leaders(result)
    counts: dict = {}
    for t in result.confirmations:
        key = R.config_key(t.config)
        counts[key] = counts.get(key, 0) + 1
    return len(leaders) < 2 or all(counts.get(R.config_key(t.config), 0) >= CONFIRM_ROUNDS
                                   for t in leaders)


def _confirm_leaders(runner, task, result: TuneResult, parallel: bool, version) -> None:
    """Measure the CONFIRM_TOP best configs again, CONFIRM_ROUNDS times each; the
    measurements decide among them (TuneResult.confirmations, and the log, where
    R.rank_by_config ranks the leaders by the median of these)."""
    leaders = _leaders(result)
    if len(leaders) < 2:
        return
    jobs, kept = [], []
    for trial in leaders:
        job, err = _compile_job(task, ConfigEntity.from_json_dict(task.space, trial.config),
                                parallel)
        if err is None:
            jobs.append(job)
            kept.append(trial)
    rounds = runner.run(jobs * CONFIRM_ROUNDS) if jobs else []
    for trial, r in zip(kept * CONFIRM_ROUNDS, rounds):
        again = Trial(trial.config, r)
        result.confirmations.append(again)
        _save(result, again, version, is_trial=False)


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
        job, err = _compile_job(task, cfg, parallel)
        if err is not None:
            results[k] = err
        else:
            jobs.append(job)
            where.append(k)
    best_s = best if math.isfinite(best) else None
    for k, r in zip(where, runner.run(jobs, best=best_s) if jobs else []):
        results[k] = r
    return results


def _resume(result: TuneResult, tuner_obj, task, log, target: str, version: str) -> None:
    if not log:
        return
    configs, res = [], []
    for rec in R.load_records(log)[0]:
        if rec.workload != task.key or rec.target != target or rec.version != version:
            continue
        try:
            cfg = ConfigEntity.from_json_dict(task.space, rec.config)
        except ScheduleError:
            continue
        if cfg.index in tuner_obj.visited:
            # a repeated measurement (a leader confirmed at the end of a run)
            result.confirmations.append(Trial(rec.config, rec.result))
            continue
        if rec.result.error in R.TRANSIENT_ERRORS:
            continue  # a timeout or crash may pass (machine load): measure it again
        tuner_obj.visited.add(cfg.index)
        configs.append(cfg)
        res.append(rec.result)
        result.history.append(Trial(rec.config, rec.result))
    if configs:
        tuner_obj.update(configs, res)
