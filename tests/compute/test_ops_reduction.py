"""te.compute.ops reduction family against numpy: sum/max/min over several axes, argmax,
argmin, cumsum.

Random non-zero inputs (ints with many ties for argmax/argmin), odd sizes, keepdims; each op
under the default schedule and with split (non-dividing) reduce axes, reorder, parallel,
vectorize and rfactor. Imports te, te.compute.ops, numpy and helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-5)


REDUCERS = [(ops.sum, np.sum), (ops.max, np.max), (ops.min, np.min)]


@pytest.mark.parametrize("op, ref", REDUCERS, ids=["sum", "max", "min"])
@pytest.mark.parametrize("axis, keepdims", [
    (1, False), (0, True), ((0, 2), False), ((-1, 0), True), (None, True), ((1, 2), False),
], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_reduce(op, ref, axis, keepdims, dtype):
    A = te.placeholder((7, 1, 13), dtype, name="A")
    B = op(A, axis, keepdims=keepdims)
    assert B.dtype == dtype
    check(te.create_schedule(B.op), [A], [B], lambda a: ref(a, axis=axis, keepdims=keepdims))


def sched_split_reduce(s, t):
    ko, ki = s[t].split(s[t].op.reduce_axis[0], 4)
    s[t].reorder(ko, ki, *s[t].op.axis)


def sched_parallel_vectorize(s, t):
    s[t].parallel(s[t].op.axis[0])
    _, ji = s[t].split(s[t].op.axis[1], 4)
    s[t].vectorize(ji)


def sched_rfactor(s, t):
    _, ki = s[t].split(s[t].op.reduce_axis[-1], 4)
    s.rfactor(t, ki)


def sched_rfactor_outer_parallel(s, t):
    ko, _ = s[t].split(s[t].op.reduce_axis[0], 5)
    rf = s.rfactor(t, ko)
    s[t].parallel(s[t].op.axis[0])
    s[rf].compute_at(s[t], s[t].op.axis[0])


@pytest.mark.parametrize("sched", [sched_split_reduce, sched_parallel_vectorize, sched_rfactor,
                                   sched_rfactor_outer_parallel],
                         ids=lambda f: f.__name__[6:])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sum_two_axes_scheduled(sched, dtype):
    A = te.placeholder((7, 9, 13, 3), dtype, name="A")
    B = ops.sum(A, (1, 3))
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: a.sum(axis=(1, 3)))


@pytest.mark.parametrize("sched", [sched_split_reduce, sched_parallel_vectorize],
                         ids=lambda f: f.__name__[6:])
def test_max_scheduled(sched):
    A = te.placeholder((7, 31, 13), name="A")
    B = ops.max(A, 1)
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: a.max(axis=1))


@pytest.mark.parametrize("op, ref", [(ops.argmax, np.argmax), (ops.argmin, np.argmin)],
                         ids=["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_argmax_argmin(op, ref, axis, dtype):
    A = te.placeholder((13, 31), dtype, name="A")
    B = op(A, axis)
    assert B.dtype == "int32"
    check(te.create_schedule(B.op), [A], [B], lambda a: ref(a, axis=axis).astype("int32"))


def test_argmax_keepdims_size1():
    A = te.placeholder((1, 7, 1), "int32", name="A")
    B = ops.argmax(A, 1, keepdims=True)
    check(te.create_schedule(B.op), [A], [B],
          lambda a: np.argmax(a, axis=1)[:, None, :].astype("int32"))


def _argmax_red(B):
    return B.op.input_tensors[0]


def arg_split_reduce(s, B):
    red = _argmax_red(B)
    ko, ki = s[red].split(s[red].op.reduce_axis[0], 4)
    s[red].unroll(ki)


def arg_compute_at(s, B):
    red = _argmax_red(B)
    io, _ = s[B].split(B.op.axis[0], 4)
    s[red].compute_at(s[B], io)


def arg_rfactor(s, B):
    red = _argmax_red(B)
    ko, _ = s[red].split(s[red].op.reduce_axis[0], 8)
    s.rfactor(red, ko)


@pytest.mark.parametrize("sched", [arg_split_reduce, arg_compute_at, arg_rfactor],
                         ids=lambda f: f.__name__[4:])
def test_argmax_scheduled_ties(sched):
    A = te.placeholder((13, 31), "int32", name="A")  # values in [-9, 9]: many ties
    B = ops.argmax(A, 1)
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: np.argmax(a, axis=1).astype("int32"))


@pytest.mark.parametrize("axis, exclusive", [(0, False), (1, False), (-1, True), (0, True)],
                         ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum(axis, exclusive, dtype):
    A = te.placeholder((7, 13), dtype, name="A")
    B = ops.cumsum(A, axis, exclusive=exclusive)

    def ref(a):
        out = np.cumsum(a, axis=axis, dtype=a.dtype)
        return out - a if exclusive else out
    check(te.create_schedule(B.op), [A], [B], ref)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
def test_running_reductions_in_reverse(op, exclusive):
    A = te.placeholder((5, 9), "float32", name="A")
    B = getattr(ops, op)(A, 1, exclusive=exclusive, reverse=True)
    np_op, identity = (np.cumsum, 0.0) if op == "cumsum" else (np.cumprod, 1.0)

    def ref(a):
        flipped = a[:, ::-1]
        if exclusive:  # shift by one, the identity first
            flipped = np.concatenate([np.full((5, 1), identity, a.dtype), flipped[:, :-1]], 1)
        return np_op(flipped, axis=1)[:, ::-1]
    check(te.create_schedule(B.op), [A], [B], ref)


def test_cumsum_scheduled():
    A = te.placeholder((5, 31), name="A")
    B = ops.cumsum(A, 1)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], 8)
    _, ji = s[B].split(B.op.axis[1], 4)
    s[B].parallel(B.op.axis[0])
    s[B].vectorize(ji)
    check(s, [A], [B], lambda a: np.cumsum(a, axis=1))
