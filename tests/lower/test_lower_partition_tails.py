"""Loop partitioning inside tails, and vectorized tails: a 2-D tile whose two splits do not
divide lowers to guard-free loops in every part, and gives numpy's answer."""
from __future__ import annotations

import numpy as np
import pytest

import te
from te.lower.interp import run_func as interp_run


def _tiled(rows: int, cols: int, ty: int, tx: int, vectorize: bool):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 3.0 - 1.0, name="B")
    s = te.create_schedule(B.op)
    yo, xo, yi, xi = s[B].tile(B.op.axis[0], B.op.axis[1], ty, tx)
    s[B].unroll(yi)
    if vectorize:
        s[B].vectorize(xi)
    return s, [A, B]


@pytest.mark.parametrize("rows,cols,ty,tx", [(10, 13, 4, 4), (7, 56, 2, 16), (5, 9, 8, 8),
                                             (11, 28, 3, 12)])
@pytest.mark.parametrize("vectorize", [False, True])
def test_nested_non_dividing_tiles_lower_without_guards(rows, cols, ty, tx, vectorize):
    s, args = _tiled(rows, cols, ty, tx, vectorize)
    text = str(te.lower(s, args))
    assert "if (" not in text, text
    a = np.random.default_rng(rows * cols).uniform(-2, 2, (rows, cols)).astype("float32")
    want = a * 3.0 - 1.0
    out = np.full((rows, cols), np.nan, np.float32)
    te.build(s, args)(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)  # FMA rounding
    out2 = np.full((rows, cols), np.nan, np.float32)
    interp_run(te.lower(s, args), [a, out2])        # strict bounds checks on every access
    np.testing.assert_allclose(out2, want, rtol=1e-6, atol=1e-6)


def _parallel_rows(rows: int, cols: int, ty: int, inner_tile: int):
    """Row blocks of ty in parallel, each block's row loop split again by inner_tile (the
    1x1 conv's blocks of pixel panels): neither split divides."""
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 3.0 - 1.0, name="B")
    s = te.create_schedule(B.op)
    yo, yi = s[B].split(B.op.axis[0], factor=ty)
    yio, yii = s[B].split(yi, factor=inner_tile)
    s[B].parallel(yo)
    s[B].vectorize(B.op.axis[1])
    return s, [A, B]


@pytest.mark.parametrize("rows,ty,inner_tile", [(10, 4, 3), (23, 6, 4), (9, 2, 1)])
def test_a_parallel_loop_keeps_its_tail_iterations_inside(rows, ty, inner_tile):
    # the partial last block is the parallel loop's last iteration, behind a branch, not a
    # loop after it that the calling thread would run alone
    s, args = _parallel_rows(rows, 16, ty, inner_tile)
    blocks, full = -(-rows // ty), rows // ty
    text = str(te.lower(s, args))
    assert text.count("parallel for") == 1 and f"parallel for (i.outer, 0, {blocks})" in text
    assert f"if (i.outer < {full})" in text
    task = text.index("parallel_task")
    assert text.rstrip().endswith("}\n  }\n}") and text.count("parallel_task") == 1, text
    main = text[task:text.index("} else {")]
    assert main.count("if (") == 1, main       # the full blocks: no guard but the branch
    a = np.random.default_rng(rows).uniform(-2, 2, (rows, 16)).astype("float32")
    want = a * 3.0 - 1.0
    out = np.full((rows, 16), np.nan, np.float32)
    te.build(s, args)(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    out2 = np.full((rows, 16), np.nan, np.float32)
    interp_run(te.lower(s, args), [a, out2])
    np.testing.assert_allclose(out2, want, rtol=1e-6, atol=1e-6)


def test_the_tail_after_the_parallel_loop_when_switched_off(monkeypatch):
    from te.lower.passes import loop_partition
    monkeypatch.setattr(loop_partition, "PARALLEL_TAIL_INSIDE", False)
    s, args = _parallel_rows(10, 16, 4, 3)
    text = str(te.lower(s, args))
    assert "else" not in text and "parallel for (i.outer, 0, 2)" in text
    a = np.random.default_rng(3).uniform(-2, 2, (10, 16)).astype("float32")
    out = np.full((10, 16), np.nan, np.float32)
    te.build(s, args)(a, out)
    np.testing.assert_allclose(out, a * 3.0 - 1.0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "int8"])
@pytest.mark.parametrize("mode", ["build", "interp", "bound_checks"])
def test_unsigned_and_narrow_shapes_with_nested_tails_stay_in_bounds(dtype, mode):
    # with unsigned loop variables a split point's c - 1 - rest wrapped around (the tail's
    # inner loop ran past the buffer), and the bound checker's `a < b` -> a <= b - 1 made
    # a -1 of the unsigned type: unsigned loops keep their guards, and that fact is skipped
    rows, cols = 100, 3
    A = te.placeholder((te.const(rows, dtype), te.const(cols, dtype)), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 3.0 + i.astype("float32") * 0.5, name="B")
    s = te.create_schedule(B.op)
    yo, yi = s[B].split(B.op.axis[0], factor=3)
    s[B].split(yi, factor=2)
    s[B].parallel(yo)
    a = np.random.default_rng(5).uniform(0.5, 2, (rows, cols)).astype("float32")
    want = a * 3.0 + np.arange(rows, dtype=np.float32)[:, None] * 0.5
    out = np.full((rows, cols), np.nan, np.float32)
    if mode == "interp":
        interp_run(te.lower(s, [A, B]), [a, out])
    else:
        te.build(s, [A, B], instrument_bound_checkers=mode == "bound_checks")(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
