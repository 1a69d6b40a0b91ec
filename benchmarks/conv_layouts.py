"""Every 'layout' of each conv's schedule space, at 1 and 2 threads:
`python benchmarks/conv_layouts.py [--model resnet50] [--only "(1, 512, 7, 7)"] [--rounds 9]`.

Per conv workload of a model of benchmarks/graph_run.py (built as graph.compile builds a
conv + relu, weights pre-packed, in the form the strategy picks), every option of its
'layout' knob with the other knobs at their defaults; each checked against the first.
Rounds alternate thread counts and layouts; after each change of thread count every
candidate runs once untimed (the first call after it wakes the pool's threads, which would
be charged to whichever candidate came first). Prints, per conv and layout, the median
wall time of three calls at 1 / 2 threads and the speedup; the heuristic's layout first.
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

import graph_convs  # noqa: E402
import graph_run  # noqa: E402
import runtime  # noqa: E402
import te  # noqa: E402
from te.autotune.conv2d_space import conv2d_schedule, conv2d_space  # noqa: E402

THREADS = (1, 2)


def candidates(xs, ws, attr):
    """(weight-pack fn, packed shape, {layout: fn}, output shape) of the conv + relu."""
    _, pack, shape, _ = graph_convs.build(xs, ws, attr)
    X = te.placeholder(xs, name="X")
    packed = te.placeholder(shape, name="Wp")
    conv = te.autotune.conv2d_compute(X, te.placeholder(ws, name="W"), attr["strides"],
                                      attr["padding"], attr["dilation"], attr["groups"],
                                      packed=packed)
    out = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu",
                     tag="elemwise")
    space = conv2d_space(out)
    if "layout" not in space.knobs:
        return None
    fns = {}
    for layout in space.knobs["layout"].options:
        cfg = te.autotune.ConfigEntity(space, dict(space.default().values, layout=layout))
        fns[layout] = te.build(conv2d_schedule(cfg, out), [X, packed, out])
    return pack, shape, fns, tuple(int(d.value) for d in conv.shape)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--only", default="", help="convs whose '(data) (weight) s<stride>' "
                    "contains this text")
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args(argv)
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
                    t0 = time.perf_counter()
                    for _ in range(3):
                        fn(x, wk, y)
                    times[(k, t)].append((time.perf_counter() - t0) / 3)
        med = {key: float(np.median(v)) for key, v in times.items()}
        cells = ", ".join(f"{k}: {med[(k, 1)] * 1e3:.3f} / {med[(k, 2)] * 1e3:.3f} "
                          f"({med[(k, 1)] / med[(k, 2)]:.2f})" for k in fns)
        print(f"| {name} | {count} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
