"""LLVM codegen: hand-built flat PrimFuncs compiled with MCJIT and checked against numpy.

Takes te.lower.ir nodes and te.codegen.llvm.codegen; compiles with llvmlite.binding directly
(the runtime package is not needed) and calls through ctypes, with the helpers of
tests/llvm_helpers.py, which the other test_codegen_llvm_* files share.
"""
from __future__ import annotations


import numpy as np
import pytest
from llvm_helpers import (N, RNG, binop, buffer, compile_func, elementwise, guarded_page_array,
                          i32, random_array)

from runtime.checker import INDEX_LIMIT
from te.codegen.llvm.codegen import codegen_llvm
from te.compute import expr as E
from te.errors import BuildError
from te.lower import ir
from te.lower.func import PrimFunc


def trunc_div(a, b):
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)


REFERENCE = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "floordiv": np.floor_divide, "floormod": np.mod,
    "truncdiv": trunc_div,
    "truncmod": lambda a, b: (np.fmod(a, b) if a.dtype.kind == "f"
                              else (a - trunc_div(a, b) * b).astype(a.dtype)),
    "min": np.minimum, "max": np.maximum,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "shift_left": np.left_shift, "shift_right": np.right_shift,   # any amount, as numpy
}
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]
FLOAT_DTYPES = ["float32", "float64"]
BINARY_CASES = (
    [(op, d) for d in INT_DTYPES + FLOAT_DTYPES for op in E.ARITH_OPS + E.COMPARE_OPS
     if not (op == "div" and d in INT_DTYPES)]
    + [(op, d) for d in INT_DTYPES for op in E.BITWISE_OPS]
    + [(op, "bool") for op in ("and", "or", "eq", "ne", "lt", "gt")])


@pytest.mark.parametrize("op,dtype", BINARY_CASES)
def test_binary_elementwise_matches_numpy(op, dtype):
    out_dtype = "bool" if op in E.COMPARE_OPS + E.LOGIC_OPS else dtype
    f = elementwise(f"bin_{op}_{dtype}", N, [dtype, dtype], out_dtype,
                    lambda a, b: binop(op, a, b))
    a = random_array(dtype)
    b = random_array(dtype, nonzero=op in ("floordiv", "floormod", "truncdiv", "truncmod"))
    if op in E.COMPARE_OPS:
        b[::3] = a[::3]  # exercise equality
    out = np.zeros(N, out_dtype)
    compile_func(f)(a, b, out)
    with np.errstate(all="ignore"):
        expected = REFERENCE[op](a, b)
    if dtype.startswith("float"):
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "float32", "float64"])
def test_floor_and_trunc_division_on_negative_numbers(dtype):
    signs = np.array([(1, 1), (1, -1), (-1, 1), (-1, -1)] * 10)
    a = (np.arange(40) % 13 + 1) * signs[:, 0]
    b = (np.arange(40) % 5 + 2) * signs[:, 1]
    a, b = a.astype(dtype), b.astype(dtype)
    n = len(a)
    for op in ("floordiv", "floormod", "truncdiv", "truncmod"):
        f = elementwise(f"neg_{op}_{dtype}", n, [dtype, dtype], dtype,
                        lambda x, y: binop(op, x, y))
        out = np.zeros(n, dtype)
        compile_func(f)(a, b, out)
        np.testing.assert_allclose(out, REFERENCE[op](a, b), rtol=1e-6, err_msg=op)
    # numpy's // and % floor; np.fmod truncates: the two must differ somewhere here.
    assert (np.mod(a, b) != np.fmod(a, b)).any()


def test_float_min_max_propagate_nan_like_numpy():
    a = np.array([1.0, np.nan, 3.0, -0.5, np.nan], "float32")
    b = np.array([2.0, 1.0, np.nan, -0.25, np.nan], "float32")
    for op in ("min", "max"):
        f = elementwise(f"nan_{op}", 5, ["float32", "float32"], "float32",
                        lambda x, y: binop(op, x, y))
        out = np.zeros(5, "float32")
        compile_func(f)(a, b, out)
        np.testing.assert_array_equal(out, REFERENCE[op](a, b))


CAST_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64"]


@pytest.mark.parametrize("src", CAST_DTYPES)
@pytest.mark.parametrize("dst", CAST_DTYPES)
def test_cast_matches_numpy_astype(src, dst):
    if src == dst:
        return
    if src.startswith("float"):  # values every destination can hold (no UB in fptosi)
        lo = 0 if dst in ("uint8", "bool") else -100
        a = RNG.uniform(lo, 120, N).astype(src)
        a[::5] = np.trunc(a[::5])
        a[1] = 0.0
    else:
        a = random_array(src)
        if dst == "bool":
            a[::4] = 0
    f = elementwise(f"cast_{src}_{dst}", N, [src], dst, lambda x: E.Cast(dst, x))
    out = np.zeros(N, dst)
    compile_func(f)(a, out)
    with np.errstate(all="ignore"):
        expected = a.astype(dst)
    np.testing.assert_array_equal(out, expected)


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "sin": np.sin, "cos": np.cos, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
    "tan": np.tan, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "asin": np.arcsin, "acos": np.arccos, "atanh": np.arctanh, "acosh": np.arccosh,
}


def erf_reference(x):
    import math
    return np.array([math.erf(float(v)) for v in x], x.dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(UNARY) + ["erf"])
def test_intrinsics_match_numpy(name, dtype):
    positive = name in ("log", "sqrt", "rsqrt", "log2", "log10")
    a = RNG.uniform(0.1 if positive else -4, 4, N).astype(dtype)
    if name in ("asin", "acos", "atanh"):
        a = RNG.uniform(-0.99, 0.99, N).astype(dtype)  # their domain
    elif name == "acosh":
        a = RNG.uniform(1, 5, N).astype(dtype)
    elif not positive:
        a[:4] = np.array([0.5, 1.5, 2.5, -2.5], dtype)  # round half to even, as numpy
    f = elementwise(f"call_{name}_{dtype}", N, [dtype], dtype,
                    lambda x: E.Call(dtype, name, (x,)))
    out = np.zeros(N, dtype)
    compile_func(f)(a, out)
    expected = erf_reference(a) if name == "erf" else UNARY[name](a)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_libm_intrinsics_in_a_vectorized_loop():
    """tan, acos, ... are libm calls: a vectorized loop calls them lane by lane (an extern
    call there would be declared with a vector signature too, which LLVM refuses)."""
    import te
    n = 37
    for name in ("tan", "acos", "asinh"):
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: getattr(te, name)(A[i]), name="B")
        s = te.create_schedule(B.op)
        _, inner = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(inner)
        f = te.build(s, [A, B], target="llvm", name=f"vec_{name}")
        a = RNG.uniform(-0.9, 0.9, n).astype("float32")
        out = np.zeros(n, "float32")
        f(a, out)
        expected = {"tan": np.tan, "acos": np.arccos, "asinh": np.arcsinh}[name](a)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_pow_and_integer_abs():
    a = RNG.uniform(0.5, 3, N).astype("float32")
    b = RNG.uniform(-2, 2, N).astype("float32")
    f = elementwise("call_pow", N, ["float32", "float32"], "float32",
                    lambda x, y: E.Call("float32", "pow", (x, y)))
    out = np.zeros(N, "float32")
    compile_func(f)(a, b, out)
    np.testing.assert_allclose(out, np.power(a, b), rtol=1e-5)
    for dtype in ("int8", "int32", "int64"):
        x = random_array(dtype)
        g = elementwise(f"iabs_{dtype}", N, [dtype], dtype,
                        lambda v: E.Call(dtype, "abs", (v,)))
        out = np.zeros(N, dtype)
        compile_func(g)(x, out)
        np.testing.assert_array_equal(out, np.abs(x))


def test_float_constants_inf_and_nan():
    f = elementwise("consts", N, ["float32"], "float32",
                    lambda x: binop("max", x, E.Const("float32", float("-inf"))))
    a = random_array("float32")
    out = np.zeros(N, "float32")
    compile_func(f)(a, out)
    np.testing.assert_array_equal(out, a)
    g = elementwise("nan_const", N, ["float32"], "bool",
                    lambda x: binop("ne", x, E.Const("float32", float("nan"))))
    flags = np.zeros(N, bool)
    compile_func(g)(a, flags)
    assert flags.all()


def test_extern_call_to_libm():
    f = elementwise("extern_cbrt", N, ["float64"], "float64",
                    lambda x: E.Call("float64", "cbrt", (x,), extern=True))
    a = random_array("float64")
    out = np.zeros(N, "float64")
    compile_func(f)(a, out)
    np.testing.assert_allclose(out, np.cbrt(a))


def test_lazy_select_guards_out_of_bounds_load():
    """pad[i] = (1 <= i < n+1) ? a[i-1] : 0 over a buffer whose neighbours are unmapped."""
    n, pad = 4096 // 4, 3
    i = E.Var("i", "int32")
    a, out = buffer("a", "float32", n), buffer("out", "float32", n + 2 * pad)
    shifted = binop("sub", i, i32(pad))
    inside = E.Binary("bool", "and", binop("ge", shifted, i32(0)), binop("lt", shifted, i32(n)))
    value = E.Select("float32", inside, ir.Load("float32", a, shifted), E.Const("float32", 0.0))
    body = ir.For(i, i32(0), i32(n + 2 * pad), ir.SERIAL, ir.Store(out, i, value))
    f = PrimFunc("pad", (a, out), (), body)
    assert "phi" in codegen_llvm(f, index_limit=INDEX_LIMIT)
    data, guard = guarded_page_array(n)
    data[:] = RNG.standard_normal(n).astype("float32")
    result = np.zeros(n + 2 * pad, "float32")
    compile_func(f)(data, result)
    np.testing.assert_array_equal(result, np.pad(data, pad))
    del guard


def test_scalar_params_and_let_and_if():
    """out[i] = i < m ? in[i] * k : -1, with k bound by a LetStmt; m is a scalar param."""
    n = E.Var("n", "int32")
    m = E.Var("m", "int64")
    i, k = E.Var("i", "int32"), E.Var("k", "float32")
    src, out = buffer("src", "float32", n), buffer("out", "float32", n)
    then = ir.Store(out, i, binop("mul", ir.Load("float32", src, i), k))
    other = ir.Store(out, i, E.Const("float32", -1.0))
    cond = binop("lt", E.Cast("int64", i), m)
    body = ir.LetStmt(k, E.Const("float32", 2.5),
                      ir.For(i, i32(0), n, ir.SERIAL, ir.IfThenElse(cond, then, other)))
    f = PrimFunc("let_if", (src, out), (n, m), body)
    a = random_array("float32")
    result = np.zeros(N, "float32")
    compile_func(f)(a, result, N, 20)
    expected = np.where(np.arange(N) < 20, a * 2.5, -1).astype("float32")
    np.testing.assert_array_equal(result, expected)


def test_signature_attributes():
    f = elementwise("sig", N, ["float32"], "float32", lambda x: x)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    define = next(line for line in text.splitlines() if line.startswith("define"))
    assert define.startswith('define i32 @"sig"(ptr ')
    for attr in ("noalias", "nonnull", "captures(none)"):
        assert define.count(attr) == 2, define
    assert "GOMP" not in text and "omp_" not in text


def test_thread_binding_is_a_build_error():
    i = E.Var("threadIdx.x", "int32")
    out = buffer("out", "float32", 32)
    body = ir.For(i, i32(0), i32(32), ir.THREAD_BINDING, ir.Store(out, i, E.Const("float32", 1.0)),
                  thread_tag="threadIdx.x")
    with pytest.raises(BuildError, match="thread-bound loops need target 'cuda'"):
        codegen_llvm(PrimFunc("bad", (out,), (), body), index_limit=INDEX_LIMIT)


def test_unbound_buffer_is_a_build_error():
    out, tmp = buffer("out", "float32", 4), buffer("tmp", "float32", 4)
    body = ir.Store(out, i32(0), ir.Load("float32", tmp, i32(0)))
    with pytest.raises(BuildError, match="tmp"):
        codegen_llvm(PrimFunc("bad2", (out,), (), body), index_limit=INDEX_LIMIT)


def test_smoke_add():
    f = elementwise("add_f32", 37, ["float32", "float32"], "float32",
                    lambda a, b: binop("add", a, b))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(37).astype("float32"), rng.standard_normal(37).astype("float32")
    out = np.zeros(37, "float32")
    compile_func(f)(a, b, out)
    np.testing.assert_allclose(out, a + b)
