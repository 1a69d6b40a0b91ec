"""Loop extents that int32 cannot count: a split padded past 2**31 - 1 and fused axes whose
product passes it count in int64, and a constant extent is split exactly (the padded
extent + factor - 1 overflowed int32 and emptied the kernel). Sums of int64 terms check
that every iteration ran once: LLVM computes such loops in closed form, so 2**31 of them
take no time. Imports te, numpy, pytest, compute_oracle and helpers."""
import numpy as np
import pytest

import te
from compute_oracle import evaluate
from helpers import rand_array


def _int64_sum(extent):
    k = te.reduce_axis((0, extent), name="k")
    C = te.compute((1,), lambda i: te.sum(k.astype("int64") * 3 + 1, axis=k), name="C")
    return k, C


def _run_sum(s, C):
    c = np.zeros(1, "int64")
    te.build(s, [C])(c)
    return int(c[0])


def test_factor_near_int32_max_on_a_small_axis_keeps_the_loop():
    A = te.placeholder((1000,), name="A")
    B = te.compute((1000,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=2**31 - 1)
    assert (outer.dom.extent.value, inner.dom.extent.value) == (1, 2**31 - 1)
    assert outer.var.dtype == "int32"            # 2**31 - 1 iterations still count in int32
    a = rand_array((1000,))
    b = np.full(1000, np.nan, "float32")
    te.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, evaluate(B, {A: a})[0], rtol=1e-6)


def test_factor_equal_to_a_large_extent():
    n = 2**30 + 1
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=n)
    assert f"for (i.inner, 0, {n})" in str(te.lower(s, [A, B]))
    k, C = _int64_sum(n)
    s = te.create_schedule(C.op)
    s[C].split(k, factor=n)
    assert _run_sum(s, C) == 3 * n * (n - 1) // 2 + n


@pytest.mark.parametrize("by", [{"factor": 2**30 + 1}, {"nparts": 3}, {"factor": 2**31 - 1}])
def test_split_padded_past_int32_counts_in_int64(by):
    n = 2**31 - 1
    k, C = _int64_sum(n)
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(k, **by)
    padded = outer.dom.extent.value * inner.dom.extent.value
    assert outer.var.dtype == ("int64" if padded > 2**31 else "int32")
    assert _run_sum(s, C) == 3 * n * (n - 1) // 2 + n


def test_fused_reduce_axes_past_int32_count_in_int64():
    k1, k2 = te.reduce_axis((0, 46341), "k1"), te.reduce_axis((0, 46341), "k2")
    C = te.compute((1,), lambda i: te.sum((k1 * 0 + 1).astype("int64") + k2.astype("int64"),
                                          axis=[k1, k2]), name="C")
    s = te.create_schedule(C.op)
    fused = s[C].fuse(k1, k2)
    assert (fused.var.dtype, fused.dom.extent.value) == ("int64", 46341**2)
    fo, fi = s[C].split(fused, factor=1000)
    assert _run_sum(s, C) == 46341**2 + 46341 * (46341 * 46340 // 2)


def test_fused_data_axes_past_int32_lower_to_the_whole_loop():
    A = te.placeholder((46341, 46341), name="A")
    B = te.compute((46341, 46341), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    assert "for (i.j.fused, 0i64, 2147488281i64)" in str(te.lower(s, [A, B]))


def test_symbolic_extent_split_beyond_the_size_headroom_counts_in_int64():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=2**21)
    assert outer.var.dtype == inner.var.dtype == "int64"
    a = rand_array((77,))
    b = np.full(77, np.nan, "float32")
    te.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_split_beyond_int64_is_refused():
    A = te.placeholder((1000,), name="A")
    B = te.compute((1000,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.ScheduleError, match=r"split on stage 'B': 1 x 1180591620717411303424 "
                                               r"iterations \(a loop of extent 1000 split by "
                                               r"1180591620717411303424\) do not fit an int64 "
                                               r"loop variable"):
        s[B].split(B.op.axis[0], factor=2**70)


def test_rfactor_inside_int64_split_loops():
    n = 2**31 - 1
    k, C = _int64_sum(n)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=2**30 + 1)
    kio, kii = s[C].split(ki, factor=4)
    s.rfactor(C, kii)
    assert _run_sum(s, C) == 3 * n * (n - 1) // 2 + n


def test_attached_region_wider_than_int32_computes_the_whole_domain():
    """C reads T[i * 2**28] only where i == 0, but the region its loop reads spans
    9 * 2**28 + 1 elements: folded in int32 that extent was negative, T got no loops and
    C read memory T never wrote."""
    A = te.placeholder((10,), name="A")
    T = te.compute((10,), lambda i: A[i] * 2.0, name="T")
    C = te.compute((10,), lambda i: te.if_then_else(i == 0, T[i * 2**28], -1.0), name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=10)
    s[T].compute_at(s[C], io)
    s[T].split(T.op.axis[0], factor=4)
    assert "allocate T[float32 * 10]" in str(te.lower(s, [A, C]))
    a = rand_array((10,))
    c = np.full(10, np.nan, "float32")
    te.build(s, [A, C])(a, c)
    np.testing.assert_array_equal(c, evaluate(C, {A: a})[0])
