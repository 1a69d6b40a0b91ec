"""LLVM's own vectorizer is kept off serial loops whose stores are strided in the loop
variable (it would scatter), and left alone elsewhere. Deterministic facts of the
generated code, never timings; results are checked against numpy."""
import os
import sys


from runtime.checker import INDEX_LIMIT
import te
from te.codegen.llvm.codegen import codegen_llvm
from helpers import check_schedule

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import gemm_chain  # noqa: E402

OFF = '!{ !"llvm.loop.vectorize.enable", i1 0 }'


def _ll(s, args) -> str:
    return codegen_llvm(te.lower(s, args), index_limit=INDEX_LIMIT)


def test_the_gemm_chain_blocking_step_has_no_gathers_or_scatters():
    s, args = gemm_chain.blocking(64, 64, 64)
    assert OFF in _ll(s, args)
    asm = te.build(s, args).get_source("asm")
    assert "vscatter" not in asm and "vgather" not in asm   # (AVX2 hosts have no scatter)
    A, B, C = args
    check_schedule(s, [A, B], [C], lambda a, b: a @ b, rtol=1e-4, atol=1e-4)


def test_contiguous_and_invariant_stores_leave_llvm_free_on_the_inner_loop():
    A = te.placeholder((37, 29), name="A")
    B = te.compute((37, 29), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    # j: stride 1, left to LLVM; i moves a whole row (LLVM would vectorize it only after
    # fully unrolling j, into scatters)
    assert _ll(s, [A, B]).count(OFF) == 1
    k = te.reduce_axis((0, 29), name="k")
    S = te.compute((37,), lambda i: te.sum(A[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    assert OFF not in _ll(s, [A, S])          # k: the same element every step


def test_a_transposing_store_keeps_llvm_off_its_loop():
    A = te.placeholder((37, 29), name="A")
    T = te.compute((29, 37), lambda j, i: A[i, j], name="T")
    s = te.create_schedule(T.op)
    s[T].reorder(T.op.axis[1], T.op.axis[0])   # inner loop walks T down a column
    ll = _ll(s, [A, T])
    assert ll.count(OFF) == 1
    check_schedule(s, [A], [T], lambda a: a.T.copy())


def test_a_store_not_linear_in_the_loop_keeps_llvm_off_it():
    """D[i // 2, j] (rows written twice): the index is not linear in i."""
    A = te.placeholder((6, 16), name="A")
    D = te.compute((3, 16), lambda r, j: A[2 * r, j] + A[2 * r + 1, j], name="D")
    s = te.create_schedule(D.op)
    ll = _ll(s, [A, D])
    assert ll.count(OFF) == 1                 # r: a whole row per step; j: contiguous
    check_schedule(s, [A], [D], lambda a: a[0::2] + a[1::2])
    # a fused loop whose store index the simplifier folds back to linear is left alone:
    # (io*2 + fused//16)*16 + fused%16 is io*32 + fused
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=2)
    s[D].fuse(ii, D.op.axis[1])
    assert OFF not in _ll(s, [A, D])
    check_schedule(s, [A], [D], lambda a: a[0::2] + a[1::2])
    # one that stays non-linear keeps LLVM off: fused = j*3 + r stores D[fused%3, fused//3]
    s = te.create_schedule(D.op)
    r, j = D.op.axis
    s[D].reorder(j, r)
    s[D].fuse(j, r)
    assert _ll(s, [A, D]).count(OFF) >= 1
    check_schedule(s, [A], [D], lambda a: a[0::2] + a[1::2])
