"""The float32 vector exp emitted by codegen (no libm calls) against numpy: accuracy over the
whole range, the edges (underflow, overflow, NaN, inf) and the absence of expf calls."""
import numpy as np
import pytest

import te


def _build_exp(n, lanes):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(inner)
    return te.build(s, [A, B])


@pytest.mark.parametrize("lanes", [8, 16])
def test_vector_exp_matches_numpy(lanes):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-87, 88, 4000), rng.uniform(-5, 5, 4000),
                        np.linspace(-1e-3, 1e-3, 64)]).astype(np.float32)
    mod = _build_exp(x.size, lanes)
    y = np.empty_like(x)
    mod(x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6, atol=0)


def test_vector_exp_edges():
    x = np.array([np.nan, np.inf, -np.inf, 89.0, 88.7, -87.0, -90.0, -200.0, 0.0, -0.0,
                  1.0, -1.0, 1e-30, 87.5, 50.0, -50.0], np.float32)
    mod = _build_exp(x.size, 16)
    y = np.empty_like(x)
    mod(x, y)
    with np.errstate(over="ignore"):
        want = np.exp(x)
    finite = np.isfinite(want) & (want > 1.2e-38)  # normal results
    np.testing.assert_allclose(y[finite], want[finite], rtol=1e-6)
    assert np.isnan(y[0]) and y[1] == np.inf and y[2] == 0 and y[3] == np.inf
    assert y[7] == 0                                 # below the denormals
    assert y[6] > 0 and abs(y[6] - want[6]) <= 2 * 2.0 ** -149  # exp(-90): a denormal


def test_vector_exp_denormal_results_match_the_scalar_path():
    # every schedule gives the unscheduled answer: the vector exp rounds into the
    # denormals as libm's expf (the scalar path) does, and flushes to 0 only past them
    x = np.concatenate([np.linspace(-104.5, -86.5, 4093), [-103.97, -103.28, -87.34]])
    x = x.astype(np.float32)
    vec = np.empty_like(x)
    _build_exp(x.size, 16)(x, vec)
    scalar = np.empty_like(x)
    _build_exp(x.size, 1)(x, scalar)
    tiny = 2.0 ** -149
    assert np.all(np.abs(vec - scalar) <= np.maximum(2 * tiny, 3e-7 * np.abs(scalar)))
    assert np.all((vec == 0) == (scalar == 0))


def test_vector_exp_calls_no_libm():
    mod = _build_exp(64, 16)
    asm = mod.get_source("asm")
    assert "expf" not in asm
    assert "vfmadd" in asm
