"""Pooling in schedule_pool2d's form (te.compute.ops.max_pool2d_phased / avg_pool2d_phased:
rows first over the input or a padded copy, the input read directly, or a phase-split copy
past the codegen's densely loaded strides) with te.autotune.schedule_pool2d, against numpy
on random data with negative values: odd sizes, rows wider than MAX_ROW_VECTORS, strides 1
to 5 above and below the kernel, symmetric, asymmetric and ceil_mode padding, kernels larger
than the input, max windows as a tree of maxima and as a reduction, rows of more taps than
a tree takes, NaN propagation, count_include_pad, batch 2, alone and with an
elementwise epilogue chain, at both vector widths; dilated windows in each form."""
import importlib

import numpy as np
import pytest

import te
from te.codegen.llvm import codegen as llvm_codegen
from te.autotune.conv2d import producer_ops
from te.compute import ops
from te.errors import ArgumentError, ShapeError


def pool_ref(x, kind, k, stride, pads, count_include_pad=False, dilation=(1, 1)):
    (kh, kw), (sh, sw), (t, left, b, r), (dh, dw) = k, stride, pads, dilation
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1   # the dilated window's extent
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (left, r)),
                constant_values=fill)
    ones = np.pad(np.ones((h, w)), ((t, b), (left, r)))
    oh, ow = (h + t + b - eh) // sh + 1, (w + left + r - ew) // sw + 1
    out = np.empty((n, c, oh, ow))
    for y in range(oh):
        for i in range(ow):
            rows, cols = slice(y * sh, y * sh + eh, dh), slice(i * sw, i * sw + ew, dw)
            win = xp[:, :, rows, cols]
            if kind == "max":
                out[:, :, y, i] = win.max(axis=(2, 3))
            else:
                area = kh * kw if count_include_pad else ones[rows, cols].sum()
                out[:, :, y, i] = win.sum(axis=(2, 3)) / area
    return out


# (shape, kernel, stride, padding (top, left, bottom, right))
CASES = [
    ((1, 5, 17, 19), (3, 3), (2, 2), (1, 1, 1, 1)),      # ResNet's stem pool, odd sizes
    ((2, 3, 12, 11), (2, 2), (2, 2), (0, 0, 0, 0)),      # no padding: rows first over the input
    ((2, 4, 9, 13), (3, 3), (1, 1), (0, 0, 0, 0)),       # stride 1, no pad: reads the data
    ((1, 3, 10, 9), (3, 2), (1, 1), (1, 0, 2, 1)),       # stride 1, asymmetric padding
    ((2, 3, 15, 14), (2, 3), (3, 4), (1, 2, 1, 0)),      # strides above the kernel
    ((1, 2, 40, 37), (5, 5), (2, 3), (2, 2, 2, 2)),      # rows wider than a vector
    ((1, 3, 21, 45), (3, 3), (3, 3), (0, 0, 0, 0)),      # stride 3, no pad: direct reads
    ((1, 2, 19, 70), (4, 4), (4, 4), (0, 0, 0, 0)),      # stride 4, no pad: direct reads
    ((1, 3, 17, 57), (3, 3), (2, 5), (1, 1, 1, 1)),      # stride 5 along x: phase-split
    ((2, 2, 23, 61), (6, 6), (5, 6), (0, 0, 0, 0)),      # 36 taps: a reduction; split
    ((1, 4, 26, 25), (3, 3), (2, 2), (0, 0, 1, 1)),      # ceil_mode (end padding only)
    ((1, 3, 2, 3), (3, 3), (1, 1), (1, 1, 1, 1)),        # kernel larger than the input
    ((1, 2, 3, 2), (4, 3), (1, 2), (1, 2, 1, 0)),        # ... and strided, asymmetric
    ((1, 2, 6, 300), (3, 3), (1, 2), (1, 1, 1, 1)),      # rows past MAX_ROW_VECTORS: split
    ((1, 2, 4, 40), (1, 27), (1, 1), (0, 0, 0, 1)),      # 27 taps a row: not rows first
]


def _build(x, kind, k, stride, pads, epilogue, count_include_pad=False, target="llvm",
           dilation=1):
    X = te.placeholder(x.shape, name="X")
    if kind == "max":
        pool = ops.max_pool2d_phased(X, k, stride, pads, dilation)
    else:
        pool = ops.avg_pool2d_phased(X, k, stride, pads, count_include_pad, dilation)
    out = pool
    if epilogue:
        scaled = te.compute(pool.shape, lambda *i: pool(*i) * 2.0, name="scaled")
        out = te.compute(pool.shape, lambda *i: te.max(scaled(*i) - 0.5, 0.0), name="out")
    fn = te.build(te.autotune.schedule_pool2d(out), [X, out], target=target)
    got = np.full(tuple(int(d.value) for d in out.shape), np.nan, np.float32)
    fn(x, got)
    return got


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("kind", ["max", "avg", "avg_include_pad"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_pool_schedule_matches_numpy(case, kind, epilogue):
    shape, k, stride, pads = case
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    include = kind == "avg_include_pad"
    got = _build(x, kind[:3], k, stride, pads, epilogue, include)
    want = pool_ref(x, kind[:3], k, stride, pads, include)
    if epilogue:
        want = np.maximum(want * 2.0 - 0.5, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# (shape, kernel, stride, padding, dilation): each form of the window with dilated taps
DILATED = [
    ((1, 3, 13, 17), (3, 3), (1, 1), (1, 1, 1, 1), (2, 2)),    # rows first over a pad copy
    ((2, 2, 12, 15), (2, 3), (2, 1), (0, 0, 0, 0), (2, 3)),    # rows first over the input
    ((1, 3, 11, 19), (3, 2), (1, 2), (2, 1, 0, 2), (1, 3)),    # asymmetric padding
    ((1, 2, 15, 41), (3, 3), (2, 5), (1, 1, 2, 2), (2, 3)),    # stride 5 along x: phase-split
    ((1, 2, 16, 40), (2, 3), (3, 6), (1, 2, 1, 2), (3, 2)),    # phases the dilation picks
    ((1, 2, 23, 61), (6, 6), (5, 6), (0, 0, 0, 0), (2, 2)),    # 36 taps: a reduction
    ((1, 2, 4, 70), (1, 27), (1, 1), (0, 0, 0, 3), (1, 2)),    # 27 taps a row: not rows first
    ((1, 2, 5, 6), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),      # windows mostly padding
]


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("kind", ["max", "avg", "avg_include_pad"])
@pytest.mark.parametrize("case", DILATED, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_dilated_pool_schedule_matches_numpy(case, kind, epilogue):
    shape, k, stride, pads, dilation = case
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    include = kind == "avg_include_pad"
    got = _build(x, kind[:3], k, stride, pads, epilogue, include, dilation=dilation)
    want = pool_ref(x, kind[:3], k, stride, pads, include, dilation)
    if epilogue:
        want = np.maximum(want * 2.0 - 0.5, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dilated_pools_refuse_windows_of_only_padding():
    X = te.placeholder((1, 2, 2, 9), name="X")
    with pytest.raises(ShapeError, match=r"max_pool2d: with dilation 3 along the height, "
                                         r"output 0's window \(taps -1 \+ 3 \* k, k < 2\) "
                                         r"reads only padding of an input of size 2"):
        ops.max_pool2d_phased(X, (2, 1), 1, (1, 0, 1, 0), (3, 1))
    with pytest.raises(ShapeError, match=r"avg_pool2d: padding must be smaller than the "
                                         r"kernel on each side .* with dilation \(1, 2\)"):
        ops.avg_pool2d_phased(X, 2, 1, (0, 3, 0, 0), dilation=(1, 2))
    with pytest.raises(ShapeError, match=r"max_pool2d: dilation must be >= 1, got 0"):
        ops.max_pool2d_phased(X, 2, 1, 0, dilation=0)


def test_phased_pools_keep_the_plain_pools_checks_and_need_constant_shapes():
    X = te.placeholder((1, 2, 5, 5), name="X")
    with pytest.raises(ShapeError, match=r"max_pool2d: padding must be smaller than the "
                                         r"kernel"):
        ops.max_pool2d_phased(X, 2, 1, 2)
    with pytest.raises(ShapeError, match=r"avg_pool2d: data must have a constant shape"):
        ops.avg_pool2d_phased(te.placeholder((te.var("n"), 2, 5, 5), name="Xn"), 2)


def test_schedule_pool2d_refuses_a_graph_without_a_pool():
    X = te.placeholder((1, 2, 5, 5), name="X")
    Y = te.compute(X.shape, lambda *i: X(*i) + 1.0, name="Y")
    with pytest.raises(ArgumentError, match=r"schedule_pool2d: out \('Y'\) reads no 4-d "
                                            r"pooling stage"):
        te.autotune.schedule_pool2d(Y)
    with pytest.raises(ArgumentError, match="out must be a te.Tensor"):
        te.autotune.schedule_pool2d(Y.op)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", CASES[:1] + CASES[4:10], ids=lambda c: "-".join(
    map(str, c)).replace(" ", ""))
def test_pool_schedule_with_avx2_vectors(case, kind, monkeypatch):
    """8-lane rows (the AVX2 width) compiled without AVX-512, whatever the host."""
    monkeypatch.setattr(importlib.import_module("te.autotune.pool"), "vector_lanes",
                        lambda dtype="float32": 8)
    shape, k, stride, pads = case
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    got = _build(x, kind, k, stride, pads, False, target="llvm -mattr=-avx512f")
    np.testing.assert_allclose(got, pool_ref(x, kind, k, stride, pads), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("case", [CASES[0], CASES[6], CASES[9]],
                         ids=["tree-padded", "tree-direct", "reduction"])
def test_max_pool_propagates_nan_to_the_windows_holding_it(case):
    shape, k, stride, pads = case
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[0, 1, shape[2] // 2, shape[3] // 3] = np.nan
    got = _build(x, "max", k, stride, pads, False)
    want = pool_ref(x, "max", k, stride, pads)
    assert np.isnan(want).sum() > 0
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pools_combine_rows_first_where_the_stride_and_window_allow(kind):
    """A stage tagged 'pool_rows' (a row buffer per output row, one vector op wide up to
    MAX_ROW_VECTORS) where sw <= MAX_DENSE_STRIDE and kh, kw <= MAX_TREE_TAPS; none past
    those, where the windows read the taps themselves."""
    pool = ops.max_pool2d_phased if kind == "max" else ops.avg_pool2d_phased

    def stages(case):
        shape, k, stride, pads = case
        out = pool(te.placeholder(shape, name="X"), k, stride, pads)
        return {op.name: op.tag for op in producer_ops(out)}
    assert stages(CASES[0])[f"{kind}_pool2d_rows"] == ops.pool_phased.ROWS_TAG
    for case in (CASES[8], CASES[9], CASES[-1]):   # stride 5 along x, 6, 27 taps a row
        assert ops.pool_phased.ROWS_TAG not in stages(case).values()
    X = te.placeholder((1, 2, 5, 17), name="X")
    out = pool(X, 3, 1, 1)
    text = str(te.lower(te.autotune.schedule_pool2d(out), [X, out], simple_mode=True))
    assert f"{kind}_pool2d_rows[ramp(0, 1, 19)]" in text   # the whole row: one vector


def test_phased_pools_know_the_codegens_densely_loaded_strides():
    assert ops.pool_phased.MAX_DENSE_STRIDE == llvm_codegen.MAX_DENSE_STRIDE
