"""te.dtype.wrap and te.dtype.int_range, the one integer wrap-around that constant folding
(te.compute.expr.fold, which the LLVM code generator folds with too), the simplifier
(te.lower.arith) and LLVM constants share: checked against numpy's own casts and
arithmetic. Imports te.dtype and te.compute.
"""
from __future__ import annotations

import numpy as np
import pytest

import te
from te import dtype as dt
from te.compute.expr import fold

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("dtype", INTS)
def test_int_range_is_numpys(dtype):
    info = np.iinfo(dtype)
    assert dt.int_range(dtype) == (int(info.min), int(info.max))


@pytest.mark.parametrize("dtype", INTS)
def test_wrap_matches_numpys_cast(dtype):
    rng = np.random.default_rng(7)
    lo, hi = dt.int_range(dtype)
    edges = [lo, hi, lo - 1, hi + 1, 0, -1, 2 ** 64 + 3, -(2 ** 65) - 5]
    values = edges + [int(x) for x in rng.integers(-2 ** 62, 2 ** 62, 200)] \
        + [int(x) * 2 ** 40 + 12345 for x in rng.integers(-2 ** 30, 2 ** 30, 50)]
    for v in values:
        expected = int(np.array(v % 2 ** 64, dtype=np.uint64).astype(dtype))
        assert dt.wrap(v, dtype) == expected, v


def test_wrap_bool_keeps_the_low_bit():
    assert [dt.wrap(v, "bool") for v in (0, 1, 2, 3, -1)] == [0, 1, 0, 1, 1]


def test_folded_constants_wrap_as_the_generated_code_does():
    assert (te.const(200, "uint8") + te.const(100, "uint8")).value == 44
    assert (te.const(2 ** 31 - 1, "int32") + 1).value == -(2 ** 31)
    assert te.const(-1, "int32").astype("uint16").value == 65535
    assert te.min_value("int16").value == -32768 and te.max_value("uint32").value == 2 ** 32 - 1


@pytest.mark.parametrize("dtype", INTS)
def test_fold_matches_numpys_arithmetic(dtype):
    rng = np.random.default_rng(11)
    lo, hi = dt.int_range(dtype)
    xs = rng.integers(lo, hi, 40, dtype=dtype, endpoint=True)
    ys = rng.integers(lo, hi, 40, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        for op, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply)):
            for x, y in zip(xs, ys):
                assert fold(op, int(x), int(y), dtype) == int(ref(x, y)), (op, x, y)
    assert fold("lt", 3, 5, dtype) is True and fold("floordiv", 7, 0, dtype) is None
