"""The one statement walker (te.lower.visitor.walk_stmts, pre_order_exprs, walk_down) and
the walks built on it: program order, and nests deeper than Python recurses. Takes
hand-built loop IR; imports te.lower.{ir,visitor,buffers,passes.device_sync,
passes.loop_partition} and te.codegen.llvm.codegen.
"""
from __future__ import annotations

import sys

import pytest

from runtime.checker import INDEX_LIMIT
from te.codegen.llvm.codegen import codegen_llvm, refuse_thread_binding
from te.compute import expr as E
from te.errors import BuildError
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.buffers import loaded_buffers, stored_buffers
from te.lower.passes.device_sync import filled_name, stage_name
from te.lower.passes.loop_partition import _guards_and_ranges
from te.lower.visitor import SKIP, pre_order_exprs, walk_down, walk_scoped, walk_stmts

DEEP = sys.getrecursionlimit() * 3


def buffer(name: str) -> ir.Buffer:
    return ir.Buffer(name, "float32", (8,), (1,), data=E.Var(name, "handle"))


def i32(v: int) -> E.Const:
    return E.Const("int32", v)


def loop(name: str, body: ir.Stmt, kind: str = ir.SERIAL, tag: str = "") -> ir.For:
    return ir.For(E.Var(name, "int32"), i32(0), i32(8), kind, body, thread_tag=tag)


def deep_nest(leaf: ir.Stmt, depth: int = DEEP) -> ir.Stmt:
    """`depth` nested lets around `leaf`, built without recursion."""
    s = leaf
    for k in range(depth):
        s = ir.LetStmt(E.Var(f"v{k}", "int32"), i32(k), s)
    return s


def test_walk_stmts_is_pre_order_in_program_order():
    a, b, c = buffer("A"), buffer("B"), buffer("C")
    i = E.Var("i", "int32")
    store_a = ir.Store(a, i, E.Const("float32", 1.0))
    store_b = ir.Store(b, i, ir.Load("float32", a, i))
    store_c = ir.Store(c, i, E.Const("float32", 2.0))
    guarded = ir.IfThenElse(i < 4, store_b, store_c)
    body = ir.SeqStmt((store_a, guarded))
    outer = ir.For(i, i32(0), i32(8), ir.SERIAL, body)
    assert list(walk_stmts(outer)) == [outer, body, store_a, guarded, store_b, store_c]
    assert list(walk_stmts(outer, reverse=True)) == [outer, body, guarded, store_c, store_b,
                                                     store_a]


def test_pre_order_exprs_visits_a_statements_own_expressions_first():
    a, b = buffer("A"), buffer("B")
    i, n = E.Var("i", "int32"), E.Var("n", "int32")
    inner = ir.Store(b, i, ir.Load("float32", a, i))
    outer = ir.For(i, i32(0), n, ir.SERIAL, inner)
    seen = []
    pre_order_exprs(outer, seen.append)
    assert seen[:2] == [outer.min, n]
    assert seen[2:] == [i, inner.value, i]


def test_walk_stmts_handles_nests_deeper_than_the_recursion_limit():
    leaf = ir.Store(buffer("A"), i32(0), E.Const("float32", 1.0))
    nodes = list(walk_stmts(deep_nest(leaf)))
    assert len(nodes) == DEEP + 1 and nodes[-1] is leaf


def test_device_sync_names_the_stage_a_nest_stores_last():
    """A stage's nest computes its producers (compute_at) before its own store."""
    i = E.Var("i", "int32")
    fill, out = buffer("A_shared"), buffer("C")
    nest = ir.SeqStmt((ir.Store(fill, i, E.Const("float32", 1.0)),
                       ir.Store(out, i, ir.Load("float32", fill, i))))
    assert stage_name(nest) == "C"
    assert filled_name(nest) == "C"
    assert filled_name(ir.Allocate(out, i32(8), nest)) == "A_shared"
    assert stage_name(ir.Evaluate(i32(0))) == "?"


def test_device_sync_walks_deep_nests():
    a, b = buffer("A"), buffer("B")
    leaf = ir.Store(b, i32(0), ir.Load("float32", a, i32(0)))
    nest = deep_nest(leaf)
    assert stored_buffers(nest) == {b.data}
    assert loaded_buffers(nest) == {a.data}


REFUSED = (r"te.build: loop 'tx' is bound to thread axis 'threadIdx.x'; thread-bound loops "
           r"need target 'cuda' \(remove the bind for target 'llvm'\)")


def test_thread_binding_refusal_reaches_a_deeply_nested_loop():
    leaf = loop("tx", ir.Store(buffer("A"), i32(0), E.Const("float32", 1.0)),
                ir.THREAD_BINDING, "threadIdx.x")
    with pytest.raises(BuildError, match=REFUSED):
        refuse_thread_binding(deep_nest(leaf))


def test_llvm_codegen_refuses_thread_binding_as_te_build_does():
    a = buffer("A")
    body = loop("tx", ir.Store(a, i32(0), E.Const("float32", 1.0)), ir.THREAD_BINDING,
                "threadIdx.x")
    with pytest.raises(BuildError, match=REFUSED):
        codegen_llvm(PrimFunc("bound", (a,), (), ir.SeqStmt((body,))), index_limit=INDEX_LIMIT)


def test_loop_partition_collects_guards_under_deep_nests():
    i = E.Var("i", "int32")
    cond = i < 5
    leaf = ir.For(i, i32(0), i32(8), ir.SERIAL,
                  ir.IfThenElse(cond, ir.Store(buffer("A"), i, E.Const("float32", 1.0))))
    guards, ranges, unsafe = [], {}, set()
    _guards_and_ranges(deep_nest(leaf), guards, ranges, unsafe)
    assert guards == [cond]
    assert set(ranges) == {i} and len(unsafe) == DEEP


def test_walk_down_carries_a_state_down_each_path_and_skips_on_request():
    """Each statement sees what its path gives; SKIP leaves a statement's children out."""
    out = buffer("out")
    store = ir.Store(out, i32(0), E.Const("float32", 1.0))
    hidden = ir.Store(out, i32(1), E.Const("float32", 2.0))
    inner = loop("j", store)
    skipped = loop("k", hidden)
    s = loop("i", ir.seq(inner, skipped))

    def depth(node, d):
        return SKIP if isinstance(node, ir.For) and node.loop_var.name == "k" else d + 1
    seen = [(type(n).__name__, d) for n, d in walk_down(s, 0, depth)]
    assert seen == [("For", 0), ("SeqStmt", 1), ("For", 2), ("Store", 3), ("For", 2)]


def test_walk_scoped_knows_the_variables_around_each_statement_even_when_deep():
    leaf = ir.Store(buffer("out"), i32(0), E.Const("float32", 1.0))
    nest = deep_nest(leaf)
    bound = {n: b for n, b in walk_scoped(nest)}
    assert len(bound[leaf]) == DEEP and bound[nest] == frozenset()
    assert nest.var in bound[leaf] and nest.var not in bound[nest]
