"""Loop IR: statements, buffers and the flat Load expression.

Takes compute-level expressions (te.compute.expr) as the expression language and adds the
statement layer that schedules lower to. Two phases share these nodes:
  * before storage flattening: ProducerRealize / ProducerStore over compute Tensors, reads are
    TensorLoad (multi-dimensional, logical coordinates);
  * after: Allocate / Store / Load over flat Buffers (one linear index, in elements).
Imports te.compute.expr and te.dtype only. Nodes are frozen; edit with dataclasses.replace.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Expr, Var

# For-loop kinds. "unrolled"/"vectorized"/"parallel" come from schedule annotations;
# "thread_binding" loops are bound to a GPU thread axis (thread_tag says which).
SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING = (
    "serial", "parallel", "vectorized", "unrolled", "thread_binding")
FOR_KINDS = (SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING)
# Loop pragmas that apply to everything inside the loop, so a pass that removes the loop
# (vectorize, unroll, simplify of a one-iteration loop) keeps them on a loop around what
# replaced it; the others describe the loop itself and go with it.
NONTEMPORAL_STORE = "nontemporal_store"
# "import_llvm": LLVM IR text the build links into the module (te/codegen/llvm/link.py)
BODY_PRAGMAS = (NONTEMPORAL_STORE, "import_llvm")
# Stage.pipeline, for the software_pipeline pass (which removes both): the pipelined loop
# (value: the loop variable to interleave with, or None), and a one-iteration loop around
# the pipelined stage's own loops below it.
SOFTWARE_PIPELINE = "software_pipeline"
PIPELINE_LATE_PART = "software_pipeline_late_part"


@dataclass(frozen=True, eq=False)
class Buffer:
    """A flat region of memory holding `dtype` elements, viewed with `shape` and `strides`.

    `data` is the pointer variable that names the storage in generated code. Strides and
    elem_offset are in elements; an argument buffer is dense row-major unless told otherwise.
    scope: "global" for arguments and compute_root temporaries, "local"/"shared" for caches.
    """
    name: str
    dtype: str
    shape: tuple
    strides: tuple
    data: Var
    scope: str = "global"
    align: int = 64
    # A buffer declared by the user (te.decl_buffer, te.extern's ins/outs) views part of a
    # tensor: elem_offset (an Expr, often a Var bound when it is) is where its element 0
    # lies in the storage of `data`; offset_factor: elem_offset is a multiple of it.
    elem_offset: Any = None
    offset_factor: int = 0

    __hash__ = object.__hash__

    def __repr__(self):
        return f"Buffer({self.name}, {self.dtype})"

    def access_ptr(self, access_mask="rw", ptr_type: str = "handle", content_lanes: int = 1,
                   offset=0) -> "AccessPtr":
        """The address of element `offset` of this buffer (TVM's Buffer.access_ptr), for an
        extern call; access_mask ("r", "w", "rw") says whether the callee writes it."""
        mask = access_mask if isinstance(access_mask, str) else \
            ("r" if access_mask & 1 else "") + ("w" if access_mask & 2 else "")
        if not mask or set(mask) - set("rw"):
            raise ValueError(f"access_ptr of buffer '{self.name}': access_mask must be 'r', "
                             f"'w' or 'rw', got {access_mask!r}")
        start = self.elem_offset if self.elem_offset is not None else E.const(0)
        return AccessPtr("handle", self, E.as_expr(start) + E.as_expr(offset), "w" in mask)

    def vload(self, begin, dtype: str | None = None) -> "Load":
        """The element at multi-dimensional index `begin` (TVM's Buffer.vload)."""
        begin = begin if isinstance(begin, (list, tuple)) else [begin]
        index = self.elem_offset if self.elem_offset is not None else E.const(0)
        for i, stride in zip(begin, self.strides):
            index = index + E.as_expr(i) * stride
        return Load(dtype or self.dtype, self, index)


@dataclass(frozen=True, eq=False)
class AccessPtr(Expr):
    """&buffer.data[offset] as a "handle" (an untyped pointer), for an extern call; write:
    whether the callee may store through it (the buffer is then an output)."""
    buffer: Buffer
    offset: Expr
    write: bool = False

    def expr_children(self) -> tuple:
        return (self.offset,)

    def with_expr_children(self, new: tuple) -> "AccessPtr":
        return dataclasses.replace(self, offset=new[0])


@dataclass(frozen=True, eq=False)
class BufferArg(Expr):
    """A buffer handed to a packed function whole: its element `offset` of `buffer.data`
    is element 0 of an array of `shape` and `strides` (elements); the callee receives an
    array viewing that memory. write: the callee may store into it."""
    buffer: Buffer
    offset: Expr
    shape: tuple
    strides: tuple
    write: bool = False

    def expr_children(self) -> tuple:
        return (self.offset,) + tuple(self.shape) + tuple(self.strides)

    def with_expr_children(self, new: tuple) -> "BufferArg":
        n = len(self.shape)
        return dataclasses.replace(self, offset=new[0], shape=tuple(new[1:1 + n]),
                                   strides=tuple(new[1 + n:]))


@dataclass(frozen=True, eq=False)
class PackedCall(Expr):
    """Calls the Python function registered as `name` (runtime.packed) with `args`
    (BufferArgs and scalars); its int32 value is 0, or the kernel stops with the error
    the function raised."""
    name: str
    args: tuple

    def expr_children(self) -> tuple:
        return self.args

    def with_expr_children(self, new: tuple) -> "PackedCall":
        return dataclasses.replace(self, args=tuple(new))


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """buffer[index]; a Ramp index with a vector dtype reads several lanes at once."""
    buffer: Buffer
    index: Expr

    def expr_children(self) -> tuple:
        return (self.index,)

    def with_expr_children(self, new: tuple) -> "Load":
        return dataclasses.replace(self, index=new[0])


@dataclass(frozen=True, eq=False)
class CheckedIndex(Expr):
    """The index of a Load or Store of `buffer`, checked when the code runs to lie in
    [0, extent) (every lane, for a vector index): otherwise the kernel stops and reports the
    buffer, the index and the extent. Made by the instrument_bound_checkers pass only."""
    index: Expr
    extent: Expr
    buffer: Buffer

    def expr_children(self) -> tuple:
        return (self.index, self.extent)

    def with_expr_children(self, new: tuple) -> "CheckedIndex":
        return dataclasses.replace(self, index=new[0], extent=new[1])


def unchecked(index: Expr) -> Expr:
    """The index expression itself, with its run-time bounds check (if any) taken off."""
    return index.index if isinstance(index, CheckedIndex) else index


@dataclass(frozen=True, eq=False)
class Prefetch(Expr):
    """A hint to fetch the cache line holding element `load` (a TensorLoad before storage
    flattening, a scalar Load after) into the cache, for reading or (write=True) for
    writing; the element is not read. It appears only as the value of an Evaluate; its
    dtype is "handle" (it has no value). locality: LLVM's temporal-locality hint, 0-3
    (Stage.prefetch)."""
    load: Expr
    write: bool = False
    locality: int = 3

    def expr_children(self) -> tuple:
        return (self.load,)

    def with_expr_children(self, new: tuple) -> "Prefetch":
        return dataclasses.replace(self, load=new[0])


class Stmt:
    """Base of statements."""
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class For(Stmt):
    """for (loop_var = min; loop_var < min + extent; ++loop_var) body."""
    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    thread_tag: str = ""
    pragmas: tuple = ()  # ((key, value), ...) from Stage.pragma


@dataclass(frozen=True, eq=False)
class SeqStmt(Stmt):
    stmts: tuple


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Evaluate(Stmt):
    """Evaluates an expression for its side effects (an extern call)."""
    value: Expr


@dataclass(frozen=True, eq=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, eq=False)
class ProducerStore(Stmt):
    """tensor[indices] = value, in the tensor's logical coordinates (before flattening)."""
    tensor: Any
    indices: tuple
    value: Expr


@dataclass(frozen=True, eq=False)
class ProducerRealize(Stmt):
    """Storage for the part `bounds` (Ranges) of a tensor exists while `body` runs."""
    tensor: Any
    bounds: tuple
    scope: str
    body: Stmt
    align: tuple = ()  # ((axis, factor, offset), ...) from storage_align


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    """buffer[index] = value; a Ramp index with a vector value writes several lanes."""
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, eq=False)
class BufferBind(Stmt):
    """Before storage flattening only: `body` reads and writes user-declared buffers
    (te.extern's, a tensor intrinsic's); binds holds (declared buffer, tensor, region
    mins or None for the whole tensor, written), and storage_flatten puts each declared
    buffer on the storage of its tensor at that region; `body` may write the written ones
    through pointers (an extern call) as well as by Store."""
    binds: tuple
    body: Stmt


@dataclass(frozen=True, eq=False)
class AliasScope(Stmt):
    """Before storage flattening only: inside `body` each tensor of `aliases` ((tensor,
    target), ...) is stored in target's storage, at the same coordinates (a scan's init,
    update and state tensors all live in the scan's output)."""
    aliases: tuple
    body: Stmt


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """`extent` elements of storage for `buffer` exist while `body` runs."""
    buffer: Buffer
    extent: Expr
    body: Stmt


@dataclass(frozen=True, eq=False)
class ParallelTask(Stmt):
    """Parallel loop `loop` outlined (the parallel_outline pass): its iterations run as a
    task function `name` on the thread pool, which receives the values of `captured` (the
    Vars the loop's body reads and does not bind: buffer data pointers, sizes, enclosing
    loop and let variables, in first-use order) from the function that starts it."""
    name: str
    captured: tuple
    loop: For


@dataclass(frozen=True, eq=False)
class ThreadAllreduce(Stmt):
    """A reduction across threads (TVM's tvm_thread_allreduce): each thread of a group
    contributes `values` (one per value of `combiner`); `body` then runs once per group,
    on its first thread, with `results` (Vars) bound to the values combined over the
    group. A group: the threads of a block that differ only in the thread axes `tags`
    (the reduction's loops bound to threads). Where those loops ran one after another
    (the serial meaning: te's interpreter), `values` already hold the combination, so
    results = values. Built by te/lower/cross_thread.py."""
    combiner: Any       # te.compute.expr.CommReducer
    values: tuple       # Exprs
    results: tuple      # Vars
    tags: tuple         # thread tags, e.g. ("threadIdx.x",)
    body: Stmt


def has_pragma(loop: "For", key: str) -> bool:
    return any(k == key for k, _ in loop.pragmas)


def keep_body_pragmas(loop: "For", replacement: Stmt) -> Stmt:
    """What replaces `loop`, inside a one-iteration loop (a fresh, unused variable) that
    carries the loop's BODY_PRAGMAS, if it has any."""
    kept = tuple((k, v) for k, v in loop.pragmas if k in BODY_PRAGMAS)
    if not kept:
        return replacement
    name = loop.loop_var.name
    var = Var(name if name.endswith(".scope") else name + ".scope", loop.loop_var.dtype)
    zero, one = (E.const(x, var.dtype) for x in (0, 1))
    return For(var, zero, one, SERIAL, replacement, pragmas=kept)


def seq(*stmts) -> Stmt:
    """A SeqStmt of the non-empty statements, flattening nested sequences."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


def vector_dtype(buffer: Buffer, index: Expr) -> str:
    return dt.with_lanes(buffer.dtype, dt.lanes(index.dtype))
