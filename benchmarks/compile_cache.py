"""The compile cache on ResNet-50 (or another light model) at O1: `python
benchmarks/compile_cache.py [--model resnet50] [--level O1] [--repeat 3]`.

Each repeat compiles the model in three fresh processes: without the cache (TE_CACHE=0),
then with an empty cache directory (cold: every kernel built and stored), then again (warm:
every kernel loaded), and checks that all give the same outputs. Prints per repeat the
graph.compile time of each, warm / cold (the issue asks for <= 10%), cold / uncached (what
storing costs), and each process's wall time (interpreter start, imports, model loading).
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


def child(model: str, level: str, out: str) -> None:
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "graph")]
    import numpy as np

    import graph
    from onnx_cases import light_model
    onnx_model, feeds = light_model(model)
    g = graph.from_onnx(onnx_model)
    start = time.perf_counter()
    m = graph.compile(g, level=level)
    seconds = time.perf_counter() - start
    outs = m.run(feeds)
    np.save(out, outs[0])
    print(json.dumps({"compile_s": seconds, "kernels": m.num_kernels,
                      "stats": graph.cache.stats()}))


def run_child(model: str, level: str, cache: str, out: str, use: str = "1") -> dict:
    env = dict(os.environ, TE_CACHE_DIR=cache, TE_CACHE=use)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", model, level, out], env=env,
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--level", default="O1")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", nargs=3)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    import numpy as np
    ratios, costs = [], []
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="te_cache_bench_") as tmp:
            cache = os.path.join(tmp, "cache")
            plain = run_child(args.model, args.level, cache, os.path.join(tmp, "plain.npy"),
                              use="0")
            cold = run_child(args.model, args.level, cache, os.path.join(tmp, "cold.npy"))
            warm = run_child(args.model, args.level, cache, os.path.join(tmp, "warm.npy"))
            outs = [np.load(os.path.join(tmp, f"{n}.npy")) for n in ("plain", "cold", "warm")]
            same = all(np.array_equal(outs[0], o) for o in outs[1:])
        ratios.append(warm["compile_s"] / cold["compile_s"])
        costs.append(cold["compile_s"] / plain["compile_s"])
        print(f"repeat {k}: {args.model} {args.level}, {cold['kernels']} kernels: compile "
              f"uncached {plain['compile_s']:.2f} s, cold {cold['compile_s']:.2f} s "
              f"({costs[-1]:.2f}x uncached), warm {warm['compile_s']:.3f} s "
              f"({100 * ratios[-1]:.1f}% of cold); process uncached {plain['process_s']:.2f} "
              f"s, cold {cold['process_s']:.2f} s, warm {warm['process_s']:.2f} s; warm cache "
              f"stats {warm['stats']}; outputs equal: {same}")
    print(f"median warm/cold compile: {100 * statistics.median(ratios):.1f}%; median "
          f"cold/uncached: {statistics.median(costs):.2f}x")


if __name__ == "__main__":
    main()
