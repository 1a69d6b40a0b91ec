/* The read roof of one core: sums a 4096 x 4096 float32 matrix by rows, reading S rows
 * side by side (one 64-byte vector of each row per step), and times memcpy of the same
 * 64 MiB. Evidence for benchmarks/ANALYSIS.md (what "sum >= 3x numpy" would need).
 *
 *   gcc -O3 -march=native benchmarks/read_roof.c -o /tmp/read_roof && /tmp/read_roof
 *
 * Prints the best of 7 runs per row-count (GB/s counts the 64 MiB read once), and memcpy's
 * GB/s counting bytes read plus written, as the suite's copy row does. Needs AVX-512F
 * (-march=native on an AVX-512 host). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 4096, COLS = 4096 };
static float out[ROWS];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* rows r .. r + streams - 1 read in lockstep, one accumulator each */
__attribute__((noinline)) static void sum_rows(const float *x, int streams) {
  for (int r = 0; r < ROWS; r += streams) {
    __m512 acc[32];
    for (int s = 0; s < streams; s++) acc[s] = _mm512_setzero_ps();
    for (int j = 0; j < COLS; j += 16)
      for (int s = 0; s < streams; s++)
        acc[s] = _mm512_add_ps(acc[s], _mm512_load_ps(x + (size_t)(r + s) * COLS + j));
    for (int s = 0; s < streams; s++) out[r + s] = _mm512_reduce_add_ps(acc[s]);
  }
}

int main(void) {
  size_t bytes = (size_t)ROWS * COLS * sizeof(float);
  float *x = aligned_alloc(2 << 20, bytes), *y = aligned_alloc(2 << 20, bytes);
  for (size_t i = 0; i < (size_t)ROWS * COLS; i++) x[i] = (float)(i % 7);
  memset(y, 0, bytes);
  const int streams[] = {1, 2, 4, 8, 16, 32};
  for (int c = 0; c < 6; c++) {
    double best = 1e9;
    for (int t = 0; t < 7; t++) {
      double t0 = now();
      sum_rows(x, streams[c]);
      double d = now() - t0;
      if (d < best) best = d;
    }
    printf("%2d rows side by side: %.3f ms, %.1f GB/s\n", streams[c], best * 1e3,
           bytes / best / 1e9);
  }
  double best = 1e9;
  for (int t = 0; t < 7; t++) {
    double t0 = now();
    memcpy(y, x, bytes);
    double d = now() - t0;
    if (d < best) best = d;
  }
  printf("memcpy: %.3f ms, %.1f GB/s (read + written)\n", best * 1e3, 2.0 * bytes / best / 1e9);
  return out[5] == 12345.0f;
}
