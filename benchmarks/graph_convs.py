"""Each distinct conv of a model, alone, against onnxruntime running that one Conv:
`python benchmarks/graph_convs.py [--model resnet50] [--threads 1] [--rounds 7]`.

Takes a model of benchmarks/graph_run.py; gives, per conv workload (input shape, weight
shape, strides, padding, groups) and in the graph's order: how often it occurs, the form the
conv2d strategy picks, our median time (te.build of te.autotune.conv2d_compute +
schedule_conv2d, no epilogue), onnxruntime's median for a one-node Conv model (weights an
initializer, as in the model) with the same thread count, alternating round by round, the
ratio (onnxruntime / ours), GFLOP/s and the compile time; then the count-weighted totals.
Prints a markdown table.
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

import graph  # noqa: E402
import graph_run  # noqa: E402
import runtime  # noqa: E402
import te  # noqa: E402


def conv_workloads(name: str) -> list:
    """[(data shape, weight shape, attrs, count)] of the model's conv2d nodes, in order."""
    model, _ = graph_run.load_model(name)
    seen: dict = {}
    for node in graph.from_onnx(model).nodes:
        if node.op == "conv2d":
            key = (tuple(node.inputs[0].shape), tuple(node.inputs[1].shape),
                   tuple(sorted((k, str(v)) for k, v in node.attr.items())))
            seen.setdefault(key, [key[0], key[1], dict(node.attr), 0])[3] += 1
    return list(seen.values())


def ort_conv(xs, w, attr, threads):
    """A one-node onnxruntime session computing the conv (no bias), the weights an
    initializer as in a model (onnxruntime packs them once, at session creation)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    t, left, b, r = attr["padding"]
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=list(attr["strides"]),
                            pads=[t, left, b, r], dilations=list(attr["dilation"]),
                            group=attr["groups"])
    g = helper.make_graph([node], "conv", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def measure(xs, ws, attr, threads: int, rounds: int) -> dict:
    X = te.placeholder(xs, name="X")
    W = te.placeholder(ws, name="W")
    conv = te.autotune.conv2d_compute(X, W, attr["strides"], attr["padding"],
                                      attr["dilation"], attr["groups"])
    t0 = time.perf_counter()
    fn = te.build(te.autotune.schedule_conv2d(conv), [X, W, conv])
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    y = np.empty(tuple(int(d.value) for d in conv.shape), np.float32)
    sess = ort_conv(xs, w, attr, threads)
    feeds = {"x": x}
    want = sess.run(None, feeds)[0]
    fn(x, w, y)
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    ours, theirs = [], []
    evaluator = fn.time_evaluator(number=3, repeat=1)
    for _ in range(rounds):
        ours.append(evaluator(x, w, y).median)
        t0 = time.perf_counter()
        for _ in range(3):
            sess.run(None, feeds)
        theirs.append((time.perf_counter() - t0) / 3)
    flops = 2.0 * y.size * np.prod(ws[1:])
    return {"ours": statistics.median(ours), "ort": statistics.median(theirs),
            "ratio": statistics.median(o / t for o, t in zip(theirs, ours)),
            "gflops": flops / statistics.median(ours) / 1e9, "compile_s": compile_s,
            "form": conv.op.tag}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    runtime.set_num_threads(a.threads)
    head = ["data", "weight", "stride", "pad", "groups", "count", "form", "ours ms",
            "onnxrt ms", "x onnxrt", "GFLOP/s", "compile s"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
    total = {"ours": 0.0, "ort": 0.0, "compile_s": 0.0}
    for xs, ws, attr, count in conv_workloads(a.model):
        r = measure(xs, ws, attr, a.threads, a.rounds)
        for k in total:
            total[k] += r[k] * (count if k != "compile_s" else 1)
        form = {"conv2d_gemm_crop": "gemm"}.get(r["form"], "direct")
        if form == "gemm" and ws[2:] == (1, 1) and attr["groups"] == 1:
            form = "gemm 1x1"
        print(f"| {xs} | {ws} | {attr['strides'][0]} | {attr['padding'][0]} | "
              f"{attr['groups']} | {count} | {form} | {r['ours'] * 1e3:.3f} | "
              f"{r['ort'] * 1e3:.3f} | {r['ratio']:.2f}x | {r['gflops']:.0f} | "
              f"{r['compile_s']:.2f} |", flush=True)
    print(f"| all convs (x count) | | | | | | | {total['ours'] * 1e3:.1f} | "
          f"{total['ort'] * 1e3:.1f} | {total['ort'] / total['ours']:.2f}x | | "
          f"{total['compile_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
