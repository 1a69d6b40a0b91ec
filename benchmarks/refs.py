"""Reference implementations (numpy, onnxruntime) of the benchmark cases, and their worker.

Takes a case name and its parameters; gives make_inputs() (the same seeded arrays on both
sides), make_reference() (a zero-argument callable that runs numpy or onnxruntime on them)
and, when run as `python benchmarks/refs.py`, a worker that times references on request
(one JSON line in, one JSON line out). The worker runs in its own process with the thread
count fixed in its environment, so OpenBLAS/onnxruntime threads never compete with te's.
onnx and onnxruntime are optional (setup.cfg [onnx]): imported lazily, "n/a" when absent.
Imports numpy (and onnx, onnxruntime, te's numpy_blas lazily).
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

EPS = 1e-5


def make_inputs(case: str, p: dict) -> list:
    """The input arrays of `case` (seeded), in the order the kernels take them."""
    rng = np.random.default_rng(0)

    def rand(*shape):
        return rng.standard_normal(shape, dtype=np.float32)
    if case == "matmul":
        return [rand(p["m"], p["k"]), rand(p["k"], p["n"])]
    if case == "conv2d":
        return [rand(1, p["cin"], p["h"], p["w"]), rand(p["cout"], p["cin"], p["r"], p["r"])]
    if case == "relu_affine":
        return [rand(p["rows"], p["cols"]), rand(p["cols"]), rand(p["cols"])]
    if case in ("softmax", "sum", "copy"):
        return [rand(p["rows"], p["cols"])]
    if case == "layernorm":
        return [rand(p["rows"], p["cols"]), rand(p["cols"]), rand(p["cols"])]
    raise ValueError(f"unknown case {case!r}")


def numpy_reference(case: str, p: dict, xs: list):
    """The naive numpy expression of `case` (a callable returning the result), or None."""
    if case == "matmul":
        a, b = xs
        out = np.empty((p["m"], p["n"]), np.float32)
        return lambda: np.matmul(a, b, out=out)
    if case == "relu_affine":
        x, a, b = xs
        return lambda: np.maximum(x * a + b, 0)
    if case == "softmax":
        x, = xs

        def softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return softmax
    if case == "layernorm":
        x, g, b = xs

        def layernorm():
            mean = x.mean(axis=1, keepdims=True)
            var = x.var(axis=1, keepdims=True)
            return (x - mean) / np.sqrt(var + EPS) * g + b
        return layernorm
    if case == "sum":
        x, = xs
        return lambda: x.sum(axis=1)
    if case == "copy":
        x, = xs
        y = np.empty_like(x)
        return lambda: np.copyto(y, x)
    return None  # conv2d: numpy has no convolution worth comparing with


def onnx_model(case: str, p: dict):
    """(onnx ModelProto, input names) for `case`, or None when onnx has no such case."""
    from onnx import TensorProto, helper
    f32 = TensorProto.FLOAT

    def vi(name, shape):
        return helper.make_tensor_value_info(name, f32, shape)
    opset = 17
    if case == "matmul":
        nodes = [helper.make_node("MatMul", ["A", "B"], ["Y"])]
        ins = [vi("A", [p["m"], p["k"]]), vi("B", [p["k"], p["n"]])]
        out = vi("Y", [p["m"], p["n"]])
    elif case == "conv2d":
        pad = p["pad"]
        nodes = [helper.make_node("Conv", ["X", "W"], ["Y"], pads=[pad] * 4,
                                  kernel_shape=[p["r"], p["r"]])]
        ins = [vi("X", [1, p["cin"], p["h"], p["w"]]),
               vi("W", [p["cout"], p["cin"], p["r"], p["r"]])]
        out = vi("Y", [1, p["cout"], p["h"], p["w"]])
    elif case == "relu_affine":
        nodes = [helper.make_node("Mul", ["X", "a"], ["t"]),
                 helper.make_node("Add", ["t", "b"], ["u"]),
                 helper.make_node("Relu", ["u"], ["Y"])]
        ins = [vi("X", [p["rows"], p["cols"]]), vi("a", [p["cols"]]), vi("b", [p["cols"]])]
        out = vi("Y", [p["rows"], p["cols"]])
    elif case == "softmax":
        nodes = [helper.make_node("Softmax", ["X"], ["Y"], axis=-1)]
        ins = [vi("X", [p["rows"], p["cols"]])]
        out = vi("Y", [p["rows"], p["cols"]])
    elif case == "layernorm":
        nodes = [helper.make_node("LayerNormalization", ["X", "g", "b"], ["Y"], axis=-1,
                                  epsilon=EPS)]
        ins = [vi("X", [p["rows"], p["cols"]]), vi("g", [p["cols"]]), vi("b", [p["cols"]])]
        out = vi("Y", [p["rows"], p["cols"]])
    elif case == "sum":
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        nodes = [helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)]
        ins = [vi("X", [p["rows"], p["cols"]])]
        out = vi("Y", [p["rows"]])
        graph = helper.make_graph(nodes, case, ins, [out], initializer=[axes])
        return _model(graph, opset), [i.name for i in ins]
    else:
        return None
    graph = helper.make_graph(nodes, case, ins, [out])
    return _model(graph, opset), [i.name for i in ins]


def _model(graph, opset: int):
    from onnx import helper
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # newer onnx writes IR versions that older onnxruntime refuses
    return model


def onnxruntime_available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def onnxruntime_reference(case: str, p: dict, xs: list, threads: int):
    """An onnxruntime session running `case` on `xs`, as a callable; None when n/a."""
    if not onnxruntime_available():
        return None
    import onnxruntime as ort
    made = onnx_model(case, p)
    if made is None:
        return None
    model, names = made
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # Spinning worker threads would steal the core that te's kernel runs on next.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    feeds = dict(zip(names, xs))
    return lambda: sess.run(None, feeds)


def time_calls(fn, number: int, repeat: int) -> list:
    """Seconds per call of `repeat` rounds of `number` calls each (after one warm-up)."""
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


def worker() -> None:
    """Serve requests {"kind", "case", "params", "number", "repeat"} -> {"times"} or
    {"na": reason}, and {"kind": "info"} -> {"blas": the BLAS numpy uses}; the thread
    count comes from the environment (OMP/OPENBLAS_NUM_THREADS)."""
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cache: dict = {}
    for line in sys.stdin:
        req = json.loads(line)
        if req["kind"] == "info":
            from te.autotune.cli import numpy_blas
            sys.stdout.write(json.dumps({"blas": numpy_blas()}) + "\n")
            sys.stdout.flush()
            continue
        key = (req["kind"], req["case"], json.dumps(req["params"], sort_keys=True))
        try:
            if key not in cache:
                xs = make_inputs(req["case"], req["params"])
                if req["kind"] == "numpy":
                    cache[key] = numpy_reference(req["case"], req["params"], xs)
                else:
                    cache[key] = onnxruntime_reference(req["case"], req["params"], xs, threads)
            fn = cache[key]
            if fn is None:
                reply = {"na": f"{req['kind']} has no {req['case']}"}
            else:
                reply = {"times": time_calls(fn, req["number"], req["repeat"])}
        except Exception as err:  # reported, never fatal: the row shows n/a
            reply = {"na": f"{type(err).__name__}: {err}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    worker()
