"""Math for codegen_llvm: intrinsic calls, libm calls, a vectorized float32 exp, and the
memory hints (prefetch, non-temporal stores and their fence).

Takes the FuncGen of codegen_llvm (duck-typed, never imported here, so no cycle: it gives
.b, .mod, .ll_type, .expr, .expr_Const, .float_const, .vector_of and .address) and
te.compute.expr Call nodes or the Load of an ir.Prefetch; gives LLVM values. Imports
llvmlite, te.dtype, te.errors and te.compute.expr.
"""
from __future__ import annotations

from llvmlite import ir

from .. import dtype as dt
from ..compute import expr as E
from ..errors import BuildError

I32 = ir.IntType(32)
# `contract` lets LLVM fuse a multiply and an add into an FMA, as C compilers do by default.
FP_FLAGS = ("contract",)
INTRINSIC_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}

# Intrinsics that LLVM provides for scalars and vectors alike.
LLVM_MATH = {
    "exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "floor": "llvm.floor",
    "ceil": "llvm.ceil", "trunc": "llvm.trunc", "round": "llvm.roundeven", "sin": "llvm.sin",
    "cos": "llvm.cos", "log2": "llvm.log2", "log10": "llvm.log10", "exp2": "llvm.exp2",
    "pow": "llvm.pow", "abs": "llvm.fabs",
    # numpy.minimum/maximum propagate NaN and so do llvm.minimum/maximum (minnum does not).
    "min": "llvm.minimum", "max": "llvm.maximum",
}
# Functions taken from libm (float32 name, float64 name); vectors are scalarized.
LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}


def emit_call(gen, e: E.Call) -> ir.Value:
    args = [gen.expr(a) for a in e.args]
    if e.extern:
        fn = gen.mod.declare(e.name, gen.ll_type(e.dtype), [a.type for a in args])
        return gen.b.call(fn, args)
    if e.name == "abs" and not dt.is_float(e.dtype):
        x = args[0]
        neg = gen.b.icmp_signed("<", x, ir.Constant(x.type, None))
        return gen.b.select(neg, gen.b.sub(ir.Constant(x.type, None), x), x)
    if not dt.is_float(e.dtype):
        raise BuildError(f"Call: intrinsic {e.name!r} needs a float dtype, got {e.dtype}")
    if e.name == "exp" and e.dtype.startswith("float32x"):
        return vector_exp_f32(gen, args[0], e.dtype)
    if e.name in LLVM_MATH:
        return intrinsic(gen, LLVM_MATH[e.name], e.dtype, args)
    if e.name in LIBM:
        return libm(gen, e.name, e.dtype, args[0])
    if e.name == "rsqrt":
        root = intrinsic(gen, "llvm.sqrt", e.dtype, args)
        return gen.b.fdiv(gen.float_const(1.0, e.dtype), root, flags=FP_FLAGS)
    if e.name == "sigmoid":
        neg = gen.b.fneg(args[0], flags=FP_FLAGS)
        denom = gen.b.fadd(gen.float_const(1.0, e.dtype),
                            intrinsic(gen, "llvm.exp", e.dtype, [neg]), flags=FP_FLAGS)
        return gen.b.fdiv(gen.float_const(1.0, e.dtype), denom, flags=FP_FLAGS)
    raise BuildError(f"Call: unknown intrinsic {e.name!r}")

def vector_exp_f32(gen, x, dtype: str) -> ir.Value:
    """exp of a float32 vector without libm (LLVM scalarizes llvm.exp.v*f32 into expf
    calls), in 20 vector operations and no selects (12 with AVX-512, see scalef): x is
    clamped to [-104, 88.8] (NaN stays NaN), k = x / ln 2 rounded to nearest (even),
    r = x - k ln 2 in [-ln 2 / 2, ln 2 / 2] (two-part ln 2), exp(x) = 2^k * exp(r) with
    exp(r) = 1 + r q(r), q a degree-4 fit (relative error 1.5e-7 as evaluated in float32;
    against float64, every float32 input with a normal result: 2.19 ulp at most; 0.68 ulp
    on average over inputs uniform in x, exact at x = 0). 2^k is
    applied as two normal factors 2^(k>>1) and 2^(k - (k>>1)), so k in [-150, 128] needs
    no special case: results below the normal range round once into the denormals as
    libm's expf does (the scalar path: every schedule gives the same answer),
    exp(x < -103.97) is 0 and exp(x > 88.72) is inf."""
    b, n = gen.b, dt.lanes(dtype)
    f = gen.float_const
    i32v = ir.VectorType(I32, n)
    clamped = intrinsic(gen, "llvm.minimum", dtype, [
        intrinsic(gen, "llvm.maximum", dtype, [x, f(-104.0, dtype)]), f(88.8, dtype)])
    # round to nearest rather than floor: r then needs no (k + 1/2) shift and exp(r) no
    # sqrt(2) factor, one vector add fewer (Zen 4: 3.04 -> 2.90 ns per 16 floats; one
    # thread, 4096^2 softmax 5.45 -> 5.13 ms; the floor version, on the same 3 x 2^20
    # samples: 2.15-2.20 ulp at most, 0.61 on average)
    k = intrinsic(gen, "llvm.roundeven", dtype,
                  [b.fmul(clamped, f(1.4426950408889634, dtype))])
    fma = "llvm.fma"
    r = intrinsic(gen, fma, dtype, [k, f(-0.693359375, dtype), clamped])
    r = intrinsic(gen, fma, dtype, [k, f(2.12194440e-4, dtype), r])
    p = f(EXP_POLY[-1], dtype)
    for c in reversed(EXP_POLY[:-1]):
        p = intrinsic(gen, fma, dtype, [p, r, f(c, dtype)])
    scaled = scalef(gen, p, k, n)
    if scaled is not None:
        return scaled
    ki = b.fptosi(k, i32v)
    k1 = b.ashr(ki, ir.Constant(i32v, [1] * n))
    k2 = b.sub(ki, k1)

    def pow2(e):
        bits = b.shl(b.add(e, ir.Constant(i32v, [127] * n)), ir.Constant(i32v, [23] * n))
        return b.bitcast(bits, gen.ll_type(dtype))
    return b.fmul(b.fmul(p, pow2(k1)), pow2(k2))


# AVX-512 vscalefps (p * 2^k, k an integral float) for vectors of 16, 8 or 4 float32:
# (intrinsic, CPU feature it needs, mask bits, whether it takes a rounding argument).
SCALEF = {16: ("llvm.x86.avx512.mask.scalef.ps.512", "avx512f", 16, True),
          8: ("llvm.x86.avx512.mask.scalef.ps.256", "avx512vl", 8, False),
          4: ("llvm.x86.avx512.mask.scalef.ps.128", "avx512vl", 8, False)}
ROUND_CURRENT = 4  # _MM_FROUND_CUR_DIRECTION


def scalef(gen, p, k, n: int):
    """p * 2^k by vscalefps when the target has AVX-512 (gen.mod.features), else None.
    One rounding, denormal results included, so the same values as the two-factor path of
    vector_exp_f32 in 1 instruction instead of 9 (vectors wider than 16 lanes go 16 at a
    time)."""
    features = gen.mod.features
    if "avx512f" not in features:
        return None
    width = 16 if n % 16 == 0 else n
    chunks = n // width
    if width not in SCALEF or SCALEF[width][1] not in features or chunks & (chunks - 1):
        return None  # other widths, or a count of 16-lane parts that does not halve evenly
    name, _, mask_bits, rounding = SCALEF[width]
    b = gen.b
    vt = ir.VectorType(ir.FloatType(), width)
    mask_t = ir.IntType(mask_bits)
    fn = gen.mod.declare(name, vt, [vt, vt, vt, mask_t] + ([I32] if rounding else []))
    tail = [ir.Constant(vt, None), ir.Constant(mask_t, -1)] + \
        ([ir.Constant(I32, ROUND_CURRENT)] if rounding else [])
    parts = [b.call(fn, [_lanes(b, p, lo, width), _lanes(b, k, lo, width)] + tail)
             for lo in range(0, n, width)]
    while len(parts) > 1:  # concatenate pairwise: 16 + 16 -> 32, ...
        half = parts[0].type.count
        idx = ir.Constant(ir.VectorType(I32, 2 * half), list(range(2 * half)))
        parts = [b.shuffle_vector(parts[i], parts[i + 1], idx)
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _lanes(b, v, lo: int, width: int):
    """Lanes lo .. lo + width - 1 of vector v (v itself when that is all of it)."""
    if v.type.count == width:
        return v
    idx = ir.Constant(ir.VectorType(I32, width), list(range(lo, lo + width)))
    return b.shuffle_vector(v, v, idx)


# exp(r) = 1 + r q(r) on [-ln 2 / 2, ln 2 / 2], lowest degree first: q fitted for least
# maximum relative error of the whole (Lawson's iteration on Chebyshev nodes, then each
# coefficient nudged by float32 ulps): 1.49e-7 evaluated in float32 Horner steps.
EXP_POLY = (1.0, 0.9999998807907104, 0.4999915063381195, 0.16667185723781586,
            0.04189795255661011, 0.008317872881889343)

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


def intrinsic(gen, name: str, dtype: str, args: list) -> ir.Value:
    base, n = dt.split_lanes(dtype)
    suffix = INTRINSIC_SUFFIX[base] if n == 1 else f"v{n}{INTRINSIC_SUFFIX[base]}"
    t = gen.ll_type(dtype)
    fn = gen.mod.declare(f"{name}.{suffix}", t, [t] * len(args))
    return gen.b.call(fn, args)

def libm(gen, name: str, dtype: str, x) -> ir.Value:
    base, n = dt.split_lanes(dtype)
    if n > 1:
        lanes = [libm(gen, name, base, gen.b.extract_element(x, I32(k))) for k in range(n)]
        return gen.vector_of(lanes, dtype)
    if base == "float16":
        wide = libm(gen, name, "float32", gen.b.fpext(x, gen.ll_type("float32")))
        return gen.b.fptrunc(wide, gen.ll_type(base))
    t = gen.ll_type(base)
    fn = gen.mod.declare(LIBM[name][0 if base == "float32" else 1], t, [t])
    return gen.b.call(fn, [x])
