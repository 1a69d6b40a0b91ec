"""NDArray: alignment, round trips, dtypes, copyfrom, dlpack."""

import numpy as np
import pytest

import runtime
from runtime.ndarray import SUPPORTED_DTYPES


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_array_round_trip_is_aligned_copy(dtype):
    source = (np.arange(3 * 5 * 7) % 5).reshape(3, 5, 7).astype(dtype)
    arr = runtime.array(source)
    assert arr.data_ptr % 64 == 0
    assert arr.shape == (3, 5, 7)
    assert arr.dtype == dtype
    result = arr.numpy()
    np.testing.assert_array_equal(result, source)
    result[...] = 0  # numpy() hands out a copy, not a view of the storage
    np.testing.assert_array_equal(arr.asnumpy(), source)


def test_array_from_list_with_dtype():
    arr = runtime.array([[1, 2, 3], [4, 5, 6]], dtype="float64")
    assert arr.dtype == "float64" and arr.shape == (2, 3)
    np.testing.assert_array_equal(arr.numpy(), [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("shape", [(0,), (1,), (13,), (3, 17), ()])
def test_empty_is_aligned(shape):
    arr = runtime.empty(shape, "int16")
    assert arr.shape == shape and arr.dtype == "int16"
    assert arr.data_ptr % 64 == 0


def test_empty_accepts_int_shape_and_defaults_to_float32():
    arr = runtime.empty(5)
    assert arr.shape == (5,) and arr.dtype == "float32"


def test_unsupported_dtype_is_rejected():
    with pytest.raises(ValueError, match=r"dtype: expected one of bool, .*, got complex64"):
        runtime.empty((2,), "complex64")


def test_copyfrom_and_shape_check():
    arr = runtime.empty((4,), "float32")
    assert arr.copyfrom(np.arange(4)) is arr
    np.testing.assert_array_equal(arr.numpy(), [0, 1, 2, 3])
    message = r"copyfrom: expected source of shape \(4,\), got shape \(5,\)"
    with pytest.raises(ValueError, match=message):
        arr.copyfrom(np.arange(5))


def test_dlpack_round_trip():
    arr = runtime.array(np.arange(6, dtype="float32").reshape(2, 3))
    viewed = np.from_dlpack(arr)
    np.testing.assert_array_equal(viewed, arr.numpy())
    assert viewed.ctypes.data == arr.data_ptr


def test_repr_mentions_shape_and_dtype():
    text = repr(runtime.array(np.zeros((2, 2), "int8")))
    assert "shape=(2, 2)" in text and "dtype=int8" in text


def test_data_pointer_is_the_arrays_data_address():
    from runtime.checker import data_pointer
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for a in (base, base[1:], base[2, 3:], np.empty((0,), np.int8), np.array(2.0)):
        assert data_pointer(a) == a.ctypes.data
