"""te.compute.ops softmax and layer_norm against numpy.

Odd sizes, every axis, several normalized axes, size-1 dims; the default schedule and the
intermediate stages (softmax max/exp/sum, layer_norm mean/var) attached at the row loop,
inlined (exp), at root, with split/vectorize/parallel and rfactor of the sum.
Imports te, te.compute.ops, numpy and helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    check_schedule(s, ins, outs, ref, rtol=1e-4, atol=1e-5)


def softmax_ref(x, axis):
    x = x.astype("float64")
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_stages(Y):
    exp = Y.op.input_tensors[0]
    expsum = Y.op.input_tensors[1]
    maxelem = exp.op.input_tensors[1]
    assert (maxelem.op.name, exp.op.name, expsum.op.name) == (
        "T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum")
    return maxelem, exp, expsum


@pytest.mark.parametrize("shape, axis", [
    ((7, 13), -1), ((7, 13), 0), ((3, 5, 7), 1), ((1, 31), 1), ((5, 1), 1), ((2, 3, 1, 4), 0),
], ids=str)
def test_softmax_default(shape, axis):
    X = te.placeholder(shape, name="X")
    Y = ops.softmax(X, axis)
    check(te.create_schedule(Y.op), [X], [Y], lambda x: softmax_ref(x, axis))


def sm_attach_at_row(s, Y):
    """exp and expsum at the output row; maxelem at exp's row (its reader: compute_at
    needs the attaching stage to read the attached one)."""
    maxelem, exp, expsum = _softmax_stages(Y)
    s[exp].compute_at(s[Y], Y.op.axis[0])
    s[expsum].compute_at(s[Y], Y.op.axis[0])
    s[maxelem].compute_at(s[exp], exp.op.axis[0])


def sm_inline_exp_vectorize(s, Y):
    maxelem, exp, expsum = _softmax_stages(Y)
    s[exp].compute_inline()
    s[maxelem].compute_at(s[Y], Y.op.axis[0])
    s[expsum].compute_at(s[Y], Y.op.axis[0])
    _, ji = s[Y].split(Y.op.axis[1], 4)
    s[Y].vectorize(ji)


def sm_root_parallel_split(s, Y):
    maxelem, exp, expsum = _softmax_stages(Y)
    for t in (maxelem, exp, expsum):
        s[t].compute_root()
    s[maxelem].parallel(maxelem.op.axis[0])
    ko, ki = s[expsum].split(expsum.op.reduce_axis[0], 4)
    s[exp].vectorize(s[exp].split(exp.op.axis[1], 8)[1])
    s[Y].parallel(Y.op.axis[0])


def sm_rows_tiled(s, Y):
    """Rows split by 3 (not dividing 13); every stage attached at the outer row loop."""
    maxelem, exp, expsum = _softmax_stages(Y)
    io, ii = s[Y].split(Y.op.axis[0], 3)
    s[exp].compute_at(s[Y], io)
    s[expsum].compute_at(s[Y], io)
    s[maxelem].compute_at(s[exp], exp.op.axis[0])
    s[Y].parallel(io)


def sm_rfactor_sum(s, Y):
    maxelem, exp, expsum = _softmax_stages(Y)
    _, ki = s[expsum].split(expsum.op.reduce_axis[0], 4)
    s.rfactor(expsum, ki)


@pytest.mark.parametrize("sched", [sm_attach_at_row, sm_inline_exp_vectorize,
                                   sm_root_parallel_split, sm_rows_tiled, sm_rfactor_sum],
                         ids=lambda f: f.__name__[3:])
def test_softmax_scheduled(sched):
    X = te.placeholder((13, 31), name="X")
    Y = ops.softmax(X)
    s = te.create_schedule(Y.op)
    sched(s, Y)
    check(s, [X], [Y], lambda x: softmax_ref(x, -1))


def layer_norm_ref(x, gamma, beta, axes, eps=1e-5):
    x = x.astype(np.promote_types(x.dtype, "float64"))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[d] if d in axes else 1 for d in range(x.ndim)]
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


@pytest.mark.parametrize("shape, axis", [
    ((7, 13), -1), ((7, 13), 0), ((3, 5, 7), (1, 2)), ((2, 5, 3), (0, 2)), ((5, 1), 1),
    ((1, 31), 1),
], ids=str)
def test_layer_norm_default(shape, axis):
    axes = tuple(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))
    X = te.placeholder(shape, name="X")
    G = te.placeholder(tuple(shape[a] for a in axes), name="gamma")
    B = te.placeholder(tuple(shape[a] for a in axes), name="beta")
    Y = ops.layer_norm(X, G, B, axis)
    check(te.create_schedule(Y.op), [X, G, B], [Y],
          lambda x, g, b: layer_norm_ref(x, g, b, axes))


def ln_attach_at_row(s, Y, mean, var):
    s[mean].compute_at(s[Y], Y.op.axis[0])
    s[var].compute_at(s[Y], Y.op.axis[0])
    _, ji = s[Y].split(Y.op.axis[-1], 4)
    s[Y].vectorize(ji)


def ln_parallel_split_reduce(s, Y, mean, var):
    io, _ = s[Y].split(Y.op.axis[0], 2)
    s[Y].parallel(io)
    s[mean].compute_at(s[Y], io)
    s[var].compute_at(s[Y], io)
    s[var].split(var.op.reduce_axis[-1], 3)


def ln_rfactor_var(s, Y, mean, var):
    _, ki = s[var].split(var.op.reduce_axis[-1], 2)
    s.rfactor(var, ki)


@pytest.mark.parametrize("sched", [ln_attach_at_row, ln_parallel_split_reduce, ln_rfactor_var],
                         ids=lambda f: f.__name__[3:])
def test_layer_norm_scheduled(sched):
    X = te.placeholder((5, 3, 7), name="X")
    G = te.placeholder((3, 7), name="gamma")
    B = te.placeholder((3, 7), name="beta")
    Y = ops.layer_norm(X, G, B, (1, 2))
    by_name = {t.op.name: t for t in Y.op.input_tensors}
    var = by_name["T_layer_norm_var"]
    mean = var.op.input_tensors[1]
    assert mean.op.name == "T_layer_norm_mean"
    s = te.create_schedule(Y.op)
    sched(s, Y, mean, var)
    check(s, [X, G, B], [Y], lambda x, g, b: layer_norm_ref(x, g, b, (1, 2)))


def test_symbolic_rows_through_matmul_softmax():
    """A te.var row count flows through add, matmul and softmax; one kernel, two sizes."""
    n = te.var("n")
    X = te.placeholder((n, 13), name="X")
    bias = te.placeholder((13,), name="bias")
    W = te.placeholder((13, 7), name="W")
    Y = ops.softmax(ops.matmul(ops.add(X, bias), W))
    s = te.create_schedule(Y.op)
    for rows in (1, 5):
        check_schedule(s, [X, bias, W], [Y], lambda x, b, w: softmax_ref((x + b) @ w, -1),
                       rtol=1e-4, atol=1e-5, sizes={"n": rows})


def test_softmax_special_values_match_numpy():
    # the row max is a compare-and-select (no NaN propagation of its own): the outputs must
    # still be numpy's for NaN, +-inf, all -inf, huge and tiny rows, vectorized or not
    rows = np.array([
        [1.0, np.nan, 2.0, 0.5, -3.0, 7.0, 1.0, 2.0, 0.0],
        [np.inf, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        [-np.inf] * 9,
        [-np.inf, 1.0, -np.inf, 2.0, -np.inf, 3.0, -np.inf, 4.0, 5.0],
        [3e38, -3e38, 1e38, 0.0, 1.0, -1.0, 2.0, 5.0, 6.0],
        [-1e-38, 1e-38, 0.0, -0.0, 1e-45, -1e-45, 2.0, 3.0, -7.0],
        [np.nan] * 9,
    ], dtype="float32")
    X = te.placeholder(rows.shape, name="X")
    Y = ops.softmax(X)
    with np.errstate(invalid="ignore", over="ignore"):
        want = softmax_ref(rows, -1)
    for vectorize in (False, True):
        s = te.create_schedule(Y.op)
        if vectorize:
            maxelem, exp, expsum = _softmax_stages(Y)
            _, ji = s[Y].split(Y.op.axis[1], 4)
            s[Y].vectorize(ji)
        out = np.zeros(rows.shape, "float32")
        te.build(s, [X, Y])(rows, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7, equal_nan=True)


def _auto_default(Y):
    # imported here: the auto space is only one of the two schedules this test compares
    from te.autotune.auto_space import auto_schedule
    from te.autotune.space import ConfigSpace
    space = ConfigSpace()
    auto_schedule(space, Y)
    return auto_schedule(space.default(), Y)[0]


def _constant_and_offset_rows(n, dtype, rng):
    """Constant rows (exact, inexact in binary, large offsets, negative), rows of a large
    offset plus noise smaller and larger than sqrt(epsilon), and plain random rows."""
    rows = [np.full(n, c) for c in (5.0, 0.1, 1000.1, -3712.37, 1e6 / 3)]
    constant = len(rows)
    rows += [1000.0 + 1e-3 * rng.random(n), 1000.0 + rng.random(n), 1e4 + 1e-2 * rng.random(n),
             rng.uniform(-2.0, 2.0, n), rng.uniform(0.5, 1.5, n)]
    return np.stack(rows).astype(dtype), constant


@pytest.mark.parametrize("schedule", ["default", "auto"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 2, 7, 64, 301])
def test_layer_norm_constant_and_offset_rows(schedule, dtype, n):
    """A constant row normalizes to exactly beta (x - mean is exactly 0; a rounded mean
    made it the rounding error times rsqrt(epsilon)), and a row of a large offset plus
    noise keeps the noise's digits: numpy in float64 on the same inputs, with the default
    schedule and the auto space's default config."""
    rng = np.random.default_rng(n)
    x, constant = _constant_and_offset_rows(n, dtype, rng)
    g = rng.uniform(0.5, 1.5, n).astype(dtype)
    b = rng.uniform(-1.0, 1.0, n).astype(dtype)
    X = te.placeholder(x.shape, dtype, name="X")
    G, B = te.placeholder((n,), dtype, name="gamma"), te.placeholder((n,), dtype, name="beta")
    Y = ops.layer_norm(X, G, B)
    s = te.create_schedule(Y.op) if schedule == "default" else _auto_default(Y)
    out = np.full(x.shape, np.nan, dtype)
    te.build(s, [X, G, B, Y])(x, g, b, out)
    np.testing.assert_array_equal(out[:constant], np.broadcast_to(b, (constant, n)))
    tol = 1e-4 if dtype == "float32" else 1e-10
    # the reference in long double: float64's own mean of 1e4 + noise is off in the 10th digit
    want = layer_norm_ref(x.astype(np.longdouble), g, b, (1,)).astype("float64")
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
