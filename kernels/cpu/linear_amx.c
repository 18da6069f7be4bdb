/*
 * linear_amx.c — the bf16 linear on AMX tiles (Sapphire Rapids and later, ISA
 * "amx" in kernels/cpu/isa.c): y[n, out] = x[n, in] · W[out, in]ᵀ (+ b) (then
 * ReLU) for bf16 W, x rounded to bf16 (round to nearest even, as every bf16
 * path rounds it: the caller's vector rounding).
 *
 * The tiles compute the product W-side first, so that W is read where it lies:
 *   A  16 rows of W (16 outputs × 32 k, 64 bytes a row, rows `in` apart),
 *      loaded straight from the weight, never copied;
 *   B  16 rows of x as tdpbf16ps wants its second operand, pairs of k side by
 *      side: [k/2][16 rows][2], x packed so once per call (zz_amx_pack_x);
 *   C  16 outputs × 16 rows of f32 sums.
 * Eight tiles (zz_amx_cfg_fill): C 0-3 (two output blocks × two row groups),
 * A 4-5, B 6-7; per 32 k two W loads, two x loads and four tdpbf16ps. A pool
 * task takes ZZ_AMX_TASK outputs and every pair of row groups; each pair's sums
 * stay in the C tiles for the whole of K, then go to y (transposed: a C row is
 * one output), then the bias and ReLU.
 *
 * Numerics: tdpbf16ps's own (inputs and results below f32's normal range
 * flushed to zero, its own order of the pairs' sums): not the row-lane tile's
 * bits, within the bound of any f32 summation order (the tests, under an
 * emulated Sapphire Rapids: scripts/isa_emu.sh). Each output is summed by one
 * task in one order, so the thread count changes no bit.
 *
 * Taken (zz_cpu_gemm_amx) from ZZ_AMX_BF16_N rows of x where `in` is a whole
 * number of 32s; not tuned on AMX hardware yet (none in this project's
 * machines so far): the block sizes are the tiles' own.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_cpu_kernels.h"
#include "zz_dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define ZZ_AMX_X86 1
#endif

#define ZZ_AMX_TM 16                /* rows of a tile: outputs (A, C) or pairs of k (B) */
#define ZZ_AMX_KB 32                /* k per tile step: a 64-byte tile row of bf16 */
#define ZZ_AMX_TASK (2 * ZZ_AMX_TM) /* outputs per pool task: two A tiles */
#define ZZ_AMX_RB (2 * ZZ_AMX_TM)   /* rows of x per step: two B tiles */
#define ZZ_AMX_PIECE 256            /* values of a row of x rounded at a time */

bool zz_amx_bf16_fits(int64_t in) { return in > 0 && in % ZZ_AMX_KB == 0; }

/* Rows of x as packed: a whole number of B tile pairs (zero rows past n). */
static int64_t zz_amx_rows(int64_t n) { return (n + ZZ_AMX_RB - 1) / ZZ_AMX_RB * ZZ_AMX_RB; }

size_t zz_amx_x_bytes(int64_t n, int64_t in) { return (size_t)zz_amx_rows(n) * (size_t)in * sizeof(uint16_t); }

typedef struct zz_amx_job {
  const float *x;
  uint16_t *xp;
  const uint16_t *w;
  const float *b;
  float *y;
  int64_t n, in, out;
  int relu;
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst);
} zz_amx_job;

/* x's rows 16g .. +16, rounded to bf16 (the ISA's rounding, a piece at a time)
 * and interleaved into their B tiles' order [in/2][16][2] (group g's block is
 * 16·in values): row r's pair k/2 is the 32-bit word k/2 · 16 + r; rows past n zero. */
static void zz_amx_pack_x(void *arg, int64_t g) {
  const zz_amx_job *j = arg;
  char *d = (char *)(j->xp + g * ZZ_AMX_TM * j->in);
  uint16_t piece[ZZ_AMX_PIECE];
  for (int r = 0; r < ZZ_AMX_TM; r++) {
    int64_t i = g * ZZ_AMX_TM + r;
    for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_AMX_PIECE) {
      int64_t len = j->in - k0 < ZZ_AMX_PIECE ? j->in - k0 : ZZ_AMX_PIECE; /* even: in is a whole number of 32s */
      if (i < j->n) j->round_bf16(j->x + i * j->in + k0, len, piece);
      else
        memset(piece, 0, (size_t)len * sizeof piece[0]);
      for (int64_t p = 0; p < len / 2; p++)
        memcpy(d + ((k0 / 2 + p) * ZZ_AMX_TM + r) * 2 * sizeof(uint16_t), piece + 2 * p, 2 * sizeof(uint16_t));
    }
  }
}

/* One C tile stored in c ([16 outputs][16 rows]) into y: outputs c0 .. +m, rows r0 .. (below n). */
static void zz_amx_store(const zz_amx_job *j, float c[ZZ_AMX_TM][ZZ_AMX_TM], int64_t c0, int m, int64_t r0) {
  for (int r = 0; r < ZZ_AMX_TM && r0 + r < j->n; r++) {
    float *yr = j->y + (r0 + r) * j->out + c0;
    for (int o = 0; o < m; o++) yr[o] = c[o][r];
  }
}

#ifdef ZZ_AMX_X86
/* The B tiles of row groups g, g + 1 at k (a multiple of 32): pair k/2, 64 bytes a pair. */
static const char *zz_amx_b(const zz_amx_job *j, int64_t g, int64_t k) {
  return (const char *)(j->xp + g * ZZ_AMX_TM * j->in) + k / 2 * ZZ_AMX_TM * 2 * sizeof(uint16_t);
}

/* One task: outputs t·32 .. +32 (m0 in A tile 4, m1 in 5; the last task's may be
 * fewer, its tiles configured with as many rows), every pair of row groups. */
__attribute__((target("amx-tile,amx-bf16"))) static void zz_amx_task(void *arg, int64_t t) {
  const zz_amx_job *j = arg;
  int64_t c0 = t * ZZ_AMX_TASK, m = j->out - c0 < ZZ_AMX_TASK ? j->out - c0 : ZZ_AMX_TASK;
  int m0 = m < ZZ_AMX_TM ? (int)m : ZZ_AMX_TM, m1 = (int)m - m0;
  zz_amx_cfg cfg;
  zz_amx_cfg_fill(&cfg, m0, m1);
  _tile_loadconfig(&cfg);
  size_t lda = (size_t)j->in * sizeof(uint16_t);
  const char *a0 = (const char *)(j->w + c0 * j->in), *a1 = a0 + ZZ_AMX_TM * lda;
  const size_t ldb = ZZ_AMX_TM * 2 * sizeof(uint16_t);
  _Alignas(64) float c[ZZ_AMX_TM][ZZ_AMX_TM];
  for (int64_t g = 0; g < zz_amx_rows(j->n) / ZZ_AMX_TM; g += 2) {
    _tile_zero(0);
    _tile_zero(1);
    if (m1) {
      _tile_zero(2);
      _tile_zero(3);
    }
    for (int64_t k = 0; k < j->in; k += ZZ_AMX_KB) {
      _tile_loadd(4, a0 + k * sizeof(uint16_t), lda);
      if (m1) _tile_loadd(5, a1 + k * sizeof(uint16_t), lda);
      _tile_loadd(6, zz_amx_b(j, g, k), ldb);
      _tile_loadd(7, zz_amx_b(j, g + 1, k), ldb);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if (m1) {
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    /* tile stores take constant tile numbers: one line each */
    _tile_stored(0, c, sizeof c[0]);
    zz_amx_store(j, c, c0, m0, g * ZZ_AMX_TM);
    _tile_stored(1, c, sizeof c[0]);
    zz_amx_store(j, c, c0, m0, (g + 1) * ZZ_AMX_TM);
    if (m1) {
      _tile_stored(2, c, sizeof c[0]);
      zz_amx_store(j, c, c0 + ZZ_AMX_TM, m1, g * ZZ_AMX_TM);
      _tile_stored(3, c, sizeof c[0]);
      zz_amx_store(j, c, c0 + ZZ_AMX_TM, m1, (g + 1) * ZZ_AMX_TM);
    }
  }
  _tile_release();
  zz_bias_relu_cols(j->y, j->n, j->out, c0, m, j->b, j->relu);
}
#endif

void zz_amx_bf16_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const uint16_t *w, const float *b,
                      int64_t out, float *y, int relu, void *xp,
                      void (*round_bf16)(const float *src, int64_t n, uint16_t *dst)) {
#ifdef ZZ_AMX_X86
  zz_amx_job j = {
      .x = x, .xp = xp, .w = w, .b = b, .y = y, .n = n, .in = in, .out = out, .relu = relu, .round_bf16 = round_bf16};
  zz_pool_run(pool, zz_amx_pack_x, &j, zz_amx_rows(n) / ZZ_AMX_TM);
  zz_pool_run(pool, zz_amx_task, &j, (out + ZZ_AMX_TASK - 1) / ZZ_AMX_TASK);
#else
  (void)pool, (void)x, (void)n, (void)in, (void)w, (void)b, (void)out, (void)y, (void)relu, (void)xp, (void)round_bf16;
#endif
}
