"""Stage.set_scope (TVM's): the scope of a stage's buffer, recorded and replayed as a step.

On target 'llvm' every scope is an ordinary buffer of the function, as in TVM, so results
match numpy whatever the scope; the scopes that are refused, with their messages. Target
'cuda' (shared memory at an attach point) is in tests/codegen/cuda/test_cuda_set_scope.py.
"""
import numpy as np
import pytest
from helpers import rand_array

import te
from te.errors import ScheduleError
from te.schedule import steps as S


def _scaled_row_sums(rows, cols):
    """(A, B, C): B = 2A + 1, C[i] = the sum of row i of B."""
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    k = te.reduce_axis((0, cols), "k")
    C = te.compute((rows,), lambda i: te.sum(B[i, k], axis=k), name="C")
    return A, B, C


@pytest.mark.parametrize("scope, attach", [("local", True), ("shared", False), ("warp", True)])
def test_cpu_results_unchanged_whatever_the_scope(scope, attach):
    A, B, C = _scaled_row_sums(7, 33)
    s = te.create_schedule(C.op)
    if attach:
        s[B].compute_at(s[C], C.op.axis[0])
    s[B].set_scope(scope)
    lowered = str(te.lower(s, [A, C]))
    size = 33 if attach else 7 * 33
    assert f"allocate B[float32 * {size}] scope={scope} {{" in lowered
    a = rand_array((7, 33))
    c = np.full(7, np.nan, "float32")
    te.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, (a * 2 + 1).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_step_replays_and_round_trips_json():
    A, B, C = _scaled_row_sums(5, 9)
    s = te.create_schedule(C.op)
    s[B].set_scope("local")
    s[B].compute_at(s[C], C.op.axis[0])
    assert s.steps[0] == S.SetScope(S.StageRef(1, "B"), "local")
    text = s.to_json()
    assert '{"scope": "local", "stage": {"index": 1, "name": "B", "type": "StageRef"}, ' \
           '"type": "SetScope"}' in text
    A2, B2, C2 = _scaled_row_sums(5, 9)
    s2 = te.create_schedule(C2.op).replay(text)
    assert s2[B2].scope == "local" and s2.to_json() == text
    assert str(te.lower(s2, [A2, C2])) == str(te.lower(s, [A, C]))
    with pytest.raises(ScheduleError, match=r"^schedule JSON: step 0 \(SetScope\): field "
                                            r"'scope' must be one of 'global', 'shared', "
                                            r"'local', 'warp', 'wmma\.accumulator', got "
                                            r"'texture'$"):
        te.create_schedule(C2.op).replay(text.replace('"local"', '"texture"'))


def test_setting_global_again_undoes_it():
    A, B, C = _scaled_row_sums(3, 4)
    s = te.create_schedule(C.op)
    s[B].set_scope("shared")
    s[B].set_scope("global")
    assert "scope=" not in str(te.lower(s, [A, C]))
    s[C].set_scope("global")   # an output is in global memory already: accepted
    assert [type(step).__name__ for step in s.steps] == ["SetScope"] * 3


def test_refusals_name_the_parameter_and_what_came():
    A, B, C = _scaled_row_sums(3, 4)
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"^set_scope on stage 'B': scope must be one of "
                                            r"'global', 'shared', 'local', 'warp', "
                                            r"'wmma\.accumulator', got 'Shared'$"):
        s[B].set_scope("Shared")
    with pytest.raises(ScheduleError, match=r"^set_scope on stage 'B': scope must be one of "
                                            r".*, got None$"):
        s[B].set_scope(None)
    with pytest.raises(ScheduleError, match=r"^set_scope on stage 'A': 'A' is a placeholder "
                                            r"\(an input\), a buffer the caller passes in "
                                            r"global memory, so its scope can only be "
                                            r"'global', got 'shared'; "
                                            r"s.cache_read\(A, 'shared', readers\) reads it "
                                            r"into a copy there$"):
        s[A].set_scope("shared")
    with pytest.raises(ScheduleError, match=r"^set_scope on stage 'C': 'C' is an output of the "
                                            r"schedule, a buffer the caller passes in global "
                                            r"memory, so its scope can only be 'global', got "
                                            r"'local'; s.cache_write\(C, 'local'\) computes it "
                                            r"there and copies it out$"):
        s[C].set_scope("local")
    E = te.extern((4,), [A], lambda ins, outs: te.call_packed("f", ins[0], outs[0]), name="E")
    F = te.compute((4,), lambda i: E[i] + 1.0, name="F")
    s = te.create_schedule(F.op)
    with pytest.raises(ScheduleError, match=r"^set_scope on stage 'E': 'E' is a te.extern "
                                            r"result; only a te.compute stage's scope can be "
                                            r"set$"):
        s[E].set_scope("local")
    assert s.steps == []   # nothing recorded by a refused call
