"""Built-in workloads for `python -m te tune`: operator graphs and their numpy references.

Takes an operator name and a shape list; gives (outputs, args, flops, numpy_fn) where
numpy_fn(*inputs) computes the same result with numpy (timed next to the tuned kernel).
Operator definitions come from te.compute.ops. Imports te.compute and numpy (lazily).
"""
from __future__ import annotations

from ..compute import api
from ..compute import ops
from ..errors import ArgumentError


def _np_conv(x, w, pad):
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))   # n c h w kh kw
    return np.einsum("nchwij,fcij->nfhw", win, w, optimize=True)


def _np_softmax(x):
    import numpy as np
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_layernorm(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / (var + 1e-5) ** 0.5 * g + b


SHAPES = {"matmul": ("M", "N", "K"), "batch_matmul": ("B", "M", "N", "K"),
          "conv2d": ("N", "C", "H", "W", "F", "KH"), "softmax": ("R", "C"),
          "layernorm": ("R", "C")}
DEFAULTS = {"matmul": (256, 256, 256), "batch_matmul": (8, 128, 128, 128),
            "conv2d": (1, 64, 56, 56, 64, 3), "softmax": (1024, 1024),
            "layernorm": (1024, 1024)}


def make(name: str, shape=None):
    """(outputs, args, flops, numpy_fn) for a built-in operator."""
    if name not in SHAPES:
        raise ArgumentError(f"te tune: unknown operator {name!r}; choose one of "
                            f"{', '.join(SHAPES)}")
    shape = tuple(shape or DEFAULTS[name])
    if len(shape) != len(SHAPES[name]):
        raise ArgumentError(f"te tune: {name} takes --shape {' '.join(SHAPES[name])}, got "
                            f"{len(shape)} numbers")
    if name == "matmul":
        m, n, k = shape
        A, B = api.placeholder((m, k), name="A"), api.placeholder((k, n), name="B")
        C = ops.matmul(A, B)
        return C, [A, B, C], 2.0 * m * n * k, lambda a, b: a @ b
    if name == "batch_matmul":
        bt, m, n, k = shape
        A = api.placeholder((bt, m, k), name="A")
        B = api.placeholder((bt, k, n), name="B")
        C = ops.batch_matmul(A, B)
        return C, [A, B, C], 2.0 * bt * m * n * k, lambda a, b: a @ b
    if name == "conv2d":
        n, c, h, w, f, kh = shape
        pad = kh // 2
        X = api.placeholder((n, c, h, w), name="X")
        W = api.placeholder((f, c, kh, kh), name="W")
        Y = ops.conv2d_nchw(X, W, stride=1, padding=pad)
        return Y, [X, W, Y], 2.0 * n * f * h * w * c * kh * kh, \
            lambda x, wt: _np_conv(x, wt, pad)
    if name == "softmax":
        r, c = shape
        X = api.placeholder((r, c), name="X")
        Y = ops.softmax(X)
        return Y, [X, Y], 5.0 * r * c, _np_softmax
    r, c = shape
    X = api.placeholder((r, c), name="X")
    G, Bt = api.placeholder((c,), name="gamma"), api.placeholder((c,), name="beta")
    Y = ops.layer_norm(X, G, Bt)
    return Y, [X, G, Bt, Y], 8.0 * r * c, _np_layernorm
