"""Tensor cores for target 'cuda': te.wmma_matmul_intrin, a tensor intrinsic computing a
16x16 float32 tile of a matmul of float16 inputs with nvcuda::wmma (16x16x16 fragments),
and te.wmma_store_intrin, storing an accumulator fragment.

Takes the reduction length K (a multiple of 16); gives a TensorIntrin for Stage.tensorize
in TVM's triple form: body te_wmma_16x16 (the whole reduction: accumulator zeroed, A's
16xK and B's Kx16 multiplied 16 at a time, the tile stored), and for a reduction split
with its outer part outside the tensorized loops, reset te_wmma_zero_16x16 (the tile
zeroed) and update te_wmma_update_16x16 (the tile loaded, one K-chunk added, stored).
With accumulator=True, C is a stage of scope 'wmma.accumulator' (TVM's: cache_write of
the matmul at the warp's loop), which the code generator declares as an array of
accumulator fragments (te_wmma_acc) where the stage is allocated: body te_wmma_frag_16x16,
reset te_wmma_fill_16x16 and update te_wmma_mma_16x16 work on the tile's fragment, so the
sums stay in registers across K chunks, and wmma_store_intrin's te_wmma_store_16x16
stores each fragment to the output once. Each call is warp-collective: a warp's 32 lanes
(threadIdx.x) make it together with the same arguments. helper_text gives the CUDA C of
the helpers a kernel calls. Imports te.compute and te.lower (extern_api, warp_calls).
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
# the forms on an accumulator fragment (C a stage of scope ACC_SCOPE): the whole reduction,
# the fragment zeroed, one K-chunk added; and the fragment stored to memory
FRAG_BODY_NAME = "te_wmma_frag_16x16"
FILL_NAME = "te_wmma_fill_16x16"
MMA_NAME = "te_wmma_mma_16x16"
STORE_NAME = "te_wmma_store_16x16"
FRAGMENT_NAMES = (FRAG_BODY_NAME, FILL_NAME, MMA_NAME, STORE_NAME)
HELPER_NAMES = (BODY_NAME, RESET_NAME, UPDATE_NAME) + FRAGMENT_NAMES
# a stage of this scope (cache_write of the matmul at its warp's loop) is an array of
# 16x16 float accumulator fragments, tile (r, c) of its rows x cols the fragment
# (r / 16) * (cols / 16) + c / 16: only FRAGMENT_NAMES' calls touch it
ACC_SCOPE = "wmma.accumulator"
FRAGMENT_TYPE = "te_wmma_acc"
assert set(HELPER_NAMES) <= WARP_CALLS   # the host/device split launches a warp for them
# wmma loads and stores need 256-bit aligned pointers (element offsets of a tile are
# multiples of 16, so the array itself must be)
POINTER_ALIGN = 32
INCLUDE = "#include <mma.h>"
# c (16x16 float, row stride ldc) = [c +] a (16xk half, row stride lda) @ b (kx16 half, ldb);
# the C of each helper, the ones a kernel calls go in its source (after MAC and the typedef)
TYPEDEF = """\
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> te_wmma_acc;
"""
MAC = """\
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
"""
HELPERS = {
    "te_wmma_16x16": """\
__device__ __forceinline__ void te_wmma_16x16(float* c, int ldc, const half* a, int lda,
                                              const half* b, int ldb, int k) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
""",
    "te_wmma_zero_16x16": """\
__device__ __forceinline__ void te_wmma_zero_16x16(float* c, int ldc) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
""",
    "te_wmma_update_16x16": """\
__device__ __forceinline__ void te_wmma_update_16x16(float* c, int ldc, const half* a,
                                                     int lda, const half* b, int ldb, int k) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::load_matrix_sync(fc, c, ldc, nvcuda::wmma::mem_row_major);
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
""",
    "te_wmma_frag_16x16": """\
__device__ __forceinline__ void te_wmma_frag_16x16(te_wmma_acc& fc, const half* a, int lda,
                                                   const half* b, int ldb, int k) {
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
}
""",
    "te_wmma_fill_16x16": """\
__device__ __forceinline__ void te_wmma_fill_16x16(te_wmma_acc& fc) {
  nvcuda::wmma::fill_fragment(fc, 0.0f);
}
""",
    "te_wmma_mma_16x16": """\
__device__ __forceinline__ void te_wmma_mma_16x16(te_wmma_acc& fc, const half* a, int lda,
                                                  const half* b, int ldb, int k) {
  te_wmma_mac_16x16(fc, a, lda, b, ldb, k);
}
""",
    "te_wmma_store_16x16": """\
__device__ __forceinline__ void te_wmma_store_16x16(float* c, int ldc, const te_wmma_acc& fc) {
  nvcuda::wmma::store_matrix_sync(c, fc, ldc, nvcuda::wmma::mem_row_major);
}
""",
}
assert set(HELPERS) == set(HELPER_NAMES)


def helper_text(cuda_text: str) -> str:
    """The typedef, MAC and HELPERS' functions that CUDA C `cuda_text` calls."""
    return TYPEDEF + MAC + "".join(f for name, f in HELPERS.items() if f"{name}(" in cuda_text)


def uses_tensor_cores(cuda_text: str) -> bool:
    """Whether CUDA C `cuda_text` calls one of HELPER's functions or declares fragments."""
    return any(f"{name}(" in cuda_text for name in HELPER_NAMES) or \
        f"{FRAGMENT_TYPE} " in cuda_text


def wmma_matmul_intrin(k: int, accumulator: bool = False):
    """The tensor intrinsic of C[16, 16] (float32) = sum over k < `k` of A[16, k] * B[k, 16]
    (float16, each cast to float32), for a stage computing a matmul that way: tensorize its
    16x16 tile loops, with the reduction inside them (the body), or K split by `k` and the
    outer loop outside them (reset before it, update per chunk: the tile stays where the
    stage stores it, in global or shared memory). Row strides of A, B and C are free
    (multiples of 8 elements, each tile 32-byte aligned: M, N and K multiples of 16 give
    both); the stage must run on exactly one warp per tile (threadIdx.x of extent 32, not
    bound to its loops). With `accumulator`, C is a stage of scope 'wmma.accumulator'
    (cache_write of the matmul, computed at the warp's loop): body, reset and update work
    on its fragments (declared where the stage is allocated, before the chunk loop, so the
    sums stay in registers over K) and wmma_store_intrin stores them to the output."""
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0 or k % TILE:
        raise ComputeError(f"te.wmma_matmul_intrin: k must be a positive multiple of {TILE}, "
                           f"got {k!r}")
    a = api.placeholder((TILE, k), name="a", dtype="float16")
    b = api.placeholder((k, TILE), name="b", dtype="float16")
    r = api.reduce_axis((0, k), name="k")
    c = api.compute((TILE, TILE), lambda i, j: api.sum(
        a[i, r].astype("float32") * b[r, j].astype("float32"), axis=r), name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=f"{t.name}_tile", offset_factor=TILE,
                           strides=[api.var(f"ld{t.name}"), 1],
                           scope=ACC_SCOPE if accumulator and t is c else "") for t in (a, b, c)}

    def parts(ins, outs):
        aa, bb = ins
        (cc,) = outs
        if accumulator:   # the fragment (the code generator gives the tile's fragment)
            def frag(name):
                return call_extern("int32", name, cc.access_ptr("rw"), aa.access_ptr("r"),
                                   aa.strides[0], bb.access_ptr("r"), bb.strides[0], k)
            reset = call_extern("int32", FILL_NAME, cc.access_ptr("w"))
            return frag(FRAG_BODY_NAME), reset, frag(MMA_NAME)

        def mac(name, access):
            return call_extern("int32", name, cc.access_ptr(access), cc.strides[0],
                               aa.access_ptr("r"), aa.strides[0], bb.access_ptr("r"),
                               bb.strides[0], k)
        reset = call_extern("int32", RESET_NAME, cc.access_ptr("w"), cc.strides[0])
        return mac(BODY_NAME, "w"), reset, mac(UPDATE_NAME, "rw")
    return decl_tensor_intrin(c.op, parts, binds=bufs, name=f"wmma_16x16x{k}")


def wmma_store_intrin():
    """The tensor intrinsic copying a 16x16 float32 tile of a 'wmma.accumulator' stage (see
    wmma_matmul_intrin's `accumulator`) to its output in global or shared memory
    (store_matrix_sync): tensorize the copy-out stage of that cache_write at its 16x16 tile
    loops, one warp per tile as for the matmul."""
    acc = api.placeholder((TILE, TILE), name="acc", dtype="float32")
    c = api.compute((TILE, TILE), lambda i, j: acc[i, j], name="c")
    bufs = {acc: decl_buffer(acc.shape, "float32", name="acc_tile", offset_factor=TILE,
                             strides=[api.var("ldacc"), 1], scope=ACC_SCOPE),
            c: decl_buffer(c.shape, "float32", name="c_tile", offset_factor=TILE,
                           strides=[api.var("ldc"), 1])}

    def store(ins, outs):
        (fa,), (cc,) = ins, outs
        return call_extern("int32", STORE_NAME, cc.access_ptr("w"), cc.strides[0],
                           fa.access_ptr("r"))
    return decl_tensor_intrin(c.op, store, binds=bufs, name="wmma_store_16x16")
