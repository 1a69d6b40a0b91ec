"""The float32 vector erf and tanh of codegen_llvm, emitted inline: libm's erff and tanhf
have no vector form, and a call per lane costs more than the whole polynomial (GELU's erf
in a vectorized epilogue).

Each is two branches computed for every lane and picked per lane: a polynomial for small
|x|, and for the rest a form around the vector exp of exp.py. Against float64 over every
63rd float32 from 1e-30 to 10 (tests/codegen/llvm/test_erf_tanh.py) erf stays within 1.5
ulp and tanh within 1.9 ulp on either exp algorithm; both are odd (signed zeros kept),
+-inf gives +-1 and NaN stays NaN.
Takes the FuncGen of codegen_llvm (duck-typed: .b, .mod, .float_const) and an LLVM float32
vector; gives one. Imports llvmlite, exp.py and types.py.
"""
from __future__ import annotations

from .exp import vector_exp_f32
from .types import intrinsic

# erf(x) = x + x p(x^2) for |x| < ERF_SMALL, p fitted for least maximum relative error of
# erf (Lawson's iteration on Chebyshev nodes), lowest degree first; the last step is one
# FMA, so p's rounding is scaled down by p / (1 + p).
ERF_SMALL = 0.875
ERF_SMALL_POLY = (0.12837915122509003, -0.3761255145072937, 0.11282455921173096,
                  -0.02679147943854332, 0.0050322022289037704, -0.0006203354569151998)
# erf(x) = 1 - exp(-x^2) q(x) above, q fitted to erfc(x) exp(x^2) on [ERF_SMALL, 3.92]
# for least maximum absolute error of erf (from 3.92 up erf rounds to 1: erfc is below half
# an ulp of 1). |x| is clamped at ERF_MAX, where exp(-x^2) q(x) is far below that half ulp
# (at 3.92 itself q's error would leave 1 - 1 ulp).
ERF_MAX = 4.5
ERF_LARGE_POLY = (0.994575560092926, -1.0916786193847656, 0.8886552453041077,
                  -0.5506885051727295, 0.2544821798801422, -0.08401434123516083,
                  0.018542597070336342, -0.002433328190818429, 0.00014276486763264984)
# tanh(x) = x + x^3 p(x^2) for |x| < TANH_SMALL (fitted as erf's), else
# 1 - 2 / (exp(2|x|) + 1) with the sign of x; |x| is clamped at 10, where that rounds to 1
# (at 9, 2 / (exp(18) + 1) is just over half an ulp of 1).
TANH_SMALL = 0.625
TANH_SMALL_POLY = (-0.3333328068256378, 0.13331441581249237, -0.05373971536755562,
                   0.020639091730117798, -0.005704992450773716)
TANH_MAX = 10.0


def _horner(gen, coeffs, t, dtype: str):
    """coeffs[0] + coeffs[1] t + ..., by fused multiply-adds."""
    f = gen.float_const
    p = f(coeffs[-1], dtype)
    for c in reversed(coeffs[:-1]):
        p = intrinsic(gen, "llvm.fmuladd", dtype, [p, t, f(c, dtype)])
    return p


def vector_erf_f32(gen, x, dtype: str):
    b, f = gen.b, gen.float_const

    def call(name, *args):
        return intrinsic(gen, name, dtype, list(args))
    a = call("llvm.fabs", x)
    small = call("llvm.fmuladd", a, _horner(gen, ERF_SMALL_POLY, b.fmul(a, a), dtype), a)
    # (NaN is not below ERF_SMALL: it takes this branch, whose clamp keeps it)
    c = call("llvm.minimum", a, f(ERF_MAX, dtype))
    e = vector_exp_f32(gen, b.fneg(b.fmul(c, c)), dtype)
    large = b.fsub(f(1.0, dtype), b.fmul(e, _horner(gen, ERF_LARGE_POLY, c, dtype)))
    is_small = b.fcmp_ordered("<", a, f(ERF_SMALL, dtype))
    # computed for |x|, the sign put back last: erf is odd, erf(-0) is -0
    return call("llvm.copysign", b.select(is_small, small, large), x)


def vector_tanh_f32(gen, x, dtype: str):
    b, f = gen.b, gen.float_const

    def call(name, *args):
        return intrinsic(gen, name, dtype, list(args))
    a = call("llvm.fabs", x)
    a2 = b.fmul(a, a)
    small = call("llvm.fmuladd", b.fmul(a2, a), _horner(gen, TANH_SMALL_POLY, a2, dtype), a)
    c = call("llvm.minimum", a, f(TANH_MAX, dtype))
    e = vector_exp_f32(gen, b.fadd(c, c), dtype)
    large = b.fsub(f(1.0, dtype), b.fdiv(f(2.0, dtype), b.fadd(e, f(1.0, dtype))))
    is_small = b.fcmp_ordered("<", a, f(TANH_SMALL, dtype))
    return call("llvm.copysign", b.select(is_small, small, large), x)
