"""LLVM's loop unroller is kept off loop nests that read no memory (fills, such as a GEMM
accumulator zeroed before its reduction) and off nests that flattened would pass
_FLATTEN_LIMIT instructions: LLVM's full unroller made one straight-line block of thousands
of instructions of such nests, which its machine schedulers took seconds over. Innermost
loops and small nests stay LLVM's. Deterministic facts of the generated code, never
timings; results are checked against numpy."""
import re

import numpy as np

from runtime.checker import INDEX_LIMIT
import te
from te.codegen.llvm.codegen import codegen_llvm
from helpers import check_schedule

OFF = '!"llvm.loop.unroll.disable"'


def _ll(s, args) -> str:
    return codegen_llvm(te.lower(s, args), index_limit=INDEX_LIMIT)


def _loops_without_unrolling(ll: str) -> list:
    """The loop variables whose back edge carries a loop id holding unroll.disable."""
    node = re.search(r"^(!\d+) = !\{ " + re.escape(OFF) + r" \}", ll, re.M)
    if node is None:
        return []
    ids = {m.group(1) for m in re.finditer(r"^(!\d+) = !\{ !\d+(?:, !\d+)* \}", ll, re.M)
           if node.group(1) in re.findall(r"!\d+", m.group(0).split("=", 1)[1])}
    return [m.group(1) for m in re.finditer(
        r'label %"for_([\w.]+)_body", label %"for_[\w.]+_end", !llvm.loop (!\d+)', ll)
        if m.group(2) in ids]


def test_a_fill_nest_is_not_unrolled_by_llvm_and_still_fills():
    Z = te.compute((8, 34), lambda i, j: te.const(1.5, "float32"), name="Z")
    s = te.create_schedule(Z.op)
    assert _loops_without_unrolling(_ll(s, [Z])) == ["i"]   # the nest; j is innermost
    out = np.zeros((8, 34), dtype="float32")
    te.build(s, [Z])(out)
    np.testing.assert_array_equal(out, 1.5)


def test_the_zeroing_of_an_accumulator_before_an_outer_reduction_loop_is_not_unrolled():
    A = te.placeholder((19, 23), name="A")
    B = te.placeholder((23, 34), name="B")
    k = te.reduce_axis((0, 23), name="k")
    C = te.compute((19, 34), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(k, i, j)          # the init nest (i, j) runs before the k loop
    loops = _loops_without_unrolling(_ll(s, [A, B, C]))
    # the init's i (a fill), and k: its nest flattened is 23 x 19 x 34 multiply-adds
    assert len(loops) == 2 and loops[0].startswith("i") and loops[1].startswith("k")
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=1e-4, atol=1e-4)


def test_a_nest_too_big_to_flatten_keeps_its_outer_loop_and_llvm_its_inner_one():
    A = te.placeholder((64, 200), name="A")
    B = te.compute((64, 200), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    assert _loops_without_unrolling(_ll(s, [A, B])) == ["i"]
    check_schedule(s, [A], [B], lambda a: a * 2.0)


def test_small_nests_that_read_are_left_to_llvm():
    A = te.placeholder((8, 34), name="A")
    B = te.compute((8, 34), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    assert OFF not in _ll(s, [A, B])
    check_schedule(s, [A], [B], lambda a: a * 2.0)
