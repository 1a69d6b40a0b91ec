"""Pools of the model zoo's CNNs, alone, against onnxruntime running that one MaxPool or
AveragePool node: our kernel (te.autotune.schedule_pool2d over the compute graph.compile
uses) and the node's own time in onnxruntime's profile (a one-node session's total also
converts layouts). Checks the result against onnxruntime first.

    python benchmarks/graph_pools.py [--threads 1] [--rounds 15] [--best]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import runtime  # noqa: E402
import te  # noqa: E402
from te.compute import ops  # noqa: E402

# (model, kind, input CHW, kernel, stride, pads (top, left, bottom, right), count_include_pad)
# ceil_mode pools appear as the extra end padding graph's onnx frontend gives them
POOLS = [
    ("resnet50/densenet121 stem", "max", (64, 112, 112), 3, 2, (1, 1, 1, 1), False),
    ("inception_v1 stem (ceil)", "max", (64, 112, 112), 3, 2, (0, 0, 1, 1), False),
    ("inception_v1 branch", "max", (192, 28, 28), 3, 1, (1, 1, 1, 1), False),
    ("squeezenet1.0 (ceil)", "max", (96, 109, 109), 3, 2, (0, 0, 0, 0), False),
    ("alexnet", "max", (96, 54, 54), 3, 2, (0, 0, 0, 0), False),
    ("vgg19", "max", (64, 224, 224), 2, 2, (0, 0, 0, 0), False),
    ("densenet121 transition", "avg", (128, 56, 56), 2, 2, (0, 0, 0, 0), False),
    ("inception_v2 branch", "avg", (192, 28, 28), 3, 1, (1, 1, 1, 1), False),
    ("avg include pad", "avg", (64, 56, 56), 3, 1, (1, 1, 1, 1), True),
]


def ort_pool(kind, xs, k, s, pads, include, threads):
    import onnxruntime as ort
    from onnx import TensorProto, helper
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [pads[0], pads[1], pads[2],
                                                                 pads[3]]}
    if kind == "avg":
        attrs["count_include_pad"] = int(include)
    node = helper.make_node("MaxPool" if kind == "max" else "AveragePool", ["x"], ["y"],
                            **attrs)
    g = helper.make_graph([node], "pool", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *xs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.gettempdir(), "graph_pools_ort")
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def node_times(sess, op_name) -> list:
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    return [e["dur"] * 1e-6 for e in events if e.get("cat") == "Node"
            and e["name"].endswith("_kernel_time") and e["args"].get("op_name") == op_name]


def measure(kind, xs, k, s, pads, include, threads, rounds, best):
    stat = min if best else statistics.median
    X = te.placeholder((1, *xs), name="X")
    if kind == "max":
        out = ops.max_pool2d_phased(X, k, s, pads)
    else:
        out = ops.avg_pool2d_phased(X, k, s, pads, include)
    fn = te.build(te.autotune.schedule_pool2d(out), [X, out])
    x = np.random.default_rng(0).standard_normal((1, *xs), dtype=np.float32)
    y = np.empty(tuple(int(d.value) for d in out.shape), np.float32)
    sess = ort_pool(kind, xs, k, s, pads, include, threads)
    want = sess.run(None, {"x": x})[0]
    fn(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    evaluator = fn.time_evaluator(number=10, repeat=3)
    ours = []
    for _ in range(rounds):
        ours.append(stat(evaluator(x, y).results))
        for _ in range(3):
            sess.run(None, {"x": x})
    node = node_times(sess, "MaxPool" if kind == "max" else "AveragePool")[-3 * rounds:]
    return stat(ours), stat(node)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--best", action="store_true",
                    help="minimums over the rounds instead of medians (a loaded machine)")
    ap.add_argument("--only", default="", help="run the pools whose name contains this")
    args = ap.parse_args(argv)
    runtime.set_num_threads(args.threads)
    print(f"{'pool':28s} {'kind':4s} {'input':>14s} k s {'ours ms':>8s} {'ort ms':>8s} "
          f"{'ort/ours':>8s}")
    for name, kind, xs, k, s, pads, include in POOLS:
        if args.only not in name:
            continue
        ours, node = measure(kind, xs, k, s, pads, include, args.threads, args.rounds,
                             args.best)
        print(f"{name:28s} {kind:4s} {'x'.join(map(str, xs)):>14s} {k} {s} "
              f"{ours * 1e3:8.3f} {node * 1e3:8.3f} {node / ours:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
