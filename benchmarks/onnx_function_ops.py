"""Ops imported as ONNX's function bodies (graph/frontend/onnx_function.py) against
onnxruntime's own kernels for them: opset-23 Attention at a BERT-base head shape (causal and
not) and SoftmaxCrossEntropyLoss, at O1 and O2, in the same run, interleaved rounds,
medians.

    python benchmarks/onnx_function_ops.py [--threads 1,2] [--rounds 9]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests",
                                                          "graph")]

import numpy as np  # noqa: E402

import graph_run  # noqa: E402


def cases():
    """(name, model, feeds) of each benchmarked op."""
    from onnx_cases import RNG, make_model, rand
    q, k, v = (rand(1, 12, 128, 64) for _ in range(3))
    yield ("Attention (1, 12, 128, 64)",) + make_model("Attention", [q, k, v], {}, opset=23)
    yield ("Attention (1, 12, 128, 64), causal",) + make_model(
        "Attention", [q, k, v], {"is_causal": 1}, opset=23)
    scores, labels = rand(64, 1000), RNG.integers(0, 1000, 64).astype(np.int64)
    yield ("SoftmaxCrossEntropyLoss (64, 1000)",) + make_model(
        "SoftmaxCrossEntropyLoss", [scores, labels], {"reduction": "mean"}, opset=13)


def _ms(fn, calls: int = 20) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def time_all(threads: int, rounds: int) -> None:
    """Every case at `threads`, set before anything is compiled or run: in one process, a
    switch from 1 thread to 2 after kernels had run left some matmuls at their 1-thread
    speed (seen in this benchmark's first version), so each count gets a process."""
    import graph
    import runtime
    runtime.set_num_threads(threads)
    for name, model, feeds in cases():
        g = graph.from_onnx(model)
        mods = {level: graph.compile(g, level=level) for level in ("O1", "O2")}
        sess = graph_run.ort_session(model, threads)
        ref = sess.run(None, feeds)
        for m in mods.values():  # the same numbers before any timing
            for ours, theirs in zip(m.run(feeds), ref):
                np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
        times = {"ort": [], "O1": [], "O2": []}
        for _ in range(rounds):
            times["ort"].append(_ms(lambda: sess.run(None, feeds)))
            for level, m in mods.items():
                times[level].append(_ms(lambda m=m: m.run(feeds)))
        med = {key: statistics.median(v) for key, v in times.items()}
        print(f"| {name} | {threads} | {med['ort']:.3f} | {med['O1']:.3f} | "
              f"{med['O2']:.3f} | {med['ort'] / med['O1']:.2f}x | "
              f"{med['ort'] / med['O2']:.2f}x |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        time_all(int(args.threads), args.rounds)
        return
    print("| op | threads | onnxruntime ms | O1 ms | O2 ms | O1 speed | O2 speed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for threads in args.threads.split(","):
        subprocess.run([sys.executable, __file__, "--child", "--threads", threads,
                        "--rounds", str(args.rounds)], check=True)


if __name__ == "__main__":
    main()
