"""Placement and dataflow primitives against numpy: compute_at / inline / root, cache_read,
cache_write, rfactor, storage_align, pragma and bind.

Odd sizes, stencil producers with boundary conditions, two-level attachment chains.
Imports te, numpy and helpers.
"""
import numpy as np
import pytest

import te
from helpers import check_schedule

N = 29


def _stencil_chain(n=N):
    """A -> B (3-point stencil with if_then_else boundary) -> C."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i > 0, A[i - 1], 0.0) + A[i]
                   + te.if_then_else(i < n - 1, A[i + 1], 0.0), name="B")
    C = te.compute((n,), lambda i: B[i] * 2.0 + 1.0, name="C")
    return A, B, C


def _ref_stencil(a):
    p = np.pad(a, 1)
    return (p[:-2] + p[1:-1] + p[2:]) * 2 + 1


def _stencil2(n=N):
    """A -> B (elementwise) -> C (stencil over B, clamped at the ends)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((n,), lambda i: te.if_then_else(i > 0, B[i - 1], B[i]) + B[i]
                   + te.if_then_else(i < n - 1, B[i + 1], B[i]), name="C")
    return A, B, C


def _ref_stencil2(a):
    b = a * 3
    left = np.concatenate([b[:1], b[:-1]])
    right = np.concatenate([b[1:], b[-1:]])
    return left + b + right


def test_stencil_root():
    A, B, C = _stencil_chain()
    s = te.create_schedule(C.op)
    check_schedule(s, [A], [C], _ref_stencil)


@pytest.mark.parametrize("factor", [1, 4, 7, 32])
def test_stencil_producer_compute_at_split(factor):
    A, B, C = _stencil2()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor)
    s[B].compute_at(s[C], xo)
    check_schedule(s, [A], [C], _ref_stencil2)


def test_stencil_producer_compute_at_inner():
    A, B, C = _stencil2()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 6)
    s[B].compute_at(s[C], xi)
    check_schedule(s, [A], [C], _ref_stencil2)


def test_stencil_with_boundary_compute_at():
    A, B, C = _stencil_chain()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 5)
    s[B].compute_at(s[C], xo)
    check_schedule(s, [A], [C], _ref_stencil)


def _chain2d(m=11, n=13):
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((m, n), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((m, n), lambda i, j: C[i, j] - A[i, j], name="D")
    return A, B, C, D


def _ref_chain2d(a):
    return (a + 1) * 2 - a


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_compute_at_levels(level):
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    xo, yo, xi, yi = s[D].tile(D.op.axis[0], D.op.axis[1], 4, 5)
    s[C].compute_at(s[D], [xo, yo, xi, yi][level])
    check_schedule(s, [A], [D], _ref_chain2d)


@pytest.mark.parametrize("b_level", [0, 1])
def test_two_level_chain(b_level):
    """C at D, and B at C: a producer attached inside an attached stage."""
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    xo, yo, xi, yi = s[D].tile(D.op.axis[0], D.op.axis[1], 3, 4)
    s[C].compute_at(s[D], yo)
    s[B].compute_at(s[C], s[C].op.axis[b_level])
    check_schedule(s, [A], [D], _ref_chain2d)


def test_two_level_stencil_chain():
    """A1 -> B (stencil) -> C (stencil) -> D, each attached into its consumer."""
    n = 23
    A = te.placeholder((n,), name="A")
    A1 = te.compute((n,), lambda i: A[i] + 1.0, name="A1")
    B = te.compute((n,), lambda i: A1[i] + te.if_then_else(i > 0, A1[i - 1], 0.0), name="B")
    C = te.compute((n,), lambda i: B[i] + te.if_then_else(i < n - 1, B[i + 1], 0.0), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 4)
    s[B].compute_at(s[C], xo)
    s[A1].compute_at(s[B], s[B].op.axis[0])

    def ref(a):
        a1 = a + 1
        b = a1 + np.concatenate([[0], a1[:-1]])
        return b + np.concatenate([b[1:], [0]])
    check_schedule(s, [A], [C], ref)


def test_compute_at_matmul_producer():
    m, n, k = 9, 14, 11
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((m, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], 4)
    s[C].compute_at(s[D], xo)
    check_schedule(s, [A, B], [D], lambda a, b: np.maximum(a @ b, 0), rtol=1e-4)


def test_compute_inline_chain():
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    text = str(te.lower(s, [A, D]))
    assert "allocate" not in text
    check_schedule(s, [A], [D], _ref_chain2d)


def test_compute_inline_stencil():
    A, B, C = _stencil_chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    check_schedule(s, [A], [C], _ref_stencil)


def test_compute_root_undoes_compute_at():
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    s[C].compute_root()
    assert s[C].attach_type == "root"
    text = str(te.lower(s, [A, D]))
    assert "allocate C[float32 * 143]" in text
    check_schedule(s, [A], [D], _ref_chain2d)


def _matmul(m=13, n=17, k=19):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def test_cache_read_root():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    assert AA.name == "A.local"
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=1e-4)


def test_cache_read_attached():
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 6)
    s[AA].compute_at(s[C], jo)
    s[BB].compute_at(s[C], io)
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=1e-4)


def test_cache_read_of_intermediate():
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    CC = s.cache_read(C, "local", [D])
    xo, xi = s[D].split(D.op.axis[0], 3)
    s[CC].compute_at(s[D], xo)
    check_schedule(s, [A], [D], _ref_chain2d)


@pytest.mark.parametrize("split_k", [False, True])
def test_cache_write_compute_at(split_k):
    A, B, C = _matmul()
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], jo)
    if split_k:
        ko, ki = s[CC].split(s[CC].op.reduce_axis[0], 4)
        x, y = s[CC].op.axis
        s[CC].reorder(ko, ki, x, y)
        s[CC].vectorize(y)
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=1e-4)


def _rowsum(m=11, k=37):
    A = te.placeholder((m, k), name="A")
    r = te.reduce_axis((0, k), "k")
    R = te.compute((m,), lambda i: te.sum(A[i, r], axis=r), name="R")
    return A, R


def test_rfactor_without_split():
    A, R = _rowsum()
    s = te.create_schedule(R.op)
    RF = s.rfactor(R, R.op.reduce_axis[0])
    assert RF.shape[0].value == 37
    check_schedule(s, [A], [R], lambda a: a.sum(1), rtol=1e-4)


@pytest.mark.parametrize("factor", [4, 5, 8])
def test_rfactor_after_split(factor):
    A, R = _rowsum()
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(R.op.reduce_axis[0], factor)
    s.rfactor(R, ki)
    check_schedule(s, [A], [R], lambda a: a.sum(1), rtol=1e-4)


def test_rfactor_outer_axis_parallel():
    A, R = _rowsum(7, 53)
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(R.op.reduce_axis[0], nparts=4)
    RF = s.rfactor(R, ko)
    s[RF].parallel(s[RF].op.axis[0])
    check_schedule(s, [A], [R], lambda a: a.sum(1), rtol=1e-4)


def test_rfactor_factor_axis_last_and_max():
    m, k = 6, 29
    A = te.placeholder((m, k), name="A")
    r = te.reduce_axis((0, k), "k")
    R = te.compute((m,), lambda i: te.max(A[i, r], axis=r), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(r, 8)
    RF = s.rfactor(R, ki, factor_axis=1)
    assert [int(d.value) for d in RF.shape] == [6, 8]
    s[RF].compute_at(s[R], R.op.axis[0])
    check_schedule(s, [A], [R], lambda a: a.max(1))


def test_storage_align_pads_rows():
    A = te.placeholder((9, 10), name="A")
    B = te.compute((9, 10), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((9, 10), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 16, 3)
    text = str(te.lower(s, [A, C]))
    assert "B[(i*19) + j]" in text  # the smallest stride >= 10 with stride % 16 == 3
    check_schedule(s, [A], [C], lambda a: (a + 1) * 2)


def test_storage_align_attached():
    A = te.placeholder((7, 5, 6), name="A")
    B = te.compute((7, 5, 6), lambda i, j, k: A[i, j, k] * A[i, j, k], name="B")
    C = te.compute((7, 5, 6), lambda i, j, k: B[i, j, k] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[1], 8, 0)
    s[B].compute_at(s[C], C.op.axis[0])
    check_schedule(s, [A], [C], lambda a: a * a + 1)


def test_pragma_printed():
    A = te.placeholder((32,), name="A")
    B = te.compute((32,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 8)
    s[B].pragma(xo, "auto_unroll_max_step", 16)
    s[B].pragma(xi, "unroll_explicit")
    text = str(te.lower(s, [A, B]))
    assert "// pragma auto_unroll_max_step = 16\n  for (i.outer, 0, 4) {" in text
    assert "pragma unroll_explicit" in text
    check_schedule(s, [A], [B], lambda a: a * 2)


def _bound():
    A = te.placeholder((37,), name="A")
    B = te.compute((37,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], 8)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    return s, A, B


def test_bind_lowers_to_thread_loops():
    s, A, B = _bound()
    text = str(te.lower(s, [A, B]))
    assert "for (i.outer: blockIdx.x, 0, 5) {" in text
    assert "for (i.inner: threadIdx.x, 0, 8) {" in text


def test_bind_build_llvm_raises():
    s, A, B = _bound()
    with pytest.raises(te.BuildError, match=r"loop 'i.outer' is bound to thread axis "
                                            r"'blockIdx.x'; thread-bound loops need target "
                                            r"'cuda'"):
        te.build(s, [A, B], target="llvm")


@pytest.mark.parametrize("c_place", ["at_inner", "inline"])
def test_transitive_compute_at(c_place):
    """B is attached to D, which reads it only through C (attached deeper, or inlined)."""
    A, B, C, D = _chain2d()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[D], D.op.axis[0])
    if c_place == "inline":
        s[C].compute_inline()
    else:
        s[C].compute_at(s[D], D.op.axis[1])
    check_schedule(s, [A], [D], _ref_chain2d)
