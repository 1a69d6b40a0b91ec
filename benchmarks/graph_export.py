"""An exported O2 model loaded in a fresh process: `OMP_NUM_THREADS=1 python
benchmarks/graph_export.py [--models resnet50,squeezenet] [--rounds 9] [--rss-runs 12]`.

Per model: compile at O2 (kernels from the compile cache when there), export_library to a
temporary directory (the time, the library's and the weights' sizes), then a fresh Python
process that imports graph, loads the model and runs it once: its import and load times,
its resident memory (VmRSS) before the load, after it, after the run and after a second
run, its peak (VmHWM),
the growth against the plan (weights + arena + the outputs), the growth at load and after the
run split into private (RssAnon) and file-backed (RssFile: the mapped weights, shared by
every process that loads the model) memory, and whether it imported any
of the compiler (te, onnx, llvmlite: it must not). Back in this process the loaded module
and the O2 module run in alternating rounds (medians; the same kernels, so their ratio
says what the export costs at run time) and give bit-identical outputs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "graph")]

import numpy as np  # noqa: E402

import graph  # noqa: E402

MiB = 1 << 20

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import graph

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

imported = time.perf_counter() - t0
feeds = dict(np.load(sys.argv[2]))
before = status("VmRSS:")
split = [(status("RssAnon:"), status("RssFile:"))]
t1 = time.perf_counter()
m = graph.load_module(sys.argv[1])
loaded = time.perf_counter() - t1
after_load = status("VmRSS:")
split.append((status("RssAnon:"), status("RssFile:")))
t2 = time.perf_counter()
outs = m.run(feeds)
first_run = time.perf_counter() - t2
split.append((status("RssAnon:"), status("RssFile:")))
series = [status("VmRSS:")]
for _ in range(int(sys.argv[4]) - 1):
    m.run(feeds)
    series.append(status("VmRSS:"))
want = np.load(sys.argv[3])
same = all(np.array_equal(a, want[f"arr_{k}"]) for k, a in enumerate(outs))
compiler = sorted(n for n in sys.modules if n.split(".")[0] in ("te", "onnx", "llvmlite"))
print(json.dumps(dict(imported=imported, loaded=loaded, first_run=first_run, before=before,
                      after_load=after_load, split=split, series=series,
                      peak=status("VmHWM:"),
                      weights=m.weights_bytes, arena=m.arena_bytes,
                      outputs=sum(a.nbytes for a in outs), same=same, compiler=compiler)))
"""


def load(name: str):
    from onnx_cases import light_model
    model, feeds = light_model(name)
    return graph.from_onnx(model), feeds


def _timed(fn, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - start) / runs


def fresh_process(path: str, tmp: str, runs: int, env: dict | None = None) -> dict:
    child = subprocess.run([sys.executable, "-c", CHILD, path, os.path.join(tmp, "feeds.npz"),
                            os.path.join(tmp, "want.npz"), str(runs)],
                           capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))
    if child.returncode:
        raise SystemExit(child.stderr)
    return json.loads(child.stdout)


# --rss-runs: the environments the growth per run is followed in (a fixed mmap threshold
# makes glibc give freed blocks above it back to the OS)
RSS_ENVS = ({"OMP_NUM_THREADS": "1"},
            {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"},
            {"OMP_NUM_THREADS": "2"})


def measure(name: str, rounds: int, rss_runs: int = 0) -> dict:
    g, feeds = load(name)
    start = time.perf_counter()
    m = graph.compile(g, level="O2")
    compiled = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="graph_export_bench_") as tmp:
        path = os.path.join(tmp, f"{name}.so")
        start = time.perf_counter()
        m.export_library(path)
        exported = time.perf_counter() - start
        want = m.run(feeds)
        np.savez(os.path.join(tmp, "feeds.npz"), **feeds)
        np.savez(os.path.join(tmp, "want.npz"), *want)
        fresh = fresh_process(path, tmp, 2)
        series = {}
        for env in RSS_ENVS if rss_runs else ():
            r = fresh_process(path, tmp, rss_runs, env)
            plan = r["weights"] + r["arena"] + r["outputs"]
            series[" ".join(f"{k}={v}" for k, v in env.items())] = (
                (r["after_load"] - r["before"] - r["weights"]) / MiB,
                [(rss - r["before"] - plan) / MiB for rss in r["series"]])
        loaded = graph.load_module(path)
        for a, b in zip(loaded.run(feeds), want):
            assert np.array_equal(a, b), name
        probe = _timed(lambda: m.run(feeds), 1)
        runs = max(1, min(50, int(0.3 / max(probe, 1e-6))))
        o2, lo = [], []
        for _ in range(rounds):
            o2.append(_timed(lambda: m.run(feeds), runs))
            lo.append(_timed(lambda: loaded.run(feeds), runs))
        sizes = (os.path.getsize(path), os.path.getsize(path + ".weights"))
    # kernels that malloc scratch buffers of their own (not in the arena's plan)
    heap = sum(1 for c in m.calls if c.kernel.func.signature.heap_buffers)
    return dict(model=name, calls=len(m.calls), heap_calls=heap, compile_s=compiled,
                export_s=exported, so_bytes=sizes[0],
                weights_file=sizes[1], o2_ms=1e3 * statistics.median(o2),
                loaded_ms=1e3 * statistics.median(lo),
                ratio=statistics.median(b / a for a, b in zip(o2, lo)), rss_series=series,
                **fresh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rss-runs", type=int, default=0,
                        help="also run N times in fresh processes (1 thread, 1 thread with a "
                             "fixed malloc mmap threshold, 2 threads), printing the growth "
                             "beyond weights + arena + outputs after each run")
    args = parser.parse_args()
    print("| model | calls (with scratch) | compile s | export s | .so KiB | weights MiB | "
          "arena MiB | fresh import s | load s | first run ms | RSS before MiB | + load MiB | "
          "+ run MiB | growth - plan "
          "MiB | 2nd run MiB | peak MiB | O2 ms | loaded ms | loaded/O2 | compiler imported |")
    print("|" + "---|" * 20)
    notes = []
    for name in args.models.split(","):
        r = measure(name, args.rounds, args.rss_runs)
        plan = r["weights"] + r["arena"] + r["outputs"]
        print(f"| {name} | {r['calls']} ({r['heap_calls']}) | {r['compile_s']:.1f} | "
              f"{r['export_s']:.1f} | "
              f"{r['so_bytes'] / 1024:.0f} | {r['weights'] / MiB:.2f} | {r['arena'] / MiB:.2f} "
              f"| {r['imported']:.2f} | {r['loaded']:.2f} | {1e3 * r['first_run']:.1f} | "
              f"{r['before'] / MiB:.1f} | {(r['after_load'] - r['before']) / MiB:.2f} | "
              f"{(r['series'][0] - r['after_load']) / MiB:.2f} | "
              f"{(r['series'][0] - r['before'] - plan) / MiB:.2f} | "
              f"{(r['series'][1] - r['series'][0]) / MiB:.2f} | {r['peak'] / MiB:.1f} | "
              f"{r['o2_ms']:.2f} | {r['loaded_ms']:.2f} | {r['ratio']:.3f} | "
              f"{', '.join(r['compiler']) or 'none'} |", flush=True)
        assert r["same"] and not r["compiler"], r
        (anon0, file0), (anon1, file1), (anon2, file2) = r["split"]
        notes.append(f"{name}: load {r['loaded']:.3f} s; growth at load: private "
                     f"{(anon1 - anon0) / MiB:.2f} MiB, file-backed {(file1 - file0) / MiB:.2f} "
                     f"MiB; after the first run: private {(anon2 - anon0) / MiB:.2f} MiB, "
                     f"file-backed {(file2 - file0) / MiB:.2f} MiB")
        for env, (at_load, per_run) in r["rss_series"].items():
            notes.append(f"{name}, {env}: beyond the weights at load {at_load:.2f} MiB; "
                         f"beyond the plan after each run: "
                         f"{', '.join(f'{x:.2f}' for x in per_run)} MiB")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
