"""The float32 vector exp emitted by codegen (no libm calls) against numpy: accuracy over the
whole range, the edges (underflow, overflow, NaN, inf) and the absence of expf calls."""
import llvmlite.binding as llvm
import numpy as np
import pytest

import te
from te.build import target_features

HOST = llvm.get_host_cpu_features()
needs_avx512 = pytest.mark.skipif(not (HOST.get("avx512f") and HOST.get("avx512vl")),
                                  reason="the scalef path needs an AVX-512 host")


def _build_exp(n, lanes, target="llvm"):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(inner)
    return te.build(s, [A, B], target=target)


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
    _build_exp(x.size, 16, "llvm -mattr=-avx512f")(x, vec)    # the two-factor 2^k
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


@needs_avx512
@pytest.mark.parametrize("lanes", [4, 8, 16, 32, 64])
def test_vscalef_exp_gives_the_two_factor_answer_bit_for_bit(lanes):
    # With AVX-512 one vscalefps applies 2^k; without, two normal factors do. Both round
    # once, so every input gives the same bits: over the whole range, in the denormals,
    # and at the edges (NaN, +-inf, overflow, underflow to 0).
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-105.0, 90.0, 6000), rng.uniform(-88, 89, 2000),
                        [np.nan, np.inf, -np.inf, 88.72, 88.73, -103.97, -103.98, 0.0, -0.0,
                         -87.34, -126.0, 1e-30]]).astype(np.float32)
    x = np.resize(x, -(-x.size // lanes) * lanes)
    fast = _build_exp(x.size, lanes)
    asm = fast.get_source("asm")
    assert "vscalefps" in asm
    generic = _build_exp(x.size, lanes, "llvm -mattr=-avx512f")
    assert "vscalefps" not in generic.get_source("asm")
    y1, y2 = np.empty_like(x), np.empty_like(x)
    fast(x, y1)
    generic(x, y2)
    np.testing.assert_array_equal(y1.view(np.int32), y2.view(np.int32))


def test_target_features_follow_mattr_and_mcpu():
    host = target_features("llvm")
    assert host == {name for name, on in HOST.items() if on}
    assert "avx512f" not in target_features("llvm -mattr=-avx512f")
    assert "sse4.1" in target_features("llvm -mattr=-avx512f,+sse4.1")
    # an explicit CPU: only what -mattr names is known
    assert target_features("llvm -mcpu=haswell") == frozenset()
    assert target_features("llvm -mcpu=haswell -mattr=+avx2") == {"avx2"}


@needs_avx512
@pytest.mark.parametrize("mattr", ["-avx2", "-fma", "-f16c", "-avx512f", "-sse4.1"])
def test_removing_an_avx512_prerequisite_keeps_the_generic_exp(mattr):
    # LLVM turns AVX-512 off with its prerequisites; an AVX-512 intrinsic emitted anyway
    # aborted the process ("Do not know how to split the result of this operator").
    assert not any(f.startswith("avx512") for f in target_features(f"llvm -mattr={mattr}"))
    x = np.linspace(-100, 80, 160).astype(np.float32)
    mod = _build_exp(x.size, 16, f"llvm -mattr={mattr}")
    assert "vscalefps" not in mod.get_source("asm")
    y = np.empty_like(x)
    mod(x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6, atol=2.0 ** -140)
