"""Prefetch lowering: the region of iteration var + offset (one prefetch per cache line),
the guard that keeps every address inside the tensor, the printed form, the verifier, the
interpreter (which checks the prefetched index) and numeric results of prefetched
schedules against numpy on odd sizes, compiled and interpreted.

Imports te, te.lower (ir, interp, verify), numpy, pytest and benchmarks/kernels.py.
"""
import os
import sys

import numpy as np
import pytest

import te
from te.compute.expr import Var
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.interp import OutOfBoundsError, run_func
from te.lower.verify import verify_func

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import kernels  # noqa: E402


def _scale(rows, cols, factor):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=factor)
    return s, A, B, jo, ji


def test_next_row_burst_is_one_prefetch_per_cache_line():
    s, A, B, jo, ji = _scale(8, 64, 16)
    s[B].prefetch(A, B.op.axis[0], 1)
    text = str(te.lower(s, [A, B]))
    # 64 float32 = 4 lines of 64 bytes; the last row's prefetch is peeled off and dropped.
    assert "for (i.pf1, 0, 4) {\n      prefetch(&A[((i*64) + (i.pf1*16)) + 64])" in text
    assert text.count("prefetch(") == 1


def test_inner_loop_prefetch_runs_into_the_next_row_and_stays_inside():
    s, A, B, jo, ji = _scale(8, 64, 16)
    s[B].prefetch(A, jo, 4)       # 4 iterations of 16 ahead: the same line of the next row
    text = str(te.lower(s, [A, B]))
    assert "prefetch(&A[((i*64) + (j.outer*16)) + 64])" in text
    # The guard splits the row loop: the last row, peeled off, prefetches nothing.
    assert text.count("prefetch(") == 1 and "for (i, 0, 7)" in text


def test_a_read_that_does_not_move_with_the_loop_leaves_the_region_alone():
    """B[i, j] = A[i, j] - A[i, 0] (layer_norm's shift): A[i, 0] is the same at every j, so
    the prefetch covers the lines of A[i, j] ahead only, not the hull back to A[i, 0]."""
    A = te.placeholder((8, 64), name="A")
    B = te.compute((8, 64), lambda i, j: A[i, j] - A[i, 0], name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].prefetch(A, jo, 4)
    text = str(te.lower(s, [A, B]))
    assert "prefetch(&A[((i*64) + (j.outer*16)) + 64])" in text
    assert text.count("prefetch(") == 1 and ".pf1" not in text
    a = np.random.default_rng(0).uniform(0.5, 1.5, (8, 64)).astype(np.float32)
    b = np.zeros_like(a)
    te.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a - a[:, :1])


def test_write_prefetch_of_the_stage_output():
    s, A, B, jo, ji = _scale(8, 64, 16)
    s[B].prefetch(B, jo, 2)
    text = str(te.lower(s, [A, B]))
    assert "prefetch_write(&B[((i*64) + (j.outer*16)) + 32])" in text


def test_verifier_rejects_a_prefetch_used_as_a_value():
    s, A, B, jo, ji = _scale(4, 16, 16)
    func = te.lower(s, [A, B])
    buf = func.params[0]
    bad = ir.Store(func.params[1], te.const(0), ir.Prefetch("handle", ir.Load("float32", buf,
                                                                             te.const(0))))
    with pytest.raises(te.LoweringError, match="a prefetch is used as a value"):
        verify_func(PrimFunc("f", func.params, (), bad), "test")


def test_interp_checks_the_prefetched_index():
    s, A, B, jo, ji = _scale(4, 16, 16)
    func = te.lower(s, [A, B])
    buf = func.params[0]
    i = Var("i")
    body = ir.For(i, te.const(0), te.const(2), ir.SERIAL, ir.Evaluate(
        ir.Prefetch("handle", ir.Load("float32", buf, i * 64))))
    a, b = np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32)
    run_func(PrimFunc("f", func.params, (), ir.For(i, te.const(0), te.const(1), ir.SERIAL,
                                                      body.body)), [a, b])
    with pytest.raises(OutOfBoundsError, match=r"prefetch of A\[64\] is out of bounds"):
        run_func(PrimFunc("f", func.params, (), body), [a, b])


@pytest.mark.parametrize("where", ["row", "inner", "both"])
def test_prefetched_non_dividing_split_matches_numpy(where):
    rows, cols = 37, 101
    s, A, B, jo, ji = _scale(rows, cols, 16)
    s[B].vectorize(ji)
    if where in ("row", "both"):
        s[B].prefetch(A, B.op.axis[0], 1)
    if where in ("inner", "both"):
        s[B].prefetch(A, jo, 7)
        s[B].prefetch(B, jo, 3)
    a = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    b = np.full((rows, cols), np.nan, np.float32)
    te.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a * 2)
    b2 = np.full((rows, cols), np.nan, np.float32)
    run_func(te.lower(s, [A, B]), [a, b2])  # every prefetched index checked in range
    np.testing.assert_array_equal(b2, a * 2)


@pytest.mark.parametrize("rows, cols", [(37, 101), (9, 16), (3, 48), (5, 4096)])
def test_prefetched_softmax_matches_numpy(rows, cols):
    s, args = kernels.softmax(rows, cols)
    assert "prefetch(" in str(te.lower(s, args))
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    x[1, 2] = np.nan                   # a NaN row stays NaN, as in numpy
    y = np.full_like(x, -1.0)
    te.build(s, args)(x, y)
    with np.errstate(invalid="ignore"):
        want = np.exp(x - x.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
    if rows * cols < 4000:
        y2 = np.full_like(x, -1.0)
        run_func(te.lower(s, args), [x, y2])
        np.testing.assert_allclose(y2, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows, cols, prefetches", [(37, 101, True), (3, 16, False),
                                                    (5, 4096, True)])
def test_prefetched_layernorm_matches_numpy(rows, cols, prefetches):
    # The mean and variance passes prefetch the next row of X into L2; the guard keeps it
    # inside the tensor (a 3x16 tensor is smaller than the distance, so it folds away).
    # The output pass streams Y past the caches.
    s, args = kernels.layernorm(rows, cols)
    text = str(te.lower(s, args))
    lines = [line.strip() for line in text.splitlines() if "prefetch(&X" in line]
    assert bool(lines) == prefetches
    assert all(line.endswith(", locality=2)") for line in lines)
    # the variance pass prefetches too: between its partial sums' start and their fold
    var_pass = text[text.index("allocate Y_var.rf["):text.index("allocate Y_var.rf_1[")]
    assert ("prefetch(&X" in var_pass) == prefetches
    assert "pragma nontemporal_store" in text and "prefetch_write" not in text
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(np.float32)
    g, b = rng.random(cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)
    mean = x.mean(axis=1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * g + b
    y = np.full_like(x, np.nan)
    te.build(s, args)(x, g, b, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    if rows * cols < 4000:
        y2 = np.full_like(x, np.nan)
        run_func(te.lower(s, args), [x, g, b, y2])   # every prefetched index checked
        np.testing.assert_allclose(y2, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows, cols", [(37, 101), (3, 16), (6, 4096)])
def test_prefetched_row_sum_matches_numpy(rows, cols):
    s, args = kernels.row_sum(rows, cols)
    x = np.random.default_rng(4).standard_normal((rows, cols), dtype=np.float32)
    got = np.full(rows, np.nan, np.float32)
    te.build(s, args)(x, got)
    np.testing.assert_allclose(got, x.sum(axis=1), rtol=1e-4, atol=1e-4)
    if rows * cols < 4000:
        got2 = np.full(rows, np.nan, np.float32)
        run_func(te.lower(s, args), [x, got2])   # every prefetched index checked
        np.testing.assert_allclose(got2, x.sum(axis=1), rtol=1e-4, atol=1e-4)
