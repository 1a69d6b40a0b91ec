"""A tensor-core GEMM in TVM's shared-memory style: K split into chunks outside the 16x16
tiles, te.wmma_matmul_intrin(chunk)'s reset zeroing each warp's C tiles before the chunk
loop and its update adding one chunk per iteration, the block's A and B chunks filled into
shared memory by all its threads (barrier before the fill and before the use); the
schedule is the automatic GPU space's (te/autotune/wmma_space.py), C tiles in global memory
here and in 'wmma.accumulator' fragments (test_cuda_wmma_fragments.py). Checked
against numpy in the CUDA emulator and, where nvcc is on PATH, compiled for sm_80 and
sm_90 with ptxas reporting no spills. Not yet run on a GPU.
"""
import re
import shutil

import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te
from te.autotune.wmma_space import wmma_schedule

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")

# (M, N, K, block tiles (rows, cols), warps (rows, cols), K chunk): 6 warps of one tile
# and 3 chunks; 4 warps of 2x2 tiles and 2 chunks (with chunks of 16, ptxas for sm_80 keeps
# that kernel to 40 registers under __launch_bounds__(128) and spills 16 bytes)
CASES = [(64, 48, 96, (2, 3), (2, 3), 32), (128, 128, 64, (4, 4), (2, 2), 32)]


def _matmul(M, N, K):
    A = te.placeholder((M, K), name="A", dtype="float16")
    B = te.placeholder((K, N), name="B", dtype="float16")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")
    return A, B, C


def _check(mod, M, N, K, seed):
    rng = np.random.default_rng(seed)
    a, b = rand_array((M, K), "float16", rng), rand_array((K, N), "float16", rng)
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    # products of halves are exact in float32; K float32 additions of terms <= 2.25 in size
    want = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=K * 2.25 * 2.0 ** -24 * 8)


def wmma_gemm(M, N, K, block, warps, chunk, fragments=False):
    """C = A @ B (float16 in, float32 out) by the GPU space's tensor-core schedule
    (te/autotune/wmma_space.py): a block computes block[0] x block[1] tiles of 16x16, its
    warps (threadIdx.z, threadIdx.y) a share of them each; per K chunk the block fills A's
    and B's chunk into shared memory (threadIdx.x the warp's lanes)."""
    A, B, C = _matmul(M, N, K)
    tiles = (block[0] // warps[0], block[1] // warps[1])
    return wmma_schedule(C.op, warps, tiles, chunk, shared=True, fragments=fragments), [A, B, C]


@pytest.mark.parametrize("M, N, K, block, warps, chunk", CASES)
def test_chunked_wmma_gemm_matches_numpy(M, N, K, block, warps, chunk):
    s, args = wmma_gemm(M, N, K, block, warps, chunk)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert f"__launch_bounds__({32 * warps[0] * warps[1]})" in src
    # wmma pointers must be 256-bit aligned
    assert f"__shared__ __align__(32) half A_shared[{block[0] * 16 * chunk}];" in src
    assert f"__shared__ __align__(32) half B_shared[{chunk * block[1] * 16}];" in src
    # the tiles zeroed before the chunk loop; in it: barrier, fills, barrier, updates (the
    # next iteration's first barrier keeps its fill from overwriting a chunk in use)
    lines = [line.strip() for line in src[src.index("__global__"):].splitlines()]
    order = []
    for line in lines:
        word = re.match(r"(__syncthreads|te_wmma_\w+|A_shared\[|B_shared\[|for \(int k_outer)",
                        line)
        if word and (not order or order[-1] != word.group(1)):
            order.append(word.group(1))
    assert order == ["te_wmma_zero_16x16", "for (int k_outer", "__syncthreads", "A_shared[",
                     "B_shared[", "__syncthreads", "te_wmma_update_16x16"]
    assert "(A_shared + " in src and f"), {chunk}, (B_shared + " in src
    _check(mod, M, N, K, M + N + K)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("M, N, K, block, warps, chunk", CASES)
def test_chunked_wmma_gemm_compiles_without_spills(arch, M, N, K, block, warps, chunk):
    s, args = wmma_gemm(M, N, K, block, warps, chunk)
    mod = te.build(s, args, target=f"cuda -arch={arch}")
    ptx = mod.get_source("ptx")
    assert "wmma.load.c.sync.aligned.row.m16n16k16" in ptx   # the update's accumulator
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in ptx
    assert "bar.sync" in ptx
    used = mod.kernels[0].resources
    assert used.arch == arch and used.spill_stores == used.spill_loads == 0
    assert used.shared_bytes == 2 * (block[0] * 16 * chunk + chunk * block[1] * 16)


def test_chunks_outside_a_data_loop_read_global_memory():
    # no shared stages (A and B read where they are); the chunk loop outside a tile loop
    M, N, K = 48, 32, 80
    A, B, C = _matmul(M, N, K)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    ko, ki = s[C].split(C.op.reduce_axis[0], 16)
    s[C].reorder(io, ko, jo, ii, ji, ki)
    s[C].bind(io, te.thread_axis("blockIdx.x"))
    s[C].tensorize(ii, te.wmma_matmul_intrin(16))
    mod = te.build(s, [A, B, C], target="cuda")
    src = mod.get_source()
    assert src.index("te_wmma_zero_16x16((C + ") < src.index("for (int k_outer = 0; "
                                                            "k_outer < 5; ++k_outer)")
    assert "te_wmma_update_16x16((C + " in src and "__syncthreads" not in src
    _check(mod, M, N, K, 7)
