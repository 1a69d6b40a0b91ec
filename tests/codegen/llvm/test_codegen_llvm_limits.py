"""The LLVM code generator's index limit comes from the target (te.Target.index_limit, which
is runtime.checker.INDEX_LIMIT), not from a number of its own: a heap buffer at or past it
is refused, one below it is checked at run time against it. Imports te, runtime.checker
and te.codegen.llvm.
"""
from __future__ import annotations

import pytest
from llvm_helpers import buffer, i32

import te
from runtime.checker import INDEX_LIMIT
from te.codegen.llvm.codegen import codegen_llvm
from te.compute import expr as E
from te.errors import BuildError
from te.lower import ir
from te.lower.func import PrimFunc

HEAP = 70000   # float32 elements: past the stack's share, so a heap buffer


def _heap_func() -> PrimFunc:
    out, tmp = buffer("out", "float32", 1), buffer("tmp", "float32", HEAP)
    body = ir.Allocate(tmp, i32(HEAP), ir.SeqStmt((
        ir.Store(tmp, i32(0), E.Const("float32", 1.0)),
        ir.Store(out, i32(0), ir.Load("float32", tmp, i32(0))))))
    return PrimFunc("heap", (out,), (), body)


def test_the_target_carries_the_runtimes_limit():
    assert te.target.parse_target("llvm").index_limit == INDEX_LIMIT


def test_a_heap_buffer_is_checked_against_the_given_limit():
    text = codegen_llvm(_heap_func(), index_limit=INDEX_LIMIT)
    assert f"icmp uge i64 {HEAP}, {INDEX_LIMIT}" in text
    with pytest.raises(BuildError, match=rf"te.build: buffer 'tmp' has {HEAP} elements, beyond "
                                         r"the int32 index range; int64 indexing is not "
                                         r"supported yet"):
        codegen_llvm(_heap_func(), index_limit=HEAP)
