"""Minimal reproducers of compiler bugs found by the operator catalogue (te.compute.ops).

Each test states the correct answer. A live bug is marked xfail(strict=True): when a fix
lands the test passes, strict xfail fails, and the mark comes off (the test stays as a
regression test). Imports te, numpy and helpers.
"""
import numpy as np
import pytest

import te
from helpers import check_schedule

def test_floordiv_with_constant_multiple_of_divisor():
    """Was: arith.Analyzer._divmod kept the constant of floordiv(x*k + c, d) undivided, so
    floordiv(i*7 + 7, 7) simplified to i + 7 instead of i + 1."""
    A = te.placeholder((12,), name="A")  # large enough that the wrong index stays in bounds
    B = te.compute((4,), lambda i: A[te.indexdiv(i * 7 + 7, 7)], name="B")
    check_schedule(te.create_schedule(B.op), [A], [B], lambda a: a[1:5])


def test_fuse_split_unroll_keeps_every_iteration():
    """Was: the floordiv bug above dropped the last unrolled copy of a fused, split body."""
    X = te.placeholder((5, 7), name="X")
    Y = te.compute(X.shape, lambda i, j: X[i, j] + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    _, fi = s[Y].split(s[Y].fuse(*Y.op.axis), 8)
    s[Y].unroll(fi)
    check_schedule(s, [X], [Y], lambda x: x + 1)


def test_compute_at_indirect_consumer():
    """topi's x86 softmax schedule attaches max_elem at the output's row loop, which reads it
    only through exp (attached there too)."""
    from te.compute import ops
    X = te.placeholder((13, 31), name="X")
    Y = ops.softmax(X)
    exp = Y.op.input_tensors[0]
    maxelem = exp.op.input_tensors[1]
    s = te.create_schedule(Y.op)
    expsum = Y.op.input_tensors[1]
    s[maxelem].compute_at(s[Y], Y.op.axis[0])
    s[exp].compute_at(s[Y], Y.op.axis[0])
    s[expsum].compute_at(s[Y], Y.op.axis[0])

    def ref(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    check_schedule(s, [X], [Y], ref, rtol=1e-4)


def test_compute_at_indirect_consumer_with_reader_outside_is_refused():
    from te.compute import ops
    X = te.placeholder((13, 31), name="X")
    Y = ops.softmax(X)
    exp = Y.op.input_tensors[0]
    maxelem = exp.op.input_tensors[1]
    s = te.create_schedule(Y.op)
    s[maxelem].compute_at(s[Y], Y.op.axis[0])  # but exp stays at root: it reads outside
    with pytest.raises(te.LoweringError, match="its reader '.*' runs outside that loop"):
        te.lower(s, [X, Y])
