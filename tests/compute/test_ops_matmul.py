"""te.compute.ops matmul and batch_matmul against numpy.

Odd sizes (37x29x51 and 19x13x23, size-1 dims), transpose_b, batch broadcasting, int32 exact;
the default schedule and tile / reorder / vectorize / unroll / parallel, cache_read,
cache_write with compute_at, and rfactor. Imports te, te.compute.ops, numpy and helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-4)


def _ref(transpose_b):
    return (lambda a, b: a @ b.T) if transpose_b else (lambda a, b: a @ b)


@pytest.mark.parametrize("m, n, k", [(37, 29, 51), (1, 13, 1), (7, 1, 31), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_default(m, n, k, transpose_b):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((n, k) if transpose_b else (k, n), name="B")
    C = ops.matmul(A, B, transpose_b=transpose_b)
    check(te.create_schedule(C.op), [A, B], [C], _ref(transpose_b))


def test_matmul_int32_out_dtype():
    A = te.placeholder((7, 13), "int8", name="A")
    B = te.placeholder((13, 5), "int8", name="B")
    C = ops.matmul(A, B, out_dtype="int32")
    assert C.dtype == "int32"
    check(te.create_schedule(C.op), [A, B], [C],
          lambda a, b: a.astype("int32") @ b.astype("int32"))


def mm_tile_vectorize_parallel(s, C):
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)


def mm_fuse_outer(s, C):
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 5, 6)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)


def mm_cache_write(s, C):
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], jo)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], 4)
    xc, yc = s[CC].op.axis
    s[CC].reorder(ko, ki, xc, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].vectorize(ji)


def mm_cache_read(s, C):
    A, B = C.op.input_tensors
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 6)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[AA].compute_at(s[C], ko)
    s[BB].compute_at(s[C], ko)


def mm_rfactor(s, C):
    ko, ki = s[C].split(C.op.reduce_axis[0], 8)
    CF = s.rfactor(C, ki)
    s[CF].compute_at(s[C], C.op.axis[1])


SCHEDULES = [mm_tile_vectorize_parallel, mm_fuse_outer, mm_cache_write, mm_cache_read,
             mm_rfactor]


@pytest.mark.parametrize("sched", SCHEDULES, ids=lambda f: f.__name__[3:])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_scheduled(sched, transpose_b):
    A = te.placeholder((19, 23), name="A")  # no factor used below divides 19, 23 or 13
    B = te.placeholder((13, 23) if transpose_b else (23, 13), name="B")
    C = ops.matmul(A, B, transpose_b=transpose_b)
    s = te.create_schedule(C.op)
    sched(s, C)
    check(s, [A, B], [C], _ref(transpose_b))


@pytest.mark.parametrize("sched", [mm_tile_vectorize_parallel, mm_cache_write],
                         ids=["tile_vectorize_parallel", "cache_write"])
def test_matmul_scheduled_int(sched):
    A = te.placeholder((13, 31), "int32", name="A")
    B = te.placeholder((31, 17), "int32", name="B")
    C = ops.matmul(A, B)
    s = te.create_schedule(C.op)
    sched(s, C)
    check(s, [A, B], [C], lambda a, b: a @ b)


def test_matmul_relu_epilogue_inlined_producer():
    """relu(matmul + bias): the bias add inlined into relu, matmul attached per row tile."""
    A = te.placeholder((13, 7), name="A")
    B = te.placeholder((7, 9), name="B")
    bias = te.placeholder((9,), name="bias")
    C = ops.matmul(A, B)
    D = ops.add(C, bias)
    E = ops.relu(D)
    s = te.create_schedule(E.op)
    s[D].compute_inline()
    io, _ = s[E].split(E.op.axis[0], 4)
    s[C].compute_at(s[E], io)
    check(s, [A, B, bias], [E], lambda a, b, c: np.maximum(a @ b + c, 0))


@pytest.mark.parametrize("ba, bb", [(3, 3), (1, 3), (3, 1), (1, 1)], ids=str)
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_matmul(ba, bb, transpose_b):
    A = te.placeholder((ba, 7, 13), name="A")
    B = te.placeholder((bb, 5, 13) if transpose_b else (bb, 13, 5), name="B")
    C = ops.batch_matmul(A, B, transpose_b=transpose_b)
    ref = (lambda a, b: a @ np.swapaxes(b, 1, 2)) if transpose_b else (lambda a, b: a @ b)
    check(te.create_schedule(C.op), [A, B], [C], ref)


def test_batch_matmul_scheduled():
    A = te.placeholder((3, 17, 13), name="A")
    B = te.placeholder((3, 13, 11), name="B")
    C = ops.batch_matmul(A, B)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    b, i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    s[C].parallel(s[C].fuse(b, io))
    s[CC].compute_at(s[C], jo)
    s[C].vectorize(ji)
    check(s, [A, B], [C], lambda a, b: a @ b)
