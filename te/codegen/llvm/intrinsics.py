"""Math for codegen_llvm: intrinsic calls, libm calls and the memory hints (prefetch,
non-temporal stores and their fence); the vector float32 exp is in exp.py, erf and tanh
in erf.py; call_extern calls are declared with their scalar signature and made per lane.

Takes the FuncGen of codegen_llvm (duck-typed, never imported here: it gives .b, .mod,
.expr, .expr_Const, .float_const, .vector_of and .address) and te.compute.expr Call nodes or
the Load of an ir.Prefetch; gives LLVM values. Imports llvmlite, te.dtype, te.errors,
te.compute.expr, types.py, exp.py and erf.py.
"""
from __future__ import annotations

from llvmlite import ir

from ... import dtype as dt
from ...compute import expr as E
from ...errors import BuildError
from .erf import vector_erf_f32, vector_tanh_f32
from .exp import vector_exp_f32
from .types import I32, intrinsic, ll_type

# `contract` lets LLVM fuse a multiply and an add into an FMA, as C compilers do by default
# (float32 and float64: one rounding fewer, at most half an ulp away from the unfused answer).
FP_FLAGS = ("contract",)


def fp_flags(dtype: str) -> tuple[str, ...]:
    """The fast-math flags of an arithmetic instruction on `dtype` (scalar or vector): none
    for float16, which rounds after every operation as numpy does. Fusing there skips a
    rounding of relative size 2**-11, a 1-ulp difference from numpy on many inputs, and buys
    nothing on most CPUs: without AVX512-FP16 each half operation is computed in float and
    rounded back (exactly numpy's answer; LLVM never fuses those), and with it the pair costs
    a vmulph and a vaddph instead of one vfmadd.ph."""
    return () if dt.base(dtype) == "float16" else FP_FLAGS

# Intrinsics that LLVM provides for scalars and vectors alike.
LLVM_MATH = {
    "exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "floor": "llvm.floor",
    "ceil": "llvm.ceil", "trunc": "llvm.trunc", "round": "llvm.roundeven", "sin": "llvm.sin",
    "cos": "llvm.cos", "log2": "llvm.log2", "log10": "llvm.log10", "exp2": "llvm.exp2",
    "pow": "llvm.pow", "abs": "llvm.fabs",
    # numpy.minimum/maximum propagate NaN and so do llvm.minimum/maximum (minnum does not).
    "min": "llvm.minimum", "max": "llvm.maximum",
}
# float32 vectors of these are computed inline (exp.py, erf.py), not lane by lane
VECTOR_F32 = {"exp": vector_exp_f32, "erf": vector_erf_f32, "tanh": vector_tanh_f32}
# Functions taken from libm (float32 name, float64 name); other vectors are scalarized.
LIBM = {name: (name + "f", name) for name in (
    "tanh", "erf", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")}


def emit_call(gen, e: E.Call) -> ir.Value:
    args = [gen.expr(a) for a in e.args]
    if e.extern:
        return extern_call(gen, e, args)
    if e.name == "abs" and not dt.is_float(e.dtype):
        x = args[0]
        neg = gen.b.icmp_signed("<", x, ir.Constant(x.type, None))
        return gen.b.select(neg, gen.b.sub(ir.Constant(x.type, None), x), x)
    if not dt.is_float(e.dtype):
        raise BuildError(f"Call: intrinsic {e.name!r} needs a float dtype, got {e.dtype}")
    if e.dtype.startswith("float32x") and e.name in VECTOR_F32:
        return VECTOR_F32[e.name](gen, args[0], e.dtype)
    if e.name in LLVM_MATH:
        return intrinsic(gen, LLVM_MATH[e.name], e.dtype, args)
    if e.name in LIBM:
        return libm(gen, e.name, e.dtype, args[0])
    if e.name == "rsqrt":
        root = intrinsic(gen, "llvm.sqrt", e.dtype, args)
        return gen.b.fdiv(gen.float_const(1.0, e.dtype), root, flags=fp_flags(e.dtype))
    if e.name == "sigmoid":
        neg = gen.b.fneg(args[0], flags=fp_flags(e.dtype))
        exp = vector_exp_f32(gen, neg, e.dtype) if e.dtype.startswith("float32x") \
            else intrinsic(gen, "llvm.exp", e.dtype, [neg])  # (llvm.exp of a vector: expf calls)
        denom = gen.b.fadd(gen.float_const(1.0, e.dtype), exp, flags=fp_flags(e.dtype))
        return gen.b.fdiv(gen.float_const(1.0, e.dtype), denom, flags=fp_flags(e.dtype))
    raise BuildError(f"Call: unknown intrinsic {e.name!r}")


def extern_call(gen, e: E.Call, args: list) -> ir.Value:
    """A call_extern: the function is declared with its scalar signature; in a vectorized
    loop it is called once per lane, lane 0 first (the order the scalar loop calls it),
    on that lane of each vector argument. A C function takes no vectors, and a vector
    declaration beside the scalar one (a vectorized loop and its scalar tail) would give
    the name two signatures."""
    base, n = dt.split_lanes(e.dtype)
    n = max([n] + [a.type.count for a in args if isinstance(a.type, ir.VectorType)])
    scalar_types = [a.type.element if isinstance(a.type, ir.VectorType) else a.type
                    for a in args]
    fn = gen.mod.declare(e.name, ll_type(base), scalar_types)
    if n == 1:
        return gen.b.call(fn, args)
    lanes = [gen.b.call(fn, [gen.b.extract_element(a, I32(k))
                             if isinstance(a.type, ir.VectorType) else a for a in args])
             for k in range(n)]
    return gen.vector_of(lanes, dt.with_lanes(base, n))


def _lanes(b, v, lo: int, width: int):
    """Lanes lo .. lo + width - 1 of vector v (v itself when that is all of it)."""
    if v.type.count == width:
        return v
    idx = ir.Constant(ir.VectorType(I32, width), list(range(lo, lo + width)))
    return b.shuffle_vector(v, v, idx)


def prefetch(gen, load, write: bool, locality: int = 3) -> ir.Value:
    """llvm.prefetch of the address of scalar `load` (an ir.Load), for reading or writing,
    with temporal-locality hint `locality` (0-3), data cache: x86 emits prefetcht0 (3),
    prefetcht1 (2), prefetcht2 (1), prefetchnta (0), or prefetchw for writing.
    Returns null (the Prefetch node has no value)."""
    ptr = gen.address(load.buffer, gen.expr(load.index))
    fn = gen.mod.declare("llvm.prefetch.p0", ir.VoidType(), [ptr.type, I32, I32, I32])
    gen.b.call(fn, [ptr, I32(int(write)), I32(locality), I32(1)])
    return ir.Constant(ptr.type, None)

def nontemporal_store(gen, value: ir.Value, ptr, align: int) -> bool:
    """Store vector `value` at `ptr` past the caches (x86 `vmovntps`), which needs an
    address aligned to the store's size, so the address picks one of three paths at run
    time: aligned to the vector (up to 64 bytes): one store; 16-byte aligned (numpy's
    large arrays usually start 16 bytes into a 64-byte line): 16-byte non-temporal
    pieces, which the write-combining buffers join into whole lines; else a plain store.
    (LLVM would split an under-aligned one into scalar `movnti`.) Returns False, emitting
    nothing, where the hint does not apply: not x86, or a vector that is not a power of two
    of 16 to 256 bytes. The caller fences the function's exit with `store_fence`: the
    stores are weakly ordered."""
    nbytes = value.type.count * _bytes_of(value.type.element)
    if not gen.mod.streams or nbytes < 16 or nbytes > 256 or nbytes & (nbytes - 1):
        return False
    b, i64 = gen.b, ir.IntType(64)
    whole = min(nbytes, 64)
    addr = b.ptrtoint(ptr, i64)
    hint = gen.mod.module.add_metadata([I32(1)])

    def aligned_to(n: int):
        return b.icmp_unsigned("==", b.and_(addr, ir.Constant(i64, n - 1)), ir.Constant(i64, 0))

    def streamed(piece_bytes: int):
        lanes = value.type.count * piece_bytes // nbytes
        for k in range(nbytes // piece_bytes):
            part = _lanes(b, value, k * lanes, lanes)
            at = ptr if k == 0 else b.gep(ptr, [ir.Constant(i64, k * piece_bytes)],
                                           source_etype=ir.IntType(8))
            b.store(part, at, align=min(piece_bytes, whole)).set_metadata("nontemporal", hint)

    with b.if_else(aligned_to(whole)) as (vector_aligned, otherwise):
        with vector_aligned:
            streamed(nbytes)
        with otherwise:
            if nbytes == 16:
                b.store(value, ptr, align=align)
            else:
                with b.if_else(aligned_to(16)) as (line_part_aligned, unaligned):
                    with line_part_aligned:
                        streamed(16)
                    with unaligned:
                        b.store(value, ptr, align=align)
    return True


def store_fence(gen) -> None:
    """sfence: the function's non-temporal stores are visible before it returns (to the
    caller, or to the thread that joins a parallel loop)."""
    gen.b.call(gen.mod.declare("llvm.x86.sse.sfence", ir.VoidType(), []), [])


def _bytes_of(t: ir.Type) -> int:
    if isinstance(t, ir.IntType):
        return max(t.width // 8, 1)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(t)]


def libm(gen, name: str, dtype: str, x) -> ir.Value:
    base, n = dt.split_lanes(dtype)
    if n > 1:
        lanes = [libm(gen, name, base, gen.b.extract_element(x, I32(k))) for k in range(n)]
        return gen.vector_of(lanes, dtype)
    if base == "float16":
        wide = libm(gen, name, "float32", gen.b.fpext(x, ll_type("float32")))
        return gen.b.fptrunc(wide, ll_type(base))
    t = ll_type(base)
    fn = gen.mod.declare(LIBM[name][0 if base == "float32" else 1], t, [t])
    return gen.b.call(fn, [x])
