"""The compute-definition oracle (tests/compute_oracle.py) against numpy written by hand:
reductions with conditions, init values and tuple reducers, guarded reads, integer
semantics, symbolic sizes, and the errors it raises for reads a definition makes out of
bounds. Imports te, te.compute.ops, numpy, pytest and the oracle."""
import numpy as np
import pytest

import te
from compute_oracle import evaluate
from helpers import rand_array
from te.compute import ops


def test_matmul_with_a_producer():
    A, B = te.placeholder((5, 7), name="A"), te.placeholder((7, 3), name="B")
    As = te.compute((5, 7), lambda i, r: A[i, r] * 0.5 + 1.0, name="As")
    r = te.reduce_axis((0, 7), "r")
    C = te.compute((5, 3), lambda i, j: te.sum(As[i, r] * B[r, j], axis=r), name="C")
    a, b = rand_array((5, 7)), rand_array((7, 3))
    np.testing.assert_allclose(evaluate(C, {A: a, B: b})[0], (a * 0.5 + 1.0) @ b,
                               rtol=1e-5, atol=1e-5)


def test_padding_reads_only_where_the_condition_holds():
    A = te.placeholder((6,), name="A")
    P = te.compute((10,), lambda i: te.if_then_else(te.all(i >= 2, i < 8), A[i - 2], -1.0),
                   name="P")
    a = rand_array((6,))
    want = np.concatenate([[-1.0, -1.0], a, [-1.0, -1.0]]).astype("float32")
    np.testing.assert_array_equal(evaluate(P, {A: a})[0], want)


def test_reduction_with_where_init_and_offset_axis():
    A = te.placeholder((4, 9), name="A")
    k = te.reduce_axis((2, 7), "k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0, init=10.0),
                   name="R")
    a = rand_array((4, 9))
    part = a[:, 2:7]
    want = 10.0 + np.where(part > 0, part, 0).sum(1)
    np.testing.assert_allclose(evaluate(R, {A: a})[0], want, rtol=1e-6, atol=1e-6)


def test_where_guards_the_read_of_its_second_conjunct():
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 8), "k")
    R = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=te.all(k < 5, A[k] > 0)),
                   name="R")
    a = rand_array((5,))
    np.testing.assert_allclose(evaluate(R, {A: a})[0], [a[a > 0].sum()], rtol=1e-6, atol=1e-6)


def test_tuple_reducer_argmax():
    X = te.placeholder((6, 11), name="X")
    Y = ops.argmax(X, 1)
    x = rand_array((6, 11))
    np.testing.assert_array_equal(evaluate(Y, {X: x})[0], x.argmax(1))


def test_integer_semantics():
    A = te.placeholder((7,), "int32", name="A")
    B = te.compute((7,), lambda i: te.truncdiv(A[i], 4) * 1000 + A[i] // 4 * 10
                   + te.truncmod(A[i], 4) + A[i] * 2**30, name="B")
    a = np.array([-9, -4, -1, 0, 3, 7, 9], "int32")
    big = (a.astype(np.int64) * 2**30 + (np.fix(a / 4) * 1000 + (a // 4) * 10
                                         + np.fmod(a, 4)).astype(np.int64))
    want = ((big + 2**31) % 2**32 - 2**31).astype("int32")   # wraps like int32 code
    np.testing.assert_array_equal(evaluate(B, {A: a})[0], want)


def test_symbolic_size():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    a = rand_array((9,))
    np.testing.assert_array_equal(evaluate(B, {A: a}, sizes={"n": 9})[0], a[::-1] * 2)


def test_unguarded_read_past_the_end_raises():
    A = te.placeholder((10,), name="A")
    C = te.compute((10,), lambda i: A[i + 5], name="C")
    with pytest.raises(IndexError, match="'A' read at index 10 of dimension 0, which has "
                                         "extent 10"):
        evaluate(C, {A: rand_array((10,))})


def test_missing_placeholder_is_named():
    A = te.placeholder((3,), name="A")
    C = te.compute((3,), lambda i: A[i] + 1.0, name="C")
    with pytest.raises(KeyError, match="no array given for placeholder 'A'"):
        evaluate(C, {})
