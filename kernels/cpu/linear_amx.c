/*
 * linear_amx.c — the bf16 linear on AMX tiles (Sapphire Rapids and later, ISA
 * "amx" in kernels/cpu/isa.c): y[n, out] = x[n, in] · W[out, in]ᵀ (+ b) (then
 * ReLU) for bf16 W, x rounded to bf16 (round to nearest even, as every bf16
 * path rounds it: the caller's vector rounding). On AVX-512 without AMX the
 * same packed tiles feed zmm registers (bf16 on vdpbf16ps, f32 on FMA; "The
 * same packed tiles in zmm registers" below).
 *
 * The tiles (zz_amx_cfg_tiles), a 2 × 2 block of C per micro-kernel:
 *   A  16 rows of x × 32 k (64 bytes a row), x rounded and packed once per call
 *      so that each tile is one contiguous KiB (zz_amx_pack_x);
 *   B  16 outputs as tdpbf16ps wants its second operand, pairs of k side by
 *      side ([16 pairs][16 outputs][2]): W packed by each task, K block by K
 *      block, into a panel of ZZ_AMX_NB outputs × ZZ_AMX_KC k on its stack (a
 *      16 × 16 dword transpose a tile, zz_amx_pack_w; W prefetched a K block on);
 *   C  16 rows × 16 outputs of f32 sums: C 0-3, A 4-5, B 6-7.
 * A task (ZZ_AMX_NB outputs) walks K blocks outside, then pairs of row groups,
 * then the panel's 32-output blocks: a row pair's A tiles (16 KiB) stay in L1
 * across the panel, the panel (64 KiB) in L2 across the rows, and the next row
 * pair's A tiles are prefetched into L2. Between K blocks the sums wait in the
 * thread's buffer (zz_amx_sums), C tiles at stride 64; the last K block stores
 * them into y (rows × outputs, as y lies), then the bias and ReLU.
 *
 * Numerics: tdpbf16ps's own (inputs and results below f32's normal range
 * flushed to zero, its own order of the pairs' sums), f32 between K blocks:
 * not the row-lane tile's bits, within the bound of any f32 summation order.
 * Each output is summed by one task in one order, so the thread count changes
 * no bit.
 *
 * Taken (zz_cpu_gemm_amx) from ZZ_AMX_BF16_N rows of x where `in` is a whole
 * number of 32s. Measured on a 2-vCPU Sapphire Rapids guest (docs/cpu.md):
 * about 0.27 of tdpbf16ps's peak at 512-2048 rows of LLaMA-7B's shapes, where
 * the first blocking (W's rows as A, straight from the weight, x as B over the
 * whole of K from L3) gave 0.13-0.18.
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

#define ZZ_AMX_TM 16              /* rows of a tile: rows of x (A, C) or pairs of k (B) */
#define ZZ_AMX_KB 32              /* k per tile step: a 64-byte tile row of bf16 */
#define ZZ_AMX_RB (2 * ZZ_AMX_TM) /* rows of x per micro-kernel: two A tiles */
#define ZZ_AMX_CB (2 * ZZ_AMX_TM) /* outputs per micro-kernel: two B tiles */
#define ZZ_AMX_PIECE 256          /* values of a row of x rounded at a time */
#ifndef ZZ_AMX_NB
#define ZZ_AMX_NB 128 /* outputs per pool task: its W panel's rows */
#endif
#ifndef ZZ_AMX_KC
#define ZZ_AMX_KC 256 /* k per K block: a task's W panel is ZZ_AMX_NB × ZZ_AMX_KC bf16 (64 KiB on the stack, L2) */
#endif
#define ZZ_AMX_PF_LINES                                                                                                \
  (ZZ_AMX_TM * ZZ_AMX_CB / ZZ_AMX_NB) /* lines of each next A tile a micro-kernel prefetches a step */
_Static_assert(ZZ_AMX_NB % ZZ_AMX_CB == 0 && ZZ_AMX_KC % ZZ_AMX_KB == 0, "whole micro-kernels in a panel");

bool zz_amx_bf16_fits(int64_t in) { return in > 0 && in % ZZ_AMX_KB == 0; }
bool zz_amx_f32_fits(int64_t in) { return in > 0 && in % (ZZ_AMX_KB / 2) == 0; }

/* Rows of x as packed: a whole number of A tile pairs (zero rows past n). */
static int64_t zz_amx_rows(int64_t n) { return (n + ZZ_AMX_RB - 1) / ZZ_AMX_RB * ZZ_AMX_RB; }

size_t zz_amx_x_bytes(int64_t n, int64_t in, size_t esz) { return (size_t)zz_amx_rows(n) * (size_t)in * esz; }

typedef struct zz_amx_job {
  const float *x;
  char *xp; /* x packed: [rows/16][in/kb][16 rows][kb k] (kb = 64 / esz), one A tile a KiB */
  const void *w;
  int esz; /* bytes a value of x as packed and of W: 2 (bf16; AMX's only), 4 (f32, zz_fp_task) */
  const float *b;
  float *y;
  int64_t n, in, out;
  int relu;
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst); /* bf16; NULL: f32, copied */
} zz_amx_job;

/* Values of k a tile step: a 64-byte tile row of x's or W's values. */
static int64_t zz_amx_kb(const zz_amx_job *j) { return ZZ_AMX_KB * (int64_t)sizeof(uint16_t) / j->esz; }

/* The A tile of x's row group g (16 rows) at tile step s (k = kb s): 16 rows × 64 bytes, contiguous. */
static const void *zz_amx_a(const zz_amx_job *j, int64_t g, int64_t s) {
  return j->xp + (g * (j->in / zz_amx_kb(j)) + s) * ZZ_AMX_TM * 64;
}

/* x's rows 16g .. +16, rounded to bf16 (the ISA's rounding, a piece at a time;
 * f32: as they are) into their A tiles (zz_amx_a: row r's k .. k + kb - 1 are
 * the tile's row r); rows past n zero. */
static void zz_amx_pack_x(void *arg, int64_t g) {
  const zz_amx_job *j = arg;
  _Alignas(64) char piece[ZZ_AMX_PIECE * sizeof(float)];
  const int64_t kb = zz_amx_kb(j);
  for (int r = 0; r < ZZ_AMX_TM; r++) {
    int64_t i = g * ZZ_AMX_TM + r;
    for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_AMX_PIECE) {
      int64_t len = j->in - k0 < ZZ_AMX_PIECE ? j->in - k0 : ZZ_AMX_PIECE; /* a whole number of kb */
      if (i >= j->n) memset(piece, 0, (size_t)len * j->esz);
      else if (j->round_bf16)
        j->round_bf16(j->x + i * j->in + k0, len, (uint16_t *)piece);
      else
        memcpy(piece, j->x + i * j->in + k0, (size_t)len * sizeof(float));
      for (int64_t s = 0; s < len / kb; s++) memcpy((char *)zz_amx_a(j, g, k0 / kb + s) + r * 64, piece + s * 64, 64);
    }
  }
}

#ifdef ZZ_AMX_X86
/* The tiles: C 0-3 (A tile a × B tile b in 2a + b: rows of x × outputs), A 4-5
 * (ma0, ma1 rows of x; 0: unused), B 6-7 (nb0, nb1 outputs of 4 bytes: a pair of k
 * each; 0: unused), every B 16 rows (pairs of k). */
static void zz_amx_cfg_tiles(zz_amx_cfg *c, int ma0, int ma1, int nb0, int nb1) {
  memset(c, 0, sizeof *c);
  c->palette = 1;
  const int rows[8] = {ma0, ma0, ma1, ma1, ma0, ma1, ZZ_AMX_TM, ZZ_AMX_TM};
  const int cols[8] = {nb0, nb1, nb0, nb1, ZZ_AMX_TM, ZZ_AMX_TM, nb0, nb1};
  for (int t = 0; t < 8; t++)
    if (rows[t] && cols[t]) c->rows[t] = (uint8_t)rows[t], c->colsb[t] = (uint16_t)(cols[t] * 4);
}

/* 16 rows of 16 dwords transposed in registers (r[i] becomes column i). */
__attribute__((target("avx512f"))) static inline void zz_amx_tr16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 4; i++) {
      t[8 * h + i] = _mm512_shuffle_i32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
      t[8 * h + 4 + i] = _mm512_shuffle_i32x4(r[8 * h + i], r[8 * h + 4 + i], 0xdd);
    }
  for (int i = 0; i < 8; i++) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xdd);
  }
}

/* W rows c0 .. c0 + nw (nw <= ZZ_AMX_NB), k0 .. k0 + kc, into B tiles: panel
 * [nw/16 blocks][kc/kb steps][16 dwords of k][16 outputs][a dword: 2 bf16 or
 * 1 f32], block b's step s the tile at (b · kc/kb + s) KiB. A tile is the 16 ×
 * 16 transpose of its outputs' dwords (outputs past nw zero). Each line read
 * prefetches the line pf bytes on in its row (the next K block, or the next
 * panel; 0: none). */
__attribute__((target("avx512f"))) static void zz_amx_pack_w(const zz_amx_job *j, int64_t c0, int nw, int64_t k0,
                                                             int64_t kc, size_t pf, uint16_t *pw) {
  const int64_t steps = kc / zz_amx_kb(j);
  const size_t row = (size_t)j->in * j->esz;
  for (int bl = 0; bl * ZZ_AMX_TM < nw; bl++) {
    const int rows = nw - bl * ZZ_AMX_TM < ZZ_AMX_TM ? nw - bl * ZZ_AMX_TM : ZZ_AMX_TM;
    const char *src = (const char *)j->w + (size_t)(c0 + bl * ZZ_AMX_TM) * row + (size_t)k0 * j->esz;
    for (int64_t s = 0; s < steps; s++) {
      __m512i r[16];
      for (int c = 0; c < ZZ_AMX_TM; c++) {
        const char *p = src + c * row + s * 64;
        r[c] = c < rows ? _mm512_loadu_si512(p) : _mm512_setzero_si512();
        if (pf && c < rows) _mm_prefetch(p + pf, _MM_HINT_T1);
      }
      zz_amx_tr16(r);
      char *d = (char *)pw + (bl * steps + s) * ZZ_AMX_TM * 64;
      for (int p = 0; p < ZZ_AMX_TM; p++) _mm512_store_si512(d + p * 64, r[p]);
    }
  }
}

/* One micro-kernel: rows r0 .. +32 of x (the A tiles of groups r0/16, +1) ×
 * outputs c0 .. +32 (the panel's blocks at b0, b0 + blk) over the K block's
 * steps. The sums start at 0 (the first K block) or from sums (4 C tiles, a KiB
 * each, contiguous: stride 64), and go to sums, or to y in the last K block.
 * Which tiles take part: the configuration's (a1: a second A tile, b1: a second
 * B tile). Each step prefetches ZZ_AMX_PF_LINES lines (from line pl) of each of
 * the next pair of row groups' A tiles at that step (pf; NULL: none). */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static inline void zz_amx_micro(
    const zz_amx_job *j, int64_t r0, int64_t c0, int64_t s0, int64_t steps, const uint16_t *b0, int a1, int b1,
    int first, int last, float *sums, const char *pf, int pl) {
  const size_t ldy = (size_t)j->out * sizeof(float), blk = (size_t)steps * ZZ_AMX_TM * ZZ_AMX_KB, ct = 256;
  const int64_t g = r0 / ZZ_AMX_TM;
  if (first) {
    _tile_zero(0);
    if (b1) _tile_zero(1);
    if (a1) _tile_zero(2);
    if (a1 && b1) _tile_zero(3);
  } else {
    _tile_loadd(0, sums, 64);
    if (b1) _tile_loadd(1, sums + ct, 64);
    if (a1) _tile_loadd(2, sums + 2 * ct, 64);
    if (a1 && b1) _tile_loadd(3, sums + 3 * ct, 64);
  }
  const uint16_t *a0p = zz_amx_a(j, g, s0), *a1p = zz_amx_a(j, g + 1, s0);
  const size_t ak = ZZ_AMX_TM * ZZ_AMX_KB, pg = (size_t)(j->in / ZZ_AMX_KB) * ak * 2; /* one tile step; a row group */
  if (a1 && b1) { /* the whole 2 × 2 (every tile but the edges') */
    for (int64_t s = 0; s < steps; s++) {
      if (pf)
        for (int l = 0; l < ZZ_AMX_PF_LINES; l++) {
          _mm_prefetch(pf + s * ak * 2 + (pl + l) * 64, _MM_HINT_T1);
          _mm_prefetch(pf + pg + s * ak * 2 + (pl + l) * 64, _MM_HINT_T1);
        }
      _tile_loadd(4, a0p + s * ak, 64);
      _tile_loadd(6, b0 + s * ak, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, b0 + blk + s * ak, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, a1p + s * ak, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  } else {
    for (int64_t s = 0; s < steps; s++) {
      _tile_loadd(4, a0p + s * ak, 64);
      _tile_loadd(6, b0 + s * ak, 64);
      _tile_dpbf16ps(0, 4, 6);
      if (b1) {
        _tile_loadd(7, b0 + blk + s * ak, 64);
        _tile_dpbf16ps(1, 4, 7);
      }
      if (a1) {
        _tile_loadd(5, a1p + s * ak, 64);
        _tile_dpbf16ps(2, 5, 6);
        if (b1) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  if (last) {
    float *y0 = j->y + r0 * j->out + c0, *y1 = y0 + ZZ_AMX_TM * j->out;
    _tile_stored(0, y0, ldy);
    if (b1) _tile_stored(1, y0 + ZZ_AMX_TM, ldy);
    if (a1) _tile_stored(2, y1, ldy);
    if (a1 && b1) _tile_stored(3, y1 + ZZ_AMX_TM, ldy);
  } else {
    _tile_stored(0, sums, 64);
    if (b1) _tile_stored(1, sums + ct, 64);
    if (a1) _tile_stored(2, sums + 2 * ct, 64);
    if (a1 && b1) _tile_stored(3, sums + 3 * ct, 64);
  }
}

/* One task: outputs t·ZZ_AMX_NB .. + ZZ_AMX_NB (fewer in the last), every row
 * of x. K blocks outside: the block's W panel packed once (zz_amx_pack_w, 64 KiB:
 * L2), then every pair of row groups (their A tiles, 16 KiB: L1 across the
 * panel's micro-kernels) times the panel's 32-output blocks; each output's
 * sum goes through y in f32 between K blocks (added in the same order whatever
 * the thread count). */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static void zz_amx_task(void *arg, int64_t t) {
  const zz_amx_job *j = arg;
  const int64_t c_lo = t * ZZ_AMX_NB, nw = j->out - c_lo < ZZ_AMX_NB ? j->out - c_lo : ZZ_AMX_NB;
  _Alignas(64) uint16_t pw[ZZ_AMX_NB * ZZ_AMX_KC];
  /* the sums between K blocks: 4 C tiles (4 KiB) per micro-kernel, in its order */
  float *sums = j->in > ZZ_AMX_KC ? zz_amx_sums((size_t)zz_amx_rows(j->n) * ZZ_AMX_NB * sizeof(float)) : NULL;
  zz_amx_cfg cfg;
  int key = -1; /* the configuration loaded: ma0, ma1, nb0, nb1 in 5 bits each */
  for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_AMX_KC) {
    const int64_t kc = j->in - k0 < ZZ_AMX_KC ? j->in - k0 : ZZ_AMX_KC;
    /* prefetch the rows' next K block, or the next task's panel (often this thread's next) */
    const size_t pf = k0 + kc < j->in                   ? (size_t)kc * sizeof(uint16_t)
                      : c_lo + nw + ZZ_AMX_NB <= j->out ? (size_t)(ZZ_AMX_NB * j->in - k0) * sizeof(uint16_t)
                                                        : 0;
    zz_amx_pack_w(j, c_lo, (int)nw, k0, kc, pf, pw);
    for (int64_t r0 = 0; r0 < j->n; r0 += ZZ_AMX_RB) {
      const int64_t rows = j->n - r0;
      const int ma0 = rows < ZZ_AMX_TM ? (int)rows : ZZ_AMX_TM;
      const int ma1 = rows - ma0 < ZZ_AMX_TM ? (int)(rows - ma0) : ZZ_AMX_TM;
      for (int64_t c = 0; c < nw; c += ZZ_AMX_CB) {
        const int nb0 = nw - c < ZZ_AMX_TM ? (int)(nw - c) : ZZ_AMX_TM;
        const int nb1 = nw - c - nb0 < ZZ_AMX_TM ? (int)(nw - c - nb0) : ZZ_AMX_TM;
        const int k = ma0 | ma1 << 5 | nb0 << 10 | nb1 << 15;
        if (k != key) {
          zz_amx_cfg_tiles(&cfg, ma0, ma1, nb0, nb1);
          _tile_loadconfig(&cfg);
          key = k;
        }
        const uint16_t *b0 = pw + (c / ZZ_AMX_TM) * (kc / ZZ_AMX_KB) * ZZ_AMX_TM * ZZ_AMX_KB;
        /* prefetch (into L2) a part of the next pair of row groups' A tiles at this K block */
        const char *pf = r0 + ZZ_AMX_RB < j->n ? (const char *)zz_amx_a(j, r0 / ZZ_AMX_TM + 2, k0 / ZZ_AMX_KB) : NULL;
        const int pl = (int)(c / ZZ_AMX_CB) * ZZ_AMX_PF_LINES % ZZ_AMX_TM;
        float *sm = sums ? sums + ((r0 / ZZ_AMX_RB) * (ZZ_AMX_NB / ZZ_AMX_CB) + c / ZZ_AMX_CB) * 4 * 256 : NULL;
        zz_amx_micro(j, r0, c_lo + c, k0 / ZZ_AMX_KB, kc / ZZ_AMX_KB, b0, ma1 > 0, nb1 > 0, k0 == 0, k0 + kc == j->in,
                     sm, pf, pl);
      }
    }
  }
  _tile_release();
  zz_bias_relu_cols(j->y, j->n, j->out, c_lo, nw, j->b, j->relu);
}
/* ---- The same packed tiles in zmm registers (AVX-512, no AMX)
 *
 * The A and B tiles above, multiplied by vector instructions: B's row p (dword
 * p of k: a pair of bf16 or one f32, 16 outputs) is a zmm as it lies, row r's
 * dword p of the A tile is broadcast into all lanes, and vdpbf16ps adds the
 * lane's two products to its output's sum (bf16, zz_dp_task), or vfmadd231ps
 * its product (f32, zz_fp_task). A micro-kernel holds ZZ_DP_R rows of x × nt B
 * tiles (16 outputs each) of sums in registers: per dword of k nt loads of W
 * and ZZ_DP_R broadcasts for ZZ_DP_R · nt multiply-adds, where the dot kernel's
 * 4 × 4 tile paid 8 loads for 16 and a reduction of 16 zmm per K block. Each
 * output is one chain over k ascending, through y in f32 between K blocks: the
 * bits depend on `in` alone (not on n, the K block or the thread count). f32:
 * fmaf(x_k, w_k, acc) from 0, the row-lane tile's chain, hence its bits;
 * bf16: vdpbf16ps's order, DAZ and FTZ as it always has them. The K block is
 * ZZ_AMX_KC bf16's bytes (a task's panel: 64 KiB). */
#define ZZ_DP_R 8  /* rows of x a micro-kernel: half an A tile */
#define ZZ_DP_NT 3 /* B tiles a micro-kernel at most: 48 outputs */

/* Rows r0 .. r0 + ZZ_DP_R (inside one A tile) × NT B tiles (outputs c0 ..,
 * the panel's tiles at b0, b0 + blk bytes, ...) over the K block's steps from
 * step s0; the sums start at 0 (first) or from y, and go back to y: rows < n,
 * the first nv outputs of the last tile (the others all 16). FMA(acc, x, w):
 * one dword's multiply-add. */
#define ZZ_DP_MICRO(name, tgt, vt, FMA)                                                                                \
  __attribute__((target(tgt))) static inline __attribute__((always_inline)) void name(                                 \
      const zz_amx_job *j, int64_t r0, int64_t c0, int64_t s0, int64_t steps, const char *b0, size_t blk,              \
      const int NT, int nv, int first) {                                                                               \
    __m512 acc[ZZ_DP_R][ZZ_DP_NT];                                                                                     \
    const int rows = j->n - r0 < ZZ_DP_R ? (int)(j->n - r0) : ZZ_DP_R;                                                 \
    __mmask16 mask[ZZ_DP_NT];                                                                                          \
    for (int t = 0; t < NT; t++) mask[t] = t == NT - 1 ? (__mmask16)((1u << nv) - 1) : (__mmask16)0xffff;              \
    float *y = j->y + r0 * j->out + c0;                                                                                \
    for (int r = 0; r < ZZ_DP_R; r++)                                                                                  \
      for (int t = 0; t < NT; t++)                                                                                     \
        acc[r][t] = first || r >= rows ? _mm512_setzero_ps()                                                           \
                                       : _mm512_maskz_loadu_ps(mask[t], y + r * j->out + 16 * t);                      \
    const uint32_t *a = (const uint32_t *)zz_amx_a(j, r0 / ZZ_AMX_TM, s0) + (r0 % ZZ_AMX_TM) * ZZ_AMX_TM;              \
    for (int64_t s = 0; s < steps; s++) {                                                                              \
      const uint32_t *as = a + s * ZZ_AMX_TM * ZZ_AMX_TM;                                                              \
      const char *bs = b0 + s * ZZ_AMX_TM * 64;                                                                        \
      for (int p = 0; p < ZZ_AMX_TM; p++) {                                                                            \
        vt w[ZZ_DP_NT];                                                                                                \
        for (int t = 0; t < NT; t++) w[t] = (vt)_mm512_load_si512(bs + t * blk + p * 64);                              \
        for (int r = 0; r < ZZ_DP_R; r++) {                                                                            \
          const vt xv = (vt)_mm512_set1_epi32((int)as[r * ZZ_AMX_TM + p]);                                             \
          for (int t = 0; t < NT; t++) acc[r][t] = FMA(acc[r][t], xv, w[t]);                                           \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
    for (int r = 0; r < rows; r++)                                                                                     \
      for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + r * j->out + 16 * t, mask[t], acc[r][t]);                 \
  }

#define ZZ_DP_BF16(acc, x, w) _mm512_dpbf16_ps(acc, x, w)
#define ZZ_DP_F32(acc, x, w) _mm512_fmadd_ps(x, w, acc)
ZZ_DP_MICRO(zz_dp_micro_bf16, "avx512f,avx512bf16,avx512bw", __m512bh, ZZ_DP_BF16)
ZZ_DP_MICRO(zz_dp_micro_f32, "avx512f", __m512, ZZ_DP_F32)

/* One micro-kernel of nt tiles (1 .. ZZ_DP_NT), the count a constant inside each. */
#define ZZ_DP_CALL(name, tgt, micro)                                                                                   \
  __attribute__((target(tgt))) static void name(const zz_amx_job *j, int64_t r0, int64_t c0, int64_t s0,               \
                                                int64_t steps, const char *b0, size_t blk, int nt, int nv,             \
                                                int first) {                                                           \
    if (nt == 3) micro(j, r0, c0, s0, steps, b0, blk, 3, nv, first);                                                   \
    else if (nt == 2)                                                                                                  \
      micro(j, r0, c0, s0, steps, b0, blk, 2, nv, first);                                                              \
    else                                                                                                               \
      micro(j, r0, c0, s0, steps, b0, blk, 1, nv, first);                                                              \
  }
_Static_assert(ZZ_DP_NT == 3, "ZZ_DP_CALL's counts");
ZZ_DP_CALL(zz_dp_bf16, "avx512f,avx512bf16,avx512bw", zz_dp_micro_bf16)
ZZ_DP_CALL(zz_dp_f32, "avx512f", zz_dp_micro_f32)

typedef void (*zz_dp_fn)(const zz_amx_job *j, int64_t r0, int64_t c0, int64_t s0, int64_t steps, const char *b0,
                         size_t blk, int nt, int nv, int first);

/* One task: outputs t·ZZ_AMX_NB .. (as zz_amx_task), K blocks outside, the
 * block's W panel packed once; then each group of 32 rows (their A tiles, 16 KiB:
 * L1) times the panel's blocks of ZZ_DP_NT B tiles, ZZ_DP_R rows at a time. */
static void zz_dp_run(const zz_amx_job *j, int64_t t, zz_dp_fn fn) {
  const int64_t c_lo = t * ZZ_AMX_NB, nw = j->out - c_lo < ZZ_AMX_NB ? j->out - c_lo : ZZ_AMX_NB;
  const int64_t kb = zz_amx_kb(j), kcb = ZZ_AMX_KC * (int64_t)sizeof(uint16_t) / j->esz; /* a K block's values */
  _Alignas(64) uint16_t pw[ZZ_AMX_NB * ZZ_AMX_KC];
  for (int64_t k0 = 0; k0 < j->in; k0 += kcb) {
    const int64_t kc = j->in - k0 < kcb ? j->in - k0 : kcb;
    const size_t pf = k0 + kc < j->in                   ? (size_t)kc * j->esz
                      : c_lo + nw + ZZ_AMX_NB <= j->out ? (size_t)(ZZ_AMX_NB * j->in - k0) * j->esz
                                                        : 0;
    zz_amx_pack_w(j, c_lo, (int)nw, k0, kc, pf, pw);
    const size_t blk = (size_t)(kc / kb) * ZZ_AMX_TM * 64; /* bytes of one B tile column of the panel */
    for (int64_t g0 = 0; g0 < j->n; g0 += ZZ_AMX_RB)
      for (int64_t c = 0; c < nw; c += ZZ_DP_NT * ZZ_AMX_TM) {
        const int64_t left = nw - c;
        const int nt = left >= ZZ_DP_NT * ZZ_AMX_TM ? ZZ_DP_NT : (int)((left + ZZ_AMX_TM - 1) / ZZ_AMX_TM);
        const int nv = (int)(left - (nt - 1) * ZZ_AMX_TM < ZZ_AMX_TM ? left - (nt - 1) * ZZ_AMX_TM : ZZ_AMX_TM);
        const char *b0 = (const char *)pw + (c / ZZ_AMX_TM) * blk;
        for (int64_t r0 = g0; r0 < g0 + ZZ_AMX_RB && r0 < j->n; r0 += ZZ_DP_R)
          fn(j, r0, c_lo + c, k0 / kb, kc / kb, b0, blk, nt, nv, k0 == 0);
      }
  }
  zz_bias_relu_cols(j->y, j->n, j->out, c_lo, nw, j->b, j->relu);
}

static void zz_dp_task(void *arg, int64_t t) { zz_dp_run(arg, t, zz_dp_bf16); }
static void zz_fp_task(void *arg, int64_t t) { zz_dp_run(arg, t, zz_dp_f32); }
#endif

void zz_amx_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                 int64_t out, float *y, int relu, void *xp,
                 void (*round_bf16)(const float *src, int64_t n, uint16_t *dst), bool amx) {
#ifdef ZZ_AMX_X86
  bool f32 = w_dt == ZZ_DTYPE_F32;
  zz_amx_job j = {.x = x,
                  .xp = xp,
                  .w = w,
                  .esz = f32 ? (int)sizeof(float) : (int)sizeof(uint16_t),
                  .b = b,
                  .y = y,
                  .n = n,
                  .in = in,
                  .out = out,
                  .relu = relu,
                  .round_bf16 = f32 ? NULL : round_bf16};
  zz_pool_run(pool, zz_amx_pack_x, &j, zz_amx_rows(n) / ZZ_AMX_TM);
  zz_pool_run(pool, f32 ? zz_fp_task : amx ? zz_amx_task : zz_dp_task, &j, (out + ZZ_AMX_NB - 1) / ZZ_AMX_NB);
#else
  (void)pool, (void)x, (void)n, (void)in, (void)w, (void)w_dt, (void)b, (void)out, (void)y, (void)relu, (void)xp;
  (void)round_bf16, (void)amx;
#endif
}
