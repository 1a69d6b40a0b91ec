"""Target 'cuda': barriers only where a thread may read what another wrote. Two shared fills
that do not read each other share one barrier before them and one after, also where each
sits in its own allocation (TVM's cooperative fetch of both matmul tiles); checked against
numpy in the emulator, whose threads meet at real barriers over NaN-poisoned shared memory.
"""
import numpy as np
from helpers import rand_array, run_emulated

import te


def _cooperative_fetch_matmul(M, N, K, tile, k_split):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    by, bx, ty, tx = s[C].tile(C.op.axis[0], C.op.axis[1], tile, tile)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=k_split)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        fo, fi = s[T].split(s[T].fuse(*s[T].op.axis), factor=tile)
        s[T].bind(fo, te.thread_axis("threadIdx.y"))
        s[T].bind(fi, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_two_fills_that_do_not_read_each_other_share_their_barriers():
    M, N, K = 77, 45, 33
    s, args = _cooperative_fetch_matmul(M, N, K, 16, 7)
    mod = te.build(s, args, target="cuda")
    lines = [line.strip() for line in mod.get_source().splitlines()]
    order = ["sync" if line == "__syncthreads();" else line[0] for line in lines
             if line == "__syncthreads();" or line.startswith(("A_shared[", "B_shared["))]
    assert order == ["sync", "A", "B", "sync"]
    assert not any(a == b == "__syncthreads();" for a, b in zip(lines, lines[1:]))
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
