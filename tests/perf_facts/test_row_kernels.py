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

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, BENCH)
import kernels  # noqa: E402
import refs  # noqa: E402

CASES = ["copy", "relu_affine", "softmax", "layernorm", "sum"]


def _run(case: str, rows: int, cols: int):
    fn = getattr(kernels, {"sum": "row_sum"}.get(case, case))
    s, args = fn(rows, cols)
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
