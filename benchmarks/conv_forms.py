"""The conv2d GEMM's forms against each other, per conv and per model (the 'cvec' form
against the rows form, on the host's vector width): `python benchmarks/conv_forms.py [--model
resnet50] [--threads 1] [--rounds 9]` per conv, `... --whole` for the whole model.

Per conv: each groups-1 conv workload of the model that the strategy gives the cvec form,
built as graph.compile builds a conv + relu (weights pre-packed), in the rows form
(te.autotune.conv2d.CVEC_ON off) and in the cvec form with its heuristic layout and each
other layout (its default reduction order), rounds alternating, three calls per round;
minimum per candidate (process CPU time at 1 thread, wall time above), and its ratio to
the rows form (< 1: cvec faster). `--whole`: the model compiled at O2 both ways (cache off)
and onnxruntime, alternating runs; medians, and the ratio to onnxruntime (> 1: we are
faster). Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
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
from te.autotune import conv2d as C  # noqa: E402
from te.autotune.conv2d_space import conv2d_schedule, conv2d_space  # noqa: E402


def build(xs, ws, attr, cvec: bool, layout: str | None = None):
    """(fn, weight-pack fn, packed shape, output shape, layouts) of the conv + relu, the
    strategy's form with cvec on or off; `layout` instead of the heuristic's."""
    C.CVEC_ON = cvec
    try:
        fn, pack, shape, conv = graph_convs.build(xs, ws, attr)
        if layout is None:
            out = None
        else:   # rebuild the same stages with `layout` forced
            X = te.placeholder(xs, name="X")
            packed = te.placeholder(shape, name="Wp")
            conv = te.autotune.conv2d_compute(X, te.placeholder(ws, name="W"),
                                              attr["strides"], attr["padding"],
                                              attr["dilation"], attr["groups"], packed=packed)
            out = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu",
                             tag="elemwise")
            space = conv2d_space(out)
            assert layout in space.knobs["layout"].options, (layout, xs, ws)
            cfg = te.autotune.ConfigEntity(space, dict(space.default().values, layout=layout))
            fn = te.build(conv2d_schedule(cfg, out), [X, packed, out])
        return fn, pack, shape, tuple(int(d.value) for d in conv.shape)
    finally:
        C.CVEC_ON = True


def layouts_of(xs, ws, attr, shape) -> list:
    """The 'layout' options of the conv's space (the GEMM form the strategy gives it,
    cvec where CVEC_ON allows) reading weights packed as `shape`."""
    X = te.placeholder(xs, name="X")
    conv = te.autotune.conv2d_compute(X, te.placeholder(ws, name="W"), attr["strides"],
                                      attr["padding"], attr["dilation"], attr["groups"],
                                      packed=te.placeholder(shape, name="Wp"))
    return list(conv2d_space(conv).knobs["layout"].options)


def per_conv(model: str, threads: int, rounds: int) -> None:
    clock = time.process_time if threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    print("| conv (data, weight, stride) | count | rows ms | cvec layouts: ms (x rows) |")
    print("|---|---|---|---|")
    total = {"rows": 0.0, "cvec": 0.0}
    for xs, ws, attr, count in graph_convs.conv_workloads(model):
        form = te.autotune.conv2d_gemm_form(xs, ws, attr["strides"], attr["padding"],
                                            attr["dilation"], attr["groups"])
        if form is None or form[0] != "cvec":
            continue
        x = rng.standard_normal(xs, dtype=np.float32)
        w = rng.standard_normal(ws, dtype=np.float32)
        cands = {"rows": build(xs, ws, attr, False)}
        for layout in layouts_of(xs, ws, attr, build(xs, ws, attr, True)[2]):
            cands[layout] = build(xs, ws, attr, True, layout)
        runs, want = {}, None
        for key, (fn, pack, shape, oshape) in cands.items():
            wk = np.empty(shape, np.float32)
            pack(w, wk)
            y = np.empty(oshape, np.float32)
            fn(x, wk, y)
            if want is None:
                want = y.copy()
            np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
            runs[key] = (fn, wk, y)
        times = {k: [] for k in runs}
        for _ in range(rounds):
            for key, (fn, wk, y) in runs.items():
                t0 = clock()
                for _ in range(3):
                    fn(x, wk, y)
                times[key].append((clock() - t0) / 3)
        best = {k: min(v) for k, v in times.items()}
        default = list(runs)[1]
        total["rows"] += best["rows"] * count
        total["cvec"] += best[default] * count
        cells = ", ".join(f"{'**' + k + '**' if k == default else k}: {v * 1e3:.3f} "
                          f"({v / best['rows']:.2f})" for k, v in best.items() if k != "rows")
        print(f"| {xs}, {ws}, {attr['strides'][0]} | {count} | {best['rows'] * 1e3:.3f} | "
              f"{cells} |", flush=True)
    print(f"| all (x count, heuristic layout) | | {total['rows'] * 1e3:.2f} | "
          f"{total['cvec'] * 1e3:.2f} ({total['cvec'] / max(total['rows'], 1e-12):.2f}) |")


def whole(model_name: str, threads: int, rounds: int) -> None:
    import graph
    model, feeds = graph_run.load_model(model_name)
    g = graph.from_onnx(model)
    mods = {}
    for cvec in (False, True):
        C.CVEC_ON = cvec
        mods["cvec" if cvec else "rows"] = graph.compile(g, level="O2", cache=False)
    sess = graph_run.ort_session(model, threads)
    refs = sess.run(None, feeds)
    for key, mod in mods.items():
        for o, r in zip(mod.run(feeds), refs):
            np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-3 * max(1.0, np.abs(r).max()),
                                       err_msg=key)
    times = {"onnxruntime": [], **{k: [] for k in mods}}
    for _ in range(rounds):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times["onnxruntime"].append(time.perf_counter() - t0)
        time.sleep(graph_run.SETTLE_S)
        for key, mod in mods.items():
            t0 = time.perf_counter()
            mod.run(feeds)
            times[key].append(time.perf_counter() - t0)
    ort_ms = statistics.median(times["onnxruntime"]) * 1e3
    print(f"| {model_name}, {threads} thread(s) | ms (median) | x onnxruntime |\n|---|---|---|")
    for key, ts in times.items():
        ms = statistics.median(ts) * 1e3
        print(f"| {key} | {ms:.2f} | {ort_ms / ms:.3f}x |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--whole", action="store_true", help="the whole model at O2, both ways")
    a = ap.parse_args(argv)
    runtime.set_num_threads(a.threads)
    if a.whole:
        whole(a.model, a.threads, a.rounds)
    else:
        per_conv(a.model, a.threads, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
