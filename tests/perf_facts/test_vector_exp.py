"""The float32 vector exp emitted by codegen (no libm calls) against numpy: accuracy over the
whole range, the edges (underflow, overflow, NaN, inf) and the absence of expf calls."""
import llvmlite.binding as llvm
import numpy as np
import pytest

import te
from te.target import target_features

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


@pytest.mark.parametrize("target", ["llvm", "llvm -mattr=-avx512f"])
def test_vector_exp_edges(target):
    x = np.array([np.nan, np.inf, -np.inf, 89.0, 88.7, -87.0, -90.0, -200.0, 0.0, -0.0,
                  1.0, -1.0, 1e-30, 87.5, 50.0, -50.0], np.float32)
    mod = _build_exp(x.size, 16, target)
    y = np.empty_like(x)
    mod(x, y)
    with np.errstate(over="ignore"):
        want = np.exp(x)
    finite = np.isfinite(want) & (want > 1.2e-38)  # normal results
    np.testing.assert_allclose(y[finite], want[finite], rtol=1e-6)
    assert np.isnan(y[0]) and y[1] == np.inf and y[2] == 0 and y[3] == np.inf
    assert y[7] == 0                                 # below the denormals
    assert y[6] > 0 and abs(y[6] - want[6]) <= 2 * 2.0 ** -149  # exp(-90): a denormal


@pytest.mark.parametrize("target", ["llvm", "llvm -mattr=-avx512f"])
def test_vector_exp_denormal_results_match_the_scalar_path(target):
    # every schedule gives the unscheduled answer: the vector exp rounds into the
    # denormals as libm's expf (the scalar path) does, and flushes to 0 only past them
    x = np.concatenate([np.linspace(-104.5, -86.5, 4093), [-103.97, -103.28, -87.34]])
    x = x.astype(np.float32)
    vec = np.empty_like(x)
    _build_exp(x.size, 16, target)(x, vec)    # vscalefps, or the two-factor 2^k
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


@pytest.mark.parametrize("target", ["llvm", "llvm -mattr=-avx512f"])
def test_vector_sigmoid_uses_the_vector_exp(target):
    # it called expf once per lane before
    x = np.concatenate([np.linspace(-120, 120, 997), [np.nan, np.inf, -np.inf]])
    x = np.resize(x.astype(np.float32), 1024)
    A = te.placeholder((x.size,), name="A")
    B = te.compute(A.shape, lambda i: te.sigmoid(A[i]), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=16)[1])
    mod = te.build(s, [A, B], target=target)
    assert "expf" not in mod.get_source("asm")
    y = np.empty_like(x)
    mod(x, y)
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-30)


# the table algorithm where the host has AVX-512, the polynomial one everywhere
TARGETS = ["llvm", "llvm -mattr=-avx512f"]
EDGES = [np.nan, np.inf, -np.inf, 88.72, 88.73, -103.97, -103.98, 0.0, -0.0, -87.34, -126.0,
         1e-30, 89.0, -104.0, 104.0, 1e30, -1e30]


def _ulp_errors(y, x):
    """|y - exp(x)| in float32 ulps of the exact result, where that result is normal."""
    ref = np.exp(x.astype(np.float64))
    normal = (ref > 2.0 ** -126) & (ref < np.finfo(np.float32).max)
    ulp = np.spacing(ref[normal].astype(np.float32)).astype(np.float64)
    return np.abs(y[normal] - ref[normal]) / ulp


TABLE_BOUNDS, POLYNOMIAL_BOUNDS = (1.75, 0.53), (2.2, 0.71)
HOST_HAS_TABLE = bool(HOST.get("avx512f") and HOST.get("avx512vl"))


# plain 'llvm' takes the table exp on an AVX-512 host, the polynomial one elsewhere (AVX2)
@pytest.mark.parametrize("target, worst, mean", [
    (TARGETS[0], *(TABLE_BOUNDS if HOST_HAS_TABLE else POLYNOMIAL_BOUNDS)),
    (TARGETS[1], *POLYNOMIAL_BOUNDS)])
def test_vector_exp_error_in_ulps(target, worst, mean):
    # on these inputs: 1.73 ulp at most and 0.51 on average for the table exp, 2.16 and
    # 0.69 for the polynomial one (over every 97th float32 bit pattern with a normal
    # result: 1.73 and 2.17; over all of them, for the polynomial: 2.19)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-87.3, 88.7, 1 << 19), rng.uniform(-2, 2, 1 << 19),
                        np.linspace(-87.3, 88.7, 1 << 18)]).astype(np.float32)
    y = np.empty_like(x)
    _build_exp(x.size, 16, target)(x, y)
    err = _ulp_errors(y, x)
    assert err.max() <= worst and err.mean() < mean
    assert y[x == 0].tolist() == [1.0] * int(np.sum(x == 0))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lanes", [2, 4, 5, 8, 12, 24, 32, 64])
def test_every_vector_width_gives_the_same_bits(target, lanes):
    # the table exp pads 2-, 5-, 12- and 24-lane vectors and splits 32 and 64 into 16s:
    # each lane still takes the same steps, so the schedule's vector width never changes
    # an answer, in the denormals and at the edges included
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-105.0, 90.0, 3000), rng.uniform(-88, 89, 1000), EDGES])
    x = np.resize(x.astype(np.float32), 16 * lanes * 5)
    y16, y = np.empty_like(x), np.empty_like(x)
    _build_exp(x.size, 16, target)(x, y16)
    _build_exp(x.size, lanes, target)(x, y)
    np.testing.assert_array_equal(y.view(np.int32), y16.view(np.int32))


@needs_avx512
def test_avx512_exp_reads_its_table_with_one_permute():
    fast = _build_exp(64, 16).get_source("asm")
    assert "vpermi2ps" in fast or "vpermt2ps" in fast
    assert "vscalefps" in fast and "vrndscaleps" not in fast
    for target in (TARGETS[1], "llvm -mattr=-avx512vl"):  # 4- and 8-float vscalefps need VL
        generic = _build_exp(64, 16, target).get_source("asm")
        assert not any(op in generic for op in ("vpermi2ps", "vpermt2ps", "vscalefps"))


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
    asm = mod.get_source("asm")
    assert "vscalefps" not in asm
    assert "fmaf" not in asm  # without FMA: multiplies and adds, not a libm call per lane
    y = np.empty_like(x)
    mod(x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6, atol=2.0 ** -140)
