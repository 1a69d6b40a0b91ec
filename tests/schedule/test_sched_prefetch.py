"""Stage.prefetch: argument checks with pinned messages, the recorded step and its JSON
round trip, and lowering errors for prefetches that no longer fit the loops.

Imports te, te.schedule.steps and pytest.
"""
import re

import pytest

import te
from te.schedule import steps as S


def _graph():
    A = te.placeholder((10, 12), name="A")
    B = te.compute((10, 12), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((10, 12), lambda i, j: B[i, j] + 1.0, name="C")
    return A, B, C


def test_prefetch_records_a_step_that_round_trips_json():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].prefetch(A, jo, 3)
    step = s.steps[-1]
    assert step == S.Prefetch(S.StageRef(1, "B"), S.StageRef(0, "A"), 0,
                              S.AxisRef(2, "j.outer"), 3)
    text = s.to_json()
    A2, B2, C2 = _graph()
    s2 = te.create_schedule(C2.op).replay(text)
    assert s2.to_json() == text
    assert str(te.lower(s2, [A2, C2])) == str(te.lower(s, [A, C]))
    assert "prefetch(&A[" in str(te.lower(s, [A, C]))


def test_prefetch_locality_is_recorded_printed_and_replayed():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].prefetch(A, jo, 3, locality=2)
    assert s.steps[-1] == S.Prefetch(S.StageRef(1, "B"), S.StageRef(0, "A"), 0,
                                     S.AxisRef(2, "j.outer"), 3, 2)
    text = str(te.lower(s, [A, C]))
    assert "prefetch(&A[((i*12) + (j.outer*4)) + 12], locality=2)" in text
    A2, B2, C2 = _graph()
    s2 = te.create_schedule(C2.op).replay(s.to_json())
    assert str(te.lower(s2, [A2, C2])) == text


def test_a_prefetch_step_saved_without_locality_replays_with_the_default():
    """Schedules saved before the hint existed have no "locality" field: they load with
    LLVM's default, 3 (keep in all cache levels); a field the step lacks is still an
    error."""
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].prefetch(A, jo, 3)
    old = s.to_json().replace(', "locality": 3', "")
    assert '"locality"' not in old
    A2, B2, C2 = _graph()
    s2 = te.create_schedule(C2.op).replay(old)
    assert s2.steps[-1].locality == 3
    assert str(te.lower(s2, [A2, C2])) == str(te.lower(s, [A, C]))
    with pytest.raises(te.ScheduleError, match=r"^schedule JSON: step Prefetch expects "
                                               r"fields \['axis', 'locality', 'offset', "
                                               r"'stage', 'tensor', 'value_index'\] "
                                               r"\(optional: \['locality'\]\), got "):
        te.create_schedule(C2.op).replay(old.replace(', "offset": 3', ""))


@pytest.mark.parametrize("locality", [-1, 4, 2.0, True, "l2", None])
def test_prefetch_locality_errors(locality):
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    with pytest.raises(te.ScheduleError, match=r"^prefetch on stage 'B': locality must be an "
                                               r"int from 0 \(non-temporal\) to 3 \(keep in "
                                               r"all cache levels\), got " +
                       re.escape(repr(locality)) + "$"):
        s[B].prefetch(A, B.op.axis[0], 1, locality=locality)


def test_prefetch_of_own_output_is_a_write_prefetch():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    s[C].prefetch(C, C.op.axis[0], 1)
    text = str(te.lower(s, [A, C]))
    assert "prefetch_write(&C[" in text


@pytest.mark.parametrize("tensor, var, offset, message", [
    ("not a tensor", 0, 1, r"^prefetch on stage 'B': tensor must be a tensor that the stage "
                           r"reads or writes, got str$"),
    ("C", 0, 1, r"^prefetch on stage 'B': tensor 'C' is neither read nor written by this "
                r"stage$"),
    ("A", "x", 1, r"^prefetch on stage 'B': var must be an IterVar of this stage, got str$"),
    ("A", "other", 1, r"^prefetch on stage 'B': var 'i' does not belong to this stage; the "
                      r"current loops are: i, j$"),
    ("A", 0, 0, r"^prefetch on stage 'B': offset must be a positive int \(iterations "
                r"ahead\), got 0$"),
    ("A", 0, 1.5, r"offset must be a positive int \(iterations ahead\), got 1.5$"),
    ("A", 0, True, r"offset must be a positive int \(iterations ahead\), got True$"),
])
def test_prefetch_argument_errors(tensor, var, offset, message):
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    t = {"A": A, "C": C}.get(tensor, tensor)
    v = {0: B.op.axis[0], "other": C.op.axis[0]}.get(var, var)
    with pytest.raises(te.ScheduleError, match=message):
        s[B].prefetch(t, v, offset)


def test_prefetch_at_vectorized_loop():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(ji)
    with pytest.raises(te.ScheduleError, match=r"^prefetch on stage 'B': var 'j.inner' is "
                                               r"vectorized; prefetch at an enclosing loop$"):
        s[B].prefetch(A, ji, 1)
    s[B].prefetch(A, jo, 1)
    s2 = te.create_schedule(C.op)
    jo2, ji2 = s2[B].split(B.op.axis[1], factor=4)
    s2[B].prefetch(A, ji2, 1)
    s2[B].vectorize(ji2)
    with pytest.raises(te.LoweringError, match=r"^prefetch at loop 'j.inner' of stage 'B': "
                                                r"the loop is vectorized; prefetch at an "
                                                r"enclosing loop$"):
        te.lower(s2, [A, C])


def test_prefetch_loop_split_afterwards():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    s[B].prefetch(A, B.op.axis[0], 1)
    s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(te.LoweringError, match=r"^prefetch at loop 'i' of stage 'B': the loop "
                                                r"was split or fused afterwards; prefetch at a "
                                                r"current loop$"):
        te.lower(s, [A, C])


def test_prefetch_of_tensor_computed_inside_another_loop():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    s[C].prefetch(B, C.op.axis[0], 1)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(te.LoweringError, match=r"^prefetch of 'B' at loop 'i' of stage 'C': "
                                                r"'B' is not stored whole"):
        te.lower(s, [A, C])


def test_prefetch_of_tensor_inlined_afterwards():
    A, B, C = _graph()
    s = te.create_schedule(C.op)
    s[C].prefetch(B, C.op.axis[0], 1)
    s[B].compute_inline()
    with pytest.raises(te.LoweringError, match=r"^prefetch of 'B' at loop 'i' of stage 'C': "
                                                r"'B' is not stored whole"):
        te.lower(s, [A, C])
