"""tvm.testing: assert_allclose as TVM spells it (numpy's, with TVM's default tolerances).

Takes arrays (numpy or NDArrays); raises AssertionError where they differ. Imports numpy.
"""
from __future__ import annotations

import numpy as np


def assert_allclose(actual, desired, rtol=1e-7, atol=1e-7) -> None:
    """numpy.testing.assert_allclose with TVM's defaults (rtol = atol = 1e-7): NDArrays are
    read as numpy arrays, and shapes must match exactly (no broadcasting)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    np.testing.assert_allclose(actual.shape, desired.shape)
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


__all__ = ["assert_allclose"]
