"""Target 'cuda': te.min / te.max as CUDA's fminf / fmaxf (float) and te_min / te_max helper
calls (integers), each operand written once, so nested mins and maxes give source that grows
linearly with their depth; checked against numpy in the emulator (and compiled by nvcc in
te.build where it is on PATH).
"""
import numpy as np
import pytest
from helpers import bind, rand_array, run_emulated

import te


def _nested_max_min(depth, dtype, n=97):
    """C[i] = max(min(max(A[i], A[i+1]), A[i+2]), ...), `depth` levels, alternating."""
    A = te.placeholder((n + depth,), name="A", dtype=dtype)

    def body(i):
        x = A[i]
        for k in range(1, depth + 1):
            x = te.max(x, A[i + k]) if k % 2 else te.min(x, A[i + k])
        return x

    C = te.compute((n,), body, name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 32)
    return te.build(s, [A, C], target="cuda"), n


def _numpy_nested(a, depth, n):
    x = a[:n]
    for k in range(1, depth + 1):
        x = np.maximum(x, a[k:k + n]) if k % 2 else np.minimum(x, a[k:k + n])
    return x


@pytest.mark.parametrize("dtype, call", [("float32", "fmaxf("), ("float64", "fmax("),
                                         ("int32", "te_max<int>("),
                                         ("int64", "te_max<long long>("),
                                         ("uint8", "te_max<unsigned char>(")])
def test_nested_min_max_match_numpy_and_name_each_operand_once(dtype, call):
    depth = 12
    mod, n = _nested_max_min(depth, dtype)
    src = mod.get_source()
    assert call in src and "?" not in src.split("main_kernel0")[1]
    a = rand_array((n + depth,), dtype)
    (c,) = run_emulated(mod, [a], [(n,)], [dtype])
    np.testing.assert_array_equal(c, _numpy_nested(a, depth, n))


def test_depth_twelve_nested_maxes_give_linear_size_source():
    # the select form (a > b ? a : b) wrote each operand twice: 2**12 copies of A[i] at
    # depth 12 (the 426 KB of CUDA C); a call names each once
    sizes = {d: len(_nested_max_min(d, "float32")[0].get_source()) for d in (3, 6, 12)}
    per_level = (sizes[6] - sizes[3]) / 3
    assert per_level < 80
    assert abs(sizes[12] - sizes[6] - 6 * per_level) <= 12, sizes
    assert sizes[12] < 2000


def test_integer_min_max_helpers_come_only_where_used():
    mod, _ = _nested_max_min(2, "float32")
    assert "te_max" not in mod.get_source() and "template" not in mod.get_source()


def test_a_nan_operand_gives_the_other_one_as_fmaxf_does():
    # CUDA's fmaxf/fminf (one instruction) differ from numpy's np.maximum here: pinned
    A = te.placeholder((33,), name="A")
    B = te.placeholder((33,), name="B")
    C = te.compute((33,), lambda i: te.max(A[i], B[i]) + te.min(B[i], A[i]), name="C")
    s = te.create_schedule(C.op)
    bind(s, C, C.op.axis[0], 16)
    mod = te.build(s, [A, B, C], target="cuda")
    a, b = rand_array((33,)), rand_array((33,))
    a[::3] = np.nan
    (c,) = run_emulated(mod, [a, b], [(33,)], ["float32"])
    np.testing.assert_allclose(c, np.fmax(a, b) + np.fmin(b, a), rtol=1e-6)
    assert not np.isnan(c).any()
