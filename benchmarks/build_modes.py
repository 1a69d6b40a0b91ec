"""One kernel built N times in one process, timed alternately: does a build have a speed
of its own? `python benchmarks/build_modes.py [--kernel stem|conv3x3|matmul] [--builds 6]
[--rounds 9] [--load 0]`.

Each round calls every build once on the same arrays, twice over: timed by
time.perf_counter alone (a vDSO call, no system call between kernel calls), then with
time.thread_time around each call as well (CPU time of the calling thread; a real system
call). Prints per build the median wall time of both passes and the median CPU time.
A build slower by whole scheduler ticks in the first pass whose CPU time is not was
descheduled, not slow (see BUILD_MODES.md).
--load N starts N busy-loop processes for the timing (the shared machine's neighbours, on
purpose). Kernels at 1 thread: ResNet-50's stem conv (7x7/2, 3->64, 224x224, bias+relu,
the conv2d space's default config), a 3x3 conv 64->64 at 56x56 (same epilogue), matmul
512^3 (the automatic space's default).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [p for p in (ROOT,) if p not in sys.path]

# (data shape, kernel shape, stride, padding)
CONVS = {"stem": ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
         "conv3x3": ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)}


def _conv(name: str):
    import te
    from te.autotune.conv2d_space import conv2d_schedule
    dshape, kshape, stride, pad = CONVS[name]
    X, W = te.placeholder(dshape, name="X"), te.placeholder(kshape, name="W")
    B = te.placeholder((kshape[0],), name="B")
    conv = te.autotune.conv2d_compute(X, W, stride, pad)
    out = te.compute(conv.shape, lambda n, f, y, x: te.max(conv[n, f, y, x] + B[f], 0.0),
                     name="epilogue", tag="broadcast")
    cfg = te.autotune.conv2d_space(out).default()
    return conv2d_schedule(cfg, out), [X, W, B, out]


def _matmul():
    import te
    from te.autotune.workloads import make
    C, args, _, _ = make("matmul", (512, 512, 512))
    return te.autotune.auto_schedule(C, args)


def _busy() -> None:
    while True:
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", choices=("stem", "conv3x3", "matmul"), default="stem")
    p.add_argument("--builds", type=int, default=6)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--load", type=int, default=0)
    args = p.parse_args(argv)
    import numpy as np

    import runtime
    import te
    from te.autotune.task import random_inputs
    runtime.set_num_threads(1)
    fns = []
    for _ in range(args.builds):
        sch, targs = _matmul() if args.kernel == "matmul" else _conv(args.kernel)
        fns.append(te.build(sch, targs))
    ins = random_inputs(targs)
    out = np.zeros(tuple(int(d.value) for d in targs[-1].shape), np.float32)
    for fn in fns:
        fn(*ins, out)
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    wall = [[] for _ in fns]
    wall_cpu = [[] for _ in fns]
    cpu = [[] for _ in fns]
    try:
        for _ in range(args.rounds):
            for k, fn in enumerate(fns):
                start = time.perf_counter()
                fn(*ins, out)
                wall[k].append(time.perf_counter() - start)
        for _ in range(args.rounds):
            for k, fn in enumerate(fns):
                c0 = time.thread_time()
                start = time.perf_counter()
                fn(*ins, out)
                wall_cpu[k].append(time.perf_counter() - start)
                cpu[k].append(time.thread_time() - c0)
    finally:
        for h in hogs:
            h.terminate()
    print(f"{args.kernel}: {args.builds} builds, {args.rounds} rounds, load {args.load}; "
          f"medians in ms, one column per build")
    for label, rows in (("wall, perf_counter only", wall),
                        ("wall, with thread_time", wall_cpu),
                        ("thread CPU time", cpu)):
        print(f"{label:24}", " ".join(f"{statistics.median(x) * 1e3:7.2f}" for x in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
