"""Template API (define_split/knob/reorder/annotate, apply), config JSON round trip, and
apply_history_best dispatch."""
from __future__ import annotations

import json

import numpy as np
import pytest

import te
from te.autotune import records as R
from te.autotune.space import ConfigSpace
from te.autotune.split import split_candidates
from te.autotune.workload import package_version


@te.autotune.template("test_matmul_tpl")
def matmul_tpl(n, m, k):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = te.autotune.get_config()
    y, x = C.op.axis
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2")
    cfg.define_knob("vec", [False, True])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    cfg.define_reorder("order", [yo, xo, yi, xi], policy="candidate",
                       candidates=[[0, 1, 2, 3], [0, 2, 1, 3]])
    order = cfg["order"].apply(s, C, [yo, xo, yi, xi])
    cfg.define_annotate("ann", [order[-2], order[-1]], policy="try_unroll")
    cfg["ann"].apply(s, C, [order[-2], order[-1]])
    return s, [A, B, C]


def test_collect_mode_records_knobs_and_runs_with_defaults():
    space = matmul_tpl.space(12, 8, 5)
    assert list(space.knobs) == ["tile_y", "tile_x", "vec", "order", "ann"]
    assert [list(o) for o in space.knobs["tile_y"].options] == [[-1, f] for f in
                                                                 (1, 2, 3, 4, 6, 12)]
    assert len(space.knobs["tile_x"].options) == 4      # 1, 2, 4, 8
    assert len(space.knobs["ann"].options) == 4
    assert len(space) == 6 * 4 * 2 * 2 * 4


def test_every_template_config_is_correct():
    space = matmul_tpl.space(12, 8, 5)
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 1.5, (12, 5)).astype("float32")
    b = rng.uniform(0.5, 1.5, (5, 8)).astype("float32")
    for idx in range(0, len(space), 7):
        s, args = matmul_tpl.instantiate(space.get(idx), 12, 8, 5)
        c = np.zeros((12, 8), "float32")
        te.build(s, args)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_config_json_round_trip_replays_identically():
    space = matmul_tpl.space(12, 8, 5)
    cfg = space.get(77)
    text = json.dumps(cfg.to_json_dict())
    again = space.from_json_dict(json.loads(text))
    assert again == cfg and again.index == 77
    s1, _ = matmul_tpl.instantiate(cfg, 12, 8, 5)
    s2, _ = matmul_tpl.instantiate(again, 12, 8, 5)
    assert s1.to_json() == s2.to_json()


def test_config_json_rejects_foreign_values():
    space = matmul_tpl.space(12, 8, 5)
    data = space.get(0).to_json_dict()
    data["knobs"]["tile_y"] = [-1, 5]
    with pytest.raises(te.ScheduleError, match="not an option"):
        space.from_json_dict(data)


def test_get_config_outside_a_template_says_where_to_call_it():
    with pytest.raises(te.ScheduleError, match="inside a function decorated"):
        te.autotune.get_config()


def test_split_candidates_policies():
    assert split_candidates(12, "factors") == [1, 2, 3, 4, 6, 12]
    assert split_candidates(12, "power2") == [1, 2, 4, 8]
    assert split_candidates(12, "verbose") == [1, 2, 3, 4, 6, 8, 12]
    assert split_candidates(12, "verbose", max_factor=5) == [1, 2, 3, 4]
    with pytest.raises(te.ScheduleError, match="policy must be one of factors, power2, "
                       "verbose, candidate, got 'all'"):
        split_candidates(12, "all")


def test_apply_history_best_makes_the_template_use_the_best_record(tmp_path):
    log = str(tmp_path / "t.jsonl")
    space = matmul_tpl.space(12, 8, 5)
    key = matmul_tpl.workload_key((12, 8, 5))
    fast, slow = space.get(100), space.get(5)
    for cfg, t in ((slow, 2e-3), (fast, 1e-3)):
        R.append_record(log, R.Record(key, "llvm", package_version(), cfg.to_json_dict(),
                                      R.MeasureResult(costs=(t,))))
    default_s, _ = matmul_tpl(12, 8, 5)
    assert default_s.to_json() == matmul_tpl.instantiate(space.default(), 12, 8, 5)[0].to_json()
    with te.autotune.apply_history_best(log):
        s, args = matmul_tpl(12, 8, 5)
        other, _ = matmul_tpl(12, 8, 6)     # another workload: defaults
    assert s.to_json() == matmul_tpl.instantiate(fast, 12, 8, 5)[0].to_json()
    assert other.to_json() == matmul_tpl.instantiate(matmul_tpl.space(12, 8, 6).default(),
                                                     12, 8, 6)[0].to_json()
    te.build(s, args)   # and it builds


def test_collect_mode_needs_same_knobs_in_every_branch():
    space = ConfigSpace()
    space.define_knob("a", [1, 2])
    with pytest.raises(te.ScheduleError, match="defined twice"):
        space.define_knob("a", [3])
