"""Each distinct conv of a model, alone, against onnxruntime running that one Conv:
`python benchmarks/graph_convs.py [--model resnet50] [--threads 1] [--rounds 7]`.

Takes a model of benchmarks/graph_run.py; gives, per conv workload (input shape, weight
shape, strides, padding, groups) and in the graph's order: how often it occurs, the form the
conv2d strategy picks and its register tile, our median time (te.build of
te.autotune.conv2d_compute + schedule_conv2d with a relu epilogue, the weights pre-packed
as graph.compile packs them), onnxruntime's median for a one-node Conv + Relu model (weights
an initializer, as in the model) with the same thread count, alternating round by round:
the whole run, and its Conv node alone (its profile's kernel time: a one-node session also
converts NCHW to its blocked layout and back, which a model does once; above 1 thread
ours waits graph_run.SETTLE_S after onnxruntime's runs, whose workers spin), the ratio (the
node's time / ours), GFLOP/s and the compile time; then the count-weighted totals. Medians
(of the per-round ratios for the ratio), or with --best minimums over the rounds. Prints
a markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import graph  # noqa: E402
import graph_run  # noqa: E402
import runtime  # noqa: E402
import te  # noqa: E402
from te.compute import ops  # noqa: E402


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
    """A one-node onnxruntime session computing the conv (no bias) and a relu, the weights
    an initializer as in a model (onnxruntime packs them once, at session creation),
    profiling on (the Conv node's own time)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    t, left, b, r = attr["padding"]
    conv = helper.make_node("Conv", ["x", "w"], ["c"], strides=list(attr["strides"]),
                            pads=[t, left, b, r], dilations=list(attr["dilation"]),
                            group=attr["groups"])
    g = helper.make_graph([conv, helper.make_node("Relu", ["c"], ["y"])], "conv", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.gettempdir(), "graph_convs_ort")
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def conv_node_times(sess) -> list:
    """Seconds of each run's Conv kernel (the fused Conv + Relu node: op 'Conv' in the
    blocked layout, 'FusedConv' where onnxruntime keeps NCHW, as for grouped convs) in the
    session's profile, which is closed and deleted."""
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    return [e["dur"] * 1e-6 for e in events if e.get("cat") == "Node"
            and e["name"].endswith("_kernel_time")
            and e["args"].get("op_name") in ("Conv", "FusedConv")]


def build(xs, ws, attr):
    """(the module, the weight packing module or None, the packed weight's shape, the conv
    tensor) as graph.compile builds a conv + relu: the weights packed once when the GEMM
    form reads them packed."""
    X = te.placeholder(xs, name="X")
    W = te.placeholder(ws, name="W")
    mr = te.autotune.conv2d_weight_tile(xs, ws, attr["groups"], "float32", attr["strides"],
                                        attr["padding"], attr["dilation"])
    pack = packed = shape = None
    if mr is not None:
        P = ops.conv2d_pack_weight(W, attr["groups"], mr)
        pack = te.build(te.create_schedule(P.op), [W, P])
        shape = tuple(int(d.value) for d in P.shape)
        packed = te.placeholder(shape, name="Wp")
    conv = te.autotune.conv2d_compute(X, W, attr["strides"], attr["padding"],
                                      attr["dilation"], attr["groups"], packed=packed)
    out = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu",
                     tag="elemwise")
    fn = te.build(te.autotune.schedule_conv2d(out), [X, packed if mr else W, out])
    return fn, pack, shape, conv


def measure(xs, ws, attr, threads: int, rounds: int, best: bool = False) -> dict:
    """Times of one conv workload; medians over the rounds, or (best) minimums: on a
    shared, loaded machine a median measures the load, a minimum the undisturbed run."""
    stat = min if best else statistics.median
    t0 = time.perf_counter()
    fn, pack, packed_shape, conv = build(xs, ws, attr)
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    wk = w
    if pack is not None:
        wk = np.empty(packed_shape, np.float32)
        pack(w, wk)
    y = np.empty(tuple(int(d.value) for d in conv.shape), np.float32)
    sess = ort_conv(xs, w, attr, threads)
    feeds = {"x": x}
    want = sess.run(None, feeds)[0]
    fn(x, wk, y)
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    ours, theirs = [], []
    evaluator = fn.time_evaluator(number=1, repeat=3)
    for _ in range(rounds):
        ours.append(stat(evaluator(x, wk, y).results))
        t0 = time.perf_counter()
        for _ in range(3):
            sess.run(None, feeds)
        theirs.append((time.perf_counter() - t0) / 3)
        if threads > 1:   # its intra-op workers spin after a run, taking a core from ours
            time.sleep(graph_run.SETTLE_S)
    node = conv_node_times(sess)[-3 * rounds:]
    node = [stat(node[3 * k:3 * k + 3]) for k in range(rounds)]
    flops = 2.0 * y.size * np.prod(ws[1:])
    ratio = stat(node) / stat(ours) if best else stat(o / t for o, t in zip(node, ours))
    return {"ours": stat(ours), "ort": stat(theirs), "node": stat(node), "ratio": ratio,
            "gflops": flops / stat(ours) / 1e9, "compile_s": compile_s,
            "form": conv.op.tag,
            "tile": getattr(conv.op.input_tensors[0].op, "attrs", {}).get("tile")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=graph_run.MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--best", action="store_true",
                    help="minimums over the rounds instead of medians (a loaded machine)")
    a = ap.parse_args(argv)
    runtime.set_num_threads(a.threads)
    head = ["data", "weight", "stride", "pad", "groups", "count", "form", "ours ms",
            "onnxrt ms", "onnxrt Conv ms", "x onnxrt Conv", "GFLOP/s", "compile s"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
    total = {"ours": 0.0, "ort": 0.0, "node": 0.0, "compile_s": 0.0}
    for xs, ws, attr, count in conv_workloads(a.model):
        r = measure(xs, ws, attr, a.threads, a.rounds, a.best)
        for k in total:
            total[k] += r[k] * (count if k != "compile_s" else 1)
        form = "direct"
        if r["form"] == "conv2d_gemm_crop":
            form = "gemm " + ("1x1 " if ws[2:] == (1, 1) and attr["groups"] == 1 else "")
            form += "%dx%d" % r["tile"]
        print(f"| {xs} | {ws} | {attr['strides'][0]} | {attr['padding'][0]} | "
              f"{attr['groups']} | {count} | {form} | {r['ours'] * 1e3:.3f} | "
              f"{r['ort'] * 1e3:.3f} | {r['node'] * 1e3:.3f} | {r['ratio']:.2f}x | "
              f"{r['gflops']:.0f} | {r['compile_s']:.2f} |", flush=True)
    print(f"| all convs (x count) | | | | | | | {total['ours'] * 1e3:.1f} | "
          f"{total['ort'] * 1e3:.1f} | {total['node'] * 1e3:.1f} | "
          f"{total['node'] / total['ours']:.2f}x | | {total['compile_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
