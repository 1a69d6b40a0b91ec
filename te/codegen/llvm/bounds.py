"""Run-time bounds checks for codegen_llvm: the code of the ir.CheckedIndex nodes that the
instrument_bound_checkers pass puts on Load and Store indices.

Takes the FuncGen of codegen_llvm (duck-typed, never imported here, so no cycle: it gives
.b, .mod, .env, .expr, .splat and .fail_if) and loop IR; gives the check of one index and the
numbering of the checked buffers. A kernel with checks takes one more argument after its
scalars, the error record: three int64s. A failed check writes (2k for a load from checked
buffer k, 2k + 1 for a store to it; the offending index, the first such lane of a vector;
the buffer's extent) there and makes the kernel return BOUNDS_STATUS. Imports llvmlite,
te.dtype, te.compute.expr, ir and visitor.
"""
from __future__ import annotations

from llvmlite import ir

from ... import dtype as dt
from ...compute import expr as E
from ...lower import ir as tir
from ...lower.visitor import pre_order_exprs

BOUNDS_STATUS = -1
RECORD_FIELDS = 3
# The error record's pointer, bound in the `env` of each function of a kernel with checks.
ERROR_RECORD = E.Var("bound_error", "handle")
I32, I64 = ir.IntType(32), ir.IntType(64)


def checked_buffers(s: tir.Stmt) -> tuple:
    """The names of the buffers whose accesses `s` checks, in first-use order: buffer k of
    this tuple is number k in the error record."""
    names: dict = {}

    def visit_expr(e: E.Expr) -> None:
        if isinstance(e, tir.CheckedIndex):
            names.setdefault(e.buffer.name, None)

    pre_order_exprs(s, visit_expr)  # an explicit stack: allocations nest one per stage
    return tuple(names)


def check(gen, index: E.Expr, store: bool, mask=None) -> E.Expr:
    """The index a Load or Store (store=True) addresses with. For an ir.CheckedIndex the
    check is emitted first, and the expression returned names the values it computed, so
    that no part of the index (a gathered Load, say) is evaluated twice. The index is
    computed as data arithmetic, which wraps around (FuncGen.index_value would mark it
    no-wrap): a value that overflowed must be caught, not be a poison value to LLVM.
    `mask` (<n x i1>, a masked load's): only the lanes it sets are checked."""
    if not isinstance(index, tir.CheckedIndex):
        return index
    inner = index.index
    if isinstance(inner, E.Ramp):  # keep the Ramp: dense ones become one vector access
        inner = E.Ramp(inner.dtype, _named(gen, inner.base), _named(gen, inner.stride),
                       inner.lanes)
    else:
        inner = _named(gen, inner)
    value, extent = gen.expr(inner), gen.expr(index.extent)
    lanes = dt.lanes(index.dtype)
    signed = not dt.is_uint(index.dtype)
    b = gen.b
    limit = gen.splat(extent, lanes) if lanes > 1 else extent
    bad = b.icmp_signed(">=", value, limit) if signed else b.icmp_unsigned(">=", value, limit)
    if signed:
        bad = b.or_(bad, b.icmp_signed("<", value, ir.Constant(value.type, None)))
    if mask is not None:
        bad = b.and_(bad, mask)
    any_bad = bad
    if lanes > 1:
        mask_t = ir.IntType(lanes)
        any_bad = b.icmp_unsigned("!=", b.bitcast(bad, mask_t), ir.Constant(mask_t, 0))
    code = 2 * gen.mod.checked_buffers.index(index.buffer.name) + int(store)
    gen.fail_if(any_bad, I32(BOUNDS_STATUS),
                record=lambda: _record(gen, code, value, bad, extent, signed))
    return inner


def _named(gen, e: E.Expr) -> E.Expr:
    """`e`, computed now and named by a fresh variable (constants and variables as they are)."""
    if isinstance(e, (E.Const, E.Var)):
        return e
    var = E.Var("checked", e.dtype)
    gen.env[var] = gen.expr(e)
    return var


def _record(gen, code: int, value, bad, extent, signed: bool) -> None:
    """In the failure branch: write (code, first offending index, extent) to the record."""
    b = gen.b
    first = value
    if isinstance(value.type, ir.VectorType):
        n = value.type.count
        first = b.extract_element(value, I32(n - 1))
        for k in reversed(range(n - 1)):
            first = b.select(b.extract_element(bad, I32(k)), b.extract_element(value, I32(k)),
                             first)

    def wide(v):
        if v.type.width == 64:
            return v
        return b.sext(v, I64) if signed else b.zext(v, I64)
    record = gen.env[ERROR_RECORD]
    for slot, v in enumerate((I64(code), wide(first), wide(extent))):
        b.store(v, b.gep(record, [I32(slot)], source_etype=I64), align=8)
