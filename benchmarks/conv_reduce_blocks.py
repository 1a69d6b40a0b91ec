"""ResNet-50 at O1 with and without the conv 'reduce:<k>' layouts, against onnxruntime's
own per-node profile, in one process: `python benchmarks/conv_reduce_blocks.py THREADS
ROUNDS [reduce|cvec]`. With `cvec`, 'before' is the strategy without the conv GEMM's cvec
form (te.autotune.conv2d.CVEC_ON off: every conv in the rows or panels form) instead.

Compiles the model twice without the kernel cache ('before': the space offers no
'reduce:<k>' layout, so every conv takes the previous heuristic's layout; 'after': as
shipped), then per round profiles each module once (Module.profile, the order alternating)
and runs onnxruntime's session with profiling on, and times a whole run of each by process
CPU time. Prints the min whole-run CPU times and a markdown table per conv workload (input,
output, kernel): count and the summed per-node minimums (wall) of before, after and
onnxruntime's Conv kernels, the largest gap to onnxruntime first.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import defaultdict

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import graph  # noqa: E402
import runtime  # noqa: E402
import te.autotune.conv2d_space  # noqa: E402,F401
from graph_run import load_model  # noqa: E402

SPACE = sys.modules["te.autotune.conv2d_space"]


def conv_key(step) -> tuple:
    """(input CHW, output CHW, kernel size) of a conv step (the packed or plain weight)."""
    xs = tuple(int(d) for d in step.inputs[0].shape[1:])
    ys = tuple(int(d) for d in step.outputs[0].shape[1:])
    w = [tuple(int(d) for d in v.shape) for v in step.inputs[1:] if len(v.shape) in (4, 6)][0]
    return xs, ys, w[3] if len(w) == 6 else w[2]


def main(threads: int, rounds: int, toggle: str = "reduce") -> None:
    import onnxruntime as ort
    runtime.set_num_threads(threads)
    model, feeds = load_model("resnet50")
    after = graph.compile(graph.from_onnx(model), level="O1", cache=False)
    strategy = sys.modules["te.autotune.conv2d"]
    keep = SPACE._reduce_blocks
    if toggle == "cvec":
        strategy.CVEC_ON = False
    else:
        SPACE._reduce_blocks = lambda pack: []
    try:
        before = graph.compile(graph.from_onnx(model), level="O1", cache=False)
    finally:
        SPACE._reduce_blocks = keep
        strategy.CVEC_ON = True
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.gettempdir(), "conv_reduce_blocks")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    mods = {"before": before, "after": after}
    for m in mods.values():
        got = m.run(feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    prof = {"before": [], "after": []}
    cpu = {"before": [], "after": [], "ort": []}
    for r in range(rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name in order:
            prof[name].append([row[3] for row in mods[name].profile(feeds, repeat=1).rows])
        t0 = time.process_time()
        sess.run(None, feeds)
        cpu["ort"].append(time.process_time() - t0)
        for name in order:
            t0 = time.process_time()
            mods[name].run(feeds)
            cpu[name].append(time.process_time() - t0)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    per, keys = defaultdict(list), {}
    for e in events:
        a = e.get("args", {})
        if (e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
                and a.get("op_name") == "Conv"):
            per[e["name"]].append(e["dur"] * 1e-6)
            keys[e["name"]] = (tuple(a["input_type_shape"][0]["float"][1:]),
                               tuple(a["output_type_shape"][0]["float"][1:]),
                               a["input_type_shape"][1]["float"][2])
    agg = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for col, name in ((1, "before"), (2, "after")):
        for i, step in enumerate(mods[name].steps):
            if step.kernel is not None and any("conv2d" in op for op in step.ops):
                agg[conv_key(step)][col] += min(p[i] for p in prof[name])
                agg[conv_key(step)][0] += col == 1
    for node, times in per.items():
        agg[keys[node]][3] += min(times[1:])    # the first run is the check's
    print(f"threads {threads}, rounds {rounds}; whole run min CPU ms: before "
          f"{min(cpu['before']) * 1e3:.1f}, after {min(cpu['after']) * 1e3:.1f}, "
          f"onnxruntime {min(cpu['ort']) * 1e3:.1f}")
    print("| conv (in CHW) -> (out CHW), kernel | count | before ms | after ms | "
          "onnxruntime ms |\n|---|---|---|---|---|")
    total = np.zeros(3)
    for (xs, ys, k), v in sorted(agg.items(), key=lambda kv: kv[1][3] - kv[1][1]):
        print(f"| {xs} -> {ys}, {k}x{k} | {v[0]} | {v[1] * 1e3:.3f} | {v[2] * 1e3:.3f} | "
              f"{v[3] * 1e3:.3f} |")
        total += v[1:]
    print(f"| all convs | | {total[0] * 1e3:.2f} | {total[1] * 1e3:.2f} | "
          f"{total[2] * 1e3:.2f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1,
         int(sys.argv[2]) if len(sys.argv) > 2 else 21,
         sys.argv[3] if len(sys.argv) > 3 else "reduce")
