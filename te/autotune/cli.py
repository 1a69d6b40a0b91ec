"""`python -m te tune <op>`: tune a built-in operator, print the best schedule and a table.

Takes the parsed command-line options, as te.autotune.TuneOptions; tunes with te.autotune
(resuming from --log), prints the best config, its lowered loop IR, and time/GFLOP/s next
to numpy (timed in this process, alternating with the tuned kernel); a tuned kernel that
does not match numpy ends the command with NumpyMismatchError. Imports te (the package
API), te.errors, workloads, records, task and numpy.
"""
from __future__ import annotations

import time

from ..errors import TEError
from . import records as R

# The tuned kernel's check against numpy: |te - numpy| <= ATOL + RTOL * |numpy| (the
# measurement workers' default tolerance, MeasureOptions.rtol/atol).
RTOL = ATOL = 1e-3

# OpenBLAS's threads spin for a while after a call (its THREAD_TIMEOUT) before they
# sleep; te's kernel timed in that window shares the cores with them and runs at a
# fraction of its speed. Wait longer than that window (figures: benchmarks/ANALYSIS.md,
# "Measurements behind the source").
BLAS_SETTLE_S = 0.2


class NumpyMismatchError(TEError):
    """The tuned kernel, built in the command's process, does not match numpy."""


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune a built-in operator and compare it with numpy")
    p.add_argument("op", help="matmul, batch_matmul, conv2d, softmax or layernorm")
    p.add_argument("--shape", type=int, nargs="+", default=None,
                   help="matmul: M N K; batch_matmul: B M N K; conv2d: N C H W F KH; "
                        "softmax/layernorm: R C")
    p.add_argument("--trials", type=int, default=64, help="measured configs (default 64)")
    p.add_argument("--log", default=None, help="JSON-lines log to append to and resume from")
    p.add_argument("--tuner", default="xgb", help="xgb (default), optuna, ga, random or grid")
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-ir", action="store_true", help="do not print the lowered IR")


def ratio_text(ratio: float) -> str:
    """A speed ratio for a table: two decimals, or two significant digits below 0.1, so a
    kernel 300x slower than numpy (a tiny kernel whose threads wait on a busy core) reads
    "0.0033x" and not "0.00x"."""
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def numpy_blas() -> str:
    """The kernel family numpy's bundled OpenBLAS chose at load ("OpenBLAS SkylakeX"; the
    environment can pin an older one with OPENBLAS_CORETYPE), or "unknown"."""
    import ctypes
    import glob
    import os

    import numpy as np
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                  "*openblas*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return "OpenBLAS " + fn().decode()
    return "unknown"


def run(args) -> int:
    import te
    from . import workloads
    out, targs, flops, ref_fn = workloads.make(args.op, args.shape)
    options = te.autotune.TuneOptions(trials=args.trials, log=args.log, tuner=args.tuner,
                                      timeout=args.timeout, seed=args.seed)
    t0 = time.time()
    res = te.autotune(out, options, args=targs)
    try:
        return _report(args, res, time.time() - t0, flops, ref_fn)
    except KeyboardInterrupt:
        # what was tuned stays in the log: say so as for an interrupted tuning run
        raise te.autotune.TuningInterrupted("interrupted after tuning", res) from None


def interrupted_text(args, result) -> str:
    """What `python -m te tune` says on Ctrl-C: how much of the run is saved, and how to
    go on (the same command resumes from --log)."""
    if result is None:
        return "interrupted before tuning started"
    if args.log:
        return (f"interrupted: {result.saved} trials saved in '{args.log}'; run the same "
                f"command to resume")
    return (f"interrupted after {len(result.history)} trials; none saved (run with --log FILE "
            f"to be able to resume)")


def check_against_numpy(args, res, got, want) -> None:
    """Raise NumpyMismatchError, naming the worst element, the tolerance and the config
    (and the log it is the best of), unless `got` is within ATOL + RTOL * |want|."""
    import numpy as np
    bad = ~np.isclose(got, want, rtol=RTOL, atol=ATOL)
    if not bad.any():
        return
    err = np.abs(got.astype(np.float64) - np.asarray(want, np.float64))
    worst = np.unravel_index(np.argmax(err), err.shape)     # argmax takes a NaN first
    where = f"in the log '{args.log}'" if args.log else "of this run (no --log)"
    raise NumpyMismatchError(
        f"the tuned {args.op} kernel does not match numpy: max error {err[worst]:.3g} at "
        f"{tuple(int(k) for k in worst)}, where the tolerance is {ATOL:g} + {RTOL:g} * "
        f"|numpy| ({int(bad.sum())} of {bad.size} elements beyond it); the kernel is the best "
        f"config {where}: {R.config_key(res.best.config)}")


def _report(args, res, wall: float, flops: float, ref_fn) -> int:
    """Print the best config, its loop IR and its time next to numpy's."""
    import numpy as np

    import te
    from .task import random_inputs
    if res.best is None:
        print(f"no config succeeded; errors: {res.errors}")
        return 1
    print(f"best config after {len(res.history)} trials ({wall:.0f} s): "
          f"{res.best_config}")
    s, sargs = res.schedule()
    if not args.no_ir:
        print(te.lower(s, sargs, name=args.op))
    mod = te.build(s, sargs)
    inputs = random_inputs(sargs, args.seed)
    outs = [np.zeros([int(d.value) for d in a.shape], a.dtype) for a in sargs[len(inputs):]]
    mod(*inputs, *outs)
    check_against_numpy(args, res, outs[0], ref_fn(*inputs))
    # Alternate the two sides (the machine is shared); each round is min_repeat_ms of calls.
    timer = mod.time_evaluator(number=3, repeat=1, min_repeat_ms=20)
    ours_t, ref_t = [], []
    time.sleep(BLAS_SETTLE_S)  # numpy just computed the reference answer
    for _ in range(7):
        ours_t.append(timer(*inputs, *outs).median)
        calls, t = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - t < 0.02:
            ref_fn(*inputs)
            calls += 1
        ref_t.append((time.perf_counter() - t) / calls)
        time.sleep(BLAS_SETTLE_S)
    ours, ref = float(np.median(ours_t)), float(np.median(ref_t))
    rows = [("kernel", "te ms", "numpy ms", "te GFLOP/s", "numpy GFLOP/s", "te/numpy"),
            (args.op, f"{ours * 1e3:.3f}", f"{ref * 1e3:.3f}", f"{flops / ours / 1e9:.1f}",
             f"{flops / ref / 1e9:.1f}", ratio_text(ref / ours))]
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print(f"the tuned kernel matches numpy (numpy timed in this process, BLAS: "
          f"{numpy_blas()})")
    return 0
