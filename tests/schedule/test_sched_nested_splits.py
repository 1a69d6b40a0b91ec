"""Splits whose factor exceeds the extent of the loop they split, inside nested splits,
after fuse and in tile: every iteration the padded loops add is guarded, at every level.

Each case is checked three ways: the built kernel and the loop-IR interpreter against the
compute definitions evaluated directly (compute_oracle), which does not lower and so does
not share a lowering bug with the other two. Imports te, te.autotune.space, te.lower.interp,
numpy, pytest, compute_oracle and helpers.
"""
import numpy as np
import pytest

import te
from compute_oracle import evaluate
from helpers import rand_array
from te.autotune.space import apply_split
from te.lower.interp import run_func


def _check_three_ways(s, inputs, outputs):
    arrays = [rand_array(tuple(int(d.value) for d in t.shape), t.dtype) for t in inputs]
    want = evaluate(outputs, dict(zip(inputs, arrays)))
    built = [np.full(w.shape, np.nan, w.dtype) for w in want]
    te.build(s, inputs + outputs)(*arrays, *built)
    interp = [np.full(w.shape, np.nan, w.dtype) for w in want]
    run_func(te.lower(s, inputs + outputs), arrays + interp)
    for b, i, w in zip(built, interp, want):
        np.testing.assert_allclose(b, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(i, w, rtol=1e-5, atol=1e-5)


def _sum_of(n):
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    return A, B


def test_issue_reproduction_sums_each_element_once():
    A, B = _sum_of(3)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=1)
    s[B].split(ki, factor=3)
    a = np.array([1, 2, 3], "float32")
    b = np.zeros(1, "float32")
    te.build(s, [A, B])(a, b)
    assert b[0] == 6.0
    _check_three_ways(s, [A], [B])


@pytest.mark.parametrize("factor_axis", [0, 1])
def test_rfactor_at_the_inner_loop_of_a_nested_split(factor_axis):
    A, B = _sum_of(3)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=1)
    kio, kii = s[B].split(ki, factor=3)
    s.rfactor(B, kii, factor_axis=factor_axis)
    _check_three_ways(s, [A], [B])


@pytest.mark.parametrize("sizes", [[-1, 1, 3], [-1, 2, 4], [-1, 3, 2, 5], [-1, 1, 1, 7]])
def test_autotvm_split_knob_inner_factor_larger_than_its_loop(sizes):
    A, B = _sum_of(5)
    s = te.create_schedule(B.op)
    apply_split(sizes, s, B, B.op.reduce_axis[0])
    _check_three_ways(s, [A], [B])


@pytest.mark.parametrize("outer_by", [("factor", 2), ("factor", 4), ("nparts", 3)])
@pytest.mark.parametrize("inner_factor", [3, 5, 9])
def test_nested_data_parallel_split(outer_by, inner_factor):
    A = te.placeholder((7,), name="A")
    B = te.compute((7,), lambda i: A[i] * 3.0 - 1.0, name="B")
    s = te.create_schedule(B.op)
    kind, value = outer_by
    o, i = s[B].split(B.op.axis[0], **{kind: value})
    s[B].split(i, factor=inner_factor)
    _check_three_ways(s, [A], [B])


def test_nested_split_of_the_outer_loop():
    A = te.placeholder((6, 5), name="A")
    B = te.compute((6, 5), lambda i, j: A[i, j] + A[5 - i, j], name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=4)   # o has extent 2
    oo, oi = s[B].split(o, factor=3)
    s[B].reorder(oi, B.op.axis[1], oo, i)
    _check_three_ways(s, [A], [B])


@pytest.mark.parametrize("factor", [4, 7, 40])
def test_split_of_a_fused_axis(factor):
    A = te.placeholder((3, 5), name="A")
    B = te.compute((3, 5), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    jo, ji = s[B].split(j, factor=2)       # ji: extent 2, jo: 3, one padded column
    f = s[B].fuse(jo, ji)                  # 6 iterations for 5 columns
    fo, fi = s[B].split(f, factor=factor)
    s[B].vectorize(fi) if factor <= 8 else None
    _check_three_ways(s, [A], [B])


@pytest.mark.parametrize("factors", [(2, 3), (4, 16), (1, 2)])
def test_nested_split_of_fused_reduce_axes(factors):
    A = te.placeholder((4, 3, 5), name="A")
    k1, k2 = te.reduce_axis((0, 3), "k1"), te.reduce_axis((0, 5), "k2")
    C = te.compute((4,), lambda i: te.sum(A[i, k1, k2] * A[3 - i, k1, k2], axis=[k1, k2]),
                   name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(k1, k2)
    fo, fi = s[C].split(f, factor=factors[0])
    s[C].split(fi, factor=factors[1])
    _check_three_ways(s, [A], [C])


@pytest.mark.parametrize("tx,ty", [(4, 9), (16, 16), (1, 6)])
def test_tile_after_split_with_large_factors(tx, ty):
    A = te.placeholder((5, 7), name="A")
    k = te.reduce_axis((0, 7), "k")
    C = te.compute((5,), lambda i: te.sum(A[i, k] * A[i, 6 - k], axis=k), name="C")
    D = te.compute((5, 7), lambda i, j: A[i, j] * C[i], name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=2)
    jo, ji = s[D].split(D.op.axis[1], factor=3)
    s[D].tile(ii, ji, tx, ty)
    s[C].compute_at(s[D], io)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=2)
    s[C].split(ki, factor=tx)
    _check_three_ways(s, [A], [D])


def test_nested_split_of_a_reduction_stage_data_axis():
    """A data-parallel loop split twice inside the reduction loop: a repeated iteration
    would add a term twice."""
    A = te.placeholder((5, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    C = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=1)
    iio, iii = s[C].split(ii, factor=4)
    s[C].reorder(k, io, iio, iii)
    _check_three_ways(s, [A], [C])
