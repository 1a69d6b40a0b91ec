"""Tensor cores on target 'cuda': te.wmma_matmul_intrin tensorizes a float16 matmul's 16x16
tiles (float32 accumulation) into nvcuda::wmma calls, one warp per tile, the whole
reduction in one call (K split into chunks: test_cuda_wmma_gemm.py). Checked against
numpy in the CUDA emulator (runtime/cuda_emulator_wmma.py: every lane computes the whole
fragment) and, where nvcc is on PATH, in the PTX for sm_80 (wmma.mma.sync instructions).
Not yet run on a GPU.
"""
import shutil

import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")


def _wmma_matmul(M, N, K, warps=None, intrin_k=None):
    A = te.placeholder((M, K), name="A", dtype="float16")
    B = te.placeholder((K, N), name="B", dtype="float16")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, te.thread_axis("blockIdx.y"))
    if warps:   # several warps to a block, one tile each
        jb, jw = s[C].split(jo, warps)
        s[C].bind(jb, te.thread_axis("blockIdx.x"))
        s[C].bind(jw, te.thread_axis("threadIdx.y"))
    else:
        s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].tensorize(ii, te.wmma_matmul_intrin(intrin_k or K))
    return s, [A, B, C]


def _check(mod, M, N, K):
    rng = np.random.default_rng(M * N + K)
    a, b = rand_array((M, K), "float16", rng), rand_array((K, N), "float16", rng)
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    # products of halves are exact in float32; K float32 additions of terms <= 2.25 in size
    # err by at most K * 2^-24 * sum|terms| (~3e-5 relative for K = 64; tensor cores
    # round their sums differently, within the same bound)
    want = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=K * 2.25 * 2.0 ** -24 * 8)


@pytest.mark.parametrize("M, N, K, warps", [(16, 16, 16, None), (32, 48, 64, None),
                                            (48, 64, 32, 2)])
def test_wmma_matmul_matches_numpy(M, N, K, warps):
    s, args = _wmma_matmul(M, N, K, warps)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert src.startswith("#include <mma.h>\n#include <cuda_fp16.h>\n")
    assert "nvcuda::wmma::mma_sync(fc, fa, fb, fc);" in src
    assert "te_wmma_16x16((C + " in src and f", {N}, (A + " in src
    # one warp per tile: threadIdx.x is the warp's lanes, threadIdx.y the warps
    assert f"__launch_bounds__({32 * (warps or 1)})" in src
    _check(mod, M, N, K)


def test_warp_lanes_must_be_32():
    M = N = K = 32
    s, (A, B, C) = _wmma_matmul(M, N, K)
    # a second stage in the kernel binding threadIdx.x to 64 threads
    AS = s.cache_read(A, "shared", [C])
    s[AS].compute_at(s[C], s[C].leaf_iter_vars[1])
    fused = s[AS].fuse(*s[AS].op.axis)
    _, tx = s[AS].split(fused, 64)
    s[AS].bind(tx, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"^te.build: target 'cuda': kernel 'main_kernel0' "
                       r"calls te_wmma_16x16 \(warp-collective\), so threadIdx.x must have "
                       r"extent 32 \(one warp's lanes\), got 64$"):
        te.build(s, [A, B, C], target="cuda")


def test_shared_fill_on_the_warp_lanes_is_accepted():
    M, N, K = 32, 32, 48
    s, (A, B, C) = _wmma_matmul(M, N, K)
    AS = s.cache_read(A, "shared", [C])
    s[AS].compute_at(s[C], s[C].leaf_iter_vars[1])
    fused = s[AS].fuse(*s[AS].op.axis)
    _, tx = s[AS].split(fused, 32)
    s[AS].bind(tx, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, B, C], target="cuda")
    src = mod.get_source()
    # wmma's pointers must be 256-bit aligned: the array is, tiles start at multiples of 16
    assert "__shared__ __align__(32) half A_shared[768];" in src
    assert "(A_shared + 0), 48" in src
    _check(mod, M, N, K)


@pytest.mark.parametrize("k", [0, 24, 16.0, True])
def test_intrinsic_k_must_be_a_multiple_of_16(k):
    with pytest.raises(te.ComputeError, match=r"^te.wmma_matmul_intrin: k must be a positive "
                       rf"multiple of 16, got {k!r}$"):
        te.wmma_matmul_intrin(k)


def test_intrinsic_k_must_cover_the_reduction_inside_the_tiles():
    s, args = _wmma_matmul(32, 32, 64, intrin_k=32)
    with pytest.raises(te.LoweringError, match=r"loop 'k' \(of axis 'k'\) runs 64 iterations "
                       r"but intrinsic 'wmma_16x16x32' axis 'k' has 32"):
        te.build(s, args, target="cuda")


@needs_nvcc
def test_ptx_for_sm80_uses_the_tensor_cores():
    s, args = _wmma_matmul(32, 48, 64, warps=3)
    ptx = te.build(s, args, target="cuda -arch=sm_80").get_source("ptx")
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in ptx
    assert "wmma.load.a.sync.aligned.row.m16n16k16" in ptx
    assert "wmma.store.d.sync.aligned.row.m16n16k16" in ptx


@pytest.mark.parametrize("M, N", [(40, 32), (32, 40)])
def test_sizes_not_multiples_of_16_are_refused(M, N):
    s, args = _wmma_matmul(M, N, 32)
    with pytest.raises(te.LoweringError, match=r"^tensorize on stage 'C' at loop 'i.inner': "
                       r"the loops need a bounds guard .*: split by factors that divide the "
                       r"extents$"):
        te.build(s, args, target="cuda")
