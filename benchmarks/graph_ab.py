"""One heuristic constant at two or more values, on a whole model at O2: `python
benchmarks/graph_ab.py --model resnet50 --threads 1,2 --rounds 25 --set
te.autotune.row_reduction.MIN_READER_ROWS=0,8`.

The model is compiled once per value (cache off; the constant set on its module while
graph.compile runs, then restored), each module's outputs checked against onnxruntime's,
then onnxruntime and the modules are timed in alternating rounds at each thread count (the
modules' order reversed every other round; each run once untimed first, and SETTLE_S after
onnxruntime's run, as graph_run.py does). Prints per value the median ms, the median of the
per-round ratios to the first value (< 1: faster) and onnxruntime's median / ours (> 1: we
are faster). On a shared machine only the same-process, same-round ratios mean much.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import graph_run  # noqa: E402


def parse_setting(text: str) -> tuple:
    """(module, attribute name, [values]) of 'package.module.NAME=v1,v2,...' (values as
    Python literals)."""
    target, _, values = text.partition("=")
    module_name, _, name = target.rpartition(".")
    if not module_name or not name or not values:
        raise SystemExit(f"--set: expected package.module.NAME=v1,v2, got {text!r}")
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise SystemExit(f"--set: {module_name} has no attribute {name!r}")
    return module, name, [ast.literal_eval(v) for v in values.split(",")]


def compile_each(g, module, name: str, values: list) -> dict:
    import graph
    saved = getattr(module, name)
    mods = {}
    try:
        for v in values:
            setattr(module, name, v)
            mods[v] = graph.compile(g, level="O2", cache=False)
    finally:
        setattr(module, name, saved)
    return mods


def time_at(model, feeds, mods: dict, threads: int, rounds: int) -> dict:
    import runtime
    runtime.set_num_threads(threads)
    sess = graph_run.ort_session(model, threads)
    refs = sess.run(None, feeds)
    for v, mod in mods.items():
        for out, ref in zip(mod.run(feeds), refs):
            np.testing.assert_allclose(out, ref, rtol=1e-3,
                                       atol=1e-3 * max(1.0, float(np.abs(ref).max())),
                                       err_msg=f"value {v!r}")
    times = {"onnxruntime": [], **{v: [] for v in mods}}
    for r in range(rounds):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times["onnxruntime"].append(time.perf_counter() - t0)
        time.sleep(graph_run.SETTLE_S)
        for v in (list(mods) if r % 2 == 0 else list(mods)[::-1]):
            mods[v].run(feeds)
            t0 = time.perf_counter()
            mods[v].run(feeds)
            times[v].append(time.perf_counter() - t0)
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--set", required=True, dest="setting",
                    help="package.module.NAME=v1,v2,... (Python literals)")
    args = ap.parse_args(argv)
    import graph
    module, name, values = parse_setting(args.setting)
    model, feeds = graph_run.load_model(args.model)
    mods = compile_each(graph.from_onnx(model), module, name, values)
    print(f"| {args.model}, {name} | threads | ms (median) | per round / {values[0]!r} | "
          f"onnxruntime / ours |\n|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        times = time_at(model, feeds, mods, threads, args.rounds)
        ort_ms = statistics.median(times["onnxruntime"]) * 1e3
        print(f"| onnxruntime | {threads} | {ort_ms:.2f} | | |")
        for v in values:
            ms = statistics.median(times[v]) * 1e3
            ratio = statistics.median(a / b for a, b in zip(times[v], times[values[0]]))
            print(f"| {v!r} | {threads} | {ms:.2f} | {ratio:.3f} | {ort_ms / ms:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
