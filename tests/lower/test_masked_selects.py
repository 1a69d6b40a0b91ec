"""Selects on a lane-varying condition whose sides read memory (a padded copy's border):
the vectorize pass keeps them vector code where masking the loads makes them safe
(masked_loads_suffice), and the LLVM build, the run-time bounds checks and the reference
interpreter all read only the lanes each side is taken for. Every result against numpy,
and against the serial loop that MASKED_SELECTS = False leaves to LLVM.

Imports te, numpy, pytest.
"""
import numpy as np
import pytest

import te
from te.compute import expr as E
from te.lower import ir
from te.lower.interp import run_func
from te.lower.passes import vectorize

ROWS, COLS = 3, 37   # odd: a partial vector at the end of each row


def _padded(stride: int, left: int, right: int):
    """P[r, j] = X[r, stride*j - left] where that lies in the row, else 0 (a conv's padded
    input, one column phase of it at stride 2); j's loop split by 8 and vectorized."""
    X = te.placeholder((ROWS, COLS), name="X")
    width = (COLS + left + right - 1) // stride + 1

    def fpad(r, j):
        x = j * stride - left
        return te.if_then_else(te.all(x >= 0, x < COLS), X[r, x], te.const(0.0, "float32"))
    P = te.compute((ROWS, width), fpad, name="P")
    s = te.create_schedule(P.op)
    s[P].vectorize(s[P].split(P.op.axis[1], factor=8)[1])
    return s, X, P


def _want(x, stride, left, width):
    cols = np.arange(width) * stride - left
    inside = (cols >= 0) & (cols < COLS)
    return np.where(inside[None, :], x[:, np.clip(cols, 0, COLS - 1)], 0).astype(np.float32)


CASES = [(1, 2, 3), (2, 1, 1), (3, 2, 0)]


@pytest.mark.parametrize("stride,left,right", CASES)
def test_padded_copy_is_vector_code_and_matches_numpy(stride, left, right):
    s, X, P = _padded(stride, left, right)
    text = str(te.lower(s, [X, P], simple_mode=True))
    assert "vectorize_hint" not in text, text
    assert "select(" in text and "X[ramp(" in text, text
    x = np.random.default_rng(3).standard_normal((ROWS, COLS)).astype(np.float32)
    width = int(P.shape[1].value)
    want = _want(x, stride, left, width)
    for checked in (False, True):   # masked lanes never trip the bounds checks
        got = np.full((ROWS, width), np.nan, np.float32)
        te.build(s, [X, P], instrument_bound_checkers=checked)(x, got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("stride,left,right", CASES)
def test_interpreter_reads_only_the_lanes_each_side_takes(stride, left, right):
    """The reference interpreter raises on any read outside a buffer: the masked select's
    lanes outside X are not read there either."""
    s, X, P = _padded(stride, left, right)
    x = np.random.default_rng(4).standard_normal((ROWS, COLS)).astype(np.float32)
    width = int(P.shape[1].value)
    got = np.full((ROWS, width), np.nan, np.float32)
    run_func(te.lower(s, [X, P]), [x, got])
    np.testing.assert_array_equal(got, _want(x, stride, left, width))


def test_without_masked_selects_the_loop_stays_serial_with_the_same_result(monkeypatch):
    s, X, P = _padded(2, 1, 1)
    x = np.random.default_rng(5).standard_normal((ROWS, COLS)).astype(np.float32)
    width = int(P.shape[1].value)
    masked = np.empty((ROWS, width), np.float32)
    te.build(s, [X, P])(x, masked)
    monkeypatch.setattr(vectorize, "MASKED_SELECTS", False)
    s, X, P = _padded(2, 1, 1)
    assert "vectorize_hint" in str(te.lower(s, [X, P], simple_mode=True))
    serial = np.empty((ROWS, width), np.float32)
    te.build(s, [X, P])(x, serial)
    np.testing.assert_array_equal(masked, serial)


def _vec_load(buf, index):
    return ir.Load("float32x8", buf, index)


def test_masked_loads_suffice_only_where_nothing_else_can_fault():
    a = ir.Buffer("a", "float32", (64,), (1,), data=E.Var("a", "handle"))
    i = E.Var("i", "int32")
    lanes = E.Ramp("int32x8", i, E.const(1, "int32"), 8)
    eight = E.Broadcast("int32x8", E.const(8, "int32"), 8)
    by_var = E.Broadcast("int32x8", E.Var("d", "int32"), 8)
    ok = vectorize.masked_loads_suffice
    assert ok(_vec_load(a, lanes))
    assert ok(_vec_load(a, E.binary("floordiv", lanes, eight)))      # constant divisor
    assert not ok(_vec_load(a, E.binary("floordiv", lanes, by_var)))  # may divide by 0
    assert not ok(ir.Load("float32", a, i))                 # scalar: read for any lane
    nested = ir.Load("int32x8", ir.Buffer("idx", "int32", (64,), (1,),
                                          data=E.Var("idx", "handle")), lanes)
    assert not ok(_vec_load(a, nested))                     # a load inside the index
