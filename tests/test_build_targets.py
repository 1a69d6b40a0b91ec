"""te.build target strings: -mcpu and -mattr reach the code generator and the result runs;
code for CPU features this host lacks (named by -mattr or implied by -mcpu) builds but refuses
to run here."""
import os
import re
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import runtime
import te

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def _host_lacks(*names):
    host = llvm.get_host_cpu_features()
    return [name for name in names if name in host and not host[name]]


def test_baseline_cpus_need_nothing_an_x86_64_host_lacks():
    assert runtime.cpu.missing_host_features("x86-64") == ()
    # What haswell implies that this host lacks is among what this host lacks.
    lacking = set(_host_lacks(*llvm.get_host_cpu_features()))
    assert set(runtime.cpu.missing_host_features("haswell")) <= lacking
    assert set(_host_lacks("avx2", "fma", "bmi2", "movbe")) <= set(
        runtime.cpu.missing_host_features("haswell"))


def test_mattr_added_features_count_for_a_named_cpu():
    lacking = _host_lacks("waitpkg", "uintr", "serialize", "clzero")
    if not lacking:
        pytest.skip("this host has every probe feature")
    feature = lacking[0]
    assert runtime.cpu.missing_host_features("x86-64", f"+{feature}") == (feature,)
    assert runtime.cpu.missing_host_features("x86-64", f"+{feature},-{feature}") == ()


def test_unknown_cpus_are_refused_before_llvm_sees_them():
    with pytest.raises(ValueError, match=r"^cpu: LLVM does not know the CPU 'notacpu'$"):
        runtime.cpu.missing_host_features("notacpu")


def test_mattr_features_the_host_lacks_refuse_to_run():
    lacking = _host_lacks("waitpkg", "uintr", "serialize", "clzero")
    if not lacking:
        pytest.skip("this host has every probe feature")
    s, args = _axpy()
    mod = te.build(s, args, target=f"llvm -mattr=+{lacking[0]}")
    x = np.ones(9, "float32")
    with pytest.raises(RuntimeError, match=re.escape(
            f"kernel 'main': module was built for CPU features this host lacks "
            f"(+{lacking[0]}); export it or rebuild with target='llvm'")):
        mod(x, x, np.zeros(9, "float32"))


# Builds _axpy(16) for each target given and calls it: prints the refusal, or "ok" when the
# result matches numpy. In a child process: code for features this host lacks dies with SIGILL.
RUN_AXPY = """
import sys
import numpy as np
import te
sys.path.insert(0, sys.argv[1])
from test_build_targets import _axpy

s, args = _axpy(16)
rng = np.random.default_rng(3)
x, y = rng.standard_normal((2, 45)).astype("float32")
for target in sys.argv[2:]:
    mod = te.build(s, args, target=target)
    z = np.full(45, np.nan, "float32")
    try:
        mod(x, y, z)
    except RuntimeError as error:
        assert np.isnan(z).all(), "the kernel ran before it was refused"
        print(error)
        continue
    np.testing.assert_allclose(z, x * 3 + y, rtol=1e-6)
    print("ok")
"""


def _run_axpy(*targets):
    result = subprocess.run(
        [sys.executable, "-c", RUN_AXPY, str(Path(__file__).parent), *targets],
        capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive"))
    assert result.returncode == 0, f"exit code {result.returncode}: {result.stderr[-2000:]}"
    return result.stdout.splitlines()


def test_a_cpu_newer_than_the_host_refuses_to_run_unless_its_extra_features_are_off(tmp_path):
    """Code for -mcpu=diamondrapids died with SIGILL on a Sapphire Rapids. Calls now raise,
    naming what the CPU implies and this host lacks; with those turned off by -mattr the
    code runs here (so the list is complete), and export works either way."""
    # LLVM gives Diamond Rapids AVX10.2, APX (egpr) and AMX-FP8.
    expected = set(_host_lacks("avx10.2", "egpr", "amx-fp8"))
    if not expected:
        pytest.skip("this host has what -mcpu=diamondrapids implies")
    missing = runtime.cpu.missing_host_features("diamondrapids")
    assert expected <= set(missing)
    assert set(missing) <= set(_host_lacks(*llvm.get_host_cpu_features()))
    turn_off = ",".join("-" + name for name in missing)
    refused, ran = _run_axpy("llvm -mcpu=diamondrapids",
                             f"llvm -mcpu=diamondrapids -mattr={turn_off}")
    assert refused == (
        f"kernel 'main': module was built for CPU features this host lacks "
        f"({','.join('+' + name for name in missing)}), which -mcpu=diamondrapids implies; "
        f"export it, rebuild with target='llvm', or turn them off with -mattr={turn_off}")
    assert ran == "ok"
    s, args = _axpy(16)
    te.build(s, args, target="llvm -mcpu=diamondrapids").export_library(tmp_path / "dmr.so")
