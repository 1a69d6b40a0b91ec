"""te.tvm's runtime names: devices, tvm.nd arrays, time_evaluator with a device, module
save / create_shared / load_module / export_library, tempdir and imported_modules."""
import numpy as np
import pytest

import te.tvm as tvm
import te.tvm.testing
from runtime.cuda import EmulatedTimingWarning
from te.tvm import te
from te.tvm.contrib import cc, utils

RNG = np.random.default_rng(17)


def _vector_add(name="myadd"):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    return s, (A, B, C)


def test_devices_and_their_names():
    assert tvm.device("llvm", 0) == tvm.cpu(0) == tvm.device("cpu") == tvm.device(1, 0)
    assert tvm.device("llvm -mcpu=haswell") == tvm.cpu()
    assert tvm.cuda(0) == tvm.device("cuda", 0) == tvm.device("gpu") == tvm.device(2)
    assert tvm.cpu().exist and not tvm.cpu(1).exist
    assert (tvm.cpu().device_type, tvm.cuda(3).device_id) == (1, 3)
    assert str(tvm.cuda(1)) == "cuda(1)"
    with pytest.raises(ValueError, match=r"^dev_type: expected one of c, cpu, cuda, gpu, llvm, "
                                         r"nvptx, got 'opencl'$"):
        tvm.device("opencl", 0)
    with pytest.raises(ValueError, match=r"^dev_id: expected an integer >= 0, got -1$"):
        tvm.cpu(-1)
    with pytest.raises(ValueError, match=r"^dev_type: expected one of \[1, 2\] \(cpu, cuda\), "
                                         r"got 4$"):
        tvm.device(4)


def test_nd_array_empty_numpy_copyto():
    x = RNG.random((3, 5)).astype("float32")
    a = tvm.nd.array(x, tvm.cpu(0))
    assert (a.shape, a.dtype, a.device) == ((3, 5), "float32", tvm.cpu(0))
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(a.asnumpy(), x)
    x[0, 0] = 7.0                       # a copy: the array does not follow its source
    assert a.numpy()[0, 0] != 7.0
    e = tvm.nd.empty((3, 5), "float32", tvm.cpu())
    assert a.copyto(e) is e
    np.testing.assert_array_equal(e.numpy(), a.numpy())
    g = a.copyto(tvm.cuda(0))           # data stays on the host; cuda modules copy it per call
    assert g.device == tvm.cuda(0) and g is not a
    np.testing.assert_array_equal(g.numpy(), a.numpy())
    assert tvm.nd.array([1, 2, 3]).device == tvm.cpu()
    with pytest.raises(TypeError, match=r"^copyto: expected a Device or an NDArray, got str$"):
        a.copyto("cpu")
    with pytest.raises(TypeError, match=r"^device: expected a Device such as "
                                        r"runtime.devices.cpu\(0\), got 'llvm'$"):
        tvm.nd.array(x, "llvm")
    with pytest.raises(ValueError, match=r"^copyfrom: expected source of shape \(2,\), got "
                                         r"shape \(3, 5\)$"):
        a.copyto(tvm.nd.empty((2,)))


def test_build_call_with_nd_arrays_and_time_evaluator():
    s, args = _vector_add()
    tgt = tvm.target.Target(target="llvm", host="llvm")
    f = tvm.build(s, list(args), tgt, name="myadd")
    dev = tvm.device(tgt.kind.name, 0)
    a = tvm.nd.array(RNG.random(1001).astype("float32"), dev)
    b = tvm.nd.array(RNG.random(1001).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(1001, dtype="float32"), dev)
    f(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    result = f.time_evaluator(f.entry_name, dev, number=3, repeat=2)(a, b, c)
    assert len(result.results) == 2 and result.mean > 0
    assert tvm.build(s, list(args)).entry_name == "default_function"   # TVM's default name
    with pytest.raises(ValueError, match=r"^func_name: expected 'myadd' \(or None\), got 'x'$"):
        f.time_evaluator("x", dev)


def test_save_create_shared_load_module_and_export(tmp_path):
    s, args = _vector_add()
    f = tvm.build(s, list(args), "llvm", name="myadd")
    temp = utils.tempdir()
    f.save(temp.relpath("myadd.o"))
    f.save(temp.relpath("myadd.ll"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    assert temp.listdir() == ["myadd.ll", "myadd.o", "myadd.so"]
    assert "define" in open(temp.relpath("myadd.ll")).read()
    a, b = RNG.random(77).astype("float32"), RNG.random(77).astype("float32")
    for path in (temp.relpath("myadd.so"), str(tmp_path / "pack.so")):
        if path.endswith("pack.so"):
            f.export_library(path)
        loaded = tvm.runtime.load_module(path)
        c = tvm.nd.empty((77,), "float32")
        loaded(tvm.nd.array(a), tvm.nd.array(b), c)
        tvm.testing.assert_allclose(c.numpy(), a + b)
    directory = temp.temp_dir
    del temp                             # removed with its last reference, as in TVM
    assert not __import__("os").path.exists(directory)
    with pytest.raises(ValueError, match=r"^save: expected a path ending in .o, .ll or .s "):
        f.save(str(tmp_path / "x.ptx"))
    with pytest.raises(ValueError, match=r"^cc: choosing the compiler is not supported "):
        cc.create_shared(str(tmp_path / "y.so"), [], cc="clang")


def test_imported_modules_give_the_device_source(tmp_path):
    s, (A, B, C) = _vector_add()
    cpu_mod = tvm.build(s, [A, B, C], "llvm")
    assert cpu_mod.imported_modules == []
    assert "define" in cpu_mod.get_source()              # LLVM IR
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    fadd = tvm.build(s, [A, B, C], tvm.target.Target("cuda", host="llvm"), name="myadd")
    source = fadd.imported_modules[0].get_source()
    assert "__global__" in source and "myadd" in source
    fadd.imported_modules[0].save(str(tmp_path / "myadd.cu"))
    assert (tmp_path / "myadd.cu").read_text() == source
    a, b = RNG.random(300).astype("float32"), RNG.random(300).astype("float32")
    c = tvm.nd.empty((300,), "float32", tvm.cuda(0))
    fadd.emulator()(tvm.nd.array(a, tvm.cuda(0)), tvm.nd.array(b, tvm.cuda(0)), c)
    tvm.testing.assert_allclose(c.numpy(), a + b)


def test_assert_allclose_uses_tvm_tolerances():
    tvm.testing.assert_allclose(np.float32([1, 2]), tvm.nd.array(np.float32([1, 2])))
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(np.float32([1.0]), np.float32([1.0 + 1e-6]))
    tvm.testing.assert_allclose(np.float32([1.0]), np.float32([1.0 + 1e-6]), rtol=1e-5)
    with pytest.raises(AssertionError):       # shapes must match; no broadcasting
        tvm.testing.assert_allclose(np.ones((2, 2)), np.ones(2))


def test_a_cuda_module_without_a_gpu_runs_in_the_emulator_and_says_so(monkeypatch):
    """TVM code written for a GPU runs on a CPU machine: tvm.build gives the emulated module,
    with a warning (once per process) that it is the emulator and its times are CPU times."""
    from te.tvm import build_module
    monkeypatch.setattr(build_module, "_warned", False)
    s, (A, B, C) = _vector_add()
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    if tvm.cuda(0).exist:     # a GPU: the module runs there, nothing to warn about
        fadd = tvm.build(s, [A, B, C], "cuda")
    else:
        with pytest.warns(RuntimeWarning, match=r"no CUDA device \(or no cuda-python or "
                          r"pycuda\) on this machine, so the module runs in the CUDA "
                          r"emulator on the CPU .*"
                          r"time_evaluator times are CPU emulation times, not GPU times \(one "
                          r"call per round, whatever number says\)"):
            fadd = tvm.build(s, [A, B, C], "cuda")
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")        # once: a second build is silent
            tvm.build(s, [A, B, C], "cuda")
    dev = tvm.cuda(0)
    a, b = RNG.random(300).astype("float32"), RNG.random(300).astype("float32")
    c = tvm.nd.empty((300,), "float32", dev)
    fadd(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    tvm.testing.assert_allclose(c.numpy(), a + b)
    if tvm.cuda(0).exist:
        evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=1, repeat=1)
    else:   # emulated times say so
        with pytest.warns(EmulatedTimingWarning, match="CPU emulation times, not GPU times"):
            evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=1, repeat=1)
    result = evaluator(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    assert result.mean > 0 and result.emulated == (not tvm.cuda(0).exist)
    if not tvm.cuda(0).exist:
        # emulated: one call per round whatever number says, one round by default (TVM's)
        launches = []
        launch = fadd._backend.launch
        monkeypatch.setattr(fadd._backend, "launch", lambda *x: (launches.append(x), launch(*x)))
        with pytest.warns(EmulatedTimingWarning):
            evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=400)
        res = evaluator(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
        assert len(res.results) == 1 and len(launches) == 2     # a warm-up call and one


@pytest.mark.skipif(tvm.cuda(0).exist, reason="a GPU is present: the module runs on it")
def test_te_build_without_a_gpu_still_refuses_to_run_and_names_the_emulator():
    s, (A, B, C) = _vector_add()
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    import te as te_api
    mod = te_api.build(s, [A, B, C], target="cuda")
    a = np.ones(5, "float32")
    with pytest.raises(RuntimeError, match=r"(cannot run on a GPU|needs cuda-python|no CUDA device)"
                       r".*; without a GPU, run the module in the CUDA emulator on the CPU: "
                       r"mod.emulator\(\)\(\*args\)"):
        mod(a, a, np.empty(5, "float32"))
    c = np.empty(5, "float32")
    mod.emulator()(a, a, c)
    np.testing.assert_allclose(c, 2 * a)


def test_the_reduction_tutorials_cross_thread_reduction_as_written():
    """TVM's reduction tutorial, its GPU part (cross-thread reduction) with only the imports
    changed: printed, built for 'cuda' and checked (in the emulator where no GPU is)."""
    import warnings
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    assert "allreduce sum over threadIdx.x" in str(tvm.lower(s, [A, B], simple_mode=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the emulator's, once a process
        fcuda = tvm.build(s, [A, B], "cuda")
    assert "__shfl_down_sync" in fcuda.imported_modules[0].get_source()
    nn = 128
    dev = tvm.cuda(0)
    a = tvm.nd.array(RNG.uniform(size=(nn, nn)).astype(A.dtype), dev)
    b = tvm.nd.array(np.zeros(nn, dtype=B.dtype), dev)
    fcuda(a, b)
    tvm.testing.assert_allclose(b.numpy(), np.sum(a.numpy(), axis=1), rtol=1e-4)
