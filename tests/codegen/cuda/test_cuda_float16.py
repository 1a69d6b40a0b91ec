"""float16 on target 'cuda': `half` storage, half arithmetic (cuda_fp16.h's intrinsics),
casts both ways, a matmul of half inputs accumulating in float32, vectorized half2 access.
Checked against numpy in the CUDA emulator (runtime/cuda_emulator_half.py emulates `half`
bit for bit) and, where nvcc is on PATH, in the PTX for sm_80.
"""
import re
import shutil

import numpy as np
import pytest
from helpers import bind, rand_array, run_emulated, shared_matmul

import te

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")
H = np.float16


def _elementwise(n):
    A = te.placeholder((n,), name="A", dtype="float16")
    B = te.placeholder((n,), name="B", dtype="float16")
    C = te.compute((n,), lambda i: te.max(A[i] * B[i] - A[i] / B[i] + 0.3, te.exp(A[i]))
                   + te.if_then_else(A[i] > B[i], A[i], B[i] * 2), name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 32)
    return s, [A, B, C]


def _elementwise_want(a, b):
    # numpy's float16 arithmetic rounds every operation to half, as CUDA's half
    # intrinsics do; np.exp on float16 computes in float32 and rounds once, as the kernel
    return np.maximum(a * b - a / b + H(0.3), np.exp(a)) + np.where(a > b, a, b * H(2))


@pytest.mark.parametrize("n", [1, 67, 300])
def test_elementwise_half_arithmetic_matches_numpy_bit_for_bit(n):
    s, args = _elementwise(n)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert src.startswith("#include <cuda_fp16.h>\n")
    assert "const half* __restrict__ A" in src and "half* __restrict__ C" in src
    for name in ("__hmul(", "__hsub(", "__hdiv(", "__hadd(", "__hmax(", "__hgt(",
                 "__float2half(expf(__half2float("):
        assert name in src, name
    a, b = rand_array((n,), "float16"), rand_array((n,), "float16")
    (c,) = run_emulated(mod, [a, b], [(n,)], ["float16"])
    assert c.dtype == np.float16
    # the emulator rounds as the GPU's half instructions (round to nearest even); exact. On
    # a GPU, ptxas may fuse a mul and an add into one fma (one rounding less): 1 ulp there.
    np.testing.assert_array_equal(c, _elementwise_want(a, b))


def _cast_chain(n):
    A = te.placeholder((n,), name="A", dtype="float32")
    D = te.placeholder((n,), name="D", dtype="float64")
    I = te.placeholder((n,), name="I", dtype="int32")
    H16 = te.compute((n,), lambda i: A[i].astype("float16") + D[i].astype("float16")
                     + I[i].astype("float16"), name="H16")
    F = te.compute((n,), lambda i: H16[i].astype("float32") * 3, name="F")
    G = te.compute((n,), lambda i: H16[i].astype("float64"), name="G")
    J = te.compute((n,), lambda i: H16[i].astype("int32"), name="J")
    K = te.compute((n,), lambda i: H16[i].astype("bool"), name="K")
    s = te.create_schedule([F.op, G.op, J.op, K.op])
    for T in (H16, F, G, J, K):
        bind(s, T, T.op.axis[0], 64)
    return s, [A, D, I, F, G, J, K], H16


def test_casts_between_half_and_float_double_int_bool():
    n = 131
    s, args, _ = _cast_chain(n)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    for name in ("__float2half(", "__double2half(", "__float2half((float)", "__half2float("):
        assert name in src, name
    rng = np.random.default_rng(7)
    # values where the conversions' rounding shows: float32 and float64 off the half grid,
    # ties (1 + 2^-11 is halfway between two halves: even wins), the overflow to inf,
    # subnormal halves, and integers beyond 2048 (not all of them are halves)
    a = (rng.standard_normal(n) * 100).astype("float32")
    a[:6] = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 70000.0, 65519.0, 3e-6, -2.0 ** -20]
    d = rng.standard_normal(n) * 10
    d[:3] = [1 + 2.0 ** -11 + 2.0 ** -40, -0.1, 1e-7]
    i = rng.integers(-5000, 5000, n).astype("int32")
    outs = run_emulated(mod, [a, d, i], [(n,)] * 4, ["float32", "float64", "int32", "bool"])
    with np.errstate(over="ignore", invalid="ignore"):
        h = a.astype(H) + d.astype(H) + i.astype(H)   # each conversion rounds once
        want = [h.astype("float32") * 3, h.astype("float64"), h.astype("int32"),
                h.astype(bool)]
    finite = np.isfinite(h)
    assert not finite[2]   # 70000 rounds to inf, as in numpy
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got[finite], w[finite])
    np.testing.assert_array_equal(outs[0][~finite], want[0][~finite])


def _half_matmul(M, N, K, tile=8, k_split=8, accumulate="float32"):
    return shared_matmul(M, N, K, tile, k_split, dtype="float16", accumulate=accumulate)


@pytest.mark.parametrize("M, N, K", [(37, 45, 33), (64, 48, 32)])
def test_matmul_of_half_inputs_accumulates_in_float32(M, N, K):
    s, args = _half_matmul(M, N, K)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert "__shared__ half A_shared[64];" in src   # half tiles: half the shared memory
    assert re.search(r"C_local\[0\] = \(?C_local\[0\] \+ \(__half2float\(A_shared", src)
    a, b = rand_array((M, K), "float16"), rand_array((K, N), "float16")
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    # products of halves are exact in float32 (22 bits); float32 sums of K <= 33 terms of
    # size <= 2.25 carry a rounding error below K * 2^-24 * sum|terms| ~ 1e-4 relative
    want = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_matmul_accumulating_in_half_rounds_every_step():
    M, N, K = 19, 21, 23
    s, args = _half_matmul(M, N, K, accumulate="float16")
    mod = te.build(s, args, target="cuda")
    assert "C_local[0] = __hadd(C_local[0], __hmul(" in mod.get_source()
    a, b = rand_array((M, K), "float16"), rand_array((K, N), "float16")
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float16"])
    want = np.zeros((M, N), H)
    for kk in range(K):   # numpy in the kernel's order: round the product, then the sum
        want = want + np.multiply.outer(a[:, kk], b[kk, :])
    np.testing.assert_array_equal(c, want)


def test_vectorized_half_copy_uses_half2():
    n = 130
    A = te.placeholder((n,), name="A", dtype="float16")
    C = te.compute((n,), lambda i: A[i] * 3, name="C")
    s = te.create_schedule(C.op)
    o, v = s[C].split(C.op.axis[0], factor=2)
    bind(s, C, o, 16)
    s[C].vectorize(v)
    mod = te.build(s, [A, C], target="cuda")
    src = mod.get_source()
    assert "const half2 A_v = *(const half2*)" in src and "*(half2*)(C + " in src
    a = rand_array((n,), "float16")
    (c,) = run_emulated(mod, [a], [(n,)], ["float16"])
    np.testing.assert_array_equal(c, a * H(3))


def test_half_reduction_max_with_negative_infinity_identity():
    n, m = 5, 77
    A = te.placeholder((n, m), name="A", dtype="float16")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C], target="cuda")
    a = rand_array((n, m), "float16")
    a[2] = -np.inf * np.ones(m, H)   # a row of -inf: the identity must not win over it
    (c,) = run_emulated(mod, [a], [(n,)], ["float16"])
    np.testing.assert_array_equal(c, a.max(axis=1))


@needs_nvcc
def test_ptx_for_sm80_holds_half_instructions_and_conversions():
    s, args = _elementwise(67)
    ptx = te.build(s, args, target="cuda -arch=sm_80").get_source("ptx")
    for op in ("mul.f16", "add.f16", "cvt.f32.f16", "cvt.rn.f16.f32", "setp.gt.f16"):
        assert op in ptx, op
    s, args = _half_matmul(64, 48, 32)
    ptx = te.build(s, args, target="cuda -arch=sm_80").get_source("ptx")
    assert "ld.shared.u16" in ptx or "ld.shared.b16" in ptx
    assert "cvt.f32.f16" in ptx and "fma.rn.f32" in ptx


def test_emulated_conversions_round_as_numpy_over_every_half_and_random_floats():
    # every half bit pattern to float32 (exact), and float32 bit patterns, uniform over all
    # exponents, back to half (round to nearest even, overflow to inf, subnormals, NaN)
    n = 1 << 16
    A = te.placeholder((n,), name="A", dtype="float16")
    F = te.placeholder((n,), name="F", dtype="float32")
    W = te.compute((n,), lambda i: A[i].astype("float32"), name="W")
    N = te.compute((n,), lambda i: F[i].astype("float16"), name="N")
    s = te.create_schedule([W.op, N.op])
    for T in (W, N):
        bind(s, T, T.op.axis[0], 256)
    mod = te.build(s, [A, F, W, N], target="cuda")
    halves = np.arange(n, dtype=np.uint16).view(H)
    rng = np.random.default_rng(3)
    floats = rng.integers(0, 2**32, n, dtype=np.uint32).view(np.float32)
    floats[:4] = [65519.99, 65520.0, 2.0 ** -25, 2.0 ** -25 * 3]   # ties at the edges
    wide, narrow = run_emulated(mod, [halves, floats], [(n,), (n,)], ["float32", "float16"])
    np.testing.assert_array_equal(wide, halves.astype(np.float32))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(narrow, floats.astype(H))
