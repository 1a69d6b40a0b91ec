"""Each 3x3 conv that pass winograd_rows rewrites, in the model, with and without it:
`python benchmarks/winograd_profile.py [--model resnet50] [--threads 1] [--rounds 7]`.

Compiles the model at O1 twice without the kernel cache (graph.passes.winograd.WINOGRAD_ON
off, then on), then profiles the two modules alternately (Module.profile, `--rounds`
times each, the order reversed every other round). For each rewritten conv (the input
transform, the grouped 1x3 conv and the output transform with what fused into it, against
the direct conv's kernel with the same fused ops, matched by the kernel's node name) prints
the medians and the ratio, grouped by shape, then the totals of the whole modules.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
from collections import defaultdict

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import graph  # noqa: E402
import graph_run  # noqa: E402
import runtime  # noqa: E402
from graph.passes import optimize  # noqa: E402

WINOGRAD = importlib.import_module("graph.passes.winograd")


def compile_both(model) -> dict:
    mods = {}
    try:
        for on in (False, True):
            WINOGRAD.WINOGRAD_ON = on
            mods[on] = graph.compile(graph.from_onnx(model), level="O1", cache=False)
    finally:
        WINOGRAD.WINOGRAD_ON = True
    return mods


def profile_rows(m, feeds) -> list:
    """[(node, ops, seconds)] of one profiled run, in step order."""
    return [(node, ops, t) for _, ops, node, t in m.profile(feeds, repeat=1).rows]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    runtime.set_num_threads(a.threads)
    model, feeds = graph_run.load_model(a.model)
    mods = compile_both(model)
    for m in mods.values():
        m.run(feeds)
    times = {on: defaultdict(list) for on in mods}
    order = [False, True]
    for r in range(a.rounds):
        for on in (order if r % 2 == 0 else order[::-1]):
            for k, (node, _, t) in enumerate(profile_rows(mods[on], feeds)):
                times[on][(k, node)].append(t)
    med = {on: {key: statistics.median(ts) for key, ts in times[on].items()} for on in mods}
    direct = {node: t for (_, node), t in med[False].items()}
    shapes = {v.name: v for v in optimize(graph.from_onnx(model)).values()}
    rows = defaultdict(lambda: [0, 0.0, 0.0])
    steps = sorted(med[True].items())
    for i, ((_, node), t) in enumerate(steps):
        if not node.endswith("/winograd_input"):
            continue
        (_, conv), t_conv = steps[i + 1]
        (_, out), t_out = steps[i + 2]
        src = shapes[node].shape
        key = (src[1] // 6, tuple(shapes[out].shape[1:]))   # input channels, output CHW
        rows[key][0] += 1
        rows[key][1] += direct[out]
        rows[key][2] += t + t_conv + t_out
    print(f"{a.model}, {a.threads} thread(s), {a.rounds} rounds: medians of Module.profile")
    print("| input channels | output (C, H, W) | count | direct ms | winograd rows ms | ratio |")
    print("|---|---|---|---|---|---|")
    for (ci, chw), (count, d, w) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"| {ci} | {chw} | {count} | {d * 1e3:.3f} | {w * 1e3:.3f} | {w / d:.2f} |")
    total = {on: sum(med[on].values()) for on in mods}
    print(f"| all rewritten | | {sum(r[0] for r in rows.values())} | "
          f"{sum(r[1] for r in rows.values()) * 1e3:.2f} | "
          f"{sum(r[2] for r in rows.values()) * 1e3:.2f} | "
          f"{sum(r[2] for r in rows.values()) / sum(r[1] for r in rows.values()):.2f} |")
    print(f"whole module (sum of kernels): {total[False] * 1e3:.2f} ms without, "
          f"{total[True] * 1e3:.2f} ms with ({total[True] / total[False]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
