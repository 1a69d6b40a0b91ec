"""Target 'cuda': stages given scope "shared" with Stage.set_scope where compute_at attaches
them (TVM's way, no cache_write + compute_inline), checked against numpy in the CUDA
emulator on random data of odd sizes, compiled by nvcc where it is on PATH; the scopes
that target 'cuda' refuses, with their messages.
"""
import shutil

import numpy as np
import pytest
from helpers import np_softmax, rand_array, run_emulated, softmax_graph

import te

HAS_NVCC = shutil.which("nvcc") is not None


def test_softmax_one_block_per_row_with_stages_set_to_shared():
    rows, cols, threads = 5, 203, 64
    X, mx, ex, total, Y = softmax_graph(rows, cols)
    s = te.create_schedule(Y.op)
    row = Y.op.axis[0]
    s[Y].bind(row, te.thread_axis("blockIdx.x"))
    _, ji = s[Y].split(Y.op.axis[1], factor=threads)
    s[Y].bind(ji, te.thread_axis("threadIdx.x"))
    for reduction in (mx, total):   # the reduction tutorial's cross-thread reduction
        s[reduction].set_scope("shared")
        s[reduction].compute_at(s[Y], row)
        _, ki = s[reduction].split(reduction.op.reduce_axis[0], factor=threads)
        s[reduction].bind(ki, te.thread_axis("threadIdx.x"))
    # the row's exps, shared by the block: each thread then reads what others wrote
    s[ex].compute_at(s[Y], row)
    s[ex].set_scope("shared")
    _, ei = s[ex].split(ex.op.axis[1], factor=threads)
    s[ex].bind(ei, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [X, Y], target="cuda")
    src = mod.get_source()
    assert src.count("__global__") == 1
    # ex covers the row (split by 64: 256 elements), one per block, not one per thread
    for decl in ("__shared__ float ex[256];", "__shared__ float mx[1];",
                 "__shared__ float total[1];"):
        assert decl in src
    if HAS_NVCC:
        assert ".shared .align 4 .b8 _ZZ12main_kernel0E2ex[1024];" in mod.get_source("ptx")
    x = rand_array((rows, cols)) * 4
    (y,) = run_emulated(mod, [x], [(rows, cols)], ["float32"])
    np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-6)


def _reversed_rows(scope):
    """C[i, j] = B[i, cols - 1 - j] with B = 2A + 1 computed per block row in `scope`: each
    thread reads an element another thread wrote."""
    rows, cols = 3, 37
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = te.compute((rows, cols), lambda i, j: B[i, cols - 1 - j], name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].set_scope(scope)
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    return s, A, C


def test_threads_of_a_block_read_each_others_shared_values():
    s, A, C = _reversed_rows("shared")
    mod = te.build(s, [A, C], target="cuda")
    assert "__shared__ float B[37];" in mod.get_source()
    a = rand_array((3, 37))
    (c,) = run_emulated(mod, [a], [(3, 37)], ["float32"])
    np.testing.assert_allclose(c, (a * 2 + 1)[:, ::-1], rtol=1e-6)


@pytest.mark.parametrize("scope, message", [
    ("local", r"^te.build: target 'cuda': stage 'B' is stored per thread \(scope 'local' "
              r"inside a kernel\), but its loop 'j' bound to threadIdx.x gives each thread "
              r"only part of it to compute"),
    ("warp", r"^te.build: target 'cuda' does not support scope 'warp' \(buffer 'B'\) yet$"),
])
def test_scopes_the_kernel_cannot_share_are_refused(scope, message):
    s, A, C = _reversed_rows(scope)
    with pytest.raises(te.BuildError, match=message):
        te.build(s, [A, C], target="cuda")
