"""A model's run time against the tuning trials spent on it: `python benchmarks/graph_tune.py
[--model squeezenet] [--trials 64] [--step 16] [--batch-size 8] [--level O2] [--threads 1]
[--rounds 9] [--log PATH] [--out PREFIX]`.

Tunes the model with graph.autotune in steps of --step trials up to --trials (each step
resumes from the same log, so the trials add up), and after each step compiles it with
graph.compile(tuning_log=) and times it, alternating with the untuned module and
onnxruntime (same thread count), one run each per round; medians over --rounds, and the
medians of the per-round ratios (which a change of the machine's load reaches alike).
Writes PREFIX.json (the numbers) and PREFIX.png (run times and ratios against trials).
Models as benchmarks/graph_run.py loads them (seeded random weights).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")   # before libgomp loads, as graph_run.py
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [p for p in (ROOT, HERE) if p not in sys.path]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_rounds(runs: dict, rounds: int, settle_after: str | None = None) -> dict:
    """name -> the seconds of each of `rounds` rounds, each calling every run once in turn
    (so a change of the machine's load reaches all of them alike), in reverse order every
    other round (the first run after a pause ran up to 10% slower at 2 threads). After the
    run named `settle_after` (onnxruntime above 1 thread) each round waits
    graph_run.SETTLE_S: its intra-op workers spin on after a run, and on 2 cores a
    spinning worker took a core from the 2-thread run timed next (2-10x slower)."""
    from graph_run import SETTLE_S
    times: dict = {name: [] for name in runs}
    for run in runs.values():
        run()                                # warm up (page faults, first-touch)
    for k in range(rounds):
        for name, run in (list(runs.items())[::-1] if k % 2 else runs.items()):
            times[name].append(_timed(run))
            if name == settle_after:
                time.sleep(SETTLE_S)
    return times


def summary(times: dict) -> dict:
    """Medians in ms, and the medians of the per-round ratios to the tuned module."""
    out = {f"{name}_ms": statistics.median(t) * 1e3 for name, t in times.items()}
    for name in ("untuned", "onnxruntime"):
        out[f"{name}_over_tuned"] = statistics.median(
            a / b for a, b in zip(times[name], times["tuned"]))
    return out


def measure(args) -> dict:
    import numpy as np
    import onnxruntime as ort

    import graph
    import runtime
    from graph_run import load_model
    runtime.set_num_threads(args.threads)
    model, feeds = load_model(args.model)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    g = graph.from_onnx(model)
    untuned = graph.compile(g, level=args.level)
    tasks = graph.extract_tasks(g, args.level)
    points = []
    for target in range(args.step, args.trials + 1, args.step):
        t0 = time.perf_counter()
        result = graph.autotune(g, trials=target, log=args.log, level=args.level, seed=0,
                                batch_size=args.batch_size, verbose=1)
        tune_s = time.perf_counter() - t0
        tuned = graph.compile(g, level=args.level, tuning_log=args.log)
        err = max(float(np.abs(o - r).max()) / max(1.0, float(np.abs(r).max()))
                  for o, r in zip(tuned.run(feeds), refs))
        t = time_rounds({"tuned": lambda m=tuned: m.run(feeds),
                         "untuned": lambda: untuned.run(feeds),
                         "onnxruntime": lambda: sess.run(None, feeds)}, args.rounds,
                        "onnxruntime" if args.threads > 1 else None)
        point = {"trials": result.spent, "tune_s": round(tune_s, 1),
                 "estimate_ms": result.estimate * 1e3, "err": err, **summary(t)}
        points.append(point)
        print(json.dumps(point), flush=True)
    return {"model": args.model, "level": args.level, "threads": args.threads,
            "rounds": args.rounds, "points": points,
            "tasks": [{"name": t.name, "weight": t.weight, "tunable": t.tunable,
                       "reason": t.reason} for t in tasks],
            "table": str(result)}


def plot(data: dict, path: str) -> None:
    """Left: medians in ms against trials; right: the per-round ratios (load-robust)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = data["points"]
    xs = [p["trials"] for p in pts]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.0))
    level = data["level"]
    left.plot(xs, [p["tuned_ms"] for p in pts], "o-", label=f"{level} tuned")
    left.plot(xs, [p["untuned_ms"] for p in pts], "s--", label=f"{level} untuned")
    left.plot(xs, [p["onnxruntime_ms"] for p in pts], "^:", label="onnxruntime")
    left.set_ylabel("run time, ms (median of the rounds)")
    left.set_ylim(bottom=0)
    right.plot(xs, [p["untuned_over_tuned"] for p in pts], "s--",
               label="untuned / tuned (speed-up by tuning)")
    right.plot(xs, [p["onnxruntime_over_tuned"] for p in pts], "^:",
               label="onnxruntime / tuned (> 1: faster than onnxruntime)")
    right.axhline(1.0, color="gray", lw=0.8)
    right.set_ylabel("ratio (median of per-round ratios)")
    for ax in (left, right):
        ax.set_xlabel("tuning trials spent")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{data['model']}: graph.autotune at {level}, {data['threads']} thread(s), "
                 f"{data['rounds']} rounds per point")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="squeezenet")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--step", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=8, help="trials per scheduler round")
    p.add_argument("--level", default="O2")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--log", default=None, help="tuning log to keep (default: a fresh "
                   "temporary one)")
    p.add_argument("--out", default=None,
                   help="output prefix (default benchmarks/graph_tune_<model>)")
    args = p.parse_args(argv)
    if args.step < 1 or args.trials < args.step:
        p.error(f"--step must be >= 1 and <= --trials, got --step {args.step} --trials "
                f"{args.trials}")
    # the measurement workers inherit it: they time kernels with the threads of the runs
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    prefix = args.out or os.path.join(HERE, f"graph_tune_{args.model}")
    with tempfile.TemporaryDirectory(prefix="graph_tune_") as tmp:
        # a fresh log unless --log names one to keep (or to resume: the trials it holds
        # count, so the plot then starts where it left off)
        args.log = args.log or os.path.join(tmp, "tune.jsonl")
        data = measure(args)
    with open(prefix + ".json", "w") as fh:
        json.dump(data, fh, indent=1)
    plot(data, prefix + ".png")
    print(data["table"])
    print(f"wrote {prefix}.json and {prefix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
