"""The reference interpreter against numpy on hand-built flattened PrimFuncs."""
import math
import re

import numpy as np
import pytest

import te
from te.compute import expr as E
from te.errors import ArgumentError
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.interp import InterpError, OutOfBoundsError, run_func

RNG = np.random.default_rng(0)
N = 13  # odd on purpose


def buf(name, dtype, shape):
    return ir.Buffer(name, dtype, tuple(E.as_expr(s) for s in shape), (), E.Var(name, "handle"))


def load(b, index):
    return ir.Load(ir.vector_dtype(b, index), b, index)


def loop(var, extent, body, kind=ir.SERIAL):
    return ir.For(var, E.const(0), E.as_expr(extent), kind, body)


def random_array(dtype, n=N, nonzero=False):
    if np.dtype(dtype).kind == "f":
        a = RNG.uniform(-4, 4, n).astype(dtype)
    elif np.dtype(dtype).kind == "b":
        a = RNG.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtype)
        a = RNG.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype)
    if nonzero:
        a[a == 0] = 1
    return a


def binary_func(dtype, make, out_dtype=None):
    """C[i] = make(A[i], B[i]) over a symbolic n."""
    n, i = E.Var("n"), E.Var("i")
    A, B, C = buf("A", dtype, (n,)), buf("B", dtype, (n,)), buf("C", out_dtype or dtype, (n,))
    body = loop(i, n, ir.Store(C, i, make(load(A, i), load(B, i))))
    return PrimFunc("f", (A, B, C), (n,), body)


def run_binary(dtype, make, a, b, out_dtype=None):
    c = np.zeros(a.shape, out_dtype or dtype)
    run_func(binary_func(dtype, make, out_dtype), [a, b, c])
    return c


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "uint8"])
def test_elementwise_ops_match_numpy(dtype):
    a, b = random_array(dtype), random_array(dtype)
    cases = [(lambda x, y: x + y, a + b), (lambda x, y: x - y, a - b),
             (lambda x, y: x * y, a * b), (te.min, np.minimum(a, b)),
             (te.max, np.maximum(a, b))]
    for make, expected in cases:
        got = run_binary(dtype, make, a, b)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(run_binary(dtype, lambda x, y: x < y, a, b, "bool"), a < b)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_floor_and_trunc_division_on_negative_ints(dtype):
    a = random_array(dtype)
    b = random_array(dtype, nonzero=True)
    a[:4], b[:4] = np.array([-7, 7, -7, 7], dtype), np.array([2, -2, -2, 2], dtype)
    trunc_q = np.array([int(x / y) if abs(x) < 2**52 else 0 for x, y in zip(a, b)], dtype)
    cases = [(te.floordiv, np.floor_divide(a, b)), (te.floormod, np.mod(a, b)),
             (te.truncdiv, trunc_q), (te.truncmod, np.fmod(a, b))]
    for make, expected in cases:
        np.testing.assert_array_equal(run_binary(dtype, make, a, b), expected)
    assert list(run_binary(dtype, te.truncdiv, a, b)[:4]) == [-3, -3, 3, 3]
    assert list(run_binary(dtype, te.floordiv, a, b)[:4]) == [-4, -4, 3, 3]
    assert list(run_binary(dtype, te.truncmod, a, b)[:4]) == [-1, 1, -1, 1]
    assert list(run_binary(dtype, te.floormod, a, b)[:4]) == [1, -1, -1, 1]


def test_integer_division_by_zero_gives_numpy_answers():
    a, b = random_array("int32"), random_array("int32", nonzero=True)
    b[5], a[6], b[6] = 0, -2**31, -1
    for make, expected in [(te.floordiv, [0, -2**31]), (te.floormod, [0, 0]),
                           (te.truncdiv, [0, -2**31]), (te.truncmod, [0, 0])]:
        assert list(run_binary("int32", make, a, b)[5:7]) == expected


def test_float_division_ops():
    a, b = random_array("float32"), random_array("float32", nonzero=True)
    np.testing.assert_array_equal(run_binary("float32", lambda x, y: x / y, a, b), a / b)
    np.testing.assert_array_equal(run_binary("float32", te.floordiv, a, b), np.floor(a / b))
    np.testing.assert_array_equal(run_binary("float32", te.floormod, a, b), np.mod(a, b))
    big = np.array([1e7 + 1, -1e7 - 1, 3e9], "float32")  # a / b rounds: still exact
    div = np.array([3.3, 3.3, -0.7], "float32")
    np.testing.assert_array_equal(run_binary("float32", te.floormod, big, div),
                                  np.mod(big, div))


def test_int32_wraparound():
    a = np.array([2**31 - 1, -2**31, 65536, 123456789, -5], "int32")
    b = np.array([1, -1, 65536, 1000, 7], "int32")
    np.testing.assert_array_equal(run_binary("int32", lambda x, y: x + y, a, b), a + b)
    np.testing.assert_array_equal(run_binary("int32", lambda x, y: x * y, a, b), a * b)
    np.testing.assert_array_equal(run_binary("int32", lambda x, y: x - y, a, b), a - b)
    assert run_binary("int32", lambda x, y: x + y, a, b)[0] == -2**31


def test_casts():
    n, i = E.Var("n"), E.Var("i")
    A = buf("A", "float32", (n,))
    I, Z, F = buf("I", "int32", (n,)), buf("Z", "bool", (n,)), buf("F", "float32", (n,))
    body = loop(i, n, ir.seq(
        ir.Store(I, i, load(A, i).astype("int32")),
        ir.Store(Z, i, load(I, i).astype("bool")),
        ir.Store(F, i, load(Z, i).astype("float32") + load(I, i).astype("int8").astype("float32"))))
    f = PrimFunc("casts", (A, I, Z, F), (n,), body)
    a = np.array([-3.7, -0.5, 0.2, 2.9, 300.0], "float32")
    arrays = [a, np.zeros(5, "int32"), np.zeros(5, bool), np.zeros(5, "float32")]
    run_func(f, arrays)
    np.testing.assert_array_equal(arrays[1], [-3, 0, 0, 2, 300])
    np.testing.assert_array_equal(arrays[2], [True, False, False, True, True])
    np.testing.assert_array_equal(arrays[3], [-2.0, 0.0, 0.0, 3.0, 1.0 + 44.0])


def test_reduction_with_allocate_temp():
    """Row sums of a 2-D argument through a one-element accumulator (a cache_write shape)."""
    m, n, i, k = E.Var("m"), E.Var("n"), E.Var("i"), E.Var("k")
    A, B = buf("A", "float32", (m, n)), buf("B", "float32", (m,))
    acc = buf("acc", "float32", (1,))
    zero = E.const(0)
    body = loop(i, m, ir.Allocate(acc, E.const(1), ir.seq(
        ir.Store(acc, zero, E.const(0.0)),
        loop(k, n, ir.Store(acc, zero, load(acc, zero) + load(A, i * n + k))),
        ir.Store(B, i, load(acc, zero)))))
    f = PrimFunc("rowsum", (A, B), (m, n), body)
    a = random_array("float32", 7 * 11).reshape(7, 11)
    b = np.zeros(7, "float32")
    run_func(f, [a, b])
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)
    b2 = np.zeros(7, "float32")
    run_func(f, [a, b2], scalars={"m": 7, "n": 11})
    np.testing.assert_array_equal(b, b2)


def test_unwritten_allocate_memory_reads_nan():
    i = E.Var("i")
    B, T = buf("B", "float32", (3,)), buf("T", "float32", (3,))
    body = ir.Allocate(T, E.const(3), ir.seq(
        ir.Store(T, E.const(1), E.const(5.0)), loop(i, 3, ir.Store(B, i, load(T, i)))))
    b = np.zeros(3, "float32")
    run_func(PrimFunc("f", (B,), (), body), [b])
    assert np.isnan(b[0]) and b[1] == 5.0 and np.isnan(b[2])


def test_lazy_select_padding_does_not_read_out_of_bounds():
    """B[i] = A[i - 1] inside, 0 in the one-element border: the false side guards A[-1]."""
    n, i = E.Var("n"), E.Var("i")
    A, B = buf("A", "float32", (n,)), buf("B", "float32", (n + 2,))
    inside = te.all(i >= 1, i < n + 1)
    body = loop(i, n + 2, ir.Store(B, i, te.if_then_else(inside, load(A, i - 1), 0.0)))
    f = PrimFunc("pad", (A, B), (n,), body)
    a, b = random_array("float32"), np.full(N + 2, 7, "float32")
    run_func(f, [a, b])
    np.testing.assert_array_equal(b, np.pad(a, 1))


@pytest.mark.parametrize("index,shown", [(-1, "A[-1]"), (N, f"A[{N}]")])
def test_out_of_bounds_load_raises(index, shown):
    i = E.Var("i")
    A, B = buf("A", "float32", (N,)), buf("B", "float32", (N,))
    body = loop(i, N, ir.Store(B, i, load(A, i + (index - (N - 1 if index > 0 else 0)))))
    with pytest.raises(IndexError, match=rf"load from {re.escape(shown)} is out of bounds"):
        run_func(PrimFunc("f", (A, B), (), body),
                 [random_array("float32"), np.zeros(N, "float32")])


def test_out_of_bounds_store_raises():
    i = E.Var("i")
    B = buf("B", "int32", (N,))
    body = loop(i, N + 1, ir.Store(B, i, i))
    with pytest.raises(OutOfBoundsError, match=f"store to B\\[{N}\\].*'B' has {N} elements"):
        run_func(PrimFunc("f", (B,), (), body), [np.zeros(N, "int32")])


def test_vector_ramp_broadcast_load_store():
    """C[8o:8o+8] = A[8o:8o+8]*2 + B[2*(8o..)] (a strided gather), then a vector select."""
    o = E.Var("o")
    A, B = buf("A", "float32", (32,)), buf("B", "float32", (64,))
    C, D = buf("C", "float32", (32,)), buf("D", "float32", (32,))
    dense = E.Ramp("int32x8", o * 8, E.const(1), 8)
    strided = E.Ramp("int32x8", o * 16, E.const(2), 8)
    two = E.Broadcast("float32x8", E.const(2.0), 8)
    positive = load(A, dense) > E.Broadcast("float32x8", E.const(0.0), 8)
    body = loop(o, 4, ir.seq(
        ir.Store(C, dense, load(A, dense) * two + load(B, strided)),
        ir.Store(D, dense, E.Select("float32x8", positive, load(A, dense), two))),
        kind=ir.VECTORIZED)
    a, b = random_array("float32", 32), random_array("float32", 64)
    c, d = np.zeros(32, "float32"), np.zeros(32, "float32")
    run_func(PrimFunc("vec", (A, B, C, D), (), body), [a, b, c, d])
    np.testing.assert_array_equal(c, a * np.float32(2) + b[::2])
    np.testing.assert_array_equal(d, np.where(a > 0, a, np.float32(2)))


def test_vector_load_out_of_bounds_raises():
    A, B = buf("A", "float32", (8,)), buf("B", "float32", (8,))
    idx = E.Ramp("int32x8", E.const(1), E.const(1), 8)
    body = ir.Store(B, E.Ramp("int32x8", E.const(0), E.const(1), 8), load(A, idx))
    with pytest.raises(OutOfBoundsError, match="load from A"):
        run_func(PrimFunc("f", (A, B), (), body), [np.zeros(8, "float32")] * 2)


UNARY = {"exp": np.exp, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
         "erf": np.vectorize(math.erf), "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
         "round": np.round, "trunc": np.trunc, "sin": np.sin, "cos": np.cos, "exp2": np.exp2}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_intrinsics_in_float32(name):
    n, i = E.Var("n"), E.Var("i")
    A, B = buf("A", "float32", (n,)), buf("B", "float32", (n,))
    body = loop(i, n, ir.Store(B, i, E.Call("float32", name, (load(A, i),))))
    a = random_array("float32")
    a[:3] = [0.5, 1.5, -2.5]  # round half to even
    b = np.zeros(N, "float32")
    run_func(PrimFunc("f", (A, B), (n,), body), [a, b])
    np.testing.assert_allclose(b, UNARY[name](a.astype("float64")), rtol=2e-6, atol=1e-7)


def test_positive_only_intrinsics():
    A, B = buf("A", "float32", (N,)), buf("B", "float32", (6 * N,))
    i = E.Var("i")
    x = load(A, i)
    outs = [te.log(x), te.sqrt(x), te.rsqrt(x), te.log2(x), te.log10(x), te.power(x, 1.5)]
    body = loop(i, N, ir.seq(*[ir.Store(B, i + k * N, v) for k, v in enumerate(outs)]))
    a = RNG.uniform(0.1, 5, N).astype("float32")
    b = np.zeros(6 * N, "float32")
    run_func(PrimFunc("f", (A, B), (), body), [a, b])
    want = np.concatenate([np.log(a), np.sqrt(a), 1 / np.sqrt(a), np.log2(a), np.log10(a),
                           a ** 1.5])
    np.testing.assert_allclose(b, want, rtol=2e-6)


def test_let_if_else_and_loop_min():
    i, x = E.Var("i"), E.Var("x")
    B = buf("B", "int32", (10,))
    body = ir.For(i, E.const(2), E.const(6), ir.PARALLEL, ir.LetStmt(x, i * 3, ir.IfThenElse(
        te.floormod(i, 2) == 0, ir.Store(B, i, x), ir.Store(B, i, -x))))
    b = np.zeros(10, "int32")
    run_func(PrimFunc("f", (B,), (), body), [b])
    np.testing.assert_array_equal(b, [0, 0, 6, -9, 12, -15, 18, -21, 0, 0])


def test_argument_checks():
    f = binary_func("float32", lambda x, y: x + y)
    a = random_array("float32")
    with pytest.raises(ArgumentError, match="'n' is 13"):
        run_func(f, [a, a[:5].copy(), np.zeros(5, "float32")])
    with pytest.raises(ArgumentError, match="must have dtype float32, got float64"):
        run_func(f, [a, a.astype("float64"), a.copy()])
    with pytest.raises(ArgumentError, match="C-contiguous"):
        run_func(f, [a, a, np.zeros(26, "float32")[::2]])
    with pytest.raises(ArgumentError, match="expected 3 array arguments"):
        run_func(f, [a, a])


def test_unflattened_ir_is_refused():
    A = te.placeholder((4,), name="A")
    C = te.compute((4,), lambda i: A[i] + 1.0, name="C")
    i = C.op.axis[0].var
    body = loop(i, 4, ir.ProducerStore(C, (i,), C.op.body[0]))
    with pytest.raises(InterpError, match="flattened IR only; got ProducerStore"):
        run_func(PrimFunc("f", (), (), body), [])


def test_unbound_variable_is_refused():
    B, j = buf("B", "int32", (4,)), E.Var("j")
    with pytest.raises(InterpError, match="variable 'j'"):
        run_func(PrimFunc("f", (B,), (), ir.Store(B, E.const(0), j)), [np.zeros(4, "int32")])

