"""Remembered work in lowering: the Analyzer's per-node results follow range changes, and
substitution (as unroll uses it) rewrites shared subtrees correctly.

Imports te.compute.expr, te.lower.ir, te.lower.arith and the simplify/unroll passes.
"""
import pytest

from te.compute import expr as E
from te.compute.expr import Binary, Const, Var
from te.lower import ir
from te.lower.arith import Analyzer
from te.lower.passes.simplify import _substitute_stmt, simplify_stmt
from te.lower.printer import print_expr
from te.lower.passes.unroll import unroll_loops


def c(v: int) -> Const:
    return Const("int32", v)


def test_results_follow_range_changes():
    x = Var("x")
    e = Binary("int32", "floordiv", x, c(8))
    ana = Analyzer()
    ana.bind(x, 0, 7)
    assert isinstance(ana.simplify(e), Const) and ana.simplify(e).value == 0
    ana.bind(x, 8, 15)
    assert ana.simplify(e).value == 1
    ana.unbind(x)
    assert ana.simplify(e) is not None and not isinstance(ana.simplify(e), Const)
    ana.bind(x, 16, 23)
    previous = ana.ranges.get(x)
    ana.bind(x, 0, 7)
    ana.unbind(x, previous)
    assert ana.simplify(e).value == 2


def test_ranges_are_read_only():
    ana = Analyzer({Var("n"): (0, None)})
    with pytest.raises(TypeError):
        ana.ranges[Var("m")] = (0, 1)


def test_substitution_rewrites_a_subtree_shared_by_two_statements():
    i, j = Var("i"), Var("j")
    buf = ir.Buffer("b", "int32", (c(64),), (c(1),), data=Var("b", "handle"))
    shared = Binary("int32", "add", Binary("int32", "mul", i, c(8)), j)
    body = ir.seq(ir.Store(buf, shared, shared), ir.Store(buf, c(0), shared))
    out = _substitute_stmt(body, {i: c(3)})
    want = Binary("int32", "add", Binary("int32", "mul", c(3), c(8)), j)
    for e in (out.stmts[0].index, out.stmts[0].value, out.stmts[1].value):
        assert E.structural_equal(e, want)
    assert set(E.free_vars(shared)) == {i, j}  # the original is untouched


def test_nested_unrolled_loops_give_every_copy_its_constants():
    ko, ki = Var("ko"), Var("ki")
    buf = ir.Buffer("b", "int32", (c(64),), (c(1),), data=Var("b", "handle"))
    index = Binary("int32", "add", Binary("int32", "mul", ko, c(4)), ki)
    inner = ir.For(ki, c(0), c(4), ir.UNROLLED, ir.Store(buf, index, index))
    outer = ir.For(ko, c(0), c(3), ir.UNROLLED, inner)
    flat = simplify_stmt(unroll_loops(outer))
    values = [(s.index.value, s.value.value) for s in flat.stmts]
    assert values == [(k, k) for k in range(12)]
    assert all(isinstance(s, ir.Store) for s in flat.stmts)
    assert E.free_vars(index)  # the original tree is untouched


def _guarded_store(buf, i, op: str, bound: int):
    return ir.IfThenElse(Binary("bool", op, i, c(bound)), ir.Store(buf, i, i))


def test_a_branch_on_a_loop_variable_narrows_its_range_in_each_case():
    # `if (i < 4) A else B` inside `for (i, 0, 10)`: A knows i in [0, 3], B i in [4, 9],
    # so the guards each case implies go (a partitioned parallel loop's main and tail)
    i = Var("i")
    buf = ir.Buffer("b", "int32", (c(64),), (c(1),), data=Var("b", "handle"))
    then_case = ir.seq(_guarded_store(buf, i, "lt", 6), _guarded_store(buf, i, "lt", 3))
    else_case = ir.seq(_guarded_store(buf, i, "ge", 4), _guarded_store(buf, i, "lt", 8))
    loop = ir.For(i, c(0), c(10), ir.PARALLEL,
                  ir.IfThenElse(Binary("bool", "lt", i, c(4)), then_case, else_case))
    out = simplify_stmt(loop).body
    kept_then = [s for s in out.then_case.stmts if isinstance(s, ir.IfThenElse)]
    kept_else = [s for s in out.else_case.stmts if isinstance(s, ir.IfThenElse)]
    assert [print_expr(s.cond) for s in kept_then] == ["i < 3"]   # i < 6 holds throughout
    assert [print_expr(s.cond) for s in kept_else] == ["i < 8"]   # i >= 4 holds throughout


def test_a_branch_leaving_one_value_substitutes_it():
    i = Var("i")
    buf = ir.Buffer("b", "int32", (c(64),), (c(1),), data=Var("b", "handle"))
    loop = ir.For(i, c(0), c(3), ir.PARALLEL, ir.IfThenElse(
        Binary("bool", "lt", i, c(2)), ir.Store(buf, i, i), ir.Store(buf, i, i)))
    out = simplify_stmt(loop).body
    assert E.free_vars(out.then_case.index) == [i]
    assert out.else_case.index.value == 2 and out.else_case.value.value == 2


def test_only_an_if_that_is_a_loops_whole_body_narrows_the_range():
    # each narrowing empties the analyzer's memo: ifs among other statements (ir_builder
    # code with many of them, sharing one large expression) keep the loop's range, so that
    # expression is simplified once, not once per if
    i = Var("i")
    buf = ir.Buffer("b", "int32", (c(64),), (c(1),), data=Var("b", "handle"))
    branch = ir.IfThenElse(Binary("bool", "lt", i, c(4)), _guarded_store(buf, i, "lt", 6))
    loop = ir.For(i, c(0), c(10), ir.PARALLEL, ir.seq(branch, ir.Store(buf, i, i)))
    kept = simplify_stmt(loop).body.stmts[0].then_case
    assert isinstance(kept, ir.IfThenElse) and print_expr(kept.cond) == "i < 6"
