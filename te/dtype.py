"""dtype strings and the promotion rules every layer shares.

A dtype is a string: "float32", "int8", "bool", or a vector "float32x8". Imports nothing but
te.errors.

Promotion (binary arithmetic and comparisons of two expressions):
  * bool < integers < floats: the operand of the lower kind converts to the higher kind;
    among floats, or among integers of the same signedness, the wider one wins;
  * signed with unsigned: the signed type if it is strictly wider, otherwise the signed type
    of twice the unsigned width (capped at 64), as numpy does;
  * a Python int next to an expression takes the expression's dtype (bool becomes int32);
    a Python float next to an integer or bool expression gives float32 (as TVM does), next
    to a float expression it takes that dtype.
"""
from __future__ import annotations

import functools

from .errors import DTypeError

SCALAR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64")


@functools.lru_cache(maxsize=256)
def split_lanes(dtype: str) -> tuple[str, int]:
    """'float32x8' -> ('float32', 8); 'int32' -> ('int32', 1)."""
    if "x" in dtype:
        base, lanes = dtype.split("x", 1)
        return base, int(lanes)
    return dtype, 1


def check_dtype(dtype, param: str = "dtype") -> str:
    """Return the canonical scalar dtype string or raise DTypeError naming `param`."""
    name = getattr(dtype, "name", dtype)  # numpy dtypes and dtype classes
    if isinstance(name, type):
        name = name.__name__
    name = str(name)
    if name not in SCALAR_DTYPES:
        raise DTypeError(f"{param}: expected one of {', '.join(SCALAR_DTYPES)}, got {dtype!r}")
    return name


def base(dtype: str) -> str:
    return split_lanes(dtype)[0]


def lanes(dtype: str) -> int:
    return split_lanes(dtype)[1]


def with_lanes(dtype: str, n: int) -> str:
    b = base(dtype)
    return b if n == 1 else f"{b}x{n}"


def is_float(dtype: str) -> bool:
    return base(dtype).startswith("float")


def is_int(dtype: str) -> bool:
    return base(dtype).startswith("int")


def is_uint(dtype: str) -> bool:
    return base(dtype).startswith("uint")


def is_bool(dtype: str) -> bool:
    return base(dtype) == "bool"


def is_integral(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return is_int(dtype) or is_uint(dtype)


def bits(dtype: str) -> int:
    b = base(dtype)
    if b == "bool":
        return 1
    return int(b.lstrip("uintfloa"))


def int_range(dtype: str) -> tuple[int, int]:
    """(min, max) of an integer dtype."""
    n = bits(dtype)
    return (0, 2 ** n - 1) if is_uint(dtype) else (-(2 ** (n - 1)), 2 ** (n - 1) - 1)


def wrap(value: int, dtype: str) -> int:
    """An integer reduced to the width of integer or bool `dtype`, as the generated code
    computes it (two's complement for signed types)."""
    n = bits(dtype)
    value &= (1 << n) - 1
    if is_int(dtype) and value >= 1 << (n - 1):
        value -= 1 << n
    return value


def _kind_rank(dtype: str) -> int:
    return 0 if is_bool(dtype) else (2 if is_float(dtype) else 1)


def promote(a: str, b: str) -> str:
    """The dtype two scalar operands of dtypes `a` and `b` are converted to."""
    a, b = base(a), base(b)
    if a == b:
        return a
    ra, rb = _kind_rank(a), _kind_rank(b)
    if ra != rb:
        return a if ra > rb else b
    if is_float(a) or is_uint(a) == is_uint(b):
        return a if bits(a) >= bits(b) else b
    signed, unsigned = (a, b) if is_int(a) else (b, a)
    if bits(signed) > bits(unsigned):
        return signed
    return f"int{min(64, 2 * bits(unsigned))}"

