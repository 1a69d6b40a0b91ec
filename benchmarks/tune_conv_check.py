"""A graph.autotune log's best conv2d configs against the default, re-timed here: `python
benchmarks/tune_conv_check.py LOG [--model resnet50] [--threads 1] [--rounds 15]`.

For each conv task of the model (O2) whose best record in LOG (apply_history_best's pick)
is not the conv2d space's default config, builds both schedules in this process, checks
they give the same output on random data, and times them alternately (default, best) for
--rounds rounds: the per-task median of the per-round ratios, and weight x median time
summed over those tasks. Tells a config that is faster from one measured in a quieter
moment than the default (the tuning workers time each config once, in a batch).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [p for p in (ROOT, HERE) if p not in sys.path]


def _timed(fn, args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    import numpy as np

    import graph
    import runtime
    import te
    from graph_run import load_model
    from te.autotune.conv2d_space import conv2d_schedule
    from te.autotune.task import random_inputs
    runtime.set_num_threads(args.threads)
    model, _ = load_model(args.model)
    tasks = graph.extract_tasks(graph.from_onnx(model), "O2")
    best = te.autotune.apply_history_best(args.log).best
    total = [0.0, 0.0]
    for t in tasks:
        if t.family != "conv2d" or t.key not in best:
            continue
        space = te.autotune.conv2d_space(t.outs[0])
        cfg = space.from_json_dict(best[t.key].config)
        if cfg == space.default():
            continue
        fns = [te.build(conv2d_schedule(c, t.outs[0]), t.args) for c in (space.default(), cfg)]
        ins = random_inputs(t.args)
        outs = [np.full(t.shape, np.nan, np.float32) for _ in fns]
        for fn, out in zip(fns, outs):
            fn(*ins, out)
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4,
                                   atol=1e-4 * float(np.abs(outs[0]).max()))
        times: list = [[], []]
        for _ in range(args.rounds):
            for k, fn in enumerate(fns):
                times[k].append(_timed(fn, [*ins, outs[k]]))
        ratio = statistics.median(a / b for a, b in zip(*times))
        med = [statistics.median(ts) for ts in times]
        for k in range(2):
            total[k] += t.weight * med[k]
        print(f"{t.name:24} {'x'.join(map(str, t.shape)):14} weight {t.weight}  default "
              f"{med[0] * 1e3:.3f} ms  best {med[1] * 1e3:.3f} ms  default/best {ratio:.2f}  "
              f"{cfg.values}", flush=True)
    if total[1]:
        print(f"weight x time over these tasks: default {total[0] * 1e3:.2f} ms, best "
              f"{total[1] * 1e3:.2f} ms, default/best {total[0] / total[1]:.3f}")
    else:
        print("every conv task's best record is its default config (or none is recorded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
