"""Whole models through graph.compile against onnxruntime: `python benchmarks/graph_run.py
[--quick] [--models resnet50,bert] [--threads 1,2] [--rounds 7] [--out PATH]`.

For each model x thread count, one worker process (its OMP_NUM_THREADS fixed, so te's
libgomp pool and onnxruntime's intra-op pool get the same count) imports the model, compiles
it at every level graph.compile offers (timing each compile), checks each level's outputs
against onnxruntime's, then times the two sides in alternating rounds, one run each per
round. After onnxruntime's run each round waits SETTLE_S before timing ours: its intra-op
workers spin for tens of milliseconds after a run (its default, kept so that its time is its
usual one), and on a 2-core machine a spinning worker takes a core from whatever runs next
with 2 threads. Prints and writes (benchmarks/graph_results.md, which benchmarks/run.py puts into
RESULTS.md as its Graph section) a markdown table: median, spread ((max - min) / median of our
rounds), onnxruntime's median, ratio (onnxruntime time / ours, median of per-round ratios:
> 1 means we are faster), compile seconds, kernel count and the max error. Levels the issue
asks for that graph.compile does not have yet are named under the table.

Models: the nine CNNs of onnx/backend/test/data/light with seeded random weights (the
loader tests/graph/onnx_cases.py, imported through sys.path; it stays with the tests) and
the BERT encoder layer of tests/graph/bert_layer.py, all at batch 1.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS_GRAPH = os.path.join(ROOT, "tests", "graph")

MODELS = ["resnet50", "bert", "squeezenet", "shufflenet", "inception_v1", "inception_v2",
          "densenet121", "bvlc_alexnet", "zfnet512", "vgg19"]
QUICK = ["resnet50", "bert", "squeezenet"]
WANTED_LEVELS = ("O0", "O1")          # what issue 16 asks for; more are run if they exist
SETTLE_S = 0.2  # seconds after onnxruntime's run: its spinning workers go to sleep meanwhile


def ort_session(model, threads: int):
    """onnxruntime's CPU session of `model` with `threads` intra-op threads (all its graph
    optimizations, its default)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def load_model(name: str):
    """(onnx model, feeds) of a benchmark model."""
    sys.path[:0] = [p for p in (ROOT, TESTS_GRAPH) if p not in sys.path]
    if name == "bert":
        from bert_layer import bert_layer
        return bert_layer()
    from onnx_cases import light_model
    return light_model(name)


def available_levels() -> tuple:
    import importlib
    return tuple(importlib.import_module("graph.compile").LEVELS)


def child(name: str, threads: int, rounds: int) -> dict:
    """Compile and time `name` at every level, alternating with onnxruntime."""
    import numpy as np

    import graph
    import runtime
    runtime.set_num_threads(threads)
    model, feeds = load_model(name)
    sess = ort_session(model, threads)
    refs = sess.run(None, feeds)
    g = graph.from_onnx(model)
    levels = {}
    for level in available_levels():
        t0 = time.perf_counter()
        mod = graph.compile(g, level=level)
        compile_s = time.perf_counter() - t0
        outs = mod.run(feeds)
        err = max(float(np.abs(o - r).max()) / max(1.0, float(np.abs(r).max()))
                  for o, r in zip(outs, refs))
        levels[level] = {"mod": mod, "compile_s": compile_s, "err": err, "times": [],
                         "kernels": mod.num_kernels}
    ort_times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ort_times.append(time.perf_counter() - t0)
        time.sleep(SETTLE_S)
        for entry in levels.values():
            t0 = time.perf_counter()
            entry["mod"].run(feeds)
            entry["times"].append(time.perf_counter() - t0)
    return {"model": name, "threads": threads, "ort": ort_times,
            "levels": {lv: {k: v for k, v in e.items() if k != "mod"}
                       for lv, e in levels.items()}}


def run_child(name: str, threads: int, rounds: int) -> dict:
    # TE_CACHE=0: the compile seconds are a compile's, not a load from the compile cache
    # (benchmarks/compile_cache.py measures that)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="passive", TE_CACHE="0",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                           "--threads", str(threads), "--rounds", str(rounds)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"graph_run: the worker for {name} ({threads} threads) failed:\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rows_of(result: dict) -> list:
    ort_med = statistics.median(result["ort"])
    rows = []
    for level, e in result["levels"].items():
        ts = e["times"]
        med = statistics.median(ts)
        ratio = statistics.median(o / t for o, t in zip(result["ort"], ts))
        rows.append([result["model"], str(result["threads"]), level, f"{e['compile_s']:.1f}",
                     f"{med * 1e3:.1f}", f"{(max(ts) - min(ts)) / med:.0%}",
                     f"{ort_med * 1e3:.1f}", f"{ratio:.2f}x", str(e["kernels"]),
                     f"{e['err']:.1e}"])
    return rows


GLOSS = ("Medians over alternating rounds (onnxruntime, then each level, one run each per "
         "round) in one worker process per model and thread count; `spread` is (max - min) / "
         "median of our rounds; `x onnxrt` is onnxruntime's time / ours, the median of the "
         "per-round ratios (> 1: we are faster); `compile s` is graph.compile's wall time; "
         "`max err` is max|ours - onnxruntime| / max(1, max|onnxruntime|) over the outputs.")
HEADER = ["model", "thr", "level", "compile s", "ours ms", "spread", "onnxrt ms",
          "x onnxrt", "kernels", "max err"]


def geomeans(rows: list) -> str:
    """Geometric mean of `x onnxrt` per thread count and level over the light ONNX models
    run (every model but the BERT layer: issue 18's "nine light models" target)."""
    groups: dict = {}
    for r in rows:
        if r[0] != "bert":
            groups.setdefault((r[1], r[2]), []).append(float(r[7].rstrip("x")))
    lines = [f"- {thr} thread{'s' if thr != '1' else ''}, {level}: "
             f"{math.exp(sum(map(math.log, v)) / len(v)):.3f}x over {len(v)} models"
             for (thr, level), v in sorted(groups.items())]
    return "Geometric mean of `x onnxrt` over the light models (all but bert):\n\n" + \
        "\n".join(lines) + "\n"


def markdown(rows: list) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    import platform

    import onnxruntime
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"Machine: {cpu}; {os.cpu_count()} logical cores; load average at start "
            f"{os.getloadavg()[0]:.2f}; Python {platform.python_version()}, onnxruntime "
            f"{onnxruntime.__version__}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK)} at 1 thread")
    ap.add_argument("--models", help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--threads", default=None, help="comma-separated counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds per side")
    ap.add_argument("--out", default=os.path.join(HERE, "graph_results.md"),
                    help="where the markdown table goes")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, int(a.threads), a.rounds)))
        return 0
    models = QUICK if a.quick else MODELS
    if a.models:
        models = [m.strip() for m in a.models.split(",") if m.strip()]
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            ap.error(f"--models: unknown {unknown}; choose from {MODELS}")
    threads = [int(t) for t in (a.threads or ("1" if a.quick else "1,2")).split(",")]
    levels = available_levels()
    missing = [lv for lv in WANTED_LEVELS if lv not in levels]
    print(f"levels: {', '.join(levels)}" + (f" (missing: {', '.join(missing)})" if missing
                                            else ""), flush=True)
    header = machine()
    print(header, flush=True)
    rows = []
    for name in models:
        for t in threads:
            for row in rows_of(run_child(name, t, a.rounds)):
                print("  ".join(row), flush=True)
                rows.append(row)
    table = markdown(rows) + "\n\n" + geomeans(rows)
    note = (f"\nLevels run: {', '.join(levels)}."
            + (f" Not in graph.compile yet: {', '.join(missing)}." if missing else "")
            + f" Load average at the end: {os.getloadavg()[0]:.2f}.\n")
    command = " ".join(["python benchmarks/graph_run.py", *(argv or sys.argv[1:])])
    with open(a.out, "w") as f:
        f.write(f"## Graph: whole models against onnxruntime\n\nCommand: `{command}` (from "
                f"the repository root)\n\n{header}\n\n{GLOSS}\n\n{table}\n{note}")
    print(table + "\n" + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
