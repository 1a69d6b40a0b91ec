"""Compute, lower and build errors with pinned messages, and argument errors of a built
module (wrong count, type, shape, dtype, rank, non-contiguous, inconsistent size vars).

Imports te, numpy and pytest.
"""
import numpy as np
import pytest

import te

# -- compute ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def A():
    return te.placeholder((10, 12), name="A")


@pytest.mark.parametrize("shape,fcompute,ndim,takes", [
    ((3, 4), lambda i: i, 2, 1),
    ((3,), lambda i, j: i, 1, 2),
    ((3,), lambda: 0, 1, 0),
])
def test_compute_lambda_arity(shape, fcompute, ndim, takes):
    with pytest.raises(te.ComputeError, match=rf"^te.compute: fcompute must take {ndim} index "
                       rf"argument\(s\), one per dimension of shape, but it takes {takes}$"):
        te.compute(shape, fcompute)


def test_compute_not_callable():
    with pytest.raises(te.ComputeError, match=r"fcompute must be callable, got int"):
        te.compute((3,), 5)


@pytest.mark.parametrize("wrap", [lambda r: r + 1.0, lambda r: 2.0 * r, lambda r: te.exp(r)])
def test_reduction_nested_in_expression(A, wrap):
    k = te.reduce_axis((0, 12), "k")
    with pytest.raises(te.ComputeError, match=r"^te.compute 'S': a reduction \(te.sum/max/min\) "
                       r"must be the whole expression returned by fcompute, not part of it; "
                       r"compute it as its own tensor first$"):
        te.compute((10,), lambda i: wrap(te.sum(A[i, k], axis=k)), name="S")


def test_integer_true_division():
    I = te.placeholder((5,), dtype="int32", name="I")
    with pytest.raises(te.DTypeError, match=r"^integer division with '/' is ambiguous: use '//' "
                       r"\(floor\), te.truncdiv, or cast an operand to a float dtype first$"):
        te.compute((5,), lambda i: I[i] / 2)


def test_wrong_index_count(A):
    with pytest.raises(te.ShapeError, match=r"indexing tensor 'A': expected 2 indices, got 1"):
        te.compute((10,), lambda i: A[i])


def test_bad_shapes_and_axes():
    with pytest.raises(te.ShapeError, match=r"te.placeholder: shape\[0\] must be positive, "
                                            r"got 0"):
        te.placeholder((0, 3))
    with pytest.raises(te.ShapeError, match=r"te.reduce_axis: dom must be non-empty "
                                            r"\(begin < end\), got \(3, 3\)"):
        te.reduce_axis((3, 3))
    with pytest.raises(te.ComputeError, match=r"te.var: name must be an identifier string, "
                                              r"got '1n'"):
        te.var("1n")


def test_sum_over_data_axis(A):
    B = te.compute((10,), lambda i: A[i, 0], name="B")
    with pytest.raises(te.ComputeError, match=r"te.sum: axis must be a te.reduce_axis or a "
                                              r"list of them"):
        te.sum(A[0, 0], axis=B.op.axis[0])


# -- lower -----------------------------------------------------------------------------------

@pytest.fixture()
def chain(A):
    B = te.compute((10, 12), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((10, 12), lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C, te.create_schedule(C.op)


def test_lower_missing_output(chain):
    A, B, C, s = chain
    for args in ([A], [A, B]):
        with pytest.raises(te.LoweringError, match=r"^te.lower: output 'C' must be in args, or "
                                                   r"its result would be lost$"):
            te.lower(s, args)


def test_lower_bad_args(chain):
    A, B, C, s = chain
    with pytest.raises(te.LoweringError, match=r"te.lower: args must be a list of tensors, "
                                               r"got Tensor"):
        te.lower(s, A)
    with pytest.raises(te.LoweringError,
                       match=r"te.lower: args\[1\] must be a tensor or a te.var, got int"):
        te.lower(s, [A, 3, C])
    with pytest.raises(te.LoweringError, match=r"te.lower: args\[2\] 'C' appears twice in args"):
        te.lower(s, [A, C, C])


def test_lower_unbound_size_var():
    n, m = te.var("n"), te.var("m")
    X = te.placeholder((n,), name="X")
    Z = te.compute((n,), lambda i: X[i] + m.astype("float32"), name="Z")
    with pytest.raises(te.LoweringError, match=r"^te.lower: size variable\(s\) m are used but "
                       r"are not a dimension of any argument, so they cannot be bound at call "
                       r"time$"):
        te.lower(te.create_schedule(Z.op), [X, Z])


# -- build -----------------------------------------------------------------------------------

@pytest.mark.parametrize("target,message", [
    ("opencl", r"^te.build: unknown target kind 'opencl' \(expected 'llvm' or 'cuda'\)$"),
    ("", r"^te.build: target must be a string such as 'llvm', got ''$"),
    (None, r"^te.build: target must be a string such as 'llvm', got None$"),
    ("llvm -foo=1", r"^te.build: unknown target option -foo"),
    ("llvm mcpu", r"^te.build: target option 'mcpu' must look like -key=value$"),
    ("cuda", r"^te.build: target 'cuda': stage 'B' has no loop bound to a GPU thread axis"),
])
def test_build_bad_target(chain, target, message):
    A, B, C, s = chain
    with pytest.raises(te.BuildError, match=message):
        te.build(s, [A, C], target=target)


def test_build_without_args(chain):
    A, B, C, s = chain
    with pytest.raises(te.BuildError, match=r"^te.build: args must list the argument tensors "
                                            r"of the schedule$"):
        te.build(s)


def test_build_two_size_vars_same_name():
    n1, n2 = te.var("n"), te.var("n")
    P = te.placeholder((n1,), name="P")
    Q = te.placeholder((n2,), name="Q")
    S = te.compute((n1,), lambda i: P[i] + Q[i], name="S")
    with pytest.raises(te.BuildError, match=r"two different size variables are both named 'n'; "
                                            r"give them distinct names"):
        te.build(te.create_schedule(S.op), [P, Q, S])


# -- calling a built module ---------------------------------------------------------------

@pytest.fixture(scope="module")
def scale():
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    return te.build(te.create_schedule(B.op), [A, B])


def _ones(shape, dtype="float32"):
    return np.ones(shape, dtype)


def test_call_wrong_count(scale):
    with pytest.raises(te.ArgumentError, match=r"^expected 2 arguments \(A, B\), got 1$"):
        scale(_ones((4, 6)))
    with pytest.raises(te.ArgumentError, match=r"^expected 2 arguments \(A, B\), got 3$"):
        scale(_ones((4, 6)), _ones((4, 6)), _ones((4, 6)))


def test_call_wrong_shape(scale):
    with pytest.raises(te.ArgumentError, match=r"^argument 'A' shape\[1\]: expected 6, got 7$"):
        scale(_ones((4, 7)), _ones((4, 6)))


def test_call_wrong_dtype(scale):
    with pytest.raises(te.ArgumentError, match=r"^argument 'B': expected dtype float32, "
                                               r"got float64$"):
        scale(_ones((4, 6)), _ones((4, 6), "float64"))


def test_call_wrong_rank(scale):
    with pytest.raises(te.ArgumentError, match=r"^argument 'A': expected rank 2, got rank 3 "
                                               r"\(shape \(4, 6, 1\)\)$"):
        scale(_ones((4, 6, 1)), _ones((4, 6)))


def test_call_non_contiguous(scale):
    with pytest.raises(te.ArgumentError, match=r"^argument 'A': expected a C-contiguous array, "
                       r"got strides \(4, 16\) for shape \(4, 6\) \(pass "
                       r"np.ascontiguousarray\(...\)\)$"):
        scale(_ones((6, 4)).T, _ones((4, 6)))
    with pytest.raises(te.ArgumentError, match=r"expected a C-contiguous array"):
        scale(_ones((4, 12))[:, ::2], _ones((4, 6)))


def test_call_not_an_array(scale):
    with pytest.raises(te.ArgumentError, match=r"^argument 'A': expected a numpy array or "
                                               r"NDArray, got list$"):
        scale([[1.0] * 6] * 4, _ones((4, 6)))


def test_call_error_leaves_output_untouched(scale):
    out = np.full((4, 6), 7.0, "float32")
    with pytest.raises(te.ArgumentError):
        scale(_ones((4, 6), "float64"), out)
    assert (out == 7.0).all()


def test_every_deliberate_error_is_a_te_error():
    """`except te.TEError` catches what a built module raises for bad arguments and what a
    failed native build raises, not only the compiler's own errors: the base lives in
    runtime.errors, the bottom layer, so a module loaded without te raises TEErrors too."""
    import runtime
    import runtime.errors
    assert te.TEError is runtime.errors.TEError
    assert issubclass(te.ArgumentError, te.TEError) and issubclass(te.ArgumentError, ValueError)
    assert issubclass(runtime.RuntimeBuildError, te.TEError)
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i] + 1.0, name="B")
    f = te.build(te.create_schedule(B.op), [A, B])
    with pytest.raises(te.TEError, match=r"shape"):
        f(np.zeros(4, "float32"), np.zeros(5, "float32"))
