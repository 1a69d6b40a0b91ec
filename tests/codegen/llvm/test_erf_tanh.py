"""The float32 vector erf and tanh emitted by codegen (erf.py, no libm calls) against
float64 references: the error in ulps over a dense grid of float32 values, tails, signed
zeros, infinities and NaN, on both exp algorithms (AVX-512 table, polynomial)."""
import math

import numpy as np
import pytest

import te

TARGETS = ["llvm", "llvm -mattr=-avx512f"]
REFERENCE = {"erf": np.vectorize(math.erf), "tanh": np.tanh}


def _build(name, n, lanes, target="llvm"):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: getattr(te, name)(A[i]), name="B")
    s = te.create_schedule(B.op)
    if lanes > 1:
        s[B].vectorize(s[B].split(B.op.axis[0], factor=lanes)[1])
    return te.build(s, [A, B], target=target)


def _run(name, x, lanes=16, target="llvm"):
    y = np.empty_like(x)
    _build(name, x.size, lanes, target)(x, y)
    return y


def _dense_grid():
    """Every 63rd float32 from 1e-30 to 10, both signs, and the floats near the branch
    points and clamps (erf: 0.875, 3.92, 4.5; tanh: 0.625, 9, 10)."""
    lo, hi = np.float32(1e-30).view(np.int32), np.float32(10.0).view(np.int32)
    pos = np.arange(lo, hi, 63, dtype=np.int32).view(np.float32)
    near = np.concatenate([np.float32(c) + np.arange(-64, 64, dtype=np.float32) *
                           np.spacing(np.float32(c)) for c in (0.625, 0.875, 3.92, 4.5, 9.0, 10.0)])
    x = np.concatenate([pos, near])
    return np.concatenate([x, -x]).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["erf", "tanh"])
def test_vector_error_in_ulps(name, target):
    x = _dense_grid()
    y = _run(name, x, 16, target)
    ref = REFERENCE[name](x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    err = np.abs(y - ref) / ulp
    assert err.max() <= 2.0, (name, float(x[err.argmax()]), float(err.max()))
    assert err.mean() < 0.35
    np.testing.assert_array_equal(y[: x.size // 2], -y[x.size // 2:])   # odd


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["erf", "tanh"])
def test_vector_edges(name, target):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 3.92, 4.0, 9.0, 20.0,
                  -20.0, 1e-40, -1e-40, 1e-20, 0.5], np.float32)
    y = _run(name, x, 16, target)
    assert np.isnan(y[0])
    assert y[1:3].tolist() == [1.0, -1.0] and y[5:7].tolist() == [1.0, -1.0]
    assert np.signbit(y[4]) and not np.signbit(y[3]) and y[3] == 0
    assert y[10:12].tolist() == [1.0, -1.0]
    want = REFERENCE[name](x[7:].astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y[7:], want, rtol=2.5e-7, atol=0)


@pytest.mark.parametrize("name", ["erf", "tanh"])
def test_vector_calls_no_libm_and_agrees_with_the_scalar_path(name):
    mod = _build(name, 64, 16)
    asm = mod.get_source("asm")
    assert f"{name}f" not in asm and "vfmadd" in asm
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-5, 5, 4093), rng.standard_normal(4096)]).astype(
        np.float32)
    vec, scalar = _run(name, x, 16), _run(name, x, 1)     # libm's erff / tanhf
    np.testing.assert_allclose(vec, scalar, rtol=3e-7, atol=1e-37)
    # the odd lane counts of a tail or a narrow vector compute the same values
    np.testing.assert_array_equal(_run(name, x, 8), vec)


def test_gelu_erf_epilogue_vectorized():
    # GELU (erf form) as a vectorized elementwise stage gives numpy's answer
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(1000) * 3).astype(np.float32)
    A = te.placeholder((1000,), name="A")
    B = te.compute((1000,), lambda i: A[i] * (te.erf(A[i] / np.float32(math.sqrt(2)))
                                             + 1.0) * 0.5, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=16)[1])
    y = np.empty_like(x)
    te.build(s, [A, B])(x, y)
    want = x * (REFERENCE["erf"](x / np.sqrt(2.0)) + 1) * 0.5
    # for negative x, 1 + erf cancels: an ulp of erf near -1 (6e-8) times |x|
    assert np.all(np.abs(y - want) <= 1e-6 * np.abs(want) + 1.2e-7 * np.abs(x))
