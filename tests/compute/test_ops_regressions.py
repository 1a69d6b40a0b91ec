"""Minimal reproducers of compiler bugs found by the operator catalogue (te.compute.ops).

Each test states the correct answer and is marked xfail(strict=True) while the bug lives:
when a fix lands the test passes, strict xfail fails, and the mark should be removed.
Imports te, numpy, helpers and te.lower.interp.
"""
import numpy as np
import pytest

import te
from helpers import check_schedule

FLOORDIV_CONST = ("arith.Analyzer._divmod keeps the constant of floordiv(x*k + c, d) undivided: "
                  "floordiv(i*7 + 7, 7) simplifies to i + 7 instead of i + 1")


@pytest.mark.xfail(strict=True, reason=FLOORDIV_CONST)
def test_floordiv_with_constant_multiple_of_divisor():
    A = te.placeholder((12,), name="A")  # large enough that the wrong index stays in bounds
    B = te.compute((4,), lambda i: A[te.indexdiv(i * 7 + 7, 7)], name="B")
    check_schedule(te.create_schedule(B.op), [A], [B], lambda a: a[1:5])


@pytest.mark.xfail(strict=True, reason=FLOORDIV_CONST + "; seen as fuse + split + unroll "
                   "dropping the last unrolled copy of the body")
def test_fuse_split_unroll_drops_iteration():
    X = te.placeholder((5, 7), name="X")
    Y = te.compute(X.shape, lambda i, j: X[i, j] + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    _, fi = s[Y].split(s[Y].fuse(*Y.op.axis), 8)
    s[Y].unroll(fi)
    check_schedule(s, [X], [Y], lambda x: x + 1)
