"""graph.nn: the neural-network ops of the builder (2-d and 3-d convolutions and pools, a
max pool's indices, norms, softmax, dense).

Each function checks and normalizes its attributes (ints to tuples, padding to
(top, left, bottom, right), or begins then ends in 3-d) and adds one node through
graph.builder.apply. Imports graph's
builder and errors only.
"""
from __future__ import annotations

from .builder import apply
from .errors import GraphError


def _ints(value, n: int, who: str, param: str, minimum: int = 0) -> tuple:
    vals = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(vals, (tuple, list)) or len(vals) != n
            or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum
                   for v in vals)):
        raise GraphError(f"graph.nn.{who}: {param} must be an int or {n} ints >= {minimum}, "
                         f"got {value!r}")
    return tuple(int(v) for v in vals)


def _padding(padding, who: str) -> tuple:
    """int, (pad_h, pad_w) or (top, left, bottom, right) -> (top, left, bottom, right)."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return _ints(padding, 4, who, "padding")
    ph, pw = _ints(padding, 2, who, "padding (an int, 2 ints or 4 ints)")
    return (ph, pw, ph, pw)


def conv2d(data, weight, bias=None, strides=1, padding=0, dilation=1, groups: int = 1,
           name: str | None = None):
    """2-d convolution over NCHW data with an (OC, C // groups, KH, KW) weight."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"graph.nn.conv2d: groups must be a positive int, got {groups!r}")
    attrs = {"strides": _ints(strides, 2, "conv2d", "strides", 1),
             "padding": _padding(padding, "conv2d"),
             "dilation": _ints(dilation, 2, "conv2d", "dilation", 1), "groups": groups}
    ins = [data, weight] + ([bias] if bias is not None else [])
    return apply("conv2d", ins, attrs, name)


def conv2d_transpose(data, weight, bias=None, strides=1, padding=0, dilation=1,
                     output_padding=0, groups: int = 1, name: str | None = None):
    """Transposed 2-d convolution over NCHW data with a (C, OC // groups, KH, KW) weight;
    padding removes rows and columns from the full output."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"graph.nn.conv2d_transpose: groups must be a positive int, got "
                         f"{groups!r}")
    attrs = {"strides": _ints(strides, 2, "conv2d_transpose", "strides", 1),
             "padding": _padding(padding, "conv2d_transpose"),
             "dilation": _ints(dilation, 2, "conv2d_transpose", "dilation", 1),
             "output_padding": _ints(output_padding, 2, "conv2d_transpose",
                                     "output_padding"),
             "groups": groups}
    ins = [data, weight] + ([bias] if bias is not None else [])
    return apply("conv2d_transpose", ins, attrs, name)


def _pool_attrs(who: str, kernel, strides, padding, dilation) -> dict:
    """A pool's attributes; 'dilation' only where it is not 1, so undilated pools keep the
    attributes (node text, cache keys) they always had."""
    attrs = {"kernel": _ints(kernel, 2, who, "kernel", 1),
             "strides": _ints(strides, 2, who, "strides", 1),
             "padding": _padding(padding, who)}
    dil = _ints(dilation, 2, who, "dilation", 1)
    if dil != (1, 1):
        attrs["dilation"] = dil
    return attrs


def max_pool2d(data, kernel, strides=1, padding=0, dilation=1, name: str | None = None):
    """Max pooling over NCHW; window tap (i, j) of output (y, x) reads padded input
    (y * strides[0] + i * dilation[0], x * strides[1] + j * dilation[1])."""
    return apply("max_pool2d", [data], _pool_attrs("max_pool2d", kernel, strides, padding,
                                                   dilation), name)


def avg_pool2d(data, kernel, strides=1, padding=0, count_include_pad: bool = False,
               dilation=1, name: str | None = None):
    """Average pooling over NCHW, windows as max_pool2d's; the divisor is the window's taps
    inside the input, or all of them with count_include_pad."""
    attrs = _pool_attrs("avg_pool2d", kernel, strides, padding, dilation)
    attrs["count_include_pad"] = bool(count_include_pad)
    return apply("avg_pool2d", [data], attrs, name)


def global_avg_pool2d(data, name: str | None = None):
    return apply("global_avg_pool2d", [data], {}, name)


def global_max_pool2d(data, name: str | None = None):
    return apply("global_max_pool2d", [data], {}, name)


def _padding_nd(padding, r: int, who: str) -> tuple:
    """int, r ints (each both sides) or 2r ints (begins, then ends: ONNX's order) -> the
    2r ints."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * r:
        return _ints(padding, 2 * r, who, "padding")
    return _ints(padding, r, who, f"padding (an int, {r} ints or {2 * r} ints)") * 2


def _window_nd(who: str, r: int, strides, padding, dilation) -> dict:
    return {"strides": _ints(strides, r, who, "strides", 1),
            "padding": _padding_nd(padding, r, who),
            "dilation": _ints(dilation, r, who, "dilation", 1)}


def _groups(groups, who: str) -> int:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise GraphError(f"graph.nn.{who}: groups must be a positive int, got {groups!r}")
    return groups


def conv3d(data, weight, bias=None, strides=1, padding=0, dilation=1, groups: int = 1,
           name: str | None = None):
    """3-d convolution over NCDHW data with an (OC, C // groups, KD, KH, KW) weight;
    padding is an int, 3 ints or (front, top, left, back, bottom, right)."""
    attrs = {**_window_nd("conv3d", 3, strides, padding, dilation),
             "groups": _groups(groups, "conv3d")}
    ins = [data, weight] + ([bias] if bias is not None else [])
    return apply("conv3d", ins, attrs, name)


def conv3d_transpose(data, weight, bias=None, strides=1, padding=0, dilation=1,
                     output_padding=0, groups: int = 1, name: str | None = None):
    """Transposed 3-d convolution over NCDHW data with a (C, OC // groups, KD, KH, KW)
    weight; padding (as conv3d's) removes planes from the full output."""
    who = "conv3d_transpose"
    attrs = {**_window_nd(who, 3, strides, padding, dilation),
             "output_padding": _ints(output_padding, 3, who, "output_padding"),
             "groups": _groups(groups, who)}
    ins = [data, weight] + ([bias] if bias is not None else [])
    return apply(who, ins, attrs, name)


def max_pool3d(data, kernel, strides=1, padding=0, dilation=1, name: str | None = None):
    """Max pooling over NCDHW; window tap (i, j, k) of output (z, y, x) reads padded input
    (z * strides[0] + i * dilation[0], ...); padding as conv3d's."""
    attrs = {"kernel": _ints(kernel, 3, "max_pool3d", "kernel", 1),
             **_window_nd("max_pool3d", 3, strides, padding, dilation)}
    return apply("max_pool3d", [data], attrs, name)


def avg_pool3d(data, kernel, strides=1, padding=0, count_include_pad: bool = False,
               dilation=1, name: str | None = None):
    """Average pooling over NCDHW, windows as max_pool3d's; the divisor is the window's taps
    inside the input, or all of them with count_include_pad."""
    attrs = {"kernel": _ints(kernel, 3, "avg_pool3d", "kernel", 1),
             **_window_nd("avg_pool3d", 3, strides, padding, dilation),
             "count_include_pad": bool(count_include_pad)}
    return apply("avg_pool3d", [data], attrs, name)


def max_pool_indices(data, kernel, strides=1, padding=0, dilation=1, storage_order: int = 0,
                     name: str | None = None):
    """The int64 flat index in `data` (N, C, *spatial) of each max pooling window's maximum,
    windows as max_pool2d's / max_pool3d's over any spatial rank: ONNX MaxPool's Indices,
    row-major (storage_order 0) or column-major within each (n, c) plane (1)."""
    who = "max_pool_indices"
    r = len(data.shape) - 2
    if r < 1:
        raise GraphError(f"graph.nn.{who}: data must be (N, C, *spatial), got shape "
                         f"{tuple(data.shape)}")
    if storage_order not in (0, 1) or isinstance(storage_order, bool):
        raise GraphError(f"graph.nn.{who}: storage_order must be 0 or 1, got "
                         f"{storage_order!r}")
    attrs = {"kernel": _ints(kernel, r, who, "kernel", 1),
             **_window_nd(who, r, strides, padding, dilation),
             "storage_order": int(storage_order)}
    return apply(who, [data], attrs, name)


def batch_norm(data, scale, bias, mean, var, epsilon: float = 1e-5, name: str | None = None):
    """Inference batch normalization over axis 1 with running mean and variance."""
    return apply("batch_norm", [data, scale, bias, mean, var], {"epsilon": float(epsilon)},
                 name)


def lrn(data, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
        name: str | None = None):
    return apply("lrn", [data], {"size": size, "alpha": float(alpha), "beta": float(beta),
                                 "bias": float(bias)}, name)


def softmax(data, axis: int = -1, name: str | None = None):
    return apply("softmax", [data], {"axis": axis}, name)


def log_softmax(data, axis: int = -1, name: str | None = None):
    return apply("log_softmax", [data], {"axis": axis}, name)


def instance_norm(data, scale, bias, epsilon: float = 1e-5, name: str | None = None):
    """Normalize each (batch, channel) map over its spatial axes, then scale[c], bias[c]."""
    return apply("instance_norm", [data, scale, bias], {"epsilon": float(epsilon)}, name)


def layer_norm(data, scale, bias, axis=-1, epsilon: float = 1e-5, name: str | None = None):
    """Normalize over the axes from `axis` to the last (ONNX LayerNormalization)."""
    ndim = len(data.shape)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise GraphError(f"graph.nn.layer_norm: axis must be an int in [{-ndim}, {ndim - 1}],"
                         f" got {axis!r}")
    axes = tuple(range(axis % ndim, ndim))
    return apply("layer_norm", [data, scale, bias], {"axis": axes, "epsilon": float(epsilon)},
                 name)


def gemm(a, b, c=None, alpha: float = 1.0, beta: float = 1.0, trans_a: bool = False,
         trans_b: bool = False, name: str | None = None):
    """alpha * op(a) @ op(b) + beta * c (ONNX Gemm); c broadcasts to the product."""
    attrs = {"alpha": float(alpha), "beta": float(beta), "trans_a": int(bool(trans_a)),
             "trans_b": int(bool(trans_b))}
    return apply("gemm", [a, b] + ([c] if c is not None else []), attrs, name)


def dense(data, weight, bias=None, name: str | None = None):
    """data @ weight.T + bias (Relay's dense)."""
    return gemm(data, weight, bias, trans_b=True, name=name)


def matmul(a, b, name: str | None = None):
    """numpy.matmul: batch dims broadcast, 1-d operands are vectors."""
    for param, v in (("a", a), ("b", b)):
        shape = tuple(getattr(v, "shape", ()))
        if not shape:  # te would read it as a (1,) vector and give a result numpy refuses
            raise GraphError(f"graph.nn.matmul: {param} must have at least 1 dimension "
                             f"(numpy.matmul and ONNX MatMul take no 0-d operand), got "
                             f"shape {shape}")
    if len(getattr(a, "shape", ())) == 1 and len(getattr(b, "shape", ())) == 1:
        # te declares no 0-d tensor, and a (1,) result would not be numpy's shape
        raise GraphError("graph.nn.matmul: two 1-d operands give a 0-d result, which is not "
                         "supported; reshape one of them to 2-d")
    return apply("matmul", [a, b], {}, name)
