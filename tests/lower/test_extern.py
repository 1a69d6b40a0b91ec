"""te.extern with te.call_packed: compiled code calling registered Python functions with
zero-copy arrays of its buffers, scalars of each kind, several outputs, errors raised in
the callee reaching the caller, and misuse errors."""
import numpy as np
import pytest

import runtime
import te
from helpers import rand_array

seen: list = []


@runtime.register_func("test_extern.add_scaled", override=True)
def _add_scaled(x, y, out, scale, flag, count):
    seen.append((type(x), scale, flag, count))
    out.copyfrom(x.numpy() + y.numpy() * scale + (count if flag else 0))


@runtime.register_func("test_extern.split_sign", override=True)
def _split_sign(x, pos, neg):
    pos.copyfrom(np.maximum(x.numpy(), 0))
    neg.copyfrom(np.minimum(x.numpy(), 0))


@runtime.register_func("test_extern.fails", override=True)
def _fails(x, y):
    raise KeyError("the callee's own error")


def test_extern_scalars_and_a_scheduled_consumer():
    n, m = 13, 7
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((n, m), name="B")
    C = te.extern((n, m), [A, B], lambda ins, outs: te.call_packed(
        "test_extern.add_scaled", ins[0], ins[1], outs[0], 0.5, True, 3), name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] * 2.0, name="D")
    a, b = rand_array((n, m)), rand_array((n, m))
    want = (a + b * 0.5 + 3) * 2
    plain = te.create_schedule(D.op)
    tiled = te.create_schedule(D.op)
    jo, ji = tiled[D].split(D.op.axis[1], factor=4)
    tiled[D].vectorize(ji)
    tiled[D].parallel(D.op.axis[0])
    for s in (plain, tiled):
        seen.clear()
        d = np.zeros((n, m), "float32")
        te.build(s, [A, B, D])(a, b, d)
        np.testing.assert_allclose(d, want, rtol=1e-6)
        assert seen == [(runtime.NDArray, 0.5, True, 3)]


def test_extern_output_as_argument_and_symbolic_shape():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.extern((n,), [A, A], lambda ins, outs: te.call_packed(
        "test_extern.add_scaled", ins[0], ins[1], outs[0], 2.0, False, 0), name="C")
    f = te.build(te.create_schedule(C.op), [A, C])
    for size in (1, 19):
        a = rand_array((size,))
        c = np.zeros(size, "float32")
        f(a, c)
        np.testing.assert_allclose(c, a * 3, rtol=1e-6)


def test_extern_two_outputs():
    A = te.placeholder((5, 3), name="A")
    pos, neg = te.extern([(5, 3), (5, 3)], [A], lambda ins, outs: te.call_packed(
        "test_extern.split_sign", ins[0], outs[0], outs[1]), name="sign")
    total = te.compute((5, 3), lambda i, j: pos[i, j] - neg[i, j], name="total")
    a = rand_array((5, 3))
    p, t = np.zeros((5, 3), "float32"), np.zeros((5, 3), "float32")
    te.build(te.create_schedule(total.op), [A, pos, total])(a, p, t)
    np.testing.assert_array_equal(p, np.maximum(a, 0))
    np.testing.assert_allclose(t, np.abs(a))


def test_callee_error_reaches_the_caller():
    A = te.placeholder((4,), name="A")
    C = te.extern((4,), [A], lambda ins, outs: te.call_packed(
        "test_extern.fails", ins[0], outs[0]), name="C")
    f = te.build(te.create_schedule(C.op), [A, C])
    with pytest.raises(KeyError, match="the callee's own error"):
        f(rand_array((4,)), np.zeros(4, "float32"))
    C = te.extern((4,), [A], lambda ins, outs: te.call_packed(
        "test_extern.never_registered", ins[0], outs[0]), name="C")
    f = te.build(te.create_schedule(C.op), [A, C])
    with pytest.raises(ValueError, match="no function is registered as "
                                         "'test_extern.never_registered'"):
        f(rand_array((4,)), np.zeros(4, "float32"))


def test_registry():
    def twice(x):
        return 2 * x
    runtime.register_func("test_extern.twice", twice, override=True)
    assert runtime.get_global_func("test_extern.twice") is twice
    assert runtime.get_global_func("test_extern.absent", allow_missing=True) is None
    with pytest.raises(ValueError, match="already registered as 'test_extern.twice'; pass "
                                         "override=True"):
        runtime.register_func("test_extern.twice", twice)


def test_extern_misuse():
    A = te.placeholder((4,), name="A")
    with pytest.raises(te.ComputeError, match="fcompute must return a statement .* got int"):
        te.extern((4,), [A], lambda ins, outs: 0)
    with pytest.raises(te.ComputeError, match="inputs\\[0\\] must be a tensor, got list"):
        te.extern((4,), [[A]], lambda ins, outs: None)
    with pytest.raises(te.ComputeError, match="argument 1 must be a buffer, an expression or "
                                              "a Python number, got str"):
        te.extern((4,), [A], lambda ins, outs: te.call_packed("f", ins[0], "text"))
    C = te.extern((4,), [A], lambda ins, outs: te.call_packed("f", ins[0], outs[0]), name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(te.ScheduleError, match="'C' is a te.extern result, computed whole"):
        s[C].compute_inline()
