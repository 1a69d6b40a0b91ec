"""Tensor cores for target 'cuda': te.wmma_matmul_intrin, a tensor intrinsic computing a
16x16 float32 tile of a matmul of float16 inputs with nvcuda::wmma (16x16x16 fragments).

Takes the reduction length K (a multiple of 16); gives a TensorIntrin for Stage.tensorize
in TVM's triple form: body te_wmma_16x16 (the whole reduction: accumulator zeroed, A's
16xK and B's Kx16 multiplied 16 at a time, the tile stored), and for a reduction split
with its outer part outside the tensorized loops, reset te_wmma_zero_16x16 (the tile
zeroed) and update te_wmma_update_16x16 (the tile loaded, one K-chunk added, stored). Each
is warp-collective: a warp's 32 lanes (threadIdx.x) make it together with the same
arguments. HELPER defines them in the CUDA C where a kernel calls one. Imports te.compute
and te.lower (extern_api, warp_calls).
"""
from __future__ import annotations

from ...compute import api
from ...compute.expr import call_extern
from ...errors import ComputeError
from ...lower.extern_api import decl_buffer, decl_tensor_intrin
from ...lower.passes.warp_calls import WARP_CALLS

TILE = 16
BODY_NAME = "te_wmma_16x16"           # the whole reduction
RESET_NAME = "te_wmma_zero_16x16"     # the tile zeroed
UPDATE_NAME = "te_wmma_update_16x16"  # the tile plus one K-chunk
HELPER_NAMES = (BODY_NAME, RESET_NAME, UPDATE_NAME)
assert set(HELPER_NAMES) <= WARP_CALLS   # the host/device split launches a warp for them
# wmma loads and stores need 256-bit aligned pointers (element offsets of a tile are
# multiples of 16, so the array itself must be)
POINTER_ALIGN = 32
INCLUDE = "#include <mma.h>"
# c (16x16 float, row stride ldc) = [c +] a (16xk half, row stride lda) @ b (kx16 half, ldb)
HELPER = """\
__device__ __forceinline__ void te_wmma_mac_16x16(
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>& fc,
    const half* a, int lda, const half* b, int ldb, int k) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major> fb;
  for (int kk = 0; kk < k; kk += 16) {
    nvcuda::wmma::load_matrix_sync(fa, a + kk, lda);
    nvcuda::wmma::load_matrix_sync(fb, b + kk * ldb, ldb);
    nvcuda::wmma::mma_sync(fc, fa, fb, fc);
  }
}
__device__ __forceinline__ void te_wmma_16x16(float* c, int ldc, const half* a, int lda,
                                              const half* b, int ldb, int k) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void te_wmma_zero_16x16(float* c, int ldc) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void te_wmma_update_16x16(float* c, int ldc, const half* a,
                                                     int lda, const half* b, int ldb, int k) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::load_matrix_sync(fc, c, ldc, nvcuda::wmma::mem_row_major);
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
"""


def uses_tensor_cores(cuda_text: str) -> bool:
    """Whether CUDA C `cuda_text` calls one of HELPER's functions."""
    return any(f"{name}(" in cuda_text for name in HELPER_NAMES)


def wmma_matmul_intrin(k: int):
    """The tensor intrinsic of C[16, 16] (float32) = sum over k < `k` of A[16, k] * B[k, 16]
    (float16, each cast to float32), for a stage computing a matmul that way: tensorize its
    16x16 tile loops, with the reduction inside them (the body), or K split by `k` and the
    outer loop outside them (reset before it, update per chunk: the tile stays where the
    stage stores it, in global or shared memory). Row strides of A, B and C are free
    (multiples of 8 elements, each tile 32-byte aligned: M, N and K multiples of 16 give
    both); the stage must run on exactly one warp per tile (threadIdx.x of extent 32, not
    bound to its loops)."""
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0 or k % TILE:
        raise ComputeError(f"te.wmma_matmul_intrin: k must be a positive multiple of {TILE}, "
                           f"got {k!r}")
    a = api.placeholder((TILE, k), name="a", dtype="float16")
    b = api.placeholder((k, TILE), name="b", dtype="float16")
    r = api.reduce_axis((0, k), name="k")
    c = api.compute((TILE, TILE), lambda i, j: api.sum(
        a[i, r].astype("float32") * b[r, j].astype("float32"), axis=r), name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=f"{t.name}_tile", offset_factor=TILE,
                           strides=[api.var(f"ld{t.name}"), 1]) for t in (a, b, c)}

    def parts(ins, outs):
        aa, bb = ins
        (cc,) = outs

        def mac(name, access):
            return call_extern("int32", name, cc.access_ptr(access), cc.strides[0],
                               aa.access_ptr("r"), aa.strides[0], bb.access_ptr("r"),
                               bb.strides[0], k)
        reset = call_extern("int32", RESET_NAME, cc.access_ptr("w"), cc.strides[0])
        return mac(BODY_NAME, "w"), reset, mac(UPDATE_NAME, "rw")
    return decl_tensor_intrin(c.op, parts, binds=bufs, name=f"wmma_16x16x{k}")
