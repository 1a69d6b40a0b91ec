"""NDArray: a numpy array whose data pointer is 64-byte aligned.

Takes numpy arrays, lists or shapes; gives NDArray, array() and empty(). Aligned storage lets
generated code use aligned vector loads and keeps cache-line splits out of timings. An array
records the Device it is meant for (TVM's `tvm.nd.array(x, dev)`); its data stays on the
host, and CUDA modules copy it to the GPU per call. Imports numpy and runtime.device.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .devices import Device, cpu

ALIGNMENT = 64

SUPPORTED_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
)


def _check_dtype(dtype: Any) -> np.dtype:
    np_dtype = np.dtype(dtype)
    if np_dtype.name not in SUPPORTED_DTYPES:
        raise ValueError(
            f"dtype: expected one of {', '.join(SUPPORTED_DTYPES)}, got {np_dtype.name}"
        )
    return np_dtype


def _aligned_empty(shape: tuple[int, ...], np_dtype: np.dtype) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    # Over-allocate by one alignment unit, then start the view at the first aligned byte.
    # One spare element keeps zero-size views pointing at the aligned byte, not elsewhere.
    nbytes = (count + 1) * np_dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset:offset + nbytes].view(np_dtype)[:count].reshape(shape)


class NDArray:
    """A dense, C-contiguous, 64-byte aligned array on the host."""

    __slots__ = ("_data", "device")

    def __init__(self, data: np.ndarray, device: Device | None = None) -> None:
        # Callers go through array()/empty(); this only wraps storage that is already aligned.
        self._data = data
        self.device = cpu() if device is None else device

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> str:
        return self._data.dtype.name

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def data_ptr(self) -> int:
        return self._data.ctypes.data

    def numpy(self) -> np.ndarray:
        """A copy of the contents as a plain numpy array."""
        return self._data.copy()

    asnumpy = numpy

    def copyfrom(self, source: np.ndarray | NDArray | Sequence) -> NDArray:
        """Copy `source` (same shape; cast to this dtype) into this array; returns self."""
        if isinstance(source, NDArray):
            source = source._data
        source = np.asarray(source)
        if source.shape != self.shape:
            raise ValueError(
                f"copyfrom: expected source of shape {self.shape}, got shape {source.shape}"
            )
        np.copyto(self._data, source, casting="unsafe")
        return self

    def copyto(self, target: Device | NDArray) -> NDArray:
        """A copy on Device `target`, or this array copied into NDArray `target` (returned)."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if isinstance(target, Device):
            return array(self, device=target)
        raise TypeError(f"copyto: expected a Device or an NDArray, got "
                        f"{type(target).__name__}")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._data.__dlpack_device__()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # Lets np.asarray / np.testing see the data; a copy only when numpy asks for one.
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def __repr__(self) -> str:
        return f"NDArray(shape={self.shape}, dtype={self.dtype},\n{self._data!r})"


def array(data: np.ndarray | NDArray | Sequence, dtype: Any = None,
          device: Device | None = None) -> NDArray:
    """Copy `data` into new aligned storage (cast to `dtype` when given) meant for `device`
    (the CPU by default)."""
    _check_device(device)
    if isinstance(data, NDArray):
        data = data._data
    source = np.asarray(data, dtype=dtype)
    result = _aligned_empty(source.shape, _check_dtype(source.dtype))
    np.copyto(result, source)
    return NDArray(result, device)


def empty(shape: int | Sequence[int], dtype: Any = "float32",
          device: Device | None = None) -> NDArray:
    """Uninitialized aligned storage of the given shape and dtype, meant for `device`."""
    _check_device(device)
    shape_tuple = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    if any(extent < 0 for extent in shape_tuple):
        raise ValueError(f"shape: expected non-negative extents, got {shape_tuple}")
    np_dtype = _check_dtype(dtype)
    count = 1
    for extent in shape_tuple:  # Python ints: np.prod would wrap around silently
        count *= extent
    if (count + 1) * np_dtype.itemsize + ALIGNMENT >= 2**63:
        raise ValueError(f"shape: expected a total size that fits in memory addressing "
                         f"(< 2**63 bytes), got {shape_tuple} of {np_dtype.name}")
    return NDArray(_aligned_empty(shape_tuple, np_dtype), device)


def _check_device(device: Any) -> None:
    if device is not None and not isinstance(device, Device):
        raise TypeError(f"device: expected a Device such as runtime.devices.cpu(0), got "
                        f"{device!r}")
