"""The user API over declared buffers: te.decl_buffer, te.extern, te.call_packed and
te.decl_tensor_intrin.

Takes shapes, dtypes, tensors and a user function that builds a statement over buffers;
gives loop IR Buffers (ir.py) and ExternOp tensors (te/compute/scan_extern.py). Checks of
user input happen here. Imports te.compute, ir.
"""
from __future__ import annotations

from typing import Callable

from .. import dtype as dt
from ..compute import expr as E
from ..compute.api import _shape
from ..compute.expr import Expr, Var
from ..compute.scan_extern import ExternOp, TensorIntrin
from ..compute.tensor import ComputeOp, PlaceholderOp, Tensor
from ..errors import ComputeError
from . import ir
from .passes.storage_flatten import row_major_strides


def decl_buffer(shape, dtype: str = "float32", name: str = "buffer", data=None,
                strides=None, elem_offset=None, scope: str = "", data_alignment: int = -1,
                offset_factor: int = 0) -> ir.Buffer:
    """te.decl_buffer (TVM's tvm.tir.decl_buffer): a buffer of `shape` and `dtype` to bind
    to a tensor (an extern's or a tensor intrinsic's). strides: elements per step of each
    dimension, dense row-major by default, a te.var where any value may be bound.
    offset_factor > 0: the buffer may start anywhere in its tensor (its elem_offset is
    then a variable); 0: it starts at the tensor's first element."""
    who = "te.decl_buffer"
    shape = _shape(shape, who)
    dtype = dt.check_dtype(dtype, f"{who} dtype")
    if not isinstance(name, str) or not name.isidentifier():
        raise ComputeError(f"{who}: name must be an identifier, got {name!r}")
    if strides is None:
        strides = row_major_strides(shape)
    else:
        if not isinstance(strides, (list, tuple)) or len(strides) != len(shape):
            raise ComputeError(f"{who}: strides must be a list of {len(shape)} ints or "
                               f"te.var (one per dimension), got {strides!r}")
        strides = tuple(E.as_expr(s) for s in strides)
        for k, s in enumerate(strides):
            if not dt.is_integral(s.dtype):
                raise ComputeError(f"{who}: strides[{k}] must be an integer, got dtype "
                                   f"{s.dtype}")
    if not isinstance(offset_factor, int) or offset_factor < 0:
        raise ComputeError(f"{who}: offset_factor must be an int >= 0, got {offset_factor!r}")
    if elem_offset is None:
        elem_offset = Var(f"{name}_elem_offset") if offset_factor else E.const(0)
    data = data if data is not None else Var(name, "handle")
    align = data_alignment if data_alignment > 0 else 64
    return ir.Buffer(name, dtype, shape, tuple(strides), data, scope or "global", align,
                     E.as_expr(elem_offset), offset_factor)


def call_packed(name: str, *args) -> Expr:
    """te.call_packed (TVM's tvm.tir.call_packed): call the Python function registered as
    `name` (tvm.register_func) with `args`: buffers (it receives arrays viewing them) and
    scalars. Its value is int32 0; a raised exception stops the kernel and re-raises."""
    if not isinstance(name, str) or not name or "|" in name:
        raise ComputeError(f"call_packed: name must be a registered function's name, got "
                           f"{name!r}")
    out = []
    for k, a in enumerate(args):
        if isinstance(a, ir.Buffer):
            out.append(ir.BufferArg("handle", a, a.elem_offset if a.elem_offset is not None
                                    else E.const(0), tuple(a.shape), tuple(a.strides)))
        elif isinstance(a, (Expr, bool, int, float)):
            out.append(E.as_expr(a))
        else:
            raise ComputeError(f"call_packed {name!r}: argument {k} must be a buffer, an "
                               f"expression or a Python number, got {type(a).__name__}")
    return ir.PackedCall("int32", name, tuple(out))


def extern(shape, inputs, fcompute: Callable, name: str = "extern", dtype=None,
           in_buffers=None, out_buffers=None, tag: str = "", attrs: dict | None = None):
    """te.extern: outputs of `shape` (a shape, or a list of shapes for several) computed
    by the statement fcompute(input buffers, output buffers) returns (a call_packed or
    call_extern expression, or an ir_builder statement). dtype: of the outputs, by default
    the first input's. Returns a tensor, or a list of them."""
    who = "te.extern"
    if not isinstance(inputs, (list, tuple)):
        raise ComputeError(f"{who}: inputs must be a list of tensors, got "
                           f"{type(inputs).__name__}")
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise ComputeError(f"{who}: inputs[{k}] must be a tensor, got {type(t).__name__}")
    several = isinstance(shape, (list, tuple)) and shape and \
        isinstance(shape[0], (list, tuple))
    shapes = [_shape(s, who) for s in (shape if several else [shape])]
    dtypes = _dtypes(dtype, inputs, len(shapes), who)
    if in_buffers is None:
        in_buffers = [decl_buffer(t.shape, t.dtype, _ident(t.name, "in")) for t in inputs]
    if out_buffers is None:
        out_buffers = [decl_buffer(s, d, f"{name}_out{k}" if len(shapes) > 1 else name)
                       for k, (s, d) in enumerate(zip(shapes, dtypes))]
    body = fcompute(list(in_buffers), list(out_buffers))
    if not isinstance(body, (Expr, ir.Stmt)):
        raise ComputeError(f"{who}: fcompute must return a statement (ir_builder.get()) or "
                           f"an expression (call_packed, call_extern), got "
                           f"{type(body).__name__}")
    op = ExternOp(name, tag, attrs, tuple(inputs), tuple(in_buffers), tuple(out_buffers), body)
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs if several else outs[0]


def _dtypes(dtype, inputs, n: int, who: str) -> list:
    if dtype is None:
        if not inputs:
            raise ComputeError(f"{who}: dtype is needed when there are no inputs")
        return [inputs[0].dtype] * n
    if isinstance(dtype, (list, tuple)):
        if len(dtype) != n:
            raise ComputeError(f"{who}: dtype must list one dtype per output ({n}), got "
                               f"{len(dtype)}")
        return [dt.check_dtype(d, f"{who} dtype") for d in dtype]
    return [dt.check_dtype(dtype, f"{who} dtype")] * n


def _ident(name: str, fallback: str) -> str:
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return clean if clean.isidentifier() else fallback


def decl_tensor_intrin(op, fcompute: Callable, name: str = "tensor_intrin", binds=None,
                       scalar_params=None, default_buffer_params=None) -> TensorIntrin:
    """te.decl_tensor_intrin: the intrinsic that computes `op` (a te.compute over
    placeholders) by the statements fcompute(input buffers, output buffers) returns: one
    (the whole computation), or (body, reset, update) for a reduction that tensorize may
    cover in parts. binds: tensor -> te.decl_buffer for op's inputs and output; the others
    get dense buffers that may start anywhere in their tensor."""
    who = "te.decl_tensor_intrin"
    op = op.op if isinstance(op, Tensor) else op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1:
        raise ComputeError(f"{who}: op must be a te.compute of one output, got {op!r}")
    if scalar_params:
        raise ComputeError(f"{who}: scalar_params is not supported")
    binds = dict(binds or {})
    for t in op.input_tensors:
        if not isinstance(t.op, PlaceholderOp):
            raise ComputeError(f"{who}: the intrinsic's compute must read placeholders only; "
                               f"it reads '{t.name}', computed by {type(t.op).__name__}")
    extra = dict(default_buffer_params or {})
    buffers = []
    for t in list(op.input_tensors) + [op.output(0)]:
        buf = binds.pop(t, None)
        if buf is None:
            buf = decl_buffer(t.shape, t.dtype, _ident(t.name, "buf"),
                              offset_factor=extra.get("offset_factor", 1),
                              strides=extra.get("strides"))
        _check_bound(who, t, buf)
        buffers.append(buf)
    if binds:
        names = ", ".join(getattr(t, "name", repr(t)) for t in binds)
        raise ComputeError(f"{who}: binds names tensors that op neither reads nor computes: "
                           f"{names}")
    ins, outs = buffers[:-1], buffers[-1:]
    result = fcompute(list(ins), list(outs))
    parts = list(result) if isinstance(result, (list, tuple)) else [result, None, None]
    if len(parts) != 3:
        raise ComputeError(f"{who}: fcompute must return a statement or (body, reset, "
                           f"update), got {len(parts)} values")
    stmts = [_as_stmt(who, p, k) for k, p in enumerate(parts)]
    return TensorIntrin(name, op, tuple(ins), tuple(outs), *stmts)


def _check_bound(who: str, t: Tensor, buf) -> None:
    if not isinstance(buf, ir.Buffer):
        raise ComputeError(f"{who}: binds['{t.name}'] must be a te.decl_buffer, got "
                           f"{type(buf).__name__}")
    if buf.dtype != t.dtype or len(buf.shape) != t.ndim:
        raise ComputeError(f"{who}: buffer '{buf.name}' ({buf.dtype}, {len(buf.shape)} "
                           f"dimensions) does not fit tensor '{t.name}' ({t.dtype}, {t.ndim} "
                           f"dimensions)")


def _as_stmt(who: str, part, k: int):
    if part is None or isinstance(part, ir.Stmt):
        return part
    if isinstance(part, Expr):
        return ir.Evaluate(part)
    names = ("body", "reset", "update")
    raise ComputeError(f"{who}: fcompute's {names[k]} must be a statement, a call expression "
                       f"or None, got {type(part).__name__}")
