/*
 * linear.c — the CPU device's one linear driver: y[n, out] = x[n, in] · W[out, in]ᵀ
 * (+ b) (then ReLU) for W in f32, bf16 or group-wise 4-bit (Q4), W in its
 * natural row-major layout, never repacked and never widened whole.
 *
 * Why one driver: the walk over W (chunks of output rows over the pool, K
 * blocks, MR × NR register tiles) is the same for every element type; only the
 * micro-kernel that turns a tile of rows into dot products differs (ggml's
 * vec_dot per type). Per dtype:
 *   f32   own micro-kernel for n <= ZZ_GEMM_SMALL_M (AVX-512; AVX2: zz_dot's
 *         order, the portable bits); from ZZ_F32_LANE_N below ZZ_F32_SGEMM_N
 *         rows bf16's row-lane tile with an f32 W load (linear_pack.c, one FMA
 *         chain per output; AVX2 and AVX-512);
 *         from ZZ_F32_SGEMM_N rows on AVX-512 (`in` a multiple of 16) AMX's
 *         packed tiles on FMA (linear_amx.c, zz_fp_task: the same chain);
 *         else OpenBLAS sgemm in shape-only tiles on the pool (zz_cpu_gemm_own
 *         and zz_cpu_gemm_tiles are the rules);
 *   bf16  x rounded to bf16 once per call, then the own micro-kernel: vdpbf16ps
 *         (avx512_bf16), or bf16 widened to f32 by a shift in registers and FMA
 *         (AVX2; the product of two bf16 is exact in f32, so FMA and the portable
 *         multiply-then-add give the same bits; AVX-512 without vdpbf16ps: its
 *         zmm form, two rows a zmm, one tile of 3-8 rows, x's pairs widened
 *         once per call); on AVX2 at 9-15 rows the wide
 *         tiles (zz_gemm_chunk_wide: x and pieces of W widened once, the same
 *         bits), and without vdpbf16ps from ZZ_BF16_PANEL_N (16) rows (AVX-512:
 *         ZZ_BF16_PANEL5_N, 9) one FMA
 *         chain per output (linear_pack.c: the row-lane tile below 128 rows on
 *         AVX2 and AVX-512 (there W widened once per piece into L1, zmm
 *         lanes), the packed GEMM's outer-product tiles from 128 and portable);
 *         under ISA amx from ZZ_AMX_BF16_N rows AMX tiles (linear_amx.c,
 *         tdpbf16ps's order; zz_cpu_gemm_amx is the rule), with vdpbf16ps
 *         and no AMX from ZZ_BF16_TILE_N rows the same packed tiles in zmm
 *         registers (zz_dp_task, vdpbf16ps's order; zz_cpu_gemm_tiles);
 *   Q4    (4 or 8 bits) for n <= ZZ_Q_SMALL_N (decoding) the fused
 *         micro-kernel: each value widened in registers as min + q · step (multiply, then add,
 *         as zz_q_dequantize rounds it) and multiplied by x there, the dot
 *         summed in the order of zz_dot (8 lanes over k mod 8, the same tree,
 *         the tail last), so it gives the bits of dequantize-then-zz_dot;
 *         above, or without a vector ISA, panels of output rows dequantized
 *         into a thread's buffer and multiplied (dots, or as f32 W at that n:
 *         the row-lane tile where zz_f32_lane, else a single-threaded sgemm).
 * Every path's tiles are a function of the shape alone, never of the thread
 * count: each output's sum is formed by one task in one order, so --threads
 * and an mpirun rank's smaller share never change a bit (docs/cpu.md).
 *
 * The AVX-512 micro-kernels are compiled with target attributes and taken when
 * the process's ISA choice (kernels/cpu/isa.c, ZZ_CPU_ISA) allows; AVX2 ones
 * likewise; portable C everywhere else and as the reference.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

#define ZZ_MR 4               /* rows of x per micro-tile */
#define ZZ_MR8 8              /* ... the most any micro-tile takes (bf16 on AVX-512 without vdpbf16ps) */
#define ZZ_NR 4               /* rows of W per micro-tile */
#define ZZ_GEMM_KC_BYTES 4096 /* K block: bytes of one f32/bf16 W row (a 4-row panel is 16 KiB of L1) */
#define ZZ_GEMM_CHUNK 64      /* W rows per pool task */
#define ZZ_GEMM_MC 128        /* rows of x per block: its K block (128 × 4 KiB) stays in L2 */
/* The limit of the f32 dot kernels (zz_micro_f32_avx2: 8 ymm lanes, a 2 × 4
 * register tile, multiply then add; zz_micro_f32_avx512: a 4 × 4 tile of zmm
 * FMA): the AVX2 one beat sgemm's tiles at 1 and 8 rows of x and lost from 16
 * (bench/cpu_gemm_bench.c, f32 against f32tiles; docs/cpu.md); the AVX-512 one
 * ran up to 64 rows until the row-lane tile's zmm form beat it 1.0-1.65x at
 * 16-127 rows (a Cascade Lake-class Xeon; docs/cpu.md "The row-lane tile on
 * AVX-512"; not measured on CPUs with avx512_bf16). */
#define ZZ_GEMM_SMALL_M 8
/* Up to this many rows of x (decode), each W panel's K blocks run back to back
 * (zz_gemm_chunk): x's rows stay in L1/L2 and W streams row by row. */
#define ZZ_GEMM_STREAM_N 8
/* bf16 on AVX2: above this many rows of x (up to ZZ_BF16_PANEL_N), the wide path (zz_gemm_chunk_wide):
 * x widened to f32 once per call, each piece of a W panel widened once for all
 * rows of a block (the same values and sums: the same bits). */
#ifndef ZZ_BF16_WIDEN_N
#define ZZ_BF16_WIDEN_N 8
#endif
#define ZZ_MR_PAIRS 3 /* the fewest rows bf16's pairs tile takes (AVX-512 without vdpbf16ps; 1-2: AVX2's) */
_Static_assert(ZZ_MR8 <= ZZ_BF16_WIDEN_N, "zz_cpu_gemm_scratch sizes x's pairs up to ZZ_BF16_WIDEN_N rows");
#define ZZ_WIDE_MR 3 /* rows of x per register tile of the wide path */
#ifndef ZZ_WIDE_KS
#define ZZ_WIDE_KS 512 /* its K piece: a widened 4-row W piece is 8 KiB, kept in L1 */
#endif
/* floats past each row of the wide path's f32 x and widened W: rows a multiple
 * of 4 KiB apart put every load of a step into the same L1 bank and set */
#ifndef ZZ_WIDE_PAD
#define ZZ_WIDE_PAD 16
#endif
#define ZZ_WIDE_LD (ZZ_WIDE_KS + ZZ_WIDE_PAD) /* row stride of the widened W piece */
/* its rows of x per block: their f32 K block (ZZ_WIDE_MC × 8 KiB) is read again
 * for each W panel of a chunk, so it must stay in L2 (512 KiB on Zen 3) */
#ifndef ZZ_WIDE_MC
#define ZZ_WIDE_MC 36
#endif
/* bf16 without a bf16 dot instruction (AVX2, portable), from this many rows of x
 * (decode at batch >= 16, prefill): one FMA chain per output along K
 * (linear_pack.c), by the row-lane tile below ZZ_BF16_PACK_N rows (AVX2: x in
 * 16-row lanes, W broadcast from its bf16 rows, never copied) and by the packed
 * GEMM from there (x and W copied into the order of a 6 x 16 outer-product
 * tile; portable at every n from here). The dot kernels' tiles read each x and
 * W value for 3-4 products and stayed near 0.45 of the FMA peak here. Other bits
 * than the dot kernels, the same on every thread count, at every n from here on
 * and for AVX2 and portable alike. Below this (decode at batch < 16) the dot
 * kernels' bits hold at every n, which an outer-product tile cannot keep.
 * Measured (docs/cpu.md, "The row-lane tile"): at 16-64 rows of the LLaMA-7B
 * shapes 1.1-1.9x the wide path's rate (0.64-0.84 of the FMA peak, one core);
 * on AVX2 9-15 rows keep the wide path and the dot bits (AVX-512: below). */
#ifndef ZZ_BF16_PANEL_N
#define ZZ_BF16_PANEL_N 16
#endif
/* The same on AVX-512 without vdpbf16ps, from the first row count past the dot
 * kernels' (ZZ_BF16_WIDEN_N): the row-lane tile's zmm form ran 1.8-2.7x the
 * wide tiles at 9-15 rows of the LLaMA-7B shapes, even with most of its 16
 * lanes idle at 9 (bench/cpu_gemm_bench bf16, a Cascade Lake-class Xeon;
 * docs/cpu.md "bf16 at 9-15 rows"); so the wide path runs on AVX2 alone, and
 * on AVX-512 a row's bits from 9 rows on do not depend on its batch. */
#define ZZ_BF16_PANEL5_N (ZZ_BF16_WIDEN_N + 1)
/* f32 on AVX2 and AVX-512 from ZZ_F32_LANE_N
 * rows up to ZZ_F32_SGEMM_N: the row-lane tile of linear_pack.c (x in 16-row
 * lanes, W broadcast from its f32 rows as they are; bf16's tile with another
 * load), one FMA chain per output, so a row's bits do not depend on the rows
 * beside it in that range. Measured (bench/cpu_gemm_bench.c, f32 against
 * f32tiles; docs/cpu.md "GEMM"): 1.5-2x sgemm's tiles at 9-64 rows, about even
 * at 128, behind from 256 (down 11008 -> 4096: 0.75-0.85), so sgemm tiles from
 * there, where packing W pays for many rows. The dot kernel keeps 1-8 rows
 * (decode: the portable bits; the tile was 0.8x it at 4 rows). */
#define ZZ_F32_LANE_N (ZZ_GEMM_SMALL_M + 1)
#ifndef ZZ_F32_SGEMM_N
#define ZZ_F32_SGEMM_N 128
#endif
/* AVX2: from this many rows the packed GEMM (W widened once per call, reused
 * by every row), below it the row-lane tile (W read once per 128 rows).
 * AVX-512 (without vdpbf16ps) keeps its row-lane tile at every n: on a
 * Cascade Lake-class Xeon it ran 1.4-1.8x the packed GEMM's AVX2 tiles at 128
 * and 512 rows (bench/cpu_gemm_bench.c, docs/cpu.md "The row-lane tile"). */
#ifndef ZZ_BF16_PACK_N
#define ZZ_BF16_PACK_N 128
#endif
/* bf16 under ISA amx (linear_amx.c) from this many rows of x, where `in` is a
 * whole number of the tiles' 32; below it, and for other `in`, vdpbf16ps's
 * kernel. 16: one full A tile. On a Sapphire Rapids guest (cpu_gemm_bench,
 * LLaMA-7B's shapes, W cold) the tiles read W at 0.3-0.9 of the read bandwidth
 * at 16 and 24 rows where vdpbf16ps's kernel read it at 0.16-0.39; with W in L3
 * they ran 2x (16 rows) and 1.4x (8 rows) its GFLOP per CPU-second. Below 16 the
 * second half of the tile pair is all padding. */
#ifndef ZZ_AMX_BF16_N
#define ZZ_AMX_BF16_N 16
#endif
/* bf16 with vdpbf16ps (no AMX) from this many rows of x, where `in` is a whole
 * number of 32s: AMX's packed tiles multiplied in zmm registers (linear_amx.c,
 * zz_dp_task), below it and for other `in` the dot kernel. On Zen 5 (2 threads,
 * cpu_gemm_bench opt350m, the same run) the tiles ran 0.66-1.05 of vdpbf16ps's
 * peak at 512 and 2048 rows where the dot kernel ran 0.46-0.63; at 16 rows they
 * were no faster (W packed for few rows), so decode at batch 16 keeps the dot
 * kernel. */
#ifndef ZZ_BF16_TILE_N
#define ZZ_BF16_TILE_N 32
#endif
/* Q4: the fused micro-kernel up to this many rows of x; dequantized panels above. */
#define ZZ_Q_SMALL_N 16
/* Q4 panels: output rows per panel (a panel of a 4096-wide matrix is 256 KiB of
 * f32, about what one core's L2 keeps while the GEMM reads it); 4 × that for
 * sgemm panels. */
#define ZZ_Q_PANEL 16
/* From this many rows of x on, sgemm panels as wide as ZZ_Q_WIDE_BYTES of
 * widened weights allow (a multiple of 64 outputs, at most 512): each sgemm
 * packs all of x again, which at prefill (x of thousands of rows) cost more
 * than the multiplication with 64-output panels. The width follows the shape
 * alone; the buffer is each pool thread's, kept for its life. */
#define ZZ_Q_WIDE_N 256
#define ZZ_Q_WIDE_BYTES ((int64_t)8 << 20)
/* sgemm column tiles of this many outputs for fewer than ZZ_GEMM_BY_ROWS rows
 * (a 512-wide w tile of a 2048-wide layer is 4 MiB, so the copy of x each tile
 * packs stays a few percent of its work); from ZZ_GEMM_BY_ROWS rows on, tiles of
 * ZZ_GEMM_ROW_TILE rows, each zz_cpu_linear (the reference) packing all of w. */
#define ZZ_GEMM_COL_TILE 512
#define ZZ_GEMM_BY_ROWS 1024
#define ZZ_GEMM_ROW_TILE 512

/* tile[r][c] = Σ_{k<kc} x_r[k] · w_c[k] for r < mr (rows past mr may be
 * computed on repeated pointers or skipped); mr is at most the job's tile_rows
 * (ZZ_MR; ZZ_MR8 for the one kernel that takes more); group: Q4's group size
 * (else 0). */
typedef void (*zz_gemm_micro)(const void *const xr[ZZ_MR8], const void *const wr[ZZ_NR], int64_t kc, int mr, int group,
                              float tile[ZZ_MR8][ZZ_NR]);

/* The same for bf16 with x's rows also widened two to a vector (zz_xpairs_of):
 * xp the tile's first pair at the K block's first element, pairs pld floats
 * apart; xr the rows in bf16, for the K block's tail past its last 8. */
typedef void (*zz_gemm_micro_pairs)(const float *xp, int64_t pld, const void *const xr[ZZ_MR8],
                                    const void *const wr[ZZ_NR], int64_t kc, int mr, float tile[ZZ_MR8][ZZ_NR]);

typedef struct zz_gemm_job {
  const char *x;  /* [n, in]: f32, or bf16 (the rounded copy) */
  const char *w;  /* [out, in]: f32, bf16 or Q4 rows */
  const float *b; /* [out] or NULL */
  float *y;       /* [n, out] */
  int64_t n, in, out;
  int relu, group;
  size_t xsz, wsz;     /* bytes of one element along K of x, of w (Q4: 0, one K block) */
  size_t x_row, w_row; /* bytes of one row of x, of w */
  int64_t kc;          /* K block in elements */
  zz_gemm_micro micro;
  int tile_rows; /* rows of x per call of micro: ZZ_MR, or ZZ_MR8 for micro_pairs */
  /* NULL, or bf16's tile of 3-8 rows on x's widened pairs (xpair, pairs
   * xpair_ld floats apart), which then runs in place of micro */
  zz_gemm_micro_pairs micro_pairs;
  const float *xpair;
  int64_t xpair_ld;
  /* NULL, or the wide path (bf16 on AVX2, many rows; x is then f32): widens
   * ZZ_NR rows of a K piece of W into f32 (row stride ld), and the register
   * tile that multiplies them (zz_bf16_wide_tile) */
  void (*widen_w)(const void *const wr[ZZ_NR], int64_t kc, float *dst, int64_t ld);
  void (*wide_tile)(const float *const x[ZZ_WIDE_MR], int rows, const float *w, int64_t ld, int64_t len, float *acc,
                    bool first, bool last, float sum[ZZ_WIDE_MR][ZZ_NR]);
} zz_gemm_job;

/* ---------------------------------------------------------------- portable micro-kernels */

static void zz_micro_f32_c(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr, int group,
                           float tile[ZZ_MR][ZZ_NR]) {
  (void)group;
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < ZZ_NR; c++) tile[r][c] = zz_dot(xr[r], wr[c], kc);
}

/* The tree zz_dot reduces its 8 partial sums with. */
static inline float zz_tree8(const float a[8]) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* s plus the bf16 dot's tail past its 8 lanes, a[t] · b[t] for k <= t < kc in
 * order: every bf16 kernel's last elements (a product of two bf16 is exact in
 * f32, so contracting it into an FMA changes no bit). */
static inline float zz_bf16_tail(const uint16_t *a, const uint16_t *b, int64_t k, int64_t kc, float s) {
  for (; k < kc; k++) s += zz_bf16_to_f32(a[k]) * zz_bf16_to_f32(b[k]);
  return s;
}

static void zz_micro_bf16_c(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr, int group,
                            float tile[ZZ_MR][ZZ_NR]) {
  (void)group;
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < ZZ_NR; c++) {
      const uint16_t *a = xr[r], *b = wr[c];
      float acc[8] = {0};
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8)
        for (int u = 0; u < 8; u++) acc[u] += zz_bf16_to_f32(a[k + u]) * zz_bf16_to_f32(b[k + u]);
      tile[r][c] = zz_bf16_tail(a, b, k, kc, zz_tree8(acc));
    }
}


/* s plus zz_dot's tail of one output: x[k] times W's element k (zz_q_at, as
 * zz_q_dequantize widens it) for k0 <= k < kc, each product rounded before its
 * add, as the dot's tail after its 8 lanes: the fused kernels' last elements
 * past a whole 8. Compiled for the baseline ISA, where nothing contracts the
 * multiply and add; never inlined, since inside an AVX-512 kernel GCC would
 * make them one FMA. */
#if defined(__GNUC__) || defined(__clang__)
#define ZZ_NOINLINE __attribute__((noinline))
#else
#define ZZ_NOINLINE
#endif
ZZ_NOINLINE static float zz_q_tail(const float *x, const void *w, zz_qfmt f, int64_t k0, int64_t kc, float s) {
  for (int64_t k = k0; k < kc; k++) s += x[k] * zz_q_at(f, w, k);
  return s;
}

/* ---------------------------------------------------------------- x86 micro-kernels */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZZ_GEMM_X86 1
#include <immintrin.h>

#define ZZ_AVX512 __attribute__((target("avx512f")))
#define ZZ_AVX512BW __attribute__((target("avx512f,avx512bw,avx512dq")))
#define ZZ_AVX512BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
/* no "fma": the Q4 kernels must round the widening's product and sum apart (as
 * zz_q_dequantize and zz_dot do), so the compiler may not contract them */
#define ZZ_AVX2 __attribute__((target("avx2")))
#define ZZ_AVX2FMA __attribute__((target("avx2,fma")))

/* Decode reads each W value once: the tile fetches the next panel's rows (the
 * 4 rows after these, a row's bytes apart: wr[1] - wr[0], 0 in a last panel
 * of repeated rows) at the place it reads now, into L2, one line per row per
 * step, so each row's stream is in flight a panel ahead and no 4 KiB page
 * starts cold (the hardware prefetcher stops at page ends; 4 rows of 8-22 KiB
 * start every panel). In K-outer order (more rows of x) the next panel's same
 * K block is also what comes next. */
#define ZZ_PF_NEXT_PANEL(wr, off)                                                                                      \
  do {                                                                                                                 \
    const char *nx = (const char *)(wr)[0] + 4 * ((const char *)(wr)[1] - (const char *)(wr)[0]) + (off);              \
    const size_t st = (size_t)((const char *)(wr)[1] - (const char *)(wr)[0]);                                         \
    for (int c = 0; c < ZZ_NR; c++) _mm_prefetch(nx + c * st, _MM_HINT_T1);                                            \
  } while (0)

/* ROWS (1-4, a constant after inlining) rows of x against the tile's 4 W rows:
 * only the rows asked for are multiplied (a decode step of 1 row did 4x the
 * FMAs on repeated rows before); each output's chain is the same. */
ZZ_AVX512 static inline __attribute__((always_inline)) void zz_f32_avx512_rows(const void *const xr[ZZ_MR],
                                                                               const void *const wr[ZZ_NR], int64_t kc,
                                                                               const int ROWS,
                                                                               float tile[ZZ_MR][ZZ_NR]) {
  const float *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
  __m512 acc[ZZ_MR][ZZ_NR];
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
#define ZZ_F32_STEP(LOADX, LOADW)                                                                                      \
  do {                                                                                                                 \
    __m512 a[ZZ_MR], b[ZZ_NR] = {LOADW(w0), LOADW(w1), LOADW(w2), LOADW(w3)};                                          \
    for (int r = 0; r < ROWS; r++) a[r] = LOADX((const float *)xr[r]);                                                 \
    for (int r = 0; r < ROWS; r++)                                                                                     \
      for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm512_fmadd_ps(a[r], b[c], acc[r][c]);                              \
  } while (0)
#define ZZ_LD(p) _mm512_loadu_ps((p) + k)
#define ZZ_LDM(p) _mm512_maskz_loadu_ps(m, (p) + k)
  for (; k + 16 <= kc; k += 16) {
    ZZ_PF_NEXT_PANEL(wr, k * sizeof(float));
    ZZ_F32_STEP(ZZ_LD, ZZ_LD);
  }
  if (k < kc) {
    __mmask16 m = (__mmask16)((1u << (kc - k)) - 1);
    ZZ_F32_STEP(ZZ_LDM, ZZ_LDM);
  }
#undef ZZ_LD
#undef ZZ_LDM
#undef ZZ_F32_STEP
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < ZZ_NR; c++) tile[r][c] = _mm512_reduce_add_ps(acc[r][c]);
}

ZZ_AVX512 static void zz_micro_f32_avx512(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr,
                                          int group, float tile[ZZ_MR][ZZ_NR]) {
  (void)group;
  if (mr == 1) zz_f32_avx512_rows(xr, wr, kc, 1, tile);
  else if (mr == 2)
    zz_f32_avx512_rows(xr, wr, kc, 2, tile);
  else if (mr == 3)
    zz_f32_avx512_rows(xr, wr, kc, 3, tile);
  else
    zz_f32_avx512_rows(xr, wr, kc, 4, tile);
}

/* The same for bf16 x and W: 32 bf16 per vector, vdpbf16ps adds the two
 * products of each lane's pair. */
ZZ_AVX512BF16 static inline __attribute__((always_inline)) void zz_bf16_avx512_rows(const void *const xr[ZZ_MR],
                                                                                    const void *const wr[ZZ_NR],
                                                                                    int64_t kc, const int ROWS,
                                                                                    float tile[ZZ_MR][ZZ_NR]) {
  const uint16_t *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
  __m512 acc[ZZ_MR][ZZ_NR];
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
#define ZZ_BF16_STEP(LOAD)                                                                                             \
  do {                                                                                                                 \
    __m512bh a[ZZ_MR], b[ZZ_NR] = {(__m512bh)LOAD(w0), (__m512bh)LOAD(w1), (__m512bh)LOAD(w2), (__m512bh)LOAD(w3)};    \
    for (int r = 0; r < ROWS; r++) a[r] = (__m512bh)LOAD((const uint16_t *)xr[r]);                                     \
    for (int r = 0; r < ROWS; r++)                                                                                     \
      for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a[r], b[c]);                             \
  } while (0)
#define ZZ_LD(p) _mm512_loadu_si512((const void *)((p) + k))
#define ZZ_LDM(p) _mm512_maskz_loadu_epi16(m, (p) + k)
  for (; k + 32 <= kc; k += 32) {
    ZZ_PF_NEXT_PANEL(wr, k * sizeof(uint16_t));
    ZZ_BF16_STEP(ZZ_LD);
  }
  if (k < kc) {
    __mmask32 m = (__mmask32)((1ull << (kc - k)) - 1);
    ZZ_BF16_STEP(ZZ_LDM);
  }
#undef ZZ_LD
#undef ZZ_LDM
#undef ZZ_BF16_STEP
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < ZZ_NR; c++) tile[r][c] = _mm512_reduce_add_ps(acc[r][c]);
}

ZZ_AVX512BF16 static void zz_micro_bf16_avx512(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc,
                                               int mr, int group, float tile[ZZ_MR][ZZ_NR]) {
  (void)group;
  if (mr == 1) zz_bf16_avx512_rows(xr, wr, kc, 1, tile);
  else if (mr == 2)
    zz_bf16_avx512_rows(xr, wr, kc, 2, tile);
  else if (mr == 3)
    zz_bf16_avx512_rows(xr, wr, kc, 3, tile);
  else
    zz_bf16_avx512_rows(xr, wr, kc, 4, tile);
}

/* dst[i] = bf16(src[i]), round to nearest even (vcvtneps2bf16), as zz_f32_to_bf16 */
ZZ_AVX512BF16 static void zz_round_bf16_avx512(const float *src, int64_t n, uint16_t *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)h);
  }
  for (; i < n; i++) dst[i] = zz_f32_to_bf16(src[i]);
}

/* ---- f32 on AVX2: zz_dot's order, hence zz_micro_f32_c's bits
 *
 * Lane u of each ymm accumulator sums the products of k = u mod 8, each product
 * rounded before its add (mul, then add: compiled without "fma", so nothing
 * contracts them), reduced by zz_tree8's tree, the k mod 8 tail added last in
 * scalar: zz_dot step for step. Unlike the AVX-512 kernel (FMA, 16 lanes) the
 * vector path then gives the portable kernel's bits, so ZZ_CPU_ISA=portable and
 * avx2 decode the same tokens. On Zen 3 the cost is nil: multiplies and adds
 * issue on separate pipes (2 + 2 a cycle), the FMA peak's rate; where they
 * share the FMA ports (Intel) the compute-bound end (n near the limit) would
 * pay up to 2x, decode at small n is bound by reading W either way. */

/* rows (1 or 2) rows of x against the tile's 4 W rows: 8 accumulators, 2 x and
 * 1 W register; each step 2 + 4 loads for 8 multiply-adds */
ZZ_AVX2 static inline __attribute__((always_inline)) void zz_f32_avx2_rows(const float *const x[2],
                                                                           const void *const wr[ZZ_NR], int64_t kc,
                                                                           const int rows, float out[2][ZZ_NR]) {
  const float *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
  __m256 acc[2][ZZ_NR];
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    if (k % 16 == 0) ZZ_PF_NEXT_PANEL(wr, k * sizeof(float)); /* a line a row */
    __m256 a[2];
    for (int r = 0; r < rows; r++) a[r] = _mm256_loadu_ps(x[r] + k);
    const __m256 b[ZZ_NR] = {_mm256_loadu_ps(w0 + k), _mm256_loadu_ps(w1 + k), _mm256_loadu_ps(w2 + k),
                             _mm256_loadu_ps(w3 + k)};
    for (int c = 0; c < ZZ_NR; c++)
      for (int r = 0; r < rows; r++) acc[r][c] = _mm256_add_ps(acc[r][c], _mm256_mul_ps(a[r], b[c]));
  }
  for (int r = 0; r < rows; r++) {
    /* zz_tree8 of the 4 accumulators at once: hadd pairs lanes (0,1) (2,3) of
     * each 128-bit half, the second hadd those pairs, the halves added last
     * (a scalar tree per output cost a fifth of a 1024-element K block) */
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[r][0], acc[r][1]), _mm256_hadd_ps(acc[r][2], acc[r][3]));
    _mm_storeu_ps(out[r], _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int64_t t = k; t < kc; t++)
      for (int c = 0; c < ZZ_NR; c++) out[r][c] += x[r][t] * ((const float *)wr[c])[t];
  }
}

/* An AVX2 micro-tile of one element type: its x rows in pairs (an odd last row
 * alone) through that type's always-inlined rows kernel, `rows` a constant at
 * each call so each count gets its own registers. */
#define ZZ_AVX2_MICRO_PAIRS(name, attr, xt, rows_fn)                                                                   \
  attr static void name(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr, int group,       \
                        float tile[ZZ_MR][ZZ_NR]) {                                                                    \
    (void)group;                                                                                                       \
    for (int r0 = 0; r0 < mr; r0 += 2) {                                                                               \
      const xt *x[2] = {xr[r0], xr[r0 + 1 < mr ? r0 + 1 : r0]};                                                        \
      float out[2][ZZ_NR];                                                                                             \
      if (mr - r0 >= 2) rows_fn(x, wr, kc, 2, out);                                                                    \
      else                                                                                                             \
        rows_fn(x, wr, kc, 1, out);                                                                                    \
      for (int r = 0; r < 2 && r0 + r < mr; r++)                                                                       \
        for (int c = 0; c < ZZ_NR; c++) tile[r0 + r][c] = out[r][c];                                                   \
    }                                                                                                                  \
  }

ZZ_AVX2_MICRO_PAIRS(zz_micro_f32_avx2, ZZ_AVX2, float, zz_f32_avx2_rows)

/* ---- bf16 on AVX2: widened by a shift in registers, FMA in the portable order */

ZZ_AVX2FMA static inline __m256 zz_bf16x8(const uint16_t *p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* rows (1 or 2) rows of x against the tile's 4 W rows (bf16, widened in registers) */
ZZ_AVX2FMA static inline __attribute__((always_inline)) void zz_bf16_avx2_rows(const uint16_t *const x[2],
                                                                               const void *const wr[ZZ_NR], int64_t kc,
                                                                               const int rows, float out[2][ZZ_NR]) {
  __m256 acc[2][ZZ_NR];
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < ZZ_NR; c++) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    if (k % 32 == 0) ZZ_PF_NEXT_PANEL(wr, k * sizeof(uint16_t)); /* a line a row */
    __m256 a[2];
    for (int r = 0; r < rows; r++) a[r] = zz_bf16x8(x[r] + k);
    for (int c = 0; c < ZZ_NR; c++) {
      __m256 b = zz_bf16x8((const uint16_t *)wr[c] + k);
      for (int r = 0; r < rows; r++) acc[r][c] = _mm256_fmadd_ps(a[r], b, acc[r][c]);
    }
  }
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < ZZ_NR; c++) {
      float l[8];
      _mm256_storeu_ps(l, acc[r][c]);
      out[r][c] = zz_bf16_tail(x[r], wr[c], k, kc, zz_tree8(l));
    }
}

ZZ_AVX2_MICRO_PAIRS(zz_micro_bf16_avx2, ZZ_AVX2FMA, uint16_t, zz_bf16_avx2_rows)

/* The byte shuffle that widens 8 bf16 values broadcast to every 128-bit lane
 * into [v0..v7 | v0..v7] as f32 (each value into a lane's upper half, its lower
 * half zero): lanes 0 and 2 take values 0-3, lanes 1 and 3 values 4-7. */
static const int8_t zz_bf16_dup8_idx[64] __attribute__((aligned(64))) = {
    -1, -1, 0,  1,  -1, -1, 2,  3,  -1, -1, 4,  5,  -1, -1, 6,  7,  -1, -1, 8,  9,  -1, -1,
    10, 11, -1, -1, 12, 13, -1, -1, 14, 15, -1, -1, 0,  1,  -1, -1, 2,  3,  -1, -1, 4,  5,
    -1, -1, 6,  7,  -1, -1, 8,  9,  -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15};

/* bf16 on AVX-512 without vdpbf16ps, tiles of 3-8 rows of x (decode at batch
 * 3-8, one tile of all rows: ZZ_MR8): the AVX2 kernel's 8-lane chains, two rows
 * of x to a zmm (row 2p in lanes 0-7, row 2p + 1 in 8-15; an odd last row
 * repeated in both halves) and each W row's 8 values widened once into both
 * halves for all the tile's rows (the AVX2 kernel widens them once per pair):
 * the same lanes, FMAs, tree8 and tail, so the same bits. The pairs of x come
 * widened (zz_xpairs_of: once per call, not once per 4 outputs), a load each;
 * a W value is widened by one byte shuffle of a 128-bit broadcast load
 * (zz_bf16_dup8_idx), not a widening move and a shift. On a Cascade Lake the
 * shuffles and the FMAs share two ports, so every µop of widening is an FMA
 * slot: with x's pairs widened in the tile (an insert and a shuffle per pair
 * and 8 values) the tile was bound by those ports at 6-8 rows, below the read
 * rate. Tiles of 1-2 rows keep the AVX2 kernel (a zmm would multiply a wasted
 * half). Here: PAIRS pairs of rows (xp's, pld floats apart) against 4 W rows. */
ZZ_AVX512BW static inline __attribute__((always_inline)) void zz_bf16_avx512w_rows(const float *xp, int64_t pld,
                                                                                   const void *const xr[ZZ_MR8],
                                                                                   const void *const wr[ZZ_NR],
                                                                                   int64_t kc, int mr, const int PAIRS,
                                                                                   float tile[ZZ_MR8][ZZ_NR]) {
  const __m512i dup = _mm512_load_si512(zz_bf16_dup8_idx);
  __m512 acc[ZZ_MR8 / 2][ZZ_NR];
  for (int p = 0; p < PAIRS; p++)
    for (int c = 0; c < ZZ_NR; c++) acc[p][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m512 a[ZZ_MR8 / 2];
    for (int p = 0; p < PAIRS; p++) a[p] = _mm512_loadu_ps(xp + p * pld + 2 * k);
    for (int c = 0; c < ZZ_NR; c++) {
      __m512i wv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)((const uint16_t *)wr[c] + k)));
      __m512 b = _mm512_castsi512_ps(_mm512_shuffle_epi8(wv, dup));
      for (int p = 0; p < PAIRS; p++) acc[p][c] = _mm512_fmadd_ps(a[p], b, acc[p][c]);
    }
  }
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < ZZ_NR; c++) {
      float l[16];
      _mm512_storeu_ps(l, acc[r / 2][c]);
      tile[r][c] = zz_bf16_tail(xr[r], wr[c], k, kc, zz_tree8(l + 8 * (r & 1)));
    }
}

/* mr: ZZ_MR_PAIRS .. ZZ_MR8 (zz_gemm_dense gives it no other tile) */
ZZ_AVX512BW static void zz_micro_bf16_avx512w(const float *xp, int64_t pld, const void *const xr[ZZ_MR8],
                                              const void *const wr[ZZ_NR], int64_t kc, int mr,
                                              float tile[ZZ_MR8][ZZ_NR]) {
  if (mr <= 4) zz_bf16_avx512w_rows(xp, pld, xr, wr, kc, mr, 2, tile);
  else if (mr <= 6)
    zz_bf16_avx512w_rows(xp, pld, xr, wr, kc, mr, 3, tile);
  else
    zz_bf16_avx512w_rows(xp, pld, xr, wr, kc, mr, 4, tile);
}

/* dst[c][0..kc) = the bf16 K piece of W row c widened (a shift) */
ZZ_AVX2 static void zz_widen_bf16_avx2(const void *const wr[ZZ_NR], int64_t kc, float *dst, int64_t ld) {
  for (int c = 0; c < ZZ_NR; c++) {
    const uint16_t *w = wr[c];
    float *d = dst + c * ld;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
      _mm256_storeu_ps(d + k, _mm256_castsi256_ps(_mm256_slli_epi32(
                                  _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + k))), 16)));
    for (; k < kc; k++) d[k] = zz_bf16_to_f32(w[k]);
  }
}

/* The 4 tree8 sums of 4 accumulators: hadd pairs lanes (0,1) (2,3) in each
 * 128-bit half, the second hadd adds those pairs, the halves are added last:
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), zz_tree8's tree. */
ZZ_AVX2FMA static inline __m128 zz_tree8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* The wide path's register tile (many rows of x, zz_gemm_panel_wide): ROWS
 * (<= ZZ_WIDE_MR) rows of x (f32, the bf16-rounded values) against 4 widened W
 * rows (row stride ld) over len (a multiple of 8) elements. Each output's 8
 * lanes start at zero (first) or from acc ([ZZ_WIDE_MR][ZZ_NR][8]), the previous
 * K piece's; after the K block's last piece (last) they are reduced by
 * zz_tree8's tree into sum, else stored back to acc. The lanes see the products
 * in the dot kernel's order, so the sums are its bits. 3 rows: 12 accumulators,
 * 3 x and 1 W register, the 16 ymm; each step 7 loads (x from L2, W from L1)
 * for 12 FMA. */
ZZ_AVX2FMA static inline __attribute__((always_inline)) void zz_bf16_wide_rows(const float *const x[ZZ_WIDE_MR],
                                                                               const int ROWS, const float *w,
                                                                               int64_t ld, int64_t len, float *acc,
                                                                               bool first, bool last,
                                                                               float sum[ZZ_WIDE_MR][ZZ_NR]) {
  __m256 a[ZZ_WIDE_MR][ZZ_NR];
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < ZZ_NR; c++) a[r][c] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (r * ZZ_NR + c) * 8);
  for (int64_t k = 0; k < len; k += 8) {
    __m256 v[ZZ_WIDE_MR];
    for (int r = 0; r < ROWS; r++) v[r] = _mm256_loadu_ps(x[r] + k);
    for (int c = 0; c < ZZ_NR; c++) {
      __m256 b = _mm256_loadu_ps(w + c * ld + k);
      for (int r = 0; r < ROWS; r++) a[r][c] = _mm256_fmadd_ps(v[r], b, a[r][c]);
    }
  }
  for (int r = 0; r < ROWS; r++) {
    if (last) _mm_storeu_ps(sum[r], zz_tree8x4(a[r][0], a[r][1], a[r][2], a[r][3]));
    else
      for (int c = 0; c < ZZ_NR; c++) _mm256_storeu_ps(acc + (r * ZZ_NR + c) * 8, a[r][c]);
  }
}

ZZ_AVX2FMA static void zz_bf16_wide_tile(const float *const x[ZZ_WIDE_MR], int rows, const float *w, int64_t ld,
                                         int64_t len, float *acc, bool first, bool last, float sum[ZZ_WIDE_MR][ZZ_NR]) {
  if (rows == 3) zz_bf16_wide_rows(x, 3, w, ld, len, acc, first, last, sum);
  else if (rows == 2)
    zz_bf16_wide_rows(x, 2, w, ld, len, acc, first, last, sum);
  else
    zz_bf16_wide_rows(x, 1, w, ld, len, acc, first, last, sum);
}

/* ---- Q4 on AVX2: nibbles widened to min + q · step in registers */

/* The 8 values of 4 packed bytes (element 2i in byte i's low nibble, 2i+1 in its high). */
ZZ_AVX2 static inline __m256 zz_q4x8(__m128i bytes, __m256 lo, __m256 step) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m128i q = _mm_unpacklo_epi8(_mm_and_si128(bytes, m4), _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
  __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
  return _mm256_add_ps(lo, _mm256_mul_ps(v, step));
}

/* ROWS rows of x (f32) against COLS W rows of BITS (4 or 8) values (ROWS × COLS
 * <= 8 accumulators; all three constants after inlining) of kc elements in
 * groups of group (a multiple of 8); out[r][c] in zz_dot's order over the
 * widened row. */
ZZ_AVX2 static inline __attribute__((always_inline)) void zz_q_avx2_tile(const float *const *x, const void *const *wr,
                                                                         int64_t kc, int group, const int BITS,
                                                                         const int ROWS, const int COLS,
                                                                         float out[ZZ_MR][ZZ_NR]) {
  const float *tab = zz_f16_table();
  const int64_t kmain = kc - kc % 8; /* zz_dot's lanes; the rest is its tail */
  const size_t gb = zz_q_group_nbytes(BITS, group);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m256 acc[ZZ_MR][ZZ_NR];
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) acc[r][c] = _mm256_setzero_ps();
  /* goff: the group's offset in a W row, kept as a sum (a 64-bit division
   * per group cost 1.0-1.5x in 8-bit's time, measured while AVX-512 ran it) */
  for (int64_t g0 = 0, goff = 0; g0 < kmain; g0 += group, goff += (int64_t)gb) {
    const int64_t m = kmain - g0 < group ? kmain - g0 : group; /* a multiple of 8 */
    for (int c = 0; c < COLS; c++) {
      const unsigned char *g = (const unsigned char *)wr[c] + goff;
      uint16_t hmin, hstep;
      memcpy(&hmin, g, 2);
      memcpy(&hstep, g + 2, 2);
      const __m256 lo = _mm256_set1_ps(tab[hmin]), step = _mm256_set1_ps(tab[hstep]);
      const unsigned char *d = g + 4;
      int64_t e = 0;
      for (; BITS == 4 && e + 32 <= m; e += 32) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + e / 2));
        __m128i l4 = _mm_and_si128(v, m4), h4 = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        __m128i q0 = _mm_unpacklo_epi8(l4, h4), q1 = _mm_unpackhi_epi8(l4, h4);
        __m256 w[4] = {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q0)),
                       _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q0, 8))),
                       _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q1)),
                       _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q1, 8)))};
        for (int u = 0; u < 4; u++) {
          w[u] = _mm256_add_ps(lo, _mm256_mul_ps(w[u], step));
          for (int r = 0; r < ROWS; r++)
            acc[r][c] = _mm256_add_ps(acc[r][c], _mm256_mul_ps(_mm256_loadu_ps(x[r] + g0 + e + 8 * u), w[u]));
        }
      }
      for (; e < m; e += 8) {
        __m256 w;
        if (BITS == 4) {
          uint32_t b4;
          memcpy(&b4, d + e / 2, 4);
          w = zz_q4x8(_mm_cvtsi32_si128((int)b4), lo, step);
        } else {
          __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(d + e))));
          w = _mm256_add_ps(lo, _mm256_mul_ps(v, step));
        }
        for (int r = 0; r < ROWS; r++)
          acc[r][c] = _mm256_add_ps(acc[r][c], _mm256_mul_ps(_mm256_loadu_ps(x[r] + g0 + e), w));
      }
    }
  }
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) {
      float l[8];
      _mm256_storeu_ps(l, acc[r][c]);
      float s = zz_tree8(l);
      out[r][c] = zz_q_tail(x[r], wr[c], (zz_qfmt){BITS, group}, kmain, kc, s);
    }
}

/* Tiles by rows of x: 1 or 2 rows against all 4 W rows (enough independent sums
 * for the adders), 3 or 4 rows against 2 W rows at a time (each widened W value
 * serves 4 rows). */
ZZ_AVX2 static inline __attribute__((always_inline)) void zz_micro_q_avx2(const void *const xr[ZZ_MR],
                                                                          const void *const wr[ZZ_NR], int64_t kc,
                                                                          int mr, int group, const int BITS,
                                                                          float tile[ZZ_MR][ZZ_NR]) {
  const float *x[ZZ_MR] = {xr[0], xr[1], xr[2], xr[3]};
  float out[ZZ_MR][ZZ_NR];
  if (mr == 1) zz_q_avx2_tile(x, wr, kc, group, BITS, 1, 4, out);
  if (mr == 2) zz_q_avx2_tile(x, wr, kc, group, BITS, 2, 4, out);
  if (mr >= 3)
    for (int c0 = 0; c0 < ZZ_NR; c0 += 2) {
      float part[ZZ_MR][ZZ_NR];
      if (mr == 3) zz_q_avx2_tile(x, wr + c0, kc, group, BITS, 3, 2, part);
      else
        zz_q_avx2_tile(x, wr + c0, kc, group, BITS, 4, 2, part);
      for (int r = 0; r < mr; r++) out[r][c0] = part[r][0], out[r][c0 + 1] = part[r][1];
    }
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < ZZ_NR; c++) tile[r][c] = out[r][c];
}

ZZ_AVX2 static void zz_micro_q4_avx2(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr,
                                     int group, float tile[ZZ_MR][ZZ_NR]) {
  zz_micro_q_avx2(xr, wr, kc, mr, group, 4, tile);
}

/* 8 bits: one byte a value, 8 widened from one 8-byte load (FlexGen's format at
 * 8 bits, beside llama.cpp's Q8_0) */
ZZ_AVX2 static void zz_micro_q8_avx2(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr,
                                     int group, float tile[ZZ_MR][ZZ_NR]) {
  zz_micro_q_avx2(xr, wr, kc, mr, group, 8, tile);
}

/* ---- Q4 and Q8 on AVX-512: two W rows per zmm (lanes 0-7 row c, 8-15 row c+1),
 * so each half keeps zz_dot's 8 lanes and the bits equal the AVX2 and portable
 * paths. 8 bits widen each value (convert, multiply, add).
 * A group's 16 possible values, min + q · step for q = 0 … 15 (the product
 * rounded before the add, as zz_q_dequantize rounds it), are computed once per
 * group and W row into a table (one zmm), and each weight is looked up in the
 * pair's two tables by its nibble (vpermi2ps): per 8 values of a row a 4-byte
 * broadcast load, a shift, a mask and the permute, where widening them took an
 * unpack, a widen, a convert, a multiply and an add. The rows' chains are
 * independent and held in registers (ROWS a constant): each output's sums still
 * run along k in zz_dot's order.
 * avx512f brings FMA, and GCC contracts a multiply and an add of intrinsics
 * into one (-ffp-contract=fast): an empty asm on each product keeps them two
 * roundings, as zz_q_dequantize and zz_dot round them. */
#define ZZ_KEEP(v) __asm__("" : "+v"(v))

/* The 16 values min + q · step of a group whose header is g (f16 min, f16 step). */
ZZ_AVX512 static inline __m512 zz_q4_table(const unsigned char *g, const float *tab) {
  uint16_t h[2];
  memcpy(h, g, sizeof h);
  const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 p = _mm512_mul_ps(q, _mm512_set1_ps(tab[h[1]]));
  ZZ_KEEP(p);
  return _mm512_add_ps(_mm512_set1_ps(tab[h[0]]), p);
}

/* 8 values of W row c (4 bytes at d0) in lanes 0-7, of row c+1 (d1) in 8-15,
 * each looked up in its row's table (t0, t1) by its nibble (element 2i in byte
 * i's low nibble, 2i+1 in its high: lane i's nibble is at bit 4i of the dword;
 * the index's bit 4 picks row c+1's table). */
ZZ_AVX512 static inline __m512 zz_q4_lookup(const unsigned char *d0, const unsigned char *d1, __m512 t0, __m512 t1) {
  const __m512i shift = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i nibble = _mm512_set1_epi32(15),
                second = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
  uint32_t b0, b1;
  memcpy(&b0, d0, 4);
  memcpy(&b1, d1, 4);
  __m512i v = _mm512_mask_set1_epi32(_mm512_set1_epi32((int)b0), 0xff00, (int)b1);
  /* (v >> shift & 15) | second: ternary logic A & B | C */
  __m512i idx = _mm512_ternarylogic_epi32(_mm512_srlv_epi32(v, shift), nibble, second, 0xea);
  return _mm512_permutex2var_ps(t0, idx, t1);
}

/* 8 values of W row c (8 bytes at d0) in lanes 0-7, of row c+1 (d1) in 8-15,
 * widened to min + q · step (lo, step: row c's in lanes 0-7, row c+1's in 8-15;
 * the product rounded before the add). */
ZZ_AVX512 static inline __m512 zz_q8_widen(const unsigned char *d0, const unsigned char *d1, __m512 lo, __m512 step) {
  int64_t b1;
  memcpy(&b1, d1, 8);
  __m128i v = _mm_insert_epi64(_mm_loadl_epi64((const __m128i *)d0), b1, 1);
  __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), step);
  ZZ_KEEP(p);
  return _mm512_add_ps(lo, p);
}

/* a in lanes 0-7, b in 8-15 */
ZZ_AVX512 static inline __m512 zz_halves(float a, float b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

/* ROWS rows of x against the 4 W rows (two pairs) of BITS (4 or 8) values over
 * k < kmain (whole groups of 8): acc[r][p] lanes 0-7 output 2p's zz_dot lanes,
 * 8-15 output 2p+1's. Per group, 4 bits: each W row's table; 8 bits: each
 * pair's min and step in halves. */
ZZ_AVX512 static inline __attribute__((always_inline)) void zz_q_avx512_rows(const void *const xr[ZZ_MR],
                                                                             const void *const wr[ZZ_NR], int64_t kmain,
                                                                             int group, const int BITS, const int ROWS,
                                                                             __m512 acc[ZZ_MR][ZZ_NR / 2]) {
  const float *tab = zz_f16_table();
  const size_t gb = zz_q_group_nbytes(BITS, group);
  for (int r = 0; r < ROWS; r++)
    for (int p = 0; p < ZZ_NR / 2; p++) acc[r][p] = _mm512_setzero_ps();
  /* goff: the group's offset in a W row, kept as a sum (a 64-bit division
   * per group, as before, cost a quarter of this kernel's time) */
  for (int64_t g0 = 0, goff = 0; g0 < kmain; g0 += group, goff += (int64_t)gb) {
    const int64_t m = kmain - g0 < group ? kmain - g0 : group;
    const unsigned char *d[ZZ_NR];
    __m512 t[ZZ_NR]; /* 4 bits: row c's table; 8 bits: pair p's min (2p) and step (2p + 1) */
    for (int c = 0; c < ZZ_NR; c++) {
      const unsigned char *g = (const unsigned char *)wr[c] + goff;
      if (BITS == 4) t[c] = zz_q4_table(g, tab);
      d[c] = g + 4;
    }
    if (BITS == 8)
      for (int p = 0; p < ZZ_NR / 2; p++) {
        uint16_t h0[2], h1[2];
        memcpy(h0, d[2 * p] - 4, sizeof h0);
        memcpy(h1, d[2 * p + 1] - 4, sizeof h1);
        t[2 * p] = zz_halves(tab[h0[0]], tab[h1[0]]);
        t[2 * p + 1] = zz_halves(tab[h0[1]], tab[h1[1]]);
      }
    for (int64_t e = 0; e < m; e += 8) {
      __m512 w[ZZ_NR / 2];
      for (int p = 0; p < ZZ_NR / 2; p++)
        w[p] = BITS == 4 ? zz_q4_lookup(d[2 * p] + e / 2, d[2 * p + 1] + e / 2, t[2 * p], t[2 * p + 1])
                         : zz_q8_widen(d[2 * p] + e, d[2 * p + 1] + e, t[2 * p], t[2 * p + 1]);
      for (int r = 0; r < ROWS; r++) {
        __m512 a = _mm512_castpd_ps(
            _mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps((const float *)xr[r] + g0 + e))));
        for (int p = 0; p < ZZ_NR / 2; p++) {
          __m512 prod = _mm512_mul_ps(a, w[p]);
          ZZ_KEEP(prod);
          acc[r][p] = _mm512_add_ps(acc[r][p], prod);
        }
      }
    }
  }
}

ZZ_AVX512 static inline __attribute__((always_inline)) void zz_micro_q_avx512(const void *const xr[ZZ_MR],
                                                                              const void *const wr[ZZ_NR], int64_t kc,
                                                                              int mr, int group, const int BITS,
                                                                              float tile[ZZ_MR][ZZ_NR]) {
  const int64_t kmain = kc - kc % 8;
  __m512 acc[ZZ_MR][ZZ_NR / 2];
  if (mr == 1) zz_q_avx512_rows(xr, wr, kmain, group, BITS, 1, acc);
  else if (mr == 2)
    zz_q_avx512_rows(xr, wr, kmain, group, BITS, 2, acc);
  else if (mr == 3)
    zz_q_avx512_rows(xr, wr, kmain, group, BITS, 3, acc);
  else
    zz_q_avx512_rows(xr, wr, kmain, group, BITS, 4, acc);
  for (int r = 0; r < mr; r++)
    for (int c = 0; c < ZZ_NR; c++) {
      float l[16];
      _mm512_storeu_ps(l, acc[r][c / 2]);
      float s = zz_tree8(l + 8 * (c & 1));
      tile[r][c] = zz_q_tail(xr[r], wr[c], (zz_qfmt){BITS, group}, kmain, kc, s);
    }
}

ZZ_AVX512 static void zz_micro_q4_avx512(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr,
                                         int group, float tile[ZZ_MR][ZZ_NR]) {
  zz_micro_q_avx512(xr, wr, kc, mr, group, 4, tile);
}

ZZ_AVX512 static void zz_micro_q8_avx512(const void *const xr[ZZ_MR], const void *const wr[ZZ_NR], int64_t kc, int mr,
                                         int group, float tile[ZZ_MR][ZZ_NR]) {
  zz_micro_q_avx512(xr, wr, kc, mr, group, 8, tile);
}
#endif

/* ---------------------------------------------------------------- run-time choice */

typedef struct zz_gemm_isa {
  zz_gemm_micro f32; /* NULL: sgemm tiles at every size */
  zz_gemm_micro bf16;
  /* the wide path for bf16 (n > ZZ_BF16_WIDEN_N); NULL: none */
  void (*widen_bf16)(const void *const wr[ZZ_NR], int64_t kc, float *dst, int64_t ld);
  void (*wide_tile)(const float *const x[ZZ_WIDE_MR], int rows, const float *w, int64_t ld, int64_t len, float *acc,
                    bool first, bool last, float sum[ZZ_WIDE_MR][ZZ_NR]);
  zz_gemm_micro q4; /* 4 bits, groups of a multiple of 8; NULL: dequantized panels */
  zz_gemm_micro q8; /* 8 bits, the same */
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst);
  bool bf16_dot;                  /* bf16 multiplies as it is (vdpbf16ps): no packed GEMM for prefill */
  bool amx;                       /* bf16 on AMX tiles where zz_gemm_amx_takes (ISA amx) */
  bool bf16_tiles;                /* bf16 on AMX's packed tiles in zmm (vdpbf16ps) where zz_gemm_tiles_takes */
  bool f32_tiles;                 /* f32 on the same tiles (FMA) where zz_gemm_tiles_takes */
  bool pack_avx2;                 /* the packed GEMM's AVX2 FMA tile (linear_pack.c); else its portable one */
  int64_t bf16_panel_n;           /* bf16 without vdpbf16ps: one FMA chain per output from this many rows */
  zz_gemm_micro_pairs bf16_pairs; /* bf16 at 3-8 rows on x's widened pairs (zz_xpairs_of), one tile; NULL: bf16 */
  int64_t bf16_pack_n; /* bf16 by the packed GEMM from this many rows, by the row-lane tile below (vector ISAs) */
  int64_t f32_n;       /* the f32 kernel up to this many rows of x (zz_cpu_gemm_own), sgemm tiles above */
  int64_t f32_lane_n;  /* f32 from this many rows by the row-lane tile (zz_cpu_gemm_own); 0: never */
} zz_gemm_isa;

/* x rounded where the CPU has no bf16 convert: zz_convert's (vectorised) loop. */
static void zz_round_bf16_c(const float *src, int64_t n, uint16_t *dst) {
  zz_convert(ZZ_DTYPE_F32, src, ZZ_DTYPE_BF16, dst, n);
}

/* The micro-kernels for the process's ISA choice (kernels/cpu/isa.c). The f32
 * one up to ZZ_GEMM_SMALL_M rows (AVX2: the portable kernel's bits), the
 * row-lane tile from there below ZZ_F32_SGEMM_N; portable: sgemm at every n. */
static zz_gemm_isa zz_gemm_isa_get(void) {
  zz_gemm_isa s = {.bf16 = zz_micro_bf16_c, .round_bf16 = zz_round_bf16_c, .bf16_panel_n = ZZ_BF16_PANEL_N};
#ifdef ZZ_GEMM_X86
  zz_cpu_isa isa = zz_cpu_isa_get();
  if (isa >= ZZ_CPU_ISA_AVX2) {
    s.f32 = zz_micro_f32_avx2, s.f32_n = ZZ_GEMM_SMALL_M, s.f32_lane_n = ZZ_F32_LANE_N;
    s.bf16 = zz_micro_bf16_avx2;
    s.widen_bf16 = zz_widen_bf16_avx2;
    s.wide_tile = zz_bf16_wide_tile;
    s.q4 = zz_micro_q4_avx2;
    s.q8 = zz_micro_q8_avx2;
    s.pack_avx2 = true;
    s.bf16_pack_n = ZZ_BF16_PACK_N;
  }
  if (isa >= ZZ_CPU_ISA_AVX512) {
    s.f32 = zz_micro_f32_avx512;
    s.q4 = zz_micro_q4_avx512;
    s.q8 = zz_micro_q8_avx512;
    s.bf16_pack_n = INT64_MAX; /* the row-lane tile's zmm form at every n */
    s.bf16_panel_n = ZZ_BF16_PANEL5_N;
    s.widen_bf16 = NULL, s.wide_tile = NULL; /* the wide path: AVX2 alone */
    s.bf16_pairs = zz_micro_bf16_avx512w;
    s.f32_tiles = true;
    if (zz_cpu_has_bf16()) {
      s.bf16 = zz_micro_bf16_avx512, s.bf16_pairs = NULL;
      s.round_bf16 = zz_round_bf16_avx512;
      s.bf16_dot = true;
      s.bf16_tiles = true;
    }
    s.amx = isa == ZZ_CPU_ISA_AMX;
  }
#endif
  return s;
}

/* The AMX rule: bf16 W, from ZZ_AMX_BF16_N rows, `in` a whole number of tile steps. */
static bool zz_gemm_amx_takes(const zz_gemm_isa *isa, int64_t n, int64_t in, zz_dtype w_dt) {
  return isa->amx && w_dt == ZZ_DTYPE_BF16 && n >= ZZ_AMX_BF16_N && zz_amx_bf16_fits(in);
}

/* The rule of AMX's packed tiles in zmm registers: bf16 W (not AMX's) with
 * vdpbf16ps from ZZ_BF16_TILE_N rows, f32 W on AVX-512 from ZZ_F32_SGEMM_N
 * rows (where sgemm's tiles ran before: OpenBLAS's kernels reached 0.45-0.49
 * of the zmm FMA peak on Zen 5, the tiles 0.8-0.9), `in` a whole number of
 * tile steps. */
static bool zz_gemm_tiles_takes(const zz_gemm_isa *isa, int64_t n, int64_t in, zz_dtype w_dt) {
  if (w_dt == ZZ_DTYPE_F32) return isa->f32_tiles && n >= ZZ_F32_SGEMM_N && zz_amx_f32_fits(in);
  return isa->bf16_tiles && !zz_gemm_amx_takes(isa, n, in, w_dt) && w_dt == ZZ_DTYPE_BF16 && n >= ZZ_BF16_TILE_N &&
         zz_amx_bf16_fits(in);
}

bool zz_cpu_gemm_amx(int64_t n, int64_t in, zz_dtype w_dt) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  return zz_gemm_amx_takes(&isa, n, in, w_dt);
}

bool zz_cpu_gemm_tiles(int64_t n, int64_t in, zz_dtype w_dt) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  return zz_gemm_tiles_takes(&isa, n, in, w_dt);
}

/* f32 W (and the 4/8-bit linear's widened panels) at n rows by the row-lane
 * tile, not sgemm: AVX2 from ZZ_F32_LANE_N below ZZ_F32_SGEMM_N rows. */
static bool zz_f32_lane(const zz_gemm_isa *isa, int64_t n) {
  return isa->f32_lane_n && n >= isa->f32_lane_n && n < ZZ_F32_SGEMM_N;
}

/* ---------------------------------------------------------------- the own-kernel driver */

/* y[i0.., c0..] (mr × nr valid) = tile, += when not the first K block */
static void zz_gemm_store(const zz_gemm_job *j, float tile[ZZ_MR8][ZZ_NR], int64_t i0, int mr, int64_t c0, int nr,
                          bool first) {
  for (int r = 0; r < mr; r++) {
    float *yr = j->y + (i0 + r) * j->out + c0;
    for (int c = 0; c < nr; c++) yr[c] = tile[r][c] + (first ? 0.0f : yr[c]);
  }
}

/* The tiles of W rows c0 .. min(c0 + ZZ_NR, c_hi), K block k0 .. k0+kc, against x rows m0 .. m1. */
static void zz_gemm_panel(const zz_gemm_job *j, int64_t m0, int64_t m1, int64_t k0, int64_t c0, int64_t c_hi) {
  int nr = c_hi - c0 < ZZ_NR ? (int)(c_hi - c0) : ZZ_NR;
  int64_t kc = j->in - k0 < j->kc ? j->in - k0 : j->kc;
  const void *wr[ZZ_NR];
  for (int c = 0; c < ZZ_NR; c++) wr[c] = j->w + (size_t)(c0 + (c < nr ? c : nr - 1)) * j->w_row + (size_t)k0 * j->wsz;
  for (int64_t i0 = m0; i0 < m1; i0 += j->tile_rows) {
    int mr = m1 - i0 < j->tile_rows ? (int)(m1 - i0) : j->tile_rows;
    const void *xr[ZZ_MR8];
    for (int r = 0; r < j->tile_rows; r++)
      xr[r] = j->x + (size_t)(i0 + (r < mr ? r : mr - 1)) * j->x_row + (size_t)k0 * j->xsz;
    float tile[ZZ_MR8][ZZ_NR];
    if (j->micro_pairs) j->micro_pairs(j->xpair + i0 / 2 * j->xpair_ld + 2 * k0, j->xpair_ld, xr, wr, kc, mr, tile);
    else
      j->micro(xr, wr, kc, mr, j->group, tile);
    zz_gemm_store(j, tile, i0, mr, c0, nr, k0 == 0);
  }
}

/* The wide path's panel: W rows c0 .. min(c0 + ZZ_NR, c_hi), K block k0 ..
 * k0+kc, against x rows m0 .. m1 (x in f32). The K block's whole-vector part
 * runs in pieces of ZZ_WIDE_KS, each widened once into wpanel (L1) and
 * multiplied by every row of the block, the 8 lanes of each output carried in
 * acc between pieces; then each output is reduced as the dot kernel does it
 * (zz_tree8, the tail, += y): per output the same products in the same order
 * as zz_micro_bf16_c with this K block, hence the same bits at any n. */
static void zz_gemm_panel_wide(const zz_gemm_job *j, float *wpanel, float *acc, int64_t m0, int64_t m1, int64_t k0,
                               int64_t c0, int64_t c_hi) {
  int nr = c_hi - c0 < ZZ_NR ? (int)(c_hi - c0) : ZZ_NR;
  int64_t kc = j->in - k0 < j->kc ? j->in - k0 : j->kc, kmain = kc - kc % 8;
  const uint16_t *wr[ZZ_NR];
  for (int c = 0; c < ZZ_NR; c++)
    wr[c] = (const uint16_t *)(j->w + (size_t)(c0 + (c < nr ? c : nr - 1)) * j->w_row) + k0;
  float sum[ZZ_WIDE_MC + ZZ_WIDE_MR][ZZ_NR]; /* each output's tree8 of its lanes, by row */
  memset(sum, 0, sizeof sum);
  for (int64_t s0 = 0; s0 < kmain; s0 += ZZ_WIDE_KS) {
    int64_t len = kmain - s0 < ZZ_WIDE_KS ? kmain - s0 : ZZ_WIDE_KS;
    const void *ws[ZZ_NR];
    for (int c = 0; c < ZZ_NR; c++) ws[c] = wr[c] + s0;
    j->widen_w(ws, len, wpanel, ZZ_WIDE_LD);
    /* the W piece widened next (this panel's next piece, or the next panel's
     * first), fetched while this one is multiplied: widening from memory
     * otherwise waits on DRAM, row by row (a quarter of the time at n = 64) */
    const char *pf[ZZ_NR];
    int64_t pf_bytes = 0;
    if (s0 + ZZ_WIDE_KS < kmain) {
      for (int c = 0; c < ZZ_NR; c++) pf[c] = (const char *)(wr[c] + s0 + ZZ_WIDE_KS);
      pf_bytes = (kmain - s0 - ZZ_WIDE_KS < ZZ_WIDE_KS ? kmain - s0 - ZZ_WIDE_KS : ZZ_WIDE_KS) * 2;
    } else if (c0 + ZZ_NR < c_hi) {
      for (int c = 0; c < ZZ_NR; c++) {
        int64_t row = c0 + ZZ_NR + c < c_hi ? c0 + ZZ_NR + c : c_hi - 1;
        pf[c] = j->w + (size_t)row * j->w_row + (size_t)k0 * 2;
      }
      pf_bytes = (kmain < ZZ_WIDE_KS ? kmain : ZZ_WIDE_KS) * 2;
    }
    int64_t lines = (pf_bytes + 63) / 64, tiles = (m1 - m0 + ZZ_WIDE_MR - 1) / ZZ_WIDE_MR;
    int64_t per = (lines * ZZ_NR + tiles - 1) / tiles, next = 0; /* lines to fetch per tile, the next one's index */
    for (int64_t i0 = m0; i0 < m1; i0 += ZZ_WIDE_MR) {
      for (int64_t e = 0; e < per && next < lines * ZZ_NR; e++, next++)
        __builtin_prefetch(pf[next / lines] + (next % lines) * 64);
      int rows = m1 - i0 < ZZ_WIDE_MR ? (int)(m1 - i0) : ZZ_WIDE_MR;
      const float *xr[ZZ_WIDE_MR];
      for (int r = 0; r < ZZ_WIDE_MR; r++)
        xr[r] = (const float *)j->x + (size_t)(i0 + (r < rows ? r : 0)) * (j->x_row / sizeof(float)) + k0 + s0;
      j->wide_tile(xr, rows, wpanel, ZZ_WIDE_LD, len, acc + (i0 - m0) * ZZ_NR * 8, s0 == 0, s0 + len == kmain,
                   &sum[i0 - m0]);
    }
  }
  for (int64_t i = m0; i < m1; i++) {
    const float *x = (const float *)j->x + (size_t)i * (j->x_row / sizeof(float)) + k0;
    float *yr = j->y + i * j->out + c0;
    for (int c = 0; c < nr; c++) {
      float s = sum[i - m0][c];
      for (int64_t t = kmain; t < kc; t++) s += x[t] * zz_bf16_to_f32(wr[c][t]);
      yr[c] = s + (k0 == 0 ? 0.0f : yr[c]);
    }
  }
}

/* The wide path's chunk: blocks of ZZ_WIDE_MC rows of x, their K blocks in
 * order, W panels inside (the block's f32 K block stays in L2 for all of them). */
static void zz_gemm_chunk_wide(const zz_gemm_job *j, int64_t c_lo, int64_t c_hi) {
  _Alignas(64) float wpanel[ZZ_NR * ZZ_WIDE_LD];
  /* the 8 lanes of each output of a block; rows past m1 take the last row's copies */
  _Alignas(64) float acc[(ZZ_WIDE_MC + ZZ_WIDE_MR - 1) * ZZ_NR * 8];
  for (int64_t m0 = 0; m0 < j->n; m0 += ZZ_WIDE_MC) {
    int64_t m1 = j->n - m0 < ZZ_WIDE_MC ? j->n : m0 + ZZ_WIDE_MC;
    for (int64_t k0 = 0; k0 < j->in; k0 += j->kc)
      for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_NR) zz_gemm_panel_wide(j, wpanel, acc, m0, m1, k0, c0, c_hi);
    zz_bias_relu_cols(j->y + m0 * j->out, m1 - m0, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
  }
}

/* One chunk of ZZ_GEMM_CHUNK output columns (rows of W), all rows of x. At
 * decode (few rows of x) the K blocks of one W panel run one
 * after another, so its rows stream start to end: with the K blocks outside,
 * every 4 KiB piece of a row (a page) was a fresh stream the hardware
 * prefetcher had to find again, and a 11008-wide bf16 layer read at 0.3-0.4 of
 * the read bandwidth. Each output still gets the same sums in the same order
 * (its K blocks ascending): the same bits either way. */
static void zz_gemm_chunk(void *arg, int64_t t) {
  const zz_gemm_job *j = arg;
  int64_t c_lo = t * ZZ_GEMM_CHUNK, c_hi = c_lo + ZZ_GEMM_CHUNK < j->out ? c_lo + ZZ_GEMM_CHUNK : j->out;
  if (j->widen_w) {
    zz_gemm_chunk_wide(j, c_lo, c_hi);
    return;
  }
  bool rows_first = j->n <= ZZ_GEMM_STREAM_N;
  for (int64_t m0 = 0; m0 < j->n; m0 += ZZ_GEMM_MC) {
    int64_t m1 = j->n - m0 < ZZ_GEMM_MC ? j->n : m0 + ZZ_GEMM_MC;
    if (rows_first) {
      for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_NR)
        for (int64_t k0 = 0; k0 < j->in; k0 += j->kc) zz_gemm_panel(j, m0, m1, k0, c0, c_hi);
    } else {
      for (int64_t k0 = 0; k0 < j->in; k0 += j->kc)
        for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_NR) zz_gemm_panel(j, m0, m1, k0, c0, c_hi);
    }
    zz_bias_relu_cols(j->y + m0 * j->out, m1 - m0, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
  }
}

static void zz_gemm_own(zz_pool *pool, zz_gemm_job *job) {
  zz_pool_run(pool, zz_gemm_chunk, job, (job->out + ZZ_GEMM_CHUNK - 1) / ZZ_GEMM_CHUNK);
}

/* ---------------------------------------------------------------- sgemm tiles (f32, many rows) */
/*
 * With OpenBLAS threaded, its workers spin (sched_yield) after every GEMM just
 * when the pool's workers start layernorm or attention; zz_cpu_blas_single()
 * makes OpenBLAS run every call on its caller's thread and these tiles spread a
 * GEMM over the pool instead:
 *  - few rows (decoding): tiles of output columns, so every column of w is
 *    packed once in all, as OpenBLAS's own threading does;
 *  - many rows (prefill): tiles of rows, each zz_cpu_linear (the reference).
 * The tiles follow the shape alone: the rounding of an sgemm element depends on
 * the call's whole (M, N, K) — on an AVX2 Zen 3 the same element differed
 * between one 37 x 3072 call and its 1024-column tiles, and between one 600-row
 * call and its 64-row tiles — so tiles that followed the thread count gave
 * other bits with other --threads (and an mpirun rank other tokens than one
 * process).
 */

typedef struct zz_sgemm_job {
  const float *x, *w, *b; /* x [n, in], w [out, in], b [out] or NULL */
  float *y;               /* [n, out] */
  int64_t n, in, out, tile;
  int relu, by_rows;
} zz_sgemm_job;

static void zz_sgemm_tile(void *arg, int64_t t) {
  const zz_sgemm_job *j = arg;
  int64_t lim = j->by_rows ? j->n : j->out, a = t * j->tile, m = lim - a < j->tile ? lim - a : j->tile;
  if (j->by_rows) {
    zz_cpu_linear(j->x + a * j->in, m, j->in, j->w, j->b, j->out, j->y + a * j->out, j->relu);
    return;
  }
  /* y[:, a .. a+m) = x · w[a .. a+m, :]ᵀ */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)m, (blasint)j->in, 1.0f, j->x,
              (blasint)j->in, j->w + a * j->in, (blasint)j->in, 0.0f, j->y + a, (blasint)j->out);
  zz_bias_relu_cols(j->y, j->n, j->out, a, m, j->b, j->relu);
}

void zz_cpu_blas_single(void) { openblas_set_num_threads(1); }

void zz_cpu_linear_pool(zz_pool *pool, const float *x, int64_t n, int64_t in, const float *w, const float *b,
                        int64_t out, float *y, int relu) {
  zz_sgemm_job j = {.x = x, .w = w, .b = b, .y = y, .n = n, .in = in, .out = out, .relu = relu};
  j.by_rows = n >= ZZ_GEMM_BY_ROWS;
  if (n * out < 2 * ZZ_GEMM_COL_TILE) {
    zz_cpu_linear(x, n, in, w, b, out, y, relu);
    return;
  }
  j.tile = j.by_rows ? ZZ_GEMM_ROW_TILE : ZZ_GEMM_COL_TILE;
  int64_t lim = j.by_rows ? n : out;
  zz_pool_run(pool, zz_sgemm_tile, &j, (lim + j.tile - 1) / j.tile);
}

/* ---------------------------------------------------------------- Q4 panels (prefill, other formats) */

/* Each thread widens its panels into its own buffer, grown once to the largest
 * panel it has seen (the hot loop allocates only on growth) and freed when the
 * thread ends (a pool's workers when the pool is destroyed). Slot 0: widened
 * panels (pool workers); slot 1: x quantized to int8 (the calling thread, while
 * the pool's tasks read it). */
typedef struct zz_q_buf {
  void *p;
  size_t cap; /* bytes */
} zz_q_buf;

static pthread_key_t zz_q_key[3]; /* slots: 0, 1 the 4/8-bit linear's, 2 the AMX sums (zz_amx_sums) */
static pthread_once_t zz_q_once = PTHREAD_ONCE_INIT;

static void zz_q_buf_free(void *arg) {
  zz_q_buf *b = arg;
  free(b->p);
  free(b);
}

static void zz_q_key_init(void) {
  for (int i = 0; i < 3; i++) pthread_key_create(&zz_q_key[i], zz_q_buf_free);
}

static void *zz_q_tls(int slot, size_t bytes) {
  pthread_once(&zz_q_once, zz_q_key_init);
  zz_q_buf *b = pthread_getspecific(zz_q_key[slot]);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(zz_q_key[slot], b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (bytes > b->cap) {
    void *p = realloc(b->p, bytes);
    if (!p) return NULL;
    b->p = p;
    b->cap = bytes;
  }
  return b->p;
}

/* The thread's buffer of a slot, or the process ends: a kernel has no error
 * path, and a buffer here is at most a panel (8 MiB) or the int8 rows of x, so a
 * failure is the machine out of memory. what: the buffer, for the message. */
static void *zz_q_scratch(int slot, size_t bytes, const char *what) {
  void *p = zz_q_tls(slot, bytes);
  if (!p) {
    fprintf(stderr, "zz_cpu_linear_q: out of memory for %s (%zu bytes)\n", what, bytes);
    abort();
  }
  return p;
}

/* The AMX bf16 GEMM's f32 sums between K blocks (linear_amx.c): the thread's own buffer. */
float *zz_amx_sums(size_t bytes) { return zz_q_scratch(2, bytes, "the AMX sums between K blocks"); }

typedef struct zz_qlin_job {
  const float *x, *b; /* x [n, in], rows ldx apart */
  const unsigned char *w;
  zz_qfmt f;
  int64_t n, in, out, panel;
  size_t row_bytes;
  float *y;
  int relu;
  int64_t ldx;
  const float *xp; /* x packed for the row-lane tile (zz_pk_rl_pack_x), or NULL: sgemm */
} zz_qlin_job;

static void zz_qlin_panel(void *arg, int64_t p) {
  const zz_qlin_job *j = arg;
  int64_t o0 = p * j->panel, rows = j->out - o0 < j->panel ? j->out - o0 : j->panel;
  float *wp = zz_q_scratch(0, (size_t)(j->panel * j->in) * sizeof(float), "a widened panel");
  zz_q_dequantize(j->f, j->w + (size_t)o0 * j->row_bytes, rows, j->in, wp);
  if (j->n <= ZZ_Q_SMALL_N) {
    /* decoding without a fused micro-kernel: dot products on this thread */
    for (int64_t i = 0; i < j->n; i++)
      for (int64_t o = 0; o < rows; o++) j->y[i * j->out + o0 + o] = zz_dot(j->x + i * j->in, wp + o * j->in, j->in);
  } else if (j->xp) {
    /* the f32 row-lane tile on this thread, as f32 weights at this n (zz_f32_lane) */
    zz_pk_rl_panel(j->xp, j->n, j->in, wp, rows, j->y + o0, j->out);
  } else {
    /* y[:, o0 .. o0+rows) = x · panelᵀ, single-threaded on the CPU device (zz_cpu_blas_single) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)rows, (blasint)j->in, 1.0f, j->x,
                (blasint)j->ldx, wp, (blasint)j->in, 0.0f, j->y + o0, (blasint)j->out);
  }
  zz_bias_relu_cols(j->y, j->n, j->out, o0, rows, j->b, j->relu);
}

/* Output rows per widened panel for n rows of x: decoding 16 rows a task, dot
 * products; prefill 64 rows a task, each a single-threaded GEMM (a threaded
 * OpenBLAS would serialise them), from ZZ_Q_WIDE_N rows as wide as
 * ZZ_Q_WIDE_BYTES allow. */
static int64_t zz_qlin_panel_rows(int64_t n, int64_t in) {
  int64_t panel = n <= ZZ_Q_SMALL_N ? ZZ_Q_PANEL : 4 * ZZ_Q_PANEL;
  if (n >= ZZ_Q_WIDE_N) {
    int64_t wide = ZZ_Q_WIDE_BYTES / ((int64_t)sizeof(float) * in) / (4 * ZZ_Q_PANEL) * (4 * ZZ_Q_PANEL);
    panel = wide > 512 ? 512 : wide > panel ? wide : panel;
  }
  return panel;
}

/* ---------------------------------------------------------------- entry points */

/* x's rows widened two to a vector for bf16's 3-8-row tile (zz_bf16_avx512w_rows):
 * pair p (rows 2p and 2p + 1) holds for each 8 values of K 16 floats, row 2p's
 * 8 then row 2p + 1's (an odd last row in both halves), over the whole steps
 * of K (the tail is read from the bf16 rows); pairs zz_xpairs_ld floats apart,
 * after the n bf16 rows in xb on a 64-byte boundary. */
static int64_t zz_xpairs_ld(int64_t in) { return 2 * (in - in % 8); }

static float *zz_xpairs_of(void *xb, int64_t n, int64_t in) {
  return zz_cpu_line_up((char *)xb + zz_dtype_nbytes(ZZ_DTYPE_BF16, n * in));
}

/* xb's bytes for n bf16 rows and their widened pairs */
static size_t zz_xpairs_scratch(int64_t n, int64_t in) {
  return zz_dtype_nbytes(ZZ_DTYPE_BF16, n * in) + ZZ_CPU_LINE +
         (size_t)((n + 1) / 2 * zz_xpairs_ld(in)) * sizeof(float);
}

typedef struct zz_round_job {
  const float *x;
  void *xb; /* [n, in]: bf16, or (wide) f32 holding the bf16 values, rows ld apart */
  int64_t n, in, ld;
  bool wide;
  float *pairs; /* NULL, or the bf16 rows widened into pairs too (zz_xpairs_of) */
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst);
} zz_round_job;

static void zz_round_row(void *arg, int64_t i) {
  const zz_round_job *j = arg;
  if (!j->wide) {
    uint16_t *row = (uint16_t *)j->xb + i * j->in;
    j->round_bf16(j->x + i * j->in, j->in, row);
    if (!j->pairs) return;
    /* its half of its pair, 8 values a step: widened exactly in pieces on the
     * stack, then dealt out; an odd last row fills both halves */
    int64_t ld = zz_xpairs_ld(j->in);
    int h0 = (int)(i & 1), h1 = i + 1 == j->n ? 1 : h0;
    float piece[256];
    for (int64_t k0 = 0; k0 < ld / 2; k0 += 256) {
      int64_t m = ld / 2 - k0 < 256 ? ld / 2 - k0 : 256; /* a multiple of 8 */
      zz_convert(ZZ_DTYPE_BF16, row + k0, ZZ_DTYPE_F32, piece, m);
      for (int h = h0; h <= h1; h++)
        for (int64_t k = 0; k < m; k += 8)
          memcpy(j->pairs + i / 2 * ld + 2 * (k0 + k) + 8 * h, piece + k, 8 * sizeof(float));
    }
    return;
  }
  /* rounded in pieces on the stack, then widened exactly */
  float *dst = (float *)j->xb + i * j->ld;
  uint16_t piece[256];
  for (int64_t k0 = 0; k0 < j->in; k0 += 256) {
    int64_t m = j->in - k0 < 256 ? j->in - k0 : 256;
    j->round_bf16(j->x + i * j->in + k0, m, piece);
    zz_convert(ZZ_DTYPE_BF16, piece, ZZ_DTYPE_F32, dst + k0, m);
  }
}

/* The wide path's row stride of x in floats. */
static int64_t zz_wide_x_ld(int64_t in) { return in + ZZ_WIDE_PAD; }

/* bf16: x rounded, 2 bytes a value; above ZZ_BF16_WIDEN_N rows 4 (the wide path
 * keeps x widened to f32; the same bound on every ISA, so a buffer sized here
 * fits whichever path runs). */
size_t zz_cpu_gemm_scratch(int64_t n, int64_t in, zz_dtype w_dt) {
  /* f32: the row-lane tile's groups (any ISA: a bound) */
  if (w_dt == ZZ_DTYPE_F32) {
    size_t rl = n >= ZZ_F32_LANE_N ? zz_pk_rl_x_bytes(n, in) : 0;
    size_t tiles = n >= ZZ_F32_SGEMM_N ? zz_amx_x_bytes(n, in, sizeof(float)) : 0;
    return rl > tiles ? rl : tiles;
  }
  if (w_dt != ZZ_DTYPE_BF16) return 0;
  if (n <= ZZ_BF16_WIDEN_N)
    return zz_xpairs_scratch(n, in); /* the bf16 rows, and their pairs where the ISA takes them */
  size_t wide = zz_dtype_nbytes(ZZ_DTYPE_F32, n * zz_wide_x_ld(in));
  size_t packed = zz_pk_x_bytes(n, in), rl = zz_pk_rl_x_bytes(n, in), amx = zz_amx_x_bytes(n, in, sizeof(uint16_t));
  if (n < ZZ_BF16_PANEL_N) return wide > rl ? wide : rl; /* AVX2's wide path, AVX-512's row-lane tile */
  /* x packed for linear_pack.c: the packed GEMM's slivers or the row-lane
   * tile's groups, whichever the ISA takes */
  size_t most = packed > rl ? packed : rl;
  return most > amx ? most : amx;
}

/* The own-kernel job's arguments for an f32 x, as every weight dtype's job starts
 * (the caller sets the weight's sizes: wsz, x_row, w_row, kc, group). */
static zz_gemm_job zz_gemm_job_of(const float *x, int64_t n, int64_t in, const void *w, const float *b, int64_t out,
                                  float *y, int relu, zz_gemm_micro micro) {
  return (zz_gemm_job){.x = (const char *)x,
                       .w = w,
                       .b = b,
                       .y = y,
                       .n = n,
                       .in = in,
                       .out = out,
                       .relu = relu,
                       .xsz = sizeof(float),
                       .micro = micro,
                       .tile_rows = ZZ_MR};
}

/* The own-kernel job for an f32 or bf16 weight (bf16: x rounded into xb first). */
static zz_gemm_job zz_gemm_dense(zz_pool *pool, const zz_gemm_isa *isa, const float *x, int64_t n, int64_t in,
                                 const void *w, zz_dtype w_dt, const float *b, int64_t out, float *y, int relu,
                                 void *xb) {
  zz_gemm_job job = zz_gemm_job_of(x, n, in, w, b, out, y, relu, isa->f32 ? isa->f32 : zz_micro_f32_c);
  job.wsz = sizeof(float);
  if (w_dt == ZZ_DTYPE_BF16) {
    bool wide = isa->wide_tile && n > ZZ_BF16_WIDEN_N, pairs = isa->bf16_pairs && n >= ZZ_MR_PAIRS && n <= ZZ_MR8;
    zz_round_job r = {.x = x, .xb = xb, .n = n, .in = in, .ld = zz_wide_x_ld(in), .round_bf16 = isa->round_bf16};
    r.wide = wide, r.pairs = pairs ? zz_xpairs_of(xb, n, in) : NULL;
    zz_pool_run(pool, zz_round_row, &r, n);
    job.x = xb;
    job.xsz = job.wsz = sizeof(uint16_t);
    job.micro = isa->bf16;
    if (pairs)
      job.micro_pairs = isa->bf16_pairs, job.xpair = r.pairs, job.xpair_ld = zz_xpairs_ld(in), job.tile_rows = ZZ_MR8;
    if (wide) job.xsz = sizeof(float), job.widen_w = isa->widen_bf16, job.wide_tile = isa->wide_tile;
  }
  job.x_row = (size_t)(job.widen_w ? zz_wide_x_ld(in) : in) * job.xsz;
  job.w_row = (size_t)in * job.wsz;
  job.kc = (int64_t)(ZZ_GEMM_KC_BYTES / job.wsz);
  return job;
}

void zz_cpu_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                 int64_t out, float *y, int relu, void *xb) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  bool bf16 = w_dt == ZZ_DTYPE_BF16;
  bool amx = zz_gemm_amx_takes(&isa, n, in, w_dt);
  if (amx || zz_gemm_tiles_takes(&isa, n, in, w_dt)) {
    zz_amx_gemm(pool, x, n, in, w, w_dt, b, out, y, relu, xb, isa.round_bf16, amx);
    return;
  }
  if (bf16 ? n >= isa.bf16_panel_n && !isa.bf16_dot : isa.f32_lane_n && n >= isa.f32_lane_n) {
    /* one FMA chain per output (linear_pack.c): the row-lane tile reads W as it
     * is (AVX2; AVX-512 widens pieces of it into L1; bf16 below
     * isa.bf16_pack_n rows, f32 at every n: it beat the
     * packed GEMM's f32 tiles there), else (and portable) the packed GEMM, x
     * rounded and packed into xb, W widened into slivers by each task; the same
     * bits either way */
    if (isa.pack_avx2 && (n < isa.bf16_pack_n || !bf16) && zz_pk_rl_gemm(pool, x, n, in, w, bf16, b, out, y, relu, xb))
      return;
    zz_pk_gemm(pool, isa.pack_avx2, x, n, in, w, bf16, b, out, y, relu, xb);
    return;
  }
  zz_gemm_job job = zz_gemm_dense(pool, &isa, x, n, in, w, w_dt, b, out, y, relu, xb);
  zz_gemm_own(pool, &job);
}

bool zz_cpu_gemm_own(int64_t n) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  return isa.f32 && (n <= isa.f32_n || zz_f32_lane(&isa, n));
}

void zz_cpu_linear_w(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                     int64_t out, float *y, int relu, void *xb) {
  if (w_dt == ZZ_DTYPE_BF16 || zz_cpu_gemm_own(n) || zz_cpu_gemm_tiles(n, in, w_dt))
    zz_cpu_gemm(pool, x, n, in, w, w_dt, b, out, y, relu, xb);
  else
    zz_cpu_linear_pool(pool, x, n, in, w, b, out, y, relu);
}

typedef struct zz_xq_job {
  const float *x;
  char *xq;
  int64_t in;
  size_t row;
  int group, bits;
} zz_xq_job;

static void zz_xq_row(void *arg, int64_t i) {
  const zz_xq_job *j = arg;
  zz_xq_quantize_row(j->x + i * j->in, j->in, j->group, j->bits, j->xq + (size_t)i * j->row);
}

void zz_cpu_linear_q(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_qfmt f, zz_cpu_act act,
                     const float *b, int64_t out, float *y, int relu) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  zz_gemm_micro fused = f.bits == 4 ? isa.q4 : f.bits == 8 ? isa.q8 : NULL;
  if (act == ZZ_CPU_ACT_INT8 && zz_cpu_act_int8_applies(f.bits, n)) {
    /* x quantized once per call (rows on the pool), then linear_int8.c's GEMM:
     * the groups of its whole rows of K, any number of rows */
    zz_xq_job q = {.x = x, .in = in, .row = zz_xq_row_bytes(in, f.group), .group = f.group, .bits = f.bits};
    q.xq = zz_q_scratch(1, q.row * (size_t)n, "rows of x in int8");
    zz_pool_run(pool, zz_xq_row, &q, n);
    zz_xq_gemm(pool, q.xq, q.row, n, in, w, zz_q_row_bytes(f, in), f.bits, f.group, b, out, y, relu);
    return;
  }
  if (n <= ZZ_Q_SMALL_N && fused && f.group % 8 == 0) {
    /* the fused micro-kernel, one K block: its order is zz_dot's over the whole row */
    zz_gemm_job job = zz_gemm_job_of(x, n, in, w, b, out, y, relu, fused);
    job.group = f.group; /* wsz 0: the micro-kernel reads packed rows of w_row bytes */
    job.x_row = (size_t)in * sizeof(float);
    job.w_row = zz_q_row_bytes(f, in);
    job.kc = in;
    zz_gemm_own(pool, &job);
    return;
  }
  zz_qlin_job job = {.x = x, .b = b, .w = w, .f = f, .n = n, .in = in, .out = out, .y = y, .relu = relu, .ldx = in};
  job.panel = zz_qlin_panel_rows(n, in), job.row_bytes = zz_q_row_bytes(f, in);
  if (n > ZZ_Q_SMALL_N && zz_f32_lane(&isa, n)) {
    /* the widened panels multiplied as f32 weights are at this n: x packed once
     * for the row-lane tile (the calling thread's buffer, read by the tasks) */
    float *xp = zz_q_scratch(1, zz_pk_rl_x_bytes(n, in), "rows of x packed");
    if (zz_pk_rl_pack_x(pool, x, n, in, xp)) job.xp = xp;
  }
  zz_pool_run(pool, zz_qlin_panel, &job, (out + job.panel - 1) / job.panel);
}
