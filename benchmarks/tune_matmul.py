"""Tuned matmul vs numpy: `python benchmarks/tune_matmul.py --size 1024 --trials 500`.

Tunes an N^3 float32 matmul with te.autotune (xgb tuner, log in benchmarks/logs/), then times
the best kernel and numpy's a @ b alternately in this process and prints the ratio.
Target (issue 4): >= 0.8x numpy within 500 trials and 15 minutes of wall time.
"""
from __future__ import annotations

import argparse
import os
import time

# Before numpy loads OpenBLAS: some hosts pin it to an older kernel family (see run.py's
# RefWorker); the reference is numpy at its best on this CPU.
for _pinned in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_pinned, None)

import numpy as np  # noqa: E402

import te  # noqa: E402
from te.compute import ops  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default=None)
    a = p.parse_args()
    n = a.size
    log = a.log or os.path.join(os.path.dirname(__file__), "logs", f"matmul{n}.jsonl")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    C = ops.matmul(A, B)
    t0 = time.time()
    res = te.autotune(C, trials=a.trials, timeout=a.timeout, tuner=a.tuner, seed=a.seed,
                      log=log)
    wall = time.time() - t0
    mod = res.build()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    y = rng.standard_normal((n, n), dtype=np.float32)
    z = np.empty((n, n), np.float32)
    mod(x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-3, atol=1e-2)
    ours, ref = [], []
    for _ in range(5):  # alternate the two sides: the machine is shared and noisy
        ours.append(mod.time_evaluator(number=3, repeat=1)(x, y, z).median)
        t = time.perf_counter()
        x @ y
        ref.append(time.perf_counter() - t)
    ours_s, ref_s = float(np.median(ours)), float(np.median(ref))
    flops = 2.0 * n ** 3
    print(f"matmul {n}^3: {len(res.history)} trials in {wall:.0f} s, errors {res.errors}")
    print(f"best config: {res.best_config}")
    print(f"te {ours_s * 1e3:.2f} ms = {flops / ours_s / 1e9:.1f} GFLOP/s; numpy "
          f"{ref_s * 1e3:.2f} ms = {flops / ref_s / 1e9:.1f} GFLOP/s; te/numpy "
          f"{ref_s / ours_s:.2f}x")


if __name__ == "__main__":
    main()
