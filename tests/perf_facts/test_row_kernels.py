"""The benchmark's memory-bound row kernels (benchmarks/kernels.py) against numpy on odd
shapes (rows that the row block does not divide, columns that the vector width does not),
and the one fact of their code the benchmark relies on: outputs written once go past the
caches (vmovntps), reductions to a small output do not."""
import os
import re
import sys

import numpy as np
import pytest

import te
from te.lower.interp import run_func

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, BENCH)
import kernels  # noqa: E402
import refs  # noqa: E402

CASES = ["copy", "relu_affine", "softmax", "layernorm", "sum"]


def _schedule(case: str, rows: int, cols: int, **form):
    return getattr(kernels, {"sum": "row_sum"}.get(case, case))(rows, cols, **form)


def _run(case: str, rows: int, cols: int, **form):
    s, args = _schedule(case, rows, cols, **form)
    mod = te.build(s, args)
    params = {"rows": rows, "cols": cols}
    xs = refs.make_inputs(case, params)
    out = np.full((rows,) if case == "sum" else (rows, cols), np.nan, np.float32)
    mod(*xs, out)
    want = xs[0] if case == "copy" else refs.numpy_reference(case, params, xs)()
    return mod, out, want


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows, cols", [(37, 1003), (6, 4096), (1, 17), (5, 16)])
def test_row_kernel_matches_numpy(case, rows, cols):
    _, out, want = _run(case, rows, cols)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


# every hand-written form the suite may pick (kernels.VARIANTS), the default one included
FORMS = [(case, label, form) for case, forms in kernels.VARIANTS.items()
         for label, form in forms]
FORM_IDS = [f"{case}-{label}" for case, label, _ in FORMS]


@pytest.mark.parametrize("case, label, form", FORMS, ids=FORM_IDS)
@pytest.mark.parametrize("rows, cols", [(37, 1003), (6, 4096), (1, 17), (5, 16), (33, 64)])
def test_each_form_matches_numpy(case, label, form, rows, cols):
    _, out, want = _run(case, rows, cols, **form)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case, label, form", FORMS, ids=FORM_IDS)
def test_each_form_matches_numpy_in_the_interpreter(case, label, form):
    """The interpreter checks every index, prefetched ones included, against the buffers:
    blocks of rows that do not divide 19, prefetches that run past the last row."""
    rows, cols = 19, 97
    s, args = _schedule(case, rows, cols, **form)
    params = {"rows": rows, "cols": cols}
    xs = refs.make_inputs(case, params)
    out = np.full((rows,) if case == "sum" else (rows, cols), np.nan, np.float32)
    run_func(te.lower(s, args), [*xs, out])
    np.testing.assert_allclose(out, refs.numpy_reference(case, params, xs)(), rtol=1e-4,
                               atol=1e-5)


def test_sum_side_by_side_reads_one_vector_of_every_row_of_a_block_per_step():
    """16 rows in lockstep: each step of the reduction loop adds one vector of each of the
    block's rows to that row's accumulator and prefetches 16 steps ahead in each row."""
    s, args = kernels.row_sum(64, 4096, side_by_side=16)
    ir = str(te.lower(s, args))
    (step, body), = _loops(ir, r"k\.outer", 4096 // kernels.LANES)
    assert body.count("S.rf[ramp(") == 2 * 16, body   # 16 accumulators, read and written
    # one prefetch per row of the block, 16 steps (16 x 16 floats) ahead
    assert f"for ({step}.pf0, 0, 16) {{\n" in body, body
    assert f"prefetch(&X[(((i.outer*65536) + ({step}.pf0*4096)) + ({step}*16)) + 256])" \
        in body, body
    assert f"X[ramp(((i.outer*65536) + ({step}*16)) + 4096, 1, 16)]" in body, body


def test_layernorm_pipelined_writes_the_row_before_inside_the_mean_pass():
    """pipelined: in every row of a block but the first, the loop of the mean's partial
    sums also normalizes and writes the previous row, from the other copy of its
    statistics; only that pass prefetches the next row."""
    s, args = kernels.layernorm(64, 4096, pipelined=True)   # 8 blocks of 8 rows
    ir = str(te.lower(s, args))
    lanes = 4 * kernels.LANES
    loops = [body for _, body in _loops(ir, r"k\.outer\w*", 4096 // lanes)
             if "Y_mean.rf[ramp(0, 1, 64)] = Y_mean.rf[ramp(0, 1, 64)] + " in body]
    writing = [body for body in loops if "Y[ramp(" in body]
    assert writing and len(writing) < len(loops), ir   # a block's first row writes nothing
    # the previous row's statistics: the other copy (a constant index in the peeled row)
    assert all("rsqrt(Y_var[" in body for body in writing)
    assert any("broadcast(Y_mean[floormod(i0.inner + 1, 2)], 16)" in body and
               "rsqrt(Y_var[floormod(i0.inner + 1, 2)] + 1e-05f)" in body for body in writing)
    var_loops = [body for _, body in _loops(ir, r"k\.outer\w*", 4096 // lanes)
                 if "Y_var.rf[ramp(0, 1, 64)] = " in body]
    assert var_loops and not any("prefetch(&X" in body for body in var_loops)
    assert any("prefetch(&X" in body for body in writing)


@pytest.mark.parametrize("case", CASES)
def test_streamed_outputs(case):
    mod, _, _ = _run(case, 8, 256)
    assert ("vmovntps" in mod.get_source("asm")) == (case != "sum")


@pytest.mark.parametrize("case, reductions", [("softmax", ["Y_maxelem", "Y_expsum"]),
                                              ("layernorm", ["Y_mean", "Y_var"])])
def test_row_reductions_fold_their_partial_sums_to_one_vector(case, reductions):
    """Four vectors of partial results are added into one vector before the scalar step,
    so that step is LANES dependent scalar operations, not 4 * LANES."""
    s, args = getattr(kernels, case)(5, 4096)
    ir = str(te.lower(s, args))
    for name in reductions:
        assert f"allocate {name}.rf[float32 * {4 * kernels.LANES}]" in ir
        assert f"allocate {name}.rf_1[float32 * {kernels.LANES}]" in ir


def _loops(ir: str, var: str, extent: int) -> list:
    """(variable, body) of each loop `for (var, 0, extent)` in the printed IR."""
    out = []
    for m in re.finditer(r"for \((%s), 0, %d\) \{\n" % (var, extent), ir):
        depth, pos = 1, m.end()
        while depth:  # to the brace that closes the loop
            pos = min(p for p in (ir.find("{", pos), ir.find("}", pos)) if p >= 0)
            depth += 1 if ir[pos] == "{" else -1
            pos += 1
        out.append((m.group(1), ir[m.end():pos - 1]))
    return out


def test_softmax_sums_each_exp_in_the_loop_that_computes_it_and_scales_the_row_before():
    """compute_with: one loop over the row both stores 4 vectors of exps and adds them to
    the partial sums, so the sum makes no second pass over the row buffer; pipeline: in
    every row of a block but the first, that loop also scales and writes the row before,
    from the other copy of the row buffer."""
    s, args = kernels.softmax(64, 4096)  # 8 blocks of 8 rows
    ir = str(te.lower(s, args))
    lanes = 4 * kernels.LANES
    loops = [(k, body) for k, body in _loops(ir, r"k\.outer\w*", 4096 // lanes)
             if "= exp(" in body]
    # per block: the first row, then the other 7 (the last block apart: its last row
    # prefetches nothing)
    assert len(loops) == 5, ir
    assert ["Y[" in body for _, body in loops] == [False, True, False, True, True]
    for k, body in loops:
        assert f"Y_expsum.rf[ramp(0, 1, {lanes})] = Y_expsum.rf[ramp(0, 1, {lanes})] + " \
            f"Y_exp[ramp(" in body, body
    (_, first), (k, steady) = loops[:2]
    assert "Y[" not in first, first
    assert f"Y_exp[ramp(({k}*{lanes}) + (floormod(i.inner, 2)*4096), 1, {lanes})] = exp(" \
        in steady, steady
    assert f"= Y_exp[ramp((({k}*{lanes}) + (j.outer.inner*16)) + (floormod(i.inner + 1, 2)" \
        f"*4096), 1, 16)]*broadcast(Y_inv[floormod(i.inner + 1, 2)], 16)" in steady, steady
