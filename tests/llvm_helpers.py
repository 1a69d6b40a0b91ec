"""Helpers of the LLVM code generator's tests (tests/codegen/llvm/): hand-built flat
PrimFuncs compiled with MCJIT and called through ctypes, without the runtime package.

Hand-built IR with parallel loops goes through the parallel_outline pass first
(pipeline.outline_for_cpu), as te.build does: the code generator runs a loop in parallel
only as a ParallelTask. Imports llvmlite, numpy and te.
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np
from llvmlite import binding as llvm

from runtime.checker import INDEX_LIMIT
from te import dtype as dt
from te.codegen.llvm.codegen import codegen_llvm
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.pipeline import outline_for_cpu

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
    mod, tm = optimized_module(codegen_llvm(outline_for_cpu(func), parallel,
                                            index_limit=INDEX_LIMIT))
    return tm.emit_assembly(mod)


def compile_func(func: PrimFunc, parallel: bool = True):
    """A Python callable taking numpy arrays (for buffers) then Python numbers (scalars)."""
    llvm.load_library_permanently("libgomp.so.1")
    text = codegen_llvm(outline_for_cpu(func), parallel, index_limit=INDEX_LIMIT)
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


def guarded_page_array(n: int):
    """A float32 array of n elements (one page) between two PROT_NONE pages."""
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
