"""te.compute.ops elementwise family against numpy: relu, broadcasting binary ops, scale-shift.

Random non-zero inputs (helpers.rand_array), odd sizes, size-1 dims, float32 and int32;
each op under the default schedule and under loop schedules whose factors do not divide
the extents. Imports te, te.compute.ops, numpy and helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-5)


def _last2(s, t):
    return s[t].op.axis[-2], s[t].op.axis[-1]


def sched_default(s, t):
    pass


def sched_split_vectorize_tail(s, t):
    _, ji = s[t].split(s[t].op.axis[-1], 4)  # 13 % 4 != 0: a vector tail
    s[t].vectorize(ji)


def sched_fuse_split_parallel(s, t):
    fused = s[t].fuse(*s[t].op.axis)
    fo, fi = s[t].split(fused, 8)
    s[t].parallel(fo)
    s[t].unroll(fi)


def sched_tile_reorder(s, t):
    i, j = _last2(s, t)
    io, jo, ii, ji = s[t].tile(i, j, 3, 5)
    s[t].reorder(jo, io, ji, ii)


SCHEDULES = [sched_default, sched_split_vectorize_tail, sched_fuse_split_parallel,
             sched_tile_reorder]


@pytest.mark.parametrize("sched", SCHEDULES, ids=lambda f: f.__name__[6:])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_relu(sched, dtype):
    A = te.placeholder((7, 13), dtype, name="A")
    B = ops.relu(A)
    assert B.dtype == dtype
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: np.maximum(a, 0))


BROADCASTS = [
    ((7, 13), (7, 13)),
    ((7, 1, 13), (5, 1)),
    ((13,), (7, 13)),
    ((1,), (31,)),
    ((1, 1), (1, 1)),
    ((3, 1, 5), (1, 7, 1)),
]


@pytest.mark.parametrize("op, ref", [(ops.add, np.add), (ops.multiply, np.multiply),
                                     (ops.subtract, np.subtract)],
                         ids=["add", "multiply", "subtract"])
@pytest.mark.parametrize("sa, sb", BROADCASTS, ids=str)
def test_broadcast_binary(op, ref, sa, sb):
    A = te.placeholder(sa, name="A")
    B = te.placeholder(sb, name="B")
    C = op(A, B)
    assert tuple(int(d) for d in C.shape) == np.broadcast_shapes(sa, sb)
    check(te.create_schedule(C.op), [A, B], [C], ref)


@pytest.mark.parametrize("sched", SCHEDULES[1:], ids=lambda f: f.__name__[6:])
def test_broadcast_int_scheduled(sched):
    A = te.placeholder((7, 1, 13), "int32", name="A")
    B = te.placeholder((5, 1), "int32", name="B")
    C = ops.multiply(A, B)
    s = te.create_schedule(C.op)
    sched(s, C)
    check(s, [A, B], [C], np.multiply)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_tensor_scalar_both_sides(dtype):
    A = te.placeholder((31,), dtype, name="A")
    B = ops.add(A, 3)
    C = ops.multiply(-2, B)
    D = ops.subtract(C, A)
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    _, xi = s[D].split(D.op.axis[0], 8)
    s[D].vectorize(xi)
    assert D.dtype == dtype
    check(s, [A], [D], lambda a: -2 * (a + 3) - a)


def test_divide_broadcast():
    A = te.placeholder((7, 13), name="A")
    B = te.placeholder((13,), name="B")
    C = ops.divide(A, B)
    check(te.create_schedule(C.op), [A, B], [C], np.divide)


def test_maximum_int():
    A = te.placeholder((13, 1), "int32", name="A")
    B = te.placeholder((1, 7), "int32", name="B")
    C = ops.maximum(A, B)
    check(te.create_schedule(C.op), [A, B], [C], np.maximum)


def _scale_shift():
    X = te.placeholder((2, 3, 5, 7), name="X")
    a = te.placeholder((3, 1, 1), name="a")
    b = te.placeholder((3, 1, 1), name="b")
    return X, a, b, ops.fused_scale_shift_relu(X, a, b)


def _ref_scale_shift(x, a, b):
    return np.maximum(x * a + b, 0)


@pytest.mark.parametrize("sched", SCHEDULES, ids=lambda f: f.__name__[6:])
def test_fused_scale_shift_relu(sched):
    X, a, b, Y = _scale_shift()
    s = te.create_schedule(Y.op)
    sched(s, Y)
    check(s, [X, a, b], [Y], _ref_scale_shift)


def test_fused_scale_shift_relu_scalars():
    X = te.placeholder((7, 13), name="X")
    Y = ops.fused_scale_shift_relu(X, 0.5, -0.25)
    check(te.create_schedule(Y.op), [X], [Y], lambda x: np.maximum(x * 0.5 - 0.25, 0))


def test_chain_inline_and_compute_at():
    """add -> relu -> multiply: the first stage inlined, the second attached per row."""
    A = te.placeholder((7, 13), name="A")
    B = te.placeholder((13,), name="B")
    T1 = ops.add(A, B)
    T2 = ops.relu(T1)
    T3 = ops.multiply(T2, A)
    s = te.create_schedule(T3.op)
    s[T1].compute_inline()
    io, _ = s[T3].split(T3.op.axis[0], 2)
    s[T2].compute_at(s[T3], io)
    check(s, [A, B], [T3], lambda a, b: np.maximum(a + b, 0) * a)
