"""Float remainders built by LLVM: te.fmod (C fmod) and te.floormod (numpy's %), bit for bit
against numpy (signed zeros included) where a - trunc-or-floor(a / b) * b is wrong: large
quotients, negative operands, infinities, NaN and zero divisors; scalar and vectorized."""
from __future__ import annotations

import numpy as np
import pytest

import te
from te.compute.expr import Const

EDGES = [(1e7 + 1, 3.3), (-1e7 - 1, 3.3), (1e20, -0.7), (-3e18, 1.1), (5.0, 2.5),
         (-5.0, 2.5), (5.0, -2.5), (0.0, -2.0), (-0.0, 2.0), (1.5, np.inf), (-1.5, np.inf),
         (np.inf, 2.0), (np.nan, 2.0), (2.0, np.nan), (2.0, 0.0), (-2.0, -0.0)]


def _operands(n: int, dtype: str):
    rng = np.random.default_rng(11)
    a = rng.standard_normal(n) * 10.0 ** rng.integers(0, 12, n)
    b = rng.standard_normal(n) * 3 + np.where(rng.random(n) < 0.5, -0.25, 0.25)
    a[:len(EDGES)], b[:len(EDGES)] = zip(*EDGES)
    return a.astype(dtype), b.astype(dtype)


def _run(fn, dtype: str, n: int, vector: bool):
    a, b = (te.placeholder((n,), dtype, name=x) for x in "AB")
    c = te.compute((n,), lambda i: fn(a[i], b[i]), name="C")
    s = te.create_schedule(c.op)
    if vector:
        _, inner = s[c].split(c.op.axis[0], factor=8)
        s[c].vectorize(inner)
    f = te.build(s, [a, b, c], "llvm")
    x, y = _operands(n, dtype)
    out = np.zeros(n, dtype)
    with np.errstate(invalid="ignore"):
        f(x, y, out)
        return out, x, y


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn,ref", [(te.fmod, np.fmod), (te.floormod, np.mod)],
                         ids=["fmod", "floormod"])
def test_float_remainder_is_numpys_bit_for_bit(fn, ref, dtype, vector):
    out, x, y = _run(fn, dtype, 203, vector)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = ref(x, y)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


def test_constant_floormod_folds_to_numpys():
    for a, b in [(1e7 + 1, 3.3), (-7.0, 2.0), (7.0, -2.0), (-4.0, 2.0), (1e20, -0.7)]:
        folded = te.floormod(te.const(a, "float64"), te.const(b, "float64"))
        assert isinstance(folded, Const)
        assert folded.value == np.mod(a, b)
        assert np.signbit(folded.value) == np.signbit(np.mod(a, b))
        assert te.fmod(te.const(a, "float64"), te.const(b, "float64")).value == np.fmod(a, b)


def test_fmod_refuses_integers():
    with pytest.raises(te.DTypeError, match=r"te\.fmod: expected float operands, got dtype "
                                            r"int32 \(te\.truncmod is the integer remainder\)"):
        te.fmod(te.var("x", "int32"), 3)
