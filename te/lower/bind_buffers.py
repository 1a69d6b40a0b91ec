"""bind_buffers: put user-declared buffers (te.decl_buffer, te.extern's) on real storage.

Takes a statement written over declared buffers (Load/Store/AccessPtr/BufferArg of them,
their elem_offset, stride and shape Vars) and, per declared buffer, the flattened Buffer
of its tensor and the offset of its region there; gives the statement over the real
buffers, each declared Var replaced by what it is bound to. A declared constant stride
or offset that differs from the real one is refused, naming the buffer. Imports
te.compute, ir, visitor, arith.
"""
from __future__ import annotations

import dataclasses

from ..compute import expr as E
from ..compute.expr import Const, Var
from ..errors import LoweringError
from . import ir
from .arith import Analyzer
from .visitor import Mutator


def bind_buffers(body: ir.Stmt, binding: dict, ana: Analyzer) -> ir.Stmt:
    """binding: declared Buffer -> (real Buffer, offset of its element 0, written)."""
    vmap: dict = {}
    for decl, (real, offset, _) in binding.items():
        vmap[decl.data] = real.data
        _bind(vmap, decl, "elem_offset", decl.elem_offset, offset, ana)
        strides = real.strides[len(real.strides) - len(decl.strides):]
        if len(decl.strides) > len(real.strides):
            raise LoweringError(f"buffer '{decl.name}' has {len(decl.strides)} dimensions, "
                                f"more than the {len(real.strides)} of '{real.name}' it is "
                                f"bound to")
        for k, (mine, theirs) in enumerate(zip(decl.strides, strides)):
            _bind(vmap, decl, f"strides[{k}]", mine, theirs, ana)
        shape = real.shape[len(real.shape) - len(decl.shape):]
        for k, (mine, theirs) in enumerate(zip(decl.shape, shape)):
            if isinstance(mine, Var) and mine not in vmap:
                vmap[mine] = theirs
    return _Rebind(binding, vmap).visit_stmt(body)


def _bind(vmap: dict, decl: ir.Buffer, what: str, mine, theirs: E.Expr, ana: Analyzer):
    if mine is None:
        mine = E.const(0)
    if isinstance(mine, Var):
        if mine in vmap and not _equal(vmap[mine], theirs, ana):
            raise LoweringError(f"buffer '{decl.name}': {what} {mine.name} is bound to two "
                                f"different values")
        vmap[mine] = theirs
        return
    if not _equal(mine, theirs, ana):
        raise LoweringError(f"buffer '{decl.name}' declares {what} = {_text(mine)}, but the "
                            f"tensor region it is bound to has {what} = {_text(theirs)}; "
                            f"declare it as a te.var to take any value")


def _equal(a, b, ana: Analyzer) -> bool:
    diff = ana.simplify(E.as_expr(a) - E.as_expr(b))
    return isinstance(diff, Const) and diff.value == 0


def _text(e) -> str:
    from .printer import print_expr
    return print_expr(E.as_expr(e))


class _Rebind(Mutator):
    def __init__(self, binding: dict, vmap: dict):
        self.binding, self.vmap = binding, vmap

    def _buffer(self, buf: ir.Buffer) -> tuple:
        real, _, written = self.binding.get(buf, (buf, None, False))
        return real, written

    def visit_Var(self, e: Var) -> E.Expr:
        return self.vmap.get(e, e)

    def visit_Load(self, e: ir.Load) -> E.Expr:
        real, _ = self._buffer(e.buffer)
        return dataclasses.replace(e, buffer=real, index=self.visit_expr(e.index))

    def visit_Store(self, s: ir.Store) -> ir.Stmt:
        real, _ = self._buffer(s.buffer)
        return ir.Store(real, self.visit_expr(s.index), self.visit_expr(s.value))

    def visit_AccessPtr(self, e: ir.AccessPtr) -> E.Expr:
        real, written = self._buffer(e.buffer)
        return ir.AccessPtr("handle", real, self.visit_expr(e.offset), e.write)

    def visit_BufferArg(self, e: ir.BufferArg) -> E.Expr:
        real, written = self._buffer(e.buffer)
        new = E.with_children(e, tuple(self.visit_expr(x) for x in E.children(e)))
        return dataclasses.replace(new, buffer=real, write=e.write or written)
