"""The benchmark conv2d (benchmarks/kernels.py: the library's conv2d strategy) against numpy
on odd sizes, and deterministic facts of its code (vector FMAs in both GEMM forms, no
scalar libm fallback), never timings. Holds on AVX2 (4x24 or 6x16 tiles per shape, ymm) and
AVX-512 (8x32 or 8x48 tiles, zmm) hosts alike."""
import os
import re
import sys

import numpy as np
import pytest

import te

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import kernels  # noqa: E402

FMA = re.compile(r"vfmadd\d+ps\s+[^\n]*%[yz]mm")
MR, NR = te.autotune.conv2d_tile()


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


def _run(cin, cout, h, w, r, pad, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, cin, h, w), dtype=np.float32)
    wt = rng.standard_normal((cout, cin, r, r), dtype=np.float32)
    s, args = kernels.conv2d(cin, cout, h, w, r, pad)
    mod = te.build(s, args)
    y = np.empty(tuple(int(d) for d in args[2].shape), np.float32)
    mod(x, wt, y)
    return mod, y, _conv_nchw(x, wt, pad)


@pytest.mark.parametrize("cin,cout,h,w,r,pad", [(5, 11, 9, 7, 3, 1), (3, 2 * MR, 6, 13, 3, 1),
                                               (7, 5, 5, 3, 1, 0), (4, MR, 7, 6, 2, 0),
                                               (7, 2 * MR, 3, NR, 1, 0)])
def test_conv2d_matches_numpy(cin, cout, h, w, r, pad):
    _, y, want = _run(cin, cout, h, w, r, pad, cin * 100 + cout)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


# (cout, h, w, r, pad): the default tile's shapes, and 7x7 images (AVX2: 6x16 tiles)
@pytest.mark.parametrize("cout,h,w,r,pad", [(2 * MR, 6, 10, 1, 0), (2 * MR, 6, 10, 3, 1),
                                            (12, 7, 7, 1, 0), (12, 7, 7, 3, 1)])
def test_micro_kernels_use_vector_fma(cout, h, w, r, pad):
    mod, _, _ = _run(8, cout, h, w, r, pad, 0)
    mr, _ = te.autotune.conv2d_gemm_tile((1, 8, h, w), (cout, 8, r, r), 1, pad)
    asm = mod.get_source("asm")
    assert len(FMA.findall(asm)) >= mr   # one FMA per tile row at least, all vector
    assert "fmaf" not in asm   # no scalar libm fallback
