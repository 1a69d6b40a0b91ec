"""te.tvm.autotvm as TVM spells it: template, task.create, measure_option, the four tuners
with log_to_file / progress_bar, apply_history_best (context and .query), record helpers,
fallback configs and the errors for what is not supported."""
from __future__ import annotations

import numpy as np
import pytest

import te
from te.tvm import autotvm


@autotvm.template("test_tvm/matmul")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=3)
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2")
    cfg.define_knob("unroll", [False, True])
    yo, ym, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, ym, s[C].op.reduce_axis[0], yi, xi)
    if cfg["unroll"].val:
        s[C].unroll(yi)
    cfg.add_flop(2 * N * L * M)
    return s, [A, B, C]


def _run(s, args, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, sh).astype("float32") for sh in shapes]
    out = np.full((shapes[0][0], shapes[1][1]), np.nan, "float32")
    te.build(s, args)(*arrays, out)
    np.testing.assert_allclose(out, arrays[0] @ arrays[1], rtol=1e-4, atol=1e-4)


def test_task_create_gives_a_printable_space_of_tvm_size():
    task = autotvm.task.create("test_tvm/matmul", args=(12, 5, 8, "float32"), target="llvm")
    # tile_y: ordered (a, b) with a * b dividing 12 (18); tile_x: powers of two up to 8 (4)
    assert len(task.config_space) == 18 * 4 * 2
    assert "tile_y: 18 options" in repr(task.config_space)
    assert task.workload == ("test_tvm/matmul", 12, 5, 8, "float32")
    assert task.flop == 2 * 12 * 5 * 8
    assert task.config_space.flop == 2 * 12 * 5 * 8    # cfg.add_flop, once per run
    cfg = task.config_space.get(37)
    s, args = task.instantiate(cfg)
    _run(s, args, [(12, 5), (5, 8)])


@pytest.mark.parametrize("tuner_cls", [autotvm.tuner.RandomTuner, autotvm.tuner.GATuner])
def test_tune_logs_and_apply_history_best_picks_the_best(tmp_path, tuner_cls):
    log = str(tmp_path / "matmul.log")
    task = autotvm.task.create("test_tvm/matmul", args=(12, 5, 8, "float32"), target="llvm")
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(),
                                    runner=autotvm.LocalRunner(number=2, repeat=1,
                                                               timeout=20))
    tuner = tuner_cls(task)
    tuner.tune(n_trial=4, measure_option=option,
               callbacks=[autotvm.callback.log_to_file(log)])
    assert len(tuner.result.history) == 4 and tuner.best_config is not None
    assert tuner.best_flops > 0
    records = list(autotvm.record.load_from_file(log))
    assert len(records) >= 4
    with autotvm.apply_history_best(log) as ctx:
        best = ctx.query("llvm", task.workload)
        s, args = matmul(12, 5, 8, "float32")
    assert best == tuner.best_config
    want, _ = task.instantiate(best)
    assert s.to_json() == want.to_json()
    _run(s, args, [(12, 5), (5, 8)], seed=1)
    out = tmp_path / "best.log"
    autotvm.record.pick_best(log, out)
    assert len(list(autotvm.record.load_from_file(out))) == 1


def test_query_of_an_untuned_workload_is_the_fallback_space(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("")
    with autotvm.apply_history_best(str(log)) as ctx:
        cfg = ctx.query("llvm", ("test_tvm/matmul", 6, 5, 4, "float32"))
    assert cfg.is_fallback and cfg["tile_y"].size == [-1, 1, 1]


def test_measure_option_maps_onto_ours():
    opt = autotvm.measure_option(builder="local",
                                 runner=autotvm.LocalRunner(number=5, repeat=2, timeout=4,
                                                            min_repeat_ms=0))
    assert (opt.number, opt.repeat, opt.min_repeat_ms) == (5, 2, 0.0)
    assert opt.timeout == 4 + 10      # the runner's limit plus the builder's


@pytest.mark.parametrize("call,msg", [
    (lambda: autotvm.task.create("no/such", args=(1,), target="llvm"),
     "no template named 'no/such'"),
    (lambda: autotvm.task.create("test_tvm/matmul", args=(4, 4, 4, "float32"), target="rocm"),
     r"target must be 'llvm' \(tuning on this CPU\) or 'cuda' \(on the GPU, or in the CUDA "
     r"emulator where none is present\), got 'rocm'"),
    (lambda: autotvm.measure_option(builder="local", runner="rpc"),
     "runner must be 'local' or an autotvm.LocalRunner"),
    (lambda: autotvm.tuner.XGBTuner(
        autotvm.task.create("test_tvm/matmul", args=(4, 4, 4, "float32")), bogus=1),
     r"unknown keyword\(s\) \['bogus'\]"),
    (lambda: autotvm.tuner.RandomTuner(
        autotvm.task.create("test_tvm/matmul", args=(4, 4, 4, "float32"))).tune(
            2, callbacks=[print]),
     "other callbacks are not supported"),
])
def test_unsupported_uses_say_what_is_supported(call, msg):
    with pytest.raises(te.ArgumentError, match=msg):
        call()


def test_names_tvm_code_imports():
    from te.tvm.autotvm.task.space import OtherOptionEntity, SplitEntity
    assert autotvm.SplitEntity is SplitEntity and autotvm.OtherOptionEntity is OtherOptionEntity
    assert autotvm.GLOBAL_SCOPE.in_tuning is False
    for name in ("XGBTuner", "GATuner", "RandomTuner", "GridSearchTuner"):
        assert issubclass(getattr(autotvm.tuner, name), autotvm.tuner.Tuner)
    assert SplitEntity([-1, 4, 2]).size == [-1, 4, 2]
    assert OtherOptionEntity(3).val == 3


def test_a_tvm_format_log_is_refused_not_silently_empty(tmp_path):
    log = tmp_path / "tvm.log"
    log.write_text('{"input": ["llvm", "tutorial/matmul", [[512, 512, 512, "float32"], {}]], '
                   '"config": {"index": 3, "code_hash": null, "entity": []}, '
                   '"result": [[0.01], 0, 1.0, 1.0], "version": 0.2, "tvm_version": "0.16"}\n')
    with pytest.raises(te.ArgumentError, match="is not a te tuning log .*logs of TVM's "
                       "AutoTVM are not read"):
        autotvm.apply_history_best(str(log))
