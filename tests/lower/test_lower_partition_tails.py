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
