"""Python functions that compiled code calls by name (TVM's global PackedFunc registry).

register_func / get_global_func keep the registry; native __te_call_packed(spec, slots),
which generated code calls, passes a function NDArrays viewing the kernel's buffers (no
copy) and scalars; what it raises, the module re-raises (PACKED_STATUS); register_symbol()
(runtime.cpu's, before the first JIT compile) gives LLVM its address. Imports numpy, ndarray."""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

import numpy as np

from .ndarray import NDArray

# The ABI: i32 __te_call_packed(ptr spec, ptr slots). spec is "name|b:float32:2|i:int32|
# f:float32" (a buffer of that dtype and rank, then scalars); slots hold one int64 per buffer
# pointer, dimension and stride (in elements), and per scalar (a float's float64 bits).
SYMBOL = "__te_call_packed"
PACKED_STATUS = 0x5041434B  # "PACK": far from the codes a kernel returns otherwise

_functions: dict = {}
_specs: dict = {}  # spec bytes -> (name, [(kind, dtype, ndim)])
_lock = threading.Lock()
_pending: list = []  # the exception a packed function raised, until the module raises it


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register `f` as `func_name` (TVM's tvm.register_func): as a call, or as a decorator
    (`@register_func("name")`, or bare `@register_func` to use the function's own name)."""
    if callable(func_name) and f is None:
        return register_func(func_name.__name__, func_name, override)
    if not isinstance(func_name, str) or not func_name or "|" in func_name:
        raise ValueError(f"register_func: func_name must be a non-empty string without '|', "
                         f"got {func_name!r}")

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func: expected a callable for {func_name!r}, got "
                            f"{type(fn).__name__}")
        with _lock:
            if func_name in _functions and not override:
                raise ValueError(f"register_func: a function is already registered as "
                                 f"{func_name!r}; pass override=True to replace it")
            _functions[func_name] = fn
        return fn
    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as `name`; None when allow_missing, else ValueError."""
    fn = _functions.get(name)
    if fn is None and not allow_missing:
        raise ValueError(f"get_global_func: no function is registered as {name!r}; "
                         f"register it with register_func({name!r})")
    return fn


def list_global_func_names() -> list:
    return sorted(_functions)


def take_error() -> BaseException:
    """The exception a packed function raised (the one its kernel stopped on)."""
    with _lock:
        err = _pending.pop() if _pending else None
        _pending.clear()
    return err or RuntimeError("a packed function failed")


def _parse(spec: bytes) -> tuple:
    parsed = _specs.get(spec)
    if parsed is None:
        name, *fields = spec.decode("utf-8").split("|")
        args = []
        for field in fields:
            kind, dtype, *rank = field.split(":")
            args.append((kind, dtype, int(rank[0]) if rank else 0))
        parsed = _specs[spec] = (name, args)
    return parsed


def _array(slots, k: int, dtype: str, ndim: int) -> tuple:
    ptr = slots[k]
    shape = tuple(slots[k + 1 + d] for d in range(ndim))
    strides = tuple(slots[k + 1 + ndim + d] for d in range(ndim))
    np_dtype = np.dtype(dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    raw = (ctypes.c_char * (span * np_dtype.itemsize)).from_address(ptr) if span else b""
    flat = np.frombuffer(raw, dtype=np_dtype) if span else np.empty(0, np_dtype)
    view = np.lib.stride_tricks.as_strided(
        flat, shape, tuple(s * np_dtype.itemsize for s in strides), writeable=True)
    return NDArray(view), k + 1 + 2 * ndim


def _call(spec: bytes, slots) -> int:
    try:
        name, fields = _parse(spec)
        fn = get_global_func(name)
        args, k = [], 0
        for kind, dtype, ndim in fields:
            if kind == "b":
                arr, k = _array(slots, k, dtype, ndim)
                args.append(arr)
                continue
            raw = slots[k]
            k += 1
            if kind == "f":
                args.append(float(np.int64(raw).view(np.float64)))
            elif dtype == "bool":
                args.append(bool(raw))
            else:
                args.append(int(raw))
        fn(*args)
        return 0
    except BaseException as err:  # noqa: BLE001 (handed to the caller of the kernel)
        with _lock:
            _pending.append(err)
        return PACKED_STATUS


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p,
                             ctypes.POINTER(ctypes.c_int64))(_call)


def register_symbol() -> None:
    """Make SYMBOL resolvable by the JIT (cheap; LLVM keeps the last address given)."""
    from llvmlite import binding as llvm
    llvm.add_symbol(SYMBOL, ctypes.cast(_CALLBACK, ctypes.c_void_p).value)
