"""Tuners: ask/tell search over a ConfigSpace (random, grid, xgb, optuna, ga).

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
        return len(self.visited) < self.space.size

    def next_batch(self, n: int) -> list:
        raise NotImplementedError

    def update(self, configs: list, results: list) -> None:
        for cfg, res in zip(configs, results):
            self.visited.add(cfg.index)
            self.history.append((cfg, res.median if res.ok else math.inf))

    def _random_unvisited(self, n: int, exclude: set) -> list:
        out, tries = [], 0
        size = self.space.size
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
        while len(out) < n and self.cursor < self.space.size:
            if self.cursor not in self.visited:
                out.append(self.space.get(self.cursor))
            self.cursor += 1
        return out


class XGBTuner(Tuner):
    """Screens many candidates with the ranking model, measures the top of the list.

    Cold start (before `min_train` measurements): the default config (option 0 of every
    knob: the space's prior), then one-knob variations of it taken systematically (each
    knob's other options, in shuffled order: a one-factor-at-a-time design that shows the
    model each knob's effect around a good kernel), with a few random configs for
    diversity. After that, each batch is the model's top picks from a pool of one-knob
    mutations and crossovers of the best measured configs plus random configs (a
    reservoir renewed by a fifth per batch, to bound the cost of featurizing); a share
    `epsilon` of the batch is random, for exploration. Batches are at most `max_batch`, so
    the model retrains (cheaply: a few hundred rows) after every few measurements.
    """

    def __init__(self, space: ConfigSpace, featurize, seed: int | None = None,
                 n_screen: int = 500, epsilon: float = 0.1, min_train: int = 8,
                 max_batch: int = 8):
        super().__init__(space, seed)
        self.featurize = featurize
        self.n_screen, self.epsilon, self.min_train = n_screen, epsilon, min_train
        self.max_batch = max_batch
        self.model = XGBCostModel(seed=seed or 0)
        self.feature_cache: dict = {}
        self.xs: list = []
        self.ys: list = []
        self._ofat: list | None = None   # the cold start's one-knob variations, in order
        self._reservoir: list = []       # random screening candidates kept across batches

    def features(self, cfg):
        idx = cfg.index
        if idx not in self.feature_cache:
            self.feature_cache[idx] = self.featurize(cfg)
        return self.feature_cache[idx]

    def _parents(self) -> list:
        ranked = sorted((c for c in self.history if math.isfinite(c[1])), key=lambda c: c[1])
        return [c for c, _ in ranked[:8]] or [self.space.default()]

    def _take(self, values: dict, out: list, exclude: set) -> None:
        cand = ConfigEntity(self.space, values)
        idx = cand.index
        if idx not in self.visited and idx not in exclude:
            exclude.add(idx)
            out.append(cand)

    def _mutations(self, count: int, exclude: set) -> list:
        """One-knob changes of the best measured configs (local search around them)."""
        parents = self._parents()
        names = [k for k, knob in self.space.knobs.items() if len(knob.options) > 1]
        out: list = []
        for _ in range(count * 3):
            if not names or len(out) >= count:
                break
            values = dict(self.rng.choice(parents).values)
            name = self.rng.choice(names)
            values[name] = _option(self.space, name,
                                   self.rng.randrange(len(self.space.knobs[name].options)))
            self._take(values, out, exclude)
        return out

    def _crossovers(self, count: int, exclude: set) -> list:
        """Each knob from one of two good parents: combines what worked in each."""
        parents = self._parents()
        out: list = []
        if len(parents) < 2:
            return out
        for _ in range(count * 3):
            if len(out) >= count:
                break
            a, b = self.rng.sample(parents, 2)
            values = {k: (a if self.rng.random() < 0.5 else b).values[k]
                      for k in self.space.knobs}
            self._take(values, out, exclude)
        return out

    def _random_pool(self, n: int, exclude: set) -> list:
        """n random unvisited configs for screening, mostly carried over from earlier
        batches: featurizing a candidate means lowering it (tens of ms for a conv), so
        each batch adds a fifth of fresh ones instead of drawing the whole share anew."""
        keep = [c for c in self._reservoir if c.index not in self.visited
                and c.index not in exclude]
        fresh = max(n // 5, n - len(keep))
        keep = keep[:max(0, n - fresh)]
        exclude.update(c.index for c in keep)
        self._reservoir = keep + self._random_unvisited(fresh, exclude)
        return list(self._reservoir)

    def _one_factor_variations(self) -> list:
        if self._ofat is None:
            default = self.space.default()
            pairs = [(name, k) for name, knob in self.space.knobs.items()
                     for k in range(1, len(knob.options))]
            self.rng.shuffle(pairs)
            self._ofat = []
            for name, k in pairs:
                values = dict(default.values)
                values[name] = _option(self.space, name, k)
                self._ofat.append(values)
        return self._ofat

    def _cold_start(self, n: int) -> list:
        exclude: set = set()
        out: list = []
        self._take(dict(self.space.default().values), out, exclude)
        n_random = n // 4
        variations = self._one_factor_variations()
        while variations and len(out) < n - n_random:
            self._take(variations.pop(0), out, exclude)
        return out + self._random_unvisited(n - len(out), exclude)

    def next_batch(self, n: int) -> list:
        n = min(n, self.max_batch)
        if not self.model.trained or len(self.xs) < self.min_train:
            return self._cold_start(n)
        exclude: set = set()
        pool = self._mutations(int(self.n_screen * 0.4), exclude)
        pool += self._crossovers(int(self.n_screen * 0.2), exclude)
        pool += self._random_pool(self.n_screen - len(pool), exclude)
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
        sampler = self.make_sampler(optuna, seed)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.pending: dict = {}   # config index -> optuna trial
        self.known: dict = {}     # config index -> cost (inf: failed)

    @staticmethod
    def make_sampler(optuna, seed):
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, multivariate=True)

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


class GATuner(OptunaTuner):
    """A genetic algorithm: optuna's NSGA-II sampler (seeded; one objective, so its
    selection is elitist by run time), generations of `POPULATION` configs whose knobs
    are crossed over and mutated; what te.tvm.autotvm's GATuner runs."""
    POPULATION = 16

    @staticmethod
    def make_sampler(optuna, seed):
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=GATuner.POPULATION)


TUNERS = {"random": RandomTuner, "grid": GridTuner, "xgb": XGBTuner, "optuna": OptunaTuner,
          "ga": GATuner}
