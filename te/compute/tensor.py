"""Tensors and the operations that produce them.

Takes expressions (expr.py), gives Range, IterVar, Tensor, PlaceholderOp and ComputeOp: the
dataflow graph a schedule is made on. Imports expr, te.dtype and te.errors only.
Operations compare by identity; a Tensor is (op, value_index).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ShapeError
from .expr import Expr, ExprOp, TensorLoad, Var, as_expr, pre_order, Reduce


@dataclass(frozen=True, eq=False)
class Range:
    """The half-open interval [min, min + extent)."""
    min: Expr
    extent: Expr

    def __repr__(self):
        return f"Range(min={self.min!r}, extent={self.extent!r})"


DATA_PAR, REDUCE, THREAD = "data_par", "reduce", "thread"


@dataclass(frozen=True, eq=False)
class IterVar(ExprOp):
    """An iteration axis: a loop variable with a domain and a kind (data_par/reduce/thread)."""
    dom: Range | None
    var: Var
    iter_type: str = DATA_PAR
    thread_tag: str = ""

    __hash__ = object.__hash__

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dtype(self) -> str:
        return self.var.dtype

    def __repr__(self):
        return f"IterVar({self.var.name}, {self.iter_type})"


class Operation:
    """Base of the operations in the dataflow graph; compared by identity."""
    name: str

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int = 0) -> "Tensor":
        if not 0 <= index < self.num_outputs:
            raise ShapeError(f"output index: expected 0..{self.num_outputs - 1}, got {index}")
        return Tensor(self, index)

    @property
    def input_tensors(self) -> list:
        return []


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype

    def output_shape(self, index: int) -> tuple:
        return self.shape

    def output_dtype(self, index: int) -> str:
        return self.dtype

    def __repr__(self):
        return f"placeholder({self.name}, shape={_shape_str(self.shape)}, {self.dtype})"


class ComputeOp(Operation):
    """out[axis...] = body[value_index], possibly a reduction over reduce_axis."""

    def __init__(self, name: str, tag: str, attrs: dict, axis: tuple, reduce_axis: tuple,
                 body: tuple):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.axis, self.reduce_axis, self.body = tuple(axis), tuple(reduce_axis), tuple(body)
        self._inputs: list | None = None

    @property
    def num_outputs(self) -> int:
        return len(self.body)

    @property
    def shape(self) -> tuple:
        return tuple(iv.dom.extent for iv in self.axis)

    def output_shape(self, index: int) -> tuple:
        return self.shape

    def output_dtype(self, index: int) -> str:
        return self.body[index].dtype

    @property
    def input_tensors(self) -> list:
        if self._inputs is None:
            found: dict = {}

            def visit(e):
                if isinstance(e, TensorLoad):
                    found.setdefault(e.tensor, None)
            for b in self.body:
                pre_order(b, visit)
            self._inputs = list(found)
        return self._inputs

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body[0], Reduce)

    def __repr__(self):
        return f"compute({self.name}, shape={_shape_str(self.shape)})"


def _shape_str(shape) -> str:
    from .expr import Const
    return "(" + ", ".join(str(s.value) if isinstance(s, Const) else getattr(s, "name", "?")
                           for s in shape) + ")"


@dataclass(frozen=True, eq=False)
class Tensor:
    """Output `value_index` of operation `op`; index it with T[i, j] or T(i, j)."""
    op: Any
    value_index: int = 0

    def __eq__(self, other):
        return (isinstance(other, Tensor) and self.op is other.op
                and self.value_index == other.value_index)

    def __hash__(self):
        return hash((id(self.op), self.value_index))

    @property
    def shape(self) -> tuple:
        return self.op.output_shape(self.value_index)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        return self.op.output_dtype(self.value_index)

    @property
    def name(self) -> str:
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    def __call__(self, *indices) -> Expr:
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise ShapeError(f"indexing tensor '{self.name}': expected {self.ndim} indices, "
                             f"got {len(indices)}")
        exprs = []
        for k, i in enumerate(indices):
            e = as_expr(i)
            if not e.dtype.startswith(("int", "uint")) or "x" in e.dtype:
                raise ShapeError(f"indexing tensor '{self.name}': index {k} must be an "
                                 f"integer expression, got dtype {e.dtype}")
            exprs.append(e)
        return TensorLoad(self.dtype, self, tuple(exprs))

    def __getitem__(self, indices) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self(*indices)

    def __repr__(self):
        return f"Tensor({self.name}, shape={_shape_str(self.shape)}, {self.dtype})"

    def __bool__(self):
        return True
