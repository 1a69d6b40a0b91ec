"""Target 'cuda': every kernel whose block size is a constant carries __launch_bounds__, and
ptxas's resource use (registers per thread, static shared memory) is read at build time,
where nvcc is on PATH, to refuse a block no SM can hold: at build time for a constant block
size, at the call (the emulator's too) for one that depends on the sizes.
"""
import shutil

import numpy as np
import pytest
from helpers import rand_array, run_emulated

import te
from runtime.cuda_resources import KernelResources, check_fits, parse_ptxas_report

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc (CUDA toolkit) is not on PATH")


def _register_tiled_matmul(M, N, K, threads, per_thread):
    """The issue's kernel: threads x threads per block, per_thread x per_thread outputs each
    in registers."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    tile = threads * per_thread
    by, bx, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], tile, tile)
    ty, yi = s[C].split(yi, nparts=threads)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(by, bx, ty, tx, yi, xi)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    yc, xc = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], yc, xc)
    s[CL].unroll(yc)
    s[CL].unroll(xc)
    return s, [A, B, C]


def test_a_constant_block_size_gives_launch_bounds():
    s, args = _register_tiled_matmul(40, 40, 8, 4, 2)
    src = te.build(s, args, target="cuda").get_source()
    assert 'extern "C" __global__ void __launch_bounds__(16) main_kernel0(' in src


@needs_nvcc
def test_the_issues_32x32_block_of_8x8_outputs_fits_by_the_launch_bounds():
    # without __launch_bounds__ ptxas gave this kernel 94-96 registers on sm_90: 1024
    # threads could not launch; with them it keeps to 64 and spills the rest
    s, args = _register_tiled_matmul(256, 256, 16, 32, 8)
    mod = te.build(s, args, target="cuda -arch=sm_90")
    assert "__launch_bounds__(1024)" in mod.get_source()
    used = mod.kernels[0].resources
    assert used.arch == "sm_90" and used.registers <= 64
    assert used.registers_per_block(1024) <= 65536
    a, b = rand_array((256, 16)), rand_array((16, 256))
    (c,) = run_emulated(mod, [a, b], [(256, 256)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@needs_nvcc
def test_a_block_size_known_at_the_call_is_checked_against_the_registers():
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16, 96), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((n, 96), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))   # n threads: one block
    s[CL].compute_at(s[C], C.op.axis[0])
    s[CL].reorder(s[CL].op.reduce_axis[0], s[CL].op.axis[1])
    s[CL].unroll(s[CL].op.axis[1])   # 96 accumulators per thread, in registers
    mod = te.build(s, [A, B, C], target="cuda -arch=sm_90")
    assert "__launch_bounds__" not in mod.get_source()
    regs = mod.kernels[0].resources.registers
    assert regs > 64
    b = rand_array((16, 96))
    a = rand_array((63, 16))
    (c,) = run_emulated(mod, [a, b], [(63, 96)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match=rf"kernel 'main' \(main_kernel0\) cannot launch: "
                       rf"{regs} registers per thread \(ptxas, sm_90\) x 1024 threads per "
                       rf"block need \d+ registers, more than the 65536 a block may use; use "
                       rf"at most \d+ threads per block, or less work per thread"):
        run_emulated(mod, [rand_array((1024, 16)), b], [(1024, 96)], ["float32"])


def test_the_check_with_the_issues_numbers():
    # 94 registers round up to 96 per thread (256 per warp): 1024 threads need 98304
    used = KernelResources(94, arch="sm_90")
    assert used.registers_per_block(1024) == 96 * 1024
    check_fits("'k' (k0)", used, 640)
    with pytest.raises(RuntimeError, match=r"kernel 'k' \(k0\) cannot launch: 94 registers "
                       r"per thread \(ptxas, sm_90\) x 1024 threads per block need 98304 "
                       r"registers, more than the 65536 a block may use; use at most 672 "
                       r"threads per block"):
        check_fits("'k' (k0)", used, 1024)
    with pytest.raises(RuntimeError, match=r"kernel 'k' \(k0\) cannot launch: 50000 bytes of "
                       r"shared memory per block \(ptxas, sm_80\), more than the 49152"):
        check_fits("'k' (k0)", KernelResources(16, 50000, arch="sm_80"), 32)


def test_ptxas_report_is_read_per_kernel():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compiling entry function 'k1' for 'sm_80'
ptxas info    : Function properties for k1
    144 bytes stack frame, 224 bytes spill stores, 196 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 4000 bytes smem, 360 bytes cmem[0]
"""
    got = parse_ptxas_report(report, "sm_80")
    assert got == {"k2": KernelResources(8, 0, 0, 0, "sm_80"),
                   "k1": KernelResources(64, 4000, 224, 196, "sm_80")}
