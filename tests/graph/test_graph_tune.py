"""graph.autotune: task extraction (dedup, weights, what is not tunable), the task scheduler
(with a fake measurer), a tiny model tuned, resumed and compiled with its log
(graph.compile(tuning_log=)), and the errors of the API and of `python -m graph tune`."""
import json
import math
import shutil

import numpy as np
import pytest

import graph
import te
from graph.__main__ import main
from graph.tuning_scheduler import TaskScheduler
from onnx_export import to_onnx

# one cheap timing per trial: the tests check what is tuned and logged, not how fast
FAST = te.autotune.MeasureOptions(number=1, repeat=1, min_repeat_ms=0)
# and the random tuner: no cost model to featurize candidates for
QUICK = dict(seed=0, measure_option=FAST, tuner="random")


def _rand(rng, *shape):
    return ((rng.random(shape) + 0.5) * rng.choice([-1, 1], shape)).astype(np.float32)


def two_branch_model(seed=0):
    """Two dense+relu branches of the same shapes (one workload, weight 2), a softmax over
    their sum and a conv2d (the conv2d strategy's GEMM form, odd image sizes)."""
    rng = np.random.default_rng(seed)
    x = graph.input("x", (3, 20))
    b = graph.constant(_rand(rng, 20))
    h1 = graph.relu(graph.nn.dense(x, graph.constant(_rand(rng, 20, 20)), b))
    h2 = graph.relu(graph.nn.dense(x, graph.constant(_rand(rng, 20, 20)), b))
    y = graph.nn.softmax(graph.multiply(h1, h2))
    img = graph.input("img", (1, 3, 9, 7))
    c = graph.nn.conv2d(img, graph.constant(_rand(rng, 4, 3, 3, 3)), padding=1)
    return graph.Graph([y, graph.relu(c)])


def onnxruntime_outputs(g, feeds):
    import onnxruntime
    sess = onnxruntime.InferenceSession(to_onnx(g).SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def feeds_of(seed=1):
    rng = np.random.default_rng(seed)
    return {"x": _rand(rng, 3, 20), "img": _rand(rng, 1, 3, 9, 7)}


def test_extract_tasks_dedups_identical_workloads_and_counts_weights():
    g = two_branch_model()
    tasks = graph.extract_tasks(g, level="O2")
    by_name = {t.name: t for t in tasks}
    assert sorted(by_name) == ["conv2d_packed+relu", "gemm", "relu+multiply+softmax"]
    dense = by_name["gemm"]
    # the builder numbers values process-wide: the two dense ops' outputs, whatever ran before
    gemms = [n.outputs[0].name for n in g.nodes if n.op == "gemm"]
    assert dense.weight == 2 and dense.values == gemms and len(set(gemms)) == 2
    assert dense.tunable
    assert \
        [tuple(int(d.value) for d in t.shape) for t in dense.ins] == [(3, 20), (20, 20), (20,)]
    assert by_name["relu+multiply+softmax"].weight == 1
    assert by_name["relu+multiply+softmax"].tunable
    conv = by_name["conv2d_packed+relu"]
    # a tuning task in the conv2d strategy's space, its records filed under that key
    assert conv.tunable and conv.family == "conv2d"
    assert conv.key == te.autotune.conv2d_key(conv.outs[0]) and conv.key.startswith("conv2d:")
    assert te.autotune.conv2d_space(conv.outs[0]).size > 1
    assert dense.key.startswith("graph:")
    assert len({t.key for t in tasks}) == 3
    # O0: one kernel per node; the relus of the two branches are one workload, the conv's
    # relu (another shape) another
    o0 = [(t.name, t.weight) for t in graph.extract_tasks(two_branch_model(), level="O0")]
    assert o0 == [("gemm", 2), ("relu", 2), ("multiply", 1), ("softmax", 1), ("conv2d", 1),
                  ("relu", 1)]


def test_a_depthwise_conv_takes_the_direct_form_which_has_no_knobs():
    rng = np.random.default_rng(2)
    img = graph.input("img", (1, 6, 9, 7))
    c = graph.nn.conv2d(img, graph.constant(_rand(rng, 6, 1, 3, 3)), padding=1, groups=6)
    (task,) = graph.extract_tasks(graph.Graph([c]), level="O2")
    assert task.family == "conv2d" and not task.tunable
    assert task.reason == \
        "the conv2d strategy's direct form (te.autotune.schedule_conv2d) has no knobs"
    result = graph.autotune(graph.Graph([c]), trials=2, **QUICK, verbose=0)
    assert result.spent == 0 and not result.tuned
    assert str(result).splitlines()[-2:] == [
        "  not tunable (1 tasks, 1 kernels): the conv2d strategy's direct form "
        "(te.autotune.schedule_conv2d) has no knobs",
        "    conv2d                             1x6x9x7                 1"]


def test_extract_tasks_errors():
    with pytest.raises(graph.GraphError, match=r"^graph.autotune: level must be one of "
                       r"\['O0', 'O1', 'O2'\], got 'O3'$"):
        graph.autotune(two_branch_model(), trials=1, level="O3")
    with pytest.raises(graph.GraphError, match=r"^graph.extract_tasks: g must be a "
                       r"graph.Graph, got list$"):
        graph.extract_tasks([])


def fake_run(scheduler, curves, rounds):
    """Give `rounds` rounds as the scheduler picks; task k's best time after its r-th
    round is curves[k](r). Returns the picks."""
    picks = []
    for _ in range(rounds):
        k = scheduler.next_task()
        if k is None:
            break
        picks.append(k)
        scheduler.update(k, curves[k](scheduler.tasks[k].rounds + 1))
    return picks


def test_scheduler_warms_up_round_robin_then_picks_the_largest_gain():
    s = TaskScheduler([1, 1, 1], [1e6, 1e6, 1e6], ["a", "b", "c"])
    flat = [lambda r: 1e-3, lambda r: 1e-3, lambda r: 1e-3]
    curves = [flat[0], lambda r: 10e-3 / r, flat[2]]    # task 1 keeps improving
    assert fake_run(s, curves, 3) == [0, 1, 2]
    # after the warm-up task 1 (10 ms, then 5, 3.3, 2.5, 2) takes the rounds until its
    # expected gain per round falls below the others' optimistic -g/t = -1 ms
    assert fake_run(s, curves, 4) == [1, 1, 1, 1]
    backward, forward = (2e-3 - 5e-3) / 3, -2e-3 / 5
    assert s.gradient(1) == pytest.approx(0.2 * backward + 0.8 * forward)
    assert s.gradient(0) == s.gradient(2) == pytest.approx(0.8 * -1e-3)
    assert s.gradient(0) < s.gradient(1)
    assert fake_run(s, curves, 2) == [0, 2]


def test_scheduler_weighs_by_how_often_a_kernel_runs():
    # the same kernel time, but task 1 runs 5 times per model run
    s = TaskScheduler([1, 5], [1e6, 1e6], ["a", "b"])
    curves = [lambda r: 2e-3, lambda r: 1e-3]
    assert fake_run(s, curves, 3) == [0, 1, 1]
    assert s.gradient(1) == pytest.approx(5 * 0.8 * (-1e-3 / 2))
    assert s.estimate() == pytest.approx(2e-3 + 5 * 1e-3)


def test_scheduler_gradient_combines_recent_improvement_and_similar_tasks():
    s = TaskScheduler([1, 1], [4e6, 4e6], ["dense", "dense"], window=2)
    for best in (8e-3, 6e-3, 4e-3):
        s.tasks[0].best.append(best)
    s.tasks[1].best.append(1e-3)        # the same work, 4x faster: task 0 can gain much
    backward = (4e-3 - 8e-3) / 2
    rate = 4e6 / 1e-3
    forward = min(-4e-3 / 3, 2.0 * 4e6 / rate - 4e-3)
    assert s.gradient(0) == pytest.approx(0.2 * backward + 0.8 * forward)
    assert forward == pytest.approx(2e-3 - 4e-3)   # the peer's estimate is the tighter one
    assert s.next_task() == 0


def test_scheduler_skips_exhausted_and_failing_tasks():
    s = TaskScheduler([1, 1, 1], [1e6] * 3, ["a", "b", "c"])
    s.update(0, 5e-3, exhausted=True)
    s.update(1, math.inf)
    assert s.next_task() == 2                 # the warm-up first
    s.update(2, 1e-3)
    assert s.next_task() == 1                 # a failed first round gets a second
    s.update(1, math.inf)
    assert s.next_task() == 2 and s.tasks[1].done
    s.update(2, 1e-3, exhausted=True)
    assert s.next_task() is None


def _lines(path):
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """(graph, GraphTuneResult, log) of two_branch_model tuned for 12 trials (its three
    tasks, the conv's included)."""
    g = two_branch_model()
    log = str(tmp_path_factory.mktemp("tune") / "tiny.jsonl")
    result = graph.autotune(g, trials=12, log=log, batch_size=4, **QUICK,
                            verbose=0)
    return g, result, log


def test_tune_writes_records(tuned):
    g, result, log = tuned
    assert result.spent == 12 and len(result.tuned) == 3
    assert sorted(t.name for t in result.tuned) == \
        ["conv2d_packed+relu", "gemm", "relu+multiply+softmax"]
    assert sum(len(t.result.history) for t in result.tuned) == 12
    records = _lines(log)
    assert {r["workload"] for r in records} == {t.key for t in result.tuned}
    assert all(r["v"] == 2 and r["target"] == "llvm" for r in records)
    assert all(math.isfinite(t.result.best_time) for t in result.tuned)
    text = str(result)
    assert text.startswith("graph.autotune: 12/12 trials over 3 tasks, tuned kernels ")
    assert "not tunable" not in text
    assert result.history[-1] == (12, pytest.approx(result.estimate))


def test_tasks_no_round_reached_are_printed_without_a_time(tmp_path):
    # 4 trials in rounds of 4: the first task's round only; the others have no time yet
    result = graph.autotune(two_branch_model(), trials=4, log=str(tmp_path / "t.jsonl"),
                            batch_size=4, **QUICK, verbose=0)
    rows = [line for line in str(result).splitlines()[2:] if "(no trials yet)" in line]
    assert len(rows) == 2 and all(" inf " not in line for line in rows)
    assert sum(len(t.result.history) for t in result.tuned) == 4


def test_tune_resumes_without_measuring_again(tuned, tmp_path):
    g, _, first_log = tuned
    log = str(tmp_path / "copy.jsonl")
    shutil.copy(first_log, log)
    records = _lines(log)
    again = graph.autotune(g, trials=12, log=log, batch_size=4, **QUICK,
                           verbose=0)
    assert again.spent == 12 and len(_lines(log)) == len(records)
    more = graph.autotune(g, trials=16, log=log, batch_size=4, **QUICK,
                          verbose=0)
    assert more.spent == 16
    new = _lines(log)[len(records):]
    configs = {(r["workload"], json.dumps(r["config"], sort_keys=True)) for r in records}
    # 4 new configs; the rest of the new lines re-measure the leaders (not trials)
    assert len({(r["workload"], json.dumps(r["config"], sort_keys=True)) for r in new}
               - configs) == 4


def test_ctrl_c_keeps_the_finished_trials(tmp_path, monkeypatch):
    log = str(tmp_path / "stopped.jsonl")
    update = TaskScheduler.update

    def interrupted(self, k, best, exhausted=False):
        update(self, k, best, exhausted)
        raise KeyboardInterrupt
    monkeypatch.setattr(TaskScheduler, "update", interrupted)
    with pytest.raises(te.autotune.TuningInterrupted, match=r"^graph.autotune interrupted "
                       r"after 2 trials; every finished trial is in '.*stopped.jsonl': run it "
                       r"again with the same log to resume$") as exc:
        graph.autotune(two_branch_model(), trials=8, log=log, batch_size=2, verbose=0, **QUICK)
    assert exc.value.result.spent == 2 and len(_lines(log)) == 2


def test_compile_with_the_log_applies_its_records(tuned):
    g, result, log = tuned
    feeds = feeds_of()
    plain = graph.compile(g, level="O2", cache=False).run(feeds)
    with te.autotune.trace_lookups() as applied:
        m = graph.compile(g, level="O2", cache=False, tuning_log=log)
    assert {r.workload for r in applied} == {t.key for t in result.tuned}
    for r in applied:    # each kernel took its task's best config
        task = next(t for t in result.tuned if t.key == r.workload)
        assert r.config == task.result.best.config
    refs = onnxruntime_outputs(g, feeds)
    for ours, untuned, want in zip(m.run(feeds), plain, refs):
        np.testing.assert_allclose(ours, untuned, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)


def test_the_records_applied_are_in_the_cache_key(tuned, tmp_path, monkeypatch):
    g, result, log = tuned
    monkeypatch.setenv("TE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TE_CACHE", "1")
    graph.compile(g, level="O1")
    before = graph.cache.stats()
    graph.compile(g, level="O1", tuning_log=log)
    after = graph.cache.stats()
    # the tuned kernels (all three, the conv's too) are new entries
    assert after["stored"] - before["stored"] == len(result.tuned) == 3
    assert after["hits"] - before["hits"] == 0
    graph.compile(g, level="O1", tuning_log=log)
    assert graph.cache.stats()["hits"] - after["hits"] == 3


def test_compile_tuning_log_errors(tmp_path):
    g = two_branch_model()
    with pytest.raises(graph.GraphError, match=r"^graph.compile: tuning_log must be a file "
                       r"path \(str or os.PathLike\) or None, got 3$"):
        graph.compile(g, tuning_log=3)
    missing = str(tmp_path / "missing.jsonl")
    with pytest.raises(graph.GraphError, match=r"^graph.compile: tuning_log '.*missing.jsonl' "
                       r"is not a file \(it does not exist\); graph.autotune\(g, log=...\) "
                       r"writes one$"):
        graph.compile(g, tuning_log=missing)
    script = tmp_path / "script.py"
    script.write_text("print('hello')\n")
    with pytest.raises(graph.GraphError, match=r"^graph.compile: tuning_log '.*script.py' is "
                       r"not a te tuning log \(none of its lines is a record"):
        graph.compile(g, tuning_log=str(script))


def test_autotune_option_errors():
    g = two_branch_model()
    with pytest.raises(graph.GraphError, match=r"^graph.autotune: trials must be a positive "
                       r"int, got 0$"):
        graph.autotune(g, trials=0)
    with pytest.raises(graph.GraphError, match=r"^graph.autotune: tuner must be one of "):
        graph.autotune(g, trials=4, tuner="annealing")


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "tiny.onnx"
    import onnx
    onnx.save(to_onnx(two_branch_model()), str(path))
    return str(path)


def test_cli_tune_then_run_with_the_log(model_path, tmp_path, capsys, monkeypatch):
    log = str(tmp_path / "cli.jsonl")
    monkeypatch.setattr(graph, "autotune", _fast(graph.autotune))
    assert main(["tune", model_path, "--trials", "4", "--log", log, "--batch-size", "2",
                 "--tuner", "random"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("graph.autotune: 4/4 trials over 3 tasks")
    assert len(open(log).readlines()) >= 4
    assert f"--tuning-log {log}" in out
    assert main(["run", model_path, "--level", "O2", "--tuning-log", log]) == 0
    assert "max |ours - onnxruntime|" in capsys.readouterr().out


def _fast(autotune):
    def run(*args, **kw):
        return autotune(*args, measure_option=FAST, verbose=0, **kw)
    return run


@pytest.mark.parametrize("argv, message", [
    (["--trials", "0", "--log", "x.jsonl"], "argument --trials: must be a positive int, got '0'"),
    (["--trials", "many", "--log", "x.jsonl"],
     "argument --trials: must be a positive int, got 'many'"),
    (["--log", "x.jsonl"], "the following arguments are required: --trials"),
    (["--trials", "4"], "the following arguments are required: --log"),
    (["--trials", "4", "--log", "x.jsonl", "--batch-size", "-1"],
     "argument --batch-size: must be a positive int, got '-1'"),
])
def test_cli_tune_errors_name_the_parameter(model_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(["tune", model_path] + argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_tune_bad_level(model_path, tmp_path, capsys):
    assert main(["tune", model_path, "--trials", "4", "--log", str(tmp_path / "l.jsonl"),
                 "--level", "O5"]) == 2
    assert capsys.readouterr().err == ("error: graph.autotune: level must be one of "
                                       "['O0', 'O1', 'O2'], got 'O5'\n")
