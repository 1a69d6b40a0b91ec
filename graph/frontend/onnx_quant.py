"""The ONNX quantization converters: QuantizeLinear and DequantizeLinear (opsets 10 to 28),
MatMulInteger and QLinearMatMul (opsets 10 and 21), and ConvInteger and QLinearConv (opset
10) on the float Conv converter. DynamicQuantizeLinear needs no converter: ONNX defines it
as a function, whose body imports through QuantizeLinear (graph.frontend.onnx_function).

Each is built from table ops (cast, divide, round, clip, matmul, conv2d, ...), with the
arithmetic done in the types onnxruntime uses, where ONNX's reference differs:

- QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point). The division
  is in y_scale's type from opset 23 (or in the `precision` attribute's); before, in
  float32 for float32 and float16 operands (onnxruntime; ONNX's reference divides float16
  in float16) and in float64 for an int32 x (the reference; onnxruntime has no int32
  kernel). The zero point is added and the result clipped to the output type's range in
  float32 (float64) before the cast, so an out-of-range value saturates.
- DequantizeLinear: y = (x - x_zero_point) * x_scale, the difference in int32 (exact for the
  8- and 16-bit types; it wraps for int32, as onnxruntime's does), the product in float32,
  then rounded to the output type (float16 from a float16 scale).
- MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) in int32, exact.
- QLinearMatMul / QLinearConv: the int32 accumulator times the float32 multiplier
  a_scale * b_scale / y_scale, in float32 (onnxruntime's requantization; ONNX's reference
  multiplies in float64 and so rounds a few near-ties the other way), rounded half to
  even, plus y_zero_point, saturated.

Scales and zero points are per tensor (one element), per axis (1-D, along `axis`), blocked
(`block_size`, opset 21: one per block of `block_size` along `axis`), per row of a matmul's
a or per column of its b, or per output channel of a conv's weight, as each op's spec
allows; anything else is refused naming the input. Element types outside te's (int4,
float8, bfloat16) are refused by the importer's type table before a converter runs.
Imports numpy, graph's builder and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np

from .. import nn, transform
from ..builder import apply, constant
from .onnx_base import DTYPES, Converter, Refused, row

# the integer types a value is quantized to -> their (lowest, highest) values
RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
          "int16": (-32768, 32767)}
_QUANTIZED_INPUTS = ("int8", "uint8", "int16", "uint16", "int32")
_FLOATS = ("float16", "float32")


# ---- helpers ---------------------------------------------------------------------------

def _shape_text(shape) -> str:
    return "[" + ", ".join(str(getattr(d, "name", d)) for d in shape) + "]"


def _cast(v, dtype: str, name: str):
    """`v` as `dtype`: itself where it has that type already."""
    return v if v.dtype == dtype else transform.cast(v, dtype, name=name)


def _size(v) -> int | None:
    """The number of elements of `v` where its shape is constant, else None."""
    return int(np.prod(v.shape)) if all(isinstance(d, int) for d in v.shape) else None


def _check_dtype(v, what: str, allowed) -> None:
    if v.dtype not in allowed:
        raise Refused("", f"input '{what}' must be {' or '.join(allowed)}, got {v.dtype}")


def _same_shape(zp, scale, zp_name: str, scale_name: str) -> None:
    """A zero point must have its scale's shape (or both hold one value)."""
    if zp is not None and tuple(zp.shape) != tuple(scale.shape) and not (
            _size(zp) == 1 and _size(scale) == 1):
        raise Refused("", f"input '{zp_name}' must have the shape of '{scale_name}' "
                          f"{_shape_text(scale.shape)}, got {_shape_text(zp.shape)}")


def _scalar(v, name: str):
    """A one-element `v` as a 0-d value (which broadcasts against any shape)."""
    return v if not v.shape else transform.reshape(v, (), name=name)


# ---- QuantizeLinear and DequantizeLinear ---------------------------------------------

def _axis_param(v, x, attrs, what: str, name: str):
    """A scale or zero point `v` broadcastable against x: one value (per tensor) as 0-d; a
    1-D one of x.shape[axis] values (per axis) with ones after it; with block_size B, one
    of x's shape but ceil(D / B) along axis (blocked), repeated B times along axis."""
    if _size(v) == 1:
        return _scalar(v, name)
    block = int(attrs.get("block_size", 0))
    if block < 0:
        raise Refused("block_size", f"block_size must be positive (or 0: no blocks), got "
                                    f"{block}")
    rank = len(x.shape)
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis < rank:
        raise Refused("axis", f"axis {axis} is out of range for the rank-{rank} input 'x'")
    axis %= rank
    size = x.shape[axis]
    if not isinstance(size, int):
        raise Refused("", f"input '{what}' per axis or per block needs a constant size of "
                          f"x's axis {axis}, got x's shape {_shape_text(x.shape)}")
    if not block:
        if tuple(v.shape) != (size,):
            raise Refused("", f"input '{what}' must hold one value (per tensor) or be 1-D "
                              f"with x's axis-{axis} size {size} (per axis; or give "
                              f"block_size), got shape {_shape_text(v.shape)}")
        return transform.reshape(v, (size,) + (1,) * (rank - 1 - axis), name=name)
    blocks = -(-size // block)
    want = tuple(x.shape[:axis]) + (blocks,) + tuple(x.shape[axis + 1:])
    if tuple(v.shape) != want:
        raise Refused("", f"input '{what}' must have shape {_shape_text(want)} for blocks of "
                          f"{block} along axis {axis} of x {_shape_text(x.shape)}, got "
                          f"{_shape_text(v.shape)}")
    index = constant(np.arange(size, dtype=np.int64) // block, name=f"{name}/index")
    return transform.take(v, index, axis, name=name)


def _quantized_type(zp, attrs) -> str:
    """QuantizeLinear's output type: the zero point's, else output_dtype's, else uint8."""
    given = int(attrs.get("output_dtype", 0))
    if given and DTYPES.get(given) not in RANGES:
        raise Refused("output_dtype", f"output_dtype must be one of {', '.join(RANGES)}, "
                                      f"got element type {given}")
    if zp is None:
        return DTYPES[given] if given else "uint8"
    if zp.dtype not in RANGES:
        raise Refused("", f"input 'y_zero_point' must be one of {', '.join(RANGES)}, got "
                          f"{zp.dtype}")
    if given and DTYPES[given] != zp.dtype:
        raise Refused("output_dtype", f"output_dtype {DTYPES[given]} must be y_zero_point's "
                                      f"type {zp.dtype}")
    return zp.dtype


def _division_type(x, scale, attrs, opset: int) -> str:
    """The type QuantizeLinear divides in: from opset 23 `precision`'s, else y_scale's (the
    spec; onnxruntime too); before, float64 for an int32 x (ONNX's reference), else
    float32, float16 included (onnxruntime)."""
    if opset < 23:
        return "float64" if x.dtype == "int32" else "float32"
    precision = int(attrs.get("precision", 0))
    if precision:
        dtype = DTYPES.get(precision)
        if dtype not in ("float16", "float32", "float64"):
            raise Refused("precision", f"precision must be a float type (float16, float32 "
                                       f"or float64), got element type {precision}")
        return dtype
    if scale.dtype not in _FLOATS:
        raise Refused("", f"input 'y_scale' of type {scale.dtype} would divide in "
                          f"{scale.dtype}; give a float precision attribute")
    return scale.dtype


def _quantize(ins, attrs, opset, outs):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    name = outs[0]
    _check_dtype(x, "x", ("float32", "float16", "int32"))
    _check_dtype(scale, "y_scale", _FLOATS + (("int32",) if opset >= 23 else ()))
    out_dtype = _quantized_type(zp, attrs)
    _same_shape(zp, scale, "y_zero_point", "y_scale")
    div = _division_type(x, scale, attrs, opset)
    s = _axis_param(_cast(scale, div, f"{name}/scale_{div}"), x, attrs, "y_scale",
                    f"{name}/scale")
    q = apply("divide", [_cast(x, div, f"{name}/x_{div}"), s], {}, f"{name}/quotient")
    # the rounded quotient plus the zero point, exact in float32 (float64) wherever the
    # sum can land in the output's range
    wide = "float32" if div == "float16" else div
    r = _cast(apply("round", [q], {}, f"{name}/round"), wide, f"{name}/round_{wide}")
    if zp is not None:
        z = _axis_param(_cast(zp, wide, f"{name}/zp_{wide}"), x, attrs, "y_zero_point",
                        f"{name}/zp")
        r = apply("add", [r, z], {}, f"{name}/shifted")
    lo, hi = RANGES[out_dtype]
    return [transform.cast(transform.clip(r, lo, hi, name=f"{name}/saturated"), out_dtype,
                           name=name)]


def _dequantize(ins, attrs, opset, outs):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    name = outs[0]
    _check_dtype(x, "x", _QUANTIZED_INPUTS)
    _check_dtype(scale, "x_scale", _FLOATS)
    if zp is not None and zp.dtype != x.dtype:
        raise Refused("", f"input 'x_zero_point' must have x's type {x.dtype}, got "
                          f"{zp.dtype}")
    _same_shape(zp, scale, "x_zero_point", "x_scale")
    given = int(attrs.get("output_dtype", 0))
    out_dtype = DTYPES.get(given) if given else scale.dtype
    if out_dtype not in _FLOATS:
        raise Refused("output_dtype", f"output_dtype must be float32 or float16, got "
                                      f"element type {given}")
    d = _cast(x, "int32", f"{name}/x_int32")
    if zp is not None:
        z = _axis_param(_cast(zp, "int32", f"{name}/zp_int32"), x, attrs, "x_zero_point",
                        f"{name}/zp")
        d = apply("subtract", [d, z], {}, f"{name}/shifted")
    s = _axis_param(_cast(scale, "float32", f"{name}/scale_float32"), x, attrs, "x_scale",
                    f"{name}/scale")
    y = apply("multiply", [transform.cast(d, "float32", name=f"{name}/float32"), s], {},
              name if out_dtype == "float32" else f"{name}/product")
    return [_cast(y, out_dtype, name)]


# ---- MatMulInteger and QLinearMatMul ---------------------------------------------------

def _row_param(v, a, what: str, name: str):
    """A per-tensor or per-row parameter of matmul operand a (.., M, K): one value, M values
    (a 2-D a) or shape a.shape[:-1] + (1,); as a value broadcastable against a and the
    product."""
    if _size(v) == 1:
        return _scalar(v, name)
    if len(a.shape) == 2 and tuple(v.shape) == (a.shape[0],):
        return transform.reshape(v, (a.shape[0], 1), name=name)
    if len(a.shape) >= 2 and tuple(v.shape) == tuple(a.shape[:-1]) + (1,):
        return v
    rows = f"{_shape_text(a.shape[:1])} or " if len(a.shape) == 2 else ""
    raise Refused("", f"input '{what}' must hold one value (per tensor) or one per row of a "
                      f"{_shape_text(a.shape)} (shape {rows}"
                      f"{_shape_text(tuple(a.shape[:-1]) + (1,))}), got "
                      f"{_shape_text(v.shape)}")


def _column_param(v, b, what: str, name: str):
    """A per-tensor or per-column parameter of matmul operand b (.., K, N): one value, N
    values, or shape b.shape[:-2] + (1, N)."""
    if _size(v) == 1:
        return _scalar(v, name)
    if len(b.shape) >= 2 and tuple(v.shape) in ((b.shape[-1],),
                                                tuple(b.shape[:-2]) + (1, b.shape[-1])):
        return v
    raise Refused("", f"input '{what}' must hold one value (per tensor) or one per column "
                      f"of b {_shape_text(b.shape)}, got {_shape_text(v.shape)}")


def _int_operand(v, zp, param, what: str, zp_name: str, name: str):
    """An int8/uint8 matmul operand as int32 less its zero point (`param` shapes it)."""
    _check_dtype(v, what, ("int8", "uint8"))
    v32 = transform.cast(v, "int32", name=f"{name}/{what}_int32")
    if zp is None:
        return v32
    z = param(_cast(zp, "int32", f"{name}/{zp_name}_int32"), v, zp_name, f"{name}/{zp_name}")
    return apply("subtract", [v32, z], {}, f"{name}/{what}_shifted")


def _int_matmul(a, b, name: str):
    """numpy.matmul of int32 operands; two vectors give a 0-d result as ONNX's MatMul."""
    if len(a.shape) == 1 and len(b.shape) == 1:
        a2 = transform.reshape(a, (1, a.shape[0]), name=f"{name}/a2d")
        return transform.reshape(nn.matmul(a2, b, name=f"{name}/1"), (), name=name)
    return nn.matmul(a, b, name=name)


def _matmul_integer(ins, attrs, opset, outs):
    a_zp = ins[2] if len(ins) > 2 else None
    b_zp = ins[3] if len(ins) > 3 else None
    name = outs[0]
    a = _int_operand(ins[0], a_zp, _row_param, "A", "a_zero_point", name)
    b = _int_operand(ins[1], b_zp, _column_param, "B", "b_zero_point", name)
    return [_int_matmul(a, b, name)]


def _requantize(acc, multiplier, y_zp, name: str):
    """saturate(round_half_even(acc * multiplier) + y_zp) in y_zp's type, the product in
    float32 as onnxruntime's requantization computes it."""
    _check_dtype(y_zp, "y_zero_point", ("int8", "uint8"))
    product = apply("multiply", [transform.cast(acc, "float32", name=f"{name}/acc_float32"),
                                 multiplier], {}, f"{name}/product")
    r = apply("round", [product], {}, f"{name}/round")
    z = _scalar(_cast(y_zp, "float32", f"{name}/y_zp_float32"), f"{name}/y_zp")
    lo, hi = RANGES[y_zp.dtype]
    shifted = apply("add", [r, z], {}, f"{name}/shifted")
    return transform.cast(transform.clip(shifted, lo, hi, name=f"{name}/saturated"),
                          y_zp.dtype, name=name)


def _multiplier(a_scale, b_scale, y_scale, name: str):
    """a_scale * b_scale / y_scale in float32 (float16 scales widened first), in that
    order, as onnxruntime computes it."""
    for what, v in (("a_scale", a_scale), ("b_scale", b_scale), ("y_scale", y_scale)):
        _check_dtype(v, what, _FLOATS)
    if _size(y_scale) != 1:
        raise Refused("", f"input 'y_scale' must hold one value (per tensor), got shape "
                          f"{_shape_text(y_scale.shape)}")
    widened = [_cast(v, "float32", f"{name}/{what}_float32")
               for what, v in (("a_scale", a_scale), ("b_scale", b_scale),
                               ("y_scale", y_scale))]
    ab = apply("multiply", widened[:2], {}, f"{name}/ab_scale")
    return apply("divide", [ab, _scalar(widened[2], f"{name}/y_scale")], {},
                 f"{name}/multiplier")


def _qlinear_matmul(ins, attrs, opset, outs):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = ins[:8]
    name = outs[0]
    _same_shape(a_zp, a_scale, "a_zero_point", "a_scale")
    _same_shape(b_zp, b_scale, "b_zero_point", "b_scale")
    _same_shape(y_zp, y_scale, "y_zero_point", "y_scale")
    for vector, what, scale in ((b, "a_scale", a_scale), (a, "b_scale", b_scale)):
        # the product of a 1-d operand drops the axis a per-row (per-column) scale keeps
        if len(vector.shape) == 1 and _size(scale) != 1:
            raise Refused("", f"input '{what}' must hold one value (per tensor) when the "
                              f"other operand is 1-d, got shape {_shape_text(scale.shape)}")
    acc = _int_matmul(_int_operand(a, a_zp, _row_param, "a", "a_zero_point", name),
                      _int_operand(b, b_zp, _column_param, "b", "b_zero_point", name),
                      f"{name}/acc")
    multiplier = _multiplier(_row_param(a_scale, a, "a_scale", f"{name}/a_scale"),
                             _column_param(b_scale, b, "b_scale", f"{name}/b_scale"),
                             y_scale, name)
    return [_requantize(acc, multiplier, y_zp, name)]


# ---- ConvInteger and QLinearConv -------------------------------------------------------

def _channel_param(v, w, what: str, name: str, out_rank: int | None = None):
    """A per-tensor or per-output-channel parameter of conv weight w (M, C / group, k..):
    one value, or M values shaped to broadcast against w (or, with `out_rank`, against
    the conv's (N, M, d..) output)."""
    if _size(v) == 1:
        return _scalar(v, name)
    m = w.shape[0]
    if tuple(v.shape) != (m,):
        raise Refused("", f"input '{what}' must hold one value (per tensor) or one per "
                          f"output channel ({m}), got shape {_shape_text(v.shape)}")
    shape = (m,) + (1,) * (len(w.shape) - 1 if out_rank is None else out_rank - 2)
    return transform.reshape(v, shape, name=name)


def _per_tensor(v, what: str, name: str):
    if _size(v) != 1:
        raise Refused("", f"input '{what}' must hold one value (per tensor), got shape "
                          f"{_shape_text(v.shape)}")
    return _scalar(v, name)


def _int_conv(conv: Converter, ins, attrs, opset, name: str, bias=None):
    """conv(x - x_zero_point, w - w_zero_point (+ bias)) in int32 by the float Conv
    converter (its window attributes, pads of zero after the shift: x_zero_point before)."""
    x, w, x_zp, w_zp = ins
    _check_dtype(x, "x", ("int8", "uint8"))
    _check_dtype(w, "w", ("int8", "uint8"))
    x32 = transform.cast(x, "int32", name=f"{name}/x_int32")
    if x_zp is not None:
        z = _per_tensor(_cast(x_zp, "int32", f"{name}/x_zp_int32"), "x_zero_point",
                        f"{name}/x_zp")
        x32 = apply("subtract", [x32, z], {}, f"{name}/x_shifted")
    w32 = transform.cast(w, "int32", name=f"{name}/w_int32")
    if w_zp is not None:
        z = _channel_param(_cast(w_zp, "int32", f"{name}/w_zp_int32"), w, "w_zero_point",
                           f"{name}/w_zp")
        w32 = apply("subtract", [w32, z], {}, f"{name}/w_shifted")
    if bias is not None:
        _check_dtype(bias, "B", ("int32",))
    (y,) = conv.fn([x32, w32] + ([bias] if bias is not None else []), attrs, opset, [name])
    return y


def integer_conv_converters(conv: Converter) -> dict:
    """ConvInteger and QLinearConv rows on `conv`, the table's Conv row (which shapes of x,
    window attributes and padding modes it takes, these take)."""
    def conv_integer(ins, attrs, opset, outs):
        ins = list(ins) + [None] * (4 - len(ins))
        return [_int_conv(conv, ins[:4], attrs, opset, outs[0])]

    def qlinear_conv(ins, attrs, opset, outs):
        x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = ins[:8]
        bias = ins[8] if len(ins) > 8 else None
        name = outs[0]
        _same_shape(w_zp, w_scale, "w_zero_point", "w_scale")
        _same_shape(y_zp, y_scale, "y_zero_point", "y_scale")
        acc = _int_conv(conv, [x, w, x_zp, w_zp], attrs, opset, f"{name}/acc", bias)
        multiplier = _multiplier(
            _per_tensor(x_scale, "x_scale", f"{name}/x_scale"),
            _channel_param(w_scale, w, "w_scale", f"{name}/w_scale", len(acc.shape)),
            y_scale, name)
        return [_requantize(acc, multiplier, y_zp, name)]

    return {"ConvInteger": Converter(conv_integer, conv.attrs),
            "QLinearConv": Converter(qlinear_conv, conv.attrs)}


QUANT_CONVERTERS = {
    "QuantizeLinear": row(_quantize, "axis", "saturate", "block_size", "output_dtype",
                          "precision"),
    "DequantizeLinear": row(_dequantize, "axis", "block_size", "output_dtype"),
    "MatMulInteger": row(_matmul_integer),
    "QLinearMatMul": row(_qlinear_matmul),
}
