"""Measurement in isolated worker processes: compile, check against a reference, time.

Takes candidates as LLVM IR text plus a kernel signature, or for target 'cuda' a CUDA
module's parts (task.cuda_job: source, PTX, launch sizes); lowering and codegen run in the
tuning process, native compilation and execution in the workers, where a crash or a hang
costs one trial. Gives MeasureResults with an error kind. Workers are fresh Python
interpreters started with subprocess (the spawn start method, minus multiprocessing's
re-import of the user's __main__ and its pickled bootstrap) that speak JSON lines over
pipes; they are reused across candidates and restarted after a crash or a timeout.
Inputs and the reference outputs live as .npy files (allow_pickle=False) in a run
directory, computed once per tuning run. Imports records only (numpy lazily).
"""
from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from ..errors import ArgumentError
from . import records as R

REF_TIMEOUT = 600.0
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class MeasureOptions:
    """How candidates are timed and checked; `hook` ("module:fn" or "file.py:fn") is
    called in the worker with the config's knob dict before compiling (for tests)."""
    number: int = 3
    repeat: int = 5
    min_repeat_ms: float = 20.0
    timeout: float = 30.0
    n_workers: int = 1
    rtol: float = 1e-3
    atol: float = 1e-3
    check: bool = True
    hook: str | None = None

    def __post_init__(self):
        def positive(name, value, kind):
            if isinstance(value, bool) or not isinstance(value, kind) or \
                    not math.isfinite(value) or value <= 0:
                raise ArgumentError(f"MeasureOptions: {name} must be a positive "
                                    f"{'int' if kind is int else 'number'}, got {value!r}")
        positive("number", self.number, int)
        positive("repeat", self.repeat, int)
        positive("n_workers", self.n_workers, int)
        positive("timeout", self.timeout, (int, float))
        for name in ("min_repeat_ms", "rtol", "atol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value < 0:
                raise ArgumentError(f"MeasureOptions: {name} must be a finite number >= 0, "
                                    f"got {value!r}")


@dataclass(frozen=True)
class Job:
    ll: str
    signature: str      # KernelSignature.to_json()
    config: dict        # for the hook only
    cuda: dict | None = None   # target 'cuda': task.cuda_job, and ll is ""


class _Worker:
    """One worker process and its line-based pipes."""

    def __init__(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_ROOT] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
        env.setdefault("OMP_WAIT_POLICY", "passive")
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "te.autotune.worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        self.buf = b""
        self.started = time.time()

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def try_read(self, timeout: float):
        """A decoded reply, None if none came in `timeout` seconds; raises EOFError on death."""
        deadline = time.time() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self) -> str:
        try:
            self.log.seek(0)
            return self.log.read()[-800:].decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.log):
            try:
                f.close()
            except OSError:
                pass


class LocalRunner:
    """A pool of workers that measure jobs for one task (inputs + reference on disk).
    `shared`: another LocalRunner whose workers this one uses (and leaves running when it
    closes): each message names its task's directory, so the workers serve many tasks."""

    def __init__(self, options: MeasureOptions | None = None,
                 shared: LocalRunner | None = None):
        self.options = options or MeasureOptions()
        self.dir = tempfile.TemporaryDirectory(prefix="te-autotune-")
        self.workers: list = shared.workers if shared is not None else []
        self._owns_workers = shared is None
        self.task: dict = {}

    def set_task(self, inputs: list, outputs: list, ref: Job) -> R.MeasureResult:
        """Save inputs, compute the reference outputs once (in a worker) from `ref`."""
        import numpy as np
        for k, arr in enumerate(inputs):
            np.save(os.path.join(self.dir.name, f"in{k}.npy"), arr, allow_pickle=False)
        self.task = {"dir": self.dir.name, "n_in": len(inputs),
                     "outputs": [[list(shape), dtype] for shape, dtype in outputs]}
        res = self.run([ref], make_ref=True)[0]
        return res

    def _spawn(self) -> _Worker:
        w = _Worker()
        try:
            hello = w.try_read(120.0)
        except EOFError:
            hello = None
        except BaseException:
            # Ctrl-C while it starts: it is in no pool yet, so no close() would end it
            w.kill()
            raise
        if not hello or not hello.get("ready"):
            tail = w.stderr_tail()
            w.kill()
            raise RuntimeError(f"te.autotune: a measurement worker did not start:\n{tail}")
        return w

    def run(self, jobs: list, make_ref: bool = False, best: float | None = None) -> list:
        """Measure `jobs` on the pool; one MeasureResult each, in order. `best` (seconds),
        the best time so far, lets workers cut hopeless candidates short."""
        opts = self.options
        while len(self.workers) < max(1, opts.n_workers):
            self.workers.append(self._spawn())
        results: list = [None] * len(jobs)
        todo = list(range(len(jobs)))
        busy: dict = {}   # worker index -> (job index, deadline, start)
        while todo or busy:
            for w_idx in range(len(self.workers)):
                if w_idx in busy or not todo:
                    continue
                j = todo.pop(0)
                msg = {"task": self.task, "ll": jobs[j].ll, "sig": jobs[j].signature,
                       "cuda": jobs[j].cuda, "config": jobs[j].config,
                       "make_ref": make_ref, "best": best,
                       "opts": {k: getattr(opts, k) for k in ("number", "repeat",
                                "min_repeat_ms", "rtol", "atol", "check", "hook",
                                "timeout")}}
                try:
                    self.workers[w_idx].send(msg)
                except (BrokenPipeError, OSError):
                    self._replace(w_idx)
                    self.workers[w_idx].send(msg)
                # The reference is the unscheduled loop nest: give it more time.
                limit = max(opts.timeout, REF_TIMEOUT) if make_ref else opts.timeout
                busy[w_idx] = (j, time.time() + limit, time.time())
            self._collect(busy, results)
        return results

    def _collect(self, busy: dict, results: list) -> None:
        for w_idx in list(busy):
            j, deadline, start = busy[w_idx]
            w = self.workers[w_idx]
            try:
                reply = w.try_read(0.005 if len(busy) > 1 else max(0.0, deadline - time.time()))
            except (EOFError, ValueError):
                code = w.proc.wait()
                results[j] = R.MeasureResult(error=R.CRASH, msg=f"worker died with exit code "
                                             f"{code}: {w.stderr_tail()[-300:]}",
                                             compile_s=time.time() - start)
                self._replace(w_idx)
                del busy[w_idx]
                continue
            if reply is not None:
                results[j] = R.MeasureResult(tuple(reply.get("costs", ())), reply.get("error"),
                                             reply.get("msg", ""), reply.get("compile_s", 0.0))
                del busy[w_idx]
            elif time.time() >= deadline:
                results[j] = R.MeasureResult(error=R.TIMEOUT, msg=f"no answer in "
                                             f"{time.time() - start:.1f} s",
                                             compile_s=time.time() - start)
                self._replace(w_idx)
                del busy[w_idx]

    def _replace(self, w_idx: int) -> None:
        self.workers[w_idx].kill()
        self.workers[w_idx] = self._spawn()

    def close(self) -> None:
        if self._owns_workers:
            for w in self.workers:
                w.kill()
            self.workers.clear()
        self.dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
