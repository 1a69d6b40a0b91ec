"""A tuning run's result and its history: TuneResult, resuming it from a log, and the
re-measurement of its leaders when a run ends.

TuneResult holds the trials (Trial: a config and its MeasureResult) in measurement order and
the leaders' re-measurements, ranks them (records.rank_by_config) and rebuilds the best
config. resume() fills it from a log's records of the same workload/target/version;
confirm_leaders() measures the leading configs again. Imports te.build, records, space, task.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..build import build
from ..errors import ScheduleError, TuningLogError
from . import records as R
from .space import ConfigEntity
from .task import compile_job


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


def best_text(result: TuneResult) -> str:
    best = result.best
    if best is None:
        return "no config has succeeded yet"
    return (f"best so far {result.best_time * 1e3:.4g} ms ({result.best_gflops:.1f} "
            f"GFLOP/s), config {R.config_key(best.config)}")


def interrupted_text(result: TuneResult) -> str:
    if result.log:
        return (f"te.autotune interrupted: {result.saved} trials of {result.task.name} saved "
                f"in '{result.log}'; run it again with the same log to resume")
    return (f"te.autotune interrupted after {len(result.history)} trials; none saved (give "
            f"log= to be able to resume)")


def save(result: TuneResult, trial: Trial, version: str, is_trial: bool) -> None:
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
                             f"from; {best_text(result)}", result) from err
    if is_trial:
        result.saved += 1


# The leading configs are measured once more when a run ends: on a noisy machine the
# fastest of hundreds of single measurements is partly luck (a config that won in its
# tuning worker can be slower than the default when timed again).
CONFIRM_TOP = 3
# Rounds of the leaders' re-measurement, each measuring every leader once, in turn: a
# drift of the machine during the rounds reaches all leaders alike. One round left the
# winner to noise; five, ranked by their median, let a step change of the machine's speed
# during the rounds spoil at most two of a leader's measurements.
CONFIRM_ROUNDS = 5


def leaders_of(result: TuneResult) -> list:
    """The CONFIRM_TOP configs of the best trials (Trials), best first."""
    return [trial for _, trial in R.rank_trials(
        [(t.config, t.result, t) for t in result.history])[:CONFIRM_TOP]]


def leaders_confirmed(result: TuneResult) -> bool:
    """Whether each leader has its CONFIRM_ROUNDS re-measurements (failed ones count): a
    resumed run whose last run stopped before re-measuring finishes that step."""
    leaders = leaders_of(result)
    counts: dict = {}
    for t in result.confirmations:
        key = R.config_key(t.config)
        counts[key] = counts.get(key, 0) + 1
    return len(leaders) < 2 or all(counts.get(R.config_key(t.config), 0) >= CONFIRM_ROUNDS
                                   for t in leaders)


def confirm_leaders(runner, task, result: TuneResult, parallel: bool, version) -> None:
    """Measure the CONFIRM_TOP best configs again, CONFIRM_ROUNDS times each; the
    measurements decide among them (TuneResult.confirmations, and the log, where
    R.rank_by_config ranks the leaders by the median of these)."""
    leaders = leaders_of(result)
    if len(leaders) < 2:
        return
    jobs, kept = [], []
    for trial in leaders:
        job, err = compile_job(task, ConfigEntity.from_json_dict(task.space, trial.config),
                               parallel, result.target)
        if err is None:
            jobs.append(job)
            kept.append(trial)
    rounds = runner.run(jobs * CONFIRM_ROUNDS) if jobs else []
    for trial, r in zip(kept * CONFIRM_ROUNDS, rounds):
        again = Trial(trial.config, r)
        result.confirmations.append(again)
        save(result, again, version, is_trial=False)


def resume(result: TuneResult, tuner_obj, task, log, target: str, version: str) -> None:
    """Take the log's records of this workload/target/version into `result` and tell them
    to the tuner: they count toward `trials` and are never measured again."""
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
