"""Integer data arithmetic wraps around exactly as numpy's does.

Values loaded from tensors and values computed from them are not index arithmetic: neither
the simplifier nor LLVM (`nsw`) may assume that they do not overflow. Checked against numpy
with values near each dtype's limits, in scalar and vectorized loops, and in the
loop-IR interpreter; index arithmetic keeps `nsw`, which LLVM needs for affine addresses.
"""
import numpy as np
import pytest
from helpers import bind, run_emulated

from runtime.checker import INDEX_LIMIT
import te
from te.codegen.llvm.codegen import codegen_llvm
from te.lower.interp import run_func

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
N = 29


def near_limits(dtype: str, rng) -> np.ndarray:
    info = np.iinfo(dtype)
    span = 2**(info.bits - 2)
    a = np.concatenate([
        rng.integers(info.max - span, info.max, N // 2, endpoint=True, dtype=dtype),
        rng.integers(info.min, info.min + span, N - N // 2, endpoint=True, dtype=dtype)])
    a[:4] = np.array([info.max, info.min, info.max // 2 + 1, info.max // 2], dtype)
    return a


# (name, te expression of a and b, numpy expression): each wraps for values near the limits.
CASES = [
    ("double_then_halve", lambda a, b: (a * 2) // 2 + b, lambda a, b: (a * 2) // 2 + b),
    ("increment_exceeds", lambda a, b: te.if_then_else((a + 1) > a, b, a),
     lambda a, b: np.where((a + 1) > a, b, a)),
    ("max_of_increment", lambda a, b: te.max(a + 1, a) - b,
     lambda a, b: np.maximum(a + 1, a) - b),
    ("sum_then_mod", lambda a, b: (a + b) % 7, lambda a, b: (a + b) % 7),
    ("product_sign", lambda a, b: (a * b) < 0, lambda a, b: (a * b) < 0),
    ("difference_halved", lambda a, b: (a - b) // 4, lambda a, b: (a - b) // 4),
    ("sum_minus_operand", lambda a, b: te.min(a + b - b, a + b),
     lambda a, b: np.minimum(a, a + b)),
]


def build_case(make, dtype: str, vector: bool):
    A = te.placeholder((N,), dtype, name="A")
    B = te.placeholder((N,), dtype, name="B")
    C = te.compute((N,), lambda i: make(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    if vector:
        _, inner = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(inner)
    return s, [A, B, C]


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_data_arithmetic_wraps_like_numpy(dtype, vector):
    rng = np.random.default_rng(4)
    a, b = near_limits(dtype, rng), near_limits(dtype, rng)[::-1].copy()
    for name, make, reference in CASES:
        s, args = build_case(make, dtype, vector)
        want = reference(a, b)
        c = np.zeros(N, want.dtype)
        te.build(s, args)(a, b, c)
        np.testing.assert_array_equal(c, want, err_msg=f"{name} {dtype}")


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint32"])
def test_interpreter_data_arithmetic_wraps_like_numpy(dtype):
    rng = np.random.default_rng(9)
    a, b = near_limits(dtype, rng), near_limits(dtype, rng)[::-1].copy()
    for name, make, reference in CASES:
        s, args = build_case(make, dtype, vector=False)
        want = reference(a, b)
        c = np.zeros(N, want.dtype)
        run_func(te.lower(s, args), [a, b, c])
        np.testing.assert_array_equal(c, want, err_msg=f"{name} {dtype}")


def test_a_loop_index_used_as_data_wraps_like_numpy():
    m = 100000
    C = te.compute((m,), lambda i: (i * 100003) // 7, name="C")
    c = np.zeros(m, "int32")
    te.build(te.create_schedule(C.op), [C])(c)
    i = np.arange(m, dtype="int32")
    np.testing.assert_array_equal(c, (i * np.int32(100003)) // 7)


def test_simplifier_keeps_what_may_wrap_and_folds_what_cannot():
    s, args = build_case(lambda a, b: (a * 2) // 2 + b, "int32", vector=False)
    assert "floordiv(A[i]*2, 2)" in str(te.lower(s, args))
    C = te.compute((N,), lambda i: (i * 2) // 2 + te.max(i + 1, i), name="C")
    assert "C[i] = (i*2) + 1" in str(te.lower(te.create_schedule(C.op), [C]))


def test_only_index_arithmetic_is_marked_no_signed_wrap():
    A = te.placeholder((40, 40), "int32", name="A")
    C = te.compute((40, 40), lambda i, j: A[i, j] * 3 + A[j, i] * 5, name="C")
    ll = codegen_llvm(te.lower(te.create_schedule(C.op), [A, C]), index_limit=INDEX_LIMIT)
    body = ll.split("define")[1]
    assert "mul nsw i32 %\"i\", 40" in body or "mul nsw i32 %i, 40" in body
    data = [line for line in body.splitlines() if " 3" in line and "mul" in line]
    assert data and all("nsw" not in line for line in data)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64"])
def test_cuda_data_arithmetic_wraps_like_numpy(dtype):
    rng = np.random.default_rng(6)
    a, b = near_limits(dtype, rng), near_limits(dtype, rng)[::-1].copy()
    A = te.placeholder((N,), dtype, name="A")
    B = te.placeholder((N,), dtype, name="B")
    cases = CASES + [("product", lambda x, y: x * y, lambda x, y: x * y)]
    if dtype.startswith("int"):
        cases.append(("abs", lambda x, y: te.abs(x), lambda x, y: np.abs(x)))
    outs = [te.compute((N,), _elementwise(make, A, B), name=name) for name, make, _ in cases]
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        bind(s, t, t.op.axis[0], 8)
    mod = te.build(s, [A, B] + outs, target="cuda")
    wants = [reference(a, b) for _, _, reference in cases]
    got = run_emulated(mod, [a, b], [(N,)] * len(outs), [w.dtype for w in wants])
    for (name, _, _), g, w in zip(cases, got, wants):
        np.testing.assert_array_equal(g, w, err_msg=f"{name} {dtype}")


def _elementwise(make, A, B):
    return lambda i: make(A[i], B[i])
