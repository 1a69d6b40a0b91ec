"""float64 -> float16 casts for codegen_llvm without LLVM's libcall.

On x86 without AVX512-FP16, LLVM lowers `fptrunc double to half` to a call of
`__truncdfhf2`, which this process does not define (only libgcc 12+ has it) and MCJIT links
to address 0: a segfault. The cast is built here instead from two hardware conversions:
double -> float rounded to odd, then float -> half (F16C's vcvtps2ph, or AVX512-FP16's).
Rounding to odd in a format with at least two more bits (float's 24 against half's 11,
exponents included) keeps the information the second rounding needs, so the result is the
correctly rounded half of the double, numpy's answer, ties and subnormals included.

Takes an llvmlite IRBuilder and a double (or vector of doubles) value; imports llvmlite only.
"""
from __future__ import annotations

from llvmlite import ir


def _like(t: ir.Type, scalar: ir.Type) -> ir.Type:
    """`scalar`, or a vector of it with as many lanes as `t`."""
    return ir.VectorType(scalar, t.count) if isinstance(t, ir.VectorType) else scalar


def double_to_half(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    f32, i32 = _like(x.type, ir.FloatType()), _like(x.type, ir.IntType(32))
    near = b.fptrunc(x, f32)                       # rounded to nearest even
    back = b.fpext(near, x.type)
    inexact = b.fcmp_ordered("!=", back, x)         # false for NaN and infinities kept
    bits = b.bitcast(near, i32)
    even = b.icmp_unsigned("==", b.and_(bits, ir.Constant(i32, 1)), ir.Constant(i32, 0))
    # The odd neighbour lies on x's side of `near`: one step away from zero when |x| is
    # larger (the float's bits + 1, sign and magnitude), towards zero when smaller.
    away = b.xor(b.fcmp_ordered(">", x, back), b.fcmp_ordered("<", x, ir.Constant(x.type, 0)))
    step = b.select(away, ir.Constant(i32, 1), ir.Constant(i32, -1))
    odd = b.add(bits, b.select(b.and_(inexact, even), step, ir.Constant(i32, 0)))
    return b.fptrunc(b.bitcast(odd, f32), _like(x.type, ir.HalfType()))
