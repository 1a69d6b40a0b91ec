"""graph.autotune's task scheduler: which kernel the next round of trials goes to.

Ansor's gradient-based task scheduler (Zheng et al., OSDI 2020, section 6; TVM's
auto_scheduler/task_scheduler.py) with the model's time f = sum_i w_i g_i as the objective
(w_i: how many kernels of the graph task i stands for, g_i: its best time so far, t_i: its
rounds). Every task first gets one round, in order (the warm-up); then each round goes to
the task whose estimated df/dt_i is the most negative (the largest expected gain):
    df/dt_i ~ w_i * (alpha * backward_i + (1 - alpha) * forward_i)
    backward_i = (g_i(t_i) - g_i(t_i - window)) / window: its recent improvement per round;
    forward_i  = min(-g_i / t_i, beta * flops_i / rate_i - g_i): an optimistic next gain,
                 where rate_i is the best FLOP/s among the tasks of its kind (tasks alike
                 should reach alike rates: one far below its peers has much to gain).
Ties (no task has improved or can be estimated) go to the largest w_i g_i. A task whose
space is exhausted, or none of whose first two rounds succeeded, gets no more rounds. Ansor's
epsilon-greedy random pick is left out, so the order is reproducible. Pure logic (no
measuring): tests drive it with a fake measurer. Imports nothing from te.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

ALPHA = 0.2     # weight of the recent improvement against the optimistic estimate (Ansor)
BETA = 2.0      # a task is expected to reach 1/beta of its best peer's rate (Ansor)
WINDOW = 3      # rounds the recent improvement is measured over (Ansor's backward window)
FAILED_ROUNDS = 2  # rounds without one successful trial after which a task is given up


@dataclass
class TaskState:
    """What the scheduler knows of a task: `best` is its best time after each round."""
    weight: float
    flops: float
    kind: str
    best: list = field(default_factory=list)
    done: bool = False

    @property
    def rounds(self) -> int:
        return len(self.best)

    @property
    def time(self) -> float:
        return self.best[-1] if self.best else math.inf


class TaskScheduler:
    """next_task() -> the index of the task to give the next round, or None when no task
    can take one; update(k, best, exhausted) after task k's round."""

    def __init__(self, weights: list, flops: list, kinds: list, alpha: float = ALPHA,
                 beta: float = BETA, window: int = WINDOW):
        self.tasks = [TaskState(float(w), float(f), k) for w, f, k in zip(weights, flops, kinds)]
        self.alpha, self.beta, self.window = alpha, beta, window

    def resume(self, k: int, best: float, rounds: int) -> None:
        """Task k has `rounds` rounds in a log already, its best time `best` (its earlier
        improvement is unknown: counted as none)."""
        self.tasks[k].best = [best] * rounds

    def update(self, k: int, best: float, exhausted: bool = False) -> None:
        task = self.tasks[k]
        task.best.append(best)
        failed = not math.isfinite(best) and task.rounds >= FAILED_ROUNDS
        task.done = task.done or exhausted or failed

    def next_task(self) -> int | None:
        live = [k for k, t in enumerate(self.tasks) if not t.done]
        if not live:
            return None
        for k in live:   # the warm-up: one round each, in order
            if self.tasks[k].rounds == 0:
                return k
        for k in live:   # a task whose first round failed gets its second
            if not math.isfinite(self.tasks[k].time):
                return k
        grads = {k: self.gradient(k) for k in live}
        low = min(grads.values())
        if low == max(grads.values()):
            return max(live, key=lambda k: self.tasks[k].weight * self.tasks[k].time)
        return min(live, key=lambda k: grads[k])

    def gradient(self, k: int) -> float:
        """The estimated change of the model's time per round given to task k (<= 0)."""
        task = self.tasks[k]
        g, t = task.time, task.rounds
        if task.rounds > self.window:
            backward = (g - task.best[-1 - self.window]) / self.window
        else:
            backward = 0.0
        forward = -g / t
        rate = self._peer_rate(k)
        if rate is not None:
            forward = min(forward, self.beta * task.flops / rate - g)
        return task.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def _peer_rate(self, k: int) -> float | None:
        """The best FLOP/s among the other measured tasks of task k's kind, or None."""
        kind = self.tasks[k].kind
        rates = [t.flops / t.time for j, t in enumerate(self.tasks)
                 if j != k and t.kind == kind and math.isfinite(t.time) and t.flops > 0]
        if not rates or self.tasks[k].flops <= 0:
            return None
        return max(rates + [self.tasks[k].flops / self.tasks[k].time])

    def estimate(self) -> float:
        """sum_i w_i g_i over the tasks with a time: the tuned kernels' part of a run."""
        return sum(t.weight * t.time for t in self.tasks if math.isfinite(t.time))
