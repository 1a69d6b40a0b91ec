"""Neural-network operators: matmul, batch_matmul, conv2d/depthwise (NCHW), pooling,
softmax and layer_norm.

Takes te.Tensors and static hyper-parameters, gives the output tensor; multi-stage ops keep
their stages separate (a pad stage, softmax's max/exp/sum/norm, layer_norm's mean/var) so a
schedule can inline or attach them. Imports te.compute (api, tensor), te.errors and the
sibling op modules only.
"""
from __future__ import annotations

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import (check_dim, check_float, check_groups, check_tensor, fmt_shape, int_tuple,
                    normalize_axes, pad_tuple, static_dim)
from .reduction import reduce_over
from .transform import pad


def matmul(A: Tensor, B: Tensor, transpose_b: bool = False, out_dtype: str | None = None,
           name: str = "T_matmul") -> Tensor:
    """C[i, j] = sum_k A[i, k] * B[k, j] (B[j, k] when transpose_b)."""
    check_tensor(A, "matmul", "A", ndim=2)
    check_tensor(B, "matmul", "B", ndim=2)
    kb = B.shape[1] if transpose_b else B.shape[0]
    check_dim(kb, A.shape[1], "matmul", f"B.shape[{1 if transpose_b else 0}] (the reduction "
              f"size, A.shape[1])")
    N = B.shape[0] if transpose_b else B.shape[1]
    dtype = out_dtype or A.dtype
    k = api.reduce_axis((0, A.shape[1]), "k")

    def fcompute(i, j):
        b = B[j, k] if transpose_b else B[k, j]
        return api.sum(A[i, k].astype(dtype) * b.astype(dtype), axis=k)
    return api.compute((A.shape[0], N), fcompute, name=name, tag="matmul")


def batch_matmul(A: Tensor, B: Tensor, transpose_b: bool = False,
                 out_dtype: str | None = None, name: str = "T_batch_matmul") -> Tensor:
    """C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] (B[b, j, k] when transpose_b); a batch
    size of 1 on either side broadcasts."""
    check_tensor(A, "batch_matmul", "A", ndim=3)
    check_tensor(B, "batch_matmul", "B", ndim=3)
    kb = B.shape[2] if transpose_b else B.shape[1]
    check_dim(kb, A.shape[2], "batch_matmul", f"B.shape[{2 if transpose_b else 1}] (the "
              f"reduction size, A.shape[2])")
    ba, bb = static_dim(A.shape[0]), static_dim(B.shape[0])
    if ba != 1 and bb != 1:
        check_dim(B.shape[0], A.shape[0], "batch_matmul", "B.shape[0] (the batch size)")
    batch = B.shape[0] if ba == 1 else A.shape[0]
    N = B.shape[1] if transpose_b else B.shape[2]
    dtype = out_dtype or A.dtype
    k = api.reduce_axis((0, A.shape[2]), "k")

    def fcompute(b, i, j):
        a_b = 0 if ba == 1 else b
        b_b = 0 if bb == 1 else b
        rhs = B[b_b, j, k] if transpose_b else B[b_b, k, j]
        return api.sum(A[a_b, i, k].astype(dtype) * rhs.astype(dtype), axis=k)
    return api.compute((batch, A.shape[1], N), fcompute, name=name, tag="batch_matmul")


def _window(size, k: int, stride: int, dilation: int, before: int, after: int, who: str,
            what: str):
    """Output extent of a sliding window along one spatial dim."""
    span = (k - 1) * dilation + 1
    s = static_dim(size)
    if s is None:
        return (size + before + after - span) // stride + 1
    out = (s + before + after - span) // stride + 1
    if out < 1:
        raise ShapeError(f"{who}: the {what} window ({span} with dilation) does not fit the "
                         f"padded input ({s + before + after})")
    return out


def _pad_nchw(data: Tensor, pads: tuple, value, name: str) -> Tensor:
    top, left, bottom, right = pads
    if not any(pads):
        return data
    return pad(data, (0, 0, top, left), (0, 0, bottom, right), value, name=name)


def conv2d_geometry(data: Tensor, kernel: Tensor, stride, padding, dilation, groups: int,
                    who: str) -> tuple:
    """Check a conv2d's arguments; gives ((sh, sw), (dh, dw), (top, left, bottom, right),
    (kh, kw), (OH, OW)). Shared by conv2d_nchw and conv2d_nchw_gemm (same messages)."""
    check_tensor(data, who, "data", ndim=4)
    check_tensor(kernel, who, "kernel", ndim=4)
    sh, sw = int_tuple(stride, 2, who, "stride", minimum=1)
    dh, dw = int_tuple(dilation, 2, who, "dilation", minimum=1)
    pads = pad_tuple(padding, who)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{who}: groups must be a positive int, got {groups!r}")
    N, C, H, W = data.shape
    OC, ICg, KH, KW = kernel.shape
    check_groups(C, OC, ICg, groups, who)
    kh, kw = static_dim(KH), static_dim(KW)
    if kh is None or kw is None:
        raise ShapeError(f"{who}: kernel must have a constant spatial size, got "
                         f"{fmt_shape(kernel.shape)}")
    OH = _window(H, kh, sh, dh, pads[0], pads[2], who, "kernel height")
    OW = _window(W, kw, sw, dw, pads[1], pads[3], who, "kernel width")
    return (sh, sw), (dh, dw), pads, (kh, kw), (OH, OW)


def conv2d_nchw(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
                out_dtype: str | None = None, name: str = "T_conv2d_nchw") -> Tensor:
    """2-D convolution. data (N, C, H, W), kernel (OC, C // groups, KH, KW); padding is an int,
    (pad_h, pad_w) or (top, left, bottom, right) and goes into a separate stage 'pad_temp'
    (absent when zero) that a schedule may inline."""
    (sh, sw), (dh, dw), pads, (kh, kw), (OH, OW) = conv2d_geometry(
        data, kernel, stride, padding, dilation, groups, "conv2d_nchw")
    N = data.shape[0]
    OC, ICg = kernel.shape[0], kernel.shape[1]
    padded = _pad_nchw(data, pads, 0, "pad_temp")
    dtype = out_dtype or data.dtype
    rc = api.reduce_axis((0, ICg), "rc")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    oc_per_group = OC // groups if groups > 1 else OC

    def fcompute(n, f, y, x):
        ch = rc if groups == 1 else (f // oc_per_group) * ICg + rc
        return api.sum(padded[n, ch, y * sh + ry * dh, x * sw + rx * dw].astype(dtype)
                       * kernel[f, rc, ry, rx].astype(dtype), axis=[rc, ry, rx])
    return api.compute((N, OC, OH, OW), fcompute, name=name, tag="conv2d_nchw")


def depthwise_conv2d_nchw(data: Tensor, kernel: Tensor, stride=1, padding=0, dilation=1,
                          out_dtype: str | None = None,
                          name: str = "T_depthwise_conv2d_nchw") -> Tensor:
    """Depthwise convolution. data (N, C, H, W), kernel (C, M, KH, KW) with channel
    multiplier M; output channel f reads input channel f // M (topi's layout)."""
    who = "depthwise_conv2d_nchw"
    check_tensor(data, who, "data", ndim=4)
    check_tensor(kernel, who, "kernel", ndim=4)
    sh, sw = int_tuple(stride, 2, who, "stride", minimum=1)
    dh, dw = int_tuple(dilation, 2, who, "dilation", minimum=1)
    pads = pad_tuple(padding, who)
    N, C, H, W = data.shape
    KC, M, KH, KW = kernel.shape
    check_dim(KC, C, who, "kernel.shape[0] (data channels)")
    kh, kw, m = static_dim(KH), static_dim(KW), static_dim(M)
    if kh is None or kw is None or m is None:
        raise ShapeError(f"{who}: kernel must have a constant multiplier and spatial size, "
                         f"got {fmt_shape(kernel.shape)}")
    OH = _window(H, kh, sh, dh, pads[0], pads[2], who, "kernel height")
    OW = _window(W, kw, sw, dw, pads[1], pads[3], who, "kernel width")
    padded = _pad_nchw(data, pads, 0, "pad_temp")
    dtype = out_dtype or data.dtype
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")

    def fcompute(n, f, y, x):
        ch = f // m if m > 1 else f
        return api.sum(padded[n, ch, y * sh + ry * dh, x * sw + rx * dw].astype(dtype)
                       * kernel[ch, f % m if m > 1 else 0, ry, rx].astype(dtype),
                       axis=[ry, rx])
    return api.compute((N, C * m, OH, OW), fcompute, name=name, tag="depthwise_conv2d_nchw")


def _pool_args(data, kernel, stride, padding, who, dilation=1):
    """((kh, kw), (sh, sw), (dh, dw), pads, out shape); window tap k along an axis reads
    padded index out * stride + k * dilation."""
    check_tensor(data, who, "data", ndim=4)
    kh, kw = int_tuple(kernel, 2, who, "kernel", minimum=1)
    sh, sw = int_tuple(stride, 2, who, "stride", minimum=1)
    dh, dw = int_tuple(dilation, 2, who, "dilation", minimum=1)
    pads = pad_tuple(padding, who)
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1   # the window's extent (kh, kw undilated)
    if pads[0] >= eh or pads[2] >= eh or pads[1] >= ew or pads[3] >= ew:
        dilated = "" if (dh, dw) == (1, 1) else f" with dilation {(dh, dw)}"
        raise ShapeError(f"{who}: padding must be smaller than the kernel on each side (a "
                         f"window of only padding has no value), got padding {padding!r} "
                         f"for kernel {(kh, kw)}{dilated}")
    N, C, H, W = data.shape
    OH = _window(H, kh, sh, dh, pads[0], pads[2], who, "kernel height")
    OW = _window(W, kw, sw, dw, pads[1], pads[3], who, "kernel width")
    if dh > 1:
        _check_dilated_taps(H, OH, kh, sh, dh, pads[0], who, "height")
    if dw > 1:
        _check_dilated_taps(W, OW, kw, sw, dw, pads[1], who, "width")
    return (kh, kw), (sh, sw), (dh, dw), pads, (N, C, OH, OW)


def _check_dilated_taps(size, out, k: int, stride: int, dilation: int, before: int, who: str,
                        what: str):
    """With dilation a window's taps can step over a small input, leaving a window of only
    padding (no value) even where the padding is smaller than the kernel: refused where the
    size is constant."""
    n, o = static_dim(size), static_dim(out)
    if n is None or o is None:
        return
    for y in range(o):
        start = y * stride - before
        first = max(0, -(start // dilation))   # the first tap at or past index 0
        if first >= k or start + first * dilation >= n:
            raise ShapeError(f"{who}: with dilation {dilation} along the {what}, output "
                             f"{y}'s window (taps {start} + {dilation} * k, k < {k}) reads "
                             f"only padding of an input of size {n}")


def _pool_count(o, stride: int, k: int, dilation: int, before: int, size):
    """How many of an output's k taps along one axis fall inside the input (0 <= o * stride
    - before + tap * dilation < size): the divisor of an average without the padding."""
    start = o * stride - before
    if dilation == 1:
        return api.min(start + k, size) - api.max(start, 0)
    first = api.max((dilation - 1 - start) // dilation, 0)
    last = api.min((size - 1 - start) // dilation, k - 1)
    return last - first + 1


def _tap(r, dilation: int):
    """A window tap's offset from the window's start (r: an int or a reduce axis)."""
    return r if dilation == 1 else r * dilation


def max_pool2d(data: Tensor, kernel, stride=1, padding=0, dilation=1,
               name: str = "T_max_pool2d") -> Tensor:
    """Max pooling over NCHW; padding reads as the dtype's lowest value (stage 'pad_temp').
    Tap (ry, rx) of output (y, x) reads padded[y * sh + ry * dh, x * sw + rx * dw]."""
    (kh, kw), (sh, sw), (dh, dw), pads, shape = _pool_args(data, kernel, stride, padding,
                                                           "max_pool2d", dilation)
    padded = _pad_nchw(data, pads, api.min_value(data.dtype), "pad_temp")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    return api.compute(shape, lambda n, c, y, x: api.max(
        padded[n, c, y * sh + _tap(ry, dh), x * sw + _tap(rx, dw)], axis=[ry, rx]),
        name=name, tag="pool_max")


def avg_pool2d(data: Tensor, kernel, stride=1, padding=0, count_include_pad: bool = False,
               dilation=1, name: str = "T_avg_pool2d") -> Tensor:
    """Average pooling over NCHW (floats). By default padding is excluded from the count, as
    onnx AveragePool count_include_pad=0 and torch count_include_pad=False: the divisor is
    the number of taps inside the input; with count_include_pad all kh * kw. Taps as
    max_pool2d's; stages 'pad_temp' (zeros), 'pool_sum' and the division."""
    who = "avg_pool2d"
    (kh, kw), (sh, sw), (dh, dw), pads, shape = _pool_args(data, kernel, stride, padding,
                                                           who, dilation)
    check_float(data, who, "data")
    padded = _pad_nchw(data, pads, 0, "pad_temp")
    ry = api.reduce_axis((0, kh), "ry")
    rx = api.reduce_axis((0, kw), "rx")
    total = api.compute(shape, lambda n, c, y, x: api.sum(
        padded[n, c, y * sh + _tap(ry, dh), x * sw + _tap(rx, dw)], axis=[ry, rx]),
        name="pool_sum", tag="pool_sum")
    H, W = data.shape[2], data.shape[3]

    def fcompute(n, c, y, x):
        if count_include_pad or not any(pads):
            return total[n, c, y, x] / float(kh * kw)
        area = _pool_count(y, sh, kh, dh, pads[0], H) * _pool_count(x, sw, kw, dw, pads[1], W)
        return total[n, c, y, x] / area.astype(data.dtype)
    return api.compute(shape, fcompute, name=name, tag="elemwise")


# max(a, b) as `a > b ? a : b`: one compare-and-select (x86 maxps), no NaN propagation
# of its own; softmax's row max (see there why the result is still numpy's)
select_max = api.comm_reducer(lambda a, b: api.if_then_else(a > b, a, b),
                              lambda dtype: api.min_value(dtype), name="select_max")


def softmax(x: Tensor, axis: int = -1, name: str = "T_softmax") -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis` (floats), in four stages:
    <name>_maxelem, <name>_exp, <name>_expsum and <name>_norm (the result)."""
    check_tensor(x, "softmax", "x")
    check_float(x, "softmax", "x")
    (axis,) = normalize_axes(axis, x.ndim, "softmax")

    def drop(i):
        return tuple(v for d, v in enumerate(i) if d != axis)
    if x.ndim == 1:
        raise ShapeError("softmax: x must have at least 2 dimensions (the reduced row stage "
                         "cannot be 0-d); reshape a vector to (1, n)")
    # The row max as one compare-and-select per element (x86 maxps) instead of te.max's
    # NaN-propagating max (7 vector instructions): the result is the same, because a NaN
    # anywhere in a row still reaches every output through exp(NaN - max) in the sum,
    # and an all -inf row gives NaN either way.
    maxelem = reduce_over(x, (axis,), False, f"{name}_maxelem", "comm_reduce",
                          lambda full, raxes: select_max(x(*full), axis=raxes))
    ex = api.compute(x.shape, lambda *i: api.exp(x(*i) - maxelem(*drop(i))),
                     name=f"{name}_exp", tag="elemwise")
    expsum = reduce_over(ex, (axis,), False, f"{name}_expsum", "comm_reduce",
                         lambda full, raxes: api.sum(ex(*full), axis=raxes))
    # One reciprocal per row and a multiply per element (as onnxruntime's softmax does):
    # 1 / sum does not depend on the row's inner loop, so LLVM computes it once per row,
    # where a divide per element costs ~7% of a 4096-wide row on Zen 5. At most 1 ulp
    # from dividing; a NaN or inf sum gives the same NaN/0 outputs either way.
    return api.compute(x.shape, lambda *i: ex(*i) * (1.0 / expsum(*drop(i))),
                       name=f"{name}_norm", tag="softmax_output")


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, axis=-1, epsilon: float = 1e-5,
               name: str = "T_layer_norm") -> Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over `axis` (an int or several axes),
    with the biased variance; gamma and beta have the shape of the normalized axes.
    Stages <name>_mean (the mean of x - x0, x0 the row's first element), <name>_var and
    the result."""
    who = "layer_norm"
    check_tensor(x, who, "x")
    check_float(x, who, "x")
    axes = normalize_axes(axis, x.ndim, who)
    if len(axes) == x.ndim:
        raise ShapeError(f"{who}: axis must leave at least one axis unnormalized (the "
                         f"mean stage cannot be 0-d), got {axis!r} for a {x.ndim}-d x")
    norm_shape = tuple(x.shape[a] for a in axes)
    for param, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, who, param, ndim=len(axes))
        for k, (g, s) in enumerate(zip(t.shape, norm_shape)):
            check_dim(g, s, who, f"{param}.shape[{k}] (x.shape[{axes[k]}])")
    count = api.const(1, x.dtype)
    for s in norm_shape:
        count = count * s.astype(x.dtype) if static_dim(s) is None else count * float(
            static_dim(s))

    def kept(i):
        return tuple(v for d, v in enumerate(i) if d not in axes)

    def normed(i):
        return tuple(v for d, v in enumerate(i) if d in axes)

    def shifted(i):
        # x minus its row's first element, exact when they are within a factor of 2: a
        # constant row gives 0 in every term and then exactly beta, where a rounded mean
        # (n terms of x / n) made x - mean nonzero, which rsqrt(var + epsilon) magnifies;
        # a row of 1000 plus noise keeps the noise's digits (the shifted-data algorithm)
        return x(*i) - x(*(0 if d in axes else v for d, v in enumerate(i)))
    # Each term is scaled by 1 / count, a multiply: a divide per element would run at the
    # divider's throughput whenever count is not a power of two (1 ulp from dividing).
    inv_count = 1.0 / count
    mean = reduce_over(x, axes, False, f"{name}_mean", "comm_reduce",
                       lambda full, raxes: api.sum(shifted(full) * inv_count, axis=raxes))

    def centered(i):
        # two passes (the mean, then the mean of squared deviations), not E[x^2] - E[x]^2
        return shifted(i) - mean(*kept(i))
    var = reduce_over(x, axes, False, f"{name}_var", "comm_reduce",
                      lambda full, raxes: api.sum(
                          centered(full) * centered(full) * inv_count, axis=raxes))
    return api.compute(x.shape, lambda *i: centered(i)
                       * api.rsqrt(var(*kept(i)) + epsilon) * gamma(*normed(i))
                       + beta(*normed(i)), name=name, tag="injective")
