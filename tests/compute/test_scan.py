"""te.scan: recurrences over the first axis against numpy, with symbolic and odd sizes,
several states, several stages per step, schedules of the body, and misuse errors."""
import numpy as np
import pytest

import te
from helpers import rand_array


def cumsum_scan(m=None, n=None):
    m = m if m is not None else te.var("m")
    n = n if n is not None else te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, init, update, te.scan(init, update, state, inputs=[X])


@pytest.mark.parametrize("shape", [(10, 7), (1, 5), (2, 1), (13, 33)])
def test_cumsum_symbolic_sizes(shape):
    X, _, _, out = cumsum_scan()
    f = te.build(te.create_schedule(out.op), [X, out])
    x = rand_array(shape)
    got = np.zeros_like(x)
    f(x, got)
    np.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


def test_cumsum_constant_sizes_and_scheduled_body():
    X, init, update, out = cumsum_scan(9, 37)
    x = rand_array((9, 37))
    want = np.cumsum(x, axis=0)
    plain = te.create_schedule(out.op)
    scheduled = te.create_schedule(out.op)
    io, ii = scheduled[update].split(update.op.axis[1], factor=8)
    scheduled[update].vectorize(ii)
    scheduled[init].split(init.op.axis[1], factor=5)
    for s in (plain, scheduled):
        got = np.zeros_like(x)
        te.build(s, [X, out])(x, got)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_init_of_two_rows_reads_two_steps_back():
    m, n = 11, 6
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((2, n), lambda t, i: X[t, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + state[t - 2, i] * X[t, i],
                        name="fib")
    out = te.scan(init, update, state)
    x = rand_array((m, n)) * 0.5
    want = x.copy()
    for t in range(2, m):
        want[t] = want[t - 1] + want[t - 2] * x[t]
    got = np.zeros_like(x)
    te.build(te.create_schedule(out.op), [X, out])(x, got)
    # atol: the kernel fuses a multiply-add that numpy rounds twice, and a sum that
    # cancels to near zero keeps that rounding difference as a large relative error
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_two_stage_body_with_compute_at():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = te.compute((m, n), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    out = te.scan(init, s2, state, inputs=[X])
    x = rand_array((8, 70))
    want = x.copy()
    for t in range(1, 8):
        want[t] = want[t - 1] * 2 + x[t]
    s = te.create_schedule(out.op)
    xo, _ = s[s2].split(s2.op.axis[1], factor=32)
    s[s1].compute_at(s[s2], xo)
    for sch in (te.create_schedule(out.op), s):
        got = np.zeros_like(x)
        te.build(sch, [X, out])(x, got)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_two_states_and_a_consumer():
    m, n, k = 7, 5, 3
    X = te.placeholder((m, n), name="X")
    st1 = te.placeholder((m, n), name="st1")
    st2 = te.placeholder((m, k), name="st2")
    init1 = te.compute((1, n), lambda _, i: X[0, i], name="init1")
    init2 = te.compute((1, k), lambda _, i: te.const(0.0), name="init2")
    upd1 = te.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="upd1")
    upd2 = te.compute((m, k), lambda t, i: st2[t - 1, i] + st1[t - 1, 0], name="upd2")
    r1, r2 = te.scan([init1, init2], [upd1, upd2], [st1, st2], inputs=[X])
    total = te.compute((m,), lambda t: r2[t, 0] + r2[t, k - 1], name="total")
    x = rand_array((m, n))
    c1 = np.cumsum(x, axis=0)
    c2 = np.zeros((m, k), "float32")
    for t in range(1, m):
        c2[t] = c2[t - 1] + c1[t - 1, 0]
    got1, got_total = np.zeros_like(x), np.zeros(m, "float32")
    te.build(te.create_schedule(total.op), [X, r1, total])(x, got1, got_total)
    np.testing.assert_allclose(got1, c1, rtol=1e-5)
    np.testing.assert_allclose(got_total, c2[:, 0] + c2[:, k - 1], rtol=1e-5)


def test_scan_errors():
    X, init, update, out = cumsum_scan(4, 3)
    state = te.placeholder((4, 3), name="state")
    with pytest.raises(te.ComputeError, match="state_placeholder\\[0\\] must be a "
                                              "te.placeholder, got 'update'"):
        te.scan(init, update, update)
    wrong = te.compute((4, 2), lambda t, i: state[t - 1, i], name="wrong")
    with pytest.raises(te.ComputeError, match="update\\[0\\] shape\\[1\\] must equal "
                                              "state_placeholder\\[0\\]'s, got 2 and 3"):
        te.scan(init, wrong, state)
    with pytest.raises(te.ComputeError, match="must have the same length, got 1, 2 and 1"):
        te.scan([init], [update, update], [state])
    s = te.create_schedule(out.op)
    with pytest.raises(te.ScheduleError, match="'scan' is a te.scan result, computed whole"):
        s[out].compute_inline()
    s[update].compute_root()
    with pytest.raises(te.LoweringError, match="stage 'update' reads the scan's state, so it "
                                               "must run inside the time loop 'scan.idx'"):
        te.lower(s, [X, out])
    s = te.create_schedule(out.op)
    s[out].split(out.op.scan_axis, factor=2)
    with pytest.raises(te.LoweringError, match="its time loop 'scan.idx' cannot be split"):
        te.lower(s, [X, out])


def _bound_scan(update_reads_column_0: bool):
    m, n = 6, 300
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    if update_reads_column_0:
        update = te.compute((m, n), lambda t, i: state[t - 1, i] + state[t - 1, 0] + X[t, i],
                            name="update")
    else:
        update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    out = te.scan(init, update, state, inputs=[X])
    s = te.create_schedule(out.op)
    for stage in (init, update):
        xo, xi = s[stage].split(stage.op.axis[1], factor=64)
        s[stage].bind(xo, te.thread_axis("blockIdx.x"))
        s[stage].bind(xi, te.thread_axis("threadIdx.x"))
    return s, X, out


def test_cuda_scan_in_the_emulator_and_a_cross_thread_step_refused():
    from helpers import run_emulated
    s, X, out = _bound_scan(False)
    x = rand_array((6, 300))
    (got,) = run_emulated(te.build(s, [X, out], "cuda"), [x], [(6, 300)], ["float32"])
    np.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)
    s, X, out = _bound_scan(True)
    with pytest.raises(te.BuildError, match="loop 'scan.idx' runs inside kernel 'main_kernel1' "
                                            "around its thread-bound loops, and reads 'scan' at "
                                            "scan.idx\\*300 where other threads store it"):
        te.build(s, [X, out], "cuda")
