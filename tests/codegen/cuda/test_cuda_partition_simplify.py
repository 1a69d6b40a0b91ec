"""Target 'cuda': the simplifier and loop partitioning on GPU code. Fused indices come out
linear (floordiv(f, 33) * 33 + floormod(f, 33) is f); a serial loop with no barrier inside
is split into a main part without its tail check and a tail that keeps it (its split point
may depend on threadIdx: no barrier sits inside); a loop holding a shared fill stays whole.
Checked against numpy in the emulator, and compiled by nvcc in te.build where it is on PATH.
"""
import re

import numpy as np
from helpers import bind, rand_array, run_emulated, shared_matmul

import te


def _matmul_with_fused_fills(M, N, K, tile, k_split):
    # TVM's cooperative fetch: fuse the tile, split it over the threads
    return shared_matmul(M, N, K, tile, k_split, fill="cooperative")


def _indices(src, buffer):
    return re.findall(rf"\b{buffer}\[([^\]]*)\]", src)


def test_a_fused_loop_indexes_linearly():
    A = te.placeholder((33, 77), name="A")
    C = te.compute((33, 77), lambda i, j: A[i, j] * 2, name="C")
    s = te.create_schedule(C.op)
    bind(s, C, s[C].fuse(*C.op.axis), 64)
    mod = te.build(s, [A, C], target="cuda")
    src = mod.get_source()
    assert _indices(src, "A") == ["(i_j_fused_outer * 64) + i_j_fused_inner"]
    assert _indices(src, "C") == ["(i_j_fused_outer * 64) + i_j_fused_inner"]
    a = rand_array((33, 77))
    (c,) = run_emulated(mod, [a], [(33, 77)], ["float32"])
    np.testing.assert_array_equal(c, a * 2)


def test_a_fused_shared_fill_of_whole_rows_reads_linearly_and_the_k_tail_is_partitioned():
    M = N = 64
    K, tile = 33, 16
    s, args = _matmul_with_fused_fills(M, N, 16, tile, 16)   # A's tile: 16 whole rows
    src = te.build(s, args, target="cuda").get_source()
    (a_index,) = _indices(src, "A")
    assert a_index == "((i_outer * 256) + (ax0_ax1_fused_outer * 16)) + ax0_ax1_fused_inner"
    # k split by 7 (33 = 4 * 7 + 5): the k.inner loop inside the k.outer step (which holds
    # the fills, so it stays whole) splits at min(33 - k_outer * 7, 7); its main part has
    # no k check
    s, args = _matmul_with_fused_fills(M, N, K, tile, 7)
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert src.count("for (int k_outer") == 1
    loops = re.findall(r"for \(int k_inner = ([^;]*); k_inner < ([^;]*);", src)
    assert loops[0] == ("0", "te_min<int>(33 - (k_outer * 7), 7)"), loops
    main_body = src.split("for (int k_inner")[1]
    assert "< 33" not in main_body.split("}")[0]
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_split_point_that_depends_on_the_thread_partitions_a_loop_without_barriers():
    # rows M = 62 in blocks of 32, 4 per thread: the last thread of the last block has 2;
    # with no barrier inside, each thread's loop may stop where its rows do
    M, N, K = 62, 16, 8
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    by, rest = s[C].split(C.op.axis[0], factor=32)
    ty, io = s[C].split(rest, factor=4)
    s[C].reorder(by, ty, C.op.axis[1], io)
    for axis, tag in ((by, "blockIdx.x"), (ty, "threadIdx.y"), (C.op.axis[1], "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    mod = te.build(s, [A, B, C], target="cuda")
    src = mod.get_source()
    (bound,) = re.findall(r"for \(int i_inner_inner = 0; i_inner_inner < ([^;]*);", src)
    assert "i_inner_outer" in bound and "i_outer" in bound, bound
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
