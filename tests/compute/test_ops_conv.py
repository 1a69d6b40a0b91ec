"""te.compute.ops conv2d_nchw and depthwise_conv2d_nchw against a numpy reference.

Odd sizes, stride 2, dilation 2, groups 2, per-dimension hyper-parameters, asymmetric padding
on every side, size-1 dims, int32 exact; the default schedule and pad inlined / attached /
at root, tile + vectorize, cache_write, cache_read, rfactor. Imports te, te.compute.ops,
numpy and helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-4)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _pads(padding):
    if isinstance(padding, int):
        return (padding,) * 4
    return tuple(padding) if len(padding) == 4 else (padding[0], padding[1]) * 2


def conv2d_ref(x, w, stride, padding, dilation, groups):
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    top, left, bottom, right = _pads(padding)
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, _, h, wd = xp.shape
    oc, icg, kh, kw = w.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow), dtype=np.result_type(x, w))
    ocg = oc // groups
    for g in range(groups):
        xs = xp[:, g * icg:(g + 1) * icg]
        ws = w[g * ocg:(g + 1) * ocg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh,
                           kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch,
                                                           ws[:, :, ky, kx])
    return out


CONV_CASES = [
    # (N, C, H, W), (OC, KH, KW), stride, padding, dilation, groups
    ((1, 3, 7, 9), (5, 3, 3), 1, 1, 1, 1),
    ((2, 4, 9, 11), (6, 3, 3), 2, (1, 0, 2, 1), 1, 2),
    ((1, 2, 13, 7), (3, 3, 2), 1, 2, 2, 1),
    ((1, 4, 5, 5), (4, 1, 1), 1, 0, 1, 4),
    ((1, 1, 1, 1), (1, 1, 1), 1, 0, 1, 1),
    ((1, 3, 1, 7), (2, 1, 3), (1, 2), (0, 1), (1, 2), 1),
    ((1, 2, 6, 6), (4, 3, 3), 2, (0, 2, 1, 0), 2, 2),
]


def _conv(case, dtype="float32"):
    (n, c, h, w), (oc, kh, kw), stride, padding, dilation, groups = case
    X = te.placeholder((n, c, h, w), dtype, name="X")
    K = te.placeholder((oc, c // groups, kh, kw), dtype, name="K")
    Y = ops.conv2d_nchw(X, K, stride, padding, dilation, groups)
    return X, K, Y, lambda x, k: conv2d_ref(x, k, stride, padding, dilation, groups)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_default(case):
    X, K, Y, ref = _conv(case)
    check(te.create_schedule(Y.op), [X, K], [Y], ref)


def test_conv2d_int32():
    X, K, Y, ref = _conv(CONV_CASES[1], "int32")
    check(te.create_schedule(Y.op), [X, K], [Y], ref)


def test_conv2d_without_padding_has_no_pad_stage():
    X, K, Y, _ = _conv(CONV_CASES[3])
    assert Y.op.input_tensors[0] is X or Y.op.input_tensors[0] == X


def _pad_stage(Y):
    P = Y.op.input_tensors[0]
    assert P.op.name == "pad_temp"
    return P


def conv_pad_inline_tile_vectorize(s, Y):
    s[_pad_stage(Y)].compute_inline()
    n, f, y, x = Y.op.axis
    yo, xo, yi, xi = s[Y].tile(y, x, 2, 4)
    s[Y].vectorize(xi)


def conv_pad_at_row(s, Y):
    n, f, y, x = Y.op.axis
    yo, yi = s[Y].split(y, 2)
    s[Y].reorder(n, yo, f, yi, x)
    s[_pad_stage(Y)].compute_at(s[Y], yo)


def conv_pad_root_parallel(s, Y):
    s[_pad_stage(Y)].compute_root()
    n, f, y, x = Y.op.axis
    s[Y].parallel(s[Y].fuse(n, f))
    rc, ry, rx = Y.op.reduce_axis
    s[Y].reorder(rc, ry, y, rx, x)


def conv_cache_write(s, Y):
    s[_pad_stage(Y)].compute_inline()
    YL = s.cache_write(Y, "local")
    n, f, y, x = Y.op.axis
    fo, fi = s[Y].split(f, 2)
    xo, xi = s[Y].split(x, 4)
    s[Y].reorder(n, fo, y, xo, fi, xi)
    s[YL].compute_at(s[Y], xo)
    rc, ry, rx = s[YL].op.reduce_axis
    nl, fl, yl, xl = s[YL].op.axis
    s[YL].reorder(rc, ry, rx, nl, fl, yl, xl)
    s[YL].unroll(rx)
    s[YL].vectorize(xl)


def conv_cache_read_kernel(s, Y):
    K = Y.op.input_tensors[1]
    KL = s.cache_read(K, "local", [Y])
    n, f, y, x = Y.op.axis
    s[KL].compute_at(s[Y], f)


def conv_rfactor(s, Y):
    rc = Y.op.reduce_axis[0]
    _, rci = s[Y].split(rc, 2)
    s.rfactor(Y, rci)


CONV_SCHEDULES = [conv_pad_inline_tile_vectorize, conv_pad_at_row, conv_pad_root_parallel,
                  conv_cache_write, conv_cache_read_kernel, conv_rfactor]


@pytest.mark.parametrize("sched", CONV_SCHEDULES, ids=lambda f: f.__name__[5:])
@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[2]], ids=["s2g2", "d2"])
def test_conv2d_scheduled(sched, case):
    X, K, Y, ref = _conv(case)
    s = te.create_schedule(Y.op)
    sched(s, Y)
    check(s, [X, K], [Y], ref)


def test_conv2d_relu_fused_epilogue():
    X, K, Y, ref = _conv(CONV_CASES[0])
    R = ops.relu(Y)
    s = te.create_schedule(R.op)
    s[_pad_stage(Y)].compute_inline()
    n, f, y, x = R.op.axis
    s[Y].compute_at(s[R], f)
    check(s, [X, K], [R], lambda x, k: np.maximum(ref(x, k), 0))


def depthwise_ref(x, w, stride, padding, dilation):
    c, m, kh, kw = w.shape
    return conv2d_ref(x, w.reshape(c * m, 1, kh, kw), stride, padding, dilation, c)


DEPTHWISE_CASES = [
    # (N, C, H, W), (M, KH, KW), stride, padding, dilation
    ((1, 3, 7, 9), (1, 3, 3), 1, 1, 1),
    ((2, 2, 9, 8), (2, 3, 3), 2, (1, 0, 2, 1), 1),
    ((1, 3, 11, 5), (1, 3, 2), 1, 2, (2, 1)),
    ((1, 1, 1, 1), (3, 1, 1), 1, 0, 1),
]


def _depthwise(case, dtype="float32"):
    (n, c, h, w), (m, kh, kw), stride, padding, dilation = case
    X = te.placeholder((n, c, h, w), dtype, name="X")
    K = te.placeholder((c, m, kh, kw), dtype, name="K")
    Y = ops.depthwise_conv2d_nchw(X, K, stride, padding, dilation)
    return X, K, Y, lambda x, k: depthwise_ref(x, k, stride, padding, dilation)


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=str)
def test_depthwise_default(case):
    X, K, Y, ref = _depthwise(case)
    check(te.create_schedule(Y.op), [X, K], [Y], ref)


@pytest.mark.parametrize("sched", [conv_pad_inline_tile_vectorize, conv_pad_at_row],
                         ids=["pad_inline_tile_vectorize", "pad_at_row"])
def test_depthwise_scheduled_int(sched):
    X, K, Y, ref = _depthwise(DEPTHWISE_CASES[1], "int32")
    s = te.create_schedule(Y.op)
    sched(s, Y)
    check(s, [X, K], [Y], ref)
