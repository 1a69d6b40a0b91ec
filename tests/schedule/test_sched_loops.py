"""Loop primitives against numpy: split, tile, fuse, reorder, vectorize, unroll, parallel.

Odd sizes and factors that do not divide the extents, random non-zero inputs, outputs
pre-filled with NaN so that an unwritten element fails. Imports te, numpy and helpers.
"""
import numpy as np
import pytest

import te
from helpers import check_schedule

M, N = 13, 11


def _add2d():
    A = te.placeholder((M, N), name="A")
    B = te.placeholder((M, N), name="B")
    C = te.compute((M, N), lambda i, j: A[i, j] * 2.0 + B[i, j], name="C")
    return A, B, C


def _ref_add2d(a, b):
    return a * 2 + b


def _vec(n=37):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * A[i] + 1.0, name="B")
    return A, B


def _matmul(m=17, n=19, k=23):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def _mm(a, b):
    return a @ b


@pytest.mark.parametrize("factor", [1, 3, 8, 37, 40])
def test_split_factor(factor):
    A, B = _vec()
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=factor)
    assert int(inner.dom.extent.value) == factor
    check_schedule(s, [A], [B], lambda a: a * a + 1)


@pytest.mark.parametrize("nparts", [1, 4, 37, 50])
def test_split_nparts(nparts):
    A, B = _vec()
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], nparts=nparts)
    assert int(outer.dom.extent.value) == nparts
    check_schedule(s, [A], [B], lambda a: a * a + 1)


def test_split_twice_nested():
    A, B = _vec(53)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=10)
    xio, xii = s[B].split(xi, factor=3)
    s[B].split(xo, nparts=2)
    check_schedule(s, [A], [B], lambda a: a * a + 1)


def test_split_reduction_axis_non_dividing():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=5)
    s[C].reorder(ko, C.op.axis[0], ki, C.op.axis[1])
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


@pytest.mark.parametrize("fx,fy", [(4, 3), (1, 11), (16, 16), (5, 2)])
def test_tile(fx, fy):
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], fx, fy)
    assert s[C].leaf_iter_vars == [xo, yo, xi, yi]
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_tile_matmul():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    s[C].tile(C.op.axis[0], C.op.axis[1], 4, 6)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


def test_fuse_two_axes():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    f = s[C].fuse(C.op.axis[0], C.op.axis[1])
    assert s[C].leaf_iter_vars == [f]
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_fuse_three_axes_then_split():
    A = te.placeholder((3, 5, 7), name="A")
    B = te.compute((3, 5, 7), lambda i, j, k: A[i, j, k] + i * 100 + j * 10 + k, name="B")
    s = te.create_schedule(B.op)
    f = s[B].fuse(*B.op.axis)
    fo, fi = s[B].split(f, factor=4)  # 105 is not a multiple of 4
    s[B].unroll(fi)
    ii, jj, kk = np.meshgrid(np.arange(3), np.arange(5), np.arange(7), indexing="ij")
    check_schedule(s, [A], [B], lambda a: a + ii * 100 + jj * 10 + kk)


def test_fuse_split_axes():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    f = s[C].fuse(xi, C.op.axis[1])
    s[C].split(f, factor=7)
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_reorder_swaps_loops():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(j, i)
    assert s[C].leaf_iter_vars == [j, i]
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_reorder_matmul_reduction_outermost():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(k, j, i)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


def test_reorder_subset_keeps_other_positions():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, ii = s[C].split(i, 4)
    s[C].reorder(k, io)  # io was first, k last: they swap, j and ii stay
    assert s[C].leaf_iter_vars == [k, ii, j, io]
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


@pytest.mark.parametrize("n,factor", [(64, 8), (37, 8), (5, 8), (21, 4)])
def test_vectorize_inner(n, factor):
    A, B = _vec(n)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=factor)
    s[B].vectorize(xi)
    check_schedule(s, [A], [B], lambda a: a * a + 1)


def test_vectorize_whole_axis_odd_extent():
    A, B = _vec(7)
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    check_schedule(s, [A], [B], lambda a: a * a + 1)


def test_vectorize_fused_axis():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=2)
    f = s[C].fuse(xi, C.op.axis[1])  # extent 22: j is not contiguous across the fuse
    s[C].vectorize(f)
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_vectorize_fused_then_split():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=8)  # 143 = 17 * 8 + 7: a tail
    s[C].vectorize(fi)
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_vectorize_matmul_inner_data_axis():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = s[C].split(j, 8)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


@pytest.mark.parametrize("factor", [1, 3, 4])
def test_unroll(factor):
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor)
    s[C].unroll(ki)
    jo, ji = s[C].split(C.op.axis[1], 5)
    s[C].unroll(ji)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


def test_unroll_removes_the_loop():
    A, B = _vec(12)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 4)
    s[B].unroll(xi)
    text = str(te.lower(s, [A, B]))
    assert "for (i.inner" not in text
    assert text.count("B[(i.outer*4) + 3]") == 1
    check_schedule(s, [A], [B], lambda a: a * a + 1)


def test_parallel_outer():
    A, B, C = _matmul(33, 19, 23)
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], 5)
    s[C].parallel(io)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)


def test_parallel_fused():
    A, B, C = _add2d()
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=16)
    s[C].parallel(fo)
    s[C].vectorize(fi)
    check_schedule(s, [A, B], [C], _ref_add2d)


def test_parallel_shows_in_ir():
    A, B = _vec()
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    assert "parallel for (i, 0, 37) {" in str(te.lower(s, [A, B]))


def test_all_loop_primitives_together():
    A, B, C = _matmul(29, 31, 13)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[C].unroll(ki)
    s[C].vectorize(ji)
    check_schedule(s, [A, B], [C], _mm, rtol=1e-4)
