"""One road from a schedule to code: te/lower/pipeline.py names every pass from the schedule
on (schedule_to_stmt, storage_flatten, then PASSES) and stops after any of them; te.build,
the tuner's compile job and the cost model's features all take it."""
import json

import numpy as np
import pytest

import runtime
import te
from te.autotune import features as F
from te.autotune.task import compile_job
from te.lower import pipeline
from te.target import parse_target


def _schedule():
    n = te.var("n")
    A = te.placeholder((n, 67), name="A")
    B = te.compute((n, 67), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, 67), lambda i, j: B[i, j] + A[i, j], name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].vectorize(ji)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, C]


def test_the_pass_list_starts_at_the_schedule():
    assert pipeline.PASS_NAMES[:5] == ("schedule_to_stmt", "storage_flatten",
                                       "inject_virtual_thread", "lower_intrinsics",
                                       "software_pipeline")
    assert pipeline.PASS_NAMES[2:-1] == tuple(name for name, _ in pipeline.PASSES)
    assert pipeline.PASS_NAMES[-1] == "split_host_device"


# all but the passes that run only on request (instrument_bound_checkers, the split)
@pytest.mark.parametrize("name", [p for p in pipeline.PASS_NAMES if p not in
                                  pipeline.OPT_IN + (pipeline.DEVICE_SPLIT,)])
def test_stop_after_gives_what_the_pass_dumps(name, capsys):
    s, args = _schedule()
    stopped = te.lower(s, args, stop_after=name)
    capsys.readouterr()
    te.lower(s, args, dump_after=name)
    dumped = capsys.readouterr().out
    assert dumped == f"// IR after {name}\n{stopped}\n"


def test_stop_after_the_schedule_has_tensors_and_no_buffers():
    s, args = _schedule()
    nests = te.lower(s, args, stop_after="schedule_to_stmt")
    assert nests.params == () and [v.name for v in nests.scalar_params] == ["n"]
    flat = str(te.lower(s, args, stop_after="storage_flatten"))
    assert "realize B[" in str(nests) and "realize" not in flat and "allocate" in flat
    assert "ramp" not in flat
    full = str(te.lower(s, args))
    before_tasks = str(te.lower(s, args, stop_after="simplify_final"))
    assert str(te.lower(s, args, stop_after="instrument_bound_checkers")) == before_tasks
    assert str(te.lower(s, args, stop_after="parallel_outline")) == full
    assert "ramp" in full
    # the last pass wraps the parallel loop in a task that captures the two buffers
    assert "parallel_task" not in before_tasks
    assert "  parallel_task main_par0(A, C) {\n    parallel for (i, 0, n) {\n" in full


def test_a_pass_the_target_skips_stops_where_the_passes_before_it_left():
    s, args = _schedule()
    s2, args2 = _schedule()
    # 'cuda' skips vectorize and parallel_outline
    by_skipped = te.lower(s, args, target="cuda", stop_after="vectorize")
    assert str(by_skipped) == str(te.lower(s2, args2, target="cuda",
                                           stop_after="simplify_partitioned"))
    assert str(te.lower(s, args, target="cuda", stop_after="parallel_outline")) == \
        str(te.lower(s2, args2, target="cuda", stop_after="simplify_final"))


def test_stop_after_names_a_pass():
    s, args = _schedule()
    with pytest.raises(te.LoweringError, match=r"^te.lower: stop_after must be one of "
                                               r"schedule_to_stmt, storage_flatten, "
                                               r"inject_virtual_thread, lower_intrinsics, "
                                               r"software_pipeline, .*, got "
                                               r"'flatten'$"):
        te.lower(s, args, stop_after="flatten")


def test_the_cost_models_features_stop_on_the_road():
    s, args = _schedule()
    assert str(F.lower_for_features(s, args)) == \
        str(te.lower(s, args, name="features", stop_after="software_pipeline"))


class _Fixed:
    def __init__(self, s, args):
        self.s, self.args = s, args

    def instantiate(self, cfg):
        return self.s, self.args


def test_the_tuners_compile_job_is_what_te_build_compiles():
    """The worker gets te.build's LLVM IR and signature, heap buffers included (the job's
    signature used to leave them out, so a worker could not name a failed allocation)."""
    A = te.placeholder((129, 257), name="A")
    B = te.compute((129, 257), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((129, 257), lambda i, j: B[128 - i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    mod = te.build(s, [A, C])
    job, err = compile_job(_Fixed(s, [A, C]), None, runtime.parallel_available())
    assert err is None
    assert job.ll == mod._sources["ll_unoptimized"]
    assert job.signature == mod.signature.to_json()
    assert json.loads(job.signature)["heap_buffers"] == ["B"]
    a = np.random.default_rng(5).standard_normal((129, 257)).astype("float32")
    c = np.full((129, 257), np.nan, "float32")
    mod(a, c)
    np.testing.assert_allclose(c, (a[::-1] + 1.0) * 2.0, rtol=1e-6)


def _bound_schedule():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(outer, te.thread_axis("blockIdx.x"))
    s[B].bind(inner, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def test_the_host_device_split_is_the_last_pass_for_cuda(capsys):
    s, args = _bound_schedule()
    cuda = parse_target("cuda")
    plain = pipeline.lower(s, args, cuda)
    assert plain.device_plan is None
    split = pipeline.lower(s, args, cuda, split_host_device=True,
                           dump_after="split_host_device")
    assert capsys.readouterr().out == f"// IR after split_host_device\n{split}\n"
    assert str(split) == str(plain)     # it changes no statement
    assert [k.name for k in split.device_plan.kernels] == ["main_kernel0"]
    mod = te.build(s, args, target="cuda")
    assert mod.lowered.device_plan is not None
    # a function lowered before is split by te.build, through the same pass
    assert te.build(te.lower(s, args, target="cuda"), target="cuda").get_source() == \
        mod.get_source()
    with pytest.raises(te.LoweringError, match=r"^te.lower: split_host_device is for "
                                               r"target_kind 'cuda' only, got 'llvm'$"):
        pipeline.split_for_device(plain, parse_target("llvm"))


def test_the_split_refuses_at_lowering_what_te_build_refused():
    s, args = _schedule()   # a parallel loop, no thread bound
    te.lower(s, args, target="cuda")     # printing it is fine
    with pytest.raises(te.BuildError, match=r"^te.build: target 'cuda': "):
        pipeline.lower(s, args, parse_target("cuda"), split_host_device=True)
