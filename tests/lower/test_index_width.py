"""Index arithmetic is exact: int64 where int32 could overflow, int32 where it provably fits.

A[(i * 100003) % m] reads the element numpy's int64 arithmetic names, for static and
symbolic sizes, in scalar and vectorized loops, through LLVM, the loop-IR interpreter and
the CUDA code; ordinary kernels keep int32 indices (products of sizes that an access inside
its tensor keeps below the tensor's size included); an index that int64 cannot hold either
is refused.
"""
import numpy as np
import pytest
from helpers import bind, run_emulated

import te
from te.errors import LoweringError
from te.lower.interp import run_func

M = 100000
RNG = np.random.default_rng(11)


def hashed_gather(size):
    A = te.placeholder((size,), name="A")
    C = te.compute((size,), lambda i: A[(i * 100003) % size], name="C")
    return A, C


def expected_gather(a: np.ndarray) -> np.ndarray:
    return a[(np.arange(a.size, dtype=np.int64) * 100003) % a.size]


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
def test_static_index_that_overflows_int32_is_computed_in_int64(vector):
    A, C = hashed_gather(M)
    s = te.create_schedule(C.op)
    if vector:
        _, inner = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(inner)
    assert "int64" in str(te.lower(s, [A, C]))
    a, c = RNG.random(M).astype("float32"), np.zeros(M, "float32")
    te.build(s, [A, C])(a, c)
    np.testing.assert_array_equal(c, expected_gather(a))


def test_symbolic_size_index_that_may_overflow_is_computed_in_int64():
    n = te.var("n")
    A, C = hashed_gather(n)
    s = te.create_schedule(C.op)
    assert "int64(" in str(te.lower(s, [A, C]))
    f = te.build(s, [A, C])
    for size in (7, 21475, M + 3):
        a, c = RNG.random(size).astype("float32"), np.zeros(size, "float32")
        f(a, c)
        np.testing.assert_array_equal(c, expected_gather(a))


def test_interpreter_and_cuda_read_the_same_elements():
    A, C = hashed_gather(M)
    s = te.create_schedule(C.op)
    a, c = RNG.random(M).astype("float32"), np.zeros(M, "float32")
    run_func(te.lower(s, [A, C]), [a, c])
    np.testing.assert_array_equal(c, expected_gather(a))
    bind(s, C, C.op.axis[0], 256)
    mod = te.build(s, [A, C], target="cuda")
    assert "(long long)" in mod.get_source()
    (c,) = run_emulated(mod, [a], [(M,)], ["float32"])
    np.testing.assert_array_equal(c, expected_gather(a))


def test_an_index_computed_from_loaded_values_is_exact():
    B = te.placeholder((97,), "int32", name="B")
    A = te.placeholder((M,), name="A")
    C = te.compute((97,), lambda i: A[(B[i] * 3 + 5) % M], name="C")
    b = RNG.integers(-2**31, 2**31 - 1, 97, endpoint=True).astype("int32")
    b[:2] = [2**31 - 1, -2**31]
    a, c = RNG.random(M).astype("float32"), np.zeros(97, "float32")
    te.build(te.create_schedule(C.op), [B, A, C])(b, a, c)
    np.testing.assert_array_equal(c, a[(b.astype(np.int64) * 3 + 5) % M])


def _no_int64(s, args) -> bool:
    return "int64" not in str(te.lower(s, args))


def test_ordinary_kernels_keep_int32_indices():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m,), name="B")
    C = te.compute((n, m), lambda i, j: A[i, j] * B[j], name="C")
    s = te.create_schedule(C.op)
    fused = s[C].fuse(*C.op.axis)
    _, inner = s[C].split(fused, factor=8)
    s[C].vectorize(inner)
    assert _no_int64(s, [A, B, C])
    # strided and user-flattened accesses: inside the tensor, each part is below its size
    F = te.placeholder((te.var("nm"),), name="F")
    P = te.placeholder((te.var("p"),), name="P")
    D = te.compute((n, m), lambda i, j: F[i * m + j] + P[i * 2 + 1], name="D")
    assert _no_int64(te.create_schedule(D.op), [F, P, D])
    X = te.placeholder((64, 3, 34, 34), name="X")
    W = te.placeholder((8, 3, 3, 3), name="W")
    rc, ry, rx = (te.reduce_axis((0, e), name=x) for e, x in ((3, "rc"), (3, "ry"), (3, "rx")))
    Y = te.compute((64, 8, 16, 16), lambda b, k, y, x: te.sum(
        X[b, rc, y * 2 + ry, x * 2 + rx] * W[k, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    assert _no_int64(te.create_schedule(Y.op), [X, W, Y])
    f = te.build(te.create_schedule(D.op), [F, P, D])
    f_, p = RNG.random(6 * 5).astype("float32"), RNG.random(13).astype("float32")
    d = np.zeros((6, 5), "float32")
    f(f_, p, d)
    np.testing.assert_allclose(d, f_.reshape(6, 5) + p[1:13:2, None])


def test_an_index_beyond_int64_is_refused():
    A = te.placeholder((M,), name="A")
    C = te.compute((M,), lambda i: A[(i * i * i * i) % M], name="C")
    with pytest.raises(LoweringError, match=r"A: index 0: the index .* can exceed the int64 "
                                            r"range for some values of its loop variables"):
        te.lower(te.create_schedule(C.op), [A, C])


def test_an_int64_index_read_from_data_is_not_refused():
    B = te.placeholder((97,), "int64", name="B")
    A = te.placeholder((M,), name="A")
    C = te.compute((97,), lambda i: A[(B[i] * 3 - 1) % M], name="C")
    b = RNG.integers(-2**61, 2**61, 97).astype("int64")   # b * 3 fits int64
    a, c = RNG.random(M).astype("float32"), np.zeros(97, "float32")
    te.build(te.create_schedule(C.op), [B, A, C])(b, a, c)
    np.testing.assert_array_equal(c, a[(b * 3 - 1) % M])


def test_integer_arithmetic_inside_a_float_part_of_an_index_is_exact():
    A = te.placeholder((M,), name="A")
    C = te.compute((M,), lambda i: A[((i * 100003).astype("float64") * 0.001).astype("int32")
                                     % M], name="C")
    a, c = RNG.random(M).astype("float32"), np.zeros(M, "float32")
    te.build(te.create_schedule(C.op), [A, C])(a, c)
    i = np.arange(M, dtype=np.int64)
    np.testing.assert_array_equal(c, a[((i * 100003).astype("float64") * 0.001).astype("int32")
                                       % M])


def test_unsigned_index_arithmetic_wraps_as_the_user_typed_it():
    A = te.placeholder((M,), name="A")
    C = te.compute((M,), lambda i: A[(i.astype("uint32") * 100003) % M], name="C")
    a, c = RNG.random(M).astype("float32"), np.zeros(M, "float32")
    te.build(te.create_schedule(C.op), [A, C])(a, c)
    i = np.arange(M, dtype="uint32")
    np.testing.assert_array_equal(c, a[(i * np.uint32(100003)) % np.uint32(M)])
