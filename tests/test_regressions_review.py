"""Regressions for bugs an adversarial review found in the core (each once gave a wrong answer,
an out-of-bounds access, a crash, or silently accepted an illegal schedule)."""
import numpy as np
import pytest

import te
from te.lower.interp import run_func

RNG = np.random.default_rng(7)


def test_comparison_on_a_narrowing_cast_is_not_folded():
    n = 200
    C = te.compute((n,), lambda i: te.if_then_else(i.astype("int8") < 0, 1, 0), name="C")
    c = np.full(n, -1, "int32")
    te.build(te.create_schedule(C.op), [C])(c)
    np.testing.assert_array_equal(c, (np.arange(n).astype("int8") < 0).astype("int32"))


def test_bound_inference_through_a_wrapping_cast_stays_in_bounds():
    A = te.placeholder((256,), name="A")
    B = te.compute((256,), lambda i: A[i] * 2.0, name="B")
    D = te.compute((4,), lambda i: B[(i * 100).astype("uint8").astype("int32")], name="D")
    s = te.create_schedule(D.op)
    io, _ = s[D].split(D.op.axis[0], 2)
    s[B].compute_at(s[D], io)
    a = RNG.random(256).astype("float32")
    expected = a[(np.arange(4) * 100) % 256] * 2
    d = np.zeros(4, "float32")
    run_func(te.lower(s, [A, D]), [a, d])  # the interpreter raises on any out-of-bounds read
    np.testing.assert_allclose(d, expected)
    d = np.zeros(4, "float32")
    te.build(s, [A, D])(a, d)
    np.testing.assert_allclose(d, expected)


def test_constant_casts_wrap_and_64_bit_truncdiv_is_exact():
    assert te.const(-1).astype("uint8").value == 255
    assert te.const(300).astype("int8").value == 44
    x = 2 ** 62 + 3
    assert te.truncdiv(te.const(x, "int64"), te.const(1, "int64")).value == x
    assert te.truncmod(te.const(x, "int64"), te.const(7, "int64")).value == x % 7
    assert (te.const(2 ** 31 - 1) + 1).value == -2 ** 31  # int32 wraps like the generated code
    with pytest.raises(te.DTypeError, match=r"te.const: 300 does not fit uint8 \(0..255\)"):
        te.const(300, "uint8")


def test_unsigned_comparison_is_not_folded_with_exact_integers():
    A = te.placeholder((4,), "uint8", name="A")
    C = te.compute((4,), lambda i: te.if_then_else(A[i] - te.const(1, "uint8") < A[i], 1, 0),
                   name="C")
    a = np.array([0, 1, 2, 255], "uint8")
    c = np.zeros(4, "int32")
    te.build(te.create_schedule(C.op), [A, C])(a, c)
    np.testing.assert_array_equal(c, ((a - np.uint8(1)) < a).astype("int32"))


@pytest.mark.parametrize("init", ["tensor", "const"])
def test_rfactor_keeps_the_reduction_init(init):
    M, K = 3, 8
    A = te.placeholder((M, K), name="A")
    I = te.placeholder((M,), name="I")
    k = te.reduce_axis((0, K), "k")
    start = (lambda i: I[i]) if init == "tensor" else (lambda i: 5.0)
    R = te.compute((M,), lambda i: te.sum(A[i, k], axis=k, init=start(i)), name="R")
    s = te.create_schedule(R.op)
    _, ki = s[R].split(k, 4)
    s.rfactor(R, ki)
    a, iv = RNG.random((M, K)).astype("float32"), RNG.random(M).astype("float32")
    r = np.zeros(M, "float32")
    if init == "tensor":
        te.build(s, [A, I, R])(a, iv, r)
    else:
        te.build(s, [A, R])(a, r)
    np.testing.assert_allclose(r, a.sum(1) + (iv if init == "tensor" else 5.0), rtol=1e-5)


def test_interpreter_vector_select_does_not_evaluate_the_untaken_side():
    M, N = 5, 8
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.if_then_else(i > 0, A[i - 1, j], -1.0), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    a = RNG.random((M, N)).astype("float32")
    expected = np.full((M, N), -1, "float32")
    expected[1:] = a[:-1]
    c = np.zeros((M, N), "float32")
    run_func(te.lower(s, [A, C]), [a, c])
    np.testing.assert_array_equal(c, expected)


def test_reduce_axis_shared_by_two_computes():
    N = 4
    A = te.placeholder((N, N), name="A")
    k = te.reduce_axis((0, N), "k")
    C = te.compute((N,), lambda i: te.sum(A[i, k], axis=k), name="C")
    D = te.compute((N,), lambda i: te.sum(C[k] * A[i, k], axis=k), name="D")
    s = te.create_schedule(D.op)
    s[C].split(k, 2)  # the first compute keeps the user's axis object
    s[C].compute_at(s[D], D.op.reduce_axis[0])
    a = RNG.random((N, N)).astype("float32")
    d = np.zeros(N, "float32")
    te.build(s, [A, D])(a, d)
    np.testing.assert_allclose(d, a @ a.sum(1), rtol=1e-5)
    with pytest.raises(te.ScheduleError, match=r"use s\[T\].op.reduce_axis for this one"):
        s[D].split(k, 2)


def test_compute_at_of_an_output_is_refused():
    N = 8
    A = te.placeholder((N,), name="A")
    C = te.compute((N,), lambda i: A[i] * 2.0, name="C")
    D = te.compute((N // 2,), lambda i: C[i] + 1.0, name="D")
    s = te.create_schedule([C.op, D.op])
    with pytest.raises(te.ScheduleError, match=r"^compute_at on stage 'C': it is an output"):
        s[C].compute_at(s[D], D.op.axis[0])


def test_compute_at_of_a_tensor_passed_in_args_is_refused():
    N = 8
    A = te.placeholder((N,), name="A")
    C = te.compute((N,), lambda i: A[i] * 2.0, name="C")
    D = te.compute((N // 2,), lambda i: C[i] + 1.0, name="D")
    s = te.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    with pytest.raises(te.LoweringError, match=r"^stage 'C' is passed in args but computed "
                                               r"inside loop 'i' of 'D'"):
        te.lower(s, [A, C, D])


def test_stage_whose_only_read_is_dead_is_skipped():
    N = 6
    A = te.placeholder((N,), name="A")
    Bsrc = te.placeholder((N + 40,), name="Bsrc")
    B = te.compute((N + 40,), lambda i: Bsrc[i] * 3.0, name="B")
    C = te.compute((N,), lambda i: te.if_then_else(i < N, A[i], B[i + 20]), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    a, b = RNG.random(N).astype("float32"), RNG.random(N + 40).astype("float32")
    c = np.zeros(N, "float32")
    te.build(s, [A, Bsrc, C])(a, b, c)
    np.testing.assert_array_equal(c, a)


def test_reduce_axis_outside_a_reduction_is_a_compute_error():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    with pytest.raises(te.ComputeError, match=r"^te.compute 'C': reduce axis 'k' is used "
                                              r"outside a reduction over it"):
        te.compute((4,), lambda i: A[i, k], name="C")


def test_prefetch_through_an_index_read_from_memory_is_refused():
    # A[I[i + 1]] would read I one past its end in the last row (and its guard reads it too).
    M, N = 7, 37
    A = te.placeholder((N,), name="A")
    I = te.placeholder((M,), "int32", name="I")
    B = te.compute((M,), lambda i: A[I[i]], name="B")
    s = te.create_schedule(B.op)
    s[B].prefetch(A, B.op.axis[0], 1)
    with pytest.raises(te.LoweringError, match=r"^prefetch of 'A' at loop 'i' of stage 'B': "
                                               r"its index reads tensor 'I'"):
        te.lower(s, [A, I, B])
    s = te.create_schedule(B.op)
    s[B].prefetch(I, B.op.axis[0], 2)  # the index tensor itself is read affinely: fine
    iv = RNG.integers(0, N, M).astype("int32")
    a, b = RNG.random(N).astype("float32"), np.zeros(M, "float32")
    run_func(te.lower(s, [A, I, B]), [a, iv, b])
    np.testing.assert_array_equal(b, a[iv])


@pytest.mark.parametrize("factor, lanes_inside, prefetch", [
    (64, True, True), (16, True, True), (64, True, False), (5, False, False)])
def test_rfactor_tail_checks_its_bound_before_a_where_that_reads_a_tensor(factor, lanes_inside,
                                                                          prefetch):
    """sum(X[i, k], where=M[i, k] > 0) with k split by a factor that does not divide 97 and
    rfactored: the tail's `k < 97` must guard the read of M (it once came second in an
    `&&` that evaluates both sides, and read M past its end where a prefetch in the k loop
    kept loop partitioning from peeling the tail)."""
    rows, cols = 19, 97
    X = te.placeholder((rows, cols), name="X")
    M = te.placeholder((rows, cols), name="M")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k, where=M[i, k] > 0), name="S")
    s = te.create_schedule(S.op)
    _, ki = s[S].split(k, factor=factor)
    RF = s.rfactor(S, ki, factor_axis=1)
    s[RF].compute_at(s[S], S.op.axis[0])
    if lanes_inside:   # the partial sums' lanes below the k loop, as te.autotune has them
        s[RF].reorder(*RF.op.reduce_axis, RF.op.axis[1])
        s[RF].vectorize(RF.op.axis[1])
    if prefetch:
        s[RF].prefetch(X, RF.op.reduce_axis[0], 2)
    x, m = RNG.uniform(-1, 1, (rows, cols)).astype("float32"), \
        RNG.uniform(-1, 1, (rows, cols)).astype("float32")
    want = np.where(m > 0, x, 0).sum(axis=1)
    got = np.full(rows, np.nan, "float32")
    run_func(te.lower(s, [X, M, S]), [x, m, got])   # raises on a read past M's end
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got = np.full(rows, np.nan, "float32")
    te.build(s, [X, M, S])(x, m, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
