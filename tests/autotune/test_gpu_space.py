"""The automatic GPU space (te/autotune/gpu_space.py): te.autotune(..., target="cuda") on a
compute alone. Sampled configs of an odd-sized matmul and of an injective graph build for
'cuda' and match numpy in the CUDA emulator; the default config fits any GPU; a short
tuning run logs 'cuda' records that load_best applies; a config whose shared tiles overflow
is a failed trial (compile_error), not a crash."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import run_emulated

import te
from te.autotune import records as R
from te.autotune import tune as autotune_tune
from te.autotune.gpu_space import gpu_strategy
from te.autotune.space import ConfigSpace
from te.autotune.task import AutoTask, compile_job, gpu_present


def _matmul(M, N, K, dtype="float32"):
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    return A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


def _inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, s).astype("float32") * rng.choice([-1, 1], s)
            .astype("float32") for s in shapes]


def _space(C) -> ConfigSpace:
    space = ConfigSpace()
    gpu_strategy(space, C)
    return space


def test_sampled_matmul_configs_build_for_cuda_and_match_numpy_in_the_emulator():
    M, N, K = 37, 45, 33
    A, B, C = _matmul(M, N, K)
    space = _space(C)
    assert list(space.knobs) == ["threads_i", "vthread_i", "inner_i", "threads_j",
                                 "vthread_j", "inner_j", "k_step", "shared", "unroll_k"]
    assert len(space) == 4 * 2 * 3 * 4 * 2 * 3 * 3 * 2 * 2
    a, b = _inputs((M, K), (K, N))
    rng = np.random.default_rng(19)
    sampled = [space.default()] + [space.get(int(x)) for x in rng.integers(1, len(space), 2)]
    for cfg in sampled:
        s, args = gpu_strategy(cfg, C)
        mod = te.build(s, args, target="cuda")
        (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5, err_msg=str(cfg))
        assert mod.kernels[0].uses_barriers == bool(cfg["shared"].val), cfg


def test_the_default_matmul_config_fits_any_gpu():
    # a large float64 matmul: the default's block and shared tiles are what they are at any size
    _, _, C = _matmul(1024, 1024, 1024, "float64")
    space = _space(C)
    s, args = gpu_strategy(space.default(), C)
    mod = te.build(s, args, target="cuda")
    _, dims = mod.launch_plan(())
    (grid, block), = dims
    assert tuple(grid)[:2] == (64, 64) and np.prod(block) == 64     # 16 x 16 outputs a block
    text = str(te.lower(s, args, target="cuda"))
    # A's 16 rows and B's 16 columns of an 8-deep k step: 2 KiB of shared memory a block
    assert "allocate A.shared[float64 * 128] scope=shared" in text, text
    assert "allocate B.shared[float64 * 128] scope=shared" in text, text


def test_an_injective_graph_is_fused_vectorized_and_matches_numpy():
    X = te.placeholder((7, 129), name="X")
    Y = te.compute(X.shape, lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute(X.shape, lambda i, j: te.exp(Y[i, j]) + 1.0, name="Z")
    space = _space(Z)
    # 903 elements: no block of 1024 threads
    assert {k: len(v.options) for k, v in space.knobs.items()} == {"block_threads": 4,
                                                                  "vector": 3}
    (x,) = _inputs((7, 129))
    for values in ({"block_threads": 256, "vector": 1}, {"block_threads": 64, "vector": 4}):
        s, args = gpu_strategy(space.from_json_dict({"knobs": values}), Z)
        mod = te.build(s, args, target="cuda")
        if values["vector"] == 4:
            assert "float4" in mod.get_source()
        (z,) = run_emulated(mod, [x], [(7, 129)], ["float32"])
        np.testing.assert_allclose(z, np.exp(x * 2.0) + 1.0, rtol=1e-5, err_msg=str(values))


def test_graphs_outside_the_space_are_refused_by_name():
    X = te.placeholder((8, 9, 10), name="X")
    k = te.reduce_axis((0, 10), name="k")
    S = te.compute((8, 9), lambda i, j: te.sum(X[i, j, k] * X[i, j, k], axis=k), name="S")
    T = te.compute((8, 9), lambda i, j: S[i, j] + 1.0, name="T")
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: the GPU space schedules a "
                       r"matmul-like output \(2-D, one reduction axis, reading placeholders\) "
                       r"or an injective graph; 'S' is a reduction read by 'T' \(stages over "
                       r"a reduction are not in the space yet\)$"):
        _space(T)
    r = te.reduce_axis((0, 9), name="r")
    R1 = te.compute((8,), lambda i: te.sum(X[i, r, 0], axis=r), name="R1")
    with pytest.raises(te.ArgumentError, match=r"; 'R1' is a reduction of another shape$"):
        _space(R1)
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: strategy 'gpu' binds GPU "
                       r"threads and needs target 'cuda', got 'llvm'$"):
        te.autotune(_matmul(8, 9, 10)[2], trials=1, strategy="gpu", verbose=0)


def test_a_config_whose_shared_tiles_overflow_is_a_failed_trial():
    # float64, 256 rows of A and 256 columns of B, 16 deep: 64 KiB of shared memory a block
    _, _, C = _matmul(256, 256, 16, "float64")
    task = AutoTask(C, strategy="gpu")
    big = {"threads_i": 32, "vthread_i": 2, "inner_i": 4, "threads_j": 32, "vthread_j": 2,
           "inner_j": 4, "k_step": 16, "shared": 1, "unroll_k": 1}
    job, err = compile_job(task, task.space.from_json_dict({"knobs": big}), False, "cuda")
    assert job is None and err.error == R.COMPILE_ERROR
    assert "shared memory" in err.msg, err.msg


def test_te_autotune_for_cuda_logs_records_that_load_best_applies(tmp_path, monkeypatch):
    M, N, K = 37, 45, 33
    A, B, C = _matmul(M, N, K)
    log = str(tmp_path / "gpu.log")
    monkeypatch.setattr(autotune_tune, "_warned_emulated", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = te.autotune(C, trials=3, target="cuda", tuner="random", seed=3, log=log,
                             verbose=0)
    emulated = [w for w in caught if "CUDA emulator" in str(w.message)]
    assert len(emulated) == (0 if gpu_present() else 1)
    assert len(result.history) == 3 and all(t.result.ok for t in result.history), \
        [t.result for t in result.history]
    records = R.load_records(log)[0]
    assert len(records) == 3
    assert {(r.target, r.workload) for r in records} == {("cuda", te.autotune.strategy_key(
        C, "gpu"))}
    s, args = te.autotune.load_best(log, C, target="cuda")
    mod = te.build(s, args, target="cuda")
    a, b = _inputs((M, K), (K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    # the config applied is the best trial's
    with te.autotune.apply_history_best(log, target="cuda"):
        with te.autotune.trace_lookups() as recs:
            te.autotune.schedule_gpu(C)
    assert [r.config for r in recs] == [result.best_config.to_json_dict()]
    # records apply to the target they were tuned for: none for 'llvm'
    with te.autotune.apply_history_best(log, target="llvm"):
        with te.autotune.trace_lookups() as recs:
            te.autotune.schedule_gpu(C)
    assert recs == []
