"""float16 on target 'llvm', bit for bit against numpy, which rounds to half after every
operation: arithmetic and chains of it (no multiply-add fused into one rounding), min/max,
casts to and from float32/float64/integers, and reductions with a half accumulator against
the same sequential order written in numpy. Scalar and vectorized loops of odd sizes on
random data with negatives, subnormals, infinities and NaN.

Each kernel runs for the host, for the host without AVX512-FP16, and for generic x86-64:
LLVM's native half instructions where the CPU has them, its promotion of each half operation
to float (converted by F16C), and the same promotion converting through the compiler-runtime
calls that runtime/half_libcalls.py provides (before it, a segfault).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import te

TARGETS = ["llvm", "llvm -mattr=-avx512fp16", "llvm -mcpu=x86-64"]
TARGET_IDS = ["host", "no-avx512fp16", "no-f16c"]
N = 203  # odd: a vectorized loop of 16 lanes leaves a tail of 11
# Pairs that test rounding at the edges: overflow to inf, subnormal results, signed zeros,
# inf - inf, NaN operands, the largest half times a small one.
EDGES = [(65504.0, 65504.0), (65504.0, -0.5), (6e-8, 6e-8), (6e-8, -6e-8), (0.0, -0.0),
         (-0.0, 0.0), (np.inf, np.inf), (np.inf, -np.inf), (np.nan, 1.0), (1.0, np.nan),
         (-np.inf, 0.0), (1e-3, 65504.0), (2049.0, 1.0), (-2049.0, 0.5)]


def half_operands(n: int, count: int = 3, seed: int = 5) -> list[np.ndarray]:
    """`count` float16 arrays of random normals scaled by 1e-6 .. 1e3 (subnormals up to
    results that overflow), EDGES' pairs in the first rows of the first two (a single
    array gets both values of each pair)."""
    rng = np.random.default_rng(seed)
    out = [(rng.standard_normal(n) * 10.0 ** rng.integers(-6, 4, n)) for _ in range(count)]
    if count == 1:
        edges = [v for pair in EDGES for v in pair][:n]
        out[0][:len(edges)] = edges
    else:
        m = min(n, len(EDGES))
        out[0][:m], out[1][:m] = zip(*EDGES[:m])
    return [x.astype("float16") for x in out]


def assert_bits_equal(out: np.ndarray, expected: np.ndarray, zero_sign: bool = True) -> None:
    """Equal bit patterns; any NaN matches any NaN (numpy leaves its payload to the CPU);
    with zero_sign False, +0 matches -0."""
    assert out.dtype == expected.dtype and out.shape == expected.shape
    both_nan = np.isnan(out) & np.isnan(expected)
    same = out.view(f"u{out.itemsize}") == expected.view(f"u{out.itemsize}")
    if not zero_sign:
        same |= (out == 0) & (expected == 0)
    bad = np.flatnonzero(~(same | both_nan))
    assert bad.size == 0, (f"{bad.size} of {out.size} differ, first at {bad[:5]}: got "
                           f"{out.flat[bad[:5]]}, expected {expected.flat[bad[:5]]}")


def elementwise(fn, dtypes: list[str], out_dtype: str, vector: bool, target: str):
    """te.build of out[i] = fn(*inputs[i]) over N elements, the loop split by 16 and the
    inner loop vectorized when `vector`."""
    inputs = [te.placeholder((N,), d, name=f"x{k}") for k, d in enumerate(dtypes)]
    out = te.compute((N,), lambda i: fn(*[x[i] for x in inputs]).astype(out_dtype),
                     name="out")
    s = te.create_schedule(out.op)
    if vector:
        _, inner = s[out].split(out.op.axis[0], factor=16)
        s[out].vectorize(inner)
    return te.build(s, inputs + [out], target)


def run(f, arrays: list[np.ndarray], out_dtype: str, shape=(N,)) -> np.ndarray:
    out = np.full(shape, 7, out_dtype)
    f(*arrays, out)
    return out


ARITHMETIC = {
    "add": (lambda a, b, c: a + b, 2),
    "sub": (lambda a, b, c: a - b, 2),
    "mul": (lambda a, b, c: a * b, 2),
    "div": (lambda a, b, c: a / b, 2),
    "mul_add": (lambda a, b, c: a * b + a, 2),    # the case an FMA rounds once
    "mul_sub": (lambda a, b, c: a * b - c, 3),
    "add_mul": (lambda a, b, c: c - (a + b) * c, 3),
    "chain": (lambda a, b, c: (a * b + c) / (a - c) * b + a * c, 3),
    "constants": (lambda a, b, c: a * 0.1 + 3.0 - b / 7.0, 2),
    # a float32 product (exact: LLVM narrows it to a half multiply) rounded to half, then
    # added in half: the narrowed multiply must not fuse with the add either
    "float32_product": (lambda a, b, c: (a.astype("float32") * b.astype("float32"))
                        .astype("float16") + c, 3),
}


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_arithmetic_rounds_after_every_operation(name, vector, target):
    fn, arity = ARITHMETIC[name]
    f = elementwise(lambda *xs: fn(*xs, *[None] * (3 - arity)), ["float16"] * arity,
                    "float16", vector, target)
    xs = half_operands(N, arity)
    with np.errstate(all="ignore"):
        expected = fn(*xs, *[None] * (3 - arity))
        if name == "constants":  # numpy: the Python floats are float16 operands
            a, b = xs
            expected = a * np.float16(0.1) + np.float16(3.0) - b / np.float16(7.0)
    assert_bits_equal(run(f, xs, "float16"), expected)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan(op, vector, target):
    f = elementwise(getattr(te, op), ["float16", "float16"], "float16", vector, target)
    a, b = half_operands(N, 2)
    expected = (np.minimum if op == "min" else np.maximum)(a, b)
    # The sign of min(0, -0) is numpy's order of operands for float16 and the reverse for
    # float32: not a semantics to copy (te's min/max carry `nsz`: either zero may come out).
    assert_bits_equal(run(f, [a, b], "float16"), expected, zero_sign=False)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_of_signed_zeros_are_a_zero_of_either_sign(op, dtype):
    # llvm.minimum / maximum are called with `nsz` (te/codegen/llvm/types.py): zeros are not
    # ordered, as numpy does not order them, and NaN still propagates (test above)
    f = elementwise(getattr(te, op), [dtype, dtype], dtype, True, "llvm")
    a = np.array([0.0, -0.0, 0.0, -0.0, np.nan, -0.0] * 40, dtype)[:N]
    b = np.array([-0.0, 0.0, 0.0, -0.0, -0.0, np.nan] * 40, dtype)[:N]
    out = run(f, [a, b], dtype)
    zeros = ~(np.isnan(a) | np.isnan(b))
    assert (out[zeros] == 0).all() and np.isnan(out[~zeros]).all()


def wide_operands(dtype: str) -> np.ndarray:
    """float32 or float64 values around the float16 range, with rounding traps: ties to even
    between halves, a value just above a tie (a cast through float32 would round it to the
    tie, then to even), overflow to inf and the largest value that does not."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(N) * 10.0 ** rng.integers(-9, 6, N)
    traps = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -40, 2.0 ** -25,
             2.0 ** -25 + 2.0 ** -50, 3 * 2.0 ** -26, 65519.99, 65520.0, 1e6, -65504.0,
             np.inf, -np.inf, np.nan, -0.0, 1e-40]
    x[:len(traps)] = traps
    return x.astype(dtype)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("src", ["float32", "float64"])
def test_cast_to_half_rounds_once_to_nearest_even(src, vector, target):
    f = elementwise(lambda x: x, [src], "float16", vector, target)
    x = wide_operands(src)
    with np.errstate(over="ignore"):
        expected = x.astype("float16")
    assert_bits_equal(run(f, [x], "float16"), expected)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dst", ["float32", "float64"])
def test_cast_from_half_is_exact(dst, vector, target):
    f = elementwise(lambda x: x, ["float16"], dst, vector, target)
    (x,) = half_operands(N, 1)
    x[-4:] = [np.inf, -np.inf, np.nan, -0.0]
    assert_bits_equal(run(f, [x], dst), x.astype(dst))


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("src", ["int8", "uint8", "int16", "uint16", "int32", "int64"])
def test_cast_integer_to_half(src, vector, target):
    info = np.iinfo(src)
    x = np.random.default_rng(3).integers(max(info.min, -2 ** 40), min(info.max, 2 ** 40), N,
                                          endpoint=True).astype(src)
    x[:4] = [info.min, info.max, min(2049, info.max), 0]  # 2049: a tie, rounds to 2048
    f = elementwise(lambda v: v, [src], "float16", vector, target)
    with np.errstate(over="ignore"):
        expected = x.astype("float16")
    assert_bits_equal(run(f, [x], "float16"), expected)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dst", ["int8", "uint8", "int32", "int64"])
def test_cast_half_to_integer_truncates(dst, vector, target):
    # Only values whose truncation fits dst: numpy leaves the others (and NaN) to the CPU.
    info = np.iinfo(dst)
    lo, hi = max(info.min, -65504), min(info.max, 65504)
    x = np.random.default_rng(4).uniform(lo, hi, N).astype("float16")
    x = np.clip(x, np.float16(lo), np.float16(hi))
    x[:6] = [-0.0, 0.75, -0.75, 2.5, hi, lo]
    f = elementwise(lambda v: v, ["float16"], dst, vector, target)
    np.testing.assert_array_equal(run(f, [x], dst), x.astype(dst))


def sequential_sum(terms: np.ndarray) -> np.ndarray:
    """Sum over the last axis in float16, one rounding per addition, in index order from
    a float16 zero: numpy's own np.sum is pairwise, a different order of roundings."""
    acc = np.zeros(terms.shape[:-1], "float16")
    with np.errstate(all="ignore"):
        for k in range(terms.shape[-1]):
            acc = acc + terms[..., k]
    return acc


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("product", [False, True], ids=["sum", "dot"])
def test_half_accumulator_matches_sequential_half_sum(product, vector, target):
    """sum_k A[i, k] (* B[k]) with a float16 accumulator: rows in the vector lanes when
    `vector` (k outside i), each row summed in k order either way; `dot` checks that no
    multiply is fused into the accumulation."""
    m, n = 37, 29
    a = te.placeholder((m, n), "float16", name="A")
    b = te.placeholder((n,), "float16", name="B")
    k = te.reduce_axis((0, n), name="k")
    term = (lambda i, k: a[i, k] * b[k]) if product else (lambda i, k: a[i, k])
    c = te.compute((m,), lambda i: te.sum(term(i, k), axis=k), name="C")
    s = te.create_schedule(c.op)
    if vector:
        outer, inner = s[c].split(c.op.axis[0], factor=8)
        s[c].reorder(outer, k, inner)
        s[c].vectorize(inner)
    args = [a, b, c] if product else [a, c]
    f = te.build(s, args, target)
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((m, n)) * 10.0 ** rng.integers(-2, 3, (m, n))).astype("float16")
    y = (rng.standard_normal(n) * 3).astype("float16")
    x[0, 3], x[1, 0], x[2, 5:7] = np.nan, np.inf, [60000, 30000]  # NaN, inf, overflow
    with np.errstate(all="ignore"):
        expected = sequential_sum(x * y if product else x)
    out = run(f, [x, y] if product else [x], "float16", (m,))
    assert_bits_equal(out, expected)
    finite = np.isfinite(expected)
    # and within float16's accumulated rounding of the float64 sum
    exact = (x.astype("float64") * y if product else x.astype("float64")).sum(axis=1)
    bound = 2.0 ** -11 * n * np.abs(x.astype("float64") * (y if product else 1)).sum(axis=1)
    assert (np.abs(out[finite] - exact[finite]) <= bound[finite] + 2.0 ** -24).all()


def test_half_max_reduction_propagates_nan():
    m, n = 11, 13
    a = te.placeholder((m, n), "float16", name="A")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((m,), lambda i: te.max(a[i, k], axis=k), name="C")
    f = te.build(te.create_schedule(c.op), [a, c], "llvm")
    (x,) = half_operands(m * n, 1)
    x = x.reshape(m, n)
    x[4, 7] = np.nan
    assert_bits_equal(run(f, [x], "float16", (m,)), x.max(axis=1), zero_sign=False)


HALF_FUSED = re.compile(r"f(add|sub|mul|div|neg) (fast|contract|reassoc)[^%]*half")


def test_half_arithmetic_carries_no_contraction_flag_but_float32_does():
    """The policy in LLVM IR: float16 operations have no `contract` (no FMA may skip a
    rounding); float32 ones keep it (one rounding fewer, as C compilers do)."""
    for dtype, fused in (("float16", False), ("float32", True)):
        f = elementwise(lambda a, b, c: a * b + c, [dtype] * 3, dtype, True, "llvm")
        ll = f.get_source("ll")
        assert ("fmul contract" in ll) is fused, ll
        assert not HALF_FUSED.search(ll)


def test_avx512fp16_code_multiplies_and_adds_apart():
    """Code for a CPU with half FMAs (built, not run): vmulph then vaddph, never a vfmadd
    on halves; float32 still gets its vfmadd."""
    target = "llvm -mcpu=sapphirerapids"
    half = elementwise(lambda a, b, c: a * b + c, ["float16"] * 3, "float16", True, target)
    asm = half.get_source("asm")
    assert "vmulph" in asm and "vaddph" in asm
    assert not re.search(r"vf(n)?m(add|sub)\w*(ph|sh)\b", asm)
    single = elementwise(lambda a, b, c: a * b + c, ["float32"] * 3, "float32", True, target)
    assert re.search(r"vfmadd\w*ps\b", single.get_source("asm"))


def test_code_without_f16c_calls_the_registered_conversions():
    """x86-64 without F16C: the half add is promoted through __extendhfsf2 / __truncsfhf2,
    which MCJIT must find (registered by runtime.half_libcalls), and runs."""
    f = elementwise(lambda a, b: a + b, ["float16"] * 2, "float16", False, "llvm -mcpu=x86-64")
    assert "__extendhfsf2" in f.get_source("asm") and "__truncsfhf2" in f.get_source("asm")
    a, b = half_operands(N, 2)
    with np.errstate(all="ignore"):
        assert_bits_equal(run(f, [a, b], "float16"), a + b)
