"""Extern calls that hand buffers over: AccessPtr (an element's address) and PackedCall
(a registered Python function called through runtime.packed's __te_call_packed).

Takes the FuncGen of codegen_llvm (duck-typed, as intrinsics.py does: .b, .mod, .expr,
.index_value, .address, .alloca, .fail_if) and the ir nodes; gives LLVM values. The
slot layout and spec text are runtime/packed.py's. Imports llvmlite, te.dtype, te.errors,
te.lower.ir and types.py.
"""
from __future__ import annotations

from llvmlite import ir

from ... import dtype as dt
from ...errors import BuildError
from ...lower import ir as tir
from .types import I8, I32, I64, PTR

PACKED_SYMBOL = "__te_call_packed"  # runtime.packed.SYMBOL
PACKED_STATUS = 0x5041434B  # runtime.packed.PACKED_STATUS


def access_ptr(gen, e: tir.AccessPtr) -> ir.Value:
    return gen.address(e.buffer, gen.index_value(e.offset))


def packed_call(gen, e: tir.PackedCall) -> ir.Value:
    """Fill the slots, call the function, stop the kernel with PACKED_STATUS if it raised."""
    b = gen.b
    slots, fields = [], [e.name]
    for k, a in enumerate(e.args):
        if isinstance(a, tir.BufferArg):
            slots.append(b.ptrtoint(access_ptr(gen, a), I64))
            slots += [_to_i64(gen, gen.index_value(d), d.dtype) for d in a.shape + a.strides]
            fields.append(f"b:{a.buffer.dtype}:{len(a.shape)}")
            continue
        if dt.lanes(a.dtype) != 1 or a.dtype == "handle":
            raise BuildError(f"call_packed {e.name!r}: argument {k} must be a buffer or a "
                             f"scalar, got dtype {a.dtype}")
        value = gen.expr(a)
        if dt.is_float(a.dtype):
            wide = value if a.dtype == "float64" else b.fpext(value, ir.DoubleType())
            slots.append(b.bitcast(wide, I64))
            fields.append(f"f:{a.dtype}")
        else:
            slots.append(_to_i64(gen, value, a.dtype))
            fields.append(f"i:{a.dtype}")
    array = gen.alloca(ir.ArrayType(I64, max(len(slots), 1)), 8)
    for k, v in enumerate(slots):
        b.store(v, b.gep(array, [I32(k)], source_etype=I64))
    fn = gen.mod.declare(PACKED_SYMBOL, I32, [PTR, PTR])
    status = b.call(fn, [_spec_string(gen.mod.module, "|".join(fields)), array])
    gen.fail_if(b.icmp_signed("!=", status, I32(0)), I32(PACKED_STATUS))
    gen.forget_memory()
    return status


def _to_i64(gen, value, dtype: str) -> ir.Value:
    width = value.type.width
    if width == 64:
        return value
    if dt.is_uint(dtype) or dt.is_bool(dtype):
        return gen.b.zext(value, I64)
    return gen.b.sext(value, I64)


def _spec_string(module: ir.Module, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8")) + b"\0"
    name = f"__te_packed_spec_{len([g for g in module.globals if g.startswith('__te_packed')])}"
    for gname, g in module.globals.items():
        if gname.startswith("__te_packed_spec") and g.initializer.constant == data:
            return g
    typ = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(module, typ, name=name)
    g.global_constant = True
    g.linkage = "private"
    g.initializer = ir.Constant(typ, data)
    return g
