"""The measurement worker: `python -m te.autotune.worker`, one JSON request per stdin line.

Takes {task, ll, sig, cuda, config, make_ref, opts}; compiles the LLVM IR (or, for target
'cuda', loads the PTX on the GPU or compiles the CUDA C for the CUDA emulator, as `cuda`
says), runs the kernel on the task's inputs, compares with the reference outputs (or saves
them, for make_ref), times it (an emulated kernel: its one checked run), and answers one
JSON line {costs, error, msg, compile_s} on the original stdout (which is moved aside so
that stray prints cannot corrupt the protocol). A segfault kills only
this process. Imports runtime and numpy (te is loaded only as the package it lives in).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from collections import OrderedDict

COMPILED_KEPT = 8   # compiled candidates kept per worker (the leaders, re-measured in turn)
# Seconds a candidate runs before it is timed. The pool threads sleep while this worker
# compiles the next candidate, and on a VM the first tens of milliseconds of parallel work
# after such a pause ran at one thread's speed or with spikes of several times the steady
# time (benchmarks/TUNING.md has the measurements), which ranked a parallel candidate
# measured first below one measured later. One call warms the caches; this warms the cores.
WARMUP_S = 0.03


def _load_hook(spec: str):
    where, name = spec.rsplit(":", 1)
    if where.endswith(".py"):
        mod_spec = importlib.util.spec_from_file_location("_te_autotune_hook", where)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(where)
    return getattr(mod, name)


class _Task:
    def __init__(self, task: dict):
        import numpy as np
        import runtime
        self.dir = task["dir"]
        # In te's 64-byte aligned storage, as te users' arrays (runtime.array) are: a numpy
        # array of this size starts 16 bytes into a cache line, and would make candidates
        # that stream their outputs look slower than they run on aligned data.
        self.inputs = [np.asarray(runtime.array(np.load(os.path.join(self.dir, f"in{k}.npy"),
                                                        allow_pickle=False)))
                       for k in range(task["n_in"])]
        self.out_specs = [(tuple(shape), dtype) for shape, dtype in task["outputs"]]
        self.refs = None
        self.outs = None

    def reset_outputs(self) -> list:
        """The output arrays, refilled with NaN (0 for integers) so that an element a
        candidate fails to write cannot keep an earlier candidate's right answer. They are
        allocated once per task, so every candidate writes the same memory: a fresh 64 MiB
        array may land on transparent huge pages or not, and a memory-bound kernel's time
        follows (by more than the differences the tuner must see)."""
        import numpy as np
        import runtime
        if self.outs is None:
            self.outs = [np.asarray(runtime.empty(shape, dtype)) for shape, dtype in
                         self.out_specs]
        for out in self.outs:
            out.fill(np.nan if out.dtype.kind == "f" else 0)
        return self.outs

    def load_refs(self) -> list:
        import numpy as np
        if self.refs is None:
            self.refs = [np.load(os.path.join(self.dir, f"ref{k}.npy"), allow_pickle=False)
                         for k in range(len(self.out_specs))]
        return self.refs


def _compiled(req: dict, modules: OrderedDict):
    """(runtime.Module, compile seconds) of the request's IR, or the error reply. The
    leaders re-measured at the end of a run come CONFIRM_ROUNDS times each: the last
    COMPILED_KEPT modules are kept, by a digest of IR (or CUDA parts) and signature, so each
    compiles once."""
    import runtime
    spec = req.get("cuda")
    key = hashlib.sha256((req["sig"] + "\n" + req["ll"] + "\n" +
                          json.dumps(spec, sort_keys=True)).encode()).hexdigest()
    if key in modules:
        modules.move_to_end(key)
        return modules[key]
    t0 = time.perf_counter()
    try:
        sig = runtime.KernelSignature.from_json(req["sig"])
        if spec is not None:
            mod = _cuda_module(spec, sig)
        else:
            mod = runtime.Module(runtime.compile_llvm(req["ll"]), sig)
    except Exception as err:  # noqa: BLE001 - any failure is this candidate's failure
        return {"error": "compile_error", "msg": f"{type(err).__name__}: {err}"}
    modules[key] = (mod, time.perf_counter() - t0)
    if len(modules) > COMPILED_KEPT:
        modules.popitem(last=False)
    return modules[key]


def measure(req: dict, tasks: dict, hooks: dict, modules: OrderedDict) -> dict:
    import numpy as np
    opts = req["opts"]
    key = req["task"]["dir"]
    if key not in tasks:
        tasks[key] = _Task(req["task"])
    task = tasks[key]
    if opts.get("hook"):
        if opts["hook"] not in hooks:
            hooks[opts["hook"]] = _load_hook(opts["hook"])
        hooks[opts["hook"]](req["config"])
    built = _compiled(req, modules)
    if isinstance(built, dict):
        return built
    mod, compile_s = built
    spec = req.get("cuda")
    outs = task.reset_outputs()
    t1 = time.perf_counter()
    try:
        mod(*task.inputs, *outs)
    except Exception as err:  # noqa: BLE001
        return {"error": "runtime_error", "msg": f"{type(err).__name__}: {err}",
                "compile_s": compile_s}
    # The run alone: comparing a large output with the reference takes milliseconds, many
    # times a fast kernel's run, and counted in, it made good candidates look hopeless
    first = time.perf_counter() - t1
    if req.get("make_ref"):
        for k, arr in enumerate(outs):
            np.save(os.path.join(task.dir, f"ref{k}.npy"), arr, allow_pickle=False)
        return {"costs": [first], "error": None, "compile_s": compile_s}
    elif opts.get("check", True):
        for k, (got, want) in enumerate(zip(outs, task.load_refs())):
            if not np.allclose(got, want, rtol=opts["rtol"], atol=opts["atol"], equal_nan=True):
                bad = int(np.sum(~np.isclose(got, want, rtol=opts["rtol"], atol=opts["atol"],
                                             equal_nan=True)))
                return {"error": "wrong_answer", "compile_s": compile_s,
                        "msg": f"output {k}: {bad} of {got.size} elements differ from the "
                               f"reference"}
    if spec is not None and spec["emulate"]:
        # Emulated times rank CPU emulation, not GPU speed: one checked run is the
        # measurement (repeats would only multiply an emulation that takes seconds).
        return {"costs": [first], "error": None, "compile_s": compile_s,
                "msg": "emulated: one run"}
    # A slow or hopeless candidate is reported by its checked run alone: repeating it would
    # only burn the time limit (and a timeout would lose the measurement).
    repeats = opts["number"] * opts["repeat"]
    best = req.get("best")
    if first * repeats > 0.5 * opts["timeout"] or (best and first > 20 * best):
        return {"costs": [first], "error": None, "compile_s": compile_s, "msg": "single run"}
    warm_up(lambda: mod(*task.inputs, *outs), WARMUP_S - first)
    res = mod.time_evaluator(number=opts["number"], repeat=opts["repeat"],
                             min_repeat_ms=opts["min_repeat_ms"])(*task.inputs, *outs)
    return {"costs": list(res.results), "error": None, "compile_s": compile_s}


def warm_up(run, seconds: float) -> int:
    """Call run() until `seconds` have passed (none if it is 0 or less); the calls made."""
    calls = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        run()
        calls += 1
    return calls


def _cuda_module(spec: dict, sig):
    """A CudaModule from the parts task.cuda_job sent: on the GPU (its PTX), or in the CUDA
    emulator when spec["emulate"] (the tuning process decided, once, that no GPU runs)."""
    from runtime import cuda as rt_cuda
    kernels = tuple(rt_cuda.CudaKernel(name, tuple(tuple(p) for p in params), barriers)
                    for name, params, barriers in spec["kernels"])
    temporaries = tuple(rt_cuda.CudaTemporary(name, dtype) for name, dtype in spec["temporaries"])
    counts = list(spec["counts"])
    dims = [(tuple(grid), tuple(block)) for grid, block in spec["dims"]]
    mod = rt_cuda.CudaModule(sig, spec["source"], kernels, temporaries,
                             lambda sizes: (counts, dims), ptx=spec["ptx"],
                             ptx_missing="nvcc was not on PATH in the tuning process")
    return mod.emulator() if spec["emulate"] else mod


def _die_with_parent() -> None:
    """A worker stuck in a hung kernel never reads stdin EOF: have the kernel (Linux) kill
    it when the tuning process dies, and check the parent as a fallback elsewhere."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    _die_with_parent()
    # Ctrl-C in a terminal reaches the whole process group: the tuning process stops and
    # kills its workers, and a worker dying of it first would be logged as a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed (Python or native) goes to the log, not the pipe
    sys.stdout = sys.stderr
    proto.write(json.dumps({"ready": True}) + "\n")
    proto.flush()
    tasks: dict = {}
    hooks: dict = {}
    modules: OrderedDict = OrderedDict()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            reply = measure(req, tasks, hooks, modules)
        except Exception as err:  # noqa: BLE001 - report, never die on a Python error
            reply = {"error": "runtime_error", "msg": f"{type(err).__name__}: {err}"}
        proto.write(json.dumps(reply) + "\n")
        proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
