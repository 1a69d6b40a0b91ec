"""Masked loads for codegen_llvm: a select on a lane-varying condition whose sides read
memory (a padded copy's select(inside, X[ramp], 0): the lanes outside may address past X)
computes each side with its loads reading only the lanes that take it, instead of one
branch per lane. A dense ramp is one llvm.masked.load (AVX-512 and AVX2 mask the lanes in
the load itself, and a masked lane never faults); a ramp of small stride loads its span in
masked dense pieces, each lane of a piece enabled where it holds a wanted lane; any other
index is llvm.masked.gather. The vectorize pass makes such selects only where its
masked_loads_suffice holds for both sides, and the code generator masks only then.

Takes the FuncGen of codegen_llvm (duck-typed, never imported here: it gives .b, .mod,
.expr and .load_mask) and the lanes' addresses it computed; gives LLVM values. Imports
llvmlite, te.compute.expr and types.py.
"""
from __future__ import annotations

from llvmlite import ir

from ...compute import expr as E
from .types import I1, I32, PTR


def select(gen, e: E.Select, safe) -> ir.Value:
    """select(cond, t, f) for a vector `cond`: each side that `safe` (a predicate on an
    expression: nothing in it can fault) does not clear is computed with gen.load_mask set
    to the lanes that take it (combined with any mask already set: a select inside a
    masked side)."""
    cond = gen.expr(e.cond)
    outer = gen.load_mask
    sides = []
    for value, lanes in ((e.true_value, cond), (e.false_value, None)):
        if safe(value):
            sides.append(gen.expr(value))
            continue
        if lanes is None:
            lanes = gen.b.not_(cond)
        gen.load_mask = lanes if outer is None else gen.b.and_(outer, lanes)
        try:
            sides.append(gen.expr(value))
        finally:
            gen.load_mask = outer
    return gen.b.select(cond, *sides)


def dense_load(gen, ptr, vec: ir.VectorType, align: int, mask) -> ir.Value:
    """The n lanes at `ptr` where `mask` (<n x i1>) is set, zero elsewhere."""
    n = vec.count
    name = f"llvm.masked.load.{_mangle(vec)}.p0"
    fn = gen.mod.declare(name, vec, [PTR, I32, ir.VectorType(I1, n), vec])
    return gen.b.call(fn, [ptr, I32(align), mask, ir.Constant(vec, None)])


def gather(gen, ptrs: list, elem: ir.Type, align: int, mask) -> ir.Value:
    """Lane k read from ptrs[k] where `mask` is set, zero elsewhere."""
    n = len(ptrs)
    vec, ptr_vec = ir.VectorType(elem, n), ir.VectorType(PTR, n)
    addresses = ir.Constant(ptr_vec, None)
    for k, p in enumerate(ptrs):
        addresses = gen.b.insert_element(addresses, p, I32(k))
    name = f"llvm.masked.gather.{_mangle(vec)}.v{n}p0"
    fn = gen.mod.declare(name, vec, [ptr_vec, I32, ir.VectorType(I1, n), vec])
    return gen.b.call(fn, [addresses, I32(align), mask, ir.Constant(vec, None)])


def piece_mask(gen, mask, start: int, n: int, stride: int):
    """The mask of the n-element piece at `start` of a strided load's span: element p is
    wanted lane p / stride where p is a multiple of the stride (masked like that lane),
    and never read otherwise."""
    picks = [(start + q) // stride if (start + q) % stride == 0 else n for q in range(n)]
    off = ir.Constant(ir.VectorType(I1, n), None)
    return gen.b.shuffle_vector(mask, off, ir.Constant(ir.VectorType(I32, n), picks))


def _mangle(vec: ir.VectorType) -> str:
    """LLVM's overload suffix of a vector type: v16f32, v32i8."""
    t = vec.element
    if isinstance(t, ir.IntType):
        name = f"i{t.width}"
    else:
        name = {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]
    return f"v{vec.count}{name}"
