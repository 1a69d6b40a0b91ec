"""LLVM types of te dtypes and calls of LLVM intrinsics: the base the code generator's
modules share (codegen.py, intrinsics.py, exp.py), so none of them imports another to reach
these.

Takes dtype strings (and, for intrinsic(), the FuncGen of codegen.py, duck-typed: .b and
.mod); gives llvmlite types and values. Imports llvmlite, te.dtype and te.errors.
"""
from __future__ import annotations

from llvmlite import ir

from ... import dtype as dt
from ...errors import BuildError

PTR = ir.PointerType()
I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)

# Register type of each scalar dtype; bool is i1 in registers and i8 in memory.
LL_TYPE = {
    "bool": I1, "int8": I8, "int16": ir.IntType(16), "int32": I32, "int64": I64,
    "uint8": I8, "uint16": ir.IntType(16), "uint32": I32, "uint64": I64,
    "float16": ir.HalfType(), "float32": ir.FloatType(), "float64": ir.DoubleType(),
    "handle": PTR,
}
INTRINSIC_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}
# llvm.minimum / llvm.maximum order -0 below +0; x86's minps / maxps do not, so on every
# call LLVM adds a sign test and two blends around them (5 instructions instead of 3 with the
# NaN check). numpy does not order zeros either (np.maximum(-0.0, 0.0) is 0.0 and
# np.maximum(0.0, -0.0) is -0.0), so these calls carry `nsz`: the NaN propagation stays.
NO_SIGNED_ZEROS = frozenset({"llvm.minimum", "llvm.maximum"})


def ll_type(dtype: str) -> ir.Type:
    """The LLVM register type of a (possibly vector) dtype."""
    base, lanes = dt.split_lanes(dtype)
    if base not in LL_TYPE:
        raise BuildError(f"LLVM codegen: unsupported dtype {dtype!r}")
    t = LL_TYPE[base]
    return ir.VectorType(t, lanes) if lanes > 1 else t


def intrinsic(gen, name: str, dtype: str, args: list) -> ir.Value:
    """A call of LLVM intrinsic `name` (such as "llvm.fma") on `args` of `dtype`."""
    base, n = dt.split_lanes(dtype)
    suffix = INTRINSIC_SUFFIX[base] if n == 1 else f"v{n}{INTRINSIC_SUFFIX[base]}"
    t = ll_type(dtype)
    fn = gen.mod.declare(f"{name}.{suffix}", t, [t] * len(args))
    return gen.b.call(fn, args, fastmath=("nsz",) if name in NO_SIGNED_ZEROS else ())
