"""The xgboost ranking cost model over program features.

Takes feature vectors (features.py) and measured run times; gives scores where higher means
faster. Trained with the native xgb.train API and the rank:pairwise objective (only the
order of candidates matters to the search), predicted with Booster.inplace_predict.
xgboost is imported here, lazily, so `import te` stays fast. Imports numpy and xgboost.
"""
from __future__ import annotations

import math


class XGBCostModel:
    """fit(features, costs) then predict(features); failed trials train as the slowest."""

    def __init__(self, seed: int = 0, num_boost_round: int = 80):
        self.seed, self.num_boost_round = seed, num_boost_round
        self.booster = None

    def fit(self, xs: list, costs: list) -> None:
        import numpy as np
        import xgboost as xgb
        ok = [c for c in costs if math.isfinite(c)]
        if len(ok) < 2:
            return
        best = min(ok)
        # Relevance = normalized throughput in [0, 1]; failures rank below everything.
        labels = np.array([best / c if math.isfinite(c) else 0.0 for c in costs])
        dtrain = xgb.DMatrix(np.asarray(xs, dtype=np.float32), label=labels)
        dtrain.set_group([len(costs)])
        params = {"objective": "rank:pairwise", "max_depth": 6, "eta": 0.2,
                  "min_child_weight": 1, "subsample": 0.9, "colsample_bytree": 0.9,
                  "seed": self.seed, "nthread": 1, "verbosity": 0,
                  # xgboost >= 2 samples one pair per document by default: far too few
                  # for a few hundred trials (held-out pairwise accuracy 0.67 -> 0.79 on
                  # the matmul 1024 log with 32; benchmarks/TUNING.md)
                  "lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 32}
        self.booster = xgb.train(params, dtrain, num_boost_round=self.num_boost_round)

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def predict(self, xs: list):
        import numpy as np
        if self.booster is None:
            return np.zeros(len(xs))
        return self.booster.inplace_predict(np.asarray(xs, dtype=np.float32))


def pairwise_accuracy(scores, costs) -> float:
    """Fraction of pairs with different finite costs that the scores order correctly."""
    right = total = 0
    n = len(costs)
    for i in range(n):
        for j in range(i + 1, n):
            ci, cj = costs[i], costs[j]
            if not (math.isfinite(ci) and math.isfinite(cj)) or ci == cj:
                continue
            total += 1
            right += (scores[i] > scores[j]) == (ci < cj)
    return right / total if total else float("nan")
