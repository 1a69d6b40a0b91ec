"""Where graph.compile's time goes: `python benchmarks/compile_time.py [--models resnet50,bert]
[--levels O0,O1,O2] [--repeat 1]`.

For each model and level, in a fresh process each (nothing cached in memory, the disk cache
off: TE_CACHE=0), the CPU seconds of graph.compile, the kernels built, and how much of it is
LLVM (runtime.compile_llvm: LLVM's optimization passes and machine code) and which kernels
take longest there. Prints a markdown table. Compile time is CPU-bound and single-threaded:
compare CPU seconds, which another process on the machine disturbs less than wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from graph_run import load_model  # noqa: E402


def child(name: str, level: str) -> dict:
    import re

    import graph
    import runtime
    llvm_s, slowest = [], []
    compile_llvm = runtime.compile_llvm

    def timed(ll, **kw):
        t0 = time.process_time()
        lib = compile_llvm(ll, **kw)
        spent = time.process_time() - t0
        llvm_s.append(spent)
        match = re.search(r'define i32 @"?(\w+)', ll)
        slowest.append((spent, match.group(1) if match else "?"))
        return lib

    runtime.compile_llvm = timed   # what te.build and graph's O2 driver call
    model, _ = load_model(name)
    g = graph.from_onnx(model)
    t0 = time.process_time()
    mod = graph.compile(g, level=level, cache=False)
    total = time.process_time() - t0
    slowest.sort(reverse=True)
    return {"total": total, "llvm": sum(llvm_s), "kernels": mod.num_kernels,
            "slowest": [f"{n} {s:.2f}s" for s, n in slowest[:3]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert,squeezenet,inception_v1")
    ap.add_argument("--levels", default="O0,O1,O2")
    ap.add_argument("--repeat", type=int, default=1, help="processes per cell (median)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    env = dict(os.environ, TE_CACHE="0")
    print("| model | level | compile CPU s | LLVM CPU s | LLVM share | kernels | slowest in LLVM |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for level in args.levels.split(","):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, __file__, "--child", name, level],
                                     env=env, capture_output=True, text=True, check=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            total = statistics.median(r["total"] for r in runs)
            llvm = statistics.median(r["llvm"] for r in runs)
            print(f"| {name} | {level} | {total:.1f} | {llvm:.1f} | {llvm / total:.0%} | "
                  f"{runs[0]['kernels']} | {', '.join(runs[0]['slowest'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
