"""The cost model's pairwise ranking accuracy on held-out real measurements.

`python benchmarks/tune_ranking.py --log /tmp/mm1024.jsonl --op matmul --shape 1024 1024 1024`
reads the successful trials of a tuning log for that workload, featurizes each config, and
over --splits random 70/30 splits trains the xgboost ranking model (te.autotune's own) on
70% and reports the fraction of correctly ordered pairs among the other 30% (pairs whose
times differ by less than --tie, relative, are left out: they are measurement noise).
"""
from __future__ import annotations

import argparse
import math
import random
import statistics

from te.autotune import features as F
from te.autotune import records as R
from te.autotune import workloads
from te.autotune.cost_model import XGBCostModel
from te.autotune.task import AutoTask


def accuracy(scores, costs, tie: float) -> float:
    right = total = 0
    for i in range(len(costs)):
        for j in range(i + 1, len(costs)):
            a, b = costs[i], costs[j]
            if abs(a - b) <= tie * min(a, b):
                continue
            total += 1
            right += (scores[i] > scores[j]) == (a < b)
    return right / total if total else float("nan")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--op", default="matmul")
    p.add_argument("--shape", type=int, nargs="+", default=[1024, 1024, 1024])
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--tie", type=float, default=0.05)
    a = p.parse_args()
    out, args, _, _ = workloads.make(a.op, tuple(a.shape))
    task = AutoTask(out, args)
    rows = []
    for rec in R.load_records(a.log)[0]:
        if rec.workload != task.key or not rec.result.ok:
            continue
        try:
            cfg = task.space.from_json_dict(rec.config)
        except Exception:  # noqa: BLE001 - a record of an older space
            continue
        s, sargs = task.instantiate(cfg)
        rows.append((F.extract(F.lower_for_features(s, sargs)), rec.result.median))
    accs = []
    for split in range(a.splits):
        rng = random.Random(split)
        order = rows[:]
        rng.shuffle(order)
        cut = int(0.7 * len(order))
        model = XGBCostModel(seed=split)
        model.fit([r[0] for r in order[:cut]], [r[1] for r in order[:cut]])
        test = order[cut:]
        accs.append(accuracy(model.predict([r[0] for r in test]), [r[1] for r in test],
                             a.tie))
    times = sorted(r[1] for r in rows)
    print(f"{a.op} {a.shape}: {len(rows)} successful trials (times {times[0] * 1e3:.2f}.."
          f"{times[-1] * 1e3:.2f} ms); held-out pairwise accuracy over {a.splits} 70/30 "
          f"splits: mean {statistics.mean(accs):.3f}, min {min(accs):.3f}, max "
          f"{max(accs):.3f} (pairs within {a.tie:.0%} left out)")
    if any(math.isnan(x) for x in accs):
        print("some splits had no comparable pairs")


if __name__ == "__main__":
    main()
