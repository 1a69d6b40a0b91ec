"""LLVM codegen of vectors, parallel loops, temporaries and unrolling (hand-built IR).

Uses the MCJIT helpers of tests/llvm_helpers.py; checks results against numpy and a few
deterministic facts of the generated IR and x86 assembly.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from runtime.checker import INDEX_LIMIT
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.pipeline import outline_for_cpu
from te.codegen.llvm.codegen import codegen_llvm

from llvm_helpers import (RNG, assembly, binop, buffer, compile_func, guarded_page_array, i32,
                          random_array)


def ramp(base: E.Expr, lanes: int, stride: int = 1) -> E.Ramp:
    return E.Ramp(f"int32x{lanes}", base, i32(stride), lanes)


def vector_fma_func(n_vec: int, lanes: int = 8) -> PrimFunc:
    """c[8i:8i+8] = a[8i:8i+8] * b[8i:8i+8] + c[8i:8i+8] for i in [0, n_vec)."""
    n = n_vec * lanes
    a, b, c = (buffer(x, "float32", n) for x in "abc")
    i = E.Var("i", "int32")
    idx = ramp(binop("mul", i, i32(lanes)), lanes)
    vt = f"float32x{lanes}"
    value = binop("add", binop("mul", ir.Load(vt, a, idx), ir.Load(vt, b, idx)),
                  ir.Load(vt, c, idx))
    body = ir.For(i, i32(0), i32(n_vec), ir.SERIAL, ir.Store(c, idx, value))
    return PrimFunc("vfma", (a, b, c), (), body)


def test_vector_multiply_add_runs_and_uses_fma():
    f = vector_fma_func(13)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert "load <8 x float>" in text and "store <8 x float>" in text
    a, b, c = (random_array("float32", 104) for _ in range(3))
    out = c.copy()
    compile_func(f)(a, b, out)
    # one rounding fewer than numpy's a * b + c: an ulp of the terms, not of a sum that
    # cancels (the shared RNG's draws depend on which tests ran before in the worker)
    terms = np.abs(a * b) + np.abs(c)
    np.testing.assert_array_less(np.abs(out - (a * b + c)), 2e-7 * terms + 1e-30)
    asm = assembly(f)
    assert "vfmadd" in asm and "ymm" in asm


def test_strided_gather_and_scatter():
    """out[4i + 3k] = a[4i + 3k] * 2 for k in 0..3: Ramp with stride 3 (not dense)."""
    n = 12 * 5
    a, out = buffer("a", "float64", n), buffer("out", "float64", n)
    i = E.Var("i", "int32")
    idx = E.Ramp("int32x4", binop("add", binop("mul", binop("floordiv", i, i32(3)), i32(12)),
                                  binop("floormod", i, i32(3))), i32(3), 4)
    value = binop("mul", ir.Load("float64x4", a, idx), E.Broadcast("float64x4",
                                                                    E.Const("float64", 2.0), 4))
    body = ir.For(i, i32(0), i32(15), ir.SERIAL, ir.Store(out, idx, value))
    f = PrimFunc("gather", (a, out), (), body)
    x = random_array("float64", n)
    result = np.zeros(n, "float64")
    compile_func(f)(x, result)
    np.testing.assert_array_equal(result, x * 2)


@pytest.mark.parametrize("stride", [32, "var"])
def test_a_wide_stride_gather_and_scatter_address_each_lane_from_the_scalar_base(stride):
    """out[16 (i % 2) + k (stride) ...]: 16 lanes at stride 32 read lane by lane and
    written lane by lane; a constant stride gives each lane's address as the scalar base
    plus a constant (no vector of indices taken apart lane by lane), a stride only known
    at run time through a vector of indices. Both against numpy."""
    lanes, step = 16, 32
    n = lanes * step
    a, out = buffer("a", "float32", n), buffer("out", "float32", n)
    s = E.Var("s", "int32")
    i = E.Var("i", "int32")
    idx = E.Ramp(f"int32x{lanes}", i, i32(step) if stride == 32 else s, lanes)
    body = ir.For(i, i32(0), i32(step), ir.SERIAL,
                  ir.Store(out, idx, binop("add", ir.Load(f"float32x{lanes}", a, idx),
                                           E.Broadcast(f"float32x{lanes}",
                                                       E.Const("float32", 1.0), lanes))))
    f = PrimFunc("wide", (a, out), (s,) if stride == "var" else (), body)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert ("extractelement <16 x i32>" in text) == (stride == "var")
    x = random_array("float32", n)
    result = np.zeros(n, "float32")
    compile_func(f)(x, result, *([step] if stride == "var" else []))
    np.testing.assert_array_equal(result, x + 1)


@pytest.mark.parametrize("lanes", [2, 8, 16])
@pytest.mark.parametrize("stride", [2, 3, 4])
def test_small_stride_load_reads_its_span_within_the_buffer(stride, lanes):
    """A load at stride 2-4 is dense loads of `lanes` elements covering the lanes' span and
    shuffles (no lane-by-lane loads, no odd-sized span vector); the last one ends at the
    last lane, so loads starting at the first element and ending at the last one of a
    buffer between PROT_NONE pages do not fault."""
    n = 1024
    a, out = buffer("a", "float32", n), buffer("out", "float32", 2 * lanes)
    i = E.Var("i", "int32")
    base = binop("mul", i, i32(n - 1 - (lanes - 1) * stride))
    value = ir.Load(f"float32x{lanes}", a, ramp(base, lanes, stride))
    body = ir.For(i, i32(0), i32(2), ir.SERIAL,
                  ir.Store(out, ramp(binop("mul", i, i32(lanes)), lanes), value))
    f = PrimFunc("strided", (a, out), (), body)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert f"load <{lanes} x float>" in text and "shufflevector" in text
    assert f"load <{(lanes - 1) * stride + 1} x float>" not in text
    assert "load float," not in text
    data, guard = guarded_page_array(n)
    data[:] = RNG.standard_normal(n).astype("float32")
    result = np.full(2 * lanes, np.nan, "float32")
    compile_func(f)(data, result)
    last = n - 1 - (lanes - 1) * stride
    np.testing.assert_array_equal(result, np.concatenate(
        [data[0:(lanes - 1) * stride + 1:stride], data[last::stride]]))
    del guard


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "float64", "bool"])
def test_vector_elementwise_ops_and_casts(dtype):
    lanes, n_vec = 4, 9
    n = lanes * n_vec
    a, b = buffer("a", dtype, n), buffer("b", dtype, n)
    out, flags = buffer("out", "float32", n), buffer("flags", "bool", n)
    i = E.Var("i", "int32")
    idx = ramp(binop("mul", i, i32(lanes)), lanes)
    vt = f"{dtype}x{lanes}"
    x, y = ir.Load(vt, a, idx), ir.Load(vt, b, idx)
    combined = binop("or" if dtype == "bool" else "max", x, y)
    stores = ir.seq(ir.Store(out, idx, E.Cast(f"float32x{lanes}", combined)),
                    ir.Store(flags, idx, binop("ne", x, y)))
    f = PrimFunc(f"vec_{dtype}", (a, b, out, flags), (),
                    ir.For(i, i32(0), i32(n_vec), ir.SERIAL, stores))
    p, q = random_array(dtype, n), random_array(dtype, n)
    q[::3] = p[::3]
    result, ne = np.zeros(n, "float32"), np.zeros(n, bool)
    compile_func(f)(p, q, result, ne)
    np.testing.assert_array_equal(result, np.maximum(p, q).astype("float32"))
    np.testing.assert_array_equal(ne, p != q)


def test_vector_intrinsic_and_libm_scalarization():
    n = 8 * 5
    a, out = buffer("a", "float32", n), buffer("out", "float32", n)
    i = E.Var("i", "int32")
    idx = ramp(binop("mul", i, i32(8)), 8)
    x = ir.Load("float32x8", a, idx)
    value = binop("add", E.Call("float32x8", "exp", (x,)), E.Call("float32x8", "atan", (x,)))
    f = PrimFunc("vexp", (a, out), (), ir.For(i, i32(0), i32(5), ir.SERIAL,
                                                 ir.Store(out, idx, value)))
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    # float32 vector exp is an inline polynomial (llvm.exp.v8f32 would become 8 expf calls);
    # atan has no vector form: one atanf call per lane
    assert "llvm.fmuladd.v8f32" in text and "expf" not in text and "atanf" in text
    p = RNG.uniform(-3, 3, n).astype("float32")
    result = np.zeros(n, "float32")
    compile_func(f)(p, result)
    terms = np.exp(p) + np.abs(np.arctan(p))   # the sum may cancel: tolerance of the terms
    np.testing.assert_array_less(np.abs(result - (np.exp(p) + np.arctan(p))), 1e-5 * terms)


def test_vector_select_with_loads_masks_the_lanes_it_does_not_take():
    """out[i] = i >= 1 ? a[i - 1] : 0 with 8 lanes; lane 0 of the first vector would read
    a[-1], on a PROT_NONE page: one masked load per vector, which never reads it."""
    n = 1024
    a, out = buffer("a", "float32", n), buffer("out", "float32", n)
    i = E.Var("i", "int32")
    idx = ramp(binop("mul", i, i32(8)), 8)
    shifted = E.Ramp("int32x8", binop("sub", binop("mul", i, i32(8)), i32(1)), i32(1), 8)
    cond = binop("ge", idx, E.Broadcast("int32x8", i32(1), 8))
    value = E.Select("float32x8", cond, ir.Load("float32x8", a, shifted),
                     E.Broadcast("float32x8", E.Const("float32", 0.0), 8))
    f = PrimFunc("vpad", (a, out), (),
                    ir.For(i, i32(0), i32(n // 8), ir.SERIAL, ir.Store(out, idx, value)))
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert "llvm.masked.load.v8f32.p0" in text and "load float," not in text
    data, guard = guarded_page_array(n)
    data[:] = RNG.standard_normal(n).astype("float32")
    result = np.zeros(n, "float32")
    compile_func(f)(data, result)
    np.testing.assert_array_equal(result, np.concatenate([[0], data[:-1]]))
    del guard


def _padded_read_func(lanes: int, stride: int, index_of=None, dtype: str = "float32"):
    """out[lanes*i + k] = (0 <= j < n) ? a[j] : -1 for j = stride*(lanes*i + k) - 1 (the
    first lane of the first vector and the last lanes of the last read outside a): a
    select on a lane-varying condition over a strided load (or over `index_of(ramp)`)."""
    n = 1024
    vecs = -(-(n + 1) // (lanes * stride)) + 1
    a, out = buffer("a", dtype, n), buffer("out", dtype, vecs * lanes)
    i = E.Var("i", "int32")
    vt, it = f"{dtype}x{lanes}", f"int32x{lanes}"
    pos = ramp(binop("mul", i, i32(lanes)), lanes)
    j = E.Ramp(it, binop("sub", binop("mul", i, i32(lanes * stride)), i32(1)),
               i32(stride), lanes)
    inside = binop("and", binop("ge", j, E.Broadcast(it, i32(0), lanes)),
                   binop("lt", j, E.Broadcast(it, i32(n), lanes)))
    value = E.Select(vt, inside, ir.Load(vt, a, index_of(j) if index_of else j),
                     E.Broadcast(vt, E.Const(dtype, -1), lanes))
    f = PrimFunc(f"pad_s{stride}", (a, out), (),
                 ir.For(i, i32(0), i32(vecs), ir.SERIAL, ir.Store(out, pos, value)))
    j_all = stride * np.arange(vecs * lanes) - 1
    return f, j_all, n


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("stride", [2, 3])
def test_masked_strided_load_reads_only_wanted_elements(stride, lanes):
    """A select over a stride-2/3 load: its span's dense pieces are masked loads enabling
    only the elements of taken lanes, so reads at a[-1] and past a's end (PROT_NONE pages)
    never happen; the result is numpy's."""
    f, j, n = _padded_read_func(lanes, stride)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert f"llvm.masked.load.v{lanes}f32.p0" in text and "load float," not in text
    data, guard = guarded_page_array(n)
    data[:] = RNG.standard_normal(n).astype("float32")
    result = np.full(j.size, np.nan, "float32")
    compile_func(f)(data, result)
    inside = (j >= 0) & (j < n)
    np.testing.assert_array_equal(result, np.where(inside, data[np.clip(j, 0, n - 1)], -1))
    del guard


def test_masked_gather_for_an_index_that_is_no_ramp():
    """Index floordiv(j, 2) * 2 + 1 (not a ramp: lanes in pairs) under the mask: one
    llvm.masked.gather, and no lane outside the buffer is read."""
    def odd_of(j):
        two = E.Broadcast(j.dtype, i32(2), j.lanes)
        return binop("add", binop("mul", binop("floordiv", j, two), two),
                     E.Broadcast(j.dtype, i32(1), j.lanes))
    f, j, n = _padded_read_func(8, 1, odd_of)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert "llvm.masked.gather.v8f32.v8p0" in text
    data, guard = guarded_page_array(n)
    data[:] = RNG.standard_normal(n).astype("float32")
    result = np.full(j.size, np.nan, "float32")
    compile_func(f)(data, result)
    inside = (j >= 0) & (j < n)
    np.testing.assert_array_equal(
        result, np.where(inside, data[np.clip(j // 2 * 2 + 1, 0, n - 1)], -1))
    del guard


@pytest.mark.parametrize("dtype", ["int8", "bool", "float64"])
def test_masked_loads_of_other_dtypes(dtype):
    """Masked loads of bytes (bool is i8 in memory) and doubles match numpy."""
    f, j, n = _padded_read_func(8, 2, dtype=dtype)
    assert "llvm.masked.load" in codegen_llvm(f, index_limit=INDEX_LIMIT)
    data = (RNG.standard_normal(n) * 50).astype(dtype)
    result = np.zeros(j.size, dtype)
    compile_func(f)(data, result)
    inside = (j >= 0) & (j < n)
    np.testing.assert_array_equal(result, np.where(inside, data[np.clip(j, 0, n - 1)],
                                                   np.array(-1).astype(dtype)))


def test_nested_selects_mask_their_loads_by_both_conditions():
    """out = (j >= 0) ? ((j < n) ? a[j] : b[j - n]) : 0 over lanes j = 8i - 3 .. 8i + 4
    where a and b are one guarded page each: each load reads only the lanes both
    conditions give it."""
    n = 1024
    a, b = buffer("a", "float32", n), buffer("b", "float32", n)
    vecs = 2 * n // 8
    out = buffer("out", "float32", vecs * 8)
    i = E.Var("i", "int32")
    it, vt = "int32x8", "float32x8"
    pos = ramp(binop("mul", i, i32(8)), 8)
    start = binop("sub", binop("mul", i, i32(8)), i32(3))
    j = E.Ramp(it, start, i32(1), 8)
    j_in_b = E.Ramp(it, binop("sub", start, i32(n)), i32(1), 8)
    inner = E.Select(vt, binop("lt", j, E.Broadcast(it, i32(n), 8)), ir.Load(vt, a, j),
                     ir.Load(vt, b, j_in_b))
    value = E.Select(vt, binop("ge", j, E.Broadcast(it, i32(0), 8)), inner,
                     E.Broadcast(vt, E.Const("float32", 0.0), 8))
    f = PrimFunc("nested", (a, b, out), (),
                 ir.For(i, i32(0), i32(vecs), ir.SERIAL, ir.Store(out, pos, value)))
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert text.count("call <8 x float> @\"llvm.masked.load") == 2
    da, ga = guarded_page_array(n)
    db, gb = guarded_page_array(n)
    da[:] = RNG.standard_normal(n).astype("float32")
    db[:] = RNG.standard_normal(n).astype("float32")
    result = np.full(vecs * 8, np.nan, "float32")
    compile_func(f)(da, db, result)
    jj = np.arange(vecs * 8) - 3
    both = np.concatenate([da, db])
    np.testing.assert_array_equal(result, np.where(jj >= 0, both[np.clip(jj, 0, 2 * n - 1)], 0))
    del ga, gb


def allocate_func(extent: int | E.Var, scalar_params: tuple = ()) -> PrimFunc:
    """tmp[i] = a[i] * 3; out[i] = tmp[extent - 1 - i] + 1, through an Allocate'd tmp."""
    a, out = buffer("a", "float32", extent), buffer("out", "float32", extent)
    tmp = ir.Buffer("tmp", "float32", (extent,), (1,), data=E.Var("tmp", "handle"),
                    scope="local")
    i, j = E.Var("i", "int32"), E.Var("j", "int32")
    ext = extent if isinstance(extent, E.Var) else i32(extent)
    fill = ir.For(i, i32(0), ext, ir.SERIAL,
                  ir.Store(tmp, i, binop("mul", ir.Load("float32", a, i),
                                         E.Const("float32", 3.0))))
    rev = binop("sub", binop("sub", ext, i32(1)), j)
    use = ir.For(j, i32(0), ext, ir.SERIAL,
                 ir.Store(out, j, binop("add", ir.Load("float32", tmp, rev),
                                        E.Const("float32", 1.0))))
    name = "alloc_dyn" if scalar_params else f"alloc_{extent}"
    return PrimFunc(name, (a, out), scalar_params,
                       ir.Allocate(tmp, ext, ir.seq(fill, use)))


@pytest.mark.parametrize("extent", [37, 100_003])
def test_allocate_small_on_stack_and_large_on_heap(extent):
    f = allocate_func(extent)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert ("alloca [37 x float], align 64" in text) == (extent == 37)
    assert ("aligned_alloc" in text) == (extent != 37)
    x = random_array("float32", extent)
    result = np.zeros(extent, "float32")
    compile_func(f)(x, result)
    # x * 3 + 1 may be one fused multiply-add: off by up to half an ulp of x * 3, which is
    # more than rtol of the result where the + 1 cancels most of it
    np.testing.assert_allclose(result, (x * 3 + 1)[::-1], rtol=1e-6,
                               atol=1e-6 * np.abs(x * 3).max())


def test_allocate_with_symbolic_extent():
    n = E.Var("n", "int32")
    f = allocate_func(n, (n,))
    x = random_array("float32", 41)
    result = np.zeros(41, "float32")
    compile_func(f)(x, result, 41)
    # x * 3 + 1 may be one fused multiply-add: off by up to half an ulp of x * 3, which is
    # more than rtol of the result where the + 1 cancels most of it
    np.testing.assert_allclose(result, (x * 3 + 1)[::-1], rtol=1e-6,
                               atol=1e-6 * np.abs(x * 3).max())


def parallel_func(rows: int, cols: E.Var, first: int = 0) -> PrimFunc:
    """for i in [first, rows) parallel: for j: t = i*cols + j; out[t] = a[t] + i + scale
    (scale a let var)."""
    a = buffer("a", "float32", rows * 8)
    out = buffer("out", "float32", rows * 8)
    i, j, scale = E.Var("i", "int32"), E.Var("j", "int32"), E.Var("scale", "float32")
    t = binop("add", binop("mul", i, cols), j)
    value = binop("add", binop("add", ir.Load("float32", a, t), E.Cast("float32", i)), scale)
    inner = ir.For(j, i32(0), cols, ir.SERIAL, ir.Store(out, t, value))
    outer = ir.For(i, i32(first), i32(rows - first), ir.PARALLEL, inner)
    return outline_for_cpu(PrimFunc("par", (a, out), (cols,),
                                    ir.LetStmt(scale, E.Const("float32", 0.5), outer)))


def test_a_parallel_task_captures_what_its_body_reads_from_outside():
    task = parallel_func(5, E.Var("cols", "int32")).body.body
    assert isinstance(task, ir.ParallelTask) and task.name == "par_par0"
    # first-use order: the inner loop's extent, then the store, then its value
    assert [v.name for v in task.captured] == ["cols", "out", "a", "scale"]


def test_a_parallel_loop_that_is_no_task_runs_serially():
    """The code generator outlines nothing itself: a parallel loop the parallel_outline
    pass did not make a task (hand-built IR given to it directly) is an ordinary loop."""
    rows, cols = 9, 8
    f = parallel_func(rows, E.Var("cols", "int32"))
    task = f.body.body
    f = dataclasses.replace(f, body=dataclasses.replace(f.body, body=task.loop))
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert "GOMP_parallel" not in text
    x = random_array("float32", rows * cols)
    result = np.full(rows * cols, np.nan, "float32")
    compile_func(f, parallel=False)(x, result, cols)
    expected = x + np.repeat(np.arange(rows), cols).astype("float32") + 0.5
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_loop_writes_every_element(parallel):
    rows, cols = 103, 8
    f = parallel_func(rows, E.Var("cols", "int32"))
    text = codegen_llvm(f, parallel=parallel, index_limit=INDEX_LIMIT)
    assert ("GOMP_parallel" in text) == parallel
    # threads claim chunks of the loop from a shared 64-bit counter
    assert bool(re.search(r"atomicrmw add ptr %\S+, i64 ", text)) == parallel
    x = random_array("float32", rows * cols)
    result = np.full(rows * cols, np.nan, "float32")
    compile_func(f, parallel=parallel)(x, result, cols)
    expected = x + np.repeat(np.arange(rows), cols).astype("float32") + 0.5
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_loop_that_starts_past_zero(threads):
    """The chunks threads claim count from the loop's first iteration, not from 0."""
    import runtime
    rows, cols, first = 103, 8, 7
    f = parallel_func(rows, E.Var("cols", "int32"), first)
    x = random_array("float32", rows * cols)
    result = np.full(rows * cols, np.nan, "float32")
    before = runtime.num_threads()
    runtime.set_num_threads(threads)
    try:
        compile_func(f, parallel=True)(x, result, cols)
    finally:
        runtime.set_num_threads(before)
    expected = x + np.repeat(np.arange(rows), cols).astype("float32") + 0.5
    expected[:first * cols] = np.nan
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype, extent", [("uint32", 2 ** 31 + 100), ("int32", 2 ** 31 - 40),
                                           ("int64", 1001), ("uint64", 7), ("int32", 0),
                                           ("int32", -5), ("int8", 100), ("uint8", 200),
                                           ("int16", 1000), ("uint16", 60000)])
def test_parallel_loop_counts_its_chunks_in_64_bits(dtype, extent):
    """for i in [0, n) parallel: if i == n - 3: out[0] = i. A uint32 extent past 2^31 ran
    no iteration when the claims were compared as signed, and an int32 extent near its
    maximum wrapped the grain to one iteration per claim (review of the chunked loops);
    8- and 16-bit loop variables crashed codegen before the counting was 64-bit."""
    import runtime
    out = buffer("out", "int64", 1)
    i, n = E.Var("i", dtype), E.Var("n", dtype)
    last = binop("sub", n, E.Const(dtype, 3))
    body = ir.IfThenElse(E.Binary("bool", "eq", i, last),
                         ir.Store(out, i32(0), E.Cast("int64", i)), None)
    f = outline_for_cpu(PrimFunc("count", (out,), (n,),
                                 ir.For(i, E.Const(dtype, 0), n, ir.PARALLEL, body)))
    before = runtime.num_threads()
    runtime.set_num_threads(2)
    try:
        result = np.full(1, -1, np.int64)
        compile_func(f, parallel=True)(result, extent)
    finally:
        runtime.set_num_threads(before)
    assert result[0] == (extent - 3 if extent >= 3 else -1)


@pytest.mark.parametrize("dtype, first, extent", [("int8", 1, 127), ("int8", 100, 28),
                                                  ("uint8", 1, 255), ("int16", 10, 32758),
                                                  ("uint16", 1, 65535), ("int8", -100, 127),
                                                  ("uint8", 0, 255)])
@pytest.mark.parametrize("kind", [ir.SERIAL, ir.PARALLEL])
def test_a_narrow_loop_may_end_one_past_its_types_maximum(dtype, first, extent, kind):
    """for i in [first, first + extent): out[i - first] += 1, the last i its type's maximum.
    first + extent and i + 1 wrapped in the variable's type: int8 [1, 128) ran none of its
    127 iterations, uint8 [1, 256) none serially and 248 of 255 on 2 threads (review)."""
    import runtime
    out = buffer("out", "int64", extent)
    i, lo, n = E.Var("i", dtype), E.Var("lo", dtype), E.Var("n", dtype)
    k = binop("sub", E.Cast("int64", i), E.Cast("int64", lo))
    body = ir.Store(out, k, binop("add", ir.Load("int64", out, k), E.Const("int64", 1)))
    f = PrimFunc(f"narrow_{dtype}", (out,), (lo, n), ir.For(i, lo, n, kind, body))
    f = outline_for_cpu(f) if kind == ir.PARALLEL else f
    fn = compile_func(f, parallel=kind == ir.PARALLEL)
    before = runtime.num_threads()
    try:
        for threads in (1, 2, 3):
            runtime.set_num_threads(threads)
            result = np.zeros(extent, np.int64)
            fn(result, first, extent)
            np.testing.assert_array_equal(result, 1)
    finally:
        runtime.set_num_threads(before)


def test_parallel_inside_serial_with_nested_parallel_and_local_alloc():
    """for o serial: for i parallel: tmp[4] local; for k parallel (runs serially): ..."""
    outer_n, n = 3, 29
    out = buffer("out", "int64", outer_n * n)
    tmp = ir.Buffer("tmp", "int64", (4,), (1,), data=E.Var("tmp", "handle"), scope="local")
    o, i, k = E.Var("o", "int32"), E.Var("i", "int32"), E.Var("k", "int32")
    fill = ir.For(k, i32(0), i32(4), ir.PARALLEL,
                  ir.Store(tmp, k, E.Cast("int64", binop("add", binop("mul", o, i32(1000)),
                                                         binop("add", i, k)))))
    total = ir.Load("int64", tmp, i32(0))
    for idx in (1, 2, 3):
        total = binop("add", total, ir.Load("int64", tmp, i32(idx)))
    store = ir.Store(out, binop("add", binop("mul", o, i32(n)), i), total)
    body = ir.For(o, i32(0), i32(outer_n), ir.SERIAL,
                  ir.For(i, i32(0), i32(n), ir.PARALLEL,
                         ir.Allocate(tmp, i32(4), ir.seq(fill, store))))
    f = outline_for_cpu(PrimFunc("nested_par", (out,), (), body))
    # one task, the outer parallel loop; the one inside it stays a loop
    task = f.body.body
    assert isinstance(task, ir.ParallelTask) and [v.name for v in task.captured] == ["o", "out"]
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert text.count("call void @\"GOMP_parallel\"") == 1
    result = np.zeros(outer_n * n, "int64")
    compile_func(f)(result)
    oo, ii = np.meshgrid(np.arange(outer_n), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(result, (4 * (oo * 1000 + ii) + 6).ravel())


@pytest.mark.parametrize("extent", [5, 40])
def test_unrolled_loop(extent):
    a, out = buffer("a", "int32", extent), buffer("out", "int32", extent)
    i = E.Var("i", "int32")
    body = ir.For(i, i32(0), i32(extent), ir.UNROLLED,
                  ir.Store(out, i, binop("mul", ir.Load("int32", a, i), i)))
    f = PrimFunc(f"unroll_{extent}", (a, out), (), body)
    text = codegen_llvm(f, index_limit=INDEX_LIMIT)
    assert ("llvm.loop.unroll.full" in text) == (extent > 16)
    x = random_array("int32", extent)
    result = np.zeros(extent, "int32")
    compile_func(f)(x, result)
    np.testing.assert_array_equal(result, x * np.arange(extent))


def test_vectorized_kind_loop_gets_metadata_and_runs():
    n = 53
    a, out = buffer("a", "float32", n), buffer("out", "float32", n)
    i = E.Var("i", "int32")
    body = ir.For(i, i32(0), i32(n), ir.VECTORIZED,
                  ir.Store(out, i, binop("max", ir.Load("float32", a, i),
                                         E.Const("float32", 0.0))))
    f = PrimFunc("relu", (a, out), (), body)
    assert "llvm.loop.vectorize.enable" in codegen_llvm(f, index_limit=INDEX_LIMIT)
    x = random_array("float32", n)
    result = np.zeros(n, "float32")
    compile_func(f)(x, result)
    np.testing.assert_array_equal(result, np.maximum(x, 0))


def test_vector_not_and_integer_abs():
    n_vec, lanes = 7, 4
    n = n_vec * lanes
    a, out, flags = buffer("a", "int16", n), buffer("out", "int16", n), buffer("f", "bool", n)
    i = E.Var("i", "int32")
    idx = ramp(binop("mul", i, i32(lanes)), lanes)
    x = ir.Load(f"int16x{lanes}", a, idx)
    positive = binop("gt", x, E.Broadcast(f"int16x{lanes}", E.Const("int16", 0), lanes))
    stores = ir.seq(ir.Store(out, idx, E.Call(f"int16x{lanes}", "abs", (x,))),
                    ir.Store(flags, idx, E.Not(f"boolx{lanes}", positive)))
    f = PrimFunc("vnot", (a, out, flags), (),
                    ir.For(i, i32(0), i32(n_vec), ir.SERIAL, stores))
    p = random_array("int16", n)
    result, not_pos = np.zeros(n, "int16"), np.zeros(n, bool)
    compile_func(f)(p, result, not_pos)
    np.testing.assert_array_equal(result, np.abs(p))
    np.testing.assert_array_equal(not_pos, ~(p > 0))
