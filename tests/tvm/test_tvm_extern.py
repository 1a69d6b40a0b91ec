"""TVM's names for scan, extern, packed functions, cblas and tensorize (te.tvm), used as
TVM's scan, extern_op and tensorize tutorials use them, against numpy."""
import numpy as np
import pytest

import te.tvm as tvm
from te.errors import ComputeError
from te.tvm import te
from te.tvm.contrib import cblas
from helpers import rand_array


def test_scan_names():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    s = te.create_schedule(s_scan.op)
    assert s_scan.op.scan_axis.var.name == "scan.idx"
    f = tvm.build(s, [X, s_scan], "llvm", name="myscan")
    dev = tvm.cpu(0)
    a_np = rand_array((10, 33))
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(np.zeros((10, 33), dtype=s_scan.dtype), dev)
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), np.cumsum(a_np, axis=0), rtol=1e-5)


@tvm.register_func("tests.tvm.addone", override=True)
def _addone(x, y):
    tvm.nd.array(x.numpy() + 1).copyto(y)


def test_extern_with_a_registered_python_function():
    assert tvm.get_global_func("tests.tvm.addone") is _addone
    assert tvm.get_global_func("tests.tvm.absent", allow_missing=True) is None
    n = 1027
    A = te.placeholder((n,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed(
        "tests.tvm.addone", ins[0], outs[0]), name="C")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    dev = tvm.cpu(0)
    a = tvm.nd.array(rand_array((n,)), dev)
    b = tvm.nd.array(np.zeros(n, "float32"), dev)
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-6)


@pytest.mark.parametrize("transa, transb", [(False, False), (True, False), (False, True)])
def test_cblas_matmul_with_a_bias_stage(transa, transb):
    n, el, m = 65, 17, 23
    assert tvm.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True) is not None
    A = te.placeholder((el, n) if transa else (n, el), name="A")
    B = te.placeholder((m, el) if transb else (el, m), name="B")
    C = cblas.matmul(A, B, transa, transb)
    D = te.compute(C.shape, lambda i, j: C[i, j] + 10.0, name="D")
    s = te.create_schedule(D.op)
    f = tvm.build(s, [A, B, D], "llvm")
    a, b = rand_array(A.shape), rand_array(B.shape)
    d = tvm.nd.array(np.zeros((n, m), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), d)
    want = (a.T if transa else a) @ (b.T if transb else b) + 10
    tvm.testing.assert_allclose(d.numpy(), want, rtol=1e-5)
    with pytest.raises(ComputeError, match="cblas.matmul: rhs must be a 2-D tensor, got 1 "
                                           "dimensions"):
        cblas.matmul(A, te.placeholder((3,), name="v"))


def test_tensorize_names():
    n, m, el = 6, 32, 16
    A = te.placeholder((n, el), name="A")
    B = te.placeholder((m, el), name="B")
    k = te.reduce_axis((0, el), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=16)
    s[C].reorder(x, yo, yi, C.op.reduce_axis[0])

    a = te.placeholder((el,), name="a")
    b = te.placeholder((16, el), name="b")
    kk = te.reduce_axis((0, el), name="k")
    c = te.compute((16,), lambda i: te.sum(a[kk] * b[i, kk], axis=kk), name="c")
    a_buf = tvm.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    b_buf = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1,
                                strides=[te.var("s1"), 1])
    c_buf = tvm.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()
        aa, bb = ins
        ib.emit(tvm.tir.call_packed("tests.tvm.gemv", outs[0], aa, bb))
        return ib.get()
    gemv = te.decl_tensor_intrin(c.op, intrin_func, binds={a: a_buf, b: b_buf, c: c_buf})
    s[C].tensorize(yi, gemv)

    @tvm.register_func("tests.tvm.gemv", override=True)
    def _gemv(cc, aa, bb):  # views of the regions: strides are the tensors'
        cc.copyfrom(bb.numpy() @ aa.numpy())
    f = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    av, bv = rand_array((n, el)), rand_array((m, el))
    cv = tvm.nd.array(np.zeros((n, m), "float32"))
    f(tvm.nd.array(av), tvm.nd.array(bv), cv)
    # signed terms can cancel to near zero, where a relative bound alone fails on rounding
    tvm.testing.assert_allclose(cv.numpy(), av @ bv.T, rtol=1e-5, atol=1e-5)
