"""The ONNX GridSample converter (opsets 16, 20 and 22), onto the table op grid_sample: x
(N, C, d1..dr) read at the normalized positions of a grid (N, o1..or, r) by nearest,
(multi-)linear or (multi-)cubic interpolation, positions outside padded by zeros, the
border value or reflection, as ONNX's reference computes them.

Opset 16 names the modes bilinear and bicubic (and speaks of 4-d inputs only); opset 20
renamed them linear and cubic and allowed any number r >= 1 of spatial axes. Each opset's
own names are accepted. Refused: x's spatial sizes not constant, a grid whose shape does
not fit x, and linear or cubic sampling of a non-float x (the reference's weights would be
integers then). float16 is sampled in float32 and rounded back, as Resize is.

AffineGrid (opset 20), the grid an affine transform gives, is one batched matmul of a
constant base grid with theta.
Imports numpy, graph's builder and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np

from .. import transform
from ..builder import apply, constant
from .onnx_base import Refused, const, only, row

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


def _base_grid(sizes, align_corners: bool) -> np.ndarray:
    """The normalized positions of every output element, innermost axis first as GridSample
    reads them ((x, y[, z]) in [-1, 1]), and a 1 for the translation: shape
    (prod(sizes), len(sizes) + 1)."""
    axes = []
    for n in sizes:
        # align_corners: the end pixels' centres at -1 and 1; a single one at -1, as in
        # ONNX's reference (onnxruntime puts it at 1, PyTorch at 0)
        if align_corners:
            axes.append(-1 + 2 * np.arange(n) / max(n - 1, 1))
        else:              # the end pixels' edges at -1 and 1
            axes.append(-1 + (2 * np.arange(n) + 1) / n)
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(sizes)))]
    return np.stack(coords, axis=1)


def _affine_grid(ins, attrs, opset, outs):
    """AffineGrid: theta (N, r, r + 1) applied to the base grid of the spatial `size`: one
    batched matmul, base (P, r + 1) @ theta^T (N, r + 1, r), reshaped to (N, *size, r). A
    converter of its own: ONNX's body picks 2-d or 3-d with an If."""
    theta, size = ins[0], const(ins[1], "size")
    r = len(size) - 2
    if r not in (2, 3) or tuple(theta.shape[1:]) != (r, r + 1):
        raise Refused("", f"theta must be (N, 2, 3) with a 4-value size or (N, 3, 4) with a "
                          f"5-value size, got theta {list(theta.shape)} and size "
                          f"{[int(v) for v in size]}")
    if isinstance(theta.shape[0], int) and int(size[0]) != theta.shape[0]:
        raise Refused("", f"size[0] must be theta's batch {theta.shape[0]}, got "
                          f"{int(size[0])}")
    if theta.dtype not in ("float32", "float64"):
        raise Refused("", f"theta must be float32 or float64, got {theta.dtype}")
    name, sizes = outs[0], [int(v) for v in size[2:]]
    align = bool(only(attrs, "align_corners", (0, 1), 0))
    base = constant(_base_grid(sizes, align).astype(theta.dtype), name=f"{name}/base")
    theta_t = transform.transpose(theta, (0, 2, 1), name=f"{name}/theta_t")
    points = apply("matmul", [base, theta_t], {}, f"{name}/points")
    return [transform.reshape(points, (theta.shape[0], *sizes, r), name=name)]


SAMPLE_CONVERTERS = {
    "AffineGrid": row(_affine_grid, "align_corners"),
    "GridSample": row(_grid_sample, "mode", "padding_mode", "align_corners"),
}
