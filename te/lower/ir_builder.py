"""IRBuilder: loop IR statements written as Python blocks (TVM's tvm.tir.ir_builder).

Takes expressions and Buffers; gives one statement (get()) for te.extern's fcompute or a
tensor intrinsic: `with ib.for_range(0, n, name="i") as i:`, `with ib.if_scope(c):` then
`with ib.else_scope():`, `ib.emit(stmt or call)`, `A = ib.buffer_ptr(buf); A[i] = A[i] + 1`
(indices in elements from the buffer's start), `ib.allocate(dtype, shape)`, `ib.let`.
Imports te.compute, ir.
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Expr, Var
from ..errors import ComputeError
from . import ir
from .passes.storage_flatten import row_major_strides

_KINDS = {"serial": ir.SERIAL, "parallel": ir.PARALLEL, "vectorize": ir.VECTORIZED,
          "unroll": ir.UNROLLED}


class BufferVar:
    """Element access to a buffer inside an IRBuilder: b[i] reads, b[i] = v stores."""

    def __init__(self, builder: "IRBuilder", buffer: ir.Buffer):
        self._builder, self._buffer = builder, buffer

    @property
    def dtype(self) -> str:
        return self._buffer.dtype

    @property
    def buffer(self) -> ir.Buffer:
        return self._buffer

    def _index(self, index) -> Expr:
        buf = self._buffer
        if isinstance(index, tuple):
            if len(index) != len(buf.strides):
                raise ComputeError(f"ir_builder: buffer '{buf.name}' has {len(buf.strides)} "
                                   f"dimensions, indexed with {len(index)}")
            flat = E.const(0)
            for i, stride in zip(index, buf.strides):
                flat = flat + E.as_expr(i) * stride
        else:
            flat = E.as_expr(index)
        if not dt.is_integral(flat.dtype):
            raise ComputeError(f"ir_builder: index of buffer '{buf.name}' must be an integer, "
                               f"got dtype {flat.dtype}")
        start = buf.elem_offset if buf.elem_offset is not None else E.const(0)
        return flat if isinstance(start, E.Const) and start.value == 0 else start + flat

    def __getitem__(self, index) -> Expr:
        return ir.Load(self._buffer.dtype, self._buffer, self._index(index))

    def __setitem__(self, index, value) -> None:
        value = E.as_expr(value)
        if value.dtype != self._buffer.dtype:
            value = E.cast(value, self._buffer.dtype)
        self._builder.emit(ir.Store(self._buffer, self._index(index), value))

    def access_ptr(self, access_mask="rw", offset=0):
        return self._buffer.access_ptr(access_mask, offset=offset)


class IRBuilder:
    """Collects statements in nested scopes; get() gives the statement."""

    def __init__(self):
        self._scopes: list = [[]]
        self._names: dict = {}

    def emit(self, stmt) -> None:
        """Append a statement, or an expression evaluated for its effect (a call)."""
        if isinstance(stmt, Expr):
            stmt = ir.Evaluate(stmt)
        if not isinstance(stmt, ir.Stmt):
            raise ComputeError(f"ir_builder.emit: expected a statement or a call expression, "
                               f"got {type(stmt).__name__}")
        self._scopes[-1].append(stmt)

    def _fresh(self, name: str) -> str:
        k = self._names.get(name, 0)
        self._names[name] = k + 1
        return name if k == 0 else f"{name}_{k}"

    @contextmanager
    def for_range(self, begin, end, name: str = "i", dtype: str = "int32",
                  kind: str = "serial"):
        """A loop over [begin, end); the block gets its variable."""
        if kind not in _KINDS:
            raise ComputeError(f"ir_builder.for_range: kind must be one of "
                               f"{', '.join(_KINDS)}, got {kind!r}")
        var = Var(self._fresh(name), dtype)
        lo, hi = E.as_expr(begin), E.as_expr(end)
        self._scopes.append([])
        yield var
        body = self._pop()
        extent = hi if isinstance(lo, E.Const) and lo.value == 0 else hi - lo
        cast = [x if x.dtype == dtype else E.cast(x, dtype) for x in (lo, extent)]
        self.emit(ir.For(var, cast[0], cast[1], _KINDS[kind], body))

    @contextmanager
    def if_scope(self, cond):
        """Statements run when `cond` holds."""
        self._scopes.append([])
        yield
        self.emit(ir.IfThenElse(E.as_expr(cond), self._pop()))

    @contextmanager
    def else_scope(self):
        """Statements run when the if_scope just closed did not."""
        last = self._scopes[-1][-1] if self._scopes[-1] else None
        if not isinstance(last, ir.IfThenElse) or last.else_case is not None:
            raise ComputeError("ir_builder.else_scope: must follow an if_scope block")
        self._scopes.append([])
        yield
        else_case = self._pop()
        self._scopes[-1][-1] = ir.IfThenElse(last.cond, last.then_case, else_case)

    def buffer_ptr(self, buf: ir.Buffer, shape=None) -> BufferVar:
        if not isinstance(buf, ir.Buffer):
            raise ComputeError(f"ir_builder.buffer_ptr: expected a buffer, got "
                               f"{type(buf).__name__}")
        return BufferVar(self, buf)

    def allocate(self, dtype: str, shape, name: str = "buf", scope: str = "local") -> BufferVar:
        """Storage for the rest of the enclosing block."""
        shape = tuple(E.as_expr(s) for s in (shape if isinstance(shape, (list, tuple))
                                              else [shape]))
        name = self._fresh(name)
        buf = ir.Buffer(name, dt.check_dtype(dtype, "ir_builder.allocate dtype"), shape,
                        row_major_strides(shape), Var(name, "handle"), scope)
        extent = E.const(1)
        for s in shape:
            extent = extent * s
        self._scopes[-1].append(("allocate", buf, extent))
        return BufferVar(self, buf)

    def let(self, name: str, value) -> Var:
        """A variable holding `value` for the rest of the enclosing block."""
        value = E.as_expr(value)
        var = Var(self._fresh(name), value.dtype)
        self._scopes[-1].append(("let", var, value))
        return var

    def get(self) -> ir.Stmt:
        if len(self._scopes) != 1:
            raise ComputeError("ir_builder.get: a with-block is still open")
        return _build(self._scopes[0])

    def _pop(self) -> ir.Stmt:
        return _build(self._scopes.pop())


def _build(items: list) -> ir.Stmt:
    """The statements of one block; an allocate or let holds the statements after it."""
    body: ir.Stmt = ir.SeqStmt(())
    tail: list = []
    for item in reversed(items):
        if isinstance(item, tuple):
            rest = ir.seq(*tail) if tail else ir.SeqStmt(())
            kind, a, b = item
            body = ir.Allocate(a, b, rest) if kind == "allocate" else ir.LetStmt(a, b, rest)
            tail = [body]
        else:
            tail.insert(0, item)
    return ir.seq(*tail) if tail else body


def create() -> IRBuilder:
    """A new IRBuilder (TVM's tvm.tir.ir_builder.create())."""
    return IRBuilder()
