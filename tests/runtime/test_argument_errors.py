"""Every ArgumentError a kernel call can raise, with its message pinned."""

import numpy as np
import pytest

from rt_kernels import NARROW_LL, NARROW_SIGNATURE

import runtime
from runtime import ArgSpec, ArgumentError, KernelSignature, ScalarSpec


def f32(*shape):
    return np.zeros(shape, np.float32)


def f64(*shape):
    return np.zeros(shape, np.float64)


def test_argument_error_is_a_value_error():
    assert issubclass(ArgumentError, ValueError)


def test_wrong_count(add_module):
    with pytest.raises(ArgumentError, match=r"^expected 3 arguments \(A, B, C\), got 2$"):
        add_module(f32(4), f32(4))


def test_wrong_type(add_module):
    with pytest.raises(
        ArgumentError, match=r"^argument 'B': expected a numpy array or NDArray, got list$"
    ):
        add_module(f32(4), [0.0] * 4, f32(4))


def test_wrong_dtype(add_module):
    with pytest.raises(ArgumentError, match=r"^argument 'C': expected dtype float32, got float64$"):
        add_module(f32(4), f32(4), f64(4))


def test_wrong_rank(add_module):
    with pytest.raises(
        ArgumentError, match=r"^argument 'A': expected rank 1, got rank 2 \(shape \(2, 2\)\)$"
    ):
        add_module(f32(2, 2), f32(4), f32(4))


def test_non_contiguous(add_module):
    strided = f32(8)[::2]
    with pytest.raises(
        ArgumentError,
        match=r"^argument 'B': expected a C-contiguous array, got strides \(8,\) for shape \(4,\)",
    ):
        add_module(f32(4), strided, f32(4))


def test_wrong_static_dim(scale2d_module):
    with pytest.raises(ArgumentError, match=r"^argument 'X' shape\[1\]: expected 17, got 16$"):
        scale2d_module(f64(3, 16), f64(17), f64(3, 17))
    with pytest.raises(ArgumentError, match=r"^argument 'W' shape\[0\]: expected 17, got 18$"):
        scale2d_module(f64(3, 17), f64(18), f64(3, 17))


def test_inconsistent_size_variable(add_module, scale2d_module):
    with pytest.raises(
        ArgumentError,
        match=r"^argument 'C' shape\[0\]: expected 5 \(n, bound from argument 'A' shape\[0\]\), "
        r"got 6$",
    ):
        add_module(f32(5), f32(5), f32(6))
    with pytest.raises(
        ArgumentError,
        match=r"^argument 'Y' shape\[0\]: expected 3 \(m, bound from argument 'X' shape\[0\]\), "
        r"got 4$",
    ):
        scale2d_module(f64(3, 17), f64(17), f64(4, 17))


def test_ndarray_arguments_are_checked_too(add_module):
    with pytest.raises(ArgumentError, match=r"^argument 'A': expected dtype float32, got int32$"):
        add_module(runtime.empty((4,), "int32"), f32(4), f32(4))


def test_size_variable_must_fit_its_dtype():
    module = runtime.Module(runtime.compile_llvm(NARROW_LL), NARROW_SIGNATURE)
    module(np.zeros(127, np.uint8))
    with pytest.raises(
        ArgumentError,
        match=r"^size variable 'n' \(bound from argument 'X' shape\[0\]\): expected a value "
        r"that fits int8 \(<= 127\), got 128$",
    ):
        module(np.zeros(128, np.uint8))


def test_errors_are_raised_before_native_code_runs(add_module):
    c = np.full(4, 7, np.float32)
    with pytest.raises(ArgumentError):
        add_module(f32(4), f32(4), c, f32(4))
    np.testing.assert_array_equal(c, 7)


@pytest.mark.parametrize(
    "signature, message",
    [
        (KernelSignature("k", (ArgSpec("A", "float32", ("n",)),)),
         "argument 'A' shape names 'n', which is not among the scalars"),
        (KernelSignature("k", (ArgSpec("A", "float32", (4,)),), (ScalarSpec("n", "int32"),)),
         "scalar 'n' appears in no argument shape"),
        (KernelSignature("k", (ArgSpec("A", "complex64", (4,)),)),
         "argument 'A' has unsupported dtype 'complex64'"),
        (KernelSignature("k", (ArgSpec("A", "float32", (4,)), ArgSpec("A", "float32", (4,)))),
         "duplicate argument name 'A'"),
        (KernelSignature("k", (ArgSpec("A", "float32", ("n",)),), (ScalarSpec("n", "float32"),)),
         "scalar 'n' has dtype 'float32'; expected an integer dtype"),
    ],
)
def test_bad_signature_is_rejected_at_construction(add_module, signature, message):
    with pytest.raises(ValueError, match=message):
        runtime.Module(add_module.library, signature)
