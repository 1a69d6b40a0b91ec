"""The tuner's guard rails: arguments checked before anything runs, logs that are never
damaged or misread, transient failures measured again on resume, and measurement workers
that die with the tuning process instead of spinning on as orphans."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import te
from te.autotune import records as R
from te.autotune.measure import MeasureOptions

HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hooks.py")
FAST = dict(number=1, repeat=2, min_repeat_ms=0)


def _double(n=32):
    A = te.placeholder((n,), name="A")
    return te.compute((n,), lambda i: A[i] * 2.0, name="B"), A


@pytest.mark.parametrize("kwargs, message", [
    (dict(trials=0), r"trials must be a positive int, got 0"),
    (dict(trials=True), r"trials must be a positive int, got True"),
    (dict(timeout=0.0), r"timeout must be a positive number of seconds or None, got 0.0"),
    (dict(early_stopping=0), r"early_stopping must be a positive int or None, got 0"),
    (dict(batch_size=-1), r"batch_size must be a positive int, got -1"),
    (dict(seed="abc"), r"seed must be an int or None, got 'abc'"),
    (dict(measure_option="fast"), (r"measure_option must be a te.autotune.MeasureOptions or "
                                   r"None, got 'fast'")),
    (dict(target=""), r"target must be 'llvm' \(this CPU\) or 'cuda', got ''"),
    (dict(target="llvm -mcpu=skylake"), r"target must be 'llvm' \(this CPU\) or 'cuda'"),
])
def test_bad_arguments_name_the_parameter(kwargs, message):
    B, _ = _double()
    kwargs = {"trials": 2, **kwargs}
    with pytest.raises(te.ArgumentError, match="^te.autotune: " + message):
        te.autotune(B, verbose=0, **kwargs)


def test_outputs_must_be_computed_tensors():
    B, A = _double()
    with pytest.raises(te.ArgumentError, match=r"got placeholder 'A' \(an input\)"):
        te.autotune(A, trials=2, verbose=0)
    with pytest.raises(te.ArgumentError, match=r"got an empty list"):
        te.autotune([], trials=2, verbose=0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(number=0), r"number must be a positive int, got 0"),
    (dict(repeat=True), r"repeat must be a positive int, got True"),
    (dict(timeout=0), r"timeout must be a positive number, got 0"),
    (dict(min_repeat_ms=float("nan")), r"min_repeat_ms must be a finite number >= 0, got nan"),
    (dict(rtol=-1), r"rtol must be a finite number >= 0, got -1"),
])
def test_measure_options_are_checked(kwargs, message):
    with pytest.raises(te.ArgumentError, match="^MeasureOptions: " + message):
        MeasureOptions(**kwargs)


def test_a_file_that_is_not_a_tuning_log_is_never_appended_to(tmp_path):
    script = tmp_path / "precious.py"
    script.write_text("print('my precious script')\n")
    B, _ = _double()
    with pytest.raises(te.ArgumentError, match=r"is not a te tuning log"):
        te.autotune(B, trials=2, verbose=0, log=str(script))
    assert script.read_text() == "print('my precious script')\n"


@pytest.mark.parametrize("kind", ["directory", "unwritable"])
def test_an_unusable_log_path_fails_before_measuring(tmp_path, kind):
    path = str(tmp_path) if kind == "directory" else "/proc/no/such/dir/log.jsonl"
    B, _ = _double()
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: log: "):
        te.autotune(B, trials=2, verbose=0, log=path)


def test_apply_history_best_with_a_missing_log_says_so(tmp_path):
    with pytest.raises(te.ArgumentError, match=r"log '.*missing.jsonl' does not exist"):
        te.autotune.apply_history_best(str(tmp_path / "missing.jsonl"))


def test_records_with_impossible_costs_are_skipped(tmp_path):
    log = tmp_path / "log.jsonl"
    good = R.Record("w", "llvm", "0", {"knobs": {}}, R.MeasureResult((1e-3,)))
    lines = [good.to_line()]
    for costs in ([-5.0], [float("nan")], [0.0]):
        d = json.loads(good.to_line())
        d["result"]["costs"] = costs
        lines.append(json.dumps(d) + "\n")
    log.write_text("".join(lines))
    records, skipped = R.load_records(str(log))
    assert [r.result.costs for r in records] == [(1e-3,)]
    assert skipped == 3


def test_transient_failures_are_measured_again_on_resume(tmp_path):
    log = str(tmp_path / "log.jsonl")
    B, _ = _double(64)
    hang = MeasureOptions(timeout=1.0, hook=HOOKS + ":always_hang", **FAST)
    first = te.autotune(B, trials=2, tuner="grid", verbose=0, log=log, measure_option=hang)
    assert first.errors == {R.TIMEOUT: 2}
    second = te.autotune(B, trials=2, tuner="grid", verbose=0, log=log,
                         measure_option=MeasureOptions(**FAST))
    fresh = second.history[len([t for t in second.history if t.result.error]):]
    assert second.best is not None, "timeouts from the first run were taken as final"
    assert all(t.result.ok for t in fresh)


def test_a_worker_dies_with_the_tuning_process(tmp_path):
    script = tmp_path / "tune_forever.py"
    script.write_text(textwrap.dedent(f"""
        import te
        from te.autotune.measure import MeasureOptions
        A = te.placeholder((32,), name="A")
        B = te.compute((32,), lambda i: A[i] * 2.0, name="B")
        te.autotune(B, trials=2, tuner="grid", verbose=0,
                    measure_option=MeasureOptions(timeout=100, hook={HOOKS + ':always_hang'!r}))
    """))
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        workers = []
        for _ in range(60):  # wait until the worker is busy with the hung candidate
            time.sleep(0.5)
            out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)],
                                 capture_output=True, text=True).stdout.split()
            workers = [int(p) for p in out]
            if workers:
                break
        assert workers, "no measurement worker was started"
        time.sleep(3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 10
        alive = workers
        while alive and time.time() < deadline:
            time.sleep(0.5)
            alive = [p for p in alive if _alive(p)]
        assert not alive, f"worker(s) {alive} outlived the killed tuning process"
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().split()[2] != "Z"


@pytest.fixture
def no_hang():
    """Fail instead of hanging forever (opening a fifo blocks until a writer comes)."""
    def hung(signum, frame):
        raise TimeoutError("blocked for 30 s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("kind, what", [("fifo", r"a named pipe \(fifo\)"),
                                        ("device", "a character device"),
                                        ("directory", "a directory")])
def test_a_log_that_is_not_a_regular_file_is_refused_without_opening_it(tmp_path, no_hang,
                                                                        kind, what):
    path = str(tmp_path / "log.jsonl")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = "/dev/null"
    else:
        os.mkdir(path)
    message = f"log: '{path}' is {what}, not a regular file"
    B, _ = _double()
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: " + message):
        te.autotune(B, trials=2, verbose=0, log=path)
    with pytest.raises(te.ArgumentError, match=r"^apply_history_best: " + message):
        te.autotune.apply_history_best(path)
    with pytest.raises(ValueError, match="^" + message):
        R.load_records(path)
    with pytest.raises(ValueError, match="^" + message):
        R.append_record(path, R.Record("w", "llvm", "0", {"knobs": {}},
                                       R.MeasureResult((1e-3,))))


def test_a_log_holding_one_cut_off_record_is_resumed_with_a_warning(tmp_path):
    """A crash while the first record was written leaves one cut line: the log is the
    tuner's own, not someone's file."""
    log = tmp_path / "log.jsonl"
    line = R.Record("w", "llvm", "0", {"knobs": {}}, R.MeasureResult((1e-3,))).to_line()
    log.write_text(line[:40])
    B, _ = _double()
    with pytest.warns(UserWarning, match=r"log '.*log.jsonl': skipped 1 line cut short "
                                         r"\(a crash while it was written\)"):
        res = te.autotune(B, trials=2, tuner="grid", verbose=0, log=str(log),
                          measure_option=MeasureOptions(**FAST))
    assert len(res.history) == 2
    with pytest.warns(UserWarning, match=r"skipped 1 line cut short"):
        records, skipped = R.load_records(str(log))
    assert len(records) >= 2 and skipped == 1


def test_a_run_stopped_before_its_re_measurement_is_finished_by_a_resume(tmp_path,
                                                                        monkeypatch):
    from te.autotune import result as H
    log = str(tmp_path / "log.jsonl")
    B, _ = _double(64)
    opts = MeasureOptions(**FAST)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(H, "confirm_leaders", interrupted)
        with pytest.raises(KeyboardInterrupt):
            te.autotune(B, trials=4, tuner="grid", verbose=0, log=log, measure_option=opts)
    assert len(R.load_records(log)[0]) == 4     # the trials, no re-measurement
    again = te.autotune(B, trials=4, tuner="grid", verbose=0, log=log, measure_option=opts)
    assert len(again.history) == 4
    assert len(again.confirmations) == H.CONFIRM_TOP * H.CONFIRM_ROUNDS
    assert len(R.load_records(log)[0]) == 4 + H.CONFIRM_TOP * H.CONFIRM_ROUNDS
    # finished: a third run with the same trials has nothing left to do
    third = te.autotune(B, trials=4, tuner="grid", verbose=0, log=log, measure_option=opts)
    assert len(third.confirmations) == H.CONFIRM_TOP * H.CONFIRM_ROUNDS
    assert len(R.load_records(log)[0]) == 4 + H.CONFIRM_TOP * H.CONFIRM_ROUNDS


def _batches_then(monkeypatch, n_ok: int, exc: BaseException):
    """Measure n_ok batches, then raise `exc` where the next batch would be measured."""
    from te.autotune import tune as T
    real, calls = T._measure_batch, []

    def measure(*args, **kwargs):
        calls.append(1)
        if len(calls) > n_ok:
            raise exc
        return real(*args, **kwargs)
    monkeypatch.setattr(T, "_measure_batch", measure)


def test_ctrl_c_leaves_whole_records_and_says_how_to_resume(tmp_path, monkeypatch):
    log = str(tmp_path / "log.jsonl")
    B, _ = _double(64)
    _batches_then(monkeypatch, 2, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt) as info:
        te.autotune(B, trials=8, batch_size=2, tuner="grid", verbose=0, log=log,
                    measure_option=MeasureOptions(**FAST))
    err = info.value
    assert isinstance(err, te.autotune.TuningInterrupted)
    assert str(err) == (f"te.autotune interrupted: 4 trials of B saved in '{log}'; run it "
                        f"again with the same log to resume")
    assert len(err.result.history) == 4 and err.result.saved == 4
    records, skipped = R.load_records(log)
    assert len(records) == 4 and skipped == 0
    monkeypatch.undo()
    again = te.autotune(B, trials=8, batch_size=2, tuner="grid", verbose=0, log=log,
                        measure_option=MeasureOptions(**FAST))
    assert len(again.history) == 8 and again.saved == 8


def test_ctrl_c_without_a_log_says_nothing_was_saved(monkeypatch):
    B, _ = _double(64)
    _batches_then(monkeypatch, 1, KeyboardInterrupt())
    with pytest.raises(te.autotune.TuningInterrupted, match=r"^te.autotune interrupted after "
                                                            r"2 trials; none saved \(give log= "
                                                            r"to be able to resume\)$"):
        te.autotune(B, trials=8, batch_size=2, tuner="grid", verbose=0,
                    measure_option=MeasureOptions(**FAST))


def test_a_full_disk_stops_the_run_with_the_best_so_far_and_the_log_state(tmp_path,
                                                                         monkeypatch):
    import errno
    log = str(tmp_path / "log.jsonl")
    B, _ = _double(64)
    real, calls = R.append_record, []

    def append(path, record):
        calls.append(1)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, record)
    monkeypatch.setattr(R, "append_record", append)
    with pytest.raises(te.autotune.TuningLogError) as info:
        te.autotune(B, trials=8, tuner="grid", verbose=0, log=log,
                    measure_option=MeasureOptions(**FAST))
    err = info.value
    assert isinstance(err, te.TEError) and isinstance(err.__cause__, OSError)
    assert str(err).startswith(f"te.autotune: cannot append to the log '{log}' (No space left "
                               f"on device); it holds 3 whole trials of B, which a run with "
                               f"the same log resumes from; best so far ")
    best = err.result.best
    assert best is not None and R.config_key(best.config) in str(err)
    assert len(R.load_records(log)[0]) == 3


def test_random_inputs_need_no_float64_temporaries():
    import tracemalloc

    import numpy as np
    from te.autotune.task import random_inputs
    random_inputs([te.placeholder((2,), name="W")])   # numpy.random's first-use imports
    for dtype in ("float32", "float64", "int8", "int32"):
        A = te.placeholder((511, 389), name="A", dtype=dtype)
        B = te.compute((511, 389), lambda i, j: A[i, j] + A[i, j], name="B")
        tracemalloc.start()
        x, = random_inputs([A, B], seed=3)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert x.dtype == np.dtype(dtype) and x.shape == (511, 389)
        # the input and a one-byte mask at most (float64 temporaries made 5 times its size)
        assert peak < 1.4 * x.nbytes, (dtype, peak / x.nbytes)
        mag = np.abs(x.astype("float64"))
        if x.dtype.kind == "f":
            assert mag.min() >= 0.5 and mag.max() <= 1.5 and 0.4 < (x < 0).mean() < 0.6
        else:
            assert mag.min() >= 1 and mag.max() <= 9
