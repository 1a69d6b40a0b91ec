"""te.build(..., instrument_bound_checkers=True): an access outside its buffer raises
IndexError naming the buffer, the index and the extent, instead of touching memory; the
process survives and the module stays usable; in-range programs give the results of the
unchecked build. Scalar, vector (Ramp and gathered lanes) and parallel (GOMP) code.

Imports te, runtime, numpy, pytest and helpers.
"""
import re

import numpy as np
import pytest

import runtime
import te
from helpers import rand_array, shape_of
from runtime import signature, threadpool
from te.compute import ops
from te.codegen.llvm import bounds as codegen_llvm_bounds
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.interp import OutOfBoundsError, run_func
from te.lower.passes.bound_checkers import instrument_bound_checkers

needs_libgomp = pytest.mark.skipif(not threadpool.parallel_available(),
                                   reason="libgomp is not installed")


def _gather(lanes=None, parallel=False, size=10):
    """C[i] = A[I[i]] for a symbolic n: A has `size` elements, I holds the indices."""
    n = te.var("n")
    A = te.placeholder((size,), name="A")
    I = te.placeholder((n,), name="I", dtype="int32")
    C = te.compute((n,), lambda i: A[I[i]] * 2.0, name="C")
    s = te.create_schedule(C.op)
    if lanes:
        outer, inner = s[C].split(C.op.axis[0], lanes)
        s[C].vectorize(inner)
        if parallel:
            s[C].parallel(outer)
    elif parallel:
        s[C].parallel(C.op.axis[0])
    return s, [A, I, C]


def _call_gather(mod, index):
    a = rand_array((10,))
    c = np.full(len(index), np.nan, "float32")
    mod(a, np.asarray(index, "int32"), c)
    return a, c


def _message(access, buffer, index, extent):
    return re.escape(f"kernel 'main': {access} buffer '{buffer}' at index {index} out of "
                     f"range [0, {extent})")


@pytest.mark.parametrize("bad", [10, 12, 1 << 28, -1, -(1 << 28)])
def test_gather_with_a_bad_index_raises_index_error(bad):
    mod = te.build(*_gather(), instrument_bound_checkers=True)
    with pytest.raises(IndexError, match=_message("load from", "A", bad, 10)):
        _call_gather(mod, [1, 9, bad, 0])
    a, c = _call_gather(mod, [1, 9, 0, 3])  # the module is still usable
    np.testing.assert_array_equal(c, a[[1, 9, 0, 3]] * 2.0)


def test_an_index_that_overflows_int32_is_checked_as_the_kernel_computes_it():
    """I[i] * 100000 could overflow int32, so the kernel computes it in int64 (index_width):
    the check sees the exact index the kernel would use (never a value LLVM may assume did
    not overflow)."""
    n = te.var("n")
    A = te.placeholder((10,), name="A")
    I = te.placeholder((n,), name="I", dtype="int32")
    C = te.compute((n,), lambda i: A[I[i] * 100000], name="C")
    mod = te.build(te.create_schedule(C.op), [A, I, C], instrument_bound_checkers=True)
    with pytest.raises(IndexError, match=_message("load from", "A", 30000 * 100000, 10)):
        mod(rand_array((10,)), np.array([0, 30000], "int32"), np.zeros(2, "float32"))


def test_symbolic_shape_read_past_the_end_raises_index_error():
    n, m = te.var("n"), te.var("m")
    X = te.placeholder((n,), name="X")
    Y = te.compute((m,), lambda i: X[i] + 1.0, name="Y")
    mod = te.build(te.create_schedule(Y.op), [X, Y], instrument_bound_checkers=True)
    x = rand_array((5,))
    with pytest.raises(IndexError, match=_message("load from", "X", 5, 5)):
        mod(x, np.zeros(8, "float32"))
    y = np.zeros(5, "float32")
    mod(x, y)
    np.testing.assert_array_equal(y, x + 1.0)


def test_vectorized_read_past_the_end_names_the_first_lane_outside():
    n, m = te.var("n"), te.var("m")
    X = te.placeholder((n,), name="X")
    Y = te.compute((m,), lambda i: X[i] * 3.0, name="Y")
    s = te.create_schedule(Y.op)
    _, inner = s[Y].split(Y.op.axis[0], 8)
    s[Y].vectorize(inner)
    mod = te.build(s, [X, Y], instrument_bound_checkers=True)
    assert "checked(ramp(" in str(mod.lowered)
    with pytest.raises(IndexError, match=_message("load from", "X", 13, 13)):
        mod(rand_array((13,)), np.zeros(16, "float32"))


def test_vectorized_gather_names_the_bad_lane():
    mod = te.build(*_gather(lanes=8), instrument_bound_checkers=True)
    index = [3] * 24
    index[13], index[14] = -7, 99  # lanes 5 and 6 of the second vector
    with pytest.raises(IndexError, match=_message("load from", "A", -7, 10)):
        _call_gather(mod, index)
    index[13] = 4
    with pytest.raises(IndexError, match=_message("load from", "A", 99, 10)):
        _call_gather(mod, index)
    a, c = _call_gather(mod, list(range(10)) * 2 + [9, 8, 7])
    np.testing.assert_array_equal(c, a[list(range(10)) * 2 + [9, 8, 7]] * 2.0)


@needs_libgomp
@pytest.mark.parametrize("lanes", [None, 4])
def test_parallel_body_reports_its_error_and_the_module_stays_usable(lanes):
    mod = te.build(*_gather(lanes=lanes, parallel=True), instrument_bound_checkers=True)
    assert "GOMP_parallel" in mod.get_source("ll")
    before = runtime.num_threads()
    runtime.set_num_threads(2)
    try:
        index = np.arange(4001) % 10
        index[[7, 2500, 4000]] = [10, -3, 1234]  # in different threads' chunks
        with pytest.raises(IndexError) as err:
            _call_gather(mod, index)
        bad = re.fullmatch(r"kernel 'main': load from buffer 'A' at index (-?\d+) out of "
                           r"range \[0, 10\)", str(err.value))
        assert bad and int(bad.group(1)) in (10, -3, 1234), err.value
        good = np.arange(4001) % 10
        a, c = _call_gather(mod, good)
        np.testing.assert_array_equal(c, a[good] * 2.0)
    finally:
        runtime.set_num_threads(before)


@needs_libgomp
def test_parallel_body_with_a_heap_buffer_fails_cleanly():
    """A body that both allocates (a symbolic-size row) and checks: the error is the check's,
    and many failing calls neither crash nor leak the process into trouble."""
    n, k = te.var("n"), te.var("k")
    A = te.placeholder((10,), name="A")
    I = te.placeholder((n, k), name="I", dtype="int32")
    T = te.compute((n, k), lambda i, j: A[I[i, j]] + 1.0, name="T")
    C = te.compute((n, k), lambda i, j: T[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[T].compute_at(s[C], C.op.axis[0])
    s[C].parallel(C.op.axis[0])
    mod = te.build(s, [A, I, C], instrument_bound_checkers=True)
    assert mod.signature.heap_buffers == ("T",)
    a = rand_array((10,))
    index = np.tile(np.arange(7, dtype="int32"), (50, 1))
    index[31, 4] = 17
    for _ in range(200):
        with pytest.raises(IndexError, match=_message("load from", "A", 17, 10)):
            mod(a, index, np.zeros((50, 7), "float32"))
    index[31, 4] = 4
    c = np.zeros((50, 7), "float32")
    mod(a, index, c)
    np.testing.assert_array_equal(c, (a[index] + 1.0) * 2.0)


def _scatter_func():
    """C[I[i]] = A[i]: a store whose index the data decides (hand-made loop IR; a compute
    definition always stores inside its output)."""
    n = te.var("n")
    i = te.var("i")
    bufs = {name: ir.Buffer(name, dtype, shape, (te.const(1),), te.Var(name, "handle"))
            for name, dtype, shape in (("A", "float32", (n,)), ("I", "int32", (n,)),
                                       ("C", "float32", (te.const(6),)))}
    A, I, C = bufs["A"], bufs["I"], bufs["C"]
    body = ir.For(i, te.const(0), n, ir.SERIAL,
                  ir.Store(C, ir.Load("int32", I, i), ir.Load("float32", A, i)))
    func = PrimFunc("main", (A, I, C), (n,), body)
    return PrimFunc("main", func.params, func.scalar_params,
                       instrument_bound_checkers(func))


def test_store_outside_the_buffer_raises_index_error():
    func = _scatter_func()
    assert "C[checked(I[i], 6)] = A[i]" in str(func)
    mod = te.build(func)
    a = rand_array((4,))
    for bad in (6, -2):
        c = np.zeros(6, "float32")
        with pytest.raises(IndexError, match=_message("store to", "C", bad, 6)):
            mod(a, np.array([0, 5, bad, 1], "int32"), c)
        np.testing.assert_array_equal(c[[0, 5]], a[:2])  # stores before it happened
    c = np.zeros(6, "float32")
    mod(a, np.array([4, 0, 2, 1], "int32"), c)
    np.testing.assert_array_equal(c[[4, 0, 2, 1]], a)


def test_a_guard_on_memory_proves_nothing_a_store_may_change():
    """if (I[0] >= 0 && I[0] < 10) { I[0] = 50; C[0] = A[I[0]] }: the guard held when it
    was evaluated, not after the store."""
    bufs = {name: ir.Buffer(name, dtype, (te.const(size),), (te.const(1),),
                            te.Var(name, "handle"))
            for name, dtype, size in (("A", "float32", 10), ("I", "int32", 1),
                                      ("C", "float32", 1))}
    A, I, C = bufs["A"], bufs["I"], bufs["C"]
    zero = te.const(0)
    first = ir.Load("int32", I, zero)
    body = ir.IfThenElse((first >= 0) & (first < 10), ir.seq(ir.Store(I, zero, te.const(50)),
                                            ir.Store(C, zero, ir.Load("float32", A, first))))
    func = PrimFunc("main", (A, I, C), (), body)
    func = PrimFunc("main", func.params, (), instrument_bound_checkers(func),
                       {"output_params": ("I", "C")})
    assert "C[0] = A[checked(I[0], 10)]" in str(func)
    with pytest.raises(IndexError, match=_message("load from", "A", 50, 10)):
        te.build(func)(rand_array((10,)), np.array([3], "int32"), np.zeros(1, "float32"))


def test_the_interpreter_runs_the_checks_too():
    func = _scatter_func()
    with pytest.raises(OutOfBoundsError, match=re.escape("buffer 'C': index 7 out of range "
                                                         "[0, 6)")):
        run_func(func, [rand_array((2,)), np.array([1, 7], "int32"), np.zeros(6, "float32")])


def _schedules():
    """(name, schedule, args, input shapes) of in-range programs, with vector, parallel,
    tail and padding code."""
    out = []
    A, B = te.placeholder((37, 29), name="A"), te.placeholder((29, 19), name="B")
    C = ops.matmul(A, B)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].vectorize(ji)
    s[C].parallel(io)
    out.append(("matmul", s, [A, B, C]))
    D, W = te.placeholder((1, 3, 9, 11), name="D"), te.placeholder((4, 3, 3, 3), name="W")
    Y = ops.conv2d_nchw(D, W, stride=1, padding=1)
    out.append(("conv2d_padded", te.create_schedule(Y.op), [D, W, Y]))
    n = te.var("n")
    X = te.placeholder((n, 13), name="X")
    Z = te.compute((n, 13), lambda i, j: X[i, j] * 2.0 + X[i, 12 - j], name="Z")
    s = te.create_schedule(Z.op)
    _, ji = s[Z].split(Z.op.axis[1], 4)
    s[Z].vectorize(ji)
    s[Z].parallel(Z.op.axis[0])
    out.append(("symbolic_tail", s, [X, Z]))
    return out


@pytest.mark.parametrize("case", _schedules(), ids=lambda c: c[0])
def test_in_range_programs_give_the_unchecked_results(case):
    _, s, args = case
    shapes = [shape_of(t, {"n": 21}) for t in args]
    rng = np.random.default_rng(3)
    inputs = [rand_array(shape, rng=rng) for shape in shapes[:-1]]
    results = []
    for checked in (False, True):
        out = np.full(shapes[-1], np.nan, "float32")
        te.build(s, args, instrument_bound_checkers=checked)(*inputs, out)
        results.append(out)
    np.testing.assert_array_equal(results[1], results[0])
    assert not np.isnan(results[0]).any()


def test_accesses_the_loop_ranges_prove_are_not_checked():
    """No check where the interval arithmetic proves the index in range (loop ranges, the
    guards of padding and of split tails, lanes of vector indices): such kernels keep the
    unchecked ABI."""
    for name, s, args in _schedules():
        mod = te.build(s, args, instrument_bound_checkers=True)
        assert "checked(" not in str(mod.lowered), name
        assert mod.signature.checked_buffers == ()
    n = te.var("n")
    X = te.placeholder((n,), name="X")
    Y = te.compute((n,), lambda i: X[i] + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    _, inner = s[Y].split(Y.op.axis[0], 8)
    text = str(te.lower(s, [X, Y], instrument_bound_checkers=True))
    assert "if (((i.outer*8) + i.inner) < n) {\n        Y[(i.outer*8) + i.inner] = " \
           "X[(i.outer*8) + i.inner] + 1f" in text, text


def test_lower_shows_the_pass_in_its_dump(capsys):
    s, args = _gather()
    te.lower(s, args, instrument_bound_checkers=True, dump_after="instrument_bound_checkers")
    dumped = capsys.readouterr().out
    assert dumped.startswith("// IR after instrument_bound_checkers\n")
    assert "C[i] = A[checked(I[i], 10)]*2f" in dumped
    te.lower(s, args, dump_after="instrument_bound_checkers")  # not asked for: not run
    assert capsys.readouterr().out == ""


def test_option_errors():
    s, args = _gather()
    with pytest.raises(te.BuildError, match=re.escape(
            "te.build: instrument_bound_checkers is supported for target 'llvm' only, got "
            "target 'cuda'")):
        te.build(s, args, target="cuda", instrument_bound_checkers=True)
    with pytest.raises(te.LoweringError, match=re.escape(
            "te.lower: instrument_bound_checkers is supported for target_kind 'llvm' only, "
            "got 'cuda'")):
        te.lower(s, args, target_kind="cuda", instrument_bound_checkers=True)
    with pytest.raises(te.BuildError, match=re.escape(
            "te.build: instrument_bound_checkers must be True or False, got 'yes'")):
        te.build(s, args, instrument_bound_checkers="yes")
    with pytest.raises(te.LoweringError, match=re.escape(
            "te.lower: instrument_bound_checkers must be True or False, got 1")):
        te.lower(s, args, instrument_bound_checkers=1)
    with pytest.raises(te.BuildError, match=re.escape(
            "te.build: instrument_bound_checkers applies while lowering a schedule; for a "
            "lowered function, pass instrument_bound_checkers=True to te.lower instead")):
        te.build(te.lower(s, args), instrument_bound_checkers=True)


def test_time_evaluator_and_the_status_code_agree_with_the_runtime():
    assert codegen_llvm_bounds.BOUNDS_STATUS == signature.BOUNDS_STATUS
    assert codegen_llvm_bounds.RECORD_FIELDS == signature.RECORD_FIELDS
    mod = te.build(*_gather(), instrument_bound_checkers=True)
    a, c = rand_array((10,)), np.zeros(3, "float32")
    with pytest.raises(IndexError, match=_message("load from", "A", 11, 10)):
        mod.time_evaluator(number=1, repeat=1)(a, np.array([0, 11, 2], "int32"), c)
    result = mod.time_evaluator(number=2, repeat=1)(a, np.array([0, 1, 2], "int32"), c)
    assert result.mean > 0


def test_exported_module_keeps_its_checks(tmp_path):
    mod = te.build(*_gather(), instrument_bound_checkers=True)
    mod.export_library(tmp_path / "gather.so")
    loaded = runtime.load_module(tmp_path / "gather.so")
    assert loaded.signature == mod.signature  # which says to pass the error record
    assert loaded.signature.checked_buffers == ("A",)
    with pytest.raises(IndexError, match=_message("load from", "A", -4, 10)):
        _call_gather(loaded, [3, -4])
    a, c = _call_gather(loaded, [3, 4])
    np.testing.assert_array_equal(c, a[[3, 4]] * 2.0)
