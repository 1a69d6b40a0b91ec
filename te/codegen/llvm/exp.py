"""The float32 vector exp of codegen_llvm, emitted inline because LLVM scalarizes
llvm.exp.v*f32 into one expf call per lane.

Two algorithms, picked by the target's CPU features (numpy's own SIMD exp also differs by
instruction set; both stay within 2.2 ulp of the exact result, and every vector width gives
the same bits on one target):
- AVX-512 (avx512f and avx512vl): a 32-entry table of 2^(j/32) held in two registers and
  read with one vpermi2ps, a degree-2 polynomial and vscalefps: 11 instructions per 16
  floats, 6 of them on the FMA pipes (1.72 ulp at most).
- otherwise: a degree-5 polynomial and 2^k as two normal factors: 20 instructions
  (2.19 ulp at most; 2.3 on samples where the CPU has no FMA).

Takes the FuncGen of codegen_llvm (duck-typed: .b, .mod, .float_const) and an
LLVM float32 vector; gives one. Imports llvmlite, te.dtype and types.py (LLVM types and
intrinsic calls).
"""
from __future__ import annotations

import struct

from llvmlite import ir

from ... import dtype as dt
from .types import I32, intrinsic, ll_type

F32 = ir.FloatType()
LOG2E = 1.4426950408889634
# ln 2 in two parts: LN2_HI has 9 significant bits, so k * LN2_HI is exact for |k| < 2^15
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
# The input clamp: exp(x < -103.97) rounds to 0 and exp(x > 88.72) overflows to inf; the
# clamp keeps k small (no integer overflow, the table index in range) and NaN stays NaN.
X_MIN, X_MAX = -104.0, 88.8


def vector_exp_f32(gen, x, dtype: str) -> ir.Value:
    n = dt.lanes(dtype)
    features = gen.mod.features
    if "avx512f" in features and "avx512vl" in features:
        return _table_exp(gen, x, n)
    return _polynomial_exp(gen, x, dtype)


# --- AVX-512: table of 2^(j/32) -----------------------------------------------------------

# Adding TABLE_SHIFT = 1.5 * 2^18 to x log2(e) rounds it to a multiple of 1/32 (the ulp of
# floats in [2^18, 2^19)): the sum's 5 low mantissa bits are then j = n mod 32 for
# n = round(32 x log2(e)), the table index, and subtracting the shift again gives n / 32
# exactly. vscalefps applies 2^floor(n / 32) itself.
TABLE_SHIFT = 1.5 * 2.0 ** 18
TABLE = [struct.unpack("f", struct.pack("f", 2.0 ** (j / 32)))[0] for j in range(32)]
# exp(r) = 1 + r (C1 + C2 r) on [-ln 2 / 64, ln 2 / 64], fitted for least maximum relative
# error (5.3e-8; Lawson's iteration on Chebyshev nodes). The rest of the 1.73 ulp comes
# from rounding: the table entries (half an ulp each), the last FMA, and r.
TABLE_POLY = (1.0000146627426147, 0.5000001788139343)
PERMUTE = "llvm.x86.avx512.vpermi2var.ps.512"
# vscalefps (p * 2^floor(k)) for 16, 8 and 4 floats: intrinsic, mask bits, rounding arg
SCALEF = {16: ("llvm.x86.avx512.mask.scalef.ps.512", 16, True),
          8: ("llvm.x86.avx512.mask.scalef.ps.256", 8, False),
          4: ("llvm.x86.avx512.mask.scalef.ps.128", 8, False)}
ROUND_CURRENT = 4  # _MM_FROUND_CUR_DIRECTION


def _table_exp(gen, x, n: int) -> ir.Value:
    """exp(x) = 2^floor(n / 32) * 2^((n mod 32) / 32) * exp(r), n = round(32 x log2(e)),
    r = x - (n / 32) ln 2 in [-ln 2 / 64, ln 2 / 64]. The last step is T + (T r) q(r)
    with T the table entry, one rounding before vscalefps, which rounds once more only
    where the result is a denormal (as libm's expf does)."""
    b = gen.b
    width = _padded_width(n)
    x = _resize(b, x, width)
    dtype = f"float32x{width}"
    f = gen.float_const

    def call(name, *args):
        return intrinsic(gen, name, dtype, list(args))
    x = call("llvm.minimum", call("llvm.maximum", x, f(X_MIN, dtype)), f(X_MAX, dtype))
    shifted = call("llvm.fma", x, f(LOG2E, dtype), f(TABLE_SHIFT, dtype))
    k = b.fsub(shifted, f(TABLE_SHIFT, dtype))          # n / 32, exact
    r = call("llvm.fma", k, f(-LN2_HI, dtype), x)
    r = call("llvm.fma", k, f(-LN2_LO, dtype), r)
    index = b.bitcast(shifted, ir.VectorType(I32, width))
    table = _concat(b, [_table_lookup(gen, part) for part in _pieces(b, index)])
    q = call("llvm.fma", r, f(TABLE_POLY[1], dtype), f(TABLE_POLY[0], dtype))
    mantissa = call("llvm.fma", b.fmul(table, r), q, table)
    scaled = _concat(b, [_scalef(gen, p, e) for p, e in
                         zip(_pieces(b, mantissa), _pieces(b, k))])
    return _resize(b, scaled, n)


def _padded_width(n: int) -> int:
    """The vector width the table exp computes at: 4, 8, or a power of two of at least 16
    (so 16-float pieces pair up); the extra lanes are computed and dropped."""
    return max(4, 1 << (n - 1).bit_length())


def _table_lookup(gen, index):
    """2^((index mod 32) / 32) per lane: vpermi2ps reads the low 5 bits of each index lane
    from two 16-float table registers. 4 and 8 lanes widen the index to 16 (no instruction:
    the upper lanes of a ymm register are there already) and keep the low lanes."""
    b, lanes = gen.b, index.type.count
    vt, it = ir.VectorType(F32, 16), ir.VectorType(I32, 16)
    fn = gen.mod.declare(PERMUTE, vt, [vt, it, vt])
    value = b.call(fn, [ir.Constant(vt, TABLE[:16]), _resize(b, index, 16),
                        ir.Constant(vt, TABLE[16:])])
    return _resize(b, value, lanes)


def _scalef(gen, p, k):
    """p * 2^floor(k) by vscalefps for 16, 8 or 4 floats: one rounding, denormals and
    overflow to inf included."""
    name, mask_bits, rounding = SCALEF[p.type.count]
    vt, mask_t = p.type, ir.IntType(mask_bits)
    fn = gen.mod.declare(name, vt, [vt, vt, vt, mask_t] + ([I32] if rounding else []))
    tail = [ir.Constant(vt, None), ir.Constant(mask_t, -1)] + \
        ([ir.Constant(I32, ROUND_CURRENT)] if rounding else [])
    return gen.b.call(fn, [p, k] + tail)


def _pieces(b, v) -> list:
    """v in 16-lane pieces (v itself when it has 16 lanes or fewer)."""
    n = v.type.count
    if n <= 16:
        return [v]
    return [_shuffle(b, v, list(range(lo, lo + 16))) for lo in range(0, n, 16)]


def _concat(b, parts: list):
    """The pieces joined back, pairwise (their count is a power of two)."""
    while len(parts) > 1:
        half = parts[0].type.count
        idx = list(range(2 * half))
        parts = [b.shuffle_vector(parts[i], parts[i + 1], _indices(idx))
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _resize(b, v, lanes: int):
    """v's first `lanes` lanes, or v padded with zero lanes up to `lanes`."""
    n = v.type.count
    if n == lanes:
        return v
    zero = ir.Constant(v.type, None)
    return b.shuffle_vector(v, zero, _indices([i if i < n else n for i in range(lanes)]))


def _shuffle(b, v, idx: list):
    return b.shuffle_vector(v, v, _indices(idx))


def _indices(idx: list):
    return ir.Constant(ir.VectorType(I32, len(idx)), idx)


# --- without AVX-512: polynomial ----------------------------------------------------------

# exp(r) = 1 + r q(r) on [-ln 2 / 2, ln 2 / 2], lowest degree first: q fitted for least
# maximum relative error (Lawson's iteration on Chebyshev nodes, then each coefficient
# nudged by float32 ulps): 1.49e-7 evaluated in float32 Horner steps.
EXP_POLY = (1.0, 0.9999998807907104, 0.4999915063381195, 0.16667185723781586,
            0.04189795255661011, 0.008317872881889343)


def _polynomial_exp(gen, x, dtype: str) -> ir.Value:
    """exp(x) = 2^k exp(r), k = x / ln 2 rounded to nearest (even), r = x - k ln 2 in
    [-ln 2 / 2, ln 2 / 2], exp(r) = 1 + r q(r) with q of degree 4 (against float64, every
    float32 input with a normal result: 2.19 ulp at most; 0.68 on average over inputs
    uniform in x, exact at x = 0). 2^k is applied as two normal factors 2^(k>>1) and
    2^(k - (k>>1)), so k in [-150, 128] needs no special case: results below the normal
    range round once into the denormals as libm's expf does."""
    b, n = gen.b, dt.lanes(dtype)
    f = gen.float_const
    i32v = ir.VectorType(I32, n)

    def call(name, *args):
        return intrinsic(gen, name, dtype, list(args))
    x = call("llvm.minimum", call("llvm.maximum", x, f(X_MIN, dtype)), f(X_MAX, dtype))
    # round to nearest rather than floor: r then needs no (k + 1/2) shift and exp(r) no
    # sqrt(2) factor, one vector add fewer
    k = call("llvm.roundeven", b.fmul(x, f(LOG2E, dtype)))
    # fmuladd: one FMA where the CPU has them (the same bits as llvm.fma), a multiply and
    # an add where it does not, instead of a libm fmaf call per lane (k * LN2_HI is exact
    # either way)
    r = call("llvm.fmuladd", k, f(-LN2_HI, dtype), x)
    r = call("llvm.fmuladd", k, f(-LN2_LO, dtype), r)
    p = f(EXP_POLY[-1], dtype)
    for c in reversed(EXP_POLY[:-1]):
        p = call("llvm.fmuladd", p, r, f(c, dtype))
    ki = b.fptosi(k, i32v)
    k1 = b.ashr(ki, ir.Constant(i32v, [1] * n))
    k2 = b.sub(ki, k1)

    def pow2(e):
        bits = b.shl(b.add(e, ir.Constant(i32v, [127] * n)), ir.Constant(i32v, [23] * n))
        return b.bitcast(bits, ll_type(dtype))
    return b.fmul(b.fmul(p, pow2(k1)), pow2(k2))
