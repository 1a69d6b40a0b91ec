"""define_split with TVM's meaning: entry k of a value is loop k's extent (SplitEntity), the
policies factors/power2/verbose/candidate, max_factor and filter, fallback defaults set by a
template, and logs of the old nested meaning (record format 1) refused or converted."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

import te
from te.autotune import records as R
from te.autotune.space import ConfigSpace
from te.autotune.split import SplitEntity, apply_split
from te.autotune.upgrade import upgrade_log
from te.autotune.workload import package_version


def _extents(loops) -> list:
    return [int(iv.dom.extent.value) for iv in loops]


def _elementwise(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 - 1.0, name="B")
    return A, B


def test_issue_reproduction_sizes_are_loop_extents():
    A, B = _elementwise(16)
    s = te.create_schedule(B.op)
    loops = apply_split([-1, 2, 4, 2], s, B, B.op.axis[0])
    assert _extents(loops) == [1, 2, 4, 2]
    cfg = ConfigSpace()
    cfg.define_split("tile", B.op.axis[0], num_outputs=4)
    assert isinstance(cfg["tile"], SplitEntity) and cfg["tile"].size == [-1, 1, 1, 1]


def test_random_splits_have_the_sizes_as_extents_and_compute_the_same():
    """Property over random extents and size lists: every inner loop has exactly its size,
    the outer loop covers the rest (padded and guarded when the product does not divide),
    and the built kernel equals the unscheduled computation, for a map and a reduction."""
    rng = random.Random(7)
    for case in range(14):
        n = rng.randint(1, 40)
        size = [-1] + [rng.choice([1, 2, 3, 4, 5, 8]) for _ in range(rng.randint(1, 3))]
        prod = math.prod(size[1:])
        x = np.random.default_rng(case).uniform(0.5, 1.5, n).astype("float32")
        A, B = _elementwise(n)
        s = te.create_schedule(B.op)
        loops = apply_split(size, s, B, B.op.axis[0])
        assert _extents(loops) == [-(-n // prod)] + size[1:], (n, size)
        got = np.full(n, np.nan, "float32")
        te.build(s, [A, B])(x, got)
        np.testing.assert_allclose(got, x * 2.0 - 1.0, rtol=1e-6)
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="C")
        s = te.create_schedule(C.op)
        assert _extents(apply_split(size, s, C, k))[1:] == size[1:]
        got = np.full(1, np.nan, "float32")
        te.build(s, [A, C])(x, got)
        np.testing.assert_allclose(got[0], x.sum(dtype="float64"), rtol=1e-5)


def _options(extent, **kw):
    cfg = ConfigSpace()
    cfg.define_split("t", extent, **kw)
    return [list(o) for o in cfg.knobs["t"].options]


def test_factors_policy_enumerates_exact_factorizations_innermost_slowest():
    opts = _options(12, num_outputs=3)
    assert all(12 % (a * b) == 0 for _, a, b in opts)
    assert len(opts) == 18            # ordered pairs (a, b) with a * b dividing 12
    assert opts[:3] == [[-1, 1, 1], [-1, 2, 1], [-1, 3, 1]]
    assert _options(12, num_outputs=1) == [[-1]]


def test_power2_and_verbose_allow_tails_but_never_beyond_the_extent():
    assert _options(12, policy="power2") == [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]
    assert _options(12, policy="verbose") == [[-1, f] for f in (1, 2, 3, 4, 6, 8, 12)]
    p3 = _options(12, policy="power2", num_outputs=3)
    assert [-1, 4, 2] in p3 and [-1, 2, 4] in p3 and [-1, 4, 4] not in p3
    assert _options(12, policy="power2", no_tail=True) == [[-1, 1], [-1, 2], [-1, 4]]


def test_max_factor_filter_and_candidate():
    assert _options(64, max_factor=8) == [[-1, f] for f in (1, 2, 4, 8)]
    kept = _options(64, num_outputs=3, filter=lambda e: e.size[-1] >= 4 and e.size[1] <= 2)
    assert kept and all(b >= 4 and a <= 2 for _, a, b in kept)
    assert len(kept) == len([1 for _, a, b in _options(64, num_outputs=3)
                             if b >= 4 and a <= 2])
    assert _options(10, policy="candidate", candidate=[[-1, 5], [2, 5]]) == [[-1, 5], [2, 5]]


@pytest.mark.parametrize("kw,msg", [
    ({"policy": "all"}, "policy must be one of factors, power2, verbose, candidate, got 'all'"),
    ({"num_outputs": 0}, "num_outputs must be a positive int, got 0"),
    ({"max_factor": 0}, "max_factor must be a positive int or None, got 0"),
    ({"filter": lambda e: False}, "no option is left for an axis of extent 12"),
    ({"filter": 3}, "filter must be a function of a SplitEntity"),
    ({"policy": "candidate", "candidate": [[-1, 2, 3]]},
     r"candidate \[-1, 2, 3\] has 3 sizes, expected num_outputs=2"),
])
def test_bad_split_arguments_are_refused(kw, msg):
    with pytest.raises(te.ScheduleError, match=msg):
        _options(12, **kw)


@te.autotune.template("test_split_semantics_tpl")
def three_level(n):
    A, B = _elementwise(n)
    s = te.create_schedule(B.op)
    cfg = te.autotune.get_config()
    cfg.define_split("tile", B.op.axis[0], num_outputs=3, policy="verbose")
    if cfg.is_fallback:
        cfg["tile"] = SplitEntity([-1, 2, 4])
    loops = cfg["tile"].apply(s, B, B.op.axis[0])
    s[B].vectorize(loops[-1])
    return s, [A, B]


def test_fallback_default_set_by_the_template_and_tuned_values():
    s, args = three_level(24)
    assert _extents(s[args[1]].leaf_iter_vars) == [3, 2, 4]
    space = three_level.space(24)
    cfg = space.from_json_dict({"knobs": {"tile": [-1, 3, 8]}})
    s, args = three_level.instantiate(cfg, 24)
    assert _extents(s[args[1]].leaf_iter_vars) == [1, 3, 8]
    with pytest.raises(te.ScheduleError, match="this config is a tuned one"):
        cfg["tile"] = SplitEntity([-1, 1, 1])


def _old_line(workload, knobs, cost):
    rec = R.Record(workload, "llvm", package_version(), {"knobs": knobs},
                   R.MeasureResult(costs=(cost,)))
    d = json.loads(rec.to_line())
    d["v"] = 1
    return json.dumps(d) + "\n"


def test_old_format_records_are_refused_with_the_reason(tmp_path):
    log = tmp_path / "old.jsonl"
    key = three_level.workload_key((24,))
    log.write_text(_old_line(key, {"tile": [-1, 8, 2]}, 1e-3))
    with pytest.warns(UserWarning, match=r"1 record in record format 1 not used: in that "
                      r"format a define_split value .* meant nested inner factors"):
        assert R.load_records(str(log))[0] == []
    R.check_log_path(str(log))        # still a tuning log: a run may append to it


def test_upgrade_log_converts_exact_nestings_and_drops_the_rest(tmp_path):
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    key = three_level.workload_key((24,))
    old.write_text(_old_line(key, {"tile": [-1, 8, 2]}, 1e-3) +      # loops 3, 4, 2
                   _old_line(key, {"tile": [-1, 6, 4]}, 5e-4) +      # loops 4, 2 (padded), 4
                   _old_line(key, {"tile": [-1, 4, 4]}, 2e-3))       # loops 6, 1, 4
    assert upgrade_log(old, new) == {"kept": 0, "converted": 2, "dropped": 1}
    recs = R.load_records(str(new))[0]
    assert [r.config["knobs"]["tile"] for r in recs] == [[-1, 4, 2], [-1, 1, 4]]
    with te.autotune.apply_history_best(str(new)):
        s, args = three_level(24)
    assert _extents(s[args[1]].leaf_iter_vars) == [3, 4, 2]
    with pytest.raises(ValueError, match="dst '.*new.jsonl' exists"):
        upgrade_log(old, new)


def test_define_reorder_takes_tvms_candidate_axis_lists():
    A, B = _elementwise(12)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    cfg = ConfigSpace()
    cfg.define_reorder("order", [xo, xi], policy="candidate", candidate=[[xo, xi], [xi, xo]])
    cfg.define_reorder("same", [xo, xi], policy="identity")
    assert cfg.knobs["order"].options == ((0, 1), (1, 0))
    assert cfg.knobs["same"].options == ((0, 1),)
    with pytest.raises(te.ScheduleError, match="names an axis that is not among"):
        cfg.define_reorder("bad", [xo], policy="candidate", candidate=[[xi]])
