"""tvm.contrib.cblas: matmul as a te.extern on numpy's BLAS.

Takes two 2-D tensors; gives the te.extern tensor of their product, which calls the packed
function "tvm.contrib.cblas.matmul" (registered on import, as TVM's runtime registers it
when built with cblas): numpy.matmul over zero-copy views of the kernel's buffers, so the
product runs in the BLAS numpy links (OpenBLAS in numpy's wheels). Imports numpy, runtime
and te.lower.extern_api.
"""
from __future__ import annotations

import numpy as np

from runtime.packed import register_func

from ...errors import ComputeError
from ...lower.extern_api import call_packed, extern

MATMUL = "tvm.contrib.cblas.matmul"


def _matmul(a, b, c, transa: bool, transb: bool) -> None:
    x, y = np.asarray(a), np.asarray(b)
    np.matmul(x.T if transa else x, y.T if transb else y, out=np.asarray(c))


register_func(MATMUL, _matmul, override=True)


def matmul(lhs, rhs, transa: bool = False, transb: bool = False, **kwargs):
    """The product op(lhs) @ op(rhs), op transposing where transa / transb say."""
    for name, t in (("lhs", lhs), ("rhs", rhs)):
        if getattr(t, "ndim", None) != 2:
            raise ComputeError(f"cblas.matmul: {name} must be a 2-D tensor, got "
                               f"{getattr(t, 'ndim', type(t).__name__)} dimensions")
    n = lhs.shape[1] if transa else lhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    return extern((n, m), [lhs, rhs], lambda ins, outs: call_packed(
        MATMUL, ins[0], ins[1], outs[0], bool(transa), bool(transb)),
        name="C", dtype=lhs.dtype, **kwargs)
