"""te.tvm.topi: TVM's operator names over our library checked against topi.testing's numpy
references (themselves checked against plain loops), topi.utils, and topi's x86 dense
templates (dense_pack, dense_nopack): fallback and random configs, tuning, dispatch."""
from __future__ import annotations

import numpy as np
import pytest

import te
from te.tvm import autotvm, topi
from te.tvm.topi import testing as ref


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, shape).astype("float32")


def _build_run(outs, inputs, arrays):
    outs = outs if isinstance(outs, list) else [outs]
    s = te.create_schedule([o.op for o in outs])
    res = [np.full(tuple(int(d.value) for d in o.shape), np.nan, "float32") for o in outs]
    te.build(s, inputs + outs)(*arrays, *res)
    return res[0] if len(res) == 1 else res


def test_conv2d_reference_equals_plain_loops():
    a, w = _rand((1, 4, 7, 6)), _rand((6, 2, 3, 2), 1)
    got = ref.conv2d_nchw_python(a, w, (2, 1), (1, 0, 2, 1), groups=2)
    ap = np.pad(a.astype("float64"), ((0, 0), (0, 0), (1, 2), (0, 1)))
    want = np.zeros(got.shape)
    for f in range(6):
        g = f // 3
        for y in range(got.shape[2]):
            for x in range(got.shape[3]):
                want[0, f, y, x] = (ap[0, 2 * g:2 * g + 2, 2 * y:2 * y + 3, x:x + 2] *
                                    w[f]).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_softmax_and_dense_references_equal_definitions():
    x = _rand((3, 5))
    sm = ref.softmax_python(x, axis=1)
    np.testing.assert_allclose(sm.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ref.log_softmax_python(x), np.log(sm), rtol=1e-5, atol=1e-6)
    w, b = _rand((4, 5), 1), _rand((4,), 2)
    d = ref.dense(x, w, b, use_bias=True, use_relu=True)
    want = np.maximum(sum(x[:, k:k + 1] * w[:, k] for k in range(5)) + b, 0)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-6)


def test_nn_ops_match_the_references():
    data, kern = te.placeholder((2, 3, 9, 7), name="d"), te.placeholder((5, 3, 3, 3), name="k")
    a, w = _rand((2, 3, 9, 7)), _rand((5, 3, 3, 3), 1)
    got = _build_run(topi.nn.conv2d_nchw(data, kern, 2, 1, 1), [data, kern], [a, w])
    np.testing.assert_allclose(got, ref.conv2d_nchw_python(a, w, 2, 1), rtol=1e-4, atol=1e-4)

    X, W, B = (te.placeholder(s, name=n) for s, n in (((6, 5), "x"), ((7, 5), "w"), ((7,), "b")))
    x, wv, bv = _rand((6, 5)), _rand((7, 5), 1), _rand((7,), 2)
    got = _build_run(topi.nn.dense(X, W, B), [X, W, B], [x, wv, bv])
    np.testing.assert_allclose(got, ref.dense(x, wv, bv, use_bias=True), rtol=1e-5, atol=1e-5)
    got = _build_run(topi.nn.softmax(X), [X], [x])
    np.testing.assert_allclose(got, ref.softmax_python(x, axis=-1), rtol=1e-5, atol=1e-6)
    got = _build_run(topi.nn.relu(X), [X], [x])
    np.testing.assert_array_equal(got, np.maximum(x, 0))

    P, Q = te.placeholder((2, 3, 4), name="p"), te.placeholder((2, 5, 4), name="q")
    p, q = _rand((2, 3, 4)), _rand((2, 5, 4), 1)
    got = _build_run(topi.nn.batch_matmul(P, Q), [P, Q], [p, q])       # TVM: q transposed
    np.testing.assert_allclose(got, ref.batch_matmul(p, q), rtol=1e-5, atol=1e-5)


def test_elementwise_names():
    X, Y = te.placeholder((4, 3), name="x"), te.placeholder((3,), name="y")
    x, y = _rand((4, 3)), _rand((3,), 1)
    got = _build_run([topi.add(X, Y), topi.multiply(X, 2.0), topi.exp(X), topi.maximum(X, Y),
                      topi.sigmoid(X)], [X, Y], [x, y])
    for g, w in zip(got, [x + y, x * 2, np.exp(x), np.maximum(x, y), 1 / (1 + np.exp(-x))]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_utils():
    A = te.placeholder((3, 4), name="A")
    assert topi.utils.get_const_tuple(A.shape) == (3, 4)
    assert topi.utils.get_const_int(A.shape[1]) == 4
    with pytest.raises(te.ArgumentError, match="expected a constant integer"):
        topi.utils.get_const_int(te.var("n"))
    B = topi.nn.relu(A)
    C = topi.sum(B, axis=1)
    D = topi.add(C, 1.0)
    s = te.create_schedule(D.op)
    seen = []
    topi.utils.traverse_inline(s, D.op, lambda op: seen.append(op.name))
    assert seen == [C.op.name, D.op.name]    # relu is not reached: C is a reduction
    assert s[D].attach_type != "inline"
    E = topi.exp(topi.nn.relu(A))                 # relu: injective, not an output
    s = te.create_schedule(E.op)
    topi.utils.traverse_inline(s, E.op)
    assert s[E.op.input_tensors[0].op].attach_type == "inline"


def _dense_arrays(M, N, K, seed=0):
    return _rand((M, K), seed), _rand((N, K), seed + 1), _rand((N,), seed + 2)


@pytest.mark.parametrize("M,N,K", [(24, 40, 36), (7, 9, 5)])
def test_dense_pack_and_nopack_fallback_and_random_configs(M, N, K):
    data, weight = te.placeholder((M, K), name="data"), te.placeholder((N, K), name="weight")
    bias = te.placeholder((N,), name="bias")
    a, w, b = _dense_arrays(M, N, K)
    want = ref.dense(a, w, b, use_bias=True)
    for compute, schedule in ((topi.x86.dense_pack, topi.x86.schedule_dense_pack),
                              (topi.x86.dense_nopack, topi.x86.schedule_dense_nopack)):
        for with_bias in (True, False):
            args = (data, weight, bias) if with_bias else (data, weight)
            C = compute(*args)
            s = schedule([C])
            out = np.full((M, N), np.nan, "float32")
            te.build(s, list(args) + [C])(*((a, w, b) if with_bias else (a, w)), out)
            np.testing.assert_allclose(out, want if with_bias else want - b, rtol=1e-4,
                                       atol=1e-4)
    task = autotvm.task.create("dense_pack.x86", args=(data, weight, bias, "float32"))
    rng = np.random.default_rng(M)
    for idx in rng.choice(len(task.config_space), 6, replace=False):
        s, targs = task.instantiate(task.config_space.get(int(idx)))
        out = np.full((M, N), np.nan, "float32")
        te.build(s, targs)(a, w, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_dense_pack_space_is_tvms():
    data, weight = te.placeholder((24, 36), name="d"), te.placeholder((40, 36), name="w")
    task = autotvm.task.create("dense_pack.x86", args=(data, weight, None, "float32"))
    # ordered 2-factor splits of 24 and 40 (30 each), divisors of 36 (9), and tile_inner's
    # filter keeping the divisors of 24 up to 16 (7): AutoTVM's count for this shape
    assert len(task.config_space) == 30 * 30 * 9 * 7 == 56700


def test_dense_pack_tuned_then_dispatched(tmp_path):
    M, N, K = 16, 24, 12
    data, weight = te.placeholder((M, K), name="data"), te.placeholder((N, K), name="weight")
    task = autotvm.task.create("dense_pack.x86", args=(data, weight), target="llvm")
    log = str(tmp_path / "dense.log")
    autotvm.tuner.XGBTuner(task).tune(
        n_trial=3, measure_option=autotvm.measure_option(
            runner=autotvm.LocalRunner(number=2, repeat=1)),
        callbacks=[autotvm.callback.log_to_file(log)])
    a, w, _ = _dense_arrays(M, N, K, seed=5)
    with autotvm.apply_history_best(log) as ctx:
        best = ctx.query("llvm", task.workload)
        C = topi.x86.dense_pack(data, weight)
        s = topi.x86.schedule_dense_pack([C])
    assert not best.is_fallback
    want_s, _ = task.instantiate(best)
    assert s.to_json() == want_s.to_json()
    out = np.full((M, N), np.nan, "float32")
    te.build(s, [data, weight, C])(a, w, out)
    np.testing.assert_allclose(out, ref.dense(a, w, None), rtol=1e-4, atol=1e-4)


def test_schedule_of_foreign_outputs_is_refused():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(te.ArgumentError, match="were not made by the compute registered"):
        topi.x86.schedule_dense_pack([topi.nn.relu(A)])
