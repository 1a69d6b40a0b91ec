"""Tuned conv2d 3x3 64->64 56x56 vs onnxruntime: `python benchmarks/tune_conv2d.py`.

Tunes conv2d_nchw (batch 1, padding 1) with te.autotune, then times it against onnxruntime
(imported lazily: it is an optional extra, `pip install onnx onnxruntime`); without it the
comparison falls back to a numpy einsum over sliding windows and says so.
Target (issue 4): >= 0.8x onnxruntime within 500 trials.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import te
from te.autotune import workloads


def _ort_conv(x, w):
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                         helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8   # onnx may write a newer IR version than onnxruntime reads
    opts = ort.SessionOptions()
    # onnxruntime's pool spins after each run by default; alternating with te's kernel,
    # that spinning would be timed as te's time (DESIGN.md: spinning pools interfere)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"x": x, "w": w})[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--size", type=int, default=56)
    a = p.parse_args()
    c, hw = a.channels, a.size
    out, args, flops, np_ref = workloads.make("conv2d", (1, c, hw, hw, c, 3))
    log = os.path.join(os.path.dirname(__file__), "logs", f"conv2d_{c}_{hw}.jsonl")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    t0 = time.time()
    res = te.autotune(out, args=args, trials=a.trials, timeout=a.timeout, log=log)
    wall = time.time() - t0
    mod = res.build()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw), dtype=np.float32)
    w = rng.standard_normal((c, c, 3, 3), dtype=np.float32)
    y = np.empty((1, c, hw, hw), np.float32)
    mod(x, w, y)
    ref_run = _ort_conv(x, w)
    name = "onnxruntime"
    if ref_run is None:
        name, ref_run = "numpy einsum (onnxruntime not installed)", lambda: np_ref(x, w)
    np.testing.assert_allclose(y, ref_run(), rtol=1e-3, atol=1e-2)
    ours, ref = [], []
    for _ in range(5):
        ours.append(mod.time_evaluator(number=3, repeat=1)(x, w, y).median)
        t = time.perf_counter()
        ref_run()
        ref.append(time.perf_counter() - t)
    o, r = float(np.median(ours)), float(np.median(ref))
    print(f"conv2d {c}->{c} {hw}x{hw}: {len(res.history)} trials in {wall:.0f} s, errors "
          f"{res.errors}")
    print(f"te {o * 1e3:.2f} ms = {flops / o / 1e9:.1f} GFLOP/s; {name} {r * 1e3:.2f} ms = "
          f"{flops / r / 1e9:.1f} GFLOP/s; ratio {r / o:.2f}x")


if __name__ == "__main__":
    main()
