"""graph.autotune: tune the kernels of a graph for its end-to-end time.

Takes a Graph, a trial budget and a log; the distinct kernels at the level
(graph.tuning_tasks) are tuned, one te.autotune session each (te.autotune.session: the same
tuners, measurement workers, shared here, and JSON-lines records, so the log is a
te.autotune log and a second call with it resumes), in rounds of `batch_size` trials that
the task scheduler (graph.tuning_scheduler) gives to the kernel with the largest expected
gain in the model's time. graph.compile(g, tuning_log=log) then builds the best records.
Gives a GraphTuneResult. Imports te's public API and graph.{errors,ir,schedule,
tuning_scheduler,tuning_tasks}.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field

import te
from te.errors import ArgumentError, TEError

from .errors import GraphError
from .tuning_scheduler import TaskScheduler
from .schedule import strategy
from .tuning_tasks import extract_tasks

WHO = "graph.autotune"


@dataclass
class GraphTuneResult:
    """What graph.autotune returns: every task (tunable or not, with `reason`), the trials
    spent (those in the log before included) and, after each round, (trials spent, the
    estimated time of the tuned kernels: sum of weight x best time)."""
    tasks: list
    trials: int
    log: str | None
    spent: int = 0
    history: list = field(default_factory=list)

    @property
    def tuned(self) -> list:
        return [t for t in self.tasks if t.result is not None]

    @property
    def estimate(self) -> float:
        """sum of weight x best time over the tuned tasks that have a time, in seconds."""
        return sum(t.weight * t.result.best_time for t in self.tuned
                   if math.isfinite(t.result.best_time))

    def __str__(self) -> str:
        lines = [f"graph.autotune: {self.spent}/{self.trials} trials over {len(self.tuned)} "
                 f"tasks, tuned kernels {self.estimate * 1e3:.3f} ms (weight x best time)",
                 f"  {'task':<36} {'output':<18} {'weight':>6} {'trials':>6} {'best ms':>9} "
                 f"{'GFLOP/s':>8}"]
        for t in self.tuned:
            r = t.result
            if math.isfinite(r.best_time):
                best = f"{r.best_time * 1e3:>9.4f} {r.best_gflops:>8.2f}"
            else:   # no round reached this task yet, or every trial of it failed
                best = f"{'-':>9} {'-':>8}  ({'no trials yet' if not r.history else 'all failed'})"
            lines.append(f"  {t.name[:36]:<36} {_shape(t):<18} {t.weight:>6} "
                         f"{len(r.history):>6} {best}")
        reasons: dict = {}
        for t in self.tasks:
            if t.reason is not None:
                reasons.setdefault(t.reason, []).append(t)
        for reason, tasks in reasons.items():
            lines.append(f"  not tunable ({len(tasks)} tasks, "
                         f"{sum(t.weight for t in tasks)} kernels): {reason}")
            lines += [f"    {t.name[:34]:<34} {_shape(t):<18} {t.weight:>6}" for t in tasks]
        return "\n".join(lines)


def _shape(task) -> str:
    return "x".join(str(d) for d in task.shape)


def autotune(g, trials: int = 2000, log: str | os.PathLike | None = None, level: str = "O2",
             *, tuner: str = "xgb", batch_size: int = 16, seed: int | None = None,
             timeout: float | None = None, measure_option=None, verbose: int = 1,
             target: str = "llvm") -> GraphTuneResult:
    """Tune the kernels graph.compile(g, level=level) builds with `trials` trials in all
    (those `log` holds for them count and are not measured again), appending every
    measurement to `log`; stop after `timeout` seconds. `tuner`, `seed`, `measure_option`,
    `target` as te.autotune's; a progress line on stderr unless `verbose` is 0. Ctrl-C
    raises te.autotune.TuningInterrupted (its `.result` the GraphTuneResult so far), the
    log holding every finished trial."""
    options = _options(trials=trials, log=log, tuner=tuner, batch_size=batch_size, seed=seed,
                       timeout=timeout, measure_option=measure_option, verbose=0,
                       target=target)
    if log is not None and os.path.isdir(log):
        raise GraphError(f"{WHO}: log must be a file path, got the directory {str(log)!r}")
    tasks = extract_tasks(g, level, WHO)
    result = GraphTuneResult(tasks, trials, None if log is None else os.fspath(log))
    pool = te.autotune.LocalRunner(measure_option)
    sessions: list = []
    progress = _Progress(verbose, trials)
    try:
        _open_sessions(tasks, options, pool, sessions)
        _rounds(result, sessions, options, progress)
        for _, session in sessions:
            session.finish()
        # the leaders' re-measurements decide the best times (te.autotune's ranking)
        result.history[-1] = (result.spent, result.estimate)
    except KeyboardInterrupt:
        progress.end()
        raise te.autotune.TuningInterrupted(
            f"{WHO} interrupted after {result.spent} trials; every finished trial is in "
            f"'{log}': run it again with the same log to resume" if log else
            f"{WHO} interrupted after {result.spent} trials; none saved (give log= to be "
            f"able to resume)", result) from None
    finally:
        progress.end()
        for _, session in sessions:
            session.close()
        pool.close()
    return result


def _options(**keywords):
    try:
        return te.autotune.TuneOptions(**keywords)
    except ArgumentError as err:
        raise GraphError(str(err).replace("te.autotune:", f"{WHO}:", 1)) from None


def _open_sessions(tasks: list, options, pool, sessions: list) -> None:
    """Append (task, te.autotune session) of each tunable task, resumed from the log, to
    `sessions` (as they open: autotune closes them however this ends); a task whose
    automatic space refuses it or has a single config is marked not tunable."""
    for task in tasks:
        if not task.tunable:
            continue
        try:
            session = te.autotune.session(task.outs, options, args=task.args, workers=pool,
                                          strategy=strategy(task.family))
        except ArgumentError as err:
            raise GraphError(str(err).replace("te.autotune:", f"{WHO}:", 1)) from None
        except TEError as err:
            task.reason = f"the automatic space refuses it: {err}"
            continue
        if session.task.space.size <= 1:
            task.reason = "its automatic space has a single config"
            session.close()
            continue
        task.result = session.result
        sessions.append((task, session))


def _rounds(result: GraphTuneResult, sessions: list, options, progress) -> None:
    """Rounds of trials, each to the task the scheduler picks, until the budget is spent,
    the time is up or no task can take more."""
    start = time.time()
    scheduler = TaskScheduler([t.weight for t, _ in sessions],
                              [s.result.flops for _, s in sessions],
                              [_kind(t) for t, _ in sessions])
    for k, (_, session) in enumerate(sessions):
        done = len(session.result.history)
        result.spent += done
        if done:
            scheduler.resume(k, session.result.best_time, math.ceil(done / options.batch_size))
    result.history.append((result.spent, scheduler.estimate()))
    while result.spent < options.trials:
        if options.timeout is not None and time.time() - start >= options.timeout:
            break
        k = scheduler.next_task()
        if k is None:
            break
        task, session = sessions[k]
        n = session.measure(min(options.batch_size, options.trials - result.spent))
        result.spent += n
        scheduler.update(k, session.result.best_time, exhausted=n == 0 or session.exhausted)
        result.history.append((result.spent, scheduler.estimate()))
        progress.show(task, result, n)


def _kind(task) -> str:
    """Which tasks count as alike for the scheduler's estimate: the same ops."""
    return f"{task.family}:{task.name}"


class _Progress:
    """te.autotune's progress line, for the task just measured, with the model's estimate."""

    def __init__(self, verbose: int, total: int):
        self.verbose, self.total = verbose, total
        self.start = time.time()
        self.new = 0
        self.shown = False

    def show(self, task, result: GraphTuneResult, n: int) -> None:
        self.new += n
        if not self.verbose:
            return
        r = task.result
        dt = max(time.time() - self.start, 1e-9)
        errs = sum(r.errors.values())
        sys.stderr.write(f"\r[{WHO} {task.name}] {result.spent}/{self.total} trials  best "
                         f"{r.best_gflops:.2f} GFLOP/s  {self.new / dt:.2f} trials/s  errors "
                         f"{errs}  model {result.history[-1][1] * 1e3:.3f} ms   ")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.shown = False
