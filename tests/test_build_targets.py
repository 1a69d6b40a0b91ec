"""te.build target strings: -mcpu and -mattr reach the code generator and the result runs."""
import numpy as np
import pytest

import te


def _axpy(lanes=8):
    n = te.var("n")
    X = te.placeholder((n,), name="X")
    Y = te.placeholder((n,), name="Y")
    Z = te.compute((n,), lambda i: X[i] * 3.0 + Y[i], name="Z")
    s = te.create_schedule(Z.op)
    io, ii = s[Z].split(Z.op.axis[0], factor=lanes)
    s[Z].vectorize(ii)
    return s, [X, Y, Z]


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64", "llvm -mcpu=haswell",
                                    "llvm -mcpu=x86-64 -mattr=+avx2,+fma", "llvm -opt-level=0"])
def test_target_options_build_and_run(target):
    s, args = _axpy()
    mod = te.build(s, args, target=target)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(37).astype("float32")
    y = rng.standard_normal(37).astype("float32")
    z = np.full(37, np.nan, "float32")
    mod(x, y, z)
    np.testing.assert_allclose(z, x * 3 + y, rtol=1e-6)


def test_generic_cpu_has_no_avx_but_haswell_has_fma():
    s, args = _axpy()
    generic = te.build(s, args, target="llvm -mcpu=x86-64 -mattr=-avx,-avx2,-fma").get_source("asm")
    haswell = te.build(s, args, target="llvm -mcpu=haswell").get_source("asm")
    assert "ymm" not in generic and "vfmadd" not in generic
    assert "vfmadd" in haswell and "ymm" in haswell


@pytest.mark.parametrize("cpu, absent, present", [
    ("x86-64", ("ymm", "zmm", "vfmadd"), ()),       # SSE2 only
    ("haswell", ("zmm",), ("vfmadd", "ymm")),       # AVX2 + FMA, no AVX-512
])
def test_a_named_cpu_gets_its_own_features_not_the_hosts(cpu, absent, present):
    """-mcpu alone builds for that CPU whatever this host has: code exported for a Haswell
    must not use this host's AVX-512 (it did: the host's feature string went along).
    16-lane vectors: one zmm register where AVX-512 is allowed."""
    s, args = _axpy(16)
    mod = te.build(s, args, target=f"llvm -mcpu={cpu}")
    asm = mod.get_source("asm")
    for name in absent:
        assert name not in asm, name
    for name in present:
        assert name in asm, name
    x = np.arange(21, dtype="float32")
    z = np.full(21, np.nan, "float32")
    mod(x, x, z)
    np.testing.assert_allclose(z, x * 4)
