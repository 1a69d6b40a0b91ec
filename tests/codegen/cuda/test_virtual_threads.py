"""Target 'cuda': loops bound to virtual threads ("vthread", "cthread"), as TVM's GEMM and
conv schedules use them, run serially in each GPU thread; checked against numpy in the
CUDA emulator (local accumulators per virtual thread, shared fills with their barriers
inside the virtual thread loops), and on the CPU, where they are serial loops too.
"""
import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te


def _gemm_with_virtual_threads(M, N, K, num_thread, vthread, step, tag="vthread"):
    """C[y, x] = sum_k A[k, y] * B[k, x], scheduled as TVM's CUDA GEMM recipe: shared tiles,
    register tiles, and a 2 x 2 grid of virtual threads per thread."""
    A = te.placeholder((K, M), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda y, x: te.sum(A[k, y] * B[k, x], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AL, BL = s.cache_read(AA, "local", [C]), s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    block_factor = 2 * vthread * num_thread
    thread_x = te.thread_axis((0, num_thread), "threadIdx.x")
    thread_y = te.thread_axis((0, num_thread), "threadIdx.y")
    thread_xz = te.thread_axis((0, vthread), tag, name="vx")
    thread_yz = te.thread_axis((0, vthread), tag, name="vy")
    by, yi = s[C].split(C.op.axis[0], factor=block_factor)
    bx, xi = s[C].split(C.op.axis[1], factor=block_factor)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].reorder(by, bx, yi, xi)
    tyz, yi = s[C].split(yi, nparts=vthread)
    ty, yi = s[C].split(yi, nparts=num_thread)
    txz, xi = s[C].split(xi, nparts=vthread)
    tx, xi = s[C].split(xi, nparts=num_thread)
    for loop, axis in ((tyz, thread_yz), (txz, thread_xz), (ty, thread_y), (tx, thread_x)):
        s[C].bind(loop, axis)
    s[C].reorder(tyz, txz, ty, tx, yi, xi)
    s[CC].compute_at(s[C], tx)
    yo, xo = CC.op.axis
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=step)
    kt, ki = s[CC].split(ki, factor=1)
    s[CC].reorder(ko, kt, ki, yo, xo)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[CC].unroll(kt)
    s[AL].compute_at(s[CC], kt)
    s[BL].compute_at(s[CC], kt)
    for fill in (AA, BB):
        ty, xi = s[fill].split(s[fill].op.axis[0], nparts=num_thread)
        tx, xi = s[fill].split(s[fill].op.axis[1], nparts=num_thread)
        s[fill].bind(ty, thread_y)
        s[fill].bind(tx, thread_x)
        s[fill].vectorize(xi)
    return s, [A, B, C]


@pytest.mark.parametrize("M, N, K, tag", [
    (32, 32, 16, "vthread"),   # sizes that divide
    (37, 29, 19, "vthread"),   # tail blocks and a tail k step
    (20, 24, 12, "cthread"),
])
def test_gemm_with_virtual_threads_matches_numpy_in_the_emulator(M, N, K, tag):
    s, args = _gemm_with_virtual_threads(M, N, K, num_thread=4, vthread=2, step=4, tag=tag)
    text = str(te.lower(s, args, target="cuda"))
    assert tag not in text          # the virtual thread loops are ordinary loops
    assert "for (y.inner.outer, 0, 2) {" in text
    mod = te.build(s, args, target="cuda")
    src = mod.get_source()
    assert "for (int y_inner_outer = 0; y_inner_outer < 2; ++y_inner_outer) {" in src
    assert mod.kernels[0].uses_barriers
    a, b = rand_array((K, M)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-5, atol=1e-5)


def test_the_shared_fill_covers_every_virtual_thread():
    """Bound inference relaxes virtual threads for a shared stage (TVM's NeedRelax): the
    tile holds what all virtual threads of the block read, not one virtual thread's part."""
    s, args = _gemm_with_virtual_threads(32, 32, 16, num_thread=4, vthread=2, step=4)
    text = str(te.lower(s, args, target="cuda"))
    # block_factor 16 rows x step 4: both virtual threads' rows
    assert "allocate A.shared[float32 * 64] scope=shared" in text, text


def test_virtual_threads_on_the_cpu_are_serial_loops():
    A = te.placeholder((13, 11), name="A")
    C = te.compute(A.shape, lambda i, j: A[i, j] * 2.0 + 1.0, name="C")
    s = te.create_schedule(C.op)
    vo, _ = s[C].split(C.op.axis[0], nparts=3)
    s[C].bind(vo, te.thread_axis("vthread"))
    mod = te.build(s, [A, C], target="llvm")
    a = rand_array((13, 11))
    c = np.empty_like(a)
    mod(a, c)
    np.testing.assert_allclose(c, a * 2.0 + 1.0, rtol=1e-6)


def _conv_hwcn_with_virtual_threads(size, in_c, out_c, batch, tile, num_thread, step):
    """TVM's opt_conv_cuda schedule shape (HWCN layout, 3x3 kernel, padding 1, shared and
    local caches, 2 x 2 virtual threads), at a small size."""
    kernel, pad, vthread = 3, 1, 2
    A = te.placeholder((size, size, in_c, batch), name="A")
    W = te.placeholder((kernel, kernel, in_c, out_c), name="W")
    padded = size + 2 * pad
    Apad = te.compute(
        (padded, padded, in_c, batch),
        lambda yy, xx, cc, nn: te.if_then_else(
            te.all(yy >= pad, yy - pad < size, xx >= pad, xx - pad < size),
            A[yy - pad, xx - pad, cc, nn], te.const(0.0, "float32")), name="Apad")
    rc = te.reduce_axis((0, in_c), name="rc")
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")
    B = te.compute((size, size, out_c, batch),
                   lambda yy, xx, ff, nn: te.sum(Apad[yy + ry, xx + rx, rc, nn] *
                                                 W[ry, rx, rc, ff], axis=[ry, rx, rc]),
                   name="B")
    s = te.create_schedule(B.op)
    s[Apad].compute_inline()
    AA, WW = s.cache_read(Apad, "shared", [B]), s.cache_read(W, "shared", [B])
    AL, WL = s.cache_read(AA, "local", [B]), s.cache_read(WW, "local", [B])
    BL = s.cache_write(B, "local")
    block_factor = tile * num_thread
    thread_x = te.thread_axis((0, num_thread), "threadIdx.x")
    thread_y = te.thread_axis((0, num_thread), "threadIdx.y")
    hi, wi, fi, ni = s[B].op.axis
    bz = s[B].fuse(hi, wi)
    by, fi = s[B].split(fi, factor=block_factor)
    bx, ni = s[B].split(ni, factor=block_factor)
    tyz, fi = s[B].split(fi, nparts=vthread)
    txz, ni = s[B].split(ni, nparts=vthread)
    ty, fi = s[B].split(fi, nparts=num_thread)
    tx, ni = s[B].split(ni, nparts=num_thread)
    s[B].reorder(bz, by, bx, tyz, txz, ty, tx, fi, ni)
    for loop, tag in ((bz, "blockIdx.z"), (by, "blockIdx.y"), (bx, "blockIdx.x")):
        s[B].bind(loop, te.thread_axis(tag))
    s[B].bind(tyz, te.thread_axis((0, vthread), "vthread", name="vy"))
    s[B].bind(txz, te.thread_axis((0, vthread), "vthread", name="vx"))
    s[B].bind(ty, thread_y)
    s[B].bind(tx, thread_x)
    s[BL].compute_at(s[B], tx)
    yi, xi, fi, ni = s[BL].op.axis
    ry, rx, rc = s[BL].op.reduce_axis
    rco, rci = s[BL].split(rc, factor=step)
    s[BL].reorder(rco, ry, rx, rci, fi, ni)
    s[AA].compute_at(s[BL], rx)
    s[WW].compute_at(s[BL], rx)
    s[AL].compute_at(s[BL], rci)
    s[WL].compute_at(s[BL], rci)
    for fill in (AA, WW):
        yi, xi, ci, last = s[fill].op.axis
        ty, ci = s[fill].split(ci, nparts=num_thread)
        tx, last = s[fill].split(last, nparts=num_thread)
        _, last = s[fill].split(last, factor=4)
        s[fill].reorder(ty, tx, yi, xi, ci, last)
        s[fill].bind(ty, thread_y)
        s[fill].bind(tx, thread_x)
        s[fill].vectorize(last)
    return s, [A, W, B]


def _np_conv_hwcn(a, w):
    size, kernel = a.shape[0], w.shape[0]
    ap = np.pad(a, ((1, 1), (1, 1), (0, 0), (0, 0)))
    out = np.zeros((size, size, w.shape[3], a.shape[3]), np.float64)
    for ry in range(kernel):
        for rx in range(kernel):
            out += np.einsum("yxcn,cf->yxfn", ap[ry:ry + size, rx:rx + size], w[ry, rx])
    return out


@pytest.mark.parametrize("size, in_c, out_c, batch", [
    (5, 8, 16, 16),    # tiles that divide
    (4, 6, 12, 20),    # a tail channel step and tail blocks in batch and filters
])
def test_opt_conv_cuda_schedule_shape_matches_numpy_in_the_emulator(size, in_c, out_c, batch):
    s, args = _conv_hwcn_with_virtual_threads(size, in_c, out_c, batch, tile=2,
                                              num_thread=4, step=4)
    mod = te.build(s, args, target="cuda")
    a, w = rand_array((size, size, in_c, batch)), rand_array((3, 3, in_c, out_c))
    (b,) = run_emulated(mod, [a, w], [(size, size, out_c, batch)], ["float32"])
    np.testing.assert_allclose(b, _np_conv_hwcn(a, w), rtol=1e-4, atol=1e-4)
