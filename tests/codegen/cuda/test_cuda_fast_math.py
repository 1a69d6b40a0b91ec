"""Target 'cuda -fast-math': float32 exp, log, sin, cos, pow (and sigmoid's exp) as CUDA's fast
intrinsics (__expf, ...), as TVM's CUDA target maps exp to __expf, and nvcc's
--use_fast_math; float64 keeps the accurate functions. Checked against numpy in the
emulator (which runs the fast names as their exact C counterparts, so this checks the
code around them) and, where nvcc is on PATH, in the PTX.
"""
import re
import shutil

import numpy as np
import pytest
from helpers import bind, rand_array, run_emulated

import te
from te.target import parse_target

FAST_CALL = re.compile(r"__(exp|log|sin|cos|pow)f\(")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")


def _math(dtype, target, n=203):
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: te.exp(A[i]) + te.log(B[i] * B[i]) * te.sin(A[i])
                   - te.cos(B[i]) + te.power(B[i] * B[i], A[i]) + te.sigmoid(A[i] * 3),
                   name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 64)
    mod = te.build(s, [A, B, C], target=target)
    a, b = rand_array((n,), dtype), rand_array((n,), dtype)
    (c,) = run_emulated(mod, [a, b], [(n,)], [dtype])
    want = (np.exp(a) + np.log(b * b) * np.sin(a) - np.cos(b) + np.power(b * b, a)
            + 1 / (1 + np.exp(-a * 3)))
    return mod, c, want


@pytest.mark.parametrize("spelling", ["cuda -fast-math", "cuda -fast-math=true",
                                      "cuda -arch=sm_80 -fast-math=1"])
def test_fast_math_uses_the_fast_intrinsics(spelling):
    mod, c, want = _math("float32", spelling)
    src = mod.get_source()
    for name in ("__expf(", "__logf(", "__sinf(", "__cosf(", "__powf("):
        assert name in src, name
    assert "expf(" not in src.replace("__expf(", "")
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spelling", ["cuda", "cuda -fast-math=false", "cuda -fast-math=0"])
def test_without_fast_math_the_functions_are_accurate(spelling):
    mod, c, want = _math("float32", spelling)
    assert not FAST_CALL.search(mod.get_source()) and "expf(" in mod.get_source()
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_float64_keeps_the_accurate_functions_under_fast_math():
    mod, c, want = _math("float64", "cuda -fast-math")
    assert not FAST_CALL.search(mod.get_source()) and "exp(" in mod.get_source()
    np.testing.assert_allclose(c, want, rtol=1e-12)


@needs_nvcc
def test_fast_math_ptx_uses_the_approximate_instructions():
    fast = _math("float32", "cuda -fast-math")[0].get_source("ptx")
    accurate = _math("float32", "cuda")[0].get_source("ptx")
    assert "ex2.approx.ftz.f32" in fast and "sin.approx.ftz.f32" in fast
    assert "sin.approx" not in accurate


def test_the_option_parses_to_a_flag():
    assert parse_target("cuda -fast-math").fast_math
    assert parse_target("cuda -fast-math") == parse_target("cuda -fast-math=1")
    assert not parse_target("cuda").fast_math
    assert not parse_target("cuda -fast-math=false").fast_math


@pytest.mark.parametrize("target, message", [
    ("cuda -fast-math=yes", r"^te.build: target option -fast-math: expected true, false, 1 "
                            r"or 0 \(or -fast-math alone for true\), got 'yes'$"),
    ("llvm -fast-math", r"^te.build: target option '-fast-math' must look like -key=value$"),
])
def test_bad_fast_math_options(target, message):
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i] + 1, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(te.BuildError, match=message):
        te.build(s, [A, C], target=target)
