"""te.autotune.session: the tuning loop in steps (what graph.autotune interleaves), two
sessions on one LocalRunner's workers, and resuming a session from its log."""
from __future__ import annotations

import json

import te

FAST = te.autotune.MeasureOptions(number=1, repeat=1, min_repeat_ms=0)


def two_computes():
    A = te.placeholder((24, 40), name="A")
    B = te.compute((24, 40), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    X = te.placeholder((16, 33), name="X")
    k = te.reduce_axis((0, 33), name="k")
    Y = te.compute((16,), lambda i: te.sum(X[i, k] * X[i, k], axis=k), name="Y")
    return B, Y


def test_two_sessions_share_one_pool_of_workers(tmp_path):
    log = str(tmp_path / "s.jsonl")
    pool = te.autotune.LocalRunner(FAST)
    b, y = two_computes()
    first = te.autotune.session(b, log=log, trials=100, seed=0, verbose=0, workers=pool)
    second = te.autotune.session(y, log=log, trials=100, seed=0, verbose=0, workers=pool)
    assert first.measure(3) == 3 and second.measure(2) == 2 and first.measure(1) == 1
    assert len(pool.workers) == 1            # one worker measured both tasks
    worker = pool.workers[0]
    first.close()
    second.close()
    assert worker.proc.poll() is None        # the borrowers leave the pool's workers running
    pool.close()
    assert worker.proc.poll() is not None and pool.workers == []
    with open(log) as fh:
        keys = [json.loads(line)["workload"] for line in fh]
    assert keys == [first.task.key] * 3 + [second.task.key] * 2 + [first.task.key]
    assert [len(s.result.history) for s in (first, second)] == [4, 2]


def test_a_session_resumes_from_the_log_and_finish_confirms_the_leaders(tmp_path):
    log = str(tmp_path / "r.jsonl")
    b, _ = two_computes()
    with te.autotune.session(b, log=log, trials=100, seed=0, verbose=0,
                             measure_option=FAST) as s:
        s.measure(4)
        s.finish()
        measured = {json.dumps(t.config, sort_keys=True) for t in s.result.history}
        assert len(s.result.confirmations) > 0 and s.result.best is not None
    with te.autotune.session(b, log=log, trials=100, seed=0, verbose=0,
                             measure_option=FAST) as again:
        assert {json.dumps(t.config, sort_keys=True) for t in again.result.history} == \
            measured
        assert again.new == 0 and again.result.saved == 4
        again.measure(2)
        new = {json.dumps(t.config, sort_keys=True) for t in again.result.history[4:]}
        assert len(new) == 2 and not new & measured
