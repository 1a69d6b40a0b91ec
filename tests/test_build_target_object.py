"""te.target.Target: a target parsed once, handed down the road (te.lower, te.build, the
tuner's compile job) instead of a string each layer parses again. The numbers it carries
are runtime's own (runtime/ defines them; te/lower and te/codegen never import runtime)."""
import numpy as np
import pytest

import te
from runtime import checker
from runtime import cuda as rt_cuda
from te.schedule import stage as te_stage
from te.target import parse_target, target_features


def _vector_add(n=37):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(inner)
    return s, [A, B]


def test_parsed_once_into_a_frozen_target():
    t = parse_target("llvm -mcpu=x86-64 -mattr=+avx2 -opt-level=2")
    assert (t.kind, t.get("mcpu"), t.get("mattr"), t.get("opt-level")) == \
        ("llvm", "x86-64", "+avx2", "2")
    assert t.get("num-cores") is None and str(t) == "llvm -mcpu=x86-64 -mattr=+avx2 -opt-level=2"
    assert t.features == {"avx2"}     # -mcpu: only what -mattr turns on is known
    assert parse_target(t) is t       # a Target passes through unparsed
    assert parse_target("llvm") is parse_target("llvm")
    assert parse_target("llvm  -mcpu=x86-64 -mattr=+avx2 -opt-level=2") == t
    assert len({t, parse_target("llvm"), parse_target("llvm")}) == 2
    with pytest.raises(Exception):
        t.kind = "cuda"


def test_the_numbers_are_runtimes():
    cpu = parse_target("llvm")
    assert cpu.index_limit == checker.INDEX_LIMIT
    # a symbolic split is recorded before any target exists; the headroom it assumes is
    # what the call-time limit leaves below 2**31
    assert te_stage._SYMBOLIC_HEADROOM == 2**31 - checker.INDEX_LIMIT
    assert cpu.c_types is None and cpu.max_threads_per_block is None
    assert cpu.features == target_features("llvm")
    gpu = parse_target("cuda -arch=sm_80")
    assert gpu.get("arch") == "sm_80" and gpu.features == frozenset()
    assert gpu.max_threads_per_block == rt_cuda.MAX_THREADS_PER_BLOCK
    assert (gpu.max_block, gpu.max_grid) == (rt_cuda.MAX_BLOCK, rt_cuda.MAX_GRID)
    assert dict(gpu.c_types) == rt_cuda.C_TYPES
    with pytest.raises(TypeError):
        gpu.c_types["float32"] = "double"


@pytest.mark.parametrize("bad, message", [
    ("", r"^te.lower: target must be a string such as 'llvm', got ''$"),
    ("opencl", r"^te.lower: unknown target kind 'opencl' \(expected 'llvm' or 'cuda'\)$"),
    ("llvm -arch=sm_80", r"^te.lower: unknown target option -arch for 'llvm' \(expected "
                         r"-mcpu, -mattr, -num-cores, -opt-level\)$"),
    ("llvm -mattr=+nosuchfeature", r"^te.lower: unknown -mattr feature '\+nosuchfeature'"),
])
def test_te_lower_parses_the_target_and_names_itself(bad, message):
    s, args = _vector_add()
    with pytest.raises(te.BuildError, match=message):
        te.lower(s, args, target=bad)


def test_a_target_object_builds_what_its_string_builds():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(37).astype("float32")
    sources = []
    for target in ("llvm -mattr=-avx512f", parse_target("llvm -mattr=-avx512f")):
        s, args = _vector_add()
        mod = te.build(s, args, target=target, name="vadd")
        b = np.full(37, np.nan, "float32")
        mod(a, b)
        np.testing.assert_allclose(b, a * 2.0 + 1.0, rtol=1e-6)
        sources.append(mod.get_source("ll"))
    assert sources[0] == sources[1]


def test_te_lower_takes_a_target_for_cuda():
    s, args = _vector_add(64)
    B = args[1]
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(outer, te.thread_axis("blockIdx.x"))
    s[B].bind(inner, te.thread_axis("threadIdx.x"))
    by_target = str(te.lower(s, args, target=parse_target("cuda")))
    assert by_target == str(te.lower(s, args, target="cuda"))
    assert by_target == str(te.lower(s, args, target_kind="cuda"))
    assert "threadIdx.x" in by_target


def test_cuda_launch_limits_come_from_the_target():
    A = te.placeholder((2048,), name="A")
    B = te.compute((2048,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=2048)
    s[B].bind(outer, te.thread_axis("blockIdx.x"))
    s[B].bind(inner, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.BuildError, match=r"2048 threads per block \(threadIdx x, y, z = "
                                            r"\[2048, 1, 1\]\); CUDA allows at most 1024"):
        te.build(s, [A, B], target="cuda")


def test_the_tuners_target_check_parses_the_target():
    TuneOptions = te.autotune.TuneOptions
    assert TuneOptions(target=" llvm ").target == " llvm "
    assert TuneOptions(target="cuda -arch=sm_80").target == "cuda -arch=sm_80"
    for bad in ("llvm -mcpu=x86-64", "cuda -mcpu=x", "opencl", parse_target("llvm"), ""):
        with pytest.raises(te.ArgumentError, match=r"^te.autotune: target must be 'llvm' "
                                                   r"\(this CPU\) or 'cuda', got "):
            TuneOptions(target=bad)

