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


def test_softmax_sums_each_exp_in_the_loop_that_computes_it():
    """compute_with: one loop over the row both stores 4 vectors of exps and adds them to
    the partial sums, so the sum makes no second pass over the row buffer."""
    s, args = kernels.softmax(5, 4096)
    ir = str(te.lower(s, args))
    lanes = 4 * kernels.LANES
    loops = [m.groups() for m in re.finditer(
        r"for \((k\.outer\w*), 0, %d\) \{\n(.*?)\n\s*\}\n" % (4096 // lanes), ir, re.S)
        if "Y_exp[" in m.group(2)]
    assert len(loops) == 1, ir
    k, body = loops[0]
    assert f"Y_exp[ramp({k}*{lanes}, 1, {lanes})] = exp(" in body, body
    assert f"Y_expsum.rf[ramp(0, 1, {lanes})] + Y_exp[ramp({k}*{lanes}, 1, {lanes})]" \
        in body, body
    # in each copy of the row (the last row is peeled off: it prefetches nothing), the
    # buffer is stored once and read twice: by the sum and by the scale
    assert ir.count("Y_exp[ramp(") == 3 * ir.count("allocate Y_exp[")
