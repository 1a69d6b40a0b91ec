"""Command line: `python -m te demo` and `python -m te tune <op>` (te/autotune/cli.py).

The demo declares a matmul and a fused elementwise operator, schedules them, builds them
for this CPU, checks them against numpy, prints the lowered IR and a table of time and
GFLOP/s next to numpy. Imports te and numpy.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import te


def _matmul_schedule(n: int):
    """The blocked, vectorized, parallel GEMM schedule from the classic TVM tutorial."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 32, 32)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, ci, ki, cj)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def _elementwise_schedule(rows: int, cols: int):
    """relu(x * a + b) with per-column a and b: one fused, vectorized, parallel loop."""
    X = te.placeholder((rows, cols), name="X")
    a = te.placeholder((cols,), name="a")
    b = te.placeholder((cols,), name="b")
    Y = te.compute((rows, cols), lambda i, j: X[i, j] * a[j] + b[j], name="Y")
    Z = te.compute((rows, cols), lambda i, j: te.max(Y[i, j], te.const(0, "float32")),
                   name="Z")
    s = te.create_schedule(Z.op)
    s[Y].compute_inline()
    jo, ji = s[Z].split(Z.op.axis[1], factor=8)
    s[Z].vectorize(ji)
    s[Z].parallel(Z.op.axis[0])
    return s, [X, a, b, Z]


def _median_seconds(fn, repeat: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def demo(size: int, show_ir: bool) -> int:
    rng = np.random.default_rng(0)
    rows = []
    # matmul
    s, args = _matmul_schedule(size)
    if show_ir:
        print("// lowered matmul\n" + str(te.lower(s, args, name="matmul")))
    t0 = time.perf_counter()
    mod = te.build(s, args, name="matmul")
    build_ms = (time.perf_counter() - t0) * 1e3
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty((size, size), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    ours = mod.time_evaluator(number=3, repeat=5)(a, b, c).median
    ref = _median_seconds(lambda: a @ b)
    flops = 2.0 * size ** 3
    rows.append(("matmul", f"{size}x{size}x{size}", ours, ref, flops / ours / 1e9,
                 flops / ref / 1e9, build_ms))
    # fused elementwise
    r, cc = 4 * size, size
    s, args = _elementwise_schedule(r, cc)
    if show_ir:
        print("// lowered relu(x*a+b)\n" + str(te.lower(s, args, name="scale_shift_relu")))
    t0 = time.perf_counter()
    mod = te.build(s, args, name="scale_shift_relu")
    build_ms = (time.perf_counter() - t0) * 1e3
    x = rng.standard_normal((r, cc), dtype=np.float32)
    av = rng.standard_normal(cc, dtype=np.float32)
    bv = rng.standard_normal(cc, dtype=np.float32)
    z = np.empty((r, cc), np.float32)
    mod(x, av, bv, z)
    np.testing.assert_allclose(z, np.maximum(x * av + bv, 0), rtol=1e-5, atol=1e-6)
    ours = mod.time_evaluator(number=10, repeat=5)(x, av, bv, z).median
    ref = _median_seconds(lambda: np.maximum(x * av + bv, 0))
    rows.append(("relu(x*a+b)", f"{r}x{cc}", ours, ref, 3 * r * cc / ours / 1e9,
                 3 * r * cc / ref / 1e9, build_ms))
    _print_table(rows)
    print("both kernels match numpy")
    return 0


def _print_table(rows: list) -> None:
    from te.autotune.cli import ratio_text
    head = ("kernel", "shape", "te ms", "numpy ms", "te GFLOP/s", "numpy GFLOP/s",
            "te/numpy speed", "build ms")
    lines = [head]
    for name, shape, ours, ref, g_ours, g_ref, build_ms in rows:
        lines.append((name, shape, f"{ours * 1e3:.3f}", f"{ref * 1e3:.3f}", f"{g_ours:.1f}",
                      f"{g_ref:.1f}", ratio_text(ref / ours), f"{build_ms:.0f}"))
    widths = [max(len(line[k]) for line in lines) for k in range(len(head))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))


# main()'s code after Ctrl-C: 128 + SIGINT, what a shell reports for a program Ctrl-C ended.
EXIT_INTERRUPTED = 130


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m te", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="build, check and time a matmul and a fused kernel")
    p_demo.add_argument("--size", type=int, default=512, help="matmul size (default 512)")
    p_demo.add_argument("--no-ir", action="store_true", help="do not print the lowered IR")
    from .autotune import cli as tune_cli
    tune_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "demo" and args.size < 1:
        parser.error(f"--size must be a positive integer, got {args.size}")
    prog = f"{parser.prog} {args.command}"
    try:
        if args.command == "tune":
            return tune_cli.run(args)
        return demo(args.size, not args.no_ir)
    except (te.autotune.TuningLogError, tune_cli.NumpyMismatchError) as err:
        return _fail(f"{prog}: error: {err}", 1)
    except (te.TEError, te.ArgumentError) as err:
        parser.error(str(err))  # a usage error: the message and exit code 2, no traceback
    except MemoryError as err:
        # numpy says how much it could not allocate, for which shape
        option = "--shape" if args.command == "tune" else "--size"
        return _fail(f"{prog}: error: out of memory ({err or 'no detail'}); try a smaller "
                     f"{option}", 1)
    except KeyboardInterrupt as err:
        done = tune_cli.interrupted_text(args, getattr(err, "result", None)) \
            if args.command == "tune" else "interrupted"
        return _fail(f"{prog}: {done}", EXIT_INTERRUPTED)


def _fail(message: str, code: int) -> int:
    """One line on stderr instead of a traceback; the exit code."""
    sys.stdout.flush()
    print(message, file=sys.stderr)
    return code

if __name__ == "__main__":
    code = main()
    if code == EXIT_INTERRUPTED:
        # End as Python ends on an uncaught KeyboardInterrupt: killed by SIGINT after a clean
        # interpreter exit, so a shell script running this stops too. (Returning 130 would
        # not be reliable either: CPython 3.11 also dies by SIGINT when the interrupt passed
        # through an exec of a string, e.g. a dataclass being defined by a lazy import.)
        sys.excepthook = lambda *exc: None   # main() already said what happened
        raise KeyboardInterrupt
    sys.exit(code)
