"""LLVM constants of every integer width (te.dtype.wrap gives their two's complement form)
and the folding of constant integer arithmetic in the LLVM code generator: the stored
values equal numpy's. Takes hand-built PrimFuncs; imports te.lower.ir, te.compute.expr and
the compile helpers of tests/llvm_helpers.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from runtime.checker import INDEX_LIMIT
from te.codegen.llvm.codegen import codegen_llvm
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc
from llvm_helpers import buffer, compile_func, i32

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("dtype", INTS)
def test_integer_constants_and_folded_arithmetic_store_numpys_values(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    picks = [int(info.min), int(info.max), 0, 1, int(info.max) // 3]
    picks += [int(x) for x in rng.integers(info.min, info.max, 3, dtype=dtype, endpoint=True)]
    out = buffer("out", dtype, 3 * len(picks))
    stores, expected = [], []
    for k, v in enumerate(picks):
        c = E.Const(dtype, v)
        # add, mul and sub of constants are folded by the code generator (wrapping)
        for j, (op, other) in enumerate((("add", 7), ("mul", 3), ("sub", 123))):
            stores.append(ir.Store(out, i32(3 * k + j), E.Binary(dtype, op, c,
                                                                 E.Const(dtype, other))))
            a = np.array([v], dtype=dtype)
            b = np.array([other], dtype=dtype)
            with np.errstate(over="ignore"):
                expected.append({"add": a + b, "mul": a * b, "sub": a - b}[op][0])
    func = PrimFunc("consts", (out,), (), ir.SeqStmt(tuple(stores)))
    got = np.zeros(3 * len(picks), dtype)
    compile_func(func)(got)
    np.testing.assert_array_equal(got, np.array(expected, dtype=dtype))


def test_constants_print_in_twos_complement():
    out8, out32 = buffer("o8", "uint8", 1), buffer("o32", "uint32", 1)
    body = ir.SeqStmt((ir.Store(out8, i32(0), E.Const("uint8", 255)),
                       ir.Store(out32, i32(0), E.Const("uint32", 2 ** 32 - 2))))
    text = codegen_llvm(PrimFunc("c", (out8, out32), (), body), index_limit=INDEX_LIMIT)
    assert "store i8 -1," in text and "store i32 -2," in text


def test_bool_constants_store_true_and_false():
    out = buffer("ob", "bool", 2)
    body = ir.SeqStmt((ir.Store(out, i32(0), E.Const("bool", True)),
                       ir.Store(out, i32(1), E.Const("bool", False))))
    got = np.array([False, True])
    compile_func(PrimFunc("b", (out,), (), body))(got)
    assert got.tolist() == [True, False]
