"""The benchmark conv2d schedules (benchmarks/kernels.py) against numpy on odd sizes, and
deterministic facts of their code (vector FMAs in the micro-kernel), never timings. Holds
on AVX2 (4x24 tiles, ymm) and AVX-512 (8x32 tiles, zmm) hosts alike."""
import os
import re
import sys

import numpy as np
import pytest

import te

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import gemm_chain  # noqa: E402
import kernels  # noqa: E402

FMA = re.compile(r"vfmadd\d+ps\s+[^\n]*%[yz]mm")
MR, NR = gemm_chain.micro_kernel_shape()


def _conv_nchw(x, w, pad):
    """Direct stride-1 convolution, batch 1, by summing shifted windows."""
    _, cin, h, wd = x.shape
    cout, _, r, _ = w.shape
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - r + 1, wd + 2 * pad - r + 1
    out = np.zeros((cout, oh, ow), np.float64)
    for ry in range(r):
        for rx in range(r):
            out += np.einsum("fc,chw->fhw", w[:, :, ry, rx], xp[:, ry:ry + oh, rx:rx + ow])
    return out[None].astype(np.float32)


def _run(s, args, x, w):
    mod = te.build(s, args)
    shapes = [tuple(int(d) for d in t.shape) for t in args]
    y = np.empty(shapes[2], np.float32)
    mod(x.reshape(shapes[0]), w.reshape(shapes[1]), y)
    return mod, y


@pytest.mark.parametrize("cin,cout,h,w,r,pad", [(5, 11, 9, 7, 3, 1), (3, 2 * MR, 6, 13, 3, 1),
                                               (7, 5, 5, 3, 1, 0), (4, MR, 7, 6, 2, 0)])
def test_padded_rows_conv_matches_numpy(cin, cout, h, w, r, pad):
    rng = np.random.default_rng(cin * 100 + cout)
    x = rng.standard_normal((1, cin, h, w), dtype=np.float32)
    wt = rng.standard_normal((cout, cin, r, r), dtype=np.float32)
    s, args = kernels.conv2d(cin, cout, h, w, r, pad)
    _, y = _run(s, args, x, wt)
    np.testing.assert_allclose(y.reshape(_conv_nchw(x, wt, pad).shape), _conv_nchw(x, wt, pad),
                               rtol=1e-4, atol=1e-4)


def test_1x1_gemm_conv_matches_numpy_with_a_partial_block():
    rng = np.random.default_rng(3)
    cin, cout, hw = 7, 2 * MR, 3 * NR
    x = rng.standard_normal((1, cin, hw), dtype=np.float32)
    wt = rng.standard_normal((cout, cin), dtype=np.float32)
    s, args = kernels.conv2d_1x1_gemm(cin, cout, hw, MR, NR, block=2)
    mod, y = _run(s, args, x, wt)
    np.testing.assert_allclose(y[0], wt @ x[0], rtol=1e-4, atol=1e-4)
    assert len(FMA.findall(mod.get_source("asm"))) >= MR


def test_conv2d_dispatches_1x1_to_the_gemm_schedule():
    s, args = kernels.conv2d(16, 2 * MR, 4, NR, 1, 0)
    assert [len(t.shape) for t in args] == [3, 2, 3]    # (1, C, H*W) views
    s, args = kernels.conv2d(16, 2 * MR, 4, NR, 3, 1)
    assert [len(t.shape) for t in args] == [4, 4, 4]


def test_padded_rows_micro_kernel_uses_vector_fma():
    s, args = kernels.conv2d(8, 2 * MR, 6, 10, 3, 1)
    asm = te.build(s, args).get_source("asm")
    assert len(FMA.findall(asm)) >= MR
    assert "fmaf" not in asm   # no scalar libm fallback
