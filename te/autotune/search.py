"""Tuners: ask/tell search over a ConfigSpace (random, grid, xgb, optuna).

Takes a ConfigSpace, a seed and (for xgb) a featurize(config) -> vector or None; gives
next_batch(n) -> configs never proposed before, and update(configs, results), where a
failed result is told as failed (never as a made-up large time). optuna is imported
lazily in OptunaTuner. Imports space, records, cost_model.
"""
from __future__ import annotations

import math
import random

from .cost_model import XGBCostModel
from .space import ConfigEntity, ConfigSpace, _plain


class Tuner:
    def __init__(self, space: ConfigSpace, seed: int | None = None):
        self.space = space
        self.rng = random.Random(seed)
        self.seed = seed
        self.visited: set = set()
        self.history: list = []      # (config, cost seconds or inf)

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def next_batch(self, n: int) -> list:
        raise NotImplementedError

    def update(self, configs: list, results: list) -> None:
        for cfg, res in zip(configs, results):
            self.visited.add(cfg.index)
            self.history.append((cfg, res.median if res.ok else math.inf))

    def _random_unvisited(self, n: int, exclude: set) -> list:
        out, tries = [], 0
        size = len(self.space)
        while len(out) < n and tries < 20 * n + 100 and len(self.visited) + len(exclude) < size:
            tries += 1
            idx = self.rng.randrange(size)
            if idx in self.visited or idx in exclude:
                continue
            exclude.add(idx)
            out.append(self.space.get(idx))
        return out


class RandomTuner(Tuner):
    def next_batch(self, n: int) -> list:
        return self._random_unvisited(n, set())


class GridTuner(Tuner):
    """Every config in index order (the first knob varies fastest)."""

    def __init__(self, space: ConfigSpace, seed: int | None = None):
        super().__init__(space, seed)
        self.cursor = 0

    def next_batch(self, n: int) -> list:
        out = []
        while len(out) < n and self.cursor < len(self.space):
            if self.cursor not in self.visited:
                out.append(self.space.get(self.cursor))
            self.cursor += 1
        return out


class XGBTuner(Tuner):
    """Screens many candidates with the ranking model, measures the top of the list.

    Candidates: random configs plus one-knob mutations of the best measured ones. A share
    `epsilon` of each batch is random, for exploration; the model retrains on every update.
    Before the model has data, a batch is the default config (option 0 of every knob: the
    space's prior), one-knob variations of it and random configs.
    """

    def __init__(self, space: ConfigSpace, featurize, seed: int | None = None,
                 n_screen: int = 500, epsilon: float = 0.1, min_train: int = 16):
        super().__init__(space, seed)
        self.featurize = featurize
        self.n_screen, self.epsilon, self.min_train = n_screen, epsilon, min_train
        self.model = XGBCostModel(seed=seed or 0)
        self.feature_cache: dict = {}
        self.xs: list = []
        self.ys: list = []

    def features(self, cfg):
        idx = cfg.index
        if idx not in self.feature_cache:
            self.feature_cache[idx] = self.featurize(cfg)
        return self.feature_cache[idx]

    def _mutations(self, count: int, exclude: set) -> list:
        """One-knob changes of the best measured configs (local search around them)."""
        ranked = sorted((c for c in self.history if math.isfinite(c[1])), key=lambda c: c[1])
        parents = [c for c, _ in ranked[:8]] or [self.space.default()]
        names = [k for k, knob in self.space.knobs.items() if len(knob.options) > 1]
        out = []
        for _ in range(count * 3):
            if not parents or not names or len(out) >= count:
                break
            values = dict(self.rng.choice(parents).values)
            name = self.rng.choice(names)
            values[name] = _option(self.space, name,
                                   self.rng.randrange(len(self.space.knobs[name].options)))
            cand = ConfigEntity(self.space, values)
            idx = cand.index
            if idx in self.visited or idx in exclude:
                continue
            exclude.add(idx)
            out.append(cand)
        return out

    def next_batch(self, n: int) -> list:
        if not self.model.trained or len(self.xs) < self.min_train:
            # Cold start: the default config (the space's prior: a register-tiled,
            # vectorized, parallel kernel), one-knob variations of it, and random ones.
            exclude: set = set()
            out = []
            default = self.space.default()
            if default.index not in self.visited:
                exclude.add(default.index)
                out.append(default)
            out += self._mutations(max(0, n // 2 - len(out)), exclude)
            return out + self._random_unvisited(n - len(out), exclude)
        exclude: set = set()
        pool = self._mutations(self.n_screen // 2, exclude)
        pool += self._random_unvisited(self.n_screen - len(pool), exclude)
        feats, keep = [], []
        for cfg in pool:
            f = self.features(cfg)
            if f is not None:
                feats.append(f)
                keep.append(cfg)
        if not keep:
            return self._random_unvisited(n, set())
        scores = self.model.predict(feats)
        order = sorted(range(len(keep)), key=lambda k: -scores[k])
        n_explore = int(round(self.epsilon * n))
        chosen = [keep[k] for k in order[:n - n_explore]]
        rest = [keep[k] for k in order[n - n_explore:]]
        self.rng.shuffle(rest)
        return chosen + rest[:n_explore]

    def update(self, configs: list, results: list) -> None:
        super().update(configs, results)
        for cfg, res in zip(configs, results):
            f = self.features(cfg)
            if f is not None:
                self.xs.append(f)
                self.ys.append(res.median if res.ok else math.inf)
        self.model.fit(self.xs, self.ys)


def _option(space: ConfigSpace, name: str, k: int):
    return _plain(space.knobs[name].options[k])


class OptunaTuner(Tuner):
    """optuna TPE (seeded) with ask/tell; each knob is a categorical over its options."""

    def __init__(self, space: ConfigSpace, seed: int | None = None):
        super().__init__(space, seed)
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=10,
                                             multivariate=True)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.pending: dict = {}   # config index -> optuna trial
        self.known: dict = {}     # config index -> cost (inf: failed)

    def _ask_one(self):
        trial = self.study.ask()
        values = {name: _option(self.space, name, trial.suggest_categorical(
            name, list(range(len(knob.options)))))
            for name, knob in self.space.knobs.items()}
        return trial, self.space.from_json_dict({"knobs": values})

    def next_batch(self, n: int) -> list:
        out, tries = [], 0
        while len(out) < n and tries < 50 * n and self.has_next():
            tries += 1
            trial, cfg = self._ask_one()
            idx = cfg.index
            if idx in self.known:       # a repeat: answer from memory, do not re-measure
                self._tell(trial, self.known[idx])
                continue
            if idx in self.pending:
                self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
                continue
            self.pending[idx] = trial
            out.append(cfg)
        if len(out) < n:  # TPE keeps repeating itself: fill up at random
            out += self._random_unvisited(n - len(out), set(self.pending) | set(self.known))
        return out

    def _tell(self, trial, cost: float) -> None:
        if math.isfinite(cost):
            self.study.tell(trial, cost)
        else:
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)

    def update(self, configs: list, results: list) -> None:
        super().update(configs, results)
        for cfg, res in zip(configs, results):
            idx = cfg.index
            cost = res.median if res.ok else math.inf
            self.known[idx] = cost
            trial = self.pending.pop(idx, None)
            if trial is not None:
                self._tell(trial, cost)
            else:  # from a log or a random fill-up: teach TPE what is known
                self._add_known(cfg, cost)

    def _add_known(self, cfg, cost: float) -> None:
        optuna = self.optuna
        params, dists = {}, {}
        for name, knob in self.space.knobs.items():
            choices = list(range(len(knob.options)))
            dists[name] = optuna.distributions.CategoricalDistribution(choices)
            params[name] = [_plain(o) for o in knob.options].index(cfg.values[name])
        state = optuna.trial.TrialState.COMPLETE if math.isfinite(cost) else \
            optuna.trial.TrialState.FAIL
        self.study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, state=state,
            value=cost if math.isfinite(cost) else None))


TUNERS = {"random": RandomTuner, "grid": GridTuner, "xgb": XGBTuner, "optuna": OptunaTuner}
