"""Target 'cuda': barriers only where a thread may read what another wrote. Two shared fills
that do not read each other share one barrier before them and one after, also where each
sits in its own allocation (TVM's cooperative fetch of both matmul tiles); checked against
numpy in the emulator, whose threads meet at real barriers over NaN-poisoned shared memory.
"""
import numpy as np
from helpers import rand_array, run_emulated, shared_matmul

import te


def _cooperative_fetch_matmul(M, N, K, tile, k_split):
    return shared_matmul(M, N, K, tile, k_split, fill="cooperative")


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
