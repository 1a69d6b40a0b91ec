"""tvm.topi.testing: numpy references for checking operators (TVM's names and arguments).

conv2d_nchw_python, depthwise_conv2d_python_nchw, dense, batch_matmul, softmax_python,
log_softmax_python, layer_norm_python. Inputs are numpy arrays; results are computed in
float64 and returned in the input's dtype (or out_dtype). Imports numpy.
"""
from __future__ import annotations

import numpy as np


def _pair(v) -> tuple:
    return (int(v), int(v)) if np.isscalar(v) else tuple(int(x) for x in v)


def _pads(padding) -> tuple:
    """(top, left, bottom, right) from an int, (pad_h, pad_w) or a 4-tuple."""
    if np.isscalar(padding):
        p = int(padding)
        return p, p, p, p
    padding = tuple(int(x) for x in padding)
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding
    raise ValueError(f"padding must be an int, (pad_h, pad_w) or (top, left, bottom, right), "
                     f"got {padding!r}")


def conv2d_nchw_python(a_np, w_np, stride, padding, groups: int = 1):
    """b[n, f, y, x] = sum over c, ky, kx of a_pad[n, g*C + c, y*sh + ky, x*sw + kx] *
    w[f, c, ky, kx], with f in group g; a (N, C, H, W), w (F, C // groups, KH, KW)."""
    sh, sw = _pair(stride)
    top, left, bottom, right = _pads(padding)
    a = np.pad(a_np.astype("float64"), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, w = a.shape
    f, cg, kh, kw = w_np.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    win = np.lib.stride_tricks.sliding_window_view(a, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw][:, :, :oh, :ow]           # n, c, oh, ow, kh, kw
    out = np.empty((n, f, oh, ow))
    fg = f // groups
    for g in range(groups):
        wg = w_np[g * fg:(g + 1) * fg].astype("float64")
        out[:, g * fg:(g + 1) * fg] = np.einsum("nchwij,fcij->nfhw",
                                                win[:, g * cg:(g + 1) * cg], wg)
    return out.astype(a_np.dtype)


def depthwise_conv2d_python_nchw(input_np, filter_np, stride, padding):
    """Depthwise conv: filter (C, multiplier, KH, KW); padding "SAME", "VALID" or as
    conv2d_nchw_python takes it."""
    c, m, kh, kw = filter_np.shape
    if isinstance(padding, str):
        if padding == "VALID":
            padding = 0
        elif padding == "SAME":
            sh, sw = _pair(stride)
            h, w = input_np.shape[2:]
            ph = max((-(-h // sh) - 1) * sh + kh - h, 0)
            pw = max((-(-w // sw) - 1) * sw + kw - w, 0)
            padding = (ph // 2, pw // 2, ph - ph // 2, pw - pw // 2)
        else:
            raise ValueError(f"padding must be 'SAME', 'VALID' or numbers, got {padding!r}")
    weight = filter_np.reshape(c * m, 1, kh, kw)
    return conv2d_nchw_python(input_np, weight, stride, padding, groups=c)


def dense(x, y, bias, use_bias: bool = False, use_relu: bool = False, out_dtype=None):
    """x (M, K) times y (N, K) transposed, plus bias (N,) when use_bias, relu when use_relu."""
    dtype = out_dtype or x.dtype
    out = x.astype("float64") @ y.astype("float64").T
    if use_bias:
        out = out + bias
    if use_relu:
        out = np.maximum(out, 0)
    return out.astype(dtype)


def batch_matmul(x, y, out_dtype=None, trans_x: bool = False, trans_y: bool = True):
    """Batched x @ y over the leading axis (y transposed by default, as TVM's)."""
    a = x.astype("float64")
    b = y.astype("float64")
    a = np.swapaxes(a, -1, -2) if trans_x else a
    b = np.swapaxes(b, -1, -2) if trans_y else b
    return (a @ b).astype(out_dtype or x.dtype)


def softmax_python(a_np, axis: int = 1):
    e = np.exp(a_np.astype("float64") - np.max(a_np, axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(a_np.dtype)


def log_softmax_python(a_np, axis: int = 1):
    a = a_np.astype("float64")
    shifted = a - np.max(a, axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(a_np.dtype)


def layer_norm_python(data, gamma, beta, axis, epsilon: float = 1e-5):
    """(data - mean) / sqrt(var + epsilon) * gamma + beta over `axis` (an int or ints)."""
    d = data.astype("float64")
    mean = d.mean(axis=axis, keepdims=True)
    var = d.var(axis=axis, keepdims=True)
    return ((d - mean) / np.sqrt(var + epsilon) * gamma + beta).astype(data.dtype)
