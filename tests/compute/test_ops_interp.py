"""te.compute.ops on tiny shapes through the reference interpreter (te.lower.interp) as a
second oracle: the interpreted lowered IR must match numpy and the compiled kernel.

Imports te, te.compute.ops, te.lower.interp, numpy and helpers. Sizes stay tiny: the
interpreter runs the loop IR in Python.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from te.lower.interp import run_func
from helpers import rand_array, shape_of


def check_both(s, ins, out, ref, rtol=1e-4):
    """Interpret and compile schedule `s`; both must agree with ref(*inputs)."""
    rng = np.random.default_rng(7)
    arrays = [rand_array(shape_of(t), t.dtype, rng) for t in ins]
    want = ref(*arrays)
    results = []
    for run in (lambda o: run_func(te.lower(s, ins + [out]), arrays + [o]),
                lambda o: te.build(s, ins + [out])(*arrays, o)):
        got = np.full(shape_of(out), np.nan if out.dtype.startswith("float") else 123,
                      out.dtype)
        run(got)
        results.append(got)
    for got in results:
        if out.dtype.startswith("float"):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)


def case_conv2d_grouped():
    X = te.placeholder((1, 2, 5, 6), name="X")
    K = te.placeholder((4, 1, 3, 2), name="K")
    Y = ops.conv2d_nchw(X, K, stride=2, padding=(1, 0, 1, 1), dilation=(1, 2), groups=2)
    s = te.create_schedule(Y.op)
    s[Y.op.input_tensors[0]].compute_inline()

    def ref(x, k):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 1)))
        out = np.zeros((1, 4, 3, 3), "float32")
        for f in range(4):
            for y in range(3):
                for w in range(3):
                    win = xp[0, f // 2, 2 * y:2 * y + 3, 2 * w:2 * w + 3:2]
                    out[0, f, y, w] = (win * k[f, 0]).sum()
        return out
    return s, [X, K], Y, ref


def case_softmax_attached():
    X = te.placeholder((3, 5), name="X")
    Y = ops.softmax(X)
    exp, expsum = Y.op.input_tensors
    s = te.create_schedule(Y.op)
    s[exp].compute_at(s[Y], Y.op.axis[0])
    s[expsum].compute_at(s[Y], Y.op.axis[0])

    def ref(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    return s, [X], Y, ref


def case_argmax_int_rfactor():
    X = te.placeholder((4, 9), "int32", name="X")
    Y = ops.argmax(X, 1)
    red = Y.op.input_tensors[0]
    s = te.create_schedule(Y.op)
    _, ki = s[red].split(s[red].op.reduce_axis[0], 4)
    s.rfactor(red, ki)
    return s, [X], Y, lambda x: x.argmax(1).astype("int32")


def case_pad_concat_slice():
    A = te.placeholder((3, 4), "int32", name="A")
    B = te.placeholder((2, 4), "int32", name="B")
    C = ops.slice_axis(ops.concatenate([ops.pad(A, (0, 1), (1, 0), 5), ops.pad(B, (0, 1), (0, 0))],
                                       0), 1, None, None, -2)
    s = te.create_schedule(C.op)
    return s, [A, B], C, lambda a, b: np.concatenate(
        [np.pad(a, ((0, 1), (1, 0)), constant_values=5), np.pad(b, ((0, 0), (1, 0)))])[:, ::-2]


def case_avg_pool_vectorized():
    X = te.placeholder((1, 1, 5, 5), name="X")
    Y = ops.avg_pool2d(X, (3, 3), 2, 1)
    s = te.create_schedule(Y.op)
    s[Y].vectorize(Y.op.axis[3])

    def ref(x):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 1, 3, 3), "float32")
        for y in range(3):
            for w in range(3):
                win = (slice(None), slice(None), slice(2 * y, 2 * y + 3), slice(2 * w, 2 * w + 3))
                out[0, 0, y, w] = xp[win].sum() / ones[win].sum()
        return out
    return s, [X], Y, ref


def case_layer_norm_cumsum():
    X = te.placeholder((2, 3, 4), name="X")
    G = te.placeholder((4,), name="G")
    B = te.placeholder((4,), name="B")
    Y = ops.cumsum(ops.layer_norm(X, G, B, -1), 2, exclusive=True)
    s = te.create_schedule(Y.op)

    def ref(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        n = (x - m) / np.sqrt(v + 1e-5) * g + b
        return np.cumsum(n, -1) - n
    return s, [X, G, B], Y, ref


@pytest.mark.parametrize("case", [case_conv2d_grouped, case_softmax_attached,
                                  case_argmax_int_rfactor, case_pad_concat_slice,
                                  case_avg_pool_vectorized, case_layer_norm_cumsum],
                         ids=lambda f: f.__name__[5:])
def test_interpreter_agrees(case):
    s, ins, out, ref = case()
    check_both(s, ins, out, ref)
