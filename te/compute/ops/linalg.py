"""numpy.matmul over tensors of any rank >= 1: leading (batch) dims broadcast, a 1-d operand
is a row (lhs) or a column (rhs) vector whose unit dim is dropped from the result; and
matmul_panel, a matmul by a weight laid out ahead in the register tile's panels.

Takes two te.Tensors, gives one te.compute reduction stage. Imports te.compute (api,
tensor), te.errors and the sibling op modules only.
"""
from __future__ import annotations

from .. import api
from ..tensor import Tensor
from ...errors import ArgumentError
from ._util import check_dim, check_tensor, static_dim
from .elementwise import broadcast_index, broadcast_shape


def matmul_nd(A: Tensor, B: Tensor, out_dtype: str | None = None, name: str = "T_matmul_nd"
              ) -> Tensor:
    """numpy.matmul(A, B): C[..., i, j] = sum_k A[..., i, k] * B[..., k, j]."""
    who = "matmul_nd"
    check_tensor(A, who, "A")
    check_tensor(B, who, "B")
    a_vec, b_vec = A.ndim == 1, B.ndim == 1
    a_shape = (1,) + tuple(A.shape) if a_vec else tuple(A.shape)
    b_shape = tuple(B.shape) + (1,) if b_vec else tuple(B.shape)
    check_dim(b_shape[-2], a_shape[-1], who, "B's reduction size (A.shape[-1])")
    batch = broadcast_shape(a_shape[:-2], b_shape[:-2], who)
    nb = len(batch)
    dtype = out_dtype or A.dtype
    k = api.reduce_axis((0, a_shape[-1]), "k")

    def lead(t, b):
        return tuple(broadcast_index(_Shape(t.shape[:-2]), b)) if t.ndim > 2 else ()

    def fcompute(*i):
        b, rest = i[:nb], list(i[nb:])
        m = None if a_vec else rest.pop(0)
        n = None if b_vec else rest.pop(0)
        lhs = A[k] if a_vec else A(*lead(A, b), m, k)
        rhs = B[k] if b_vec else B(*lead(B, b), k, n)
        return api.sum(lhs.astype(dtype) * rhs.astype(dtype), axis=k)
    shape = tuple(batch) + (() if a_vec else (a_shape[-2],)) + (() if b_vec else (b_shape[-1],))
    if not shape:
        shape = (1,)  # vector . vector: te.compute declares no 0-d tensor
    return api.compute(shape, fcompute, name=name, tag="batch_matmul")


class _Shape:
    """Just enough of a tensor (ndim, shape) for broadcast_index on a batch shape."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def matmul_panel(A: Tensor, P: Tensor, n: int, out_dtype: str | None = None,
                 name: str = "T_matmul_panel") -> Tensor:
    """numpy.matmul(A, B) for a [k, n] matrix B given as panels P[p, k, r] = B[k, p * nr + r]
    (nr = P.shape[2], zero past column n): the layout the automatic space's register tile
    streams (te.autotune.panel_width), made once for a constant weight instead of per call.
    C[..., i, j] = sum_k A[..., i, k] * P[j // nr, k, j % nr]."""
    who = "matmul_panel"
    check_tensor(A, who, "A")
    check_tensor(P, who, "P", ndim=3)
    if A.ndim < 2:
        raise ArgumentError(f"{who}: A must have 2 or more dims (rows, k), got shape "
                            f"{tuple(A.shape)}")
    check_dim(P.shape[1], A.shape[-1], who, "P.shape[1] (the reduction size, A.shape[-1])")
    nr = static_dim(P.shape[2])
    panels = static_dim(P.shape[0])
    if not isinstance(n, int) or isinstance(n, bool) or nr is None or panels is None or \
            not (panels - 1) * nr < n <= panels * nr:
        raise ArgumentError(f"{who}: n must be an int in ({(panels - 1) * nr}, "
                            f"{panels * nr}] (the columns that P's {panels} panels of "
                            f"{nr} hold), got {n!r}")
    dtype = out_dtype or A.dtype
    k = api.reduce_axis((0, A.shape[-1]), "k")

    def fcompute(*i):
        lead, m, j = i[:-2], i[-2], i[-1]
        rhs = P[api.indexdiv(j, nr), k, api.indexmod(j, nr)]
        return api.sum(A(*lead, m, k).astype(dtype) * rhs.astype(dtype), axis=k)
    return api.compute(tuple(A.shape[:-1]) + (n,), fcompute, name=name, tag="matmul")
