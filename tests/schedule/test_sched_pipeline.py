"""Stage.pipeline (software pipelining of a loop): the stages computed at the loop run one
iteration ahead of the stage's own loops. Pipelined schedules give numpy's results on odd,
non-dividing and symbolic sizes (0 rows included), the lowered IR has a prologue, a steady
loop from the second iteration and an epilogue over double-buffered storage, the step
round-trips JSON, and every pipelining that cannot be done is an error naming the rule.

Imports te, te.lower.ir, te.lower.passes.software_pipeline, numpy, pytest, hypothesis and
helpers.
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import te
from te.compute import expr as E
from te.lower import ir
from te.lower.passes.software_pipeline import software_pipeline

from helpers import check_schedule, np_softmax, schedule_softmax_rows, softmax_graph


def _pipelined_softmax(rows, cols, block, lanes=16, interleave=True, stream=False):
    """Blocks of `block` rows in parallel; in each, row i's max, exp and sum (the exp
    fused into the sum's rfactor loop) run while row i - 1 is scaled, inside the same
    loop when `interleave`."""
    graph = softmax_graph(rows, cols)
    X, ex, Y = graph[0], graph[2], graph[-1]
    s = te.create_schedule(Y.op)
    io, ii = s[Y].split(Y.op.axis[0], factor=block)
    s[Y].parallel(io)
    jo, ji = s[Y].split(Y.op.axis[1], factor=lanes)
    s[Y].vectorize(ji)
    rf = schedule_softmax_rows(s, graph, ii, lanes)
    s[Y].pipeline(ii, interleave=(s[rf], rf.op.reduce_axis[0]) if interleave else None)
    if stream:
        s[Y].pragma(jo, "nontemporal_store")
    return s, X, Y, ex, rf


@pytest.mark.parametrize("rows,cols,block,interleave", [
    (7, 37, 3, True), (7, 37, 3, False), (5, 64, 5, True), (4, 16, 1, True),
    (3, 5, 8, True), (1, 33, 4, False), (9, 48, 2, True)])
def test_pipelined_softmax_matches_numpy(rows, cols, block, interleave):
    s, X, Y, _, _ = _pipelined_softmax(rows, cols, block, interleave=interleave)
    check_schedule(s, [X], [Y], np_softmax, rtol=1e-5, atol=1e-6)


def test_pipelined_softmax_with_nontemporal_stores_matches_numpy():
    # the scaling's store pragma stays on its part of the joined loop
    s, X, Y, _, _ = _pipelined_softmax(6, 4096, 3, stream=True)
    text = str(te.lower(s, [X, Y]))
    assert text.count("// pragma nontemporal_store") >= 2, text
    check_schedule(s, [X], [Y], np_softmax, rtol=1e-5, atol=1e-6)


def test_pipelined_loop_runs_the_stage_one_iteration_behind():
    s, X, Y, ex, rf = _pipelined_softmax(8, 64, 4)
    text = str(te.lower(s, [X, Y]))
    assert "allocate ex[float32 * 128]" in text, text       # two rows: double-buffered
    assert "allocate total[float32 * 2]" in text, text      # read by the scaling too
    assert "allocate mx[float32 * 1]" in text, text         # used by the early part only
    assert "software_pipeline" not in text
    steady = text[text.index("for (i.inner, 1, 3) {"):]
    # inside the sum's loop: row i's exps go to copy i mod 2, row i - 1 is scaled from
    # copy (i - 1) mod 2 with its own sum
    loop = re.search(r"for \(k2\.outer, 0, 4\) \{\n(.*?)\n\s*\}\n", steady, re.S)
    assert loop is not None, steady
    body = loop.group(1).split("\n")
    assert len(body) == 3, body
    assert "ex[ramp((k2.outer*16) + (floormod(i.inner, 2)*64), 1, 16)] = exp(" in body[0]
    assert "total.rf[ramp(0, 1, 16)] = total.rf" in body[1]
    assert "+ (i.inner*64)) + (k2.outer*16)) - 64, 1, 16)] = ex[ramp((k2.outer*16) + " \
           "(floormod(i.inner + 1, 2)*64), 1, 16)]/broadcast(total[floormod(i.inner + 1, 2)]" \
           in body[2], body
    # the epilogue scales the last row of the block (i.inner = 3) from copy 1
    assert re.search(r"\n\s*for \(j\.outer, 0, 4\) \{\n\s*Y\[.*\+ 192, 1, 16\)\] = "
                     r"ex\[ramp\(\(j\.outer\*16\) \+ 64, 1, 16\)\]/broadcast\(total\[1\]",
                     steady), steady


def _mirror(rows=6, cols=5):
    """B is computed per row of C; C reads its row of B backwards."""
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((rows, cols), lambda i, j: B[i, cols - 1 - j] + 1.0, name="C")
    return A, B, C


def _mirror_at_rows(rows=6, cols=5):
    """_mirror's stages, B computed at C's row loop: (schedule, A, B, C)."""
    A, B, C = _mirror(rows, cols)
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    return s, A, B, C


def _ref_mirror(a):
    return a[:, ::-1] * 2.0 + 1.0


@pytest.mark.parametrize("interleave", [False, True])
def test_symbolic_rows_including_none(interleave):
    n = te.var("n")
    s, A, B, C = _mirror_at_rows(n, 5)
    s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[1]) if interleave else None)
    assert "if (n > 0) {" in str(te.lower(s, [A, C]))
    mod = te.build(s, [A, C])
    for rows in (0, 1, 2, 7):
        a = np.random.default_rng(rows).standard_normal((rows, 5)).astype("float32")
        c = np.full((rows, 5), np.nan, "float32")
        mod(a, c)
        np.testing.assert_allclose(c, _ref_mirror(a), rtol=1e-6)


def test_reduction_stage_pipelined_at_its_data_loop():
    A = te.placeholder((7, 9), name="A")
    B = te.compute((7, 9), lambda i, j: A[i, j] * A[i, j], name="B")
    k = te.reduce_axis((0, 9), name="k")
    C = te.compute((7,), lambda i: te.sum(B[i, 8 - k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].pipeline(C.op.axis[0])
    check_schedule(s, [A], [C], lambda a: (a * a).sum(axis=1))


def test_pipeline_records_a_step_that_replays():
    for interleave in (True, False):
        s, X, Y, _, _ = _pipelined_softmax(5, 32, 2, interleave=interleave)
        text = s.to_json()
        assert '"type": "Pipeline"' in text
        _, _, _, _, Y2 = softmax_graph(5, 32)
        s2 = te.create_schedule(Y2.op).replay(text)
        assert s2.to_json() == text
        assert str(te.lower(s2, [s2.stages[0].op.output(0), Y2])) == \
            str(te.lower(s, [X, Y]))


# -- what cannot be pipelined ---------------------------------------------------------------

def _assert_lowering_refused(s, args, message):
    with pytest.raises(te.LoweringError, match=re.escape(message)):
        te.lower(s, args)


def test_refuses_a_parallel_loop():
    s, A, B, C = _mirror_at_rows()
    s[C].parallel(C.op.axis[0])
    s[C].pipeline(C.op.axis[0])
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': the loop is parallel; only a "
                                        "serial loop can be pipelined (split it and annotate "
                                        "the outer loop instead)")


def test_refuses_a_loop_with_nothing_computed_at_it():
    A, B, C = _mirror()
    s = te.create_schedule(C.op)
    s[C].pipeline(C.op.axis[0])
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': no stage is computed at the "
                                        "loop, so nothing can run an iteration ahead")


def test_refuses_interleaving_with_a_fused_stages_own_loop():
    s, X, Y, ex, rf = _pipelined_softmax(5, 32, 2)
    s[Y].pipeline(s[Y].leaf_iter_vars[1], interleave=(s[ex], s[ex].leaf_iter_vars[1]))
    _assert_lowering_refused(s, [X, Y], "pipeline of loop 'i.inner': interleave loop "
                                        "'j.outer' is not the outermost loop of a stage "
                                        "computed at the loop (a stage fused by compute_with "
                                        "runs in its parent's loops: name the parent's)")


def test_refuses_interleaving_loops_of_different_lengths():
    s, A, B, C = _mirror_at_rows(6, 8)
    s[C].split(C.op.axis[1], factor=4)
    s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[1]))
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': loop 'j' runs 8 iterations "
                                        "and the pipelined stage's loop 'j.outer' 2 "
                                        "iterations; interleaving needs the same count (split "
                                        "one of them)")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[0]))  # B's one-row loop
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': loop 'i' runs 1 iteration and "
                                        "the pipelined stage's loop 'j' 8 iterations")


def test_refuses_interleaving_a_reduction_init_and_update():
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((4,), lambda i: te.sum(B[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[1]))
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': the pipelined stage's part "
                                        "below the loop is not a single loop")


def test_refuses_interleaving_a_vectorized_stage_loop():
    s, A, B, C = _mirror_at_rows(6, 8)
    s[C].vectorize(C.op.axis[1])
    s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[1]))
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': the pipelined stage's loop "
                                        "'j' is vectorized; interleaving needs serial loops")


def test_refuses_a_pipelined_loop_split_afterwards():
    for split_interleave in (False, True):
        A, B, C = _mirror()
        s = te.create_schedule(C.op)
        s[B].compute_at(s[C], C.op.axis[0])
        s[C].pipeline(C.op.axis[0], interleave=(s[B], B.op.axis[1]))
        if split_interleave:
            s[B].split(B.op.axis[1], factor=2)
            _assert_lowering_refused(s, [A, C], "pipeline of loop 'i' of stage 'C': "
                                                "interleave loop 'j' of stage 'B' was split or "
                                                "fused afterwards; interleave with a current loop")
        else:
            _, ii = s[C].split(C.op.axis[0], factor=2)
            s[B].compute_at(s[C], ii)
            _assert_lowering_refused(s, [A, C], "pipeline of loop 'i' of stage 'C': the loop "
                                                "was split or fused afterwards; pipeline a "
                                                "current loop")


def test_refuses_pipelining_a_loop_shared_with_compute_with():
    A, B, C = _mirror()
    D = te.compute((6, 5), lambda i, j: A[i, j] - 1.0, name="D")
    E2 = te.compute((6, 5), lambda i, j: D[i, 4 - j] * 3.0, name="E2")
    s = te.create_schedule([C.op, E2.op])
    s[B].compute_at(s[C], C.op.axis[0])
    s[D].compute_at(s[E2], E2.op.axis[0])
    s[C].compute_with(s[E2], E2.op.axis[0])
    s[C].pipeline(C.op.axis[0])
    _assert_lowering_refused(s, [A, C, E2], "compute_with of 'C' into 'E2': loop 'i' of 'C' "
                                            "is pipelined; shared loops are the parent's, so "
                                            "pipeline the parent's")


def test_refuses_reordering_extern_calls():
    A = te.placeholder((4, 3), name="A")
    B = te.compute((4, 3), lambda i, j: A[i, j] + te.call_extern("float32", "noise"),
                   name="B")
    C = te.compute((4, 3), lambda i, j: B[i, j] - te.call_extern("float32", "noise"),
                   name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].pipeline(C.op.axis[0])
    _assert_lowering_refused(s, [A, C], "pipeline of loop 'i': both the stages computed at the "
                                        "loop and the pipelined stage call extern functions "
                                        "(noise), whose side effects pipelining would reorder")


def test_interleaving_keeps_the_host_loops_store_pragma_to_its_own_stores():
    s, A, B, C = _mirror_at_rows(7, 64)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].vectorize(ji)
    bo, bi = s[B].split(s[B].leaf_iter_vars[1], factor=16)
    s[B].vectorize(bi)
    s[B].pragma(bo, "nontemporal_store")  # B is a local buffer: its stores stay plain
    s[C].pipeline(C.op.axis[0], interleave=(s[B], bo))
    mod = te.build(s, [A, C])
    assert "vmovntps" not in mod.get_source("asm")
    check_schedule(s, [A], [C], _ref_mirror)


def test_schedule_refuses_pipelining_an_inlined_stage():
    A, B, C = _mirror()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    with pytest.raises(te.ScheduleError, match=re.escape(
            "pipeline on stage 'B': the stage is inlined and has no loops")):
        s[B].pipeline(B.op.axis[0])


@pytest.mark.parametrize("interleave,message", [
    ("j", "interleave must be a (stage, loop) pair such as (s[T], s[T].op.reduce_axis[0]), "
          "got 'j'"),
    ("self", "interleave stage must be another stage of the same schedule"),
])
def test_schedule_refuses_a_bad_interleave(interleave, message):
    A, B, C = _mirror()
    s = te.create_schedule(C.op)
    arg = (s[C], C.op.axis[1]) if interleave == "self" else interleave
    with pytest.raises(te.ScheduleError, match=re.escape(f"pipeline on stage 'C': {message}")):
        s[C].pipeline(C.op.axis[0], interleave=arg)


def test_schedule_refuses_a_loop_that_was_split():
    A, B, C = _mirror()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(te.ScheduleError, match=re.escape(
            "pipeline on stage 'C': var 'i' has already been split or fused")):
        s[C].pipeline(C.op.axis[0])


# The pass's own checks, which schedules built with te cannot reach: hand-made loop IR.

def _buffer(name, size=4):
    return ir.Buffer(name, "float32", (size,), (E.const(1),), E.Var(name, "handle"))


def _pipelined_loop(early, late, allocs=()):
    i = E.Var("i", "int32")
    marker = ir.For(E.Var("i.late", "int32"), E.const(0), E.const(1), ir.SERIAL, late(i),
                    pragmas=((ir.PIPELINE_LATE_PART, None),))
    body = ir.seq(early(i), marker)
    for buf, size in reversed(allocs):
        body = ir.Allocate(buf, size(i) if callable(size) else E.const(size), body)
    return ir.For(i, E.const(0), E.const(5), ir.SERIAL, body,
                  pragmas=((ir.SOFTWARE_PIPELINE, None),))


def test_pass_refuses_a_late_part_that_writes_what_the_early_part_reads():
    out, tmp = _buffer("out"), _buffer("tmp")
    loop = _pipelined_loop(lambda i: ir.Store(tmp, E.const(0), ir.Load("float32", out, i)),
                           lambda i: ir.Store(out, i, ir.Load("float32", tmp, E.const(0))),
                           [(tmp, 4)])
    with pytest.raises(te.LoweringError, match=re.escape(
            "pipeline of loop 'i': the pipelined stage writes 'out', which the stages "
            "computed at the loop also use, so they cannot run an iteration ahead of it")):
        software_pipeline(loop)


def test_pass_refuses_carrying_results_through_a_buffer_allocated_outside():
    out, tmp = _buffer("out"), _buffer("tmp")
    loop = _pipelined_loop(lambda i: ir.Store(tmp, i, E.const(1.0, "float32")),
                           lambda i: ir.Store(out, i, ir.Load("float32", tmp, i)))
    with pytest.raises(te.LoweringError, match=re.escape(
            "pipeline of loop 'i': 'tmp' carry results from the stages computed at the loop "
            "to the pipelined stage but are allocated outside the loop")):
        software_pipeline(loop)


def test_pass_refuses_a_buffer_whose_size_depends_on_the_loop():
    out, tmp = _buffer("out"), _buffer("tmp")
    loop = _pipelined_loop(lambda i: ir.Store(tmp, E.const(0), E.const(1.0, "float32")),
                           lambda i: ir.Store(out, i, ir.Load("float32", tmp, E.const(0))),
                           [(tmp, lambda i: i + 1)])
    with pytest.raises(te.LoweringError, match=re.escape(
            "pipeline of loop 'i': the size of buffer 'tmp' depends on the loop variable")):
        software_pipeline(loop)


# -- any pipelining that lowers gives the unpipelined result -------------------------------

@given(st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_pipelines_give_the_unpipelined_result(data):
    """B (reading A, maybe mirrored) is computed at a random loop of C, which is split at
    random and pipelined at that loop, maybe interleaved with B's outermost loop there and
    maybe with C's innermost loop vectorized: lowering refuses with a pipeline error or
    the result matches numpy."""
    rows, cols = 7, 6
    A = te.placeholder((rows, cols), name="A")
    mirror = data.draw(st.booleans(), label="B read mirrored")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = te.compute((rows, cols), lambda i, j: (B[i, cols - 1 - j] if mirror else B[i, j])
                   - A[i, j], name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    if data.draw(st.booleans(), label="split rows"):
        io, ii = s[C].split(i, factor=data.draw(st.integers(1, 8), label="row factor"))
        if data.draw(st.booleans(), label="parallel outer rows"):
            s[C].parallel(io)
    if data.draw(st.booleans(), label="split columns"):
        s[C].split(j, factor=data.draw(st.integers(1, 7), label="column factor"))
    leaves = s[C].leaf_iter_vars
    at = data.draw(st.sampled_from(leaves), label="pipelined loop")
    s[B].compute_at(s[C], at)
    b_leaves = s[B].leaf_iter_vars
    interleave = None
    if data.draw(st.booleans(), label="interleave"):
        interleave = (s[B], data.draw(st.sampled_from(b_leaves), label="B loop"))
    if data.draw(st.booleans(), label="vectorize C's innermost"):
        s[C].vectorize(s[C].leaf_iter_vars[-1])
    s[C].pipeline(at, interleave=interleave)
    note(s.to_json())
    try:
        mod = te.build(s, [A, C])
    except te.LoweringError as err:
        assert str(err).startswith(f"pipeline of loop '{at.var.name}': "), err
        return
    a = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")
    c = np.empty_like(a)
    mod(a, c)
    b = a * 2.0 + 1.0
    np.testing.assert_allclose(c, (b[:, ::-1] if mirror else b) - a, rtol=1e-6, atol=1e-6)
