"""Reads outside a tensor of static shape are refused at lowering when some iteration of the
stage provably makes one (a witness where every guarding condition holds); reads that an
if_then_else or a reduction's `where` keeps inside, and reads lowering cannot decide
(gathers, clamps, symbolic sizes), still build. Imports te, numpy, pytest, compute_oracle
and helpers."""
import re

import numpy as np
import pytest

import te
from compute_oracle import evaluate
from helpers import rand_array


def _one_d(fn, out=10):
    A = te.placeholder((10,), name="A")
    C = te.compute((out,), lambda i: fn(A, i), name="C")
    return A, C, te.create_schedule(C.op)


def _check_builds_and_matches(s, inputs, outputs):
    arrays = [rand_array(tuple(int(d.value) for d in t.shape), t.dtype) for t in inputs]
    want = evaluate(outputs, dict(zip(inputs, arrays)))
    got = [np.full(w.shape, np.nan, w.dtype) for w in want]
    te.build(s, inputs + outputs)(*arrays, *got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_read_past_the_end_is_refused():
    A, C, s = _one_d(lambda A, i: A[i + 5])
    message = ("te.compute 'C' reads tensor 'A' out of bounds: index 0 (i + 5) reaches 5..14 "
               "over the loops, but dimension 0 of 'A' has extent 10 (shape (10,)); at i = 9 "
               "it is 14")
    with pytest.raises(te.LoweringError, match=re.escape(message)):
        te.lower(s, [A, C])
    with pytest.raises(te.LoweringError, match=re.escape(message)):
        te.build(s, [A, C])


def test_read_before_the_start_is_refused():
    A, C, s = _one_d(lambda A, i: A[10 - i] + A[i])
    with pytest.raises(te.LoweringError, match=re.escape(
            "index 0 (10 - i) reaches 1..10 over the loops, but dimension 0 of 'A' has "
            "extent 10 (shape (10,)); at i = 0 it is 10")):
        te.lower(s, [A, C])
    A, C, s = _one_d(lambda A, i: A[i - 1])
    with pytest.raises(te.LoweringError, match=re.escape("reaches -1..8 over the loops")):
        te.lower(s, [A, C])


def test_padding_guarded_by_if_then_else_builds():
    A, C, s = _one_d(lambda A, i: te.if_then_else(i >= 5, A[i - 5], 0.0), out=15)
    _check_builds_and_matches(s, [A], [C])
    A, C, s = _one_d(lambda A, i: te.if_then_else(te.all(i >= 2, i < 12), A[i - 2], -1.0),
                     out=14)
    _check_builds_and_matches(s, [A], [C])


def test_read_in_the_false_branch_is_guarded_by_the_negated_condition():
    A, C, s = _one_d(lambda A, i: te.if_then_else(i >= 5, 0.0, A[i + 5]))
    _check_builds_and_matches(s, [A], [C])
    A, C, s = _one_d(lambda A, i: te.if_then_else(i < 5, 0.0, A[i + 5]))
    with pytest.raises(te.LoweringError, match=re.escape(
            "index 0 (i + 5) reaches 10..14 over the loops (where its if_then_else / where "
            "conditions hold), but dimension 0 of 'A' has extent 10")):
        te.lower(s, [A, C])


def test_a_guard_that_does_not_cover_the_read_is_refused():
    A, C, s = _one_d(lambda A, i: te.if_then_else(i < 8, A[i + 5], 0.0))
    with pytest.raises(te.LoweringError, match=re.escape(
            "reaches 5..12 over the loops (where its if_then_else / where conditions hold), "
            "but dimension 0 of 'A' has extent 10 (shape (10,)); at i = 7 it is 12")):
        te.lower(s, [A, C])


def test_reduction_where_guards_its_source():
    A = te.placeholder((10,), name="A")
    k = te.reduce_axis((0, 10), "k")
    C = te.compute((1,), lambda i: te.sum(A[k + 2], axis=k, where=k < 8), name="C")
    _check_builds_and_matches(te.create_schedule(C.op), [A], [C])
    k = te.reduce_axis((0, 10), "k")
    C = te.compute((1,), lambda i: te.sum(A[k + 2], axis=k), name="C")
    with pytest.raises(te.LoweringError, match=re.escape(
            "te.compute 'C' reads tensor 'A' out of bounds: index 0 (k + 2) reaches 2..11 "
            "over the loops, but dimension 0 of 'A' has extent 10 (shape (10,)); at k = 9 "
            "it is 11")):
        te.lower(te.create_schedule(C.op), [A, C])


def test_second_dimension_of_an_intermediate_tensor():
    A = te.placeholder((4, 5), name="A")
    T = te.compute((4, 5), lambda i, j: A[i, j] * 2.0, name="T")
    C = te.compute((4, 5), lambda i, j: T[i, j + 1] + T[i, j], name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(te.LoweringError, match=re.escape(
            "te.compute 'C' reads tensor 'T' out of bounds: index 1 (j + 1) reaches 1..5 over "
            "the loops, but dimension 1 of 'T' has extent 5 (shape (4, 5)); at j = 4 it is 5")):
        te.lower(s, [A, C])


def test_an_inlined_producer_is_checked_where_its_reader_uses_it():
    """T reads past A for its last five elements; a reader that only takes the first five
    through an inlined T reads inside A, a T of its own would not."""
    A = te.placeholder((10,), name="A")
    T = te.compute((10,), lambda i: A[i + 5] * 2.0, name="T")
    C = te.compute((5,), lambda i: T[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[T].compute_inline()
    a = rand_array((10,))
    c = np.full(5, np.nan, "float32")
    te.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, a[5:] * 2 + 1, rtol=1e-6)
    with pytest.raises(te.LoweringError, match=re.escape(
            "te.compute 'T' reads tensor 'A' out of bounds: index 0 (i + 5) reaches 5..14")):
        te.lower(te.create_schedule(C.op), [A, C])


@pytest.mark.parametrize("index", [
    lambda A, i: te.min(i + 5, 9),                      # clamped
    lambda A, i: (i + 5) % 10,                          # wrapped around
    lambda A, i: te.if_then_else(i + 5 < 10, i + 5, i),  # selected index
])
def test_indices_that_stay_inside_build(index):
    A, C, s = _one_d(lambda A, i: A[index(A, i)])
    _check_builds_and_matches(s, [A], [C])


def test_gather_and_symbolic_sizes_are_left_to_the_code():
    A = te.placeholder((10,), name="A")
    idx = te.placeholder((6,), "int32", name="idx")
    C = te.compute((6,), lambda i: A[idx[i]], name="C")
    # their bounds are only known at run time: lowering keeps the reads for the code
    # (or instrument_bound_checkers) to meet, and refuses neither
    assert "A[idx[i]]" in str(te.lower(te.create_schedule(C.op), [A, idx, C]))
    n = te.var("n")
    B = te.placeholder((n,), name="B")
    D = te.compute((10,), lambda i: B[i + 5], name="D")
    assert "B[i + 5]" in str(te.lower(te.create_schedule(D.op), [B, D]))
