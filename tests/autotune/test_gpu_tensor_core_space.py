"""Tensor-core candidates of the automatic GPU space (te/autotune/wmma_space.py): a float16
matmul accumulated in float32 with M, N, K multiples of 16 is tuned over warps and 16x16
tiles per warp, K chunks and shared staging; a short te.autotune run's best config (applied
from its records by load_best) calls mma_sync, matches numpy in the CUDA emulator and
compiles for sm_80 without spills; other dtypes, shapes and B transposed keep the SIMT
candidates; a config whose shared chunks overflow is a failed trial."""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te
from te.autotune import records as R
from te.autotune.gpu_space import gpu_strategy
from te.autotune.space import ConfigSpace
from te.autotune.task import AutoTask, compile_job

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")
SIMT_KNOBS = ["threads_i", "vthread_i", "inner_i", "threads_j", "vthread_j", "inner_j",
              "k_step", "shared", "unroll_k"]


def _matmul(M, N, K, dtype="float16", transpose_b=False, batch=None):
    lead = (batch,) if batch else ()
    A = te.placeholder(lead + (M, K), name="A", dtype=dtype)
    B = te.placeholder(lead + ((N, K) if transpose_b else (K, N)), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")

    def body(*idx):
        *b, i, j = idx
        rhs = B[(*b, j, k)] if transpose_b else B[(*b, k, j)]
        return te.sum(A[(*b, i, k)].astype("float32") * rhs.astype("float32"), axis=k)
    return A, B, te.compute(lead + (M, N), body, name="C")


def _space(C) -> ConfigSpace:
    space = ConfigSpace()
    gpu_strategy(space, C)
    return space


def _check(mod, a, b, seed_shape):
    (c,) = run_emulated(mod, [a, b], [seed_shape], ["float32"])
    K = a.shape[-1]
    # products of halves are exact in float32; K float32 additions of terms <= 2.25 in size
    want = np.matmul(a.astype("float64"), b.astype("float64"))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=K * 2.25 * 2.0 ** -24 * 8)


def test_the_tensor_core_space_knobs_and_size():
    space = _space(_matmul(64, 48, 96)[2])
    assert list(space.knobs) == ["tile_i", "tile_j", "chunk", "shared"]
    # [blocks, warps per block, 16x16 tiles per warp]: 4 tiles along M, 3 along N
    assert space.knobs["tile_i"].options == ((-1, 1, 1), (-1, 2, 1), (-1, 4, 1), (-1, 1, 2),
                                             (-1, 2, 2), (-1, 1, 4))
    assert space.knobs["tile_j"].options == ((-1, 1, 1), (-1, 3, 1), (-1, 1, 3))
    assert space.knobs["chunk"].options == (32,)      # 64 does not divide K = 96
    assert space.knobs["shared"].options == (1, 0)
    assert len(space) == 6 * 3 * 1 * 2
    big = _space(_matmul(256, 128, 128)[2])
    assert big.knobs["chunk"].options == (32, 64)
    # warps and tiles per warp up to 4 each along an axis (a block of at most 512 threads)
    assert (-1, 4, 4) in big.knobs["tile_i"].options
    assert len(big) == 9 * 8 * 2 * 2
    # chunks of 16 only where 32 does not divide K
    assert _space(_matmul(16, 16, 48)[2]).knobs["chunk"].options == (16,)


@pytest.mark.parametrize("M, N, K, dtype, transpose_b", [
    (40, 48, 32, "float16", False),     # M not a multiple of 16
    (32, 48, 24, "float16", False),     # K not a multiple of 16
    (32, 48, 32, "float32", False),     # not float16
    (32, 48, 32, "float16", True),      # B transposed: the intrinsic reads B[k, j]
])
def test_other_matmuls_keep_the_simt_candidates(M, N, K, dtype, transpose_b):
    assert list(_space(_matmul(M, N, K, dtype, transpose_b)[2]).knobs) == SIMT_KNOBS


def test_a_float16_matmul_off_the_16_grid_runs_simt_and_matches_numpy():
    M, N, K = 40, 24, 40
    A, B, C = _matmul(M, N, K)
    space = _space(C)
    rng = np.random.default_rng(5)
    a, b = rand_array((M, K), "float16", rng), rand_array((K, N), "float16", rng)
    s, args = gpu_strategy(space.get(int(rng.integers(1, len(space)))), C)
    mod = te.build(s, args, target="cuda")
    assert "mma_sync" not in mod.get_source()
    _check(mod, a, b, (M, N))


@pytest.mark.parametrize("batch_b", [True, False])
def test_batched_configs_bind_the_batch_to_blockIdx_z_and_match_numpy(batch_b):
    Bt, M, N, K = 3, 32, 48, 48     # K = 48: chunks of 16
    A = te.placeholder((Bt, M, K), name="A", dtype="float16")
    B = te.placeholder((Bt, K, N) if batch_b else (K, N), name="B", dtype="float16")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((Bt, M, N), lambda b, i, j: te.sum(
        A[b, i, k].astype("float32") *
        (B[b, k, j] if batch_b else B[k, j]).astype("float32"), axis=k), name="C")
    space = _space(C)
    assert list(space.knobs) == ["tile_i", "tile_j", "chunk", "shared"]
    rng = np.random.default_rng(11)
    a = rand_array((Bt, M, K), "float16", rng)
    b = rand_array((Bt, K, N) if batch_b else (K, N), "float16", rng)
    knobs = {"tile_i": [-1, 2, 1], "tile_j": [-1, 1, 3], "chunk": 16,
             "shared": int(batch_b)}
    s, args = gpu_strategy(space.from_json_dict({"knobs": knobs}), C)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert "mma_sync" in src and "blockIdx.z" in src
    assert mod.kernels[0].uses_barriers == batch_b
    _check(mod, a, b, (Bt, M, N))


def test_a_config_whose_shared_chunks_overflow_is_a_failed_trial():
    # 16 tiles of 16 rows of A and columns of B, 64 deep, in halves: 64 KiB of shared memory
    task = AutoTask(_matmul(256, 256, 64)[2], strategy="gpu")
    knobs = {"tile_i": [-1, 4, 4], "tile_j": [-1, 4, 4], "chunk": 64, "shared": 1}
    job, err = compile_job(task, task.space.from_json_dict({"knobs": knobs}), False, "cuda")
    assert job is None and err.error == R.COMPILE_ERROR
    assert "65536 bytes of shared memory per block; CUDA allows 49152" in err.msg, err.msg


@pytest.fixture(scope="module", params=[(64, 48, 96), (128, 64, 32)],
                ids=["64x48x96", "128x64x32"])
def tuned(request, tmp_path_factory):
    """A three-trial te.autotune run of a float16 matmul for 'cuda' and its log."""
    M, N, K = request.param
    A, B, C = _matmul(M, N, K)
    log = str(tmp_path_factory.mktemp("wmma") / "gpu.log")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # no GPU: emulated
        result = te.autotune(C, trials=3, target="cuda", tuner="random", seed=4, log=log,
                             verbose=0)
    return (M, N, K), C, log, result


def test_tuning_a_float16_matmul_picks_a_tensor_core_config_that_matches_numpy(tuned):
    (M, N, K), C, log, result = tuned
    assert len(result.history) == 3 and all(t.result.ok for t in result.history), \
        [t.result for t in result.history]
    assert set(result.best_config.to_json_dict()["knobs"]) == {"tile_i", "tile_j", "chunk",
                                                               "shared"}
    s, args = te.autotune.load_best(log, C, target="cuda")
    with te.autotune.apply_history_best(log, target="cuda"):
        with te.autotune.trace_lookups() as recs:
            te.autotune.schedule_gpu(C)
    assert [r.config for r in recs] == [result.best_config.to_json_dict()]
    mod = te.build(s, args, target="cuda")
    assert "nvcuda::wmma::mma_sync" in mod.get_source()
    # the default schedule accumulates in fragments (C stored once per tile)
    assert "te_wmma_mma_16x16(" in mod.get_source()
    assert "te_wmma_update_16x16(" not in mod.get_source()
    rng = np.random.default_rng(M + N + K)
    _check(mod, rand_array((M, K), "float16", rng), rand_array((K, N), "float16", rng), (M, N))


@needs_nvcc
def test_the_best_tensor_core_kernel_compiles_for_sm_80_without_spills(tuned):
    _, C, log, _ = tuned
    s, args = te.autotune.load_best(log, C, target="cuda")
    mod = te.build(s, args, target="cuda -arch=sm_80")
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in mod.get_source("ptx")
    used = mod.kernels[0].resources
    assert used.arch == "sm_80" and used.spill_stores == used.spill_loads == 0, used
