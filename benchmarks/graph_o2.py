"""O2 against O1 on the same kernels, and the fixed cost of one O2 run: `python
benchmarks/graph_o2.py [--models squeezenet,shufflenet,resnet50,bert] [--rounds 15]`;
`--plans` prints the memory plans instead (no compile): per model the arena in each order
tried, the lower bounds, the naive total, and the arena without in-place reuse.

One thread (runtime.set_num_threads(1); run it with OMP_NUM_THREADS=1). Per model: compile
at O1 (kernels from the compile cache when there), wrap the same steps at O2 (graph.o2), check
that both give the same outputs, then time in alternating rounds, each a few runs of: O1
allocating (`Module.run(keep=True)`: the steps from Python, every value in a fresh array, as
every O1 run did before the planned arena), O1 (`Module.run`: a Python call per step over
the planned arena, fresh arrays for the outputs only), O2 (`run`: check feeds, allocate
outputs, one native call) and O2's native entry alone (the kernels and the driver's calls,
no Python). Prints per model the medians, O1 allocating / O1, O1 / O2, and the fixed cost
of an O2 run beyond its kernels: the median over pairs (a run, then a bare entry call, back
to back) of their difference. Also the memory plan's arena against the lower bound and the
naive total. Model 'tiny' is one relu of 4 elements: its run is almost all fixed cost.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "graph")]

import numpy as np  # noqa: E402

import graph  # noqa: E402
import runtime  # noqa: E402
from graph.executor import Module  # noqa: E402
from graph.o2 import O2Module  # noqa: E402

MODELS = ["tiny", "squeezenet", "shufflenet", "resnet50", "bert"]
PLAN_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "bert", "squeezenet",
               "shufflenet"]


def load(name: str):
    if name == "tiny":  # one small kernel: what a run costs beyond it
        x = graph.input("x", (4,))
        return graph.Graph([graph.relu(x)]), {"x": np.ones(4, np.float32)}
    if name == "bert":
        from bert_layer import bert_layer
        return bert_layer()
    from onnx_cases import light_model
    return light_model(name)


def _timed(fn, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - start) / runs


def measure(name: str, rounds: int) -> dict:
    model, feeds = load(name)
    g = model if isinstance(model, graph.Graph) else graph.from_onnx(model)
    m1 = graph.compile(g, level="O1")
    m2 = O2Module(m1.graph, m1.steps, m1.target)
    Module.run(m2, feeds)  # plans m2's O1 arena (O1's run over the same steps), untimed
    for a, b in zip(m1.run(feeds), m2.run(feeds)):
        assert np.array_equal(a, b), name
    entry_args = m2._entry_args  # the bare native call, on the pointers the last run set
    probe = _timed(lambda: m2.run(feeds), 1)
    runs = max(1, min(200, int(0.05 / max(probe, 1e-6))))
    o1, alloc, o2, entry, fixed = [], [], [], [], []
    clock = time.perf_counter
    for _ in range(rounds):
        alloc.append(_timed(lambda: Module.run(m2, feeds, keep=True), runs))
        o1.append(_timed(lambda: Module.run(m2, feeds), runs))
        o2.append(_timed(lambda: m2.run(feeds), runs))
        held = m2.run(feeds)  # its outputs stay alive: the entry writes into them
        entry.append(_timed(lambda: m2._entry(*entry_args), runs))
        # the fixed cost: a run and a bare entry back to back, the difference of each pair
        # (machine noise drifts slower than one pair)
        del held
        for _ in range(runs):
            a = clock()
            held = m2.run(feeds)  # kept until the entry, which writes into its outputs
            b = clock()
            m2._entry(*entry_args)
            fixed.append((b - a) - (clock() - b))
            del held
    p = m2.memory_plan
    return {"model": name, "calls": len(m2.calls), "alloc": statistics.median(alloc),
            "alloc_ratio": statistics.median(a / b for a, b in zip(alloc, o1)),
            "o1": statistics.median(o1),
            "o2": statistics.median(o2), "entry": statistics.median(entry),
            "ratio": statistics.median(a / b for a, b in zip(o1, o2)),
            "fixed": statistics.median(fixed),
            "arena": p.arena_bytes, "lower": p.lower_bound, "naive": p.naive_bytes}


def plans(names: list) -> None:
    mib = 2**20
    print("| model | steps | order kept | arena MiB | lower bound MiB | given order: arena, "
          "lower bound MiB | greedy: arena, lower bound | depth first: arena, lower bound | "
          "naive MiB | no in-place: arena MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        model = load(name)[0]
        g = model if isinstance(model, graph.Graph) else graph.from_onnx(model)
        p = graph.plan_memory(g)
        flat = graph.plan_memory(g, inplace=False)
        tried = " | ".join(f"{a / mib:.2f}, {b / mib:.2f}" for _, a, b in p.tried)
        print(f"| {name} | {len(p.order)} | {p.heuristic} | {p.arena_bytes / mib:.2f} | "
              f"{p.lower_bound / mib:.2f} | {tried} | {p.naive_bytes / mib:.2f} | "
              f"{flat.arena_bytes / mib:.2f} |", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=None)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--plans", action="store_true", help="print the memory plans only")
    args = ap.parse_args(argv)
    if args.plans:
        plans((args.models or ",".join(PLAN_MODELS)).split(","))
        return
    args.models = args.models or ",".join(MODELS)
    runtime.set_num_threads(1)
    print("| model | calls | O1 allocating ms | O1 ms | allocating/O1 | O2 ms | O1/O2 | "
          "O2 entry ms | O2 fixed us | arena MiB | / lower bound | / naive |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        r = measure(name, args.rounds)
        print(f"| {r['model']} | {r['calls']} | {r['alloc'] * 1e3:.3f} | {r['o1'] * 1e3:.3f} | "
              f"{r['alloc_ratio']:.3f}x | {r['o2'] * 1e3:.3f} | "
              f"{r['ratio']:.3f}x | {r['entry'] * 1e3:.3f} | {r['fixed'] * 1e6:.1f} | "
              f"{r['arena'] / 2**20:.2f} | {r['arena'] / max(1, r['lower']):.3f} | "
              f"{r['arena'] / max(1, r['naive']):.3f} |", flush=True)


if __name__ == "__main__":
    main()
