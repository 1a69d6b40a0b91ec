"""Every 'layout' of each conv's schedule space, at 1 and 2 threads:
`python benchmarks/conv_layouts.py [--model resnet50] [--only "(1, 512, 7, 7)"] [--rounds 9]
[--cold]`.

Per conv workload of a model of benchmarks/graph_run.py (built as graph.compile builds a
conv + relu, weights pre-packed, in the form the strategy picks), every option of its
'layout' knob with the other knobs at their defaults; each checked against the first.
Rounds alternate thread counts and layouts; after each change of thread count every
candidate runs once untimed (the first call after it wakes the pool's threads, which would
be charged to whichever candidate came first). Prints, per conv and layout, the median
wall time of three calls at 1 / 2 threads and the speedup; the heuristic's layout first.
--cold: each call timed alone after writing EVICT_BYTES (more than the L3) to another
buffer, so that the weights come from DRAM as they do in a model (whose weights are
larger than the L3); the input and output are written again first (as a model's previous
kernel leaves its output in cache) and not timed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import conv_forms  # noqa: E402
import graph_convs  # noqa: E402
import graph_run  # noqa: E402
import runtime  # noqa: E402

THREADS = (1, 2)
EVICT_BYTES = 96 << 20


def candidates(xs, ws, attr):
    """(weight-pack fn, packed shape, {layout: fn}, output shape) of the conv + relu in the
    strategy's own form (conv_forms.build with the cvec form allowed), or None where its
    space has no 'layout' knob (the direct forms)."""
    _, pack, shape, oshape = conv_forms.build(xs, ws, attr, True)
    if shape is None:
        return None
    layouts = conv_forms.layouts_of(xs, ws, attr, shape)
    fns = {layout: conv_forms.build(xs, ws, attr, True, layout)[0] for layout in layouts}
    return pack, shape, fns, oshape


def timed(fn, args, evict) -> float:
    """Seconds of one call of fn(*args): the mean of three calls back to back, or with
    `evict` (a buffer larger than the L3) the median of three calls each after writing it
    and then the call's input and output (args[0] and args[-1])."""
    if evict is None:
        t0 = time.perf_counter()
        for _ in range(3):
            fn(*args)
        return (time.perf_counter() - t0) / 3
    runs = []
    for _ in range(3):
        evict += 1.0
        args[0][...] += 0.0
        args[-1][...] = 0.0
        t0 = time.perf_counter()
        fn(*args)
        runs.append(time.perf_counter() - t0)
    return sorted(runs)[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--only", default="", help="convs whose '(data) (weight) s<stride>' "
                    "contains this text")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cold", action="store_true",
                    help="weights from DRAM: caches evicted before each call")
    a = ap.parse_args(argv)
    evict = np.ones(EVICT_BYTES // 4, np.float32) if a.cold else None
    rng = np.random.default_rng(0)
    print("| conv (data, weight, stride) | count | layout: 1 / 2 threads ms (speedup) |")
    print("|---|---|---|")
    for xs, ws, attr, count in graph_convs.conv_workloads(a.model):
        name = f"{xs} {ws} s{attr['strides'][0]}"
        built = candidates(xs, ws, attr) if a.only in name else None
        if built is None:
            continue
        pack, shape, fns, oshape = built
        x = rng.standard_normal(xs, dtype=np.float32)
        wk = np.empty(shape, np.float32)
        pack(rng.standard_normal(ws, dtype=np.float32), wk)
        y = np.empty(oshape, np.float32)
        want = None
        for fn in fns.values():
            fn(x, wk, y)
            want = y.copy() if want is None else want
            np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
        times = {(k, t): [] for k in fns for t in THREADS}
        for _ in range(a.rounds):
            for t in THREADS:
                runtime.set_num_threads(t)
                for fn in fns.values():
                    fn(x, wk, y)
                for k, fn in fns.items():
                    times[(k, t)].append(timed(fn, (x, wk, y), evict))
        med = {key: float(np.median(v)) for key, v in times.items()}
        cells = ", ".join(f"{k}: {med[(k, 1)] * 1e3:.3f} / {med[(k, 2)] * 1e3:.3f} "
                          f"({med[(k, 1)] / med[(k, 2)]:.2f})" for k in fns)
        print(f"| {name} | {count} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
