/* cpu_impl.h — helpers the CPU kernels share (internal to kernels/cpu). */
#ifndef ZZ_CPU_IMPL_H
#define ZZ_CPU_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zz_dtype.h"
#include "zz_pool.h"

/* A cache line: scratch that a kernel loads a vector at a time starts on one
 * (zz_cpu_line_up), and its size counts the ZZ_CPU_LINE bytes that may skip. */
#define ZZ_CPU_LINE 64
static inline void *zz_cpu_line_up(void *p) {
  return (void *)(((uintptr_t)p + ZZ_CPU_LINE - 1) & ~(uintptr_t)(ZZ_CPU_LINE - 1));
}

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
 * weights of `bits`; zz_xq_gemm then multiplies n such rows (x_row bytes apart)
 * by W [out] rows of w_row bytes on the pool: y[n, out] (+ b) (then ReLU).
 * ZZ_XQ_CHUNK rows of W per pool task; from 4 rows of x on AVX2 (groups of
 * whole 64s) W panels packed to int8 once per block of rows and K, else the
 * panel: ZZ_XQ_NR rows of W unpacked once per group and step for up to
 * ZZ_XQ_MB rows of x. */
#define ZZ_XQ_NR 4
#ifndef ZZ_XQ_MB
#define ZZ_XQ_MB 16
#endif
#define ZZ_XQ_CHUNK 64
size_t zz_xq_row_bytes(int64_t in, int group);
void zz_xq_quantize_row(const float *x, int64_t in, int group, int bits, void *rec);
void zz_xq_gemm(zz_pool *pool, const void *xq, size_t x_row, int64_t n, int64_t in, const void *w, size_t w_row,
                int bits, int group, const float *b, int64_t out, float *y, int relu);

/* linear_pack.c: the packed GEMM for many rows (prefill). y[n, out] = x[n, in] ·
 * W[out, in]ᵀ (+ b) (ReLU) for W f32 or (w_bf16) bf16, x rounded to bf16 as it
 * is packed when w_bf16; xp: zz_pk_x_bytes(n, in) of scratch; vector: the AVX2
 * micro-kernel (else the portable one, the same bits). */
typedef struct zz_pool zz_pool;
size_t zz_pk_x_bytes(int64_t n, int64_t in);
void zz_pk_gemm(zz_pool *pool, bool vector, const float *x, int64_t n, int64_t in, const void *w, bool w_bf16,
                const float *b, int64_t out, float *y, int relu, float *xp);
/* The same product by the row-lane tile (x in lanes of 16 rows, W f32 or
 * (w_bf16) bf16 broadcast from its rows (AVX2) or from pieces widened into L1
 * (AVX-512, by the process's ISA choice); for 16-127 rows): the packed GEMM's
 * bits; xp: zz_pk_rl_x_bytes(n, in) of scratch. false, nothing done, where the
 * tile is not compiled (not x86-64); the caller checks the CPU has AVX2/FMA. */
size_t zz_pk_rl_x_bytes(int64_t n, int64_t in);
bool zz_pk_rl_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, bool w_bf16, const float *b,
                   int64_t out, float *y, int relu, float *xp);
/* The row-lane tile in two steps, for a caller that makes its own f32 W panels
 * (the 4/8-bit linear's widened panels): x (n <= 128 rows, f32) packed once on
 * the pool into xp (zz_pk_rl_x_bytes; false, nothing done, where the tile is not
 * compiled), then per panel, on the calling thread, y[:, 0..out) (rows ldy
 * apart) = x · w[out, in]ᵀ: the bits of zz_pk_rl_gemm on that W. */
bool zz_pk_rl_pack_x(zz_pool *pool, const float *x, int64_t n, int64_t in, float *xp);
void zz_pk_rl_panel(const float *xp, int64_t n, int64_t in, const float *w, int64_t out, float *y, int64_t ldy);

/* linear_amx.c: the bf16 and f32 linears on AMX's tile layout. y[n, out] = x[n,
 * in] · W[out, in]ᵀ (+ b) (ReLU), x packed into xp (zz_amx_x_bytes(n, in, the
 * bytes of a value of w_dt) of scratch), bf16: rounded by round_bf16, for `in`
 * where zz_amx_bf16_fits; amx: on AMX tiles (the caller checks the process may
 * use AMX, zz_cpu_isa_get() == ZZ_CPU_ISA_AMX), else the same packed tiles on
 * vdpbf16ps (zz_cpu_has_bf16). f32 (`in` where zz_amx_f32_fits, AVX-512): the
 * packed tiles on FMA, round_bf16 and amx unused. */
bool zz_amx_bf16_fits(int64_t in);
bool zz_amx_f32_fits(int64_t in);
/* The calling thread's buffer of at least `bytes` for the AMX GEMM's f32 sums
 * between K blocks (kept for the thread's life; the process ends if memory is out). */
float *zz_amx_sums(size_t bytes);
size_t zz_amx_x_bytes(int64_t n, int64_t in, size_t esz);
void zz_amx_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                 int64_t out, float *y, int relu, void *xp,
                 void (*round_bf16)(const float *src, int64_t n, uint16_t *dst), bool amx);

#endif
