"""te.tvm's target objects, tvm.tir's helpers and intrinsic lowering rules, each checked
against numpy on random data."""
import threading

import numpy as np
import pytest

import te.tvm as tvm
import te.tvm.testing
from te.errors import BuildError, ComputeError, LoweringError
from te.lower.passes import lower_intrinsics
from te.target import Target as TeTarget
from te.tvm import te
from te.tvm.ir import register_intrin_lowering, register_op_attr

RNG = np.random.default_rng(1717)


@pytest.fixture
def no_rules(monkeypatch):
    """Intrinsic lowering rules are process-wide: each test starts and ends without any."""
    monkeypatch.setattr(lower_intrinsics, "_RULES", {})


def test_target_with_host_kind_attrs_and_current():
    t = tvm.target.Target(target="llvm -mcpu=haswell", host="llvm")
    assert t.kind.name == "llvm" and t.kind == "llvm"
    assert t.host.kind.name == "llvm" and t.attrs == {"mcpu": "haswell"} and t.mcpu == "haswell"
    assert isinstance(t, tvm.target.Target)
    assert isinstance(TeTarget("cuda", (), "cuda"), tvm.target.Target)
    assert tvm.target.Target(t) == t                      # a Target is taken as it is
    gpu = tvm.target.Target("cuda -arch=sm_80", host="llvm")
    assert (gpu.kind.name, gpu.arch, str(gpu)) == ("cuda", "sm_80", "cuda -arch=sm_80")
    assert tvm.target.Target.current() is None
    with gpu:
        assert tvm.target.Target.current() is gpu
        with t:
            assert tvm.target.Target.current() is t
        assert tvm.target.Target.current() is gpu
    seen = []
    with gpu:
        worker = threading.Thread(target=lambda: seen.append(tvm.target.Target.current()))
        worker.start()
        worker.join()
    assert seen == [None]                                 # each thread has its own scopes
    with pytest.raises(BuildError, match=r"^Target.current: no `with target:` block is being "
                                         r"run$"):
        tvm.target.Target.current(allow_none=False)
    with pytest.raises(BuildError, match=r"^tvm.target.Target: unknown target kind 'opencl' "
                                        r"\(expected 'llvm' or 'cuda'\)$"):
        tvm.target.Target("opencl")


def test_build_takes_the_current_target_and_refuses_what_it_lacks():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    with tvm.target.Target("llvm"):
        f = tvm.build(s, [A, B])
    a = RNG.random(16).astype("float32")
    b = tvm.nd.empty((16,), "float32")
    f(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), a * 3, rtol=1e-6)
    with pytest.raises(BuildError, match=r"^tvm.build: the binds argument is not supported "
                                        r"\(expected None\)$"):
        tvm.build(s, [A, B], binds={})
    with pytest.raises(BuildError, match=r"^tvm.build: a dict of targets is not supported"):
        tvm.build(s, [A, B], {"llvm": s})


def test_tir_helpers_match_numpy():
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="int32")
    X = te.placeholder((n,), name="X")
    C = te.compute((n,), lambda i: tvm.tir.Select(
        tvm.tir.all(A[i] > 0, tvm.tir.indexmod(A[i], 3) != 1),
        tvm.tir.indexdiv(A[i], 4) + tvm.tir.floormod(A[i], 5),
        tvm.tir.if_then_else(tvm.tir.any(A[i] < -5, A[i] == 0), tvm.tir.const(-1, "int32"),
                             tvm.tir.floordiv(A[i], 3))), name="C")
    Y = te.compute((n,), lambda i: tvm.tir.exp(X[i]) + tvm.tir.log(X[i] + 1.0)
                   + tvm.tir.sqrt(X[i]) + tvm.tir.call_pure_extern("float32", "tanhf", X[i])
                   + tvm.tir.call_intrin("float32", "tir.sin", X[i])
                   + tvm.tir.fmod(X[i] * 7.0 - 3.0, 0.75), name="Y")
    s = te.create_schedule([C.op, Y.op])
    f = tvm.build(s, [A, X, C, Y])
    a = RNG.integers(-20, 20, 53).astype("int32")
    x = RNG.random(53).astype("float32")
    c, y = tvm.nd.empty((53,), "int32"), tvm.nd.empty((53,), "float32")
    f(tvm.nd.array(a), tvm.nd.array(x), c, y)
    want_c = np.where((a > 0) & (a % 3 != 1), a // 4 + a % 5,
                      np.where((a < -5) | (a == 0), -1, a // 3))
    np.testing.assert_array_equal(c.numpy(), want_c)
    want_y = np.exp(x) + np.log(x + 1) + np.sqrt(x) + np.tanh(x) + np.sin(x)
    want_y += np.fmod(x * np.float32(7) - np.float32(3), np.float32(0.75))
    tvm.testing.assert_allclose(y.numpy(), want_y, rtol=1e-5)
    assert tvm.tir.const(2).dtype == "int32" and tvm.tir.const(2.5).dtype == "float32"
    assert tvm.tir.const(-1, "int64").dtype == "int64"
    assert tvm.tir.call_intrin("float32", "tir.sin", X[0]).op.name == "tir.sin"
    assert tvm.tir.call_pure_extern("float32", "expf", X[0]).op.name == "tir.call_pure_extern"
    with pytest.raises(ComputeError, match=r"^call_intrin: func_name must be 'tir.NAME', got "
                                        r"'tir.not a name'$"):
        tvm.tir.call_intrin("float32", "tir.not a name", X[0])


def test_intrinsic_lowering_rules_per_target(no_rules):
    def mylog(x):
        return tvm.tir.call_intrin(x.dtype, "tir.mylog", x)

    def cpu_rule(op):
        assert isinstance(op, tvm.tir.Call) and op.op.name == "tir.mylog"
        return tvm.tir.call_pure_extern("float32", "logf", op.args[0])

    register_op_attr("tir.mylog", "TCallEffectKind", tvm.tir.CallEffectKind.Pure)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: mylog(A[i]) + te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(BuildError, match=r"mylog"):   # no rule for it on llvm yet
        tvm.build(s, [A, B])
    register_intrin_lowering("tir.mylog", target="llvm", f=cpu_rule, level=99)
    f = tvm.build(s, [A, B])
    a = RNG.random(40).astype("float32") + 0.5
    b = tvm.nd.empty((40,), "float32")
    f(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), np.log(a) + np.exp(a), rtol=1e-5)

    # a rule for cuda changes the CUDA C (expf -> __expf), which the emulator runs
    @register_intrin_lowering("tir.exp", target="cuda", level=99)
    def fast_exp(op):
        return tvm.tir.call_pure_extern(op.dtype, "__expf", op.args[0])
    register_intrin_lowering("tir.mylog", target="default", f=cpu_rule)
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    g = tvm.build(s, [A, B], "cuda")
    source = g.imported_modules[0].get_source()
    assert "__expf(" in source and "logf(" in source
    b = np.empty(40, "float32")
    g.emulator()(a, b)
    tvm.testing.assert_allclose(b, np.log(a) + np.exp(a), rtol=1e-5)
    # a lower level does not replace a higher one; a rule returning the call keeps it
    register_intrin_lowering("tir.exp", target="cuda", f=lambda op: op, level=1)
    assert "__expf(" in tvm.build(s, [A, B], "cuda").get_source()
    register_intrin_lowering("tir.exp", target="cuda", f=lambda op: op, level=100)
    assert "__expf(" not in tvm.build(s, [A, B], "cuda").get_source()


def test_intrinsic_rule_errors(no_rules):
    with pytest.raises(LoweringError, match=r"^register_intrin_lowering: op_name must look like "
                                        r"'tir.NAME', got 'exp'$"):
        register_intrin_lowering("exp", target="cuda", f=lambda op: op)
    with pytest.raises(LoweringError, match=r"^register_intrin_lowering: target must be one of "
                                        r"llvm, cuda, default, got 'opencl'$"):
        register_intrin_lowering("tir.exp", target="opencl", f=lambda op: op)
    register_intrin_lowering("tir.exp", target="llvm",
                             f=lambda op: tvm.tir.call_pure_extern("float64", "exp",
                                                                   op.args[0].astype("float64")))
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: te.exp(A[i]), name="B")
    with pytest.raises(LoweringError, match=r"^lower_intrinsics: the rule registered for 'tir.exp' "
                                        r"on target 'llvm' returned dtype float64 for a float32 "
                                        r"call; it must return the call's dtype$"):
        tvm.build(te.create_schedule(B.op), [A, B])
