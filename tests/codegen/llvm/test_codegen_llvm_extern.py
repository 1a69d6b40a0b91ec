"""call_extern in vectorized loops: one scalar call per lane (a C function takes no
vectors), checked against numpy, with the vector body and its scalar tail in one module."""
from __future__ import annotations

import numpy as np
import pytest

import te

RNG = np.random.default_rng(7)


def _vectorized(n: int, fcompute, ins, dtype: str, factor: int = 8):
    out = te.compute((n,), fcompute, name="C")
    s = te.create_schedule(out.op)
    _, inner = s[out].split(out.op.axis[0], factor=factor)
    s[out].vectorize(inner)
    return te.build(s, [*ins, out], "llvm"), np.zeros(n, dtype)


@pytest.mark.parametrize("dtype,name", [("float32", "fmodf"), ("float64", "fmod")])
@pytest.mark.parametrize("n", [37, 64])
def test_vectorized_libm_call_matches_numpy(dtype, name, n):
    a = te.placeholder((n,), dtype, name="A")
    b = te.placeholder((n,), dtype, name="B")
    f, c = _vectorized(n, lambda i: te.call_extern(dtype, name, a[i], b[i]), [a, b], dtype)
    x = (RNG.standard_normal(n) * 1e4).astype(dtype)
    y = (RNG.standard_normal(n) + 0.1).astype(dtype)
    f(x, y, c)
    np.testing.assert_array_equal(c, np.fmod(x, y))
    ir_text = f.get_source("ll")
    scalar = "float" if dtype == "float32" else "double"
    assert f"declare {scalar} @{name}({scalar}" in ir_text


def test_vectorized_call_mixes_vector_and_invariant_args():
    n = 29
    a = te.placeholder((n,), "float32", name="A")
    p = te.var("p", "float32")
    f, c = _vectorized(n, lambda i: te.call_extern("float32", "powf", a[i], p), [a, p],
                       "float32", factor=4)
    x = RNG.uniform(0.5, 3.0, n).astype("float32")
    f(x, np.float32(1.7), c)
    np.testing.assert_allclose(c, np.power(x, np.float32(1.7)), rtol=2e-6)


def test_vectorized_int_call_matches_numpy():
    n = 21
    a = te.placeholder((n,), "int32", name="A")
    f, c = _vectorized(n, lambda i: te.call_extern("int32", "abs", a[i]), [a], "int32")
    x = RNG.integers(-1000, 1000, n).astype("int32")
    f(x, c)
    np.testing.assert_array_equal(c, np.abs(x))
