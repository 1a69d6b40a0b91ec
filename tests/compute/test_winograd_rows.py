"""te.compute.ops.winograd_rows: a 3x3 stride-1 conv as Winograd F(4, 3) along its rows.
The three stages (input rows, weights, output rows) built with te around te's own grouped
conv give numpy's direct convolution on random data: odd channel counts and image sizes,
heights that leave a partial last tile, every padding from 0 to 2 on each side, batch 2,
with and without a bias; the matrices are F(4, 3)'s (checked against a 1-d correlation
exactly, in fractions); bad arguments give errors naming them."""
from fractions import Fraction

import numpy as np
import pytest

import te
from te.compute import ops
from te.compute.ops import winograd_rows as wr
from te.errors import ShapeError
from test_conv2d_strategy import conv_ref

RNG = np.random.default_rng(41)


def _build(out, ins, arrays):
    got = np.full(tuple(int(d.value) for d in out.shape), np.nan, np.float32)
    te.build(te.create_schedule(out.op), ins + [out])(*arrays, got)
    return got


def test_the_matrices_compute_a_1d_correlation_of_4_outputs_exactly():
    d = [Fraction(int(v)) for v in RNG.integers(-9, 10, 6)]
    g = [Fraction(int(v)) for v in RNG.integers(-9, 10, 3)]
    u = [sum(Fraction(wr.G[a][k]) * g[k] for k in range(3)) for a in range(6)]
    v = [sum(wr.BT[a][p] * d[p] for p in range(6)) for a in range(6)]
    y = [sum(wr.AT[i][a] * u[a] * v[a] for a in range(6)) for i in range(4)]
    assert y == [sum(g[k] * d[i + k] for k in range(3)) for i in range(4)]


CASES = [  # (N, CI, CO, H, W, padding (top, left, bottom, right), bias)
    (1, 5, 7, 11, 9, (1, 1, 1, 1), True),       # 11 rows: a partial last tile of 3
    (2, 3, 4, 8, 5, (0, 0, 0, 0), False),       # no padding, 6 output rows
    (1, 6, 5, 13, 12, (2, 1, 0, 2), True),      # asymmetric, the most padding on top
    (1, 4, 9, 7, 17, (0, 2, 2, 0), False),      # the most padding below
    (1, 2, 3, 3, 3, (1, 0, 1, 0), True),        # one tile, 3 of its 4 rows used
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_the_three_stages_around_a_grouped_conv_give_the_direct_convolution(case):
    n, ci, co, h, w, pads, with_bias = case
    x = RNG.standard_normal((n, ci, h, w)).astype(np.float32)
    k = RNG.standard_normal((co, ci, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(co).astype(np.float32) if with_bias else None
    top, left, bottom, right = pads
    oh = h + top + bottom - 2
    X, K = te.placeholder(x.shape, name="X"), te.placeholder(k.shape, name="K")
    u = _build(ops.winograd_rows_weight(K), [K], [k])
    V = ops.winograd_rows_input(X, top, oh)
    assert tuple(int(d.value) for d in V.shape) == (n, 6 * ci, -(-oh // 4), w)
    U = te.placeholder(u.shape, name="U")
    M = ops.conv2d_nchw(V, U, 1, (0, left, 0, right), groups=wr.WINOGRAD_ALPHA)
    B = te.placeholder((co,), name="B") if with_bias else None
    out = ops.winograd_rows_output(M, oh, B)
    got = _build(out, [X, U] + ([B] if with_bias else []), [x, u] + ([b] if with_bias else []))
    want = conv_ref(x, k, (1, 1), pads, (1, 1), 1)
    if with_bias:
        want += b[None, :, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_weight_transform_is_g_times_each_kernel_column():
    k = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    K = te.placeholder(k.shape, name="K")
    u = _build(ops.winograd_rows_weight(K), [K], [k])
    g = np.array(wr.G, dtype=np.float64)
    want = np.einsum("ak,oikx->aoix", g, k.astype(np.float64)).reshape(18, 2, 1, 3)
    np.testing.assert_allclose(u, want, rtol=1e-6, atol=1e-6)


def test_bad_arguments_name_the_parameter():
    X = te.placeholder((1, 2, 6, 6), name="X")
    with pytest.raises(ShapeError, match=r"winograd_rows_input: top must be an int from 0 "
                                         r"to 2 .*got 3"):
        ops.winograd_rows_input(X, 3, 4)
    with pytest.raises(ShapeError, match=r"winograd_rows_input: out_height must be an int "
                                         r"from 1 to 8 .*got 9"):
        ops.winograd_rows_input(X, 1, 9)
    with pytest.raises(ShapeError, match=r"winograd_rows_weight: weight must be 3x3 "
                                         r"\(CO, CI, 3, 3\), got \(4, 2, 1, 3\)"):
        ops.winograd_rows_weight(te.placeholder((4, 2, 1, 3), name="K"))
    with pytest.raises(ShapeError, match=r"winograd_rows_output: m's channels must be a "
                                         r"multiple of 6, got 8"):
        ops.winograd_rows_output(te.placeholder((1, 8, 2, 5), name="M"), 8)
    M = te.placeholder((1, 12, 2, 5), name="M")
    with pytest.raises(ShapeError, match=r"winograd_rows_output: out_height must be an int "
                                         r"that needs m's 2 tiles of 4 rows, got 4"):
        ops.winograd_rows_output(M, 4)
    with pytest.raises(ShapeError, match=r"winograd_rows_output: bias must have 2 elements "
                                         r"\(m's channels / 6\), got \(3,\)"):
        ops.winograd_rows_output(M, 7, te.placeholder((3,), name="B"))
    with pytest.raises(ShapeError, match=r"winograd_rows_input: data must have a constant "
                                         r"shape, got \(1, 2, h, 6\)"):
        ops.winograd_rows_input(te.placeholder((1, 2, te.var("h"), 6), name="Xh"), 1, 4)
