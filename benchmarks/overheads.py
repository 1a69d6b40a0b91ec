"""Fixed costs: a Python call of a built kernel, a parallel loop launch, te.build of the best
matmul schedule, and `import te` in a fresh process.

Takes nothing; gives measure_all() -> list of (name, value, unit, target) and format_lines().
Imports te, runtime, numpy and gemm_chain.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import runtime
import te
import gemm_chain


def _per_call(fn, calls: int, rounds: int = 7) -> float:
    fn()
    best = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter() - t0) / calls)
    return statistics.median(best)


def call_overhead_us() -> float:
    """A Python call (argument checks + ctypes) of a kernel that does almost nothing."""
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    mod = te.build(te.create_schedule(B.op), [A, B])
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    return _per_call(lambda: mod(a, b), 20000) * 1e6


def parallel_launch_us(threads: int) -> float:
    """One parallel loop with an empty-ish body minus the same loop run serially."""
    def build(par: bool):
        A = te.placeholder((64,), name="A")
        B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        if par:
            s[B].parallel(B.op.axis[0])
        return te.build(s, [A, B])
    a, b = np.zeros(64, np.float32), np.zeros(64, np.float32)
    runtime.set_num_threads(threads)
    ser, par = build(False), build(True)
    t_ser = ser.time_evaluator(number=5000, repeat=7)(a, b).median
    t_par = par.time_evaluator(number=5000, repeat=7)(a, b).median
    return max(0.0, t_par - t_ser) * 1e6


def build_ms(n: int = 1024) -> float:
    times = []
    for _ in range(3):
        s, args = gemm_chain.best_matmul(n, n, n)
        t0 = time.perf_counter()
        te.build(s, args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def import_s() -> tuple:
    """(median seconds of `import te` in a fresh process with warm bytecode caches, whether
    optuna or xgboost got imported)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = ("import time, sys; t = time.perf_counter(); import te; "
            "print(time.perf_counter() - t, any(m in sys.modules for m in "
            "('optuna', 'xgboost')))")
    with tempfile.TemporaryDirectory(prefix="te_pyc_") as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        outs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True, check=True).stdout.split() for _ in range(6)]
    times = [float(o[0]) for o in outs[1:]]  # the first run writes the bytecode cache
    return statistics.median(times), any(o[1] == "True" for o in outs)


def measure_all() -> list:
    threads = min(2, len(os.sched_getaffinity(0)))
    imp, heavy = import_s()
    return [
        ("Python call of a built kernel", call_overhead_us(), "us", 10.0),
        (f"parallel loop launch ({threads} threads)", parallel_launch_us(threads), "us", 20.0),
        ("te.build of the best 1024^3 matmul schedule", build_ms(), "ms", 150.0),
        ("import te" + (" (imports optuna/xgboost!)" if heavy else ""), imp, "s", 0.5),
    ]


def format_lines(over: list) -> list:
    return [f"{name}: {value:.3g} {unit} (target < {target:g} {unit}: "
            f"{'met' if value < target else 'missed'})" for name, value, unit, target in over]
