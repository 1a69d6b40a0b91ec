"""The ONNX GridSample converter (opsets 16, 20 and 22), onto the table op grid_sample: x
(N, C, d1..dr) read at the normalized positions of a grid (N, o1..or, r) by nearest,
(multi-)linear or (multi-)cubic interpolation, positions outside padded by zeros, the
border value or reflection, as ONNX's reference computes them.

Opset 16 names the modes bilinear and bicubic (and speaks of 4-d inputs only); opset 20
renamed them linear and cubic and allowed any number r >= 1 of spatial axes. Each opset's
own names are accepted. Refused: x's spatial sizes not constant, a grid whose shape does
not fit x, and linear or cubic sampling of a non-float x (the reference's weights would be
integers then). float16 is sampled in float32 and rounded back, as Resize is.
Imports graph's builder and graph.frontend.onnx_base.
"""
from __future__ import annotations

from ..builder import apply
from .onnx_base import Refused, only, row

# opset -> its names of the modes, the default first, and the table op's names for them
_MODES = {16: ("bilinear", "nearest", "bicubic"), 20: ("linear", "nearest", "cubic")}
_TABLE_MODE = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear",
               "cubic": "cubic", "nearest": "nearest"}
PADDING_MODES = ("zeros", "border", "reflection")


def _shape(v) -> str:
    """A value's shape as a message shows it: symbolic dims by their names."""
    return "[" + ", ".join(str(getattr(d, "name", d)) for d in v.shape) + "]"


def _check_shapes(x, grid) -> None:
    """Refused unless x is (N, C, d1..dr) with constant d's and grid (N, o1..or, r)."""
    r = len(x.shape) - 2
    if r < 1:
        raise Refused("", f"input 'X' must have shape (N, C, d1, ..., dr) with r >= 1 spatial "
                          f"dimensions, got shape {_shape(x)}")
    if not all(isinstance(d, int) for d in x.shape[2:]):
        raise Refused("", f"input 'X' needs constant spatial dimensions, got shape "
                          f"{_shape(x)}")
    if len(grid.shape) != r + 2 or grid.shape[-1] != r:
        raise Refused("", f"input 'grid' must have shape (N, o1, ..., o{r}, {r}) for an "
                          f"input X of shape {_shape(x)}, got shape {_shape(grid)}")
    n, gn = x.shape[0], grid.shape[0]
    if isinstance(n, int) and isinstance(gn, int) and n != gn:
        raise Refused("", f"input 'grid' must have X's batch size {n} as its first "
                          f"dimension, got shape {_shape(grid)}")


def _grid_sample(ins, attrs, opset, outs):
    x, grid = ins[0], ins[1]
    names = _MODES[16] if opset < 20 else _MODES[20]
    mode = _TABLE_MODE[only(attrs, "mode", names, names[0])]
    padding = only(attrs, "padding_mode", PADDING_MODES, "zeros")
    align = only(attrs, "align_corners", (0, 1), 0)
    _check_shapes(x, grid)
    if mode != "nearest" and not x.dtype.startswith("float"):
        raise Refused("mode", f"mode {attrs.get('mode', names[0])!r} needs a float input "
                              f"'X', got {x.dtype} (only 'nearest' copies other types)")
    return [apply("grid_sample", [x, grid], {"mode": mode, "padding_mode": padding,
                                             "align_corners": bool(align)}, outs[0])]


SAMPLE_CONVERTERS = {
    "GridSample": row(_grid_sample, "mode", "padding_mode", "align_corners"),
}
