"""CUDA's warp matrix functions (mma.h, nvcuda::wmma) for the CUDA emulator's prelude.

On a GPU a fragment spreads over a warp's 32 lanes making each call together; here every
lane holds the whole fragment and does all the work, and lane 0 alone stores (lanes run in
turn: a store by one would reach a tile a later lane still loads). mma_sync accumulates in
float, k in order (tensor cores may round differently). Imports nothing.
"""

WMMA_PRELUDE = """\
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename L> struct te_is_col { enum { value = 0 }; };
template <> struct te_is_col<col_major> { enum { value = 1 }; };
template <typename Use, int M, int N, int K> struct te_shape;
template <int M, int N, int K> struct te_shape<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K> struct te_shape<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K> struct te_shape<accumulator, M, N, K> {
  enum { rows = M, cols = N };
};
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  enum { rows = te_shape<Use, M, N, K>::rows, cols = te_shape<Use, M, N, K>::cols,
         num_elements = rows * cols };
  T x[rows * cols];   /* row-major: element (r, c) at x[r * cols + c] */
};
template <typename F, typename V> static void fill_fragment(F& f, const V& v) {
  for (int e = 0; e < F::num_elements; ++e) f.x[e] = v;
}
template <typename F, typename T>
static void te_load(F& f, const T* p, unsigned ldm, bool col) {
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}
template <typename Use, int M, int N, int K, typename T, typename L>
static void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm) {
  te_load(f, p, ldm, te_is_col<L>::value);
}
template <int M, int N, int K, typename T>
static void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm,
                             layout_t layout) {
  te_load(f, p, ldm, layout == mem_col_major);
}
template <int M, int N, int K, typename T>
static void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                              layout_t layout) {
  typedef fragment<accumulator, M, N, K, T> F;
  if (te_lane() != 0) return;   /* the warp's one store (see the module docstring) */
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * F::cols + c];
}
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
static void mma_sync(fragment<accumulator, M, N, K, TC>& d,
                     const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b,
                     const fragment<accumulator, M, N, K, TC>& c) {
  TC out[M * N];   /* d may be c */
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = (float)c.x[i * N + j];
      for (int k = 0; k < K; ++k) s += (float)a.x[i * K + k] * (float)b.x[k * N + j];
      out[i * N + j] = s;
    }
  for (int e = 0; e < M * N; ++e) d.x[e] = out[e];
}
} }
"""
