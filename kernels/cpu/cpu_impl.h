/* cpu_impl.h — helpers the CPU kernels share (internal to kernels/cpu). */
#ifndef ZZ_CPU_IMPL_H
#define ZZ_CPU_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Eight independent partial sums: the compiler may vectorise them without
 * reassociating one long float chain (which it must not do on its own). */
static inline float zz_dot(const float *a, const float *b, int64_t n) {
  float acc[8] = {0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int u = 0; u < 8; u++) acc[u] += a[d + u] * b[d + u];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; d < n; d++) s += a[d] * b[d];
  return s;
}

/* The epilogue of a linear on columns [c0, c0 + cols) of y [n, ld]: + b[c0 + o]
 * when b, then ReLU when relu. */
static inline void zz_bias_relu_cols(float *y, int64_t n, int64_t ld, int64_t c0, int64_t cols, const float *b,
                                     int relu) {
  for (int64_t i = 0; i < n; i++) {
    float *yi = y + i * ld + c0;
    if (b)
      for (int64_t o = 0; o < cols; o++) yi[o] += b[c0 + o];
    if (relu)
      for (int64_t o = 0; o < cols; o++) yi[o] = yi[o] > 0 ? yi[o] : 0;
  }
}

/* linear_int8.c: the 4/8-bit linear with x in int8 (--cpu-act int8). A stored
 * row of x: zz_xq_row_bytes(in, group) bytes, filled by zz_xq_quantize_row for
 * weights of `bits`; the micro-kernels take such rows as xr and W rows as wr
 * (kc = in, the tile of zz_gemm_micro in linear.c: 4 × 4). */
size_t zz_xq_row_bytes(int64_t in, int group);
void zz_xq_quantize_row(const float *x, int64_t in, int group, int bits, void *rec);
void zz_micro_q4x_c(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group, float tile[4][4]);
void zz_micro_q8x_c(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group, float tile[4][4]);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
void zz_micro_q4x_avx2(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group,
                       float tile[4][4]);
void zz_micro_q8x_avx2(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group,
                       float tile[4][4]);
#endif

/* linear_pack.c: the packed GEMM for many rows (prefill). y[n, out] = x[n, in] ·
 * W[out, in]ᵀ (+ b) (ReLU) for W f32 or (w_bf16) bf16, x rounded to bf16 as it
 * is packed when w_bf16; xp: zz_pk_x_bytes(n, in) of scratch; vector: the AVX2
 * micro-kernel (else the portable one, the same bits). */
typedef struct zz_pool zz_pool;
size_t zz_pk_x_bytes(int64_t n, int64_t in);
void zz_pk_gemm(zz_pool *pool, bool vector, const float *x, int64_t n, int64_t in, const void *w, bool w_bf16,
                const float *b, int64_t out, float *y, int relu, float *xp);

#endif
