"""A tensor-core GEMM accumulating in registers (TVM's 'wmma.accumulator' scope): a warp's
C tiles cached in accumulator fragments (cache_write at the warp's loop), declared and
zeroed before the K-chunk loop, advanced by te.wmma_matmul_intrin(chunk, accumulator=True)
per chunk and stored once after it by te.wmma_store_intrin(). Checked against numpy in the
CUDA emulator and, where nvcc is on PATH, compiled for sm_80 and sm_90 with ptxas
reporting no spills and the PTX loading no accumulator. Not yet run on a GPU.
"""
import re

import numpy as np
import pytest
from test_cuda_wmma_gemm import CASES, _check, _matmul, needs_nvcc, wmma_gemm

import te


def _kernel_lines(src):
    return [line.strip() for line in src[src.index("__global__"):].splitlines()]


@pytest.mark.parametrize("M, N, K, block, warps, chunk", CASES)
def test_fragment_gemm_matches_numpy(M, N, K, block, warps, chunk):
    s, args = wmma_gemm(M, N, K, block, warps, chunk, fragments=True)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    tiles = block[0] * block[1] // (warps[0] * warps[1])   # per warp
    lines = _kernel_lines(src)
    loop = next(k for k, line in enumerate(lines) if line.startswith("for (int k_outer"))
    # the warp's fragments declared and zeroed once, before the chunk loop
    assert lines.index(f"te_wmma_acc C_wmma_accumulator[{tiles}];") < loop
    assert [x for x in lines[:loop] if x.startswith("te_wmma_fill_16x16(")] == \
        [f"te_wmma_fill_16x16(C_wmma_accumulator[{t}]);" for t in range(tiles)]
    # in the loop only A/B chunks and mma on the fragments: C is neither loaded nor stored
    end = loop + next(k for k, line in enumerate(lines[loop:]) if line.startswith(
        "te_wmma_store_16x16("))
    inside = "\n".join(lines[loop:end])
    assert inside.count("te_wmma_mma_16x16(C_wmma_accumulator[") == tiles
    assert not re.search(r"\bC\b", inside) and "te_wmma_update" not in src
    # each C tile stored once, after the loop (the source holds the helpers it calls)
    assert src.count("store_matrix_sync(") == 1   # in te_wmma_store_16x16 alone
    assert "load_matrix_sync(fc" not in src       # no accumulator loaded from memory
    assert [x.split(", ")[-1] for x in lines if x.startswith("te_wmma_store_16x16(")] == \
        [f"C_wmma_accumulator[{t}]);" for t in range(tiles)]
    _check(mod, M, N, K, M * N + K)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("M, N, K, block, warps, chunk", CASES)
def test_fragment_gemm_compiles_without_spills(arch, M, N, K, block, warps, chunk):
    s, args = wmma_gemm(M, N, K, block, warps, chunk, fragments=True)
    mod = te.build(s, args, target=f"cuda -arch={arch}")
    ptx = mod.get_source("ptx")
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in ptx
    # the accumulators live in registers: never loaded, stored once per tile
    assert "wmma.load.c" not in ptx and "ld.local" not in ptx and "st.local" not in ptx
    tiles = block[0] * block[1] // (warps[0] * warps[1])
    assert len(re.findall(r"wmma\.store\.d\.sync", ptx)) == tiles
    used = mod.kernels[0].resources
    assert used.arch == arch and used.spill_stores == used.spill_loads == 0


def test_fragment_gemm_with_a_batch_axis_and_global_operands():
    # no shared stages; a batch axis on blockIdx.z
    Bt, M, N, K = 2, 32, 48, 64
    A = te.placeholder((Bt, M, K), name="A", dtype="float16")
    B = te.placeholder((Bt, K, N), name="B", dtype="float16")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((Bt, M, N), lambda b, i, j: te.sum(
        A[b, i, k].astype("float32") * B[b, k, j].astype("float32"), axis=k), name="C")
    from te.autotune.wmma_space import wmma_schedule
    s = wmma_schedule(C.op, (1, 3), (2, 1), 32, shared=False, fragments=True)
    mod = te.build(s, [A, B, C], target="cuda")
    assert "te_wmma_acc C_wmma_accumulator[2];" in mod.get_source()
    from helpers import rand_array, run_emulated
    rng = np.random.default_rng(5)
    a, b = rand_array((Bt, M, K), "float16", rng), rand_array((Bt, K, N), "float16", rng)
    (c,) = run_emulated(mod, [a, b], [(Bt, M, N)], ["float32"])
    want = np.matmul(a.astype("float64"), b.astype("float64"))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=K * 2.25 * 2.0 ** -24 * 8)


def test_fragments_refuse_plain_access():
    # the copy-out left untensorized: a thread cannot address a fragment's elements
    A, B, C = _matmul(32, 32, 32)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "wmma.accumulator")
    i, j = C.op.axis
    io, ii = s[C].split(i, 16)
    s[C].bind(io, te.thread_axis("threadIdx.y"))
    s[CL].compute_at(s[C], io)
    ci, cj = CL.op.axis
    cio, cii = s[CL].split(cj, 16)
    s[CL].reorder(cio, ci, cii)
    s[CL].tensorize(ci, te.wmma_matmul_intrin(32, accumulator=True))
    with pytest.raises(te.BuildError, match=r"stage 'C\.wmma\.accumulator' has scope "
                       r"'wmma\.accumulator' \(wmma fragments, whose elements a thread "
                       r"cannot address\): only te\.wmma_matmul_intrin\(k, "
                       r"accumulator=True\) and te\.wmma_store_intrin\(\) may access it"):
        te.build(s, [A, B, C], target="cuda")


def test_plain_intrinsic_refuses_fragments():
    A, B, C = _matmul(32, 32, 32)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "wmma.accumulator")
    i, j = C.op.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, te.thread_axis("threadIdx.y"))
    s[C].tensorize(ii, te.wmma_store_intrin())
    s[CL].compute_at(s[C], jo)
    s[CL].tensorize(CL.op.axis[0], te.wmma_matmul_intrin(32))
    with pytest.raises(te.BuildError, match=r"te_wmma_16x16 takes buffer "
                       r"'C\.wmma\.accumulator' \(scope 'wmma\.accumulator'\) where it needs "
                       r"memory"):
        te.build(s, [A, B, C], target="cuda")
