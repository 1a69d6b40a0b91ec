"""Schedule steps as JSON: to_json -> from_json -> apply_steps on a freshly declared compute
graph gives the same lowered IR; steps that do not fit the graph raise ScheduleError.

Imports te, te.schedule.steps and te.schedule.dataflow.
"""
import json

import numpy as np
import pytest

import te
from te.schedule import steps as S
from te.schedule.dataflow import apply_steps


def _matmul_relu():
    A = te.placeholder((13, 19), name="A")
    B = te.placeholder((19, 17), name="B")
    k = te.reduce_axis((0, 19), "k")
    C = te.compute((13, 17), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((13, 17), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return [A, B, D], D


def _sched_loops(s, args, out):
    C = out.op.input_tensors[0]
    xo, yo, xi, yi = s[out].tile(out.op.axis[0], out.op.axis[1], 4, 8)
    f = s[out].fuse(xo, yo)
    s[out].parallel(f)
    s[out].vectorize(yi)
    s[C].compute_at(s[out], f)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], nparts=3)
    s[C].unroll(ki)
    s[C].pragma(ko, "auto_unroll_max_step", 8)


def _sched_cache(s, args, out):
    A, B, _ = args
    C = out.op.input_tensors[0]
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    s[AA].compute_at(s[CC], s[CC].op.reduce_axis[0])
    s[C].compute_inline()  # D now reads C.local through the inlined copy-out
    xo, xi = s[out].split(out.op.axis[0], 5)
    s[CC].compute_at(s[out], xo)


def _sched_rfactor(s, args, out):
    C = out.op.input_tensors[0]
    ko, ki = s[C].split(s[C].op.reduce_axis[0], 4)
    RF = s.rfactor(C, ki)
    s[RF].compute_at(s[C], s[C].op.axis[1])
    s[RF].storage_align(s[RF].op.axis[1], 4, 1)


def _sched_inline_root(s, args, out):
    C = out.op.input_tensors[0]
    s[C].compute_at(s[out], out.op.axis[0])
    s[C].compute_root()
    s[out].reorder(out.op.axis[1], out.op.axis[0])


SCHEDULES = [_sched_loops, _sched_cache, _sched_rfactor, _sched_inline_root]


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.__name__)
def test_json_round_trip_gives_identical_ir(make):
    args, out = _matmul_relu()
    s = te.create_schedule(out.op)
    make(s, args, out)
    text = s.to_json()
    assert json.loads(text)  # plain JSON
    replayed_steps = S.from_json(text)
    assert tuple(replayed_steps) == tuple(s.steps)
    args2, out2 = _matmul_relu()  # a fresh graph: new tensors, new Vars
    s2 = apply_steps(te.create_schedule(out2.op), replayed_steps)
    assert s2.to_json() == text
    assert str(te.lower(s2, args2)) == str(te.lower(s, args))


def test_json_round_trip_bind():
    A = te.placeholder((37,), name="A")
    B = te.compute((37,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], 8)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    A2 = te.placeholder((37,), name="A")
    B2 = te.compute((37,), lambda i: A2[i] + 1.0, name="B")
    s2 = apply_steps(te.create_schedule(B2.op), S.from_json(s.to_json()))
    assert str(te.lower(s2, [A2, B2])) == str(te.lower(s, [A, B]))


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.__name__)
def test_round_trip_replayed_schedule_runs(make):
    args, out = _matmul_relu()
    s = te.create_schedule(out.op)
    make(s, args, out)
    args2, out2 = _matmul_relu()
    s2 = apply_steps(te.create_schedule(out2.op), S.from_json(s.to_json()))
    mod = te.build(s2, args2)
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (13, 19)).astype("float32")
    b = rng.uniform(-1, 1, (19, 17)).astype("float32")
    d = np.full((13, 17), np.nan, "float32")
    mod(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


def _split_steps():
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 4)
    s[B].vectorize(xi)
    return json.loads(s.to_json())


def _fresh():
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op)


def test_missing_axis_index_raises():
    data = _split_steps()
    data[1]["axis"]["index"] = 7  # stage B has only i, i.outer, i.inner
    with pytest.raises(te.ScheduleError, match=r"schedule replay: step 1 \(Annotate\) does "
                                               r"not fit this compute graph"):
        apply_steps(_fresh(), S.from_dicts(data))


def test_axis_name_mismatch_raises():
    data = _split_steps()
    data[1]["axis"]["name"] = "j.inner"
    with pytest.raises(te.ScheduleError, match=r"schedule replay: axis 2 of 'B' is 'i.inner', "
                                               r"the step expects 'j.inner'"):
        apply_steps(_fresh(), S.from_dicts(data))


def test_missing_stage_raises():
    data = _split_steps()
    data[0]["stage"]["index"] = 5
    with pytest.raises(te.ScheduleError, match=r"step 0 \(Split\) does not fit"):
        apply_steps(_fresh(), S.from_dicts(data))


def test_stage_name_mismatch_raises():
    data = _split_steps()
    data[0]["stage"]["name"] = "C"
    with pytest.raises(te.ScheduleError, match=r"stage 1 is 'B', the step expects 'C'"):
        apply_steps(_fresh(), S.from_dicts(data))


def test_replayed_step_revalidated():
    data = _split_steps()
    data[0]["factor"] = 0
    with pytest.raises(te.ScheduleError, match=r"factor must be a positive int, got 0"):
        apply_steps(_fresh(), S.from_dicts(data))


def test_bad_json_raises():
    with pytest.raises(te.ScheduleError, match=r"schedule JSON: not valid JSON"):
        S.from_json("[{")
    with pytest.raises(te.ScheduleError, match=r"schedule JSON: unknown step type 'Twist'"):
        S.from_json('[{"type": "Twist"}]')
    with pytest.raises(te.ScheduleError, match=r"schedule JSON: step ComputeRoot expects "
                                               r"fields \['stage'\], got \[\]"):
        S.from_json('[{"type": "ComputeRoot"}]')
    with pytest.raises(te.ScheduleError, match=r"expected a list of steps, got dict"):
        S.from_json('{"type": "ComputeRoot"}')


def test_replay_method_rebuilds_the_schedule_and_refuses_a_used_one():
    A = te.placeholder((13, 9), name="A")
    B = te.compute((13, 9), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    text = s.to_json()
    replayed = te.create_schedule(B.op).replay(text)
    assert str(te.lower(replayed, [A, B])) == str(te.lower(s, [A, B]))
    with pytest.raises(te.ScheduleError, match=r"^replay: the schedule already has steps"):
        s.replay(text)


def _one_split(**changes):
    """The JSON of a one-split schedule of _fresh()'s graph, with fields of the split changed."""
    step = dict(_split_steps()[0], **changes)
    return json.dumps([step])


_STAGE_B = {"type": "StageRef", "index": 1, "name": "B"}


@pytest.mark.parametrize("text, message", [
    ("5", r"^schedule JSON: expected a list of steps, got int"),
    ("[5]", r"^schedule JSON: step 0 must be an object with a \"type\", got int"),
    ("[[1, 2]]", r"^schedule JSON: step 0 must be an object with a \"type\", got list"),
    ('[{"type": [1]}]', r"^schedule JSON: unknown step type \[1\] \(step 0\); expected one "
                        r"of Split, Fuse, "),
    ('[{"type": "StageRef", "index": 1, "name": "B"}]',
     r"^schedule JSON: unknown step type 'StageRef' \(step 0\); expected one of "
     r"Split"),
    (_one_split(stage="B"), r"^schedule JSON: step 0 \(Split\): field 'stage' must be a "
                            r"StageRef object, got str 'B'"),
    (_one_split(stage=dict(_STAGE_B, index="1")),
     r"^schedule JSON: step 0 \(Split\): field 'stage': index must be an int >= 0, got '1'"),
    (_one_split(stage=dict(_STAGE_B, index=1.5)),
     r"field 'stage': index must be an int >= 0, got 1.5"),
    (_one_split(stage=dict(_STAGE_B, index=-1)),
     r"field 'stage': index must be an int >= 0, got -1"),
    (_one_split(stage=dict(_STAGE_B, index=True)),
     r"field 'stage': index must be an int >= 0, got True"),
    (_one_split(stage=dict(_STAGE_B, name=5)), r"field 'stage': name must be a string, got 5"),
    (_one_split(stage={"index": 1, "name": "B"}),
     r"field 'stage' must be a StageRef object, got an object of type None"),
    (_one_split(stage=dict(_STAGE_B, type="AxisRef")),
     r"field 'stage' must be a StageRef object, got an object of type 'AxisRef'"),
    (_one_split(stage=dict(_STAGE_B, extra=0)),
     r"field 'stage': a StageRef has fields \['index', 'name'\], got \['extra', 'index', "
     r"'name'\]"),
    (_one_split(factor="4"), r"step 0 \(Split\): field 'factor' must be int or null, got "
                             r"str '4'"),
    (_one_split(factor=True), r"field 'factor' must be int or null, got bool True"),
    (_one_split(axis=_split_steps()[0]),
     r"field 'axis' must be an AxisRef object, got an object of type 'Split'"),
    ('[{"type": "Fuse", "stage": {"type": "StageRef", "index": 1, "name": "B"}, "axes": 5}]',
     r"step 0 \(Fuse\): field 'axes' must be a list of AxisRef objects, got int 5"),
    ('[{"type": "Fuse", "stage": {"type": "StageRef", "index": 1, "name": "B"}, "axes": [5]}]',
     r"step 0 \(Fuse\): field 'axes' item 0 must be an AxisRef object, got int 5"),
    ('[{"type": "ComputeRoot", "stage": {"type": "StageRef", "index": 1, "name": "B"}, '
     '"bogus": 1}]', r"step ComputeRoot expects fields \['stage'\], got \['bogus', 'stage'\]"),
    ("[" * 5000 + "]" * 5000, r"^schedule JSON: nested too deeply \(a schedule is a list of "
                              r"flat steps\)"),
    ("[" + '{"type": "ComputeRoot", "stage": ' * 3000 + "1" + "}" * 3000 + "]",
     r"^schedule JSON: nested too deeply"),
])
def test_malformed_json_names_what_is_wrong(text, message):
    with pytest.raises(te.ScheduleError, match=message):
        _fresh().replay(text)


def test_unknown_annotation_kind_is_named():
    data = _split_steps()
    data[1]["kind"] = "sideways"
    with pytest.raises(te.ScheduleError, match=r"step 1 \(Annotate\): field 'kind' must be one "
                                               r"of 'vectorized', 'unrolled', 'parallel', "
                                               r"got 'sideways'"):
        _fresh().replay(json.dumps(data))


def test_replay_takes_a_json_string_or_steps_and_nothing_else():
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] * 2.0, name="B")
    text = json.dumps(_split_steps())
    want = str(te.lower(te.create_schedule(B.op).replay(text), [A, B]))
    for steps in (S.from_json(text), list(S.from_json(text)), text.encode()):
        assert str(te.lower(te.create_schedule(B.op).replay(steps), [A, B])) == want
    with pytest.raises(te.ScheduleError, match=r"^replay: steps must be a to_json\(\) string "
                                               r"or a sequence of steps, got int"):
        te.create_schedule(B.op).replay(5)
    with pytest.raises(te.ScheduleError, match=r"^replay: step 0 must be a step \(Split, "
                                               r"Fuse, .*\), got dict"):
        te.create_schedule(B.op).replay(json.loads(text))
