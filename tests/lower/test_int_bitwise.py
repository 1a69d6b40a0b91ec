"""Bitwise operators and shifts give numpy's answers for every integer dtype.

te.bitwise_and/or/xor/not and te.shift_left/right (and the operators & | ^ ~ << >> on
integer expressions) against np.bitwise_and/or/xor, np.invert, np.left_shift and
np.right_shift, with operands over each dtype's whole range (its extremes among them) and
shift amounts below 0, past the width and at the dtype's limits (numpy shifts every bit
out: 0, or -1 for a negative value shifted right). In scalar, vectorized and parallel LLVM
code, constant folding (te's and the simplifier's), the loop-IR interpreter and the CUDA
code (run through the CPU emulator). Floats and bools are refused, naming the op.
"""
import numpy as np
import pytest
from helpers import bind, run_emulated

import te
import te.tvm as tvm
import te.tvm.topi  # noqa: F401  (tvm.topi)
from te.compute import expr as E
from te.lower.arith import Analyzer, bitwise_bound
from te.lower.interp import run_func

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
N = 37  # odd: vectorized loops keep a tail
OPS = {
    "bitwise_and": (te.bitwise_and, np.bitwise_and),
    "bitwise_or": (te.bitwise_or, np.bitwise_or),
    "bitwise_xor": (te.bitwise_xor, np.bitwise_xor),
    "shift_left": (te.shift_left, np.left_shift),
    "shift_right": (te.shift_right, np.right_shift),
}


def values(dtype: str, rng) -> np.ndarray:
    """Random values over the whole range, the extremes, 0 and -1 among them."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, endpoint=True, dtype=dtype)
    a[:5] = np.array([info.min, info.max, 0, 1, info.max // 2 + 1], dtype)
    if info.min:
        a[5] = -1
    return a


def amounts(dtype: str, rng) -> np.ndarray:
    """Shift amounts: in range, the width and past it, negative, the dtype's extremes."""
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -3), info.bits + 3, N, endpoint=True).astype(dtype)
    edges = [0, 1, info.bits - 1, info.bits, info.bits + 1, info.max, info.min]
    edges += [-1, -info.bits] if info.min else [2 * info.bits]
    a[:len(edges)] = np.array(edges, dtype)
    return a


def operands(op: str, dtype: str, rng) -> tuple:
    a = values(dtype, rng)
    return a, (amounts(dtype, rng) if op.startswith("shift") else values(dtype, rng))


def stage(f, X, Y, name: str):
    return te.compute((N,), lambda i: f(X[i], Y[i]), name=name)


def elementwise(dtype: str):
    """A, B, the shift amounts S, and one output per op (bitwise_not last)."""
    A, B, S = (te.placeholder((N,), dtype, name=n) for n in "ABS")
    outs = [stage(f, A, S if op.startswith("shift") else B, op) for op, (f, _) in OPS.items()]
    outs.append(te.compute((N,), lambda i: te.bitwise_not(A[i]), name="bitwise_not"))
    return [A, B, S], outs


def answers(dtype: str, seed: int) -> tuple:
    """(inputs a, b and the shift amounts, numpy's answer per output of elementwise())."""
    rng = np.random.default_rng(seed)
    a, b, s = values(dtype, rng), values(dtype, rng), amounts(dtype, rng)
    want = [ref(a, s if op.startswith("shift") else b) for op, (_, ref) in OPS.items()]
    return [a, b, s], want + [np.invert(a)]


@pytest.mark.parametrize("schedule", ["scalar", "vector", "parallel"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_llvm_gives_numpy_answers(dtype, schedule):
    ins, want = answers(dtype, 14)
    args, outs = elementwise(dtype)
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        if schedule == "vector":
            _, inner = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(inner)
        elif schedule == "parallel":
            outer, inner = s[t].split(t.op.axis[0], factor=4)
            s[t].parallel(outer)
            s[t].vectorize(inner)
    got = [np.zeros(N, dtype) for _ in outs]
    te.build(s, args + outs)(*ins, *got)
    for t, g, w in zip(outs, got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{t.op.name} {dtype} {schedule}")


def test_vector_code_uses_vector_instructions():
    args, outs = elementwise("int16")
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        _, inner = s[t].split(t.op.axis[0], factor=8)
        s[t].vectorize(inner)
    text = te.build(s, args + outs).get_source()
    for inst in ("and", "or", "xor", "shl", "ashr"):
        assert f"{inst} <8 x i16>" in text, inst


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_operators_on_integer_expressions(dtype):
    (a, b, sh), _ = answers(dtype, 3)
    A, B, S = (te.placeholder((N,), dtype, name=n) for n in "ABS")
    C = te.compute((N,), lambda i: ((A[i] & B[i]) | (A[i] ^ ~B[i])) ^ (A[i] << S[i])
                   ^ (B[i] >> S[i]) ^ (A[i] & 5), name="C")
    c = np.zeros(N, dtype)
    te.build(te.create_schedule(C.op), [A, B, S, C])(a, b, sh, c)
    five = np.asarray(5, dtype)
    np.testing.assert_array_equal(c, ((a & b) | (a ^ ~b)) ^ np.left_shift(a, sh)
                                  ^ np.right_shift(b, sh) ^ (a & five))


def _fold(op: str, dtype: str, x: int, y: int):
    return OPS[op][0](te.const(x, dtype), te.const(y, dtype))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_constants_fold_to_numpy_answers(dtype):
    rng = np.random.default_rng(5)
    for op, (_, ref) in OPS.items():
        a, b = operands(op, dtype, rng)
        want = ref(a, b)
        for x, y, w in zip(a.tolist(), b.tolist(), want.tolist()):
            c = _fold(op, dtype, x, y)
            assert isinstance(c, E.Const) and c.dtype == dtype and c.value == w, \
                (op, dtype, x, y, c, w)
    for x in values(dtype, rng).tolist():
        c = te.bitwise_not(te.const(x, dtype))
        assert isinstance(c, E.Const) and c.value == int(np.invert(np.asarray(x, dtype)))


def test_folding_wraps_and_keeps_the_sign():
    assert te.bitwise_not(te.const(0, "uint8")).value == 255
    assert te.bitwise_not(te.const(0, "int64")).value == -1
    assert te.bitwise_not(te.const(-2**63, "int64")).value == 2**63 - 1
    assert te.bitwise_xor(te.const(-1, "int8"), te.const(127, "int8")).value == -128
    assert te.bitwise_and(te.const(-6, "int16"), te.const(-3, "int16")).value == -8
    assert te.bitwise_or(te.const(2**63, "uint64"), te.const(1, "uint64")).value == 2**63 + 1
    assert te.shift_left(te.const(1, "int8"), te.const(7, "int8")).value == -128
    assert te.shift_left(te.const(3, "uint32"), te.const(31, "uint32")).value == 2**31
    assert te.shift_left(te.const(1, "int32"), te.const(32, "int32")).value == 0
    assert te.shift_left(te.const(1, "int32"), te.const(-1, "int32")).value == 0
    assert te.shift_right(te.const(-128, "int8"), te.const(100, "int8")).value == -1
    assert te.shift_right(te.const(-128, "int8"), te.const(-1, "int8")).value == -1
    assert te.shift_right(te.const(127, "int8"), te.const(8, "int8")).value == 0
    assert te.shift_right(te.const(2**64 - 1, "uint64"), te.const(63, "uint64")).value == 1
    assert te.shift_right(te.const(-2**63, "int64"), te.const(63, "int64")).value == -1


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "uint64"])
def test_the_simplifier_folds_what_te_built_unfolded(dtype):
    """Binary nodes of constants built directly (as passes do) fold in the simplifier, to
    the same constants, inside a larger expression too."""
    rng = np.random.default_rng(9)
    x = te.var("x", dtype)
    ana = Analyzer()
    for op, (_, ref) in OPS.items():
        a, b = operands(op, dtype, rng)
        for u, v, w in zip(a.tolist()[:12], b.tolist()[:12], ref(a, b).tolist()[:12]):
            raw = E.Binary(dtype, op, E.Const(dtype, u), E.Const(dtype, v))
            got = ana.simplify(raw)
            assert isinstance(got, E.Const) and got.value == w, (op, u, v, got, w)
            inner = ana.simplify(E.Binary(dtype, "bitwise_or", x, raw))
            assert isinstance(inner.b, E.Const) and inner.b.value == w
    assert ana.simplify(E.bitwise_not(x) - E.bitwise_not(x)).value == 0


def test_the_simplifier_bounds_a_mask():
    """x & 7 of a non-negative x is below 8: a comparison on it is decided."""
    x = te.var("x")
    ana = Analyzer({x: (0, 1000)})
    assert ana.can_prove(te.bitwise_and(x, 7) < 8)
    assert ana.can_prove(te.shift_right(x, te.var("s")) <= 1000)
    assert not ana.can_prove(te.bitwise_or(x, 7) < 1000)


def test_bitwise_bounds_hold_for_every_value_in_the_ranges():
    """bitwise_bound (the simplifier's and index_width's rule) against brute force, over
    small ranges of either sign, with ends unknown too (int8 amounts for the shifts)."""
    rng = np.random.default_rng(4)
    for _ in range(300):
        (a0, a1), (b0, b1) = (sorted(rng.integers(-70, 70, 2).tolist()) for _ in "ab")
        xs, ys = np.arange(a0, a1 + 1, dtype="int8"), np.arange(b0, b1 + 1, dtype="int8")
        for op, (_, ref) in OPS.items():
            got = ref(xs[:, None], ys[None, :])
            for a, b in (((a0, a1), (b0, b1)), ((a0, None), (b0, b1)), ((None, a1), (b0, b1))):
                lo, hi = bitwise_bound(op, a, b)
                assert lo is None or got.min() >= lo, (op, a, b, lo)
                assert hi is None or got.max() <= hi, (op, a, b, hi)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
def test_interpreter_gives_numpy_answers(dtype, vector):
    ins, want = answers(dtype, 8)
    args, outs = elementwise(dtype)
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        if vector:
            _, inner = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(inner)
    got = [np.zeros(N, dtype) for _ in outs]
    run_func(te.lower(s, args + outs), ins + got)
    for t, g, w in zip(outs, got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{t.op.name} {dtype}")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_cuda_gives_numpy_answers(dtype):
    ins, want = answers(dtype, 21)
    args, outs = elementwise(dtype)
    s = te.create_schedule([t.op for t in outs])
    for t in outs:
        bind(s, t, t.op.axis[0], 16)
    mod = te.build(s, args + outs, target="cuda")
    got = run_emulated(mod, ins, [(N,)] * len(outs), [dtype] * len(outs))
    for t, g, w in zip(outs, got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{t.op.name} {dtype}")


def test_cuda_source_spells_the_c_operators():
    A = te.placeholder((N,), "uint8", name="A")
    B = te.placeholder((N,), "uint8", name="B")
    C = te.compute((N,), lambda i: (A[i] & B[i]) | (A[i] ^ B[i]) | ~A[i], name="C")
    D = te.compute((N,), lambda i: (A[i] << B[i]) | (A[i] >> 1), name="D")
    s = te.create_schedule([C.op, D.op])
    for t in (C, D):
        bind(s, t, t.op.axis[0], 16)
    src = te.build(s, [A, B, C, D], target="cuda").get_source()
    assert "(A[" in src and " & B[" in src and " ^ B[" in src and "(~A[" in src
    assert "te_shift_left<unsigned char>(" in src and "te_shift_right<unsigned char>(" in src
    assert "__device__ __forceinline__ T te_shift_left(T a, T b)" in src
    # ~ of a promoted unsigned char is a negative int: the result is cast back
    assert "((unsigned char)(~A[" in src


@pytest.mark.parametrize("fn", [te.bitwise_and, te.bitwise_or, te.bitwise_xor,
                                te.shift_left, te.shift_right])
def test_float_operands_are_refused(fn):
    name = fn.__name__
    x = te.var("x", "float32")
    with pytest.raises(te.DTypeError, match=rf"^te\.{name}: expected integer operands, got "
                                            rf"dtype float32$"):
        fn(x, x)
    with pytest.raises(te.DTypeError, match=rf"^te\.{name}: expected integer operands, got "
                                            rf"dtype float64$"):
        fn(te.var("i"), te.const(1.5, "float64"))   # int32 promoted to float64


def test_bitwise_not_and_bools_are_refused():
    with pytest.raises(te.DTypeError, match=r"^te\.bitwise_not: expected integer operands, "
                                            r"got dtype float16$"):
        te.bitwise_not(te.var("x", "float16"))
    c = te.var("i") < 3
    with pytest.raises(te.DTypeError, match=r"^te\.bitwise_and: expected integer operands, "
                                            r"got dtype bool \(te\.logical_and is the bool "
                                            r"one\)$"):
        te.bitwise_and(c, c)
    with pytest.raises(te.DTypeError, match=r"te\.bitwise_not: .* got dtype bool "
                                            r"\(te\.logical_not is the bool one\)"):
        te.bitwise_not(c)
    with pytest.raises(te.DTypeError, match=r"^te\.shift_left: expected integer operands, "
                                            r"got dtype bool$"):
        te.shift_left(c, c)


def test_operators_stay_logical_on_bool_conditions():
    i, j = te.var("i"), te.var("j")
    c, d = i < 3, j > 1
    assert (c & d).op == "and" and (c | d).op == "or" and isinstance(~c, E.Not)
    assert (c ^ d).op == "ne" and (c ^ d).dtype == "bool"
    assert (c & 1).op == "and" and (True | c).op == "or"   # a bool takes part: logical
    assert (i & j).op == "bitwise_and" and (3 | j).op == "bitwise_or"
    assert (i ^ 1).op == "bitwise_xor" and (~i).op == "bitwise_xor" and (~i).b.value == -1
    assert (i << 2).op == "shift_left" and (1 >> j).op == "shift_right"
    with pytest.raises(te.DTypeError, match=r"te\.bitwise_xor: expected integer operands"):
        te.var("x", "float32") ^ 1
    with pytest.raises(te.DTypeError, match=r"te\.shift_left: expected integer operands"):
        te.var("x", "float32") << 1


def test_promotion_follows_the_other_binary_operators():
    a, b = te.var("a", "int8"), te.var("b", "uint16")
    assert te.bitwise_and(a, b).dtype == "int32"   # as a + b
    assert te.bitwise_or(a, 3).dtype == "int8" and te.shift_left(b, 1).dtype == "uint16"
    assert te.bitwise_not(b).b.value == 65535


def test_tvm_names():
    x, y = tvm.te.var("x"), tvm.te.var("y")
    assert tvm.tir.bitwise_and(x, y).op == "bitwise_and"
    assert tvm.tir.bitwise_or(x, y).op == "bitwise_or"
    assert tvm.tir.bitwise_xor(x, y).op == "bitwise_xor"
    assert tvm.tir.bitwise_not(x).op == "bitwise_xor"
    assert tvm.tir.shift_left(x, 1).op == "shift_left"
    assert tvm.tir.shift_right(x, 1).op == "shift_right"
    assert tvm.te.bitwise_and is te.bitwise_and and tvm.te.bitwise_not is te.bitwise_not
    A = tvm.te.placeholder((4, N), "int32", name="A")
    B = tvm.te.placeholder((N,), "int32", name="B")
    outs = [tvm.topi.bitwise_and(A, B), tvm.topi.bitwise_or(A, 6), tvm.topi.bitwise_xor(A, B),
            tvm.topi.bitwise_not(A), tvm.topi.left_shift(A, 3), tvm.topi.right_shift(A, B)]
    s = tvm.te.create_schedule([t.op for t in outs])
    f = te.build(s, [A, B] + outs)
    rng = np.random.default_rng(2)
    a = rng.integers(-2**31, 2**31, (4, N)).astype("int32")
    b = rng.integers(-40, 40, N).astype("int32")
    got = [np.zeros((4, N), "int32") for _ in outs]
    f(a, b, *got)
    want = [a & b, a | 6, a ^ b, ~a, np.left_shift(a, np.int32(3)), np.right_shift(a, b)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_mask_and_a_shift_in_an_index():
    """Index arithmetic with & and >>: the bounds of the access are inferred."""
    A = te.placeholder((64,), "float32", name="A")
    C = te.compute((N,), lambda i: A[(i & 7) + (i >> 1)], name="C")
    s = te.create_schedule(C.op)
    a = np.arange(64, dtype="float32")
    c = np.zeros(N, "float32")
    te.build(s, [A, C])(a, c)
    i = np.arange(N)
    np.testing.assert_array_equal(c, a[(i & 7) + (i >> 1)])


def test_a_shift_in_an_index_is_exact_like_the_division_it_stands_for():
    """(b * 3000000) >> 20 exceeds int32 before the shift: a shift by a constant below the
    width is widened with the rest of the index (as // 2**20 is), not wrapped."""
    A = te.placeholder((4000,), "float32", name="A")
    B = te.placeholder((8,), "int32", name="B")
    C = te.compute((8,), lambda i: A[(B[i] * 3000000) >> 20], name="C")
    f = te.build(te.create_schedule(C.op), [A, B, C], instrument_bound_checkers=True)
    b = np.array([0, 1, 100, 700, 999, 1000, 1300, 5], "int32")
    out = np.zeros(8, "float32")
    f(np.arange(4000, dtype="float32"), b, out)
    np.testing.assert_array_equal(out, (b.astype(np.int64) * 3000000) >> 20)
    D = te.compute((1000,), lambda i: A[(i * 3000000) >> 20], name="D")
    g = te.build(te.create_schedule(D.op), [A, D])
    got = np.zeros(1000, "float32")
    g(np.arange(4000, dtype="float32"), got)
    np.testing.assert_array_equal(got, np.arange(1000, dtype=np.int64) * 3000000 >> 20)
