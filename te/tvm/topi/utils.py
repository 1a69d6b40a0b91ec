"""tvm.topi.utils: get_const_int, get_const_tuple, traverse_inline."""
from __future__ import annotations

from ...compute.tensor import ComputeOp
from ...errors import ArgumentError
from . import tag as _tag


def get_const_int(expr) -> int:
    """The int value of a constant expression (or an int)."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    value = getattr(expr, "value", None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"get_const_int: expected a constant integer, got {expr!r}")
    return value


def get_const_tuple(shape) -> tuple:
    """A shape's dimensions as ints; a symbolic dimension stays the expression it is."""
    return tuple(d if not isinstance(getattr(d, "value", None), int) else int(d.value)
                 for d in shape)


def traverse_inline(s, final_op, callback=None) -> None:
    """From `final_op` upward through injective ops (elementwise, broadcast, injective
    tags): inline each that is not an output of `s`, and call `callback(op)` on every op
    reached (the first non-injective producers included, where templates act)."""
    visited = set()
    outputs = [getattr(o, "op", o) for o in s.outputs]

    def visit(op):
        if id(op) in visited:
            return
        visited.add(id(op))
        if _tag.is_injective(op.tag):
            if not any(op is o for o in outputs):
                s[op].compute_inline()
            for t in op.input_tensors:
                if isinstance(t.op, ComputeOp):
                    visit(t.op)
        if callback is not None:
            callback(op)
    visit(getattr(final_op, "op", final_op))
