"""The performance suite: `python benchmarks/run.py [--quick]` prints a table and writes
benchmarks/RESULTS.md.

Takes nothing but options; gives, for each kernel x shape x thread count, the median time of
te's kernel and of its references (numpy, onnxruntime when installed) measured in the same
run, alternating the two sides round by round, with the spread, the ratio (reference time /
te time, median over rounds; > 1 means te is faster) and every target of issue 3 marked met
or missed. References run in a worker process (benchmarks/refs.py) whose thread count is
fixed in its environment, so the two sides never share a thread pool. Imports te, runtime,
numpy and the sibling benchmark modules.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before libgomp loads
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import numpy as np  # noqa: E402

import runtime  # noqa: E402
import te  # noqa: E402
import gemm_chain  # noqa: E402
import kernels  # noqa: E402
import overheads  # noqa: E402
import refs  # noqa: E402


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class RefWorker:
    """A `refs.py` worker process with `threads` BLAS/OpenMP/onnxruntime threads."""

    def __init__(self, threads: int):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), OMP_WAIT_POLICY="passive")
        # Some hosts pin OpenBLAS to an older kernel family (OPENBLAS_CORETYPE=Haswell, with a
        # matching OPENBLAS_L2_SIZE) as a workaround for old builds; a current numpy is then
        # up to 2x slower on AVX-512. The reference is numpy at its best on this CPU.
        for pinned in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            env.pop(pinned, None)
        # te (for numpy_blas) importable from a checkout that is not installed, as here
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "refs.py")], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def time(self, kind: str, case: str, params: dict, number: int, repeat: int):
        """Seconds per call (a list), or a string saying why the reference is n/a."""
        req = dict(kind=kind, case=case, params=params, number=number, repeat=repeat)
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["times"] if "times" in reply else reply["na"]

    def blas(self) -> str:
        """The BLAS kernel family numpy uses in this worker ("OpenBLAS SkylakeX")."""
        self.proc.stdin.write(json.dumps(dict(kind="info")) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["blas"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


@dataclass
class Row:
    kernel: str
    shape: str
    threads: int
    te_s: float
    te_spread: float               # (max - min) / median over rounds
    work: float                    # flops or bytes per call
    unit: str                      # "GFLOP/s" or "GB/s"
    ratios: dict = field(default_factory=dict)   # reference -> median(ref time / te time)
    ref_s: dict = field(default_factory=dict)
    variant: str = ""              # which of kernels.VARIANTS[case] this machine ran fastest


def _spread(xs: list) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs)


def _calls_for(seconds: float, budget: float = 0.05) -> int:
    return max(1, min(50, int(budget / max(seconds, 1e-7))))


def measure(worker: RefWorker, mod, xs: list, case: str, params: dict, threads: int,
            rounds: int, kinds=("numpy", "onnxruntime"), yardstick=None) -> tuple:
    """Alternate te and each reference for `rounds` rounds; medians and per-round ratios.
    yardstick: (module, arguments) of a te kernel timed right after te in every round;
    its per-round ratio (yardstick time / te time, median) lands in ratios["yardstick"]."""
    runtime.set_num_threads(threads)
    evaluate = mod.time_evaluator(number=1, repeat=1)
    first = evaluate(*xs).median
    number = _calls_for(first)
    te_times, ref_times = [], {k: [] for k in kinds}
    stick_times = []
    na = {}
    for _ in range(rounds):
        te_times.append(mod.time_evaluator(number=number, repeat=3)(*xs).min)
        if yardstick is not None:
            stick_mod, stick_xs = yardstick
            stick_times.append(stick_mod.time_evaluator(number=number, repeat=3)(*stick_xs).min)
        for kind in kinds:
            if kind in na:
                continue
            got = worker.time(kind, case, params, number, 3)
            if isinstance(got, str):
                na[kind] = got
            else:
                ref_times[kind].append(min(got))
    te_med = statistics.median(te_times)
    ratios, ref_s = {}, {}
    for kind in kinds:
        if kind in na:
            continue
        ref_s[kind] = statistics.median(ref_times[kind])
        ratios[kind] = statistics.median(r / t for r, t in zip(ref_times[kind], te_times))
    if stick_times:
        ratios["yardstick"] = statistics.median(c / t for c, t in zip(stick_times, te_times))
    return te_med, _spread(te_times), ratios, ref_s


def compare(named: list, case: str, params: dict, work: float, kind: str,
            rounds: int) -> None:
    """Print te kernels, [(name, module, call arguments)], against the reference `kind`
    ("numpy" or "onnxruntime") at each thread count, timed as the suite times its rows
    (the tuning benchmarks use it for tuned vs hand-written kernels)."""
    workers = {t: RefWorker(t) for t in _thread_counts()}
    try:
        if kind == "numpy":
            print(f"numpy BLAS: {workers[1].blas()}")
        print(f"{'kernel':<8} {'thr':>3} {'te ms':>8} {'GFLOP/s':>8} {kind[:5] + ' ms':>9} "
              f"{'ratio':>7}")
        for threads in _thread_counts():
            for name, mod, call in named:
                t, spread, ratios, ref_s = measure(workers[threads], mod, call, case, params,
                                                   threads, rounds, kinds=(kind,))
                ref_ms = f"{ref_s[kind] * 1e3:9.3f}" if kind in ref_s else "      n/a"
                ratio = f"{ratios[kind]:6.2f}x" if kind in ratios else "    n/a"
                print(f"{name:<8} {threads:>3} {t * 1e3:8.3f} {work / t / 1e9:8.1f} {ref_ms} "
                      f"{ratio}   (spread {spread:.0%})", flush=True)
    finally:
        for w in workers.values():
            w.close()


def _views(arrays: list, tensors: list) -> list:
    """The arrays reshaped to the kernel's argument shapes; only no-copy views are allowed
    (a kernel may take NCHW data as (C, H*W), never a copied layout)."""
    out = []
    for a, t in zip(arrays, tensors):
        v = a.reshape(tuple(int(d) for d in t.shape))
        assert np.shares_memory(v, a), f"{t.name}: reshape would copy"
        out.append(v)
    return out


def _aligned(x: np.ndarray) -> np.ndarray:
    """A copy of `x` in te's 64-byte aligned storage (runtime.array, as tvm.nd.array is
    TVM's): numpy's large arrays start 16 bytes into a cache line, where every vector
    access spans two lines and non-temporal stores go out in 16-byte pieces
    (ANALYSIS.md gives the cost)."""
    return np.asarray(runtime.array(x))


def _build_checked(sched_fn, sizes, case, params, out_shape):
    """Build, run once and check against numpy; returns (module, the arrays to call it
    with: the inputs then the output, as aligned views shaped like the kernel's
    arguments)."""
    s, args = sched_fn(*sizes)
    mod = te.build(s, args)
    xs = [_aligned(x) for x in refs.make_inputs(case, params)]
    out = _aligned(np.empty(out_shape, np.float32))
    call = _views(xs + [out], args)
    mod(*call)
    ref = refs.numpy_reference(case, params, xs)
    want = xs[0] if case == "copy" else (ref() if ref is not None else None)
    if want is not None:
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    return mod, call


def gemm_rows(workers, quick: bool, rounds: int) -> list:
    rows = []
    n = 512 if quick else 1024
    p = dict(m=n, n=n, k=n)
    for name, fn in gemm_chain.CHAIN:
        threads = 2 if name == "parallel" else 1
        threads = min(threads, usable_cores())
        mod, xs = _build_checked(fn, (n, n, n), "matmul", p, (n, n))
        r = rounds if name not in ("baseline", "blocking") else min(rounds, 3)
        t, sp, ratios, ref_s = measure(workers[threads], mod, xs, "matmul", p, threads, r)
        rows.append(Row(f"gemm chain: {name}", f"{n}^3", threads, t, sp, 2.0 * n ** 3,
                        "GFLOP/s", ratios, ref_s))
        _print_row(rows[-1])
    shapes = [(n, n, n)] + ([] if quick else [(1000, 1000, 1000), (127, 255, 511),
                                              (64, 1024, 1024)])
    if quick:
        shapes += [(127, 255, 511)]
    for m, nn, k in shapes:
        p = dict(m=m, n=nn, k=k)
        mod, xs = _build_checked(gemm_chain.best_matmul, (m, nn, k), "matmul", p, (m, nn))
        for threads in _thread_counts():
            t, sp, ratios, ref_s = measure(workers[threads], mod, xs, "matmul", p, threads,
                                           rounds)
            rows.append(Row("matmul best", f"{m}x{nn}x{k}", threads, t, sp, 2.0 * m * nn * k,
                            "GFLOP/s", ratios, ref_s))
            _print_row(rows[-1])
    return rows


def conv_rows(workers, quick: bool, rounds: int) -> list:
    rows = []
    for cin, cout, r, pad in ((64, 64, 3, 1), (256, 64, 1, 0)):
        hw = 56
        p = dict(cin=cin, cout=cout, h=hw, w=hw, r=r, pad=pad)
        mod, xs = _build_checked(kernels.conv2d, (cin, cout, hw, hw, r, pad), "conv2d", p,
                                 (1, cout, hw, hw))
        nchw = [x.reshape(s) for x, s in zip(xs, ((1, cin, hw, hw), (cout, cin, r, r)))]
        want = refs.onnxruntime_reference("conv2d", p, nchw, 1)
        if want is not None:
            np.testing.assert_allclose(xs[-1].reshape(1, cout, hw, hw), want()[0],
                                       rtol=1e-3, atol=1e-3)
        for threads in _thread_counts():
            t, sp, ratios, ref_s = measure(workers[threads], mod, xs, "conv2d", p, threads,
                                           rounds, kinds=("onnxruntime",))
            rows.append(Row(f"conv2d {r}x{r}", f"{cin}->{cout} {hw}x{hw}", threads, t, sp,
                            2.0 * cin * cout * r * r * hw * hw, "GFLOP/s", ratios, ref_s))
            _print_row(rows[-1])
    return rows


def pick_variant(candidates: list, threads: int, rounds: int = 5) -> tuple:
    """The fastest of [(label, module, call arguments)] at `threads`, timed alternately
    (the first candidate alternating too) as the suite times its rows: (label, module,
    arguments, one line saying what each took)."""
    runtime.set_num_threads(threads)
    number = _calls_for(candidates[0][1].time_evaluator(number=1, repeat=1)(
        *candidates[0][2]).median)
    times = {label: [] for label, _, _ in candidates}
    for k in range(rounds):
        order = candidates if k % 2 == 0 else candidates[::-1]
        for label, mod, xs in order:
            times[label].append(mod.time_evaluator(number=number, repeat=3)(*xs).min)
    medians = {label: statistics.median(ts) for label, ts in times.items()}
    label, mod, xs = min(candidates, key=lambda c: medians[c[0]])
    took = ", ".join(f"{lbl} {ms * 1e3:.3f} ms" for lbl, ms in medians.items())
    return label, mod, xs, f"{threads} thr: {took} -> {label}"


def memory_rows(workers, quick: bool, rounds: int, choices: list) -> list:
    """The memory-bound row kernels; where kernels.VARIANTS lists several hand-written
    forms of one, the fastest on this machine at each thread count (its choice and the
    times behind it are appended to `choices`)."""
    rows = []
    n = 2048 if quick else 4096
    cases = [  # (kernel, case, schedule, output shape, bytes moved at the least)
        ("copy", "copy", kernels.copy, (n, n), 8 * n * n),
        ("relu(x*a+b)", "relu_affine", kernels.relu_affine, (n, n), 8 * n * n),
        ("softmax", "softmax", kernels.softmax, (n, n), 8 * n * n),
        ("layernorm", "layernorm", kernels.layernorm, (n, n), 8 * n * n),
        ("sum", "sum", kernels.row_sum, (n,), 4 * n * n),
    ]
    # The copy kernel is also timed in every round of every other row, on that row's own
    # input and (n, n) output: the "% of copy" targets then compare bandwidths taken in
    # the same seconds and the same memory. This VM's bandwidth moves with its neighbours:
    # copy at two threads ran 1.6-1.8 ms for minutes at a time, 2.5-2.8 ms otherwise.
    copy_mod = te.build(*kernels.copy(n, n))
    for name, case, fn, out_shape, nbytes in cases:
        p = dict(rows=n, cols=n)
        candidates = []
        for label, kwargs in kernels.VARIANTS.get(case, [("", {})]):
            mod, xs = _build_checked(functools.partial(fn, **kwargs), (n, n), case, p,
                                     out_shape)
            candidates.append((label, mod, xs))
        for threads in _thread_counts():
            label, mod, xs = candidates[0]
            if len(candidates) > 1:
                label, mod, xs, took = pick_variant(candidates, threads)
                choices.append(f"{name}, {took}")
            if case == "copy":
                stick = None
            else:
                out = xs[-1] if xs[-1].shape == (n, n) else _aligned(
                    np.empty((n, n), np.float32))
                stick = (copy_mod, [xs[0], out])
            t, sp, ratios, ref_s = measure(workers[threads], mod, xs, case, p, threads, rounds,
                                           yardstick=stick)
            rows.append(Row(name, f"{n}x{n}", threads, t, sp, nbytes, "GB/s", ratios, ref_s,
                            label))
            _print_row(rows[-1])
    return rows


def _thread_counts() -> list:
    return sorted({1, min(2, usable_cores())})


HEADER = ("kernel", "shape", "thr", "te ms", "spread", "rate", "x numpy", "x onnxrt")


def _cells(row: Row) -> tuple:
    rate = row.work / row.te_s / 1e9
    ratio = [f"{row.ratios[k]:.2f}x" if k in row.ratios else "n/a"
             for k in ("numpy", "onnxruntime")]
    kernel = f"{row.kernel} [{row.variant}]" if row.variant else row.kernel
    return (kernel, row.shape, str(row.threads), f"{row.te_s * 1e3:.3f}",
            f"{row.te_spread * 100:.0f}%", f"{rate:.1f} {row.unit}", *ratio)


def _print_row(row: Row) -> None:
    print("  ".join(_cells(row)), flush=True)


def format_table(rows: list) -> list:
    lines = [HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(HEADER))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]


def machine_info() -> str:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features()
    isa = "AVX-512" if feats.get("avx512f") else ("AVX2+FMA" if feats.get("fma") else "SSE")
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return (f"{model}; {os.cpu_count()} logical cores ({usable_cores()} usable); "
            f"LLVM host CPU {llvm.get_host_cpu_name()} ({isa}); load average at start "
            f"{load:.2f}; Python {platform.python_version()}, numpy {np.__version__}, "
            f"onnxruntime {_ort_version()}")


def _ort_version() -> str:
    if not refs.onnxruntime_available():
        return "n/a (pip install '.[onnx]')"
    import onnxruntime
    return onnxruntime.__version__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds per row")
    parser.add_argument("--only", default="gemm,conv,memory,overheads",
                        help="comma-separated groups to run")
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    groups = args.only.split(",")
    workers = {t: RefWorker(t) for t in _thread_counts()}
    rows, over, choices = [], [], []
    try:
        info = f"{machine_info()}; numpy BLAS {workers[1].blas()}"
        print(info)
        print("  ".join(HEADER))
        if "overheads" in groups:
            over = overheads.measure_all()
            for line in overheads.format_lines(over):
                print(line)
        if "gemm" in groups:
            rows += gemm_rows(workers, args.quick, rounds)
        if "conv" in groups:
            rows += conv_rows(workers, args.quick, rounds)
        if "memory" in groups:
            rows += memory_rows(workers, args.quick, rounds, choices)
    finally:
        for w in workers.values():
            w.close()
    import targets
    verdicts = targets.evaluate(rows, over, args.quick)
    command = "python benchmarks/run.py" + (" --quick" if args.quick else "") + \
        (f" --rounds {args.rounds}" if args.rounds else "") + \
        (f" --only {args.only}" if args.only != parser.get_default("only") else "")
    text = targets.results_markdown(command, info, format_table(rows), over, verdicts,
                                    choices)
    with open(args.out, "w") as f:
        f.write(text)
    print()
    for line in targets.verdict_lines(verdicts):
        print(line)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
