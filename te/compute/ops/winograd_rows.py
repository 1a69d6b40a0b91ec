"""A 3x3, stride-1 convolution as Winograd F(4, 3) along its rows: three stages that each
stay NCHW, with a grouped 1x3 convolution doing half the direct form's multiplies.

For each output column x and kernel column kx, the kernel's 3 rows g and 6 padded input
rows d give 4 output rows as AT [(G g) * (BT d)] (Lavin and Gray's F(4, 3), points 0, +-1,
+-2 and infinity). So with U[a, co, ci, kx] = sum_k G[a, k] w[co, ci, k, kx] (the weights,
transformed once) and V[a, ci, ty, x] = sum_p BT[a, p] d[ci, 4 ty + p, x],
    out[co, 4 ty + i, x] = sum_a AT[i, a] M[a, co, ty, x],
    M[a, co, ty, x] = sum_{ci, kx} U[a, co, ci, kx] V[a, ci, ty, x + kx - left],
and M is a conv2d of V (6 * CI channels, ty rows) by U (6 * CO, CI, 1, 3) with groups 6:
18 multiplies per 4 output rows and input channel where the direct form has 36. Along x
everything stays dense, so each stage is vectorized along the rows as any NCHW stage is
(the transforms' coefficients depend on the channel block or the row, never on x).

winograd_rows_input(data, top, out_height) -> V (N, 6 * CI, ceil(OH / 4), W),
winograd_rows_weight(weight) -> U (6 * CO, CI, 1, 3),
winograd_rows_output(m, out_height, bias) -> out (N, CO, OH, W);
the conv between them is conv2d(V, U, padding (0, left, 0, right), groups=WINOGRAD_ALPHA).
Imports te.compute and te.errors only.
"""
from __future__ import annotations

from fractions import Fraction as F

from ...errors import ShapeError
from .. import api
from ..tensor import Tensor
from ._util import check_float, check_tensor, fmt_shape, static_dim

WINOGRAD_TILE = 4     # output rows per tile
WINOGRAD_ALPHA = 6    # input rows per tile (tile + kernel - 1): the groups of the middle conv
# F(4, 3)'s matrices (exact fractions)
BT = ((4, 0, -5, 0, 1, 0),
      (0, -4, -4, 1, 1, 0),
      (0, 4, -4, -1, 1, 0),
      (0, -2, -1, 2, 1, 0),
      (0, 2, -1, -2, 1, 0),
      (0, 4, 0, -5, 0, 1))
G = ((F(1, 4), 0, 0),
     (F(-1, 6), F(-1, 6), F(-1, 6)),
     (F(-1, 6), F(1, 6), F(-1, 6)),
     (F(1, 24), F(1, 12), F(1, 6)),
     (F(1, 24), F(-1, 12), F(1, 6)),
     (0, 0, 1))
AT = ((1, 1, 1, 1, 1, 0),
      (0, 1, -1, 2, -2, 0),
      (0, 1, 1, 4, 4, 0),
      (0, 1, -1, 8, -8, 1))


def _entry(matrix, row, col: int, dtype: str):
    """matrix[row][col] for a row index expression: a chain of selects over the rows (the
    index is the same across a vector of the stage, so it costs nothing per element)."""
    out = api.const(float(matrix[-1][col]), dtype)
    for r in range(len(matrix) - 2, -1, -1):
        out = api.if_then_else(row == r, api.const(float(matrix[r][col]), dtype), out)
    return out


def _combination(matrix, row, values: list, dtype: str):
    """sum_j matrix[row][j] * values[j] for a row index expression (see _entry)."""
    terms = [_entry(matrix, row, j, dtype) * v for j, v in enumerate(values)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _dims(t: Tensor, who: str, what: str) -> list:
    dims = [static_dim(d) for d in t.shape]
    if any(d is None for d in dims):
        raise ShapeError(f"{who}: {what} must have a constant shape, got {fmt_shape(t.shape)}")
    return dims


def winograd_rows_input(data: Tensor, top: int, out_height: int,
                        name: str = "winograd_rows_input") -> Tensor:
    """V[n, a * C + c, ty, x] = sum_p BT[a, p] data[n, c, 4 ty + p - top, x] (rows outside the
    input read 0): the input rows of ceil(out_height / 4) tiles of a 3x3 stride-1 conv with
    `top` rows of padding above."""
    who = "winograd_rows_input"
    check_tensor(data, who, "data", ndim=4)
    check_float(data, who, "data")
    N, C, H, W = _dims(data, who, "data")
    if not (isinstance(top, int) and 0 <= top <= 2):
        raise ShapeError(f"{who}: top must be an int from 0 to 2 (a 3x3 kernel's padding), "
                         f"got {top!r}")
    if not (isinstance(out_height, int) and 1 <= out_height <= H + 4 - 2):
        raise ShapeError(f"{who}: out_height must be an int from 1 to {H + 2} (input height "
                         f"{H} with at most 2 rows of padding each side), got {out_height!r}")
    tiles = -(-out_height // WINOGRAD_TILE)

    def rows(n, k, ty, x):
        a, c = api.indexdiv(k, C), api.indexmod(k, C)
        values = []
        for p in range(WINOGRAD_ALPHA):
            row = ty * WINOGRAD_TILE + p - top
            values.append(api.if_then_else(api.all(row >= 0, row < H), data[n, c, row, x],
                                           api.const(0, data.dtype)))
        return _combination(BT, a, values, data.dtype)
    return api.compute((N, WINOGRAD_ALPHA * C, tiles, W), rows, name=name, tag="injective")


def winograd_rows_weight(weight: Tensor, name: str = "winograd_rows_weight") -> Tensor:
    """U[a * CO + co, ci, 0, kx] = sum_k G[a, k] weight[co, ci, k, kx] of a (CO, CI, 3, 3)
    weight: the grouped 1x3 conv's weight."""
    who = "winograd_rows_weight"
    check_tensor(weight, who, "weight", ndim=4)
    check_float(weight, who, "weight")
    CO, CI, KH, KW = _dims(weight, who, "weight")
    if (KH, KW) != (3, 3):
        raise ShapeError(f"{who}: weight must be 3x3 (CO, CI, 3, 3), got {fmt_shape(weight.shape)}")

    def transform(k, ci, _, kx):
        a, co = api.indexdiv(k, CO), api.indexmod(k, CO)
        return _combination(G, a, [weight[co, ci, r, kx] for r in range(3)], weight.dtype)
    return api.compute((WINOGRAD_ALPHA * CO, CI, 1, 3), transform, name=name, tag="injective")


def winograd_rows_output(m: Tensor, out_height: int, bias: Tensor | None = None,
                         name: str = "winograd_rows_output") -> Tensor:
    """out[n, co, y, x] = sum_a AT[y % 4, a] m[n, a * CO + co, y // 4, x] (+ bias[co]) for
    y < out_height: the grouped conv's result back as the 3x3 conv's output rows."""
    who = "winograd_rows_output"
    check_tensor(m, who, "m", ndim=4)
    check_float(m, who, "m")
    N, K, tiles, W = _dims(m, who, "m")
    if K % WINOGRAD_ALPHA:
        raise ShapeError(f"{who}: m's channels must be a multiple of {WINOGRAD_ALPHA}, got "
                         f"{K}")
    CO = K // WINOGRAD_ALPHA
    if not (isinstance(out_height, int) and tiles * WINOGRAD_TILE - WINOGRAD_TILE
            < out_height <= tiles * WINOGRAD_TILE):
        raise ShapeError(f"{who}: out_height must be an int that needs m's {tiles} tiles of "
                         f"{WINOGRAD_TILE} rows, got {out_height!r}")
    if bias is not None:
        check_tensor(bias, who, "bias", ndim=1)
        if static_dim(bias.shape[0]) != CO:
            raise ShapeError(f"{who}: bias must have {CO} elements (m's channels / "
                             f"{WINOGRAD_ALPHA}), got {fmt_shape(bias.shape)}")

    def rows(n, co, y, x):
        i, ty = api.indexmod(y, WINOGRAD_TILE), api.indexdiv(y, WINOGRAD_TILE)
        total = _combination(AT, i, [m[n, a * CO + co, ty, x] for a in range(WINOGRAD_ALPHA)],
                             m.dtype)
        return total if bias is None else total + bias[co]
    return api.compute((N, CO, out_height, W), rows, name=name, tag="injective")
