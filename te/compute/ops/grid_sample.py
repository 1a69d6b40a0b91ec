"""Sampling an input at data-dependent positions: ONNX GridSample (torch's grid_sample).

Takes x (N, C, d1..dr) and a grid (N, o1..or, r) of normalized positions in [-1, 1] (its
last entry is the position along x's last axis); gives (N, C, o1..or): x read by nearest,
(multi-)linear or (multi-)cubic interpolation, positions outside padded by zeros, the
border value or reflection. Per spatial axis, tables of the taps' indices and weights (one
entry per grid position and tap, shared by every channel), then the output blends the taps.
Imports te.compute (api, tensor), te.dtype, te.errors and the sibling _util only.
"""
from __future__ import annotations

from ... import dtype as dt
from ...errors import DTypeError, ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_dim, check_tensor, fmt_shape, static_dim

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
# Keys' cubic convolution coefficient of ONNX's (and torch's) bicubic sampling
CUBIC_A = -0.75
# mode -> (taps per axis, offset of the first tap from floor(coordinate))
_TAPS = {"nearest": (1, 0), "linear": (2, 0), "cubic": (4, -1)}


def _unnormalize(g, size: int, align_corners: bool):
    """A grid value as an input coordinate, in the order of ONNX's reference: -1 and 1 are
    the centres of the corner elements (align_corners) or their outer edges."""
    if align_corners:
        return (g + 1.0) / 2.0 * float(size - 1)
    return ((g + 1.0) * float(size) - 1.0) / 2.0


def _bounds(size: int, align_corners: bool) -> tuple:
    """The extent [lo, hi] the grid's [-1, 1] maps onto along an axis of `size` elements;
    border and reflection padding move only coordinates outside it."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def _reflect(c, lo: float, hi: float):
    """c reflected by the bounds until it lies in [lo, hi], as ONNX's reference
    (_gs_reflect) folds it: the mirrored axis repeats with period 2 (hi - lo), so c's
    offset t from lo modulo the period lies at lo + t on the way out and lo + period - t
    on the way back. Inside, c comes back as it was (to rounding). c's expression appears
    twice, not the 15 times of the reference's branches: a schedule may inline the
    coordinate into every tap, and such copies took a minute to compile. A span of 0 (one
    element, align_corners) leaves only lo."""
    span = hi - lo
    if span == 0.0:
        return api.const(lo, c.dtype)
    period = 2.0 * span
    d = c - lo
    t = d - api.floor(d / period) * period
    return (lo + span) - api.abs(t - span)


def _pad_coordinate(c, size: int, padding_mode: str, align_corners: bool):
    """A coordinate outside _bounds moved by border (clamped to the first and last element)
    or reflection padding; zeros padding leaves it, its taps then read 0."""
    lo, hi = _bounds(size, align_corners)
    if padding_mode == "border":
        outside = api.any(c < lo, c > hi)
        return api.if_then_else(outside, api.min(api.max(c, 0.0), float(size - 1)), c)
    if padding_mode == "reflection":
        return _reflect(c, lo, hi)
    return c


def _finite(c, lo: float, hi: float):
    """c clamped into [lo, hi], NaN to lo: a NaN or huge float converted to int32 is
    undefined. The comparison is false for NaN; min and max would propagate it."""
    return api.min(api.if_then_else(c >= lo, c, lo), hi)


def _tap_index(i, size: int, padding_mode: str, align_corners: bool):
    """Integer tap i of an axis as an index into it: clamped (border), reflected
    (reflection, _reflect_index), or -1 where it is outside (zeros: the output reads 0)."""
    if padding_mode == "zeros":
        return api.if_then_else(api.all(i >= 0, i < size), i, -1)
    if padding_mode == "reflection":
        return _reflect_index(i, size, align_corners)
    return api.min(api.max(i, 0), size - 1)


def _reflect_index(i, size: int, align_corners: bool):
    """The reference's reflection (_reflect, by the same bounds) of an integer tap, in
    integers: the axis mirrored repeats with period 2 (size - 1) about the corner centres
    (align_corners), or 2 size about their edges, the edge element then read twice."""
    period = 2 * (size - 1) if align_corners else 2 * size
    if period == 0:
        return api.const(0, "int32")
    m = api.indexmod(i, period)
    return api.if_then_else(m < size, m, period - m - (0 if align_corners else 1))


def _tap_weight(t, j, mode: str):
    """Weight of tap j (a var: 0..1 linear, 0..3 cubic at floor - 1 + j) for the fraction
    t in [0, 1). Cubic: Keys' kernel (a = CUBIC_A) at distance |t + 1 - j|, the near
    branch for the two inner taps, as the reference picks its coefficients."""
    if mode == "linear":
        return api.if_then_else(j == 0, 1.0 - t, t)
    a = CUBIC_A
    d = api.abs(t - (j - 1).astype(t.dtype))
    near = ((a + 2) * d - (a + 3)) * d * d + 1.0
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return api.if_then_else(api.any(j == 1, j == 2), near, far)


class _Axis:
    """One spatial axis: its size, and how a grid value becomes a coordinate and taps."""

    def __init__(self, size: int, mode: str, padding_mode: str, align_corners: bool):
        self.size, self.mode = size, mode
        self.padding_mode, self.align_corners = padding_mode, align_corners
        self.taps, self.first = _TAPS[mode]

    def coordinate(self, g):
        """The padded input coordinate of grid value g (rounded for nearest), finite and
        within a few taps of the axis, so that floor(c) converts to int32 exactly; a
        coordinate clamped there has all its taps outside, as it had before."""
        c = _unnormalize(g, self.size, self.align_corners)
        if self.mode == "nearest":
            c = api.round(c)   # half to even, as the reference's np.rint (and torch)
        c = _pad_coordinate(c, self.size, self.padding_mode, self.align_corners)
        reach = float(self.taps + 1)
        return _finite(c, -reach, self.size - 1.0 + reach)

    def index(self, c, j):
        """The index of tap j of coordinate c (from `coordinate`), -1 if outside."""
        low = api.floor(c).astype("int32")
        return _tap_index(low + (j + self.first), self.size, self.padding_mode,
                          self.align_corners)

    def weight(self, c, j, dtype: str):
        return _tap_weight(c - api.floor(c), j, self.mode).astype(dtype)


def _axis_tables(axis: _Axis, grid: Tensor, entry: int, coord_dtype: str, acc: str,
                 name: str) -> tuple:
    """(index table, weight table or None) of one axis, read through grid[..., entry]:
    per grid position the coordinate (computed once, in coord_dtype), then per tap its
    index and weight (acc). Tables (attrs 'table'), shared by every channel, rather than
    recomputed in each output element."""
    attrs = {"table": True}
    shape = tuple(grid.shape[:-1])
    coord = api.compute(shape, lambda *i: axis.coordinate(grid(*i, entry).astype(coord_dtype)),
                        name=f"{name}_coord", tag="injective", attrs=attrs)
    index = api.compute((*shape, axis.taps), lambda *i: axis.index(coord(*i[:-1]), i[-1]),
                        name=f"{name}_taps", tag="injective", attrs=attrs)
    if axis.mode == "nearest":
        return index, None
    weight = api.compute((*shape, axis.taps),
                         lambda *i: axis.weight(coord(*i[:-1]), i[-1], acc),
                         name=f"{name}_weights", tag="injective", attrs=attrs)
    return index, weight


def _check(x: Tensor, grid: Tensor, mode: str, padding_mode: str, who: str) -> list:
    """The spatial sizes of x (ints), after checking the arguments."""
    check_tensor(x, who, "x")
    check_tensor(grid, who, "grid")
    for param, value, allowed in (("mode", mode, MODES),
                                  ("padding_mode", padding_mode, PADDING_MODES)):
        if value not in allowed:
            raise ShapeError(f"{who}: {param} must be one of {list(allowed)}, got {value!r}")
    if not dt.is_float(grid.dtype):
        raise DTypeError(f"{who}: grid must have a float dtype, got {grid.dtype}")
    if mode != "nearest" and not dt.is_float(x.dtype):
        raise DTypeError(f"{who}: x must have a float dtype for mode {mode!r}, got {x.dtype}")
    r = x.ndim - 2
    if r < 1 or grid.ndim != x.ndim or static_dim(grid.shape[-1]) != r:
        raise ShapeError(f"{who}: x (N, C, d1..dr) with r >= 1 needs grid (N, o1..or, r), "
                         f"got x {fmt_shape(x.shape)} and grid {fmt_shape(grid.shape)}")
    check_dim(grid.shape[0], x.shape[0], who, "grid's batch dimension (x's is N)")
    sizes = [static_dim(d) for d in x.shape[2:]]
    if any(d is None or d < 1 for d in sizes):
        raise ShapeError(f"{who}: x's spatial dimensions must be constant and positive, got "
                         f"shape {fmt_shape(x.shape)}")
    return sizes


def grid_sample(x: Tensor, grid: Tensor, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False, name: str = "T_grid_sample") -> Tensor:
    """x (N, C, d1..dr) sampled at grid (N, o1..or, r), ONNX GridSample's semantics (its
    reference implementation): out[n, c, o] reads x[n, c] at the position grid[n, o]
    (reversed: grid[..., 0] is along x's last axis) by `mode` 'nearest' (ties to even),
    'linear' or 'cubic' (Keys, a = -0.75), positions outside by `padding_mode` 'zeros',
    'border' or 'reflection'. Float x is blended in float32 (float64 for float64) and
    cast back; 'nearest' copies any dtype. No read leaves x, whatever the grid holds
    (NaN included)."""
    who = "grid_sample"
    sizes = _check(x, grid, mode, padding_mode, who)
    r = len(sizes)
    axes = [_Axis(d, mode, padding_mode, bool(align_corners)) for d in sizes]
    coord_dtype = "float64" if grid.dtype == "float64" else "float32"
    acc = "float64" if x.dtype == "float64" else "float32"
    out_sp = tuple(grid.shape[1:-1])
    tables = [_axis_tables(axes[k], grid, r - 1 - k, coord_dtype, acc, f"{name}_{k}")
              for k in range(r)]
    index = [t[0] for t in tables]
    weight = [t[1] for t in tables]
    zero = api.const(0, x.dtype if mode == "nearest" else acc)

    def blend(n, c, o, k: int, picked: list):
        """x at the taps of axes k.. (axes before k at `picked`), in the reference's
        order: the last axis innermost, each axis a dot of its weights with the values."""
        if k == r:
            value = x(n, c, *picked)
            return value if mode == "nearest" else value.astype(acc)
        total = None
        for j in range(axes[k].taps):
            i = index[k](n, *o, j)
            if padding_mode == "zeros":   # -1 marks a tap outside: read 0, load at 0
                term = blend(n, c, o, k + 1, picked + [api.max(i, 0)])
                term = api.if_then_else(i >= 0, term, zero)
            else:
                term = blend(n, c, o, k + 1, picked + [i])
            if mode != "nearest":
                term = weight[k](n, *o, j) * term
            total = term if total is None else total + term
        return total

    def fcompute(*i):
        value = blend(i[0], i[1], i[2:], 0, [])
        return value if mode == "nearest" else value.astype(x.dtype)
    return api.compute((x.shape[0], x.shape[1], *out_sp), fcompute, name=name,
                       tag="injective")
