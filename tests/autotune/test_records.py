"""Records: JSON-lines round trip, a truncated last line, concurrent appenders, no pickle."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from te.autotune import records as R


def _rec(k: int, ok: bool = True) -> R.Record:
    res = R.MeasureResult(costs=(1e-3 * (k + 1),)) if ok else \
        R.MeasureResult(error=R.CRASH, msg="worker died with exit code -11")
    return R.Record("graph:abc", "llvm", "0.1.0", {"knobs": {"t": [-1, k]}}, res, 2e6)


def test_round_trip(tmp_path):
    log = str(tmp_path / "r.jsonl")
    for k in range(3):
        R.append_record(log, _rec(k))
    R.append_record(log, _rec(9, ok=False))
    recs, skipped = R.load_records(log)
    assert skipped == 0 and len(recs) == 4
    assert recs[1].config == {"knobs": {"t": [-1, 1]}}
    assert recs[3].result.error == R.CRASH and not recs[3].result.ok
    line = json.loads(open(log).readline())
    assert line["v"] == R.RECORD_VERSION and line["workload"] == "graph:abc"
    best = R.best_records(log)
    assert best["graph:abc"].config == {"knobs": {"t": [-1, 0]}}


def test_truncated_last_line_is_skipped_and_next_append_is_safe(tmp_path):
    log = str(tmp_path / "r.jsonl")
    for k in range(3):
        R.append_record(log, _rec(k))
    with open(log, "ab") as fh:           # a writer died half way through a line
        fh.write(_rec(7).to_line().encode()[:25])
    with pytest.warns(UserWarning, match=r"skipped 1 line cut short"):
        recs, skipped = R.load_records(log)
    assert len(recs) == 3 and skipped == 1
    R.append_record(log, _rec(4))
    with pytest.warns(UserWarning, match=r"skipped 1 line cut short"):
        recs, skipped = R.load_records(log)
    assert [r.config["knobs"]["t"][1] for r in recs] == [0, 1, 2, 4] and skipped == 1


def test_unknown_version_lines_are_skipped(tmp_path):
    log = tmp_path / "r.jsonl"
    log.write_text(json.dumps({"v": 999, "workload": "x"}) + "\n" + _rec(1).to_line())
    recs, skipped = R.load_records(str(log))
    assert len(recs) == 1 and skipped == 1


def test_missing_log_is_empty(tmp_path):
    assert R.load_records(str(tmp_path / "nope.jsonl")) == ([], 0)


def test_two_processes_appending_concurrently_lose_nothing(tmp_path):
    log = str(tmp_path / "r.jsonl")
    script = textwrap.dedent(f"""
        import sys
        from te.autotune import records as R
        for k in range(300):
            rec = R.Record("graph:w" + sys.argv[1], "llvm", "0.1.0",
                           {{"knobs": {{"pad": "x" * 3000, "k": k}}}},
                           R.MeasureResult(costs=(1e-3,)))
            R.append_record({log!r}, rec)
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)], env=env)
             for w in range(2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    recs, skipped = R.load_records(log)
    assert skipped == 0 and len(recs) == 600
    for w in range(2):
        ks = [r.config["knobs"]["k"] for r in recs if r.workload == f"graph:w{w}"]
        assert ks == list(range(300))


def test_records_are_plain_json_not_pickle(tmp_path):
    log = str(tmp_path / "r.jsonl")
    R.append_record(log, _rec(1))
    raw = open(log, "rb").read()
    assert raw.startswith(b"{") and raw.endswith(b"}\n")
    src = open(R.__file__).read() + open(R.__file__.replace("records", "measure")).read()
    assert "import pickle" not in src


def test_records_of_an_older_space_are_skipped_by_apply_history_best(tmp_path):
    """A log written by an older automatic space (other knobs) for the same workload:
    the fastest record that fits today's space is used, the rest are ignored."""
    import te
    from te.autotune.space import ConfigSpace
    from te.autotune.auto_space import auto_schedule
    from te.autotune.workload import graph_key, package_version
    from te.compute import ops
    A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    C = ops.matmul(A, B)
    space = ConfigSpace()
    auto_schedule(space, C)
    good = space.get(len(space) - 1).to_json_dict()
    log = str(tmp_path / "old.jsonl")
    key, ver = graph_key(C), package_version()
    R.append_record(log, R.Record(key, "llvm", ver, {"knobs": {"T_matmul.tile_i": [-1, 4]}},
                                  R.MeasureResult(costs=(1e-6,)), 1.0))
    R.append_record(log, R.Record(key, "llvm", ver, good, R.MeasureResult(costs=(1e-3,)), 1.0))
    s, args = te.autotune.load_best(log, C)
    want, _ = auto_schedule(space.from_json_dict(good), C)
    assert s.to_json() == want.to_json()


def test_a_log_whose_configs_all_predate_the_space_warns(tmp_path):
    """Only records of an older space (a knob that no longer exists): the default config
    is used, and the user is told why the log did not help."""
    import te
    from te.autotune.auto_space import auto_schedule
    from te.autotune.space import ConfigSpace
    from te.autotune.workload import graph_key, package_version
    from te.compute import ops
    A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    C = ops.matmul(A, B)
    log = str(tmp_path / "old.jsonl")
    R.append_record(log, R.Record(graph_key(C), "llvm", package_version(),
                                  {"knobs": {"T_matmul.prefetch_out": True}},
                                  R.MeasureResult(costs=(1e-6,)), 1.0))
    with pytest.warns(UserWarning, match=r"1 configs recorded for workload .* do not fit "
                                         r"today's search space .* using the default"):
        s, args = te.autotune.load_best(log, C)
    space = ConfigSpace()
    auto_schedule(space, C)
    assert s.to_json() == auto_schedule(space.default(), C)[0].to_json()


def _result(ms):
    return R.MeasureResult([ms * 1e-3] * 3)


def test_re_measured_leaders_are_ranked_by_their_re_measurements(tmp_path):
    # "lucky" won its trial (1.0 ms) but measured 1.6, 1.5 and 1.55 ms when re-measured
    # beside "steady" (1.1, then 1.2, 1.3 and 9.0 ms: one measurement during a slow
    # moment of the machine does not move the median): steady wins. "once" (1.05 ms, a
    # trial taken while the machine was faster) was never re-measured (its re-measure
    # failed): it ranks after the re-measured leaders
    lucky, steady, once = {"knobs": {"k": 1}}, {"knobs": {"k": 2}}, {"knobs": {"k": 3}}
    measured = [(lucky, _result(1.0), "l1"), (steady, _result(1.1), "s1"),
                (once, _result(1.05), "o1"), (lucky, _result(1.6), "l2"),
                (steady, _result(1.2), "s2"), (once, R.MeasureResult([], R.TIMEOUT), "o2"),
                (lucky, _result(1.5), "l3"), (steady, _result(1.3), "s3"),
                (lucky, _result(1.55), "l4"), (steady, _result(9.0), "s4")]
    ranked = R.rank_by_config(measured)
    assert [item for _, item in ranked] == ["s1", "l1", "o1"]
    assert [round(cost * 1e3, 6) for cost, _ in ranked] == [1.3, 1.55, 1.05]
    # the leaders to re-measure are chosen by trial alone
    assert [item for _, item in R.rank_trials(measured)] == ["l1", "o1", "s1"]
    log = str(tmp_path / "t.jsonl")
    for config, result, _ in measured:
        R.append_record(log, R.Record("w", "llvm", "v", config, result))
    best = R.best_records(log)["w"]
    assert best.config == steady and best.result.median == pytest.approx(1.1e-3)


def test_every_record_line_starts_as_a_cut_line_is_recognised():
    # records.LINE_START is how a line cut short by a crash is told from someone's file
    for k in range(3):
        assert _rec(k, ok=k != 1).to_line().startswith(R.LINE_START)


@pytest.mark.parametrize("cut", [1, 5, 40])
def test_a_longer_log_with_a_cut_last_line_warns(tmp_path, cut):
    log = str(tmp_path / "r.jsonl")
    R.append_record(log, _rec(0))
    with open(log, "ab") as fh:
        fh.write(_rec(1).to_line().encode()[:cut])
    with pytest.warns(UserWarning, match=r"skipped 1 line cut short \(a crash while it was "
                                         r"written\)"):
        recs, skipped = R.load_records(log)
    assert len(recs) == 1 and skipped == 1
    R.check_log_path(log)


@pytest.mark.parametrize("text", ['{"a": 1}', "print('x')", '{"config": 1}\n'])
def test_a_file_of_other_lines_is_still_not_a_tuning_log(tmp_path, text):
    path = tmp_path / "other.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"is not a te tuning log"):
        R.check_log_path(str(path))


def test_a_config_logged_after_the_re_measurement_and_faster_than_its_leaders_ranks_first(
        tmp_path):
    # A run re-measured its leaders (a, b); a later run, stopped before its own
    # re-measurement, logged "fast" with a trial 10x faster than any leader's trial: it
    # would have led that re-measurement, and is the best config the log knows
    a, b, fast, slow = ({"knobs": {"k": k}} for k in range(4))
    measured = [(a, _result(1.0), "a1"), (b, _result(1.1), "b1"), (slow, _result(1.2), "w1"),
                (a, _result(1.2), "a2"), (b, _result(1.15), "b2"),
                (fast, _result(0.1), "f1")]
    ranked = R.rank_by_config(measured)
    assert [item for _, item in ranked] == ["f1", "b1", "a1", "w1"]
    assert ranked[0][0] == pytest.approx(0.1e-3)
    log = str(tmp_path / "t.jsonl")
    for config, result, _ in measured:
        R.append_record(log, R.Record("w", "llvm", "v", config, result))
    assert R.best_records(log)["w"].config == fast


def test_apply_history_best_takes_a_fast_config_logged_after_the_re_measurement(tmp_path):
    import te
    from te.autotune.auto_space import auto_schedule
    from te.autotune.space import ConfigSpace
    from te.autotune.workload import graph_key, package_version
    from te.compute import ops
    A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    C = ops.matmul(A, B)
    space = ConfigSpace()
    auto_schedule(space, C)
    leader, other, fast = (space.get(k).to_json_dict() for k in (0, 1, len(space) - 1))
    log = str(tmp_path / "mm.jsonl")
    key, ver = graph_key(C), package_version()
    for config, ms in [(leader, 1.0), (other, 1.1)] + [(leader, 1.0), (other, 1.1)] * 5 + \
            [(fast, 0.1)]:
        R.append_record(log, R.Record(key, "llvm", ver, config, _result(ms), 1.0))
    s, _ = te.autotune.load_best(log, C)
    assert s.to_json() == auto_schedule(space.from_json_dict(fast), C)[0].to_json()


def test_a_failed_append_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    import errno
    log = str(tmp_path / "r.jsonl")
    R.append_record(log, _rec(0))
    before = open(log, "rb").read()
    real_write = os.write

    def full_disk(fd, data):     # the disk fills up half way through the line
        if os.path.samestat(os.fstat(fd), os.stat(log)):
            if len(data) > 8:
                return real_write(fd, bytes(data[:len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)
    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        R.append_record(log, _rec(1))
    monkeypatch.undo()
    assert open(log, "rb").read() == before
    R.append_record(log, _rec(2))
    recs, skipped = R.load_records(log)
    assert [r.config["knobs"]["t"][1] for r in recs] == [0, 2] and skipped == 0
