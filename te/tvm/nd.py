"""tvm.nd: array(x, device), empty(shape, dtype, device) and NDArray, over runtime.ndarray.

Takes numpy data and a runtime Device (tvm.cpu(), tvm.cuda(), tvm.device("llvm", 0)); gives
runtime NDArrays (`.numpy()`, `.asnumpy()`, `.copyto()`, `.shape`, `.dtype`, `.device`).
Imports runtime.
"""
from __future__ import annotations

import runtime
from runtime import NDArray


def array(arr, device=None) -> NDArray:
    """A copy of `arr` (numpy data or an NDArray) meant for `device` (the CPU by default)."""
    return runtime.array(arr, device=device)


def empty(shape, dtype="float32", device=None) -> NDArray:
    """Uninitialized storage of `shape` and `dtype` meant for `device`."""
    return runtime.empty(shape, dtype, device=device)


__all__ = ["NDArray", "array", "empty"]
