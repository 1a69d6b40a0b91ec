"""The ONNX converter table: ONNX op type -> (the attributes it understands, a function
building the op from graph builder calls), for opsets 6 to 28. The elementwise and nn
converters are here, the layout, reduction and constant ones in onnx_layout, more in
onnx_math, onnx_composite, onnx_index, onnx_einsum, onnx_sample, onnx_quant and onnx_rnn.

A converter takes (inputs as graph Values or None, attributes as Python values, opset,
output names) and returns the output Values; it may return fewer than the node has (a
Dropout's mask): the importer refuses the model only if one of those is used. Where
opsets differ (an attribute that became an input, a changed default) the converter reads
whichever the model has. A value this layer cannot take (a shape input that is not a
constant, a mode it does not implement) raises Refused, collected by the importer.
Imports numpy, graph's builder modules and those sibling converter modules.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import builder, nn, transform
from ..builder import apply
from .onnx_base import DTYPES, Converter, Refused, const, only, row, scalar
from .onnx_composite import COMPOSITE_CONVERTERS
from .onnx_einsum import EINSUM_CONVERTERS
from .onnx_index import INDEX_CONVERTERS, MAX_SCATTER_WORK
from .onnx_layout import LAYOUT_CONVERTERS
from .onnx_math import MATH_CONVERTERS, legacy_broadcast
from .onnx_quant import QUANT_CONVERTERS, integer_conv_converters
from .onnx_rnn import RNN_CONVERTERS
from .onnx_sample import SAMPLE_CONVERTERS


# ---- elementwise ---------------------------------------------------------------------

def _unary(op: str, onnx_attrs=()):
    """An ONNX unary op whose attributes map by lower-casing onto the table op's."""
    def fn(ins, attrs, opset, outs):
        kw = {k.lower(): float(attrs[k]) for k in onnx_attrs if k in attrs}
        return [apply(op, [ins[0]], kw, outs[0])]
    return Converter(fn, frozenset(onnx_attrs))


def _variadic(op: str, mean: bool = False):
    """Sum/Max/Min/Mean of any number of inputs (Add/Mul/... are the 2-input case): a
    chain of binary nodes, the last one named as the ONNX output. Before opset 7 the
    2-input ops broadcast only with broadcast=1, B aligned at `axis` of A (legacy)."""
    def fn(ins, attrs, opset, outs):
        if opset < 7 and len(ins) == 2:
            ins = [ins[0], legacy_broadcast(ins, attrs, opset, outs[0])]
        acc = ins[0]
        last = len(ins) - 1 if not mean else len(ins)
        for k, v in enumerate(ins[1:], start=1):
            acc = apply(op, [acc, v], {}, outs[0] if k == last else f"{outs[0]}/{k}")
        if mean:
            acc = apply("multiply", [acc, 1.0 / len(ins)], {}, outs[0])
        elif len(ins) == 1:
            acc = apply("identity", [acc], {}, outs[0])
        return [acc]
    return Converter(fn, frozenset(("broadcast", "axis")))


def _gelu(ins, attrs, opset, outs):
    approx = only(attrs, "approximate", ("none", "tanh"), "none")
    return [apply("gelu", [ins[0]], {"approximate": approx}, outs[0])]


def _clip(ins, attrs, opset, outs):
    if opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        lo = None if len(ins) < 2 or ins[1] is None else scalar(ins[1], "min")
        hi = None if len(ins) < 3 or ins[2] is None else scalar(ins[2], "max")
    return [transform.clip(ins[0], lo, hi, name=outs[0])]


def _cast(ins, attrs, opset, outs):
    if attrs["to"] not in DTYPES:
        raise Refused("to", f"element type {attrs['to']} not supported")
    return [transform.cast(ins[0], DTYPES[attrs["to"]], name=outs[0])]


def _dropout(ins, attrs, opset, outs):
    # from opset 12 training_mode is an input; training drops at random (refused) unless
    # the ratio is 0, which drops nothing
    if len(ins) > 2 and ins[2] is not None and bool(const(ins[2], "training_mode")) and (
            ins[1] is None or scalar(ins[1], "ratio") != 0):
        raise Refused("training_mode", "training mode (random dropout) is not supported "
                                       "unless ratio is 0")
    if opset < 7 and not attrs.get("is_test", 0):
        raise Refused("is_test", "training mode (is_test=0) is not supported")
    x = ins[0]
    y = apply("identity", [x], {}, outs[0])
    if len(outs) < 2 or not outs[1] or opset < 10:
        return [y]  # (before opset 10 the mask is unspecified outside training)
    if not all(isinstance(d, int) for d in x.shape):
        return [y]  # no mask: the importer refuses the model if anything reads it
    # outside training nothing is dropped: a mask of all True, one scalar broadcast
    keep = builder.constant(np.array(True), name=f"{outs[1]}/true")
    return [y, transform.expand(keep, x.shape, name=outs[1])]


# ---- nn --------------------------------------------------------------------------------

def _spatial(x, attrs, who: str, kernel) -> tuple:
    """(strides, dilations, pads as begins then ends: (top, left, bottom, right) in 2-d) of
    a 2-d or 3-d window op, with auto_pad resolved from the (constant) input size."""
    r = len(x.shape) - 2
    if r not in (2, 3) or len(kernel) != r:
        raise Refused("kernel_shape", f"only 1-d, 2-d and 3-d {who} (3-d to 5-d input) are "
                                      f"supported, got a {len(x.shape)}-d input and "
                                      f"kernel_shape {list(kernel)}")
    strides = tuple(attrs.get("strides", (1,) * r))
    dil = tuple(attrs.get("dilations", (1,) * r))
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        p = tuple(attrs.get("pads", (0,) * 2 * r)) if auto == "NOTSET" else (0,) * 2 * r
        return strides, dil, p[:2 * r]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Refused("auto_pad", f"value {auto!r} not supported")
    pads = []
    for size, k, s, d in zip(x.shape[2:], kernel, strides, dil):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return strides, dil, tuple(b for b, _ in pads) + tuple(e for _, e in pads)


def _one_d(convert):
    """A 1-d window op (N, C, W) as the 2-d one over (N, C, 1, W): a height of one, with
    every window attribute given a height entry (a kernel, stride, dilation and output size
    of 1, no padding), then the results (a MaxPool's indices too, the same numbers for a
    height of one) reshaped back."""
    def fn(ins, attrs, opset, outs):
        x = ins[0]
        if len(x.shape) != 3:
            return convert(ins, attrs, opset, outs)
        lead = {"kernel_shape": 1, "strides": 1, "dilations": 1, "output_padding": 0,
                "output_shape": 1}
        attrs2 = {k: ([lead[k]] + list(v) if k in lead else v) for k, v in attrs.items()}
        if "pads" in attrs:
            attrs2["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        ins2 = [transform.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]),
                                  name=f"{outs[0]}/in2d")]
        if len(ins) > 1:  # a conv weight (OC, C // groups, K) or (C, OC // groups, K)
            w = ins[1]
            ins2.append(transform.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]),
                                          name=f"{outs[0]}/w2d"))
        try:
            ys = convert(ins2 + list(ins[2:]), attrs2, opset,
                         [f"{o}/2d" if o else "" for o in outs])
        except Refused as r:  # its lists carry the height entry the user did not write
            raise Refused(r.attribute, f"{r.reason} (the 1-d op seen as 2-d with a height "
                                       f"of 1)", r.needs) from None
        return [transform.reshape(y, (y.shape[0], y.shape[1], y.shape[3]), name=o)
                if y is not None else None for y, o in zip(ys, outs)]
    return fn


def _conv(ins, attrs, opset, outs):
    w = ins[1]
    kernel = tuple(attrs.get("kernel_shape", w.shape[2:]))
    strides, dil, pads = _spatial(ins[0], attrs, "Conv", kernel)
    bias = ins[2] if len(ins) > 2 else None
    conv = nn.conv2d if len(kernel) == 2 else nn.conv3d
    return [conv(ins[0], w, bias, strides, pads, dil, int(attrs.get("group", 1)),
                 name=outs[0])]


def _conv_transpose(ins, attrs, opset, outs):
    """ConvTranspose, 2-d and 3-d (1-d through _one_d): pads as given, or derived from the
    output size that output_shape or auto_pad SAME_* asks for (_transpose_pads)."""
    x, w = ins[0], ins[1]
    kernel = tuple(attrs.get("kernel_shape", w.shape[2:]))
    if len(x.shape) in (4, 5) and kernel != tuple(w.shape[2:]):
        raise Refused("kernel_shape", f"kernel_shape {list(kernel)} must match the weight's "
                                      f"spatial shape {list(w.shape[2:])}")
    auto = only(attrs, "auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    given = "output_shape" not in attrs and auto in ("NOTSET", "VALID")
    strides, dil, pads = _spatial(x, attrs if given else {**attrs, "auto_pad": "VALID"},
                                  "ConvTranspose", kernel)
    out_pad = tuple(attrs.get("output_padding", (0,) * len(kernel)))
    if not given:
        pads, out_pad = _transpose_pads(x, attrs, kernel, strides, dil, out_pad)
    bias = ins[2] if len(ins) > 2 else None
    conv = nn.conv2d_transpose if len(kernel) == 2 else nn.conv3d_transpose
    return [conv(x, w, bias, strides, pads, dil, out_pad, int(attrs.get("group", 1)),
                 name=outs[0])]


def _transpose_pads(x, attrs, kernel, strides, dil, out_pad) -> tuple:
    """(pads as begins then ends, output_padding) that give a ConvTranspose the output size
    of its output_shape, else auto_pad SAME_*'s input size times stride. ONNX:
    total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out, the odd
    element cropped at the end for SAME_UPPER, at the start otherwise; given pads are
    ignored. A larger output (total < 0) has zeros at the end, as in onnxruntime, which
    allows up to stride - 1 of them; ONNX's reference fails there, and with auto_pad SAME
    it puts them elsewhere and onnxruntime gives a smaller output: refused."""
    sizes = x.shape[2:]
    if not all(isinstance(d, int) for d in sizes):
        raise Refused("output_shape", "output_shape and auto_pad SAME need a constant input "
                                      "size")
    want = list(attrs.get("output_shape") or [d * s for d, s in zip(sizes, strides)])
    if len(want) != len(sizes):
        raise Refused("output_shape", f"output_shape must hold one size per spatial axis "
                                      f"({len(sizes)}), got {want}")
    auto = attrs.get("auto_pad", "NOTSET")
    begin, end, extra = [], [], []
    for size, out, k, s, d, op in zip(sizes, want, kernel, strides, dil, out_pad):
        full = s * (size - 1) + (k - 1) * d + 1
        total = full + op - out
        if total < 0 and auto.startswith("SAME"):
            raise Refused("auto_pad", f"auto_pad {auto} with an output larger than the full "
                                      f"one ({out} > {full + op}) is not supported: "
                                      f"onnxruntime and ONNX's reference disagree on it")
        if out < 1 or (total < 0 and out - full >= s):
            raise Refused("output_shape", f"output_shape {list(want)}: each size must be "
                                          f"in [1, {full + max(s - 1, op)}] for a size-{size} "
                                          f"input with stride {s}, got {out}")
        small, big = max(0, total) // 2, max(0, total) - max(0, total) // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
        extra.append(out - full if total < 0 else op)
    return tuple(begin) + tuple(end), tuple(extra)


def _extents(kernel, dil) -> tuple:
    """Each axis's window span: (k - 1) * d + 1 for k taps dilated by d."""
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dil))


def _ceil_pads(x, kernel, strides, pads, dil) -> tuple:
    """Extra end padding that makes a floor-mode window count equal ceil mode's, for
    windows that start inside the (begin-padded) input; windows span the dilated extent."""
    r = len(kernel)
    extra = []
    for size, k, s, b, e in zip(x.shape[2:], _extents(kernel, dil), strides, pads[:r],
                                pads[r:]):
        span = size + b + e - k
        out = -(-span // s) + 1
        if (out - 1) * s >= size + b:  # the last window would start in the end padding
            out -= 1
        extra.append(max(0, (out - 1) * s + k - (size + b + e)))
    return tuple(pads[:r]) + tuple(e + x for e, x in zip(pads[r:], extra))


def _include_pad_scale(x, kernel, strides, pads, dil, out_sizes, name: str):
    """count_include_pad with ceil_mode: the onnx reference and onnxruntime count a window's
    taps up to the end of the given padding, not those in ceil mode's extra padding past it.
    The average over all k taps times k / counted, per output: a constant (1, 1, *out)."""
    r = len(kernel)
    counts = []
    for size, k, s, b, e, d, n in zip(x.shape[2:], kernel, strides, pads[:r], pads[r:], dil,
                                      out_sizes):
        if not all(isinstance(v, int) for v in (size, n)):
            raise Refused("ceil_mode", "ceil_mode with count_include_pad needs a constant "
                                       "input size")
        # taps o * s + t * d (padded index) counted while below size + b + e
        counts.append(np.minimum(k, -(-(size + b + e - np.arange(n) * s) // d)))
    scale = math.prod(kernel) / functools.reduce(np.multiply.outer, counts)
    return builder.constant(scale.reshape((1, 1) + scale.shape).astype(x.dtype), name=name)


def _pool(kind: str):
    def fn(ins, attrs, opset, outs):
        x, kernel = ins[0], tuple(attrs["kernel_shape"])
        strides, dil, pads = _spatial(x, attrs, kind, kernel)
        include = bool(attrs.get("count_include_pad", 0))
        ceil_pads = _ceil_pads(x, kernel, strides, pads, dil) \
            if attrs.get("ceil_mode", 0) else pads
        two_d = len(kernel) == 2
        if kind == "MaxPool":
            pool = nn.max_pool2d if two_d else nn.max_pool3d
            y = pool(x, kernel, strides, ceil_pads, dil, name=outs[0])
            if len(outs) < 2 or not outs[1]:
                return [y]
            return [y, nn.max_pool_indices(x, kernel, strides, ceil_pads, dil,
                                           int(attrs.get("storage_order", 0)), name=outs[1])]
        pool = nn.avg_pool2d if two_d else nn.avg_pool3d
        if not include or ceil_pads == pads:
            return [pool(x, kernel, strides, ceil_pads, include, dil, name=outs[0])]
        # the last windows run past the given padding into ceil mode's extra padding
        mean = pool(x, kernel, strides, ceil_pads, True, dil, name=f"{outs[0]}/all")
        scale = _include_pad_scale(x, kernel, strides, pads, dil, mean.shape[2:],
                                   f"{outs[0]}/scale")
        return [apply("multiply", [mean, scale], {}, outs[0])]
    return fn


def _lp_pool(ins, attrs, opset, outs):
    """(sum of |x|^p over each window)^(1/p): the window sums as an average pool counting
    the zero padding, times the window's size (padding adds nothing to a sum)."""
    x, kernel = ins[0], tuple(attrs["kernel_shape"])
    p = float(attrs.get("p", 2))
    if p <= 0:
        raise Refused("p", f"p must be positive, got {p}")
    strides, dil, pads = _spatial(x, attrs, "LpPool", kernel)
    if attrs.get("ceil_mode", 0):
        pads = _ceil_pads(x, kernel, strides, pads, dil)
    name = outs[0]
    a = apply("abs", [x], {}, f"{name}/abs")
    powered = apply("multiply", [a, a], {}, f"{name}/pow") if p == 2 else \
        apply("power", [a, p], {}, f"{name}/pow")
    pool = nn.avg_pool2d if len(kernel) == 2 else nn.avg_pool3d
    mean = pool(powered, kernel, strides, pads, True, dil, name=f"{name}/mean")
    sums = apply("multiply", [mean, float(math.prod(kernel))], {}, f"{name}/sum")
    if p == 2:
        return [apply("sqrt", [sums], {}, name)]
    return [apply("power", [sums, 1.0 / p], {}, name)]


def _max_unpool(ins, attrs, opset, outs):
    """MaxUnpool: zeros of the pooled input's size ((in - 1) * stride - pads + kernel per
    axis) with each X element written at its flat index in I, the last of equal indices
    winning (onnxruntime's and the reference's order): a ScatterElements over the
    flattened tensors (MAX_SCATTER_WORK bounds its gather-side scan). An output_shape
    other than that size is refused: onnxruntime then indexes into output_shape's tensor,
    ONNX's reference into the smaller one placed at its start."""
    x, indices = ins[0], ins[1]
    kernel = tuple(attrs["kernel_shape"])
    r = len(kernel)
    if len(x.shape) != r + 2 or tuple(indices.shape) != tuple(x.shape):
        raise Refused("kernel_shape", f"X must be (N, C) and {r} spatial axes and I of its "
                                      f"shape, got {list(x.shape)} and {list(indices.shape)}")
    shape = tuple(x.shape)
    if not all(isinstance(d, int) for d in shape):
        raise Refused("", f"X needs a constant shape, got {list(shape)}")
    strides = tuple(attrs.get("strides", (1,) * r))
    pads = tuple(attrs.get("pads", (0,) * 2 * r))
    size = shape[:2] + tuple((n - 1) * s - b - e + k for n, s, b, e, k in zip(
        shape[2:], strides, pads[:r], pads[r:], kernel))
    if min(size) < 1:
        raise Refused("pads", f"the pads leave no output ({list(size)})")
    if len(ins) > 2 and ins[2] is not None:
        want = tuple(int(d) for d in const(ins[2], "output_shape"))
        if want != size:
            raise Refused("output_shape", f"output_shape {list(want)} other than the "
                                          f"unpooled size {list(size)} is not supported: "
                                          f"onnxruntime and ONNX's reference disagree on it")
    total, count = math.prod(size), math.prod(shape)
    if total * count > MAX_SCATTER_WORK:
        raise Refused("", f"MaxUnpool would compare {total} output elements with {count} "
                          f"candidate updates each ({total * count} pairs, at most "
                          f"{MAX_SCATTER_WORK})")
    name = outs[0]
    if indices.dtype != "int64":
        indices = transform.cast(indices, "int64", name=f"{name}/i64")
    zero = builder.constant(np.zeros((), x.dtype), name=f"{name}/zero")
    flat = [transform.expand(zero, (total,), name=f"{name}/zeros"),
            transform.reshape(indices, (count,), name=f"{name}/i"),
            transform.reshape(x, (count,), name=f"{name}/x")]
    y = apply("scatter_elements", flat, {"axis": 0, "reduction": "none"}, f"{name}/flat")
    return [transform.reshape(y, size, name=name)]


def _batch_norm(ins, attrs, opset, outs):
    if attrs.get("training_mode", 0):
        return _batch_norm_training(ins, attrs, opset, outs)
    if opset < 7 and not attrs.get("is_test", 0):
        raise Refused("is_test", "training mode (is_test=0) is not supported")
    if opset < 9 and not attrs.get("spatial", 1):
        raise Refused("spatial", "spatial=0 is not supported")
    return [nn.batch_norm(*ins[:5], epsilon=attrs.get("epsilon", 1e-5), name=outs[0])]


def _batch_norm_training(ins, attrs, opset, outs):
    """training_mode=1 (opsets 14 and later): Y normalized by the batch's own mean and
    population variance over every axis but the channels, and the running statistics
    updated as input * momentum + batch * (1 - momentum)."""
    x, scale, bias, mean, var = ins[:5]
    if opset < 14:
        raise Refused("training_mode", "training mode is supported from opset 14 (earlier "
                                       "opsets give other outputs)")
    if len(x.shape) < 2:  # (float16 is refused with the accumulating ops)
        raise Refused("training_mode", f"training mode needs an (N, C, ...) input, got "
                                       f"shape {list(x.shape)}")
    name, n = outs[0], len(x.shape)
    axes = [0] + list(range(2, n))
    reduce_mean = builder.REDUCE_FUNCTIONS["reduce_mean"]
    batch_mean = reduce_mean(x, axes, True, name=f"{name}/batch_mean")
    dev = apply("subtract", [x, batch_mean], {}, f"{name}/dev")
    batch_var = reduce_mean(apply("multiply", [dev, dev], {}, f"{name}/sq"), axes, True,
                            name=f"{name}/batch_var")
    eps = float(attrs.get("epsilon", 1e-5))
    std = apply("sqrt", [apply("add", [batch_var, eps], {}, f"{name}/eps")], {},
                f"{name}/std")
    per_channel = (1, -1) + (1,) * (n - 2)
    y = apply("add", [apply("multiply", [
        apply("divide", [dev, std], {}, f"{name}/normed"),
        transform.reshape(scale, per_channel, name=f"{name}/scale")], {}, f"{name}/scaled"),
        transform.reshape(bias, per_channel, name=f"{name}/bias")], {}, name)
    momentum = float(attrs.get("momentum", 0.9))
    results = [y]
    for given, batch, out in ((mean, batch_mean, outs[1:2]), (var, batch_var, outs[2:3])):
        if not out or not out[0]:
            results.append(None)  # an output the node leaves out
            continue
        flat = transform.reshape(batch, (-1,), name=f"{out[0]}/batch")
        results.append(apply("add", [apply("multiply", [given, momentum], {},
                                           f"{out[0]}/kept"),
                                     apply("multiply", [flat, 1.0 - momentum], {},
                                           f"{out[0]}/new")], {}, out[0]))
    return results


def _lrn(ins, attrs, opset, outs):
    return [nn.lrn(ins[0], int(attrs["size"]), attrs.get("alpha", 1e-4),
                   attrs.get("beta", 0.75), attrs.get("bias", 1.0), name=outs[0])]


def _softmax(fn, op: str):
    def convert(ins, attrs, opset, outs):
        x = ins[0]
        ndim = len(x.shape)
        axis = attrs.get("axis", 1 if opset < 13 else -1) % ndim
        if opset >= 13 or axis == ndim - 1:
            return [fn(x, axis, name=outs[0])]
        # before opset 13: along the 2-d view (prod(shape[:axis]), prod(shape[axis:]))
        flat = transform.flatten(x, axis, name=f"{outs[0]}/flat")
        sm = fn(flat, -1, name=f"{outs[0]}/{op}")
        return [transform.reshape(sm, x.shape, name=outs[0])]
    return Converter(convert, frozenset(("axis",)))


def _prelu(ins, attrs, opset, outs):
    x, slope = ins[0], ins[1]
    if opset < 7 and len(slope.shape) == 1 and slope.shape[0] > 1 and len(x.shape) > 2:
        # opset 6: a 1-d slope holds one value per channel (axis 1)
        slope = transform.reshape(slope, tuple(slope.shape) + (1,) * (len(x.shape) - 2),
                                  name=f"{outs[0]}/slope")
    return [apply("prelu", [x, slope], {}, outs[0])]


def _gemm(ins, attrs, opset, outs):
    c = ins[2] if len(ins) > 2 and attrs.get("beta", 1.0) != 0 else None
    return [nn.gemm(ins[0], ins[1], c, attrs.get("alpha", 1.0), attrs.get("beta", 1.0),
                    attrs.get("transA", 0), attrs.get("transB", 0), name=outs[0])]


def _layer_norm(ins, attrs, opset, outs):
    x, scale = ins[0], ins[1]
    only(attrs, "stash_type", (1,), 1)
    n = len(x.shape)
    axis = attrs.get("axis", -1) % n
    eps = attrs.get("epsilon", 1e-5)
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else builder.constant(
        np.zeros(scale.shape, scale.dtype), name=f"{outs[0]}/bias")
    if axis == 0:  # every axis normalized: a leading 1 keeps the mean stage non-0-d
        x1 = transform.reshape(x, (1,) + tuple(x.shape), name=f"{outs[0]}/lead")
        y1 = nn.layer_norm(x1, scale, bias, 1, eps, name=f"{outs[0]}/y1")
        y = transform.reshape(y1, x.shape, name=outs[0])
    else:
        y = nn.layer_norm(x, scale, bias, axis, eps, name=outs[0])
    if len(outs) == 1:
        return [y]
    # the optional Mean and InvStdDev outputs (shape x.shape[:axis] + ones), from the
    # builder's reductions
    axes = list(range(axis, n))
    mean = builder.REDUCE_FUNCTIONS["reduce_mean"](x, axes, True, name=outs[1] or None)
    dev = apply("subtract", [x, mean], {}, f"{outs[0]}/dev")
    var = builder.REDUCE_FUNCTIONS["reduce_mean"](apply("multiply", [dev, dev], {},
                                                        f"{outs[0]}/sq"), axes, True,
                                                  name=f"{outs[0]}/var")
    std = apply("sqrt", [apply("add", [var, float(eps)], {}, f"{outs[0]}/var_eps")], {},
                f"{outs[0]}/std")
    return [y, mean, apply("reciprocal", [std], {}, outs[2] if len(outs) > 2 and outs[2]
                           else None)]


def _matmul(ins, attrs, opset, outs):
    a, b = ins[0], ins[1]
    if len(a.shape) == 1 and len(b.shape) == 1:  # a 0-d dot product: (1, K) @ (K,)
        a2 = transform.reshape(a, (1, a.shape[0]), name=f"{outs[0]}/a2d")
        return [transform.reshape(nn.matmul(a2, b, name=f"{outs[0]}/1"), (), name=outs[0])]
    return [nn.matmul(a, b, name=outs[0])]


# Ops that accumulate (sums of products, of exps): in float16 their rounding differs from
# ONNX's reference by more than the suite's tolerance (a few ulps over a row), so the
# importer refuses float16 inputs to them rather than give a different answer.
FLOAT16_ACCUMULATING = frozenset("""MatMul Gemm Conv ConvTranspose Softmax LogSoftmax
ReduceSum ReduceMean ReduceProd ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum
ReduceLogSumExp LayerNormalization InstanceNormalization BatchNormalization AveragePool
GlobalAveragePool LRN Mean RMSNormalization LpNormalization CumSum CumProd LpPool
MeanVarianceNormalization GroupNormalization""".split())

_WINDOW = ("auto_pad", "kernel_shape", "pads", "strides", "dilations")
CONVERTERS = {
    **LAYOUT_CONVERTERS,
    **{onnx_op: _unary(op) for onnx_op, op in (
        ("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Exp", "exp"),
        ("Log", "log"), ("Sqrt", "sqrt"), ("Erf", "erf"), ("Floor", "floor"),
        ("Ceil", "ceil"), ("Abs", "abs"), ("Neg", "negative"), ("Reciprocal", "reciprocal"),
        ("Sign", "sign"), ("Softplus", "softplus"), ("Softsign", "softsign"),
        ("HardSwish", "hard_swish"), ("Identity", "identity"), ("Not", "logical_not"))},
    "Elu": _unary("elu", ("alpha",)),
    "LeakyRelu": _unary("leaky_relu", ("alpha",)),
    "Selu": _unary("selu", ("alpha", "gamma")),
    "HardSigmoid": _unary("hard_sigmoid", ("alpha", "beta")),
    "Gelu": row(_gelu, "approximate"),
    "Clip": row(_clip, "min", "max"),
    "Cast": row(_cast, "to", "saturate"),
    "Dropout": row(_dropout, "ratio", "seed", "is_test"),
    **{onnx_op: _variadic(op) for onnx_op, op in (
        ("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply"),
        ("Equal", "equal"), ("Less", "less"), ("Greater", "greater"),
        ("And", "logical_and"), ("Or", "logical_or"), ("Sum", "add"), ("Max", "maximum"),
        ("Min", "minimum"))},
    "Mean": _variadic("add", mean=True),
    "PRelu": row(_prelu),
    "Conv": row(_one_d(_conv), "group", *_WINDOW),
    "ConvTranspose": row(_one_d(_conv_transpose), "group", "output_padding", "output_shape",
                         *_WINDOW),
    "MaxPool": row(_one_d(_pool("MaxPool")), "ceil_mode", "storage_order", *_WINDOW),
    "AveragePool": row(_one_d(_pool("AveragePool")), "ceil_mode", "count_include_pad",
                       *_WINDOW),
    "LpPool": row(_one_d(_lp_pool), "ceil_mode", "p", *_WINDOW),
    "MaxUnpool": row(_max_unpool, "kernel_shape", "pads", "strides"),
    "GlobalAveragePool": row(lambda ins, a, o, outs: [nn.global_avg_pool2d(ins[0], outs[0])]),
    "GlobalMaxPool": row(lambda ins, a, o, outs: [nn.global_max_pool2d(ins[0], outs[0])]),
    "BatchNormalization": row(_batch_norm, "epsilon", "momentum", "spatial", "training_mode",
                              "is_test"),
    "LRN": row(_lrn, "alpha", "beta", "bias", "size"),
    "Softmax": _softmax(nn.softmax, "softmax"),
    "LogSoftmax": _softmax(nn.log_softmax, "log_softmax"),
    "InstanceNormalization": row(lambda ins, a, o, outs: [nn.instance_norm(
        *ins[:3], epsilon=a.get("epsilon", 1e-5), name=outs[0])], "epsilon"),
    "Where": row(lambda ins, a, o, outs: [transform.where(*ins[:3], name=outs[0])]),
    "Gemm": row(_gemm, "alpha", "beta", "transA", "transB", "broadcast"),
    "MatMul": row(_matmul),
    "LayerNormalization": row(_layer_norm, "axis", "epsilon", "stash_type"),
    **MATH_CONVERTERS,
    **COMPOSITE_CONVERTERS,
    **INDEX_CONVERTERS,
    **EINSUM_CONVERTERS,
    **SAMPLE_CONVERTERS,
    **QUANT_CONVERTERS,
    **RNN_CONVERTERS,
}
# ConvInteger and QLinearConv: the Conv row's own window handling, on int32 operands
CONVERTERS.update(integer_conv_converters(CONVERTERS["Conv"]))
