"""LLVM codegen: hand-built flat PrimFuncs compiled with MCJIT and checked against numpy.

Takes te.lower.ir nodes and te.codegen.llvm.codegen; compiles with llvmlite.binding directly
(the runtime package is not needed) and calls through ctypes. Other test_codegen_llvm_*
files import the helpers at the top of this one.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import binding as llvm

from runtime.checker import INDEX_LIMIT
from te.compute import expr as E
from te.errors import BuildError
from te.lower import ir
from te.lower.func import PrimFunc
from te.codegen.llvm.codegen import codegen_llvm

_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
           "uint32": ctypes.c_uint32,
           "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double}
_ENGINES = []  # keep engines alive: their code is freed with them


def target_machine():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3)


def optimized_module(text: str):
    tm = target_machine()
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def assembly(func: PrimFunc, parallel: bool = True) -> str:
    mod, tm = optimized_module(codegen_llvm(func, parallel, index_limit=INDEX_LIMIT))
    return tm.emit_assembly(mod)


def compile_func(func: PrimFunc, parallel: bool = True):
    """A Python callable taking numpy arrays (for buffers) then Python numbers (scalars)."""
    llvm.load_library_permanently("libgomp.so.1")
    text = codegen_llvm(func, parallel, index_limit=INDEX_LIMIT)
    mod, tm = optimized_module(text)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _ENGINES.append(engine)
    addr = engine.get_function_address(func.name)
    assert addr
    argtypes = ([ctypes.c_void_p] * len(func.params)
                + [_CTYPES[v.dtype] for v in func.scalar_params])
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(addr)

    def call(*args):
        arrays = args[:len(func.params)]
        for a, buf in zip(arrays, func.params):
            assert a.flags.c_contiguous and a.dtype == np.dtype(buf.dtype)
        ptrs = [a.ctypes.data for a in arrays]
        assert cfunc(*ptrs, *args[len(func.params):]) == 0
    return call


def buffer(name: str, dtype: str, n: int | E.Expr) -> ir.Buffer:
    return ir.Buffer(name, dtype, (n,), (1,), data=E.Var(name, "handle"))


def i32(v: int) -> E.Const:
    return E.Const("int32", v)


def binop(op: str, a: E.Expr, b: E.Expr) -> E.Binary:
    dtype = "bool" if op in E.COMPARE_OPS else a.dtype
    return E.Binary(dt_with_lanes(dtype, a.dtype), op, a, b)


def dt_with_lanes(base: str, like: str) -> str:
    from te import dtype as dt
    return dt.with_lanes(base, dt.lanes(like))


def elementwise(name: str, n: int, in_dtypes: list, out_dtype: str, body) -> PrimFunc:
    """out[i] = body(*[in_k[i]]) for i in [0, n)."""
    i = E.Var("i", "int32")
    ins = [buffer(f"in{k}", d, n) for k, d in enumerate(in_dtypes)]
    out = buffer("out", out_dtype, n)
    loads = [ir.Load(b.dtype, b, i) for b in ins]
    store = ir.Store(out, i, body(*loads))
    loop = ir.For(i, i32(0), i32(n), ir.SERIAL, store)
    return PrimFunc(name, tuple(ins) + (out,), (), loop)


N = 37  # odd, not a multiple of any vector width
RNG = np.random.default_rng(2024)


def random_array(dtype: str, n: int = N, nonzero: bool = False) -> np.ndarray:
    if dtype == "bool":
        return RNG.integers(0, 2, n).astype(bool)
    if dtype.startswith("float"):
        a = (RNG.standard_normal(n) * 10).astype(dtype)
    elif dtype.startswith("uint"):
        a = RNG.integers(1 if nonzero else 0, 200, n).astype(dtype)
    else:
        a = RNG.integers(-100, 100, n).astype(dtype)
    if nonzero:
        a[a == 0] = 7
    return a


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
}
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]
FLOAT_DTYPES = ["float32", "float64"]
BINARY_CASES = (
    [(op, d) for d in INT_DTYPES + FLOAT_DTYPES for op in E.ARITH_OPS + E.COMPARE_OPS
     if not (op == "div" and d in INT_DTYPES)]
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
}


def erf_reference(x):
    import math
    return np.array([math.erf(float(v)) for v in x], x.dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(UNARY) + ["erf"])
def test_intrinsics_match_numpy(name, dtype):
    positive = name in ("log", "sqrt", "rsqrt", "log2", "log10")
    a = RNG.uniform(0.1 if positive else -4, 4, N).astype(dtype)
    if not positive:
        a[:4] = np.array([0.5, 1.5, 2.5, -2.5], dtype)  # round half to even, as numpy
    f = elementwise(f"call_{name}_{dtype}", N, [dtype], dtype,
                    lambda x: E.Call(dtype, name, (x,)))
    out = np.zeros(N, dtype)
    compile_func(f)(a, out)
    expected = erf_reference(a) if name == "erf" else UNARY[name](a)
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


def guarded_page_array(n: int):
    """A float32 array of n elements (one page) between two PROT_NONE pages."""
    import mmap
    page = mmap.PAGESIZE
    assert n * 4 == page
    region = mmap.mmap(-1, 3 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base, page, 0) == 0
    assert libc.mprotect(base + 2 * page, page, 0) == 0
    data = np.frombuffer(region, "float32", count=n, offset=page)
    return data, region


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
