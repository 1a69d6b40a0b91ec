"""Target 'cuda': vectorized loops of 2 or 4 lanes with contiguous, aligned accesses become
vector loads and stores (float4, float2, int4, double2; `.v4` / `.v2` in nvcc's PTX), the
arithmetic lane by lane; a tail check runs the vector form where every lane passes it and
the scalar loop elsewhere. Accesses that are strided or not aligned to the lane count stay
scalar. Checked against numpy in the emulator, on sizes with tails.
"""
import shutil

import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")


def _elementwise(n, lanes, dtype, fn, in_size=None, threads=32):
    A = te.placeholder((in_size or n,), name="A", dtype=dtype)
    B = te.placeholder((in_size or n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: fn(A, B, i), name="C")
    s = te.create_schedule(C.op)
    o, v = s[C].split(C.op.axis[0], factor=lanes)
    bo, to = s[C].split(o, factor=threads)
    s[C].bind(bo, te.thread_axis("blockIdx.x"))
    s[C].bind(to, te.thread_axis("threadIdx.x"))
    s[C].vectorize(v)
    return te.build(s, [A, B, C], target="cuda")


@pytest.mark.parametrize("n, lanes, dtype, vtype", [
    (4 * 97, 4, "float32", "float4"),   # a tail of threads, none of lanes
    (4 * 97 + 3, 4, "float32", "float4"),   # the last thread's vector is partial
    (2 * 45 + 1, 2, "float64", "double2"),
    (4 * 33 + 2, 4, "int32", "int4"),
])
def test_vector_loads_and_stores_match_numpy(n, lanes, dtype, vtype):
    mod = _elementwise(n, lanes, dtype, lambda A, B, i: A[i] * B[i] + A[i])
    src = mod.get_source()
    assert src.count(f"const {vtype} ") == 2 and f"*({vtype}*)(C + " in src
    a, b = rand_array((n,), dtype), rand_array((n,), dtype)
    (c,) = run_emulated(mod, [a, b], [(n,)], [dtype])
    np.testing.assert_allclose(c, a * b + a, rtol=1e-6)


@needs_nvcc
def test_the_ptx_moves_four_floats_at_once():
    ptx = _elementwise(4 * 97, 4, "float32", lambda A, B, i: A[i] - B[i]).get_source("ptx")
    assert ptx.count("ld.global.nc.v4.f32") == 2 and ptx.count("st.global.v4.f32") == 1


@pytest.mark.parametrize("fn, in_size", [
    (lambda A, B, i: A[i * 2] + B[i], 2 * 4 * 37),   # strided
    (lambda A, B, i: A[i + 1] + B[i], 4 * 37 + 1),   # not aligned to 4 lanes
])
def test_strided_or_unaligned_accesses_stay_scalar(fn, in_size):
    n = 4 * 37
    mod = _elementwise(n, 4, "float32", fn, in_size)
    assert "float4" not in mod.get_source()
    a, b = rand_array((in_size,)), rand_array((in_size,))
    (c,) = run_emulated(mod, [a, b], [(n,)], ["float32"])
    want = a[:2 * n:2] + b[:n] if in_size == 2 * n else a[1:n + 1] + b[:n]
    np.testing.assert_allclose(c, want, rtol=1e-6)


def test_a_lane_number_used_as_a_value_and_a_broadcast_operand():
    n = 4 * 21
    mod = _elementwise(n, 4, "float32",
                       lambda A, B, i: A[i] * B[0] + (i % 4).astype("float32"), threads=8)
    assert "float4" in mod.get_source()
    a, b = rand_array((n,)), rand_array((n,))
    (c,) = run_emulated(mod, [a, b], [(n,)], ["float32"])
    np.testing.assert_allclose(c, a * b[0] + np.arange(n) % 4, rtol=1e-6)


def test_a_shared_fill_in_vectors_is_aligned():
    n = 4 * 32 * 5 + 4   # six blocks, the last with one thread's vector
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 3, name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    bo, rest = s[C].split(C.op.axis[0], factor=128)
    to, v = s[C].split(rest, factor=4)
    s[C].bind(bo, te.thread_axis("blockIdx.x"))
    s[C].bind(to, te.thread_axis("threadIdx.x"))
    s[C].vectorize(v)
    s[AS].compute_at(s[C], bo)
    fo, fv = s[AS].split(AS.op.axis[0], factor=4)
    s[AS].bind(fo, te.thread_axis("threadIdx.x"))
    s[AS].vectorize(fv)
    mod = te.build(s, [A, C], target="cuda")
    src = mod.get_source()
    assert "__shared__ __align__(16) float A_shared[128];" in src
    assert "*(float4*)(A_shared + " in src and "*(const float4*)(A_shared + " in src
    a = rand_array((n,))
    (c,) = run_emulated(mod, [a], [(n,)], ["float32"])
    np.testing.assert_allclose(c, a * 3, rtol=1e-6)


def test_a_load_only_a_condition_makes_stays_scalar():
    # a padded read (opt_conv_cuda's shared fill): the vector load of A[i - 4] would read
    # before A for i < 4, where the scalar code never loads it
    n = 4 * 32 * 3
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: te.if_then_else(i >= 4, A[i - 4], 0.0) + 1, name="C")
    D = te.compute((n,), lambda i: te.if_then_else(A[i] > 0, A[i], 0.0), name="D")
    s = te.create_schedule([C.op, D.op])
    for out in (C, D):
        o, v = s[out].split(out.op.axis[0], factor=4)
        bo, to = s[out].split(o, factor=32)
        s[out].bind(bo, te.thread_axis("blockIdx.x"))
        s[out].bind(to, te.thread_axis("threadIdx.x"))
        s[out].vectorize(v)
    mod = te.build(s, [A, C, D], target="cuda")
    src = mod.get_source()
    # C's load stays per lane; D (a ReLU) loads A[i] unconditionally, in vectors
    assert src.count("*(const float4*)(A + ") == 1
    assert "*(float4*)(C + " not in src and "*(float4*)(D + " in src
    a = rand_array((n,))
    c, d = run_emulated(mod, [a], [(n,), (n,)], ["float32", "float32"])
    np.testing.assert_allclose(c, np.concatenate([np.zeros(4, "float32"), a[:-4]]) + 1,
                               rtol=1e-6)
    np.testing.assert_allclose(d, np.maximum(a, 0), rtol=1e-6)
