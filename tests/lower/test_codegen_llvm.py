"""LLVM codegen: hand-built flat PrimFuncs compiled with MCJIT and checked against numpy.

Takes te.lower.ir nodes and te.lower.codegen_llvm; compiles with llvmlite.binding directly
(the runtime package is not needed) and calls through ctypes. Other test_codegen_llvm_*
files import the helpers at the top of this one.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import binding as llvm

from te.compute import expr as E
from te.errors import BuildError
from te.lower import ir
from te.lower.codegen_llvm import codegen_llvm

_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "float32": ctypes.c_float,
           "float64": ctypes.c_double}
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


def assembly(func: ir.PrimFunc, parallel: bool = True) -> str:
    mod, tm = optimized_module(codegen_llvm(func, parallel))
    return tm.emit_assembly(mod)


def compile_func(func: ir.PrimFunc, parallel: bool = True):
    """A Python callable taking numpy arrays (for buffers) then Python numbers (scalars)."""
    llvm.load_library_permanently("libgomp.so.1")
    text = codegen_llvm(func, parallel)
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


def elementwise(name: str, n: int, in_dtypes: list, out_dtype: str, body) -> ir.PrimFunc:
    """out[i] = body(*[in_k[i]]) for i in [0, n)."""
    i = E.Var("i", "int32")
    ins = [buffer(f"in{k}", d, n) for k, d in enumerate(in_dtypes)]
    out = buffer("out", out_dtype, n)
    loads = [ir.Load(b.dtype, b, i) for b in ins]
    store = ir.Store(out, i, body(*loads))
    loop = ir.For(i, i32(0), i32(n), ir.SERIAL, store)
    return ir.PrimFunc(name, tuple(ins) + (out,), (), loop)


def test_smoke_add():
    f = elementwise("add_f32", 37, ["float32", "float32"], "float32",
                    lambda a, b: binop("add", a, b))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(37).astype("float32"), rng.standard_normal(37).astype("float32")
    out = np.zeros(37, "float32")
    compile_func(f)(a, b, out)
    np.testing.assert_allclose(out, a + b)
