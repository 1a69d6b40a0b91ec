"""AutoTVM for target 'cuda' (TVM's tune_conv2d_cuda flow, at a small size): a conv2d
template with shared/local caches, virtual threads and cooperative fetching is tuned for
'cuda' (on the GPU, or in the CUDA emulator with a warning where none is present), the log
is picked and applied under `with tvm.target.Target("cuda")`, and the built module matches
topi.testing's reference; configs that te.build refuses are logged as errors and the run
goes on; where a GPU is present (here a stand-in: the emulator behind another backend),
configs are timed with the runner's repeats and the leaders re-measured."""
from __future__ import annotations

import dataclasses
import json
import os
import warnings

import numpy as np
import pytest

import te as te_lib
import te.tvm as tvm
from te.autotune import task as autotune_task
from te.autotune import result as autotune_result
from te.autotune import tune as autotune_tune
from te.autotune.task import gpu_present
from te.tvm import autotvm, te, topi
from te.tvm.topi.testing import conv2d_nchw_python

SHAPE = (1, 5, 5, 8, 4, 3, 3, (1, 1), (1, 1))    # N, H, W, CO, CI, KH, KW, stride, pad


@autotvm.template("test_tvm_cuda/conv2d")
def conv2d_template(N, H, W, CO, CI, KH, KW, stride, padding):
    data = te.placeholder((N, CI, H, W), name="data")
    kernel = te.placeholder((CO, CI, KH, KW), name="kernel")
    conv = topi.nn.conv2d_nchw(data, kernel, stride, padding, dilation=1, out_dtype="float32")
    s = te.create_schedule([conv.op])
    cfg = autotvm.get_config()
    _, f, y, x = s[conv].op.axis
    rc, _, _ = s[conv].op.reduce_axis
    cfg.define_split("tile_f", f, num_outputs=4)
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_rc", rc, num_outputs=2)
    cfg.define_knob("auto_unroll_max_step", [0, 64])

    pad = s[conv].op.input_tensors[0]
    s[pad].compute_inline()
    local = s.cache_write(conv, "local")
    shared_in = s.cache_read(pad, "shared", [local])
    shared_w = s.cache_read(kernel, "shared", [local])

    n, f, y, x = s[conv].op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, conv, f)
    by, ty = cfg["tile_y"].apply(s, conv, y)
    s[conv].reorder(n, bf, by, vf, tf, ty, fi, x)
    s[conv].bind(bf, te.thread_axis("blockIdx.y"))
    s[conv].bind(by, te.thread_axis("blockIdx.x"))
    s[conv].bind(vf, te.thread_axis("vthread"))
    s[conv].bind(tf, te.thread_axis("threadIdx.y"))
    s[conv].bind(ty, te.thread_axis("threadIdx.x"))
    s[local].compute_at(s[conv], ty)

    rc, ry, rx = s[local].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, local, rc)
    s[local].reorder(rco, ry, rx, rci, *s[local].op.axis)
    for stage in (shared_in, shared_w):
        s[stage].compute_at(s[local], rco)
        fused = s[stage].fuse(*s[stage].op.axis)
        # cooperative fetching: the block's threads, by the split's sizes (TVM's meaning)
        tz, fused = s[stage].split(fused, nparts=cfg["tile_f"].size[2])
        tx, fused = s[stage].split(fused, nparts=cfg["tile_y"].size[1])
        s[stage].bind(tz, te.thread_axis("threadIdx.y"))
        s[stage].bind(tx, te.thread_axis("threadIdx.x"))
    s[conv].pragma(n, "auto_unroll_max_step", cfg["auto_unroll_max_step"].val)
    return s, [data, kernel, conv]


@autotvm.template("test_tvm_cuda/scale")
def scale_template(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("threads", [64, 2048])     # 2048: more threads per block than CUDA has
    bx, tx = s[B].split(B.op.axis[0], factor=cfg["threads"].val)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


@autotvm.template("test_tvm_cuda/scale_by")
def scale_by_template(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0 - 1.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("threads", [32, 64, 128])
    bx, tx = s[B].split(B.op.axis[0], factor=cfg["threads"].val)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


STAND_IN_GPU = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "autotune", "_hooks.py") + ":gpu_is_the_emulator"

FAST = dict(builder=autotvm.LocalBuilder(),
            runner=autotvm.LocalRunner(repeat=3, min_repeat_ms=100, timeout=4))


def _records(log):
    with open(log) as f:
        return [json.loads(line) for line in f]


def _tune(tuner, n_trial, log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner.tune(n_trial=n_trial, measure_option=autotvm.measure_option(**FAST),
                   callbacks=[autotvm.callback.log_to_file(log)])
    emulated = [w for w in caught if "runs once in the CUDA emulator" in str(w.message)]
    # the warning says what emulated times are, once per process (no GPU here), never on a GPU
    assert len(emulated) <= (0 if gpu_present() else 1)


def test_tune_conv2d_for_cuda_then_apply_the_best_config(tmp_path):
    log, best_log = str(tmp_path / "conv2d.log"), str(tmp_path / "best.log")
    task = autotvm.task.create("test_tvm_cuda/conv2d", args=SHAPE, target="cuda")
    assert task.target == "cuda"
    tuner = autotvm.tuner.XGBTuner(task)
    _tune(tuner, 4, log)
    records = _records(log)
    assert len(records) == 4 and {r["target"] for r in records} == {"cuda"}
    ok = [r for r in records if r["result"]["error"] is None]
    assert ok, [r["result"]["msg"] for r in records]
    for r in ok:
        if gpu_present():
            assert r["result"]["msg"] != "emulated: one run"
        else:   # one checked run in the emulator is the measurement
            assert r["result"]["msg"] == "emulated: one run"
            assert len(r["result"]["costs"]) == 1
    fastest = min(ok, key=lambda r: r["result"]["costs"][0])

    autotvm.record.pick_best(log, best_log)
    assert [r["config"] for r in _records(best_log)] == [fastest["config"]]
    best = autotvm.apply_history_best(best_log).query(task.target, task.workload)
    assert not getattr(best, "is_fallback", False)
    assert best.to_json_dict() == fastest["config"]

    with autotvm.apply_history_best(best_log):
        with tvm.target.Target("cuda"):
            s, args = conv2d_template(*SHAPE)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)   # the emulator fallback
                func = tvm.build(s, args)
    assert "__global__" in func.imported_modules[0].get_source()
    N, H, W, CO, CI, KH, KW, stride, pad = SHAPE
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (N, CI, H, W)).astype("float32")
    w = rng.uniform(-1, 1, (CO, CI, KH, KW)).astype("float32")
    dev = tvm.cuda()
    c = tvm.nd.empty((N, CO, H, W), device=dev)
    func(tvm.nd.array(a, device=dev), tvm.nd.array(w, device=dev), c)
    tvm.testing.assert_allclose(c.numpy(), conv2d_nchw_python(a, w, stride, pad), rtol=1e-4,
                                atol=1e-5)


def test_a_config_te_build_refuses_is_a_logged_error_and_tuning_goes_on(tmp_path):
    log = str(tmp_path / "scale.log")
    task = autotvm.task.create("test_tvm_cuda/scale", args=(4096,), target="cuda")
    _tune(autotvm.tuner.GridSearchTuner(task), 2, log)
    by_threads = {r["config"]["knobs"]["threads"]: r["result"] for r in _records(log)}
    assert by_threads[2048]["error"] == "compile_error"
    assert "2048 threads per block" in by_threads[2048]["msg"]
    assert by_threads[64]["error"] is None and by_threads[64]["costs"][0] > 0
    with autotvm.apply_history_best(log):
        assert autotvm.apply_history_best(log).query("cuda", task.workload)["threads"].val == 64
        # records apply to the target they were tuned for: none for 'llvm'
        assert autotvm.apply_history_best(log).query("llvm", task.workload).is_fallback


def test_a_cpu_strategy_is_not_tuned_for_cuda():
    # the automatic space for 'cuda' is the GPU space (tests/autotune/test_gpu_space.py);
    # the conv2d strategy schedules for the CPU
    X = te.placeholder((1, 4, 6, 6), name="X")
    W = te.placeholder((8, 4, 3, 3), name="W")
    conv = te_lib.autotune.conv2d_compute(X, W, 1, 1, 1, 1)
    with pytest.raises(te_lib.ArgumentError, match=r"^te.autotune: target 'cuda' needs a "
                       r"template \(@te.autotune.template\) whose schedule binds GPU threads "
                       r"or the GPU space \(strategy 'gpu'\); strategy 'conv2d' of \S+ "
                       r"schedules for the CPU \('llvm'\)$"):
        te_lib.autotune(conv, trials=1, target="cuda", strategy="conv2d", verbose=0)


def test_where_a_gpu_is_present_configs_are_timed_there_and_the_leaders_re_measured(
        tmp_path, monkeypatch):
    # the tuning process sees a GPU; the workers' "GPU" is the emulator behind a stand-in
    # backend (tests/autotune/_hooks.py), so the worker takes its GPU path
    for module in (autotune_task, autotune_tune):
        monkeypatch.setattr(module, "gpu_present", lambda: True)
    log = str(tmp_path / "scale_by.log")
    task = autotvm.task.create("test_tvm_cuda/scale_by", args=(1000,), target="cuda")
    option = dataclasses.replace(autotvm.measure_option(
        builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=2, repeat=3)),
        hook=STAND_IN_GPU)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autotvm.tuner.GridSearchTuner(task).tune(
            n_trial=3, measure_option=option, callbacks=[autotvm.callback.log_to_file(log)])
    assert not [w for w in caught if "CUDA emulator" in str(w.message)]
    records = _records(log)
    assert all(r["result"]["error"] is None for r in records), records
    assert all(len(r["result"]["costs"]) == 3 for r in records)      # repeat=3, timed
    assert all(r["result"]["msg"] != "emulated: one run" for r in records)
    # 3 trials, then the 3 leaders re-measured in CONFIRM_ROUNDS rounds
    assert len(records) == 3 + 3 * autotune_result.CONFIRM_ROUNDS
