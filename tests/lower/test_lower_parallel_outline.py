"""The parallel_outline pass: each outermost parallel loop becomes a ParallelTask that names
its task function and the values it captures, which the LLVM code generator only emits.
Checked on lowered schedules (printed form, te.build of a function lowered before the pass,
the interpreter) and on hand-built IR (what is captured, the verifier's and the code
generator's messages)."""
import numpy as np
import pytest

import runtime
import te
from te.codegen.llvm.codegen import codegen_llvm
from te.compute import expr as E
from te.lower import ir, pipeline
from te.lower.func import PrimFunc
from te.lower.interp import run_func
from te.lower.passes.parallel_outline import outline_parallel
from te.lower.verify import verify_func
from te.target import parse_target


def _rows_schedule():
    """B[i, j] = A[i, j] * 3 - j over (n, 29), rows split by 4 and parallel: the partition
    makes two parallel loops (the main part and the tail)."""
    n = te.var("n")
    A = te.placeholder((n, 29), name="A")
    B = te.compute((n, 29), lambda i, j: A[i, j] * 3.0 - j.astype("float32"), name="B")
    s = te.create_schedule(B.op)
    io, _ = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(io)
    return s, [A, B]


def _reference(a):
    return a * 3 - np.arange(a.shape[1], dtype="float32")


def test_each_parallel_loop_becomes_a_task_named_after_the_function():
    s, args = _rows_schedule()
    text = str(te.lower(s, args, name="rows"))
    assert text.count("parallel_task") == 2
    assert "  parallel_task rows_par0(B, A) {\n    parallel for (i.outer, 0, " in text
    assert "  parallel_task rows_par1(n, B, A) {\n    parallel for (i.outer, " in text


def test_the_pass_is_idempotent():
    s, args = _rows_schedule()
    func = te.lower(s, args)
    assert pipeline.outline_for_cpu(func) is func
    assert outline_parallel(func.body, func.name) is func.body


@pytest.mark.parametrize("rows", [0, 1, 4, 23])
def test_a_function_lowered_before_the_pass_is_built_with_its_tasks(rows):
    s, args = _rows_schedule()
    early = te.lower(s, args, stop_after="simplify_final")
    assert "parallel_task" not in str(early)
    mod = te.build(early)
    assert str(mod.lowered) == str(te.lower(s, args))
    if runtime.parallel_available():
        assert mod._sources["ll_unoptimized"].count('call void @"GOMP_parallel"') == 2
    a = np.random.default_rng(rows).standard_normal((rows, 29)).astype("float32")
    b = np.full_like(a, np.nan)
    mod(a, b)
    np.testing.assert_allclose(b, _reference(a), rtol=1e-6)


def test_the_interpreter_runs_a_task_as_its_loop():
    s, args = _rows_schedule()
    func = te.lower(s, args)
    a = np.random.default_rng(5).standard_normal((11, 29)).astype("float32")
    b = np.full_like(a, np.nan)
    run_func(func, [a, b])
    np.testing.assert_allclose(b, _reference(a), rtol=1e-6)


def test_target_cuda_makes_no_tasks():
    s, args = _rows_schedule()
    assert "parallel_task" not in str(te.lower(s, args, target="cuda"))
    assert "parallel_outline" in pipeline.SKIPPED_FOR["cuda"]


def _buffer(name, n=16):
    return ir.Buffer(name, "int32", (n,), (1,), data=E.Var(name, "handle"))


def _i32(v):
    return E.Const("int32", v)


def test_a_variable_bound_inside_the_task_is_not_captured_though_bound_outside_too():
    """for j serial: { out[j] = j; for i parallel: for j serial: out[i + j] = k } (one Var
    j bound twice, as partitioned loops reuse theirs; k a let outside)."""
    out = _buffer("out")
    i, j, k = (E.Var(x, "int32") for x in "ijk")
    inner = ir.For(j, _i32(0), _i32(2), ir.SERIAL,
                   ir.Store(out, E.Binary("int32", "add", i, j), k))
    par = ir.For(i, _i32(0), _i32(4), ir.PARALLEL, inner)
    body = ir.LetStmt(k, _i32(7), ir.For(j, _i32(0), _i32(3), ir.SERIAL,
                                         ir.seq(ir.Store(out, j, j), par)))
    outlined = outline_parallel(body, "f")
    task = outlined.body.body.stmts[1]
    assert isinstance(task, ir.ParallelTask) and task.name == "f_par0"
    assert [v.name for v in task.captured] == ["out", "k"]
    verify_func(PrimFunc("f", (out,), (), outlined), "parallel_outline")


def test_the_verifier_names_a_task_that_captures_an_unbound_variable():
    out = _buffer("out")
    i, stray = E.Var("i", "int32"), E.Var("stray", "int32")
    loop = ir.For(i, _i32(0), _i32(4), ir.PARALLEL, ir.Store(out, i, i))
    func = PrimFunc("f", (out,), (), ir.ParallelTask("f_par0", (out.data, stray), loop))
    with pytest.raises(te.LoweringError, match=r"^internal error after pass 'parallel_outline'"
                                               r": parallel task 'f_par0' captures 'stray' "
                                               r"outside the loop, let or allocation that "
                                               r"defines it$"):
        verify_func(func, "parallel_outline")
    serial = ir.ParallelTask("f_par0", (out.data,), ir.For(i, _i32(0), _i32(4), ir.SERIAL,
                                                           ir.Store(out, i, i)))
    with pytest.raises(te.LoweringError, match="parallel task 'f_par0' does not hold a "
                                               "parallel loop"):
        verify_func(PrimFunc("f", (out,), (), serial), "parallel_outline")


def test_the_code_generator_refuses_a_capture_that_is_not_bound():
    out = _buffer("out")
    i, stray = E.Var("i", "int32"), E.Var("stray", "int32")
    loop = ir.For(i, _i32(0), _i32(4), ir.PARALLEL, ir.Store(out, i, i))
    func = PrimFunc("f", (out,), (), ir.ParallelTask("f_par0", (out.data, stray), loop))
    with pytest.raises(te.BuildError, match=r"^te.build: parallel task 'f_par0' captures "
                                            r"'stray', which is not bound where the task "
                                            r"starts$"):
        codegen_llvm(func, index_limit=parse_target("llvm").index_limit)
