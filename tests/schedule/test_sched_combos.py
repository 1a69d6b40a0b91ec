"""Primitive combinations against numpy: halos through cache_read, producers attached in
vectorized / unrolled / reduction loops, rfactor of fused or offset or conditional
reductions, a tuple reducer (argmax) with rfactor, symbolic reduction extents, int dtypes.

Imports te, numpy and helpers.
"""
import numpy as np
import pytest

import te
from helpers import check_schedule, run_kernel

N = 29


def _stencil():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: te.if_then_else(i > 0, A[i - 1], 0.0) + A[i]
                   + te.if_then_else(i < N - 1, A[i + 1], 0.0), name="B")
    return A, B


def _ref_stencil(a):
    p = np.pad(a, 1)
    return p[:-2] + p[1:-1] + p[2:]


def test_cache_read_halo_attached():
    A, B = _stencil()
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "local", [B])
    xo, xi = s[B].split(B.op.axis[0], 4)
    s[AA].compute_at(s[B], xo)
    assert "allocate A.local[float32 * 6] scope=local" in str(te.lower(s, [A, B]))
    check_schedule(s, [A], [B], _ref_stencil)


def test_vectorized_stencil_with_selects():
    A, B = _stencil()
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 8)
    s[B].vectorize(xi)
    check_schedule(s, [A], [B], _ref_stencil)


def _chain():
    A = te.placeholder((9, 16), name="A")
    B = te.compute((9, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((9, 16), lambda i, j: B[i, j] * 3.0, name="C")
    return A, B, C


@pytest.mark.parametrize("kind", ["vectorize", "unroll", "parallel"])
def test_producer_attached_in_annotated_loop(kind):
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], 8)
    getattr(s[C], kind)(ji)
    s[B].compute_at(s[C], ji)
    check_schedule(s, [A], [C], lambda a: (a + 1) * 3)


def test_producer_attached_in_reduction_loop():
    A = te.placeholder((8, 10), name="A")
    P = te.compute((8, 10), lambda i, j: A[i, j] * A[i, j], name="P")
    k = te.reduce_axis((0, 10), "k")
    R = te.compute((8,), lambda i: te.sum(P[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, 3)
    s[P].compute_at(s[R], ko)
    check_schedule(s, [A], [R], lambda a: (a * a).sum(1), rtol=1e-4)


def test_vectorize_data_axis_inside_reduction():
    A = te.placeholder((9, 12), name="A")
    k = te.reduce_axis((0, 12), "k")
    R = te.compute((9,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    xo, xi = s[R].split(R.op.axis[0], 4)
    s[R].reorder(xo, k, xi)
    s[R].vectorize(xi)
    check_schedule(s, [A], [R], lambda a: a.sum(1), rtol=1e-4)


def test_rfactor_of_fused_reduction_axes_parallel():
    A = te.placeholder((5, 6, 7), name="A")
    k1, k2 = te.reduce_axis((0, 6), "k1"), te.reduce_axis((0, 7), "k2")
    R = te.compute((5,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="R")
    s = te.create_schedule(R.op)
    fo, fi = s[R].split(s[R].fuse(k1, k2), 5)
    RF = s.rfactor(R, fi)
    s[RF].parallel(s[RF].op.axis[0])
    check_schedule(s, [A], [R], lambda a: a.sum((1, 2)), rtol=1e-4)


@pytest.mark.parametrize("which", ["outer", "inner"])
def test_rfactor_reduction_with_lower_bound(which):
    A = te.placeholder((6, 20), name="A")
    k = te.reduce_axis((3, 17), "k")
    R = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, 4)
    s.rfactor(R, ko if which == "outer" else ki)
    check_schedule(s, [A], [R], lambda a: a[:, 3:17].sum(1), rtol=1e-4)


def test_rfactor_with_where():
    A = te.placeholder((6, 20), name="A")
    k = te.reduce_axis((0, 20), "k")
    R = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=k % 3 == 1), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, 7)
    s.rfactor(R, ki)
    check_schedule(s, [A], [R], lambda a: a[:, 1::3].sum(1), rtol=1e-4)


def test_argmax_rfactor():
    m, kk = 7, 29
    A = te.placeholder((m, kk), name="A")
    k = te.reduce_axis((0, kk), "k")
    argmax = te.comm_reducer(
        lambda x, y: (te.if_then_else(x[1] >= y[1], x[0], y[0]),
                      te.if_then_else(x[1] >= y[1], x[1], y[1])),
        lambda a, b: (te.const(-1, a), te.min_value(b)), name="argmax")
    idx, val = te.compute((m,), lambda i: argmax((k, A[i, k]), axis=k), name="AM")
    s = te.create_schedule(idx.op)
    ko, ki = s[idx].split(k, 8)
    s.rfactor(idx, ki)
    mod = te.build(s, [A, idx, val])
    a = np.random.default_rng(5).permutation(m * kk).reshape(m, kk).astype("float32")
    i_out, v_out = np.full(m, -7, "int32"), np.full(m, np.nan, "float32")
    mod(a, i_out, v_out)
    np.testing.assert_array_equal(v_out, a.max(1))
    np.testing.assert_array_equal(i_out, a.argmax(1))


def test_symbolic_reduction_extent_split_rfactor():
    n = te.var("n")
    A = te.placeholder((7, n), name="A")
    k = te.reduce_axis((0, n), "k")
    R = te.compute((7,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, 4)
    s.rfactor(R, ki)
    mod = te.build(s, [A, R])
    for n_ in (1, 5, 16, 33):
        ins, outs = run_kernel(mod, [A], [R], {"n": n_})
        np.testing.assert_allclose(outs[0], ins[0].sum(1), rtol=1e-4, atol=1e-5)


def test_symbolic_stencil_compute_at():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: te.if_then_else(i > 0, B[i - 1], 0.0) + B[i]
                   + te.if_then_else(i < n - 1, B[i + 1], 0.0), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 4)
    s[B].compute_at(s[C], xo)
    mod = te.build(s, [A, C])
    for n_ in (1, 2, 5, 8, 13):
        ins, outs = run_kernel(mod, [A], [C], {"n": n_})
        np.testing.assert_allclose(outs[0], _ref_stencil(ins[0] * 2), rtol=1e-5)


@pytest.mark.parametrize("index,ref", [
    (lambda i: 11 - i, lambda b: b[::-1]),
    (lambda i: i // 3 * 3, lambda b: np.repeat(b[::3], 3)),
    (lambda i: (i + 7) % 12, lambda b: np.roll(b, -7)),
])
def test_compute_at_with_permuted_reads(index, ref):
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((12,), lambda i: B[index(i)], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 5)
    s[B].compute_at(s[C], xo)
    check_schedule(s, [A], [C], lambda a: ref(a * 2))


def test_int32_matmul_vectorized():
    A = te.placeholder((7, 9), dtype="int32", name="A")
    B = te.placeholder((9, 5), dtype="int32", name="B")
    k = te.reduce_axis((0, 9), "k")
    C = te.compute((7, 5), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, 4)
    s[C].reorder(ko, ki, C.op.axis[0], C.op.axis[1])
    s[C].vectorize(C.op.axis[1])
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=0, atol=0)


def test_int8_floordiv_floormod_vectorized():
    A = te.placeholder((9,), dtype="int8", name="A")
    B = te.compute((9,), lambda i: (A[i] * 3) // 2 % 5, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 4)
    s[B].vectorize(xi)
    check_schedule(s, [A], [B], lambda a: ((a * np.int8(3)) // 2) % 5, rtol=0, atol=0)
