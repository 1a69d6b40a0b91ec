"""Tuned matmul vs numpy: `python benchmarks/tune_matmul.py --size 1024 --trials 500`.

Tunes an N^3 float32 matmul with te.autotune (xgb tuner, log in benchmarks/logs/ unless
--log), then times the tuned kernel and the hand schedule of gemm_chain.best_matmul the way
the suite does (benchmarks/run.py: numpy in its own worker process with its thread count
fixed and OpenBLAS's own kernel choice, alternating round by round with te's kernel, min of
3 repeats per round, median over rounds), at 1 and 2 threads. Timing numpy in this process
instead lets OpenBLAS's spinning threads take a core from te's next call: the same tuned
kernel measured 0.51x numpy that way and 1.0x in separate processes.
Target (issue 4): >= 0.8x numpy within 500 trials and 15 minutes of wall time.
"""
from __future__ import annotations

import argparse
import os
import time

import run  # benchmarks/run.py: sets sys.path and OMP_WAIT_POLICY before te loads
import te
from te.compute import ops
from run import _build_checked, compare
import gemm_chain


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--log", default=None)
    a = p.parse_args()
    n = a.size
    log = a.log or os.path.join(run.HERE, "logs", f"matmul{n}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    C = ops.matmul(A, B)
    t0 = time.time()
    res = te.autotune(C, trials=a.trials, timeout=a.timeout, tuner=a.tuner, seed=a.seed,
                      log=log)
    wall = time.time() - t0
    flops = 2.0 * n ** 3
    print(f"matmul {n}^3: {len(res.history)} trials in {wall:.0f} s, errors {res.errors}; "
          f"best {res.best_time * 1e3:.3f} ms in the tuning worker")
    print(f"best config: {res.best_config}")

    params = dict(m=n, n=n, k=n)
    tuned, tuned_call = _build_checked(lambda *_: res.schedule(), (n, n, n), "matmul",
                                       params, (n, n))
    hand, hand_call = _build_checked(gemm_chain.best_matmul, (n, n, n), "matmul", params,
                                     (n, n))
    compare([("tuned", tuned, tuned_call), ("hand", hand, hand_call)], "matmul", params,
            flops, "numpy", a.rounds)


if __name__ == "__main__":
    main()
