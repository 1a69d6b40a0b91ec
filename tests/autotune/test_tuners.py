"""Tuner logic with a fake, deterministic measurer: grid enumerates, random never repeats,
optuna ask/tell (failures told as failed), xgb beats random on a synthetic cost."""
from __future__ import annotations

import math

import te
from te.autotune import records as R
from te.autotune import search
from te.autotune.cost_model import XGBCostModel, pairwise_accuracy
from te.autotune.space import ConfigSpace
from te.autotune.task import AutoTask
from te.autotune.tune import featurizer
from te.compute import ops


def _toy_space() -> ConfigSpace:
    space = ConfigSpace()
    space.define_knob("a", list(range(8)))
    space.define_knob("b", list(range(6)))
    space.define_knob("c", ["x", "y"])
    return space


def _fake_measure(cfg) -> R.MeasureResult:
    v = cfg.values
    if v["a"] == 7:
        return R.MeasureResult(error=R.WRONG_ANSWER, msg="fake")
    cost = 1e-3 * (1 + abs(v["a"] - 3) + abs(v["b"] - 4) + (v["c"] == "x"))
    return R.MeasureResult(costs=(cost, cost))


def _drive(tuner, trials: int, batch: int = 8) -> list:
    seen = []
    while len(seen) < trials and tuner.has_next():
        cfgs = tuner.next_batch(min(batch, trials - len(seen)))
        if not cfgs:
            break
        results = [_fake_measure(c) for c in cfgs]
        tuner.update(cfgs, results)
        seen += [(c.index, r) for c, r in zip(cfgs, results)]
    return seen


def test_grid_enumerates_every_config_once_in_order():
    space = _toy_space()
    seen = _drive(search.GridTuner(space), 10_000)
    assert [i for i, _ in seen] == list(range(len(space)))


def test_random_never_repeats_and_is_seeded():
    space = _toy_space()
    a = [i for i, _ in _drive(search.RandomTuner(space, seed=3), 40)]
    b = [i for i, _ in _drive(search.RandomTuner(space, seed=3), 40)]
    assert a == b and len(set(a)) == 40


def test_optuna_ask_tell_finds_the_optimum_and_tells_failures_as_failed():
    space = _toy_space()
    tuner = search.OptunaTuner(space, seed=0)
    seen = _drive(tuner, 60)
    assert len({i for i, _ in seen}) == len(seen)
    states = [t.state.name for t in tuner.study.trials]
    assert "FAIL" in states                        # a=7 is a wrong answer
    assert all(t.value is None or t.value < 1 for t in tuner.study.trials)  # no fake times
    best = min(r.median for _, r in seen)
    assert math.isclose(best, 1e-3)


def test_ga_is_optunas_genetic_sampler_seeded_and_finds_the_optimum():
    space = _toy_space()
    tuner = search.GATuner(space, seed=0)
    assert type(tuner.study.sampler).__name__ == "NSGAIISampler"
    seen = _drive(tuner, 60)
    again = _drive(search.GATuner(space, seed=0), 60)
    assert [i for i, _ in seen] == [i for i, _ in again]
    assert len({i for i, _ in seen}) == len(seen)
    assert min(r.median for _, r in seen) < 2.5e-3   # within 1.5 steps of the optimum


def test_failed_trials_are_recorded_in_history():
    tuner = search.RandomTuner(_toy_space(), seed=0)
    _drive(tuner, 96)
    assert any(math.isinf(c) for _, c in tuner.history)


def _synthetic_cost(cfg) -> float:
    """A deterministic 'time' whose optimum is away from the default config: mr 2, row
    blocks of 4 tiles, k unrolled by 8, the local accumulator, no packing."""
    v = cfg.values
    t = 1.0
    t += abs(math.log2(v["T_matmul.mr"]) - 1)
    t += abs(math.log2(v["T_matmul.mc"]) - 2) * 0.5
    t += abs(math.log2(v["T_matmul.kc"]) - 3) * 0.5
    t += 0 if v["T_matmul.cache"] else 2
    t += 1 if v["T_matmul.pack"] else 0
    return t * 1e-3


def _best_after(tuner, trials: int) -> float:
    best = math.inf
    while len(tuner.visited) < trials:
        cfgs = tuner.next_batch(8)
        res = [R.MeasureResult(costs=(_synthetic_cost(c),)) for c in cfgs]
        tuner.update(cfgs, res)
        best = min([best] + [r.median for r in res])
    return best


def test_xgb_beats_random_on_a_synthetic_cost():
    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    task = AutoTask(ops.matmul(A, B))
    xgb_best, rnd_best = [], []
    for seed in (0, 1):
        xgb = search.XGBTuner(task.space, featurizer(task), seed=seed, n_screen=120,
                              min_train=16)
        xgb_best.append(_best_after(xgb, 48))
        rnd_best.append(_best_after(search.RandomTuner(task.space, seed=seed), 48))
    assert sum(xgb_best) < sum(rnd_best)


def test_cost_model_ranks_held_out_points():
    xs = [[float(a), float(b)] for a in range(10) for b in range(10)]
    costs = [1.0 + (a - 4) ** 2 + 0.5 * b for a, b in ((int(x), int(y)) for x, y in xs)]
    model = XGBCostModel(seed=0)
    model.fit(xs[::2], costs[::2])
    acc = pairwise_accuracy(model.predict(xs[1::2]), costs[1::2])
    assert acc > 0.8


def _matmul_task(n: int = 96) -> AutoTask:
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    return AutoTask(ops.matmul(A, B))


def test_xgb_cold_start_is_the_default_then_one_knob_variations():
    task = _matmul_task()
    tuner = search.XGBTuner(task.space, featurizer(task), seed=0, max_batch=8)
    batch = tuner.next_batch(16)
    assert len(batch) == 8                                # capped: the model retrains sooner
    default = task.space.default().values
    assert batch[0].values == default
    n_random = 8 // 4
    for cfg in batch[1:8 - n_random]:
        changed = [k for k in default if cfg.values[k] != default[k]]
        assert len(changed) == 1, changed
    assert len({c.index for c in batch}) == len(batch)
    # the next cold-start batch continues the design instead of repeating it
    tuner.update(batch, [R.MeasureResult(costs=(1e-3,))] * len(batch))
    tuner.min_train = 10 ** 6                             # stay in the cold start
    more = tuner.next_batch(8)
    assert not {c.index for c in more} & {c.index for c in batch}


def test_xgb_crossovers_take_every_knob_from_one_of_two_good_parents():
    task = _matmul_task()
    tuner = search.XGBTuner(task.space, featurizer(task), seed=1)
    cfgs = tuner._random_unvisited(12, set())
    tuner.update(cfgs, [R.MeasureResult(costs=(1e-3 * (k + 1),)) for k in range(12)])
    parents = [c.values for c in cfgs[:8]]                # the 8 fastest
    children = tuner._crossovers(20, set())
    assert children
    for child in children:
        assert child.index not in tuner.visited
        assert any(all(child.values[k] in (a[k], b[k]) for k in a)
                   for a in parents for b in parents)


def test_featurizer_appends_each_knobs_option_index():
    task = _matmul_task()
    cfg = task.space.get(len(task.space) - 1)             # the last option of every knob
    plain = featurizer(task, knobs=False)(cfg)
    full = featurizer(task)(cfg)
    assert full[:len(plain)] == list(plain)
    assert full[len(plain):] == [float(len(k.options) - 1) for k in task.space.knobs.values()]


def test_a_space_larger_than_sys_maxsize_gives_its_default_and_random_batches():
    """The knobs of a chain of 40 elementwise stages (as a fused group of a long model
    graph can be) multiply past sys.maxsize, where len() cannot answer: the space's size,
    its default config and the grid and random tuners' batches come from the exact size."""
    import sys
    from te.autotune.auto_space import auto_schedule
    X = te.placeholder((33, 65), name="X")
    out = X
    for k in range(40):
        out = ops.add(ops.multiply(out, X), X, name=f"C{k}")
    space = ConfigSpace()
    auto_schedule(space, out)
    s, args = auto_schedule(space.default(), out)
    te.lower(s, args)
    assert space.size > sys.maxsize
    assert repr(space).startswith(f"ConfigSpace({space.size} configs)")
    random_cfgs = search.RandomTuner(space, seed=1).next_batch(3)
    grid_cfgs = search.GridTuner(space).next_batch(2)
    assert len({c.index for c in random_cfgs}) == 3 and [c.index for c in grid_cfgs] == [0, 1]
