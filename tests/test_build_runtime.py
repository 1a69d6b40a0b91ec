"""Runtime features through te.build: time_evaluator results, LLVM IR and assembly (FMA on
ymm registers for a vectorized multiply-add), NDArray arguments, the entry name, and
export_library + runtime.load_module in this process and in a fresh one without te.

Imports te, runtime, numpy, llvmlite (to ask for the host's features) and helpers.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import runtime
import te
from helpers import rand_array

REPO_ROOT = Path(__file__).resolve().parents[1]


def _fma_kernel(n=1024):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C0 = te.placeholder((n,), name="C0")
    C = te.compute((n,), lambda i: A[i] * B[i] + C0[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 8)
    s[C].vectorize(xi)
    return s, [A, B, C0, C]


@pytest.fixture(scope="module")
def fma():
    s, args = _fma_kernel()
    return te.build(s, args, name="fma8")


def _fma_inputs(n=1024):
    a, b, c0 = (rand_array((n,)) for _ in range(3))
    return a, b, c0, np.full(n, np.nan, "float32")


def test_time_evaluator_result(fma):
    a, b, c0, c = _fma_inputs()
    result = fma.time_evaluator(number=5, repeat=3)(a, b, c0, c)
    assert isinstance(result, runtime.TimeResult)
    assert len(result.results) == 3
    assert all(isinstance(t, float) and 0 < t < 0.1 for t in result.results)
    assert result.min <= result.median <= result.max
    assert result.min <= result.mean <= result.max
    assert result.std >= 0
    assert "repeats=3" in repr(result)
    np.testing.assert_allclose(c, a * b + c0, rtol=1e-5, atol=1e-6)  # fused: one rounding


def test_time_evaluator_min_repeat_ms(fma):
    result = fma.time_evaluator(number=1, repeat=2, min_repeat_ms=2)(*_fma_inputs())
    assert len(result.results) == 2


def test_time_evaluator_checks_arguments(fma):
    a, b, c0, c = _fma_inputs()
    with pytest.raises(te.ArgumentError, match=r"expected 4 arguments \(A, B, C0, C\), got 3"):
        fma.time_evaluator(number=1, repeat=1)(a, b, c0)
    with pytest.raises(ValueError, match=r"func_name: expected 'fma8'"):
        fma.time_evaluator("other")


def test_entry_name_and_ll_source(fma):
    assert fma.entry_name == "fma8"
    ll = fma.get_source("ll")
    assert "define" in ll and "@fma8" in ll
    assert "<8 x float>" in ll
    with pytest.raises(ValueError, match=r"fmt: expected 'll', 'asm' or 's', got 'ptx'"):
        fma.get_source("ptx")


@pytest.mark.skipif(not {"fma", "avx"} <= {k for k, v in llvm.get_host_cpu_features().items()
                                          if v},
                    reason="the host CPU has no FMA / AVX")
def test_asm_has_vector_fma_on_ymm(fma):
    asm = fma.get_source("asm")
    fma_lines = [line for line in asm.splitlines() if "vfmadd" in line]
    assert fma_lines, "no vfmadd instruction in the assembly"
    assert any("%ymm" in line for line in fma_lines), fma_lines[:4]


def test_ndarray_arguments(fma):
    a, b, c0, _ = _fma_inputs()
    out = runtime.empty((1024,), "float32")
    fma(runtime.array(a), runtime.array(b), runtime.array(c0), out)
    np.testing.assert_allclose(out.numpy(), a * b + c0, rtol=1e-5, atol=1e-6)


def _symbolic_parallel():
    n = te.var("n")
    A = te.placeholder((n, 13), name="A")
    B = te.compute((n, 13), lambda i, j: te.sqrt(A[i, j] * A[i, j] + 1.0) * 2.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], 4)
    s[B].parallel(io)
    jo, ji = s[B].split(B.op.axis[1], 8)
    s[B].vectorize(ji)
    return te.build(s, [A, B], name="sqrt_kernel")


def _ref_sqrt(a):
    return np.sqrt(a * a + 1) * 2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("te_export") / "sqrt_kernel.so"
    _symbolic_parallel().export_library(path)
    return path


def test_export_load_in_process(exported):
    loaded = runtime.load_module(exported)
    assert loaded.entry_name == "sqrt_kernel"
    for n in (1, 37):
        a = rand_array((n, 13))
        b = np.full((n, 13), np.nan, "float32")
        loaded(a, b)
        np.testing.assert_allclose(b, _ref_sqrt(a), rtol=1e-6)
    with pytest.raises(te.ArgumentError, match=r"argument 'A' shape\[1\]: expected 13, got 12"):
        loaded(np.ones((3, 12), "float32"), np.ones((3, 13), "float32"))


FRESH = textwrap.dedent("""
    import sys
    import numpy as np
    import runtime

    mod = runtime.load_module(sys.argv[1])
    rng = np.random.default_rng(1)
    for n in (1, 7, 129):
        a = rng.uniform(-2, 2, (n, 13)).astype("float32")
        b = np.full((n, 13), np.nan, "float32")
        mod(a, b)
        np.testing.assert_allclose(b, np.sqrt(a * a + 1) * 2, rtol=1e-6)
    assert "te" not in sys.modules, "loading a kernel must not need te"
    print("fresh ok")
""")


def test_export_load_in_fresh_process(exported):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")
    proc = subprocess.run([sys.executable, "-c", FRESH, str(exported)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "fresh ok"
