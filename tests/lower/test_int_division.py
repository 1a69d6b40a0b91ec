"""Integer division and modulo give numpy's answers where the hardware traps or overflows.

x // 0 and x % 0 are 0, MIN // -1 wraps to MIN and MIN % -1 is 0, for every integer dtype,
in scalar and vectorized LLVM code, the loop-IR interpreter and the CUDA code (run through
the CPU emulator), for divisors in the data and constant ones.
"""
import numpy as np
import pytest
from helpers import bind, run_emulated

import te
from te.lower.interp import run_func

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
OPS = ["floordiv", "floormod", "truncdiv", "truncmod"]
N = 37  # odd: vectorized loops keep a tail


def _truncdiv(x: int, y: int) -> int:
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def numpy_answer(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's result (truncating forms from exact integers, wrapped to the dtype)."""
    with np.errstate(all="ignore"):
        if op == "floordiv":
            return a // b
        if op == "floormod":
            return a % b
        if op == "truncmod":
            return np.fmod(a, b)
    exact = [_truncdiv(int(x), int(y)) for x, y in zip(a, b)]
    bits = a.dtype.itemsize * 8
    wrapped = [(q + 2**(bits - 1)) % 2**bits - 2**(bits - 1) if a.dtype.kind == "i"
               else q % 2**bits for q in exact]
    return np.array(wrapped, a.dtype)


def operands(dtype: str, rng) -> tuple:
    """Random operands near the limits, with the divisor 0, -1 and MIN // -1 among them."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, endpoint=True, dtype=dtype)
    b = rng.integers(info.min, info.max, N, endpoint=True, dtype=dtype)
    small = rng.integers(max(info.min, -9), 9, N, endpoint=True, dtype=dtype)
    b[::3] = small[::3]
    edges_a = [info.min, info.max, 5, 7, info.min, 0, info.max, info.min]
    edges_b = [0, 0, 0, 3, -1 if info.min else 1, 0, 2, 1]
    a[:8] = np.array(edges_a, dtype)
    b[:8] = np.array(edges_b, dtype)
    if info.min:
        b[8:11] = -1
    return a, b


def _elementwise(fn, A, B):
    return lambda i: fn(A[i], B[i])


def division(op: str, dtype: str):
    A = te.placeholder((N,), dtype, name="A")
    B = te.placeholder((N,), dtype, name="B")
    fn = getattr(te, op)
    C = te.compute((N,), lambda i: fn(A[i], B[i]), name="C")
    return A, B, C


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_llvm_division_gives_numpy_answers(dtype, vector):
    rng = np.random.default_rng(14)
    a, b = operands(dtype, rng)
    for op in OPS:
        A, B, C = division(op, dtype)
        s = te.create_schedule(C.op)
        if vector:
            _, inner = s[C].split(C.op.axis[0], factor=8)
            s[C].vectorize(inner)
        c = np.zeros(N, dtype)
        te.build(s, [A, B, C])(a, b, c)
        np.testing.assert_array_equal(c, numpy_answer(op, a, b), err_msg=f"{op} {dtype}")


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint32"])
def test_constant_divisors_zero_and_minus_one(dtype):
    info = np.iinfo(dtype)
    a = np.random.default_rng(3).integers(info.min, info.max, N, endpoint=True, dtype=dtype)
    a[:3] = np.array([info.min, info.max, 0], dtype)
    divisors = [0, 7] + ([-1, -7] if info.min else [])
    A = te.placeholder((N,), dtype, name="A")
    for d in divisors:
        for op in OPS:
            fn = getattr(te, op)
            C = te.compute((N,), lambda i: fn(A[i], te.const(d, dtype)), name="C")
            s = te.create_schedule(C.op)
            _, inner = s[C].split(C.op.axis[0], factor=4)
            s[C].vectorize(inner)
            c = np.zeros(N, dtype)
            te.build(s, [A, C])(a, c)
            want = numpy_answer(op, a, np.full(N, d, dtype))
            np.testing.assert_array_equal(c, want, err_msg=f"{op} by {d} ({dtype})")


def test_a_nonzero_constant_divisor_keeps_the_unguarded_division():
    A, _, _ = division("floordiv", "int32")
    C = te.compute((N,), lambda i: te.truncdiv(A[i], 7) + te.floormod(A[i], 6), name="C")
    s = te.create_schedule(C.op)
    text = te.build(s, [A, C]).get_source()
    assert "sdiv" in text and "icmp eq" not in text  # no test of the divisor
    guarded = te.compute((N,), lambda i: te.truncdiv(A[i], A[N - 1 - i]), name="C")
    text = te.build(te.create_schedule(guarded.op), [A, guarded]).get_source()
    assert "icmp eq" in text and "select" in text


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_interpreter_division_gives_numpy_answers(dtype):
    a, b = operands(dtype, np.random.default_rng(8))
    for op in OPS:
        A, B, C = division(op, dtype)
        func = te.lower(te.create_schedule(C.op), [A, B, C])
        c = np.zeros(N, dtype)
        run_func(func, [a, b, c])
        np.testing.assert_array_equal(c, numpy_answer(op, a, b), err_msg=f"{op} {dtype}")


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint32"])
def test_cuda_division_gives_numpy_answers(dtype):
    a, b = operands(dtype, np.random.default_rng(21))
    A = te.placeholder((N,), dtype, name="A")
    B = te.placeholder((N,), dtype, name="B")
    outs = [te.compute((N,), _elementwise(getattr(te, op), A, B), name=op) for op in OPS]
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        bind(s, t, t.op.axis[0], 16)
    mod = te.build(s, [A, B] + outs, target="cuda")
    got = run_emulated(mod, [a, b], [(N,)] * len(OPS), [dtype] * len(OPS))
    for op, g in zip(OPS, got):
        np.testing.assert_array_equal(g, numpy_answer(op, a, b), err_msg=f"{op} {dtype}")


def test_constant_folding_gives_the_generated_code_s_answers():
    lo = te.const(-2**31, "int32")
    assert te.floordiv(lo, -1).value == -2**31 and te.truncdiv(lo, -1).value == -2**31
    assert te.floormod(lo, -1).value == 0 and te.truncmod(lo, -1).value == 0
    A = te.placeholder((N,), "int32", name="A")
    by_zero = te.compute((N,), lambda i: A[i] + te.floordiv(te.const(5), te.const(0))
                         + te.floormod(te.const(-5), te.const(0)), name="C")
    a, c = np.arange(N, dtype="int32"), np.zeros(N, "int32")
    te.build(te.create_schedule(by_zero.op), [A, by_zero])(a, c)
    np.testing.assert_array_equal(c, a)
