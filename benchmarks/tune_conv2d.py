"""Tuned conv2d 3x3 64->64 56x56 vs onnxruntime: `python benchmarks/tune_conv2d.py`.

Tunes conv2d_nchw (batch 1, padding 1) with te.autotune (the log in benchmarks/logs/
resumes an earlier run), then times three kernels the way the suite does
(benchmarks/run.py: onnxruntime in its own worker process with its thread count fixed,
alternating round by round with te's kernel, min of 3 repeats per round, median over
rounds): the tuned kernel, the hand-written schedule of benchmarks/kernels.py, and
onnxruntime, at 1 and 2 threads. onnxruntime is an optional extra (`pip install onnx
onnxruntime`); without it the ratios are n/a.
Target (issue 4): the tuned kernel >= 0.8x onnxruntime within 500 trials.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import run  # benchmarks/run.py: sets sys.path and OMP_WAIT_POLICY before te loads
import te
from te.autotune import workloads
from run import _aligned, _build_checked, _views, compare
import kernels
import refs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--size", type=int, default=56)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--log", default=None, help="tuning log (default benchmarks/logs/...)")
    a = p.parse_args()
    c, hw = a.channels, a.size
    out, args, flops, _ = workloads.make("conv2d", (1, c, hw, hw, c, 3))
    log = a.log or os.path.join(run.HERE, "logs", f"conv2d_{c}_{hw}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    t0 = time.time()
    res = te.autotune(out, args=args, trials=a.trials, timeout=a.timeout, log=log)
    wall = time.time() - t0
    best_at = 1 + min(range(len(res.history)), key=lambda k: res.history[k].result.median
                      if res.history[k].result.ok else float("inf"))
    print(f"conv2d {c}->{c} {hw}x{hw}: {len(res.history)} trials ({wall:.0f} s this run, "
          f"log {log}), best at trial {best_at}: {res.best_time * 1e3:.3f} ms in the tuning "
          f"worker; errors {res.errors}")
    print("best config:", res.best_config.to_json_dict())

    params = dict(cin=c, cout=c, h=hw, w=hw, r=3, pad=1)
    tuned = res.build()
    xs = [_aligned(x) for x in refs.make_inputs("conv2d", params)]
    y = _aligned(np.empty((1, c, hw, hw), np.float32))
    tuned_call = _views(xs + [y], args)
    tuned(*tuned_call)
    want = refs.onnxruntime_reference("conv2d", params, xs, 1)
    if want is not None:
        np.testing.assert_allclose(y, want()[0], rtol=1e-3, atol=1e-3)
    hand, hand_call = _build_checked(kernels.conv2d, (c, c, hw, hw, 3, 1), "conv2d", params,
                                     (1, c, hw, hw))
    compare([("tuned", tuned, tuned_call), ("hand", hand, hand_call)], "conv2d", params,
            flops, "onnxruntime", a.rounds)


if __name__ == "__main__":
    main()
