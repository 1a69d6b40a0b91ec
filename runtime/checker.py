"""Argument checking for a kernel call: user arrays -> raw pointers and size-variable values.

Takes a KernelSignature; gives ArgumentChecker, whose convert(args) checks numpy arrays or
NDArrays (count, type, rank, dtype, contiguity, shape, size variables, int32 index range,
writeable and non-overlapping outputs) and returns what the native entry point takes. Each
failure is an ArgumentError naming the argument, the expectation and what came. Imports numpy.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ArgumentError
from .ndarray import SUPPORTED_DTYPES, NDArray
from .signature import (SHAPE_OPS, ArgSpec, KernelSignature, evaluate_shape_entry,
                        format_shape_entry, shape_entry_names)

SCALAR_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
}
# A scalar the caller passes (ScalarSpec.position) may be a float as well.
PASSED_CTYPES = {**SCALAR_CTYPES, "float32": ctypes.c_float, "float64": ctypes.c_double}


def _probe_data_offset() -> int | None:
    # numpy's C ABI puts `char *data` right after PyObject_HEAD; reading it through ctypes
    # is several times cheaper than arr.ctypes.data. Verified here, else we fall back.
    probe = np.arange(8, dtype=np.float64)[3:]
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    if ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data:
        return offset
    return None


_DATA_OFFSET = _probe_data_offset()
# Kernels index with int32; the headroom covers loops split past the end (i * factor + j).
INDEX_LIMIT = 2**31 - 2**20
_read_pointer = ctypes.c_void_p.from_address


def data_pointer(array: np.ndarray) -> int:
    """The address of a numpy array's data, read the cheap way where it was verified."""
    if _DATA_OFFSET:
        return _read_pointer(id(array) + _DATA_OFFSET).value or 0
    return array.ctypes.data


@dataclass(frozen=True)
class _ArgCheck:
    name: str
    ndim: int
    dtype: np.dtype
    static_shape: tuple[int, ...] | None  # the whole shape when no entry is symbolic
    entries: tuple[tuple[int, int | str], ...]  # (dim, expected) pairs, in order
    output: bool
    derived: tuple = ()  # (dim, expression) pairs: checked once every variable is bound


class ArgumentChecker:
    """Validates call arguments against one signature; built once per module."""

    def __init__(self, signature: KernelSignature) -> None:
        _validate_signature(signature)
        self.signature = signature
        # The caller's argument list: the buffers with the passed scalars at their positions.
        self._passed = {s.position: s for s in signature.scalars if s.position is not None}
        names = [arg.name for arg in signature.args]
        for position in sorted(self._passed):
            names.insert(position, self._passed[position].name)
        self._names = tuple(names)
        self._buffer_names = tuple(arg.name for arg in signature.args)
        self._checks = tuple(_make_check(arg) for arg in signature.args)
        self._scalar_limits = tuple(
            (scalar.name, None) if scalar.position is not None else
            (scalar.name, min(int(np.iinfo(scalar.dtype).max), INDEX_LIMIT - 1))
            for scalar in signature.scalars
        )
        outputs = [k for k, arg in enumerate(signature.args) if arg.output]
        # Each (output, other) pair once; two outputs are compared in one order only.
        self._overlap_pairs = tuple(
            (o, k) for o in outputs for k in range(len(signature.args))
            if k != o and not (k in outputs and k < o)
        )
        self._scalar_dtypes = {scalar.name: scalar.dtype for scalar in signature.scalars}
        self._symbolic = bool(signature.scalars)
        self._derived = any(check.derived for check in self._checks)
        self.ctypes_argtypes = (
            [ctypes.c_void_p] * len(signature.args)
            + [PASSED_CTYPES[scalar.dtype] for scalar in signature.scalars]
        )

    def _split(self, args: Sequence[Any]) -> tuple[list, dict]:
        """(the buffer arguments, passed scalar name -> its value, checked)."""
        arrays, values = [], {}
        for k, arg in enumerate(args):
            spec = self._passed.get(k)
            if spec is None:
                arrays.append(arg)
            else:
                values[spec.name] = _passed_value(spec, arg)
        return arrays, values

    def convert(self, args: Sequence[Any]) -> list[int]:
        """Check `args` and return data pointers followed by size-variable values."""
        if len(args) != len(self._names):
            raise ArgumentError(
                f"expected {len(self._names)} arguments ({', '.join(self._names)}), "
                f"got {len(args)}"
            )
        values: dict = {}
        if self._passed:
            args, values = self._split(args)
        # The hot path of every call: no message is formatted unless a check fails.
        raw: list[int] = []
        sizes: list[int] = []
        bound: dict[str, tuple[int, str, int]] = {}
        shapes: list = []
        for arg, check in zip(args, self._checks):
            if isinstance(arg, np.ndarray):
                array = arg
            elif isinstance(arg, NDArray):
                array = arg._data
            else:
                raise ArgumentError(f"argument '{check.name}': expected a numpy array or "
                                    f"NDArray, got {type(arg).__name__}")
            if array.ndim != check.ndim or array.dtype != check.dtype:
                _raise_rank_or_dtype(check, array)
            flags = array.flags
            if not flags.c_contiguous:
                raise ArgumentError(
                    f"argument '{check.name}': expected a C-contiguous array, got strides "
                    f"{array.strides} for shape {array.shape} (pass np.ascontiguousarray(...))"
                )
            shape = array.shape
            shapes.append(shape)
            if shape != check.static_shape:
                for dim, expected in check.entries:
                    actual = shape[dim]
                    if expected.__class__ is int:
                        if actual != expected:
                            _raise_shape(check, dim, expected, actual, None)
                    else:
                        previous = bound.get(expected)
                        if previous is None:
                            bound[expected] = (actual, check.name, dim)
                        elif previous[0] != actual:
                            _raise_shape(check, dim, expected, actual, previous)
                # Static shapes are checked against the limit by te.build.
                if array.size >= INDEX_LIMIT:
                    raise ArgumentError(f"argument '{check.name}': {array.size} elements exceed "
                                        "the int32 index range of this kernel")
            if check.output and not flags.writeable:
                raise ArgumentError(f"argument '{check.name}': expected a writeable array "
                                    "(it is an output), got a read-only array")
            if _DATA_OFFSET:
                raw.append(_read_pointer(id(array) + _DATA_OFFSET).value)
            else:
                raw.append(array.ctypes.data)
            sizes.append(array.nbytes)
        if self._derived:
            _check_derived(self._checks, shapes, bound)
        for o, k in self._overlap_pairs:
            # [raw, raw + size) intervals intersect; empty arrays overlap nothing.
            if (sizes[o] and sizes[k]
                    and raw[o] < raw[k] + sizes[k] and raw[k] < raw[o] + sizes[o]):
                _raise_overlap(self._buffer_names[o], self._buffer_names[k])
        if self._symbolic:
            for name, limit in self._scalar_limits:
                if limit is None:  # passed by the caller
                    raw.append(values[name])
                    continue
                value = bound[name][0]
                if value > limit:
                    _raise_scalar_range(name, self._scalar_dtypes[name], bound[name])
                raw.append(value)
        return raw


def _check_derived(checks: tuple, shapes: list, bound: dict) -> None:
    """Dimensions given by expressions over size variables, now that all are bound."""
    values = {name: binding[0] for name, binding in bound.items()}
    for check, shape in zip(checks, shapes):
        for dim, entry in check.derived:
            expected = evaluate_shape_entry(entry, values)
            if shape[dim] != expected:
                names = sorted(shape_entry_names(entry))
                where = ", ".join(f"{name}={values[name]}" for name in names)
                raise ArgumentError(f"argument '{check.name}' shape[{dim}]: expected "
                                    f"{expected} ({format_shape_entry(entry)} with {where}), "
                                    f"got {shape[dim]}")


def _passed_value(spec, value: Any):
    """The caller's value of scalar `spec`, as the number its ctypes type takes."""
    kind = np.dtype(spec.dtype).kind
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if ok and kind in "iu":
        ok = isinstance(value, (int, np.integer))
        if ok and not np.iinfo(spec.dtype).min <= int(value) <= np.iinfo(spec.dtype).max:
            raise ArgumentError(f"argument '{spec.name}': {value} does not fit {spec.dtype}")
    if not ok:
        raise ArgumentError(f"argument '{spec.name}': expected a {spec.dtype} number, got "
                            f"{type(value).__name__}")
    return float(value) if kind == "f" else int(value)


def _raise_rank_or_dtype(check: _ArgCheck, array: np.ndarray) -> None:
    if array.ndim != check.ndim:
        raise ArgumentError(
            f"argument '{check.name}': expected rank {check.ndim}, got rank {array.ndim} "
            f"(shape {array.shape})"
        )
    got = array.dtype.name if array.dtype.isnative else array.dtype.str
    raise ArgumentError(f"argument '{check.name}': expected dtype {check.dtype.name}, got {got}")


def _raise_shape(
    check: _ArgCheck, dim: int, expected: int | str, actual: int,
    previous: tuple[int, str, int] | None,
) -> None:
    where = f"argument '{check.name}' shape[{dim}]"
    if previous is None:
        raise ArgumentError(f"{where}: expected {expected}, got {actual}")
    value, arg_name, arg_dim = previous
    raise ArgumentError(
        f"{where}: expected {value} ({expected}, bound from argument '{arg_name}' "
        f"shape[{arg_dim}]), got {actual}"
    )


def _raise_overlap(output: str, other: str) -> None:
    raise ArgumentError(f"argument '{output}' overlaps argument '{other}' in memory; outputs "
                        "must not alias inputs (kernel parameters are noalias)")


def _raise_scalar_range(name: str, dtype: str, binding: tuple[int, str, int]) -> None:
    value, arg_name, arg_dim = binding
    if value <= np.iinfo(dtype).max:
        raise ArgumentError(
            f"size variable '{name}' (bound from argument '{arg_name}' shape[{arg_dim}]): "
            f"{value} exceeds the int32 index range of this kernel"
        )
    raise ArgumentError(
        f"size variable '{name}' (bound from argument '{arg_name}' shape[{arg_dim}]): "
        f"expected a value that fits {dtype} (<= {np.iinfo(dtype).max}), got {value}"
    )


def _make_check(arg: ArgSpec) -> _ArgCheck:
    symbolic = any(not isinstance(entry, int) for entry in arg.shape)
    return _ArgCheck(
        name=arg.name, ndim=len(arg.shape), dtype=np.dtype(arg.dtype),
        static_shape=None if symbolic else tuple(arg.shape),
        entries=tuple((dim, e) for dim, e in enumerate(arg.shape) if not isinstance(e, tuple)),
        output=arg.output,
        derived=tuple((dim, e) for dim, e in enumerate(arg.shape) if isinstance(e, tuple)),
    )


def _validate_signature(signature: KernelSignature) -> None:
    # A bad signature is a bug in the code generator, hence ValueError, not ArgumentError.
    scalar_names = {scalar.name for scalar in signature.scalars}
    used: set[str] = set()
    seen: set[str] = set()
    for arg in signature.args:
        if arg.name in seen:
            raise ValueError(f"kernel signature: duplicate argument name '{arg.name}'")
        seen.add(arg.name)
        if arg.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"kernel signature: argument '{arg.name}' has unsupported dtype "
                             f"{arg.dtype!r}; expected one of {', '.join(SUPPORTED_DTYPES)}")
        for entry in arg.shape:
            if isinstance(entry, str):
                if entry not in scalar_names:
                    raise ValueError(f"kernel signature: argument '{arg.name}' shape names "
                                     f"'{entry}', which is not among the scalars")
                used.add(entry)
            elif isinstance(entry, tuple):
                _validate_expression(arg.name, entry, scalar_names)
            elif isinstance(entry, bool) or not isinstance(entry, int) or entry < 0:
                raise ValueError(f"kernel signature: argument '{arg.name}' shape entry "
                                 f"{entry!r} is neither an int >= 0 nor a size variable name")
    positions = [s.position for s in signature.scalars if s.position is not None]
    if sorted(positions) != sorted(set(positions)) or any(
            not isinstance(p, int) or not 0 <= p < len(signature.args) + len(positions)
            for p in positions):
        raise ValueError(f"kernel signature: scalar positions {positions} are not distinct "
                         f"argument indices")
    for scalar in signature.scalars:
        if scalar.position is not None:  # passed by the caller: any number dtype, no shape
            if scalar.dtype not in PASSED_CTYPES:
                raise ValueError(f"kernel signature: scalar '{scalar.name}' has dtype "
                                 f"{scalar.dtype!r}; expected one of "
                                 f"{', '.join(PASSED_CTYPES)}")
            continue
        if scalar.dtype not in SCALAR_CTYPES:
            raise ValueError(f"kernel signature: scalar '{scalar.name}' has dtype "
                             f"{scalar.dtype!r}; expected an integer dtype")
        if scalar.name not in used:
            # The runtime binds scalars from shapes only; an unbound one has no value to pass.
            raise ValueError(f"kernel signature: scalar '{scalar.name}' appears in no "
                             "argument shape as a dimension of its own, so its value cannot "
                             "be bound")


def _validate_expression(name: str, entry: tuple, scalar_names: set) -> None:
    if len(entry) != 3 or entry[0] not in SHAPE_OPS:
        raise ValueError(f"kernel signature: argument '{name}' shape entry {entry!r} is not "
                         f"(op, a, b) with op one of {', '.join(SHAPE_OPS)}")
    for operand in entry[1:]:
        if isinstance(operand, tuple):
            _validate_expression(name, operand, scalar_names)
        elif isinstance(operand, str):
            if operand not in scalar_names:
                raise ValueError(f"kernel signature: argument '{name}' shape names "
                                 f"'{operand}', which is not among the scalars")
        elif isinstance(operand, bool) or not isinstance(operand, int):
            raise ValueError(f"kernel signature: argument '{name}' shape expression operand "
                             f"{operand!r} is neither an int nor a size variable name")
