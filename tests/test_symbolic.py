"""Symbolic shapes: a kernel built once with te.var sizes runs correctly at many sizes.

Elementwise, matmul and a two-stage chain, scheduled with split / vectorize / parallel /
compute_at, each run at n = 1, 7, 64 and 129; size-variable consistency is checked at call
time. Imports te, numpy and helpers.
"""
import numpy as np
import pytest

import te
from helpers import run_kernel

SIZES = (1, 7, 64, 129)


def _check_sizes(mod, inputs, outputs, ref, size_name="n", rtol=1e-5, **fixed):
    for n in SIZES:
        sizes = {size_name: n, **fixed}
        ins, outs = run_kernel(mod, inputs, outputs, sizes, seed=n)
        np.testing.assert_allclose(outs[0], ref(*ins), rtol=rtol, atol=1e-5,
                                   err_msg=f"at {size_name}={n}")


@pytest.fixture(scope="module")
def elementwise():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * B[i] + A[i], name="C")
    return A, B, C


def test_elementwise_unscheduled(elementwise):
    A, B, C = elementwise
    mod = te.build(te.create_schedule(C.op), [A, B, C])
    _check_sizes(mod, [A, B], [C], lambda a, b: a * b + a)


@pytest.mark.parametrize("factor", [1, 8, 16])
def test_elementwise_split_vectorize_parallel(elementwise, factor):
    A, B, C = elementwise
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    mod = te.build(s, [A, B, C])
    _check_sizes(mod, [A, B], [C], lambda a, b: a * b + a)


def test_elementwise_nparts(elementwise):
    A, B, C = elementwise
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], nparts=3)
    mod = te.build(s, [A, B, C])
    _check_sizes(mod, [A, B], [C], lambda a, b: a * b + a)


@pytest.fixture(scope="module")
def matmul():
    n = te.var("n")
    K, M = 19, 24
    A = te.placeholder((n, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((n, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_matmul_tiled_vectorized(matmul):
    A, B, C = matmul
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    mod = te.build(s, [A, B, C])
    _check_sizes(mod, [A, B], [C], lambda a, b: a @ b, rtol=1e-4)


def test_matmul_all_symbolic():
    n, m, p = te.var("n"), te.var("m"), te.var("p")
    A = te.placeholder((n, p), name="A")
    B = te.placeholder((p, m), name="B")
    k = te.reduce_axis((0, p), "k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], 8)
    s[C].vectorize(ji)
    mod = te.build(s, [A, B, C])
    for n_, m_, p_ in [(1, 1, 1), (7, 9, 3), (64, 17, 33), (129, 8, 5)]:
        ins, outs = run_kernel(mod, [A, B], [C], {"n": n_, "m": m_, "p": p_})
        np.testing.assert_allclose(outs[0], ins[0] @ ins[1], rtol=1e-4, atol=1e-5)


def test_chain_compute_at(matmul):
    A, B, C = matmul
    D = te.compute(C.shape, lambda i, j: te.max(C[i, j], 0.0), name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], 5)
    s[C].compute_at(s[D], xo)
    jo, ji = s[D].split(D.op.axis[1], 8)
    s[D].vectorize(ji)
    mod = te.build(s, [A, B, D])
    _check_sizes(mod, [A, B], [D], lambda a, b: np.maximum(a @ b, 0), rtol=1e-4)


def test_size_var_consistency(elementwise):
    A, B, C = elementwise
    mod = te.build(te.create_schedule(C.op), [A, B, C])
    a, c = np.ones(7, "float32"), np.empty(7, "float32")
    with pytest.raises(te.ArgumentError, match=r"^argument 'B' shape\[0\]: expected 7 \(n, "
                       r"bound from argument 'A' shape\[0\]\), got 8$"):
        mod(a, np.ones(8, "float32"), c)
    with pytest.raises(te.ArgumentError, match=r"argument 'C' shape\[0\]: expected 7 \(n, "
                                               r"bound from argument 'A' shape\[0\]\), got 6"):
        mod(a, a, np.empty(6, "float32"))


def test_size_var_consistency_2d(matmul):
    A, B, C = matmul
    mod = te.build(te.create_schedule(C.op), [A, B, C])
    with pytest.raises(te.ArgumentError, match=r"argument 'C' shape\[0\]: expected 5 \(n, bound "
                                               r"from argument 'A' shape\[0\]\), got 4"):
        mod(np.ones((5, 19), "float32"), np.ones((19, 24), "float32"),
            np.empty((4, 24), "float32"))
    with pytest.raises(te.ArgumentError, match=r"argument 'A' shape\[1\]: expected 19, got 18"):
        mod(np.ones((5, 18), "float32"), np.ones((19, 24), "float32"),
            np.empty((5, 24), "float32"))


def test_symbolic_signature_in_ir(elementwise):
    A, B, C = elementwise
    text = str(te.lower(te.create_schedule(C.op), [A, B, C]))
    assert text.splitlines()[0] == "@main(A: float32[n], B: float32[n], C: float32[n], n: int32) {"
