"""storage_flatten: multi-dimensional tensor accesses -> flat buffer loads and stores.

Takes the loop nest from build_loops (ProducerRealize / ProducerStore / TensorLoad) and the
argument tensors, gives (param buffers, body) over Allocate / Store / Load with row-major
strides (padded where storage_align asks), indices relative to each realized region.
Imports te.compute, ir, visitor, arith.
"""
from __future__ import annotations

from ...compute import expr as E
from ...compute.expr import Const, TensorLoad, Var
from ...errors import LoweringError
from .. import ir
from ..arith import Analyzer
from ..bind_buffers import bind_buffers
from ..visitor import Mutator


class NameTable:
    """Hands out unique names: the first 'C' stays 'C', the next becomes 'C_1'; `reserved`
    names are never handed out."""

    def __init__(self, reserved=()):
        self.used: set = set(reserved)

    def get(self, name: str) -> str:
        cand, k = name, 0
        while cand in self.used:
            k += 1
            cand = f"{name}_{k}"
        self.used.add(cand)
        return cand


def row_major_strides(shape: tuple, aligns: tuple = ()) -> tuple:
    ana = Analyzer()
    strides = [E.const(1, "int32")] * len(shape)
    align_of = {axis: (f, o) for axis, f, o in aligns}
    for k in range(len(shape) - 2, -1, -1):
        s = ana.simplify(strides[k + 1] * shape[k + 1])
        if k in align_of:
            f, o = align_of[k]
            s = ana.simplify(s + E.binary("floormod", o - s, f))
        strides[k] = s
    return tuple(strides)


def make_buffer(names: NameTable, tensor, shape: tuple, scope: str, aligns=()) -> ir.Buffer:
    name = names.get(tensor.name)
    return ir.Buffer(name, tensor.dtype, tuple(shape), row_major_strides(shape, aligns),
                     Var(name, "handle"), scope)


class _Flatten(Mutator):
    def __init__(self, arg_buffers: dict, names: NameTable):
        self.buffers = {t: (buf, None) for t, buf in arg_buffers.items()}  # tensor->(buf, mins)
        self.names = names
        self.ana = Analyzer()

    def _index(self, tensor, indices: tuple) -> tuple:
        if tensor not in self.buffers:
            raise LoweringError(f"tensor '{tensor.name}' is read but neither passed as an "
                                f"argument nor computed in this function; add it to the "
                                f"argument list")
        buf, mins = self.buffers[tensor]
        flat = None
        for k, (idx, stride) in enumerate(zip(indices, buf.strides)):
            if mins is not None and not (isinstance(mins[k], Const) and mins[k].value == 0):
                idx = idx - mins[k]
            term = idx if isinstance(stride, Const) and stride.value == 1 else idx * stride
            flat = term if flat is None else flat + term
        if flat is None:
            flat = E.const(0)
        return buf, self.ana.simplify(flat)

    def visit_ProducerRealize(self, s: ir.ProducerRealize) -> ir.Stmt:
        shape = tuple(r.extent for r in s.bounds)
        buf = make_buffer(self.names, s.tensor, shape, s.scope, s.align)
        self.buffers[s.tensor] = (buf, tuple(r.min for r in s.bounds))
        body = yield s.body  # a generator frame: root stages nest (see Mutator.visit_stmt)
        size = self.ana.simplify(buf.strides[0] * shape[0]) if shape else E.const(1)
        return ir.Allocate(buf, size, body)

    def visit_AliasScope(self, s: ir.AliasScope) -> ir.Stmt:
        for tensor, target in s.aliases:
            self.buffers[tensor] = self.buffers[target]
        return (yield s.body)

    def visit_BufferBind(self, s: ir.BufferBind) -> ir.Stmt:
        binding = {}
        for decl, tensor, mins, written in s.binds:
            if tensor not in self.buffers:
                raise LoweringError(f"tensor '{tensor.name}' is bound to buffer "
                                    f"'{decl.name}' but is neither an argument nor computed "
                                    f"in this function; add it to the argument list")
            real, real_mins = self.buffers[tensor]
            binding[decl] = (real, self._offset(real, real_mins, mins), written)
        return (yield bind_buffers(s.body, binding, self.ana))

    def _offset(self, buf: ir.Buffer, real_mins, mins) -> E.Expr:
        """The flat offset of coordinates `mins` (None: the start) of a realized region."""
        offset = E.const(0)
        for k, stride in enumerate(buf.strides):
            lo = mins[k] if mins is not None else E.const(0)
            if real_mins is not None:
                lo = lo - real_mins[k]
            offset = offset + lo * stride
        return self.ana.simplify(offset)

    def visit_ProducerStore(self, s: ir.ProducerStore) -> ir.Stmt:
        indices = tuple(self.visit_expr(i) for i in s.indices)
        buf, index = self._index(s.tensor, indices)
        return ir.Store(buf, index, self.visit_expr(s.value))

    def visit_TensorLoad(self, e: TensorLoad) -> E.Expr:
        indices = tuple(self.visit_expr(i) for i in e.indices)
        buf, index = self._index(e.tensor, indices)
        return ir.Load(e.dtype, buf, index)


def storage_flatten(body: ir.Stmt, arg_tensors: list) -> tuple:
    """(param Buffers in argument order, flattened body)."""
    names = NameTable()
    params = {}
    for t in arg_tensors:
        params[t] = make_buffer(names, t, t.shape, "global")
    flat = _Flatten(params, names).visit_stmt(body)
    return tuple(params[t] for t in arg_tensors), flat
