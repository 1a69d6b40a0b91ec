"""Stage.compute_with (Halide's loop fusion of two stages): fused schedules give numpy's
results on odd and non-dividing sizes, the lowered IR has one shared loop, the step
round-trips JSON, and every illegal fusion is an error that names the rule.

Imports te, te.schedule.steps, numpy, pytest, hypothesis, compute_oracle and helpers.
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import te
from te.schedule import steps as S

from compute_oracle import evaluate
from helpers import check_schedule, np_softmax, schedule_softmax_rows, softmax_graph


def _fused_softmax(rows, cols, lanes, parallel=True):
    """The row's exp pass shares the loop of the sum's rfactor stage: each iteration
    computes `lanes` exps and adds them to the partial sums at once."""
    graph = softmax_graph(rows, cols)
    X, Y = graph[0], graph[-1]
    s = te.create_schedule(Y.op)
    i = Y.op.axis[0]
    if parallel:
        s[Y].parallel(i)
    rf = schedule_softmax_rows(s, graph, i, lanes)
    return s, X, Y, rf


@pytest.mark.parametrize("rows,cols,lanes", [(5, 37, 8), (3, 64, 16), (4, 1, 8), (2, 7, 4)])
def test_fused_softmax_matches_numpy(rows, cols, lanes):
    s, X, Y, _ = _fused_softmax(rows, cols, lanes)
    check_schedule(s, [X], [Y], np_softmax, rtol=1e-5, atol=1e-6)


def test_fused_softmax_has_one_loop_computing_and_summing_the_exps():
    s, X, Y, rf = _fused_softmax(3, 64, 16, parallel=False)
    text = str(te.lower(s, [X, Y]))
    # one loop over the rfactor stage's reduction loop holds both stores
    loop = re.search(r"for \(k2\.outer, 0, 4\) \{\n(.*?)\n\s*\}\n", text, re.S)
    assert loop is not None, text
    body = loop.group(1)
    assert "ex[ramp(k2.outer*16, 1, 16)] = exp(" in body, body
    assert "total.rf[ramp(0, 1, 16)] = total.rf[ramp(0, 1, 16)] + ex[" in body, body
    assert "j.outer" not in text  # ex has no loop of its own left


def test_fused_stage_keeps_its_innermost_shared_loop_prefetch():
    s, X, Y, rf = _fused_softmax(3, 64, 16, parallel=False)
    ex = s.stages[[st.name for st in s.stages].index("ex")]
    eo = ex.leaf_iter_vars[1]
    ex.prefetch(X, eo, 4)
    text = str(te.lower(s, [X, Y]))
    assert re.search(r"for \(k2\.outer, 0, 4\) \{\n\s*prefetch\(&X\[", text), text
    check_schedule(s, [X], [Y], np_softmax, rtol=1e-5, atol=1e-6)


def _two_outputs(rows=7, cols=13):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((rows, cols), lambda i, j: A[i, j] + 1.0, name="C")
    return A, B, C


def _ref_two(a):
    return [a * 2.0, a + 1.0]


@pytest.mark.parametrize("depth", [0, 1])
def test_independent_root_stages_share_loops(depth):
    A, B, C = _two_outputs()
    s = te.create_schedule([B.op, C.op])
    bo, bi = s[B].split(B.op.axis[1], factor=4)
    co, ci = s[C].split(C.op.axis[1], factor=4)
    s[C].vectorize(ci)
    s[B].compute_with(s[C], s[C].leaf_iter_vars[depth])
    text = str(te.lower(s, [A, B, C]))
    assert text.count("for (i,") == 1, text
    assert len(re.findall(r"for \(j\.outer(_1)?,", text)) == (2 if depth == 0 else 1), text
    check_schedule(s, [A], [B, C], _ref_two)


def test_shared_loops_take_the_parents_parallel_loop():
    A, B, C = _two_outputs(9, 5)
    s = te.create_schedule([B.op, C.op])
    s[C].parallel(C.op.axis[0])
    s[B].compute_with(s[C], C.op.axis[0])
    text = str(te.lower(s, [A, B, C]))
    assert "parallel for (i," in text and text.count("for (i,") == 1, text
    check_schedule(s, [A], [B, C], _ref_two)


def test_fusion_at_the_row_only_allows_any_order_inside_the_row():
    """C reads row i of B backwards: fusing the rows is legal (row i of B is complete
    before row i of C starts), fusing the columns too is not."""
    A = te.placeholder((6, 11), name="A")
    B = te.compute((6, 11), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((6, 11), lambda i, j: B[i, 10 - j] - 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_with(s[C], C.op.axis[0])
    check_schedule(s, [A], [C], lambda a: a[:, ::-1] * 3.0 - 1.0)
    s = te.create_schedule(C.op)
    s[B].compute_with(s[C], C.op.axis[1])
    with pytest.raises(te.LoweringError, match=re.escape(
            "compute_with of 'B' into 'C': an iteration of the shared loops reads "
            "B[i..i, 10 - j..10 - j], which that iteration cannot be shown to compute (it "
            "computes B[i, j] over its inner loops); share fewer loops, or give both "
            "stages the same inner loops")):
        te.lower(s, [A, C])


# Three schedules that lowered and gave wrong results before the same-iteration check
# knew the exact set a stage writes (found by review): each is now refused.

def test_a_strided_write_is_not_its_bounding_box():
    """B's loops reordered (j.inner, j.outer): iteration v writes B[v], B[v + 2], ...;
    C (nparts=2) reads B[4v .. 4v + 3] at v, inside that box but partly unwritten."""
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda j: A[j] * 2.0, name="B")
    C = te.compute((8,), lambda j: B[j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    bo, bi = s[B].split(B.op.axis[0], factor=2)
    s[B].reorder(bi, bo)
    co, ci = s[C].split(C.op.axis[0], nparts=2)
    s[B].compute_with(s[C], co)
    _assert_lowering_refused(s, [A, C],
                             "compute_with of 'B' into 'C': an iteration of the shared loops "
                             "reads B[j.outer*4..(j.outer*4) + 3], which that iteration "
                             "cannot be shown to compute")


def test_a_fused_then_split_write_has_gaps_in_its_box():
    """Both stages fuse (i, j) and split by 6; C reads its row backwards. An iteration
    writes 6 consecutive elements, whose row-by-column box holds elements of the next
    iteration. The same loops with C reading B at the same element are legal."""
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: A[i, j] * 2.0, name="B")
    for mirror in (True, False):
        C = te.compute((3, 4), lambda i, j: (B[i, 3 - j] if mirror else B[i, j]) + 1.0,
                       name="C")
        s = te.create_schedule(C.op)
        for t in (B, C):
            fused = s[t].fuse(*t.op.axis)
            s[t].split(fused, factor=6)
        s[B].compute_with(s[C], s[C].leaf_iter_vars[0])
        if mirror:
            _assert_lowering_refused(s, [A, C],
                                     "compute_with of 'B' into 'C': an iteration of the "
                                     "shared loops reads B[floordiv(")
        else:
            check_schedule(s, [A], [C], lambda a: a * 2.0 + 1.0)


def test_a_reduction_init_that_reads_the_stage_runs_before_shared_reduction_loops():
    X = te.placeholder((3, 1, 5), name="X")
    A = te.placeholder((3, 5), name="A")
    B = te.compute((3, 5), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 1), name="k")
    C = te.compute((3, 5), lambda i, j: te.sum(X[i, k, j], axis=k, init=B[i, j]), name="C")
    s = te.create_schedule(C.op)
    s[C].reorder(C.op.axis[0], k, C.op.axis[1])
    bo, bi = s[B].split(B.op.axis[0], factor=1)
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [X, A, C],
                             "compute_with of 'B' into 'C': the reduction's init reads "
                             "'B', but the init runs before reduction loop 'k', and the "
                             "stage's part now runs inside it; share only loops outside "
                             "'k'")
    s = te.create_schedule(C.op)
    s[B].compute_with(s[C], C.op.axis[0])  # outside k: the init runs after B's part
    check_schedule(s, [X, A], [C], lambda x, a: x.sum(axis=1) + a * 2.0)


def test_compute_with_records_a_step_that_replays():
    s, X, Y, rf = _fused_softmax(5, 37, 8)
    assert isinstance(s.steps[-1], S.ComputeWith)
    assert s.steps[-1].stage.name == "ex" and s.steps[-1].parent.name == "total.rf"
    assert s.steps[-1].axis.name == "k2.outer"
    text = s.to_json()
    X2, _, _, _, Y2 = softmax_graph(5, 37)
    s2 = te.create_schedule(Y2.op).replay(text)
    assert s2.to_json() == text
    assert str(te.lower(s2, [X2, Y2])) == str(te.lower(s, [X, Y]))


# -- errors when scheduling ---------------------------------------------------------------

def test_schedule_errors_are_pinned():
    A, B, C = _two_outputs()
    s = te.create_schedule([B.op, C.op])
    i = C.op.axis[0]
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'B': parent must be a stage of the same schedule "
            "(s[tensor]), got")):
        s[B].compute_with(C, i)
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'B': cannot fuse a stage with itself")):
        s[B].compute_with(s[B], B.op.axis[0])
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with: 'A' is a placeholder (an input); it has no computation")):
        s[A].compute_with(s[C], i)
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'B': parent 'A' is a placeholder (an input) and has no "
            "loops")):
        s[B].compute_with(s[A], i)
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'B': scope must be a current loop of 'C' (i, j), got "
            "'i' of another stage")):
        s[B].compute_with(s[C], B.op.axis[0])
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'B': scope must be a current loop of 'C' (i, j), got "
            "int")):
        s[B].compute_with(s[C], 0)
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'C': it must come before 'B' in the schedule's stage "
            "order (producers first)")):
        s[C].compute_with(s[B], B.op.axis[0])
    D = te.compute((7, 13), lambda i, j: A[i, j] - 1.0, name="D")
    E2 = te.compute((7, 13), lambda i, j: D[i, j] * 4.0, name="E")
    s = te.create_schedule(E2.op)
    s[D].compute_inline()
    with pytest.raises(te.ScheduleError, match=re.escape(
            "compute_with on stage 'D': the stage is inlined and has no loops")):
        s[D].compute_with(s[E2], E2.op.axis[0])
    assert not any(isinstance(st, S.ComputeWith) for st in s.steps)


# -- errors when lowering ------------------------------------------------------------------

def _diamond():
    """B and C both read A; D reads both."""
    A = te.placeholder((7, 13), name="A")
    B = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((7, 13), lambda i, j: A[i, j] + 1.0, name="C")
    D = te.compute((7, 13), lambda i, j: B[i, j] + C[i, j], name="D")
    return A, B, C, D


def _assert_lowering_refused(s, args, message):
    with pytest.raises(te.LoweringError, match=re.escape(message)):
        te.lower(s, args)


def test_stages_computed_at_different_places():
    A, B, C, D = _diamond()
    s = te.create_schedule(D.op)
    s[B].compute_with(s[C], C.op.axis[0])
    s[B].compute_at(s[D], D.op.axis[0])
    _assert_lowering_refused(s, [A, D],
                             "compute_with of 'B' into 'C': the two stages are computed at "
                             "different places (loop 'i' of 'D' and root); compute_at both")


def test_shared_loops_need_equal_extents():
    A = te.placeholder((7, 13), name="A")
    B = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((7, 12), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [A, C],
                             "compute_with of 'B' into 'C': loop 'j' has extent 13 but 'j' "
                             "has 12; shared loops need equal extents")


def test_the_stage_needs_as_many_loops_as_are_shared():
    A = te.placeholder((7,), name="A")
    B = te.compute((7,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((7, 3), lambda i, j: B[i] + j, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [A, C],
                             "compute_with of 'B' into 'C': it shares 2 loops but the stage "
                             "has only 1")


def test_a_reduction_loop_cannot_be_shared():
    A = te.placeholder((7, 13), name="A")
    k = te.reduce_axis((0, 13), name="k")
    B = te.compute((7,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((7, 13), lambda i, j: A[i, j] + 1.0, name="C")
    s = te.create_schedule([B.op, C.op])
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': loop 'k' of 'B' is a "
                             "reduction loop")


def test_the_stages_shared_loops_carry_no_annotation():
    A, B, C = _two_outputs()
    s = te.create_schedule([B.op, C.op])
    s[B].parallel(B.op.axis[0])
    s[B].compute_with(s[C], C.op.axis[0])
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': loop 'i' of 'B' is parallel; "
                             "shared loops take the parent's annotations")
    s = te.create_schedule([B.op, C.op])
    s[B].pragma(B.op.axis[0], "unroll_explicit")
    s[B].compute_with(s[C], C.op.axis[0])
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': loop 'i' of 'B' is annotated "
                             "with pragma 'unroll_explicit'; shared loops take the parent's")


def test_prefetch_only_at_the_innermost_shared_loop():
    A, B, C = _two_outputs()
    s = te.create_schedule([B.op, C.op])
    s[B].prefetch(A, B.op.axis[0], 1)
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': loop 'i' of 'B' has a "
                             "prefetch; only the innermost shared loop")


def test_stage_attached_above_the_innermost_shared_loop():
    A = te.placeholder((7, 13), name="A")
    P = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="P")
    B = te.compute((7, 13), lambda i, j: P[i, j] + 1.0, name="B")
    C = te.compute((7, 13), lambda i, j: A[i, j] - 1.0, name="C")
    s = te.create_schedule([B.op, C.op])
    s[P].compute_at(s[B], B.op.axis[0])
    s[B].compute_with(s[C], C.op.axis[1])
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': stage 'P' is computed at loop "
                             "'i' of 'B'; only the innermost shared loop")
    s = te.create_schedule([B.op, C.op])
    s[P].compute_at(s[B], B.op.axis[0])
    s[B].compute_with(s[C], C.op.axis[0])  # P is inside the part that moves: fine
    check_schedule(s, [A], [B, C], lambda a: [a * 2.0 + 1.0, a - 1.0])


def test_a_stage_in_between_must_not_read_the_fused_stage():
    A = te.placeholder((7, 13), name="A")
    B = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="B")
    M = te.compute((7, 13), lambda i, j: B[i, j] + 1.0, name="M")
    C = te.compute((7, 13), lambda i, j: A[i, j] - 1.0, name="C")
    s = te.create_schedule([M.op, C.op])
    s[B].compute_with(s[C], C.op.axis[0])
    _assert_lowering_refused(s, [A, M, C],
                             "compute_with of 'B' into 'C': stage 'M' runs between the "
                             "two and reads 'B', which now runs later (a cache_write or "
                             "rfactor of 'C' made after compute_with adds such a stage")


def test_stages_computed_inside_the_parent():
    A = te.placeholder((7, 13), name="A")
    B = te.compute((7, 13), lambda i, j: A[i, j] * 2.0, name="B")
    D = te.compute((7, 13), lambda i, j: B[i, j] + 1.0, name="D")
    C = te.compute((7, 13), lambda i, j: D[i, j] - 1.0, name="C")
    s = te.create_schedule(C.op)
    s[D].compute_at(s[C], C.op.axis[1])
    s[B].compute_with(s[C], C.op.axis[0])
    _assert_lowering_refused(s, [A, C],
                             "compute_with of 'B' into 'C': stage 'D' is computed inside 'C' "
                             "and reads 'B'; only 'C' itself may read a stage fused into it")
    # the other way round, the fused stage reading a stage computed inside the parent, is
    # already refused by bound inference: the fused stage is a reader outside that loop
    F = te.compute((7, 13), lambda i, j: A[i, j] + 5.0, name="F")
    G = te.compute((7, 13), lambda i, j: F[i, j] * 2.0, name="G")
    H = te.compute((7, 13), lambda i, j: F[i, j] - G[i, j], name="H")
    s = te.create_schedule(H.op)
    s[F].compute_at(s[H], H.op.axis[1])
    s[G].compute_with(s[H], H.op.axis[0])
    _assert_lowering_refused(s, [A, H],
                             "stage 'F' is computed inside loop 'j' of 'H', but its reader "
                             "'G' runs outside that loop")


def test_chains_and_changes_after_compute_with():
    A, B, C = _two_outputs()
    D = te.compute((7, 13), lambda i, j: A[i, j] * A[i, j], name="D")
    s = te.create_schedule([B.op, C.op, D.op])
    s[B].compute_with(s[C], C.op.axis[0])
    s[C].compute_with(s[D], D.op.axis[0])
    _assert_lowering_refused(s, [A, B, C, D],
                             "compute_with of 'B' into 'C': 'C' is itself fused into "
                             "'D'; fuse both into that stage")
    s = te.create_schedule([B.op, C.op])
    s[B].compute_with(s[C], C.op.axis[1])
    s[C].split(C.op.axis[1], factor=4)
    _assert_lowering_refused(s, [A, B, C],
                             "compute_with of 'B' into 'C': loop 'j' was split or fused "
                             "afterwards; fuse at a current loop")
    A, B, C, D = _diamond()
    s = te.create_schedule(D.op)
    s[B].compute_with(s[C], C.op.axis[0])
    s[B].compute_inline()
    _assert_lowering_refused(s, [A, D],
                             "compute_with of 'B' into 'C': the stage was inlined afterwards "
                             "and has no loops")


# -- every fusion that lowers gives the unfused result -----------------------------------

def _draw_loop_plan(data, extents):
    """Splits (factor or nparts, or none) of each root axis, maybe a split of the inner
    loop again (by up to the axis's extent + 2, often more than the inner loop's), a leaf
    order, an optional fuse of two adjacent leaves and a split of the fused loop: drawn
    once, so two stages can get the same loops."""
    splits = [data.draw(st.one_of(st.none(), st.tuples(
        st.booleans(), st.integers(1, e + 2), st.one_of(st.none(), st.integers(1, e + 2)))),
        label="split") for e in extents]
    n = sum(1 if sp is None else 2 if sp[2] is None else 3 for sp in splits)
    order = data.draw(st.permutations(range(n)), label="order")
    fuse = data.draw(st.one_of(st.none(), st.integers(0, n - 2)), label="fuse at")
    resplit = data.draw(st.one_of(st.none(), st.integers(2, 8)), label="split fused by") \
        if fuse is not None else None
    return splits, order, fuse, resplit


def _apply_loop_plan(stage, plan):
    splits, order, fuse, resplit = plan
    for iv, sp in zip(list(stage.leaf_iter_vars), splits):
        if sp is not None:
            nparts, value, again = sp
            _, inner = stage.split(iv, nparts=value) if nparts else stage.split(iv, factor=value)
            if again is not None:
                stage.split(inner, factor=again)
    leaves = list(stage.leaf_iter_vars)
    stage.reorder(*[leaves[k] for k in order])
    if fuse is not None:
        leaves = stage.leaf_iter_vars
        fused = stage.fuse(leaves[fuse], leaves[fuse + 1])
        if resplit is not None:
            stage.split(fused, factor=resplit)


@given(st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_fusions_give_the_unfused_result(data):
    """A producer B and its consumer C (both at root) get the same random loops (or, one
    time in four, each its own), C may vectorize its innermost loop or parallelize its
    outermost, and B is fused into C at a random depth: lowering either refuses with a
    compute_with error or the result matches numpy. C may also read B at its row's or its
    column's mirror image, which makes fusing inside the row (or at all) illegal."""
    A = te.placeholder((5, 9), name="A")
    B = te.compute((5, 9), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    mirror = data.draw(st.sampled_from([None, "row", "column"]), label="C also reads")
    extra = {None: lambda i, j: 0.0, "row": lambda i, j: B[i, 8 - j],
             "column": lambda i, j: B[4 - i, j]}[mirror]
    C = te.compute((5, 9), lambda i, j: B[i, j] * A[i, j] + extra(i, j), name="C")
    s = te.create_schedule(C.op)
    plan = _draw_loop_plan(data, [5, 9])
    _apply_loop_plan(s[C], plan)
    same = data.draw(st.sampled_from([True, True, True, False]), label="same loops")
    _apply_loop_plan(s[B], plan if same else _draw_loop_plan(data, [5, 9]))
    leaves = s[C].leaf_iter_vars
    if data.draw(st.booleans(), label="vectorize C's innermost loop"):
        s[C].vectorize(leaves[-1])
    elif len(leaves) > 1 and data.draw(st.booleans(), label="parallel C's outermost loop"):
        s[C].parallel(leaves[0])
    depth = data.draw(st.integers(0, len(leaves) - 1), label="depth")
    s[B].compute_with(s[C], leaves[depth])
    note(s.to_json())
    try:
        mod = te.build(s, [A, C])
    except te.LoweringError as err:
        assert str(err).startswith("compute_with of 'B' into 'C': "), err
        event("refused: " + str(err).split(": ", 1)[1].split(";")[0].split(" ")[0:4].__str__())
        return
    event("fused and checked")
    a = np.random.default_rng(0).uniform(0.5, 1.5, (5, 9)).astype("float32")
    c = np.full((5, 9), np.nan, "float32")
    mod(a, c)
    b = a * 2.0 + 1.0
    extra = {None: 0.0, "row": b[:, ::-1], "column": b[::-1, :]}[mirror]
    np.testing.assert_allclose(c, b * a + extra, rtol=1e-6)
    np.testing.assert_allclose(c, evaluate(C, {A: a})[0], rtol=1e-6)  # never lowered
