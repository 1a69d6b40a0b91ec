"""The classic "optimize GEMM on CPU" chain, written with te's schedule primitives.

Takes sizes (M, N, K); gives CHAIN, an ordered list of (name, builder) where each builder
returns (schedule, [A, B, C]) for C = A @ B in float32, and best_matmul(), the fastest hand
schedule (a register-blocked micro-kernel over packed panels). Each step adds one idea to the
one before it, following TVM's tutorial. Imports te, and llvmlite for the host's vector
width; used by benchmarks/run.py (tutorials/05_optimize_gemm_cpu.ipynb writes the same steps
out in its own cells, for a reader).
"""
from __future__ import annotations

import llvmlite.binding as llvm

import te


def _vector_lanes() -> int:
    """float32 lanes of one vector register on this host (16 with AVX-512, 8 otherwise)."""
    return 16 if llvm.get_host_cpu_features().get("avx512f") else 8


BN = 32  # the block size of the tutorial's blocking steps
# The tutorial splits k by 4 for AVX2, where a 32-float block row is four vectors. With
# AVX-512 the row is two vectors, so each load/store of an accumulator row in the
# cache_write step serves half the FMAs; splitting k by 8 restores the ratio. Measured on a
# Zen 5, 1024^3, 1 thread, ms (blocking / vectorize / permutation / packing / cache_write):
# k by 4: 2644 / 821 / 138 / 123 / 17.8; k by 8: 2702 / 834 / 94 / 58 / 11.3 (numpy 10.1).
# A block of 64 (four zmm) lets LLVM vectorize the scalar blocking step (321 ms), and the
# vectorize step is then no faster. On Zen 4 LLVM vectorized the blocking step's row loop
# with gathers and scatters of C (4.6 s, slower than the baseline) until te's codegen kept
# its vectorizer off loops with strided stores (codegen_llvm._strided_store): 0.32-0.40 s.
KFACTOR = 8 if _vector_lanes() == 16 else 4


def _declare(m: int, n: int, k: int):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C, r


def baseline(m: int, n: int, k: int):
    """Three nested loops, as written."""
    A, B, C, _ = _declare(m, n, k)
    return te.create_schedule(C.op), [A, B, C]


def blocking(m: int, n: int, k: int):
    """BNxBN tiles of C so a tile's rows of B stay in cache; k split by KFACTOR."""
    A, B, C, r = _declare(m, n, k)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(r, factor=KFACTOR)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    return s, [A, B, C]


def vectorize(m: int, n: int, k: int):
    """The innermost, contiguous j loop becomes vector code."""
    A, B, C, r = _declare(m, n, k)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(r, factor=KFACTOR)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].vectorize(ji)
    return s, [A, B, C]


def permutation(m: int, n: int, k: int):
    """Loop order (ko, ii, ki, ji): A[i, k] is reused across a whole vector row of B."""
    A, B, C, r = _declare(m, n, k)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(r, factor=KFACTOR)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    return s, [A, B, C]


def _declare_packed(m: int, n: int, k: int):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    # packedB[x, y, z] = B[y, x*BN + z]: each BN-wide column panel of B is contiguous.
    packedB = te.compute((te.indexdiv(n + BN - 1, BN), k, BN),
                         lambda x, y, z: te.if_then_else(x * BN + z < n, B[y, x * BN + z], 0.0)
                         if n % BN else B[y, x * BN + z], name="packedB")
    C = te.compute((m, n), lambda i, j: te.sum(
        A[i, r] * packedB[te.indexdiv(j, BN), r, te.indexmod(j, BN)], axis=r), name="C")
    return A, B, packedB, C, r


def packing(m: int, n: int, k: int):
    """B is repacked into contiguous BN-wide panels, so the inner loop streams memory."""
    A, B, packedB, C, r = _declare_packed(m, n, k)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(r, factor=KFACTOR)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[packedB].vectorize(packedB.op.axis[2])
    return s, [A, B, C]


def _cache_write_schedule(m: int, n: int, k: int, parallel: bool):
    A, B, packedB, C, r = _declare_packed(m, n, k)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=KFACTOR)
    s[CC].reorder(ko, ci, ki, cj)
    s[CC].unroll(ki)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    s[packedB].vectorize(packedB.op.axis[2])
    if parallel:
        s[C].parallel(io)
        s[packedB].parallel(packedB.op.axis[0])
    return s, [A, B, C]


def cache_write(m: int, n: int, k: int):
    """A BNxBN block accumulates in a local buffer, written to C once; k unrolled by
    KFACTOR."""
    return _cache_write_schedule(m, n, k, parallel=False)


def parallel(m: int, n: int, k: int):
    """Row blocks of C (and panels of packed B) are shared among the threads."""
    return _cache_write_schedule(m, n, k, parallel=True)


CHAIN = [
    ("baseline", baseline),
    ("blocking", blocking),
    ("vectorize", vectorize),
    ("permutation", permutation),
    ("packing", packing),
    ("cache_write", cache_write),
    ("parallel", parallel),
]


def micro_kernel_shape() -> tuple:
    """(MR, NR): rows x columns of the register block. NR float32 lanes per B load: two
    zmm (AVX-512) or four ymm registers; MR*NR/lanes accumulators must fit the register file
    with room for the B vectors and one broadcast."""
    if _vector_lanes() == 16:
        return 8, 32   # 16 zmm accumulators of 32
    return 4, 24       # 12 ymm accumulators of 16


def best_matmul(m: int, n: int, k: int, mc: int = 64):
    """Register-blocked micro-kernel over packed B panels.

    B is packed into NR-wide column panels (zero-padded), C is computed in MRxNR register
    tiles (cache_write local + fully unrolled rows + vector columns, so the accumulators
    stay in registers for the whole k loop), MC rows of A are reused across all panels
    while they sit in L2, and the outer (row block, panel) pairs are shared among threads.
    """
    mr, nr = micro_kernel_shape()
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    # Odd shapes are padded up to whole register tiles (A rows and B panels with zeros), so
    # the micro-kernel never carries a guard; the padded result is cropped at the end.
    mp, panels = -(-m // mr) * mr, -(-n // nr)
    Ap = A if mp == m else te.compute((mp, k), lambda i, y: te.if_then_else(
        i < m, A[te.min(i, m - 1), y], 0.0), name="Apad")
    if n % nr:
        packedB = te.compute((panels, k, nr), lambda x, y, z: te.if_then_else(
            x * nr + z < n, B[y, te.min(x * nr + z, n - 1)], 0.0), name="packedB")
    else:
        packedB = te.compute((panels, k, nr), lambda x, y, z: B[y, x * nr + z], name="packedB")
    padded = mp != m or n % nr
    C = te.compute((mp, panels * nr) if padded else (m, n), lambda i, j: te.sum(
        Ap[i, r] * packedB[te.indexdiv(j, nr), r, te.indexmod(j, nr)], axis=r),
        name="Cpad" if padded else "C")
    out = te.compute((m, n), lambda i, j: C[i, j], name="C") if padded else C
    s = te.create_schedule(out.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], mr, nr)
    ioo, ioi = s[C].split(io, factor=max(1, mc // mr))
    s[C].reorder(ioo, jo, ioi, ii, ji)
    outer = s[C].fuse(ioo, jo)
    s[C].parallel(outer)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], ioi)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    x, y, z = packedB.op.axis
    s[packedB].parallel(x)
    s[packedB].vectorize(z)
    if padded:
        if Ap is not A:
            s[Ap].parallel(Ap.op.axis[0])
        s[out].parallel(out.op.axis[0])
        jo2, ji2 = s[out].split(out.op.axis[1], factor=16)
        s[out].vectorize(ji2)
    return s, [A, B, out]
