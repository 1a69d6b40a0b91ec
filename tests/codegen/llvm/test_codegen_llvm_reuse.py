"""LLVM codegen: values reused within a basic block (value numbering, loads of an address
already loaded or stored) and constant divisors, checked for results and for the IR text.

Imports the helpers of tests/llvm_helpers.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from runtime.checker import INDEX_LIMIT
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc
from te.codegen.llvm.codegen import codegen_llvm

from llvm_helpers import binop, buffer, compile_func, i32


def _const_divisor_func(name: str, dtype: str, op: str, c: int, n: int) -> PrimFunc:
    i = E.Var("i", "int32")
    a, out = buffer("a", dtype, n), buffer("out", dtype, n)
    value = binop(op, ir.Load(dtype, a, i), E.Const(dtype, c))
    return PrimFunc(name, (a, out), (), ir.For(i, i32(0), i32(n), ir.SERIAL,
                                                    ir.Store(out, i, value)))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("c", [1, 2, 8, 3, 7, -4])
def test_floor_division_by_constants_on_negative_numbers(dtype, c):
    info = np.iinfo(dtype)
    a = np.concatenate([np.arange(-40, 41), [info.min, info.min + 1, info.max]]).astype(dtype)
    for op, ref in (("floordiv", np.floor_divide), ("floormod", np.mod)):
        f = _const_divisor_func(f"{op}_{dtype}_{c}".replace("-", "m"), dtype, op, c, len(a))
        out = np.zeros_like(a)
        compile_func(f)(a, out)
        np.testing.assert_array_equal(out, ref(a, np.array(c, dtype)), err_msg=op)


def test_power_of_two_divisor_is_a_shift_and_a_mask():
    text = codegen_llvm(_const_divisor_func("p2", "int32", "floordiv", 32, 8),
                        index_limit=INDEX_LIMIT)
    assert "ashr i32" in text and "sdiv" not in text and "srem" not in text
    text = codegen_llvm(_const_divisor_func("p2m", "int32", "floormod", 32, 8),
                        index_limit=INDEX_LIMIT)
    assert "and i32" in text and "srem" not in text


def _unrolled_copy(n_copies: int) -> PrimFunc:
    """out[i*4 + k] = a[i*4 + k] * a[i*4] for k < n_copies, written out as straight-line
    stores (as the unroll pass leaves them): one block, repeated subexpressions."""
    i = E.Var("i", "int32")
    a, out = buffer("a", "float32", 64), buffer("out", "float32", 64)

    def base():  # a fresh tree each time: reuse must not depend on node identity
        return binop("mul", i, i32(4))
    stores = []
    for k in range(n_copies):
        index = binop("add", base(), i32(k))
        value = binop("mul", ir.Load("float32", a, index), ir.Load("float32", a, base()))
        stores.append(ir.Store(out, binop("add", base(), i32(k)), value))
    body = ir.For(i, i32(0), i32(16), ir.SERIAL, ir.seq(*stores))
    return PrimFunc("unrolled", (a, out), (), body)


def test_repeated_index_arithmetic_and_loads_are_emitted_once():
    text = codegen_llvm(_unrolled_copy(4), index_limit=INDEX_LIMIT)
    body = text.split("for_i_body:")[1]
    assert body.count(" mul nsw i32") == 1
    # a[i*4] (k = 0 and the common factor) plus a[i*4 + 1..3]
    assert body.count("load float") == 4
    a = np.arange(64, dtype="float32")
    out = np.zeros(64, "float32")
    compile_func(_unrolled_copy(4))(a, out)
    np.testing.assert_array_equal(out, a * np.repeat(a[::4], 4))


def test_a_store_between_two_loads_of_the_address_is_seen():
    """x = a[0]; a[0] = x + 1; out[0] = x; out[1] = a[0]; out[2] = a[1] (one block)."""
    a, out = buffer("a", "float32", 2), buffer("out", "float32", 3)
    z, one = i32(0), i32(1)
    load0 = ir.Load("float32", a, z)
    body = ir.seq(
        ir.Store(out, z, load0),
        ir.Store(a, z, binop("add", ir.Load("float32", a, z), E.Const("float32", 1.0))),
        ir.Store(out, one, ir.Load("float32", a, z)),
        ir.Store(out, i32(2), ir.Load("float32", a, one)),
    )
    f = PrimFunc("store_between", (a, out), (), body)
    data = np.array([5.0, 9.0], "float32")
    result = np.zeros(3, "float32")
    compile_func(f)(data, result)
    np.testing.assert_array_equal(result, [5.0, 6.0, 9.0])
    np.testing.assert_array_equal(data, [6.0, 9.0])


def test_values_of_a_branch_are_not_reused_after_it():
    """The same index inside an if and after it: the second must be computed again (a
    value from the branch would not dominate its use; the verifier would reject it)."""
    i = E.Var("i", "int32")
    a, out = buffer("a", "float32", 48), buffer("out", "float32", 32)
    idx = lambda: binop("mul", i, i32(3))  # noqa: E731
    then = ir.Store(out, i, ir.Load("float32", a, idx()))
    after = ir.Store(out, binop("add", i, i32(16)), ir.Load("float32", a, idx()))
    cond = binop("lt", i, i32(8))
    body = ir.For(i, i32(0), i32(16), ir.SERIAL, ir.seq(ir.IfThenElse(cond, then), after))
    f = PrimFunc("branch_reuse", (a, out), (), body)
    data = np.arange(48, dtype="float32")
    result = np.zeros(32, "float32")
    compile_func(f)(data, result)
    expected = np.zeros(32, "float32")
    expected[:8] = data[0:24:3]
    expected[16:] = data[0:48:3]
    np.testing.assert_array_equal(result, expected)
