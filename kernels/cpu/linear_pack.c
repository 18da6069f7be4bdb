/*
 * linear_pack.c — a packed f32 GEMM for many rows of x (prefill), BLIS style:
 * y[n, out] = x[n, in] · W[out, in]ᵀ (+ b) (then ReLU) for W in f32 or bf16.
 *
 * Why packed: the dot-product tiles of linear.c read each loaded value for 3-4
 * products (a dot tile's lanes run along K), which holds them near half of the
 * FMA peak; an outer-product tile (lanes along the outputs, x broadcast) of
 * ZZ_PK_MR rows × ZZ_PK_NR outputs keeps 12 ymm accumulators and loads 2 W
 * vectors and 6 x scalars for 12 FMA. For that, both operands are copied once
 * into the tile's order:
 *   x  into slivers of ZZ_PK_MR rows, k-major ([sliver][k][MR]), once per call
 *      on the pool (bf16: each value rounded to bf16 as it is copied);
 *   W  by each task, for its ZZ_PK_NC outputs and one K block of ZZ_PK_KC, into
 *      slivers of ZZ_PK_NR outputs ([sliver][k][NR]), bf16 widened (a shift),
 *      so W is read and widened once per call.
 * Loops (BLIS's): task = ZZ_PK_NC outputs (pool) → K block (ZZ_PK_KC; the W
 * sliver, 16 KiB, stays in L1) → ZZ_PK_MC rows of x (their packed K block,
 * 96 KiB, in L2) → W sliver → x sliver → micro-kernel.
 *
 * Numerics: each output is one chain of FMAs along K, K blocks ascending, each
 * block's chain starting from y (0 for the first): the order depends on K and
 * ZZ_PK_KC alone — not on n, the row's place in the batch, the tile, the task
 * or the thread count, and the portable kernel (fmaf) gives the same bits as
 * the AVX2 one. For bf16 W and bf16-rounded x every product is exact in f32, so
 * these are the bits of a plain sum in that order. Other bits than the dot
 * kernels (linear.c's paths below ZZ_BF16_PANEL_N rows) and than sgemm. The
 * row-lane tile at the end of this file (bf16 W, 16-127 rows, AVX2 or AVX-512) forms the
 * same chains, hence the same bits.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_cpu_kernels.h"
#include "zz_kernels.h"

#define ZZ_PK_MR 6  /* rows of x per register tile */
#define ZZ_PK_NR 16 /* outputs per register tile (2 ymm) */
#ifndef ZZ_PK_KC
#define ZZ_PK_KC 256 /* K block: a W sliver (NR × KC f32, 16 KiB) stays in L1 */
#endif
#ifndef ZZ_PK_MC
#define ZZ_PK_MC 96 /* rows of x per block: their packed K block (96 KiB) stays in L2 */
#endif
#ifndef ZZ_PK_PFA
#define ZZ_PK_PFA 192 /* floats of packed x fetched ahead in the micro-kernel */
#endif
#ifndef ZZ_PK_NC
#define ZZ_PK_NC 128 /* outputs per pool task: its packed W K block is 128 KiB */
#endif

/* ---------------------------------------------------------------- portable micro-kernel */

/* c[r][j] (+)= Σ_k a[k][r] · b[k][j] over kc, one fmaf chain per output; a:
 * [kc][MR], b: [kc][NR], c rows ldc apart; load: start from c, else from 0. */
static void zz_pk_micro_c(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load) {
  float acc[ZZ_PK_MR][ZZ_PK_NR];
  for (int r = 0; r < ZZ_PK_MR; r++)
    for (int j = 0; j < ZZ_PK_NR; j++) acc[r][j] = load ? c[r * ldc + j] : 0.0f;
  for (int64_t k = 0; k < kc; k++, a += ZZ_PK_MR, b += ZZ_PK_NR)
    for (int r = 0; r < ZZ_PK_MR; r++)
      for (int j = 0; j < ZZ_PK_NR; j++) acc[r][j] = fmaf(a[r], b[j], acc[r][j]);
  for (int r = 0; r < ZZ_PK_MR; r++)
    for (int j = 0; j < ZZ_PK_NR; j++) c[r * ldc + j] = acc[r][j];
}

/* ---------------------------------------------------------------- AVX2 micro-kernel */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZZ_PK_X86 1
#include <immintrin.h>

_Static_assert(ZZ_PK_NR == 16 && ZZ_PK_MR == 6, "the AVX2 tile is 6 rows x 2 ymm");

/* The 6 × 16 tile: 12 accumulators, 2 W vectors, x broadcast from memory.
 * Named registers, not an array: GCC kept an array of 12 in memory. */
__attribute__((target("avx2,fma"))) static void zz_pk_micro_avx2(int64_t kc, const float *a, const float *b, float *c,
                                                                 int64_t ldc, bool load) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (load) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  }
  /* one k step in asm: GCC's allocation of the intrinsics' version moved and
   * spilled accumulators inside the loop (0.5-0.65 of the peak, not 0.8) */
#define ZZ_PK_S(x) #x
#define ZZ_PK_ROW(R, AOFF)                                                                                             \
  "vbroadcastss " ZZ_PK_S(AOFF) "+" ZZ_PK_S(R) "*4(%[a]), %[v]\n\t"                                                    \
                                               "vfmadd231ps %[b0], %[v], %[c" ZZ_PK_S(                                 \
                                                   R) "0]\n\t"                                                         \
                                                      "vfmadd231ps %[b1], %[v], %[c" ZZ_PK_S(R) "1]\n\t"
#define ZZ_PK_STEP(U)                                                                                                  \
  __asm__("vmovaps " ZZ_PK_S(U) "*64(%[b]), %[b0]\n\t"                                                                 \
                                "vmovaps " ZZ_PK_S(U) "*64+32(%[b]), %[b1]\n\t" ZZ_PK_ROW(0, U * 24)                   \
                                    ZZ_PK_ROW(1, U * 24) ZZ_PK_ROW(2, U * 24) ZZ_PK_ROW(3, U * 24)                     \
                                        ZZ_PK_ROW(4, U * 24) ZZ_PK_ROW(5, U * 24)                                      \
          : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21),      \
            [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51),      \
            [b0] "=&x"(b0), [b1] "=&x"(b1), [v] "=&x"(v)                                                               \
          : [a] "r"(a), [b] "r"(b)                                                                                     \
          : "memory")
  __m256 b0, b1, v;
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4, a += 4 * ZZ_PK_MR, b += 4 * ZZ_PK_NR) {
    /* x's sliver comes from L2 (the W sliver stays in L1): fetch it ahead */
    _mm_prefetch((const char *)(a + ZZ_PK_PFA), _MM_HINT_T0);
    ZZ_PK_STEP(0);
    ZZ_PK_STEP(1);
    ZZ_PK_STEP(2);
    ZZ_PK_STEP(3);
  }
  for (; k < kc; k++, a += ZZ_PK_MR, b += ZZ_PK_NR) ZZ_PK_STEP(0);
#undef ZZ_PK_STEP
#undef ZZ_PK_ROW
#undef ZZ_PK_S
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* An 8 × 8 block of bf16 W (8 rows from src, 8 k each) widened into dst[k][0..8)
 * (rows ZZ_PK_NR floats apart): transposed in 16-bit lanes, each k's 8 values
 * widened by a shift. */
__attribute__((target("avx2"))) static void zz_pk_widen8x8(const uint16_t *const src[8], float *dst) {
  __m128i r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)src[i]);
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  /* t[0]: (r0,r1) k0..3, t[1]: (r0,r1) k4..7, t[2]: (r2,r3) k0..3, ... */
  __m128i u[8];
  for (int h = 0; h < 2; h++) {
    u[4 * h + 0] = _mm_unpacklo_epi32(t[h], t[2 + h]);     /* r0..3 at k 4h, 4h+1 */
    u[4 * h + 1] = _mm_unpackhi_epi32(t[h], t[2 + h]);     /* r0..3 at k 4h+2, 4h+3 */
    u[4 * h + 2] = _mm_unpacklo_epi32(t[4 + h], t[6 + h]); /* r4..7 at k 4h, 4h+1 */
    u[4 * h + 3] = _mm_unpackhi_epi32(t[4 + h], t[6 + h]);
  }
  for (int h = 0; h < 2; h++)
    for (int q = 0; q < 2; q++) {
      __m128i lo = _mm_unpacklo_epi64(u[4 * h + q], u[4 * h + 2 + q]); /* r0..7 at k 4h+2q */
      __m128i hi = _mm_unpackhi_epi64(u[4 * h + q], u[4 * h + 2 + q]); /* r0..7 at k 4h+2q+1 */
      int k = 4 * h + 2 * q;
      _mm256_storeu_ps(dst + k * ZZ_PK_NR, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(lo), 16)));
      _mm256_storeu_ps(dst + (k + 1) * ZZ_PK_NR, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(hi), 16)));
    }
}
#endif

/* ---------------------------------------------------------------- packing */

size_t zz_pk_x_bytes(int64_t n, int64_t in) {
  return (size_t)((n + ZZ_PK_MR - 1) / ZZ_PK_MR * ZZ_PK_MR) * (size_t)in * sizeof(float);
}

typedef struct zz_pk_job {
  const float *x; /* [n, in] */
  /* packed x: K blocks of ZZ_PK_KC, each [n / MR (up)][kc][MR] (zz_pk_x_at),
   * rows past n zero; a block's slivers are contiguous, so the rows of an MC
   * block sit in L2 together (slivers a row of x apart all fell into the same
   * cache sets and evicted each other) */
  float *xp;
  const char *w;  /* [out, in], f32 or bf16 */
  const float *b; /* [out] or NULL */
  float *y;       /* [n, out], rows ldy apart (the row-lane tile; the packed GEMM: out) */
  int64_t n, in, out;
  int relu;
  bool bf16;
  void (*micro)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load);
  void (*widen8x8)(const uint16_t *const src[8], float *dst); /* NULL: scalar widening */
  int64_t ldy;
} zz_pk_job;

/* Bytes of one W element. */
static inline size_t zz_pk_esz(const zz_pk_job *j) { return j->bf16 ? sizeof(uint16_t) : sizeof(float); }

/* f rounded to bf16 and widened back (zz_f32_to_bf16's rounding, inline) */
static inline float zz_pk_round(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u = zz_bf16_round_bits(u) & 0xffff0000u;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The packed K block k0 of x's sliver s (rows s·MR .. +MR): [kc][MR]. */
static float *zz_pk_x_at(const zz_pk_job *j, int64_t s, int64_t k0) {
  int64_t rows = (j->n + ZZ_PK_MR - 1) / ZZ_PK_MR * ZZ_PK_MR, kc = j->in - k0 < ZZ_PK_KC ? j->in - k0 : ZZ_PK_KC;
  return j->xp + k0 * rows + s * kc * ZZ_PK_MR;
}

/* ZZ_PK_XTASK slivers of x per pool task */
#define ZZ_PK_XTASK 4

static void zz_pk_pack_x(void *arg, int64_t t) {
  const zz_pk_job *j = arg;
  int64_t slivers = (j->n + ZZ_PK_MR - 1) / ZZ_PK_MR;
  for (int64_t s = t * ZZ_PK_XTASK; s < slivers && s < (t + 1) * ZZ_PK_XTASK; s++) {
    for (int r = 0; r < ZZ_PK_MR; r++) {
      int64_t i = s * ZZ_PK_MR + r;
      const float *src = i < j->n ? j->x + i * j->in : NULL; /* NULL: a row past n, zeros */
      for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_PK_KC) {
        int64_t kc = j->in - k0 < ZZ_PK_KC ? j->in - k0 : ZZ_PK_KC;
        float *d = zz_pk_x_at(j, s, k0) + r;
        for (int64_t k = 0; k < kc; k++) {
          float v = 0.0f;
          if (src) v = j->bf16 ? zz_pk_round(src[k0 + k]) : src[k0 + k];
          d[k * ZZ_PK_MR] = v;
        }
      }
    }
  }
}

/* W rows c0 .. c0 + nr (nr <= NR), K block k0 .. k0 + kc, into dst [kc][NR],
 * rows past nr zero. */
static void zz_pk_pack_w(const zz_pk_job *j, int64_t c0, int nr, int64_t k0, int64_t kc, float *dst) {
  size_t row = (size_t)j->in * zz_pk_esz(j);
  int64_t k = 0;
  if (j->bf16 && j->widen8x8 && nr == ZZ_PK_NR)
    for (; k + 8 <= kc; k += 8)
      for (int h = 0; h < ZZ_PK_NR; h += 8) {
        const uint16_t *src[8];
        for (int c = 0; c < 8; c++) src[c] = (const uint16_t *)(j->w + (size_t)(c0 + h + c) * row) + k0 + k;
        j->widen8x8(src, dst + k * ZZ_PK_NR + h); /* columns h .. h+8 of rows k .. k+8 */
      }
  for (int c = 0; c < ZZ_PK_NR; c++) {
    const char *src = j->w + (size_t)(c0 + c) * row;
    for (int64_t q = k; q < kc; q++) {
      float v = 0.0f;
      if (c < nr) {
        if (j->bf16) v = zz_bf16_to_f32(((const uint16_t *)src)[k0 + q]);
        else
          v = ((const float *)src)[k0 + q];
      }
      dst[q * ZZ_PK_NR + c] = v;
    }
  }
}

/* The micro-kernel on a tile of mr × nr valid outputs: whole tiles in place,
 * edge tiles through a full tile on the stack (the same chain per output). */
static void zz_pk_tile(const zz_pk_job *j, int64_t kc, const float *a, const float *bp, float *c, int mr, int nr,
                       bool load) {
  if (mr == ZZ_PK_MR && nr == ZZ_PK_NR) {
    j->micro(kc, a, bp, c, j->out, load);
    return;
  }
  float t[ZZ_PK_MR * ZZ_PK_NR] = {0};
  for (int r = 0; r < mr; r++)
    for (int q = 0; q < nr; q++) t[r * ZZ_PK_NR + q] = load ? c[r * j->out + q] : 0.0f;
  j->micro(kc, a, bp, t, ZZ_PK_NR, load);
  for (int r = 0; r < mr; r++)
    for (int q = 0; q < nr; q++) c[r * j->out + q] = t[r * ZZ_PK_NR + q];
}

/* One task: outputs t·NC .. +NC, every row of x, every K block. */
static void zz_pk_task(void *arg, int64_t t) {
  const zz_pk_job *j = arg;
  int64_t c_lo = t * ZZ_PK_NC, c_hi = c_lo + ZZ_PK_NC < j->out ? c_lo + ZZ_PK_NC : j->out;
  /* this task's W, one K block, in slivers: 128 KiB on the stack (pool workers
   * and callers run on default 8 MiB thread stacks), no allocation per call */
  _Alignas(64) float bp[ZZ_PK_NC * ZZ_PK_KC];
  for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_PK_KC) {
    int64_t kc = j->in - k0 < ZZ_PK_KC ? j->in - k0 : ZZ_PK_KC;
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_PK_NR) {
      int nr = c_hi - c0 < ZZ_PK_NR ? (int)(c_hi - c0) : ZZ_PK_NR;
      zz_pk_pack_w(j, c0, nr, k0, kc, bp + (c0 - c_lo) * kc);
    }
    for (int64_t m0 = 0; m0 < j->n; m0 += ZZ_PK_MC) {
      int64_t m1 = j->n - m0 < ZZ_PK_MC ? j->n : m0 + ZZ_PK_MC;
      for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_PK_NR) {
        int nr = c_hi - c0 < ZZ_PK_NR ? (int)(c_hi - c0) : ZZ_PK_NR;
        const float *bs = bp + (c0 - c_lo) * kc;
        for (int64_t i0 = m0; i0 < m1; i0 += ZZ_PK_MR) {
          int mr = m1 - i0 < ZZ_PK_MR ? (int)(m1 - i0) : ZZ_PK_MR;
          const float *a = zz_pk_x_at(j, i0 / ZZ_PK_MR, k0);
          /* the next tile's rows of y (all of this task's y does not stay in
           * L2 between K blocks): fetched while this tile runs, not waited on */
          for (int64_t r = i0 + ZZ_PK_MR; k0 > 0 && r < i0 + 2 * ZZ_PK_MR && r < m1; r++)
            __builtin_prefetch(j->y + r * j->out + c0, 1);
          zz_pk_tile(j, kc, a, bs, j->y + i0 * j->out + c0, mr, nr, k0 > 0);
        }
      }
    }
  }
  zz_bias_relu_cols(j->y, j->n, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
}

void zz_pk_gemm(zz_pool *pool, bool vector, const float *x, int64_t n, int64_t in, const void *w, bool w_bf16,
                const float *b, int64_t out, float *y, int relu, float *xp) {
  zz_pk_job j = {.x = x, .xp = xp, .w = w, .b = b, .y = y, .n = n, .in = in, .out = out, .ldy = out, .relu = relu};
  j.bf16 = w_bf16, j.micro = zz_pk_micro_c;
#ifdef ZZ_PK_X86
  if (vector) j.micro = zz_pk_micro_avx2, j.widen8x8 = zz_pk_widen8x8;
#else
  (void)vector;
#endif
  int64_t slivers = (n + ZZ_PK_MR - 1) / ZZ_PK_MR;
  zz_pool_run(pool, zz_pk_pack_x, &j, (slivers + ZZ_PK_XTASK - 1) / ZZ_PK_XTASK);
  zz_pool_run(pool, zz_pk_task, &j, (out + ZZ_PK_NC - 1) / ZZ_PK_NC);
}

/* ---------------------------------------------------------------- row-lane GEMM (16-127 rows, AVX2, bf16 W) */
/*
 * At 16-127 rows of x the packed GEMM above spends a third of its time widening
 * and transposing W into its slivers (each widened value is used by n rows
 * only). This tile turns the layout around: its lanes run along 16 rows of x
 * (x packed once per call into [K block][group][k][16]) and W is broadcast
 * straight from its bf16 rows, 6 outputs a tile: a 32-bit load ending at the
 * element (the element and the one before it) masked to its upper half is the
 * element widened to f32, so W is never copied. 12 accumulators (6 outputs × 2
 * × 8 rows), per k 2 x loads, 6 broadcasts, 6 ANDs, 12 FMA.
 *
 * Numerics: each output is still one FMA chain along k ascending from 0 (the
 * first product is fma(x, w, 0), as the packed GEMM's first block forms it;
 * storing and reloading a partial sum is exact), so this gives the packed
 * GEMM's bits — its portable kernel is this tile's reference — whatever the
 * K block, the group, the task or the thread count.
 */
#define ZZ_RL_MR 16 /* rows of x per tile (2 ymm of lanes) */
#define ZZ_RL_NR 6  /* outputs per tile (broadcast from W) */
#ifndef ZZ_RL_KC
#define ZZ_RL_KC 512 /* K block: a group's packed x block is 32 KiB, a tile's W piece 6 KiB */
#endif
#define ZZ_RL_PANELS 8  /* tiles of outputs per pool task (48 outputs) */
#define ZZ_RL_SLICE 512 /* most rows of x per pass over W (zz_rl_slice) */
#define ZZ_RL_GROUPS (ZZ_RL_SLICE / ZZ_RL_MR)
#ifndef ZZ_RL_SLICE_BYTES
#define ZZ_RL_SLICE_BYTES (8 << 20) /* most bytes of packed x per pass over W */
#endif

/* The packed x's start in the caller's buffer: its first line (zz_cpu_line_up).
 * The tiles load x a line at a time (AVX-512: a zmm, 16 rows of one k); from
 * a buffer that malloc aligns to 16 bytes every load spanned two lines (bf16
 * at 512-2048 rows, one process: 0.94x of the aligned time). */
static inline float *zz_rl_xp(float *xp) { return zz_cpu_line_up(xp); }

/* Rows of x per pass over W for rows of `in`: as many as fit ZZ_RL_SLICE_BYTES
 * packed, whole pairs of groups, at most ZZ_RL_SLICE. Every task reads the
 * slice's packed x once from L3 (each unit's piece of it then serves its
 * tiles from L2) and W is read from memory and widened once per slice, so
 * the slice is as long as L3 keeps it: bf16 at 512 rows in one process,
 * slices of 512 rows against 128 gave 1.02-1.09x where x's slice is 8 MiB
 * (K = 4096) and 0.91x where it is 22 MiB (K = 11008, against 160-192 rows). */
static inline int64_t zz_rl_slice(int64_t in) {
  const int64_t pair = 2 * ZZ_RL_MR,
                rows = ZZ_RL_SLICE_BYTES / (int64_t)sizeof(float) / (in > 0 ? in : 1) / pair * pair;
  return rows < pair ? pair : rows > ZZ_RL_SLICE ? ZZ_RL_SLICE : rows;
}

size_t zz_pk_rl_x_bytes(int64_t n, int64_t in) {
  if (n > ZZ_RL_SLICE) n = ZZ_RL_SLICE;
  return (size_t)((n + ZZ_RL_MR - 1) / ZZ_RL_MR * ZZ_RL_MR) * (size_t)in * sizeof(float) + ZZ_CPU_LINE;
}

#ifdef ZZ_PK_X86
/* The first element of each W row piece widened: the loop's first k apart. */
static inline float zz_rl_w0_bf16(const void *p) { return zz_bf16_to_f32(*(const uint16_t *)p); }
static inline float zz_rl_w0_f32(const void *p) { return *(const float *)p; }

/* One output's step per dtype (asm text): W's element k of output O into ymm14
 * as f32, then 2 FMA into accumulators C0, C1 (16 rows). bf16: a 32-bit load
 * ending at the element (it and the one before) masked to its upper half (ymm15)
 * is the element widened; f32: the element as it is. */
/* clang-format off */
#define ZZ_RL_OUT_BF16(O, C0, C1)                                                                                      \
  "vbroadcastss -2(%[w" #O "],%[k],2), %%ymm14\n\t"                                                                    \
  "vandps %%ymm15, %%ymm14, %%ymm14\n\t"                                                                               \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm" #C0 "\n\t"                                                                     \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm" #C1 "\n\t"
#define ZZ_RL_OUT_F32(O, C0, C1)                                                                                       \
  "vbroadcastss (%[w" #O "],%[k],4), %%ymm14\n\t"                                                                      \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm" #C0 "\n\t"                                                                     \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm" #C1 "\n\t"
/* clang-format on */

/* clang-format off */
/* t[o][r] (+)= Σ_k x_r[k] · w_o[k], k < kc, for 6 outputs and 16 rows: a [kc][16]
 * (x's packed group), w[o] the row of output o at the block's first k (bf16 or
 * f32: W0 reads its element 0, OUT is its asm step), t [6][16] the running sums
 * (first: none yet, the chain starts at k = 0). One body for both weight dtypes:
 * only the W load differs. */
#define ZZ_RL_MICRO(name, W0, OUT)                                                                                     \
  __attribute__((target("avx2,fma"))) static void name(int64_t kc, const float *a, const void *const w[ZZ_RL_NR],      \
                                                       float *t, bool first) {                                         \
    int64_t k = 0;                                                                                                     \
    if (first) {                                                                                                       \
      /* k = 0 apart, as fma(x, w, 0): the bf16 loop's 32-bit load reads the                                           \
       * element before, which for the first element of W is outside it */                                            \
      __m256 x0 = _mm256_loadu_ps(a), x1 = _mm256_loadu_ps(a + 8), z = _mm256_setzero_ps();                            \
      for (int o = 0; o < ZZ_RL_NR; o++) {                                                                             \
        __m256 v = _mm256_set1_ps(W0(w[o]));                                                                           \
        _mm256_storeu_ps(t + o * ZZ_RL_MR, _mm256_fmadd_ps(x0, v, z));                                                 \
        _mm256_storeu_ps(t + o * ZZ_RL_MR + 8, _mm256_fmadd_ps(x1, v, z));                                             \
      }                                                                                                                \
      k = 1, a += ZZ_RL_MR;                                                                                            \
    }                                                                                                                  \
    if (k >= kc) return;                                                                                               \
    static const uint32_t mask = 0xffff0000u;                                                                          \
    /* the whole loop in one asm block: 12 accumulators named (ymm0-11), as the                                        \
     * 6 × 16 tile above learned GCC otherwise spills them */                                                          \
    __asm__ volatile(                                                                                                  \
        "vmovups 0(%[t]), %%ymm0\n\t"    "vmovups 32(%[t]), %%ymm1\n\t"                                                   \
        "vmovups 64(%[t]), %%ymm2\n\t"   "vmovups 96(%[t]), %%ymm3\n\t"                                                   \
        "vmovups 128(%[t]), %%ymm4\n\t"  "vmovups 160(%[t]), %%ymm5\n\t"                                                  \
        "vmovups 192(%[t]), %%ymm6\n\t"  "vmovups 224(%[t]), %%ymm7\n\t"                                                  \
        "vmovups 256(%[t]), %%ymm8\n\t"  "vmovups 288(%[t]), %%ymm9\n\t"                                                  \
        "vmovups 320(%[t]), %%ymm10\n\t" "vmovups 352(%[t]), %%ymm11\n\t"                                                 \
        "vbroadcastss (%[m]), %%ymm15\n\t"                                                                             \
        "1:\n\t"                                                                                                       \
        "vmovups (%[a]), %%ymm12\n\t"                                                                                  \
        "vmovups 32(%[a]), %%ymm13\n\t"                                                                                \
        OUT(0, 0, 1) OUT(1, 2, 3) OUT(2, 4, 5) OUT(3, 6, 7) OUT(4, 8, 9) OUT(5, 10, 11)                               \
        "add $64, %[a]\n\t"                                                                                            \
        "inc %[k]\n\t"                                                                                                 \
        "cmp %[kc], %[k]\n\t"                                                                                          \
        "jb 1b\n\t"                                                                                                    \
        "vmovups %%ymm0, 0(%[t])\n\t"    "vmovups %%ymm1, 32(%[t])\n\t"                                                   \
        "vmovups %%ymm2, 64(%[t])\n\t"   "vmovups %%ymm3, 96(%[t])\n\t"                                                   \
        "vmovups %%ymm4, 128(%[t])\n\t"  "vmovups %%ymm5, 160(%[t])\n\t"                                                  \
        "vmovups %%ymm6, 192(%[t])\n\t"  "vmovups %%ymm7, 224(%[t])\n\t"                                                  \
        "vmovups %%ymm8, 256(%[t])\n\t"  "vmovups %%ymm9, 288(%[t])\n\t"                                                  \
        "vmovups %%ymm10, 320(%[t])\n\t" "vmovups %%ymm11, 352(%[t])\n\t"                                                 \
                     : [a] "+r"(a), [k] "+r"(k)                                                                        \
                     : [kc] "r"(kc), [t] "r"(t), [m] "r"(&mask), [w0] "r"(w[0]), [w1] "r"(w[1]), [w2] "r"(w[2]),       \
                       [w3] "r"(w[3]), [w4] "r"(w[4]), [w5] "r"(w[5])                                                  \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",        \
                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");                                   \
  }
/* clang-format on */

ZZ_RL_MICRO(zz_rl_micro_bf16, zz_rl_w0_bf16, ZZ_RL_OUT_BF16)
ZZ_RL_MICRO(zz_rl_micro_f32, zz_rl_w0_f32, ZZ_RL_OUT_F32)
#undef ZZ_RL_MICRO
#undef ZZ_RL_OUT_BF16
#undef ZZ_RL_OUT_F32

/*
 * The AVX-512 tile (AVX-512 F without vdpbf16ps): a zmm holds the 16 rows of a
 * group, one x load per k. Widening bf16 in registers as above (a broadcast and
 * an AND per output and k) would cost as many 512-bit ops as the FMAs (a
 * Cascade Lake has two such ports, both taken by FMA), so each task widens a
 * piece of ZZ_RL5_NR outputs × ZZ_RL5_KS of W once into an L1 buffer
 * [NR][KS] (f32 W: copied), and every group of rows reads it there, each FMA
 * broadcasting its W element from memory ({1to16}): per k one x load and 24
 * FMA, no other vector op. Each output is the same FMA chain along k from 0
 * (a chain starting at 0 is fma(x, w, 0) at k = 0): the AVX2 tile's bits.
 */
#define ZZ_RL5_NR 24 /* outputs per tile: 24 accumulators, x in zmm24 */
#ifndef ZZ_RL5_KS
#define ZZ_RL5_KS 128 /* K piece: the widened W piece (12 KiB) and a group's x piece (8 KiB) share L1 */
#endif
#ifndef ZZ_RL5_PFA
#define ZZ_RL5_PFA 1024 /* bytes of packed x fetched ahead (16 k steps) */
#endif
#define ZZ_RL_TASK (ZZ_RL_PANELS * ZZ_RL_NR) /* outputs per pool task, both tiles */
_Static_assert(ZZ_RL_TASK % ZZ_RL5_NR == 0 && ZZ_RL_KC % ZZ_RL5_KS == 0, "the AVX-512 tile divides a task and a block");

/* clang-format off */
#define ZZ_RL5_ACC(O, OP) OP " " #O "*64(%[t]), %%zmm" #O "\n\t"
#define ZZ_RL5_ST(O) "vmovups %%zmm" #O ", " #O "*64(%[t])\n\t"
#define ZZ_RL5_S(v) #v
#define ZZ_RL5_X(v) ZZ_RL5_S(v)
#define ZZ_RL5_FMA(O) "vfmadd231ps " #O "*" ZZ_RL5_X(ZZ_RL5_KS) "*4(%[w])%{1to16%}, %%zmm24, %%zmm" #O "\n\t"
/* One line of the W rows widened next, fetched at each k step: q walks the
 * call's rows (pf, pf + pfs, … below qend), ZZ_RL5_PF_STEPS lines of pfl
 * bytes each (bf16: the row's 256 bytes of the piece; f32 every other line),
 * then stops (pfl set to 0). 4 µops a step: the same walk computed from k (a multiply for the
 * row) took 13, and left the 32-row tile bound by the 4-wide front end. With
 * the rows' lines spread over the loop, the next pieces arrive while this one
 * is multiplied (decode at batch 16: 1.1-1.5x over no fetch, where the widening
 * had been half the time, waiting on memory). Into L2, where the widening
 * reads them soon after: into L1 they crowded out x and the W buffer (1.00-1.04x
 * for L2, in one process, 16-512 rows). */
#define ZZ_RL5_PF_STEPS 4 /* k steps (and lines) per W row of the walk */
#define ZZ_RL5_PF                                             \
  "test %[pfl], %[pfl]\n\t"                                  \
  "jz 2f\n\t"                                                \
  "prefetcht1 (%[q])\n\t"                                    \
  "add %[pfl], %[q]\n\t"                                     \
  "dec %[c]\n\t"                                             \
  "jnz 2f\n\t"                                               \
  "add %[jump], %[q]\n\t"                                    \
  "mov $" ZZ_RL5_X(ZZ_RL5_PF_STEPS) ", %[c]\n\t"               \
  "cmp %[qend], %[q]\n\t"                                    \
  "jb 2f\n\t"                                                \
  "xor %k[pfl], %k[pfl]\n\t"                                 \
  "2:\n\t"
/* The walk's registers for rows rows of pf (ZZ_RL5_PF). */
#define ZZ_RL5_PF_VARS(rows)                                                                                           \
  const char *q = pf, *qend = pf + (rows) * pfs;                                                                       \
  int64_t c = ZZ_RL5_PF_STEPS, jump = pfs - ZZ_RL5_PF_STEPS * pfl
#define ZZ_RL5_ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) \
  M(12) M(13) M(14) M(15) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23)
#define ZZ_RL5_LD(O) ZZ_RL5_ACC(O, "vmovups")
/* t[o][r] += Σ_{k<len} a[k][r] · w[o][k] for 24 outputs and 16 rows: a [len][16]
 * (x's packed group, from L2: fetched ahead, which took the tile at 64 rows
 * from 0.42-0.55 to 0.55-0.6 of the FMA peak), w the widened piece
 * [24][ZZ_RL5_KS], t [24][16] the running sums (zero before the first k of a
 * chain); pf, pfs, pfl: the 24 W rows to fetch (ZZ_RL5_PF). The weight
 * operands are base + displacement: an indexed one splits each FMA in two
 * µops at issue (1.0-1.1x at 16 rows). */
__attribute__((target("avx512f"))) static void zz_rl5_micro(int64_t len, const float *a, const float *w, float *t,
                                                            const char *pf, int64_t pfs, int64_t pfl) {
  const float *end = a + len * ZZ_RL_MR;
  ZZ_RL5_PF_VARS(ZZ_RL5_NR);
  __asm__ volatile(
      ZZ_RL5_ALL(ZZ_RL5_LD)
      "1:\n\t"
      "prefetcht0 " ZZ_RL5_X(ZZ_RL5_PFA) "(%[a])\n\t"
      ZZ_RL5_PF
      "vmovups (%[a]), %%zmm24\n\t"
      ZZ_RL5_ALL(ZZ_RL5_FMA)
      "add $64, %[a]\n\t"
      "add $4, %[w]\n\t"
      "cmp %[end], %[a]\n\t"
      "jb 1b\n\t"
      ZZ_RL5_ALL(ZZ_RL5_ST)
      : [a] "+r"(a), [w] "+r"(w), [q] "+r"(q), [c] "+r"(c), [pfl] "+r"(pfl)
      : [end] "r"(end), [t] "r"(t), [jump] "r"(jump), [qend] "r"(qend)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
        "cc", "memory");
}

/* The same for two groups (32 rows) and 12 outputs: t0, t1 [12][16] the two
 * groups' sums, a the first group's x, a + gs floats the second's, and
 * the 12 W rows to fetch. Each W
 * element is broadcast once (a load) for two FMAs, so per k 14 loads feed 24
 * FMA (the 24-output tile: 25 loads, more than the two load ports keep up with). */
#define ZZ_RL5_LD2(O) ZZ_RL5_ACC2(O, "vmovups")
#define ZZ_RL5_ACC2(O, OP) OP " " #O "*64(%[t0]), %%zmm" #O "\n\t" OP " " #O "*64(%[t1]), %%zmm1" #O "\n\t"
#define ZZ_RL5_ST2(O) "vmovups %%zmm" #O ", " #O "*64(%[t0])\n\t" "vmovups %%zmm1" #O ", " #O "*64(%[t1])\n\t"
#define ZZ_RL5_FMA2(O) "vbroadcastss " #O "*" ZZ_RL5_X(ZZ_RL5_KS) "*4(%[w]), %%zmm24\n\t" \
  "vfmadd231ps %%zmm24, %%zmm22, %%zmm" #O "\n\t" "vfmadd231ps %%zmm24, %%zmm23, %%zmm1" #O "\n\t"
#define ZZ_RL5_ALL2(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9)
__attribute__((target("avx512f"))) static void zz_rl5_micro2(int64_t len, const float *a, int64_t gs, const float *w,
                                                             float *t0, float *t1, const char *pf, int64_t pfs,
                                                             int64_t pfl) {
  const float *end = a + len * ZZ_RL_MR;
  ZZ_RL5_PF_VARS(ZZ_RL5_NR / 2);
  /* outputs 0-9 in zmm0-9 / zmm10-19 (the "1" prefix), 10-11 in zmm20-21 / zmm25-26 */
  __asm__ volatile(
      ZZ_RL5_ALL2(ZZ_RL5_LD2)
      "vmovups 640(%[t0]), %%zmm20\n\t" "vmovups 704(%[t0]), %%zmm21\n\t"
      "vmovups 640(%[t1]), %%zmm25\n\t" "vmovups 704(%[t1]), %%zmm26\n\t"
      "1:\n\t"
      "prefetcht0 " ZZ_RL5_X(ZZ_RL5_PFA) "(%[a])\n\t"
      "prefetcht0 " ZZ_RL5_X(ZZ_RL5_PFA) "(%[a],%[gs],4)\n\t"
      ZZ_RL5_PF
      "vmovups (%[a]), %%zmm22\n\t"
      "vmovups (%[a],%[gs],4), %%zmm23\n\t"
      ZZ_RL5_ALL2(ZZ_RL5_FMA2)
      "vbroadcastss 10*" ZZ_RL5_X(ZZ_RL5_KS) "*4(%[w]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm22, %%zmm20\n\t" "vfmadd231ps %%zmm24, %%zmm23, %%zmm25\n\t"
      "vbroadcastss 11*" ZZ_RL5_X(ZZ_RL5_KS) "*4(%[w]), %%zmm24\n\t"
      "vfmadd231ps %%zmm24, %%zmm22, %%zmm21\n\t" "vfmadd231ps %%zmm24, %%zmm23, %%zmm26\n\t"
      "add $64, %[a]\n\t"
      "add $4, %[w]\n\t"
      "cmp %[end], %[a]\n\t"
      "jb 1b\n\t"
      ZZ_RL5_ALL2(ZZ_RL5_ST2)
      "vmovups %%zmm20, 640(%[t0])\n\t" "vmovups %%zmm21, 704(%[t0])\n\t"
      "vmovups %%zmm25, 640(%[t1])\n\t" "vmovups %%zmm26, 704(%[t1])\n\t"
      : [a] "+r"(a), [w] "+r"(w), [q] "+r"(q), [c] "+r"(c), [pfl] "+r"(pfl)
      : [end] "r"(end), [gs] "r"(gs), [t0] "r"(t0), [t1] "r"(t1), [jump] "r"(jump), [qend] "r"(qend)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
        "xmm25", "xmm26", "cc", "memory");
}
#undef ZZ_RL5_ALL2
#undef ZZ_RL5_FMA2
#undef ZZ_RL5_ST2
#undef ZZ_RL5_ACC2
#undef ZZ_RL5_LD2
#undef ZZ_RL5_ALL
#undef ZZ_RL5_LD
#undef ZZ_RL5_FMA
#undef ZZ_RL5_PF
#undef ZZ_RL5_PF_VARS
#undef ZZ_RL5_X
#undef ZZ_RL5_S
#undef ZZ_RL5_ST
#undef ZZ_RL5_ACC
/* clang-format on */

/* W rows w[o] (o < 24; bf16 or f32), elements 0 .. len, into dst [24][ZZ_RL5_KS] as f32. */
__attribute__((target("avx512f"))) static void zz_rl5_widen(const void *const w[ZZ_RL5_NR], bool bf16, int64_t len,
                                                            float *dst) {
  for (int o = 0; o < ZZ_RL5_NR; o++) {
    float *d = dst + o * ZZ_RL5_KS;
    if (!bf16) {
      memcpy(d, w[o], (size_t)len * sizeof(float));
      continue;
    }
    const uint16_t *src = w[o];
    int64_t k = 0;
    for (; k + 16 <= len; k += 16)
      _mm512_store_ps(d + k, _mm512_castsi512_ps(_mm512_slli_epi32(
                                 _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + k))), 16)));
    for (; k < len; k++) d[k] = zz_bf16_to_f32(src[k]);
  }
}

/* The packed K block k0 of x's group g: [kc][16]. */
static float *zz_rl_x_at(const zz_pk_job *j, int64_t g, int64_t k0) {
  int64_t rows = (j->n + ZZ_RL_MR - 1) / ZZ_RL_MR * ZZ_RL_MR, kc = j->in - k0 < ZZ_RL_KC ? j->in - k0 : ZZ_RL_KC;
  return j->xp + k0 * rows + g * kc * ZZ_RL_MR;
}

/* x's group g (rows 16g .. +16) into its packed blocks (rounded to bf16 for bf16 W); rows past n zero. */
static void zz_rl_pack_x(void *arg, int64_t g) {
  const zz_pk_job *j = arg;
  for (int r = 0; r < ZZ_RL_MR; r++) {
    int64_t i = g * ZZ_RL_MR + r;
    const float *src = i < j->n ? j->x + i * j->in : NULL;
    for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_RL_KC) {
      int64_t kc = j->in - k0 < ZZ_RL_KC ? j->in - k0 : ZZ_RL_KC;
      float *d = zz_rl_x_at(j, g, k0) + r;
      for (int64_t k = 0; k < kc; k++) d[k * ZZ_RL_MR] = !src ? 0.0f : j->bf16 ? zz_pk_round(src[k0 + k]) : src[k0 + k];
    }
  }
}

/* The task's outputs for pool task t: [*c_lo, *c_hi). */
static void zz_rl_span(const zz_pk_job *j, int64_t t, int64_t *c_lo, int64_t *c_hi) {
  *c_lo = t * ZZ_RL_TASK;
  *c_hi = *c_lo + ZZ_RL_TASK < j->out ? *c_lo + ZZ_RL_TASK : j->out;
}

/* A task's sums of group g, tile p (of nr outputs): acc holds per group
 * ZZ_RL_TASK / nr tiles, each [nr][16]. */
static inline float *zz_rl_sums(float *acc, int64_t g, int64_t p, int nr) {
  return acc + (g * (ZZ_RL_TASK / nr) + p) * nr * ZZ_RL_MR;
}

/* A task's sums written to y, then the bias and ReLU. */
static void zz_rl_store(const zz_pk_job *j, float *acc, int64_t c_lo, int64_t c_hi, int nr) {
  int64_t groups = (j->n + ZZ_RL_MR - 1) / ZZ_RL_MR;
  for (int64_t g = 0; g < groups; g++)
    for (int64_t p = 0; p * nr < c_hi - c_lo; p++) {
      const float *s = zz_rl_sums(acc, g, p, nr);
      for (int r = 0; r < ZZ_RL_MR && g * ZZ_RL_MR + r < j->n; r++)
        for (int o = 0; o < nr && c_lo + p * nr + o < c_hi; o++)
          j->y[(g * ZZ_RL_MR + r) * j->ldy + c_lo + p * nr + o] = s[o * ZZ_RL_MR + r];
    }
  zz_bias_relu_cols(j->y, j->n, j->ldy, c_lo, c_hi - c_lo, j->b, j->relu);
}

/* The row of W of output c (clamped into the task: a tile past its end repeats
 * the last output, whose copies are not stored) at element k0. */
static const void *zz_rl_w_at(const zz_pk_job *j, int64_t c, int64_t c_hi, int64_t k0) {
  size_t esz = zz_pk_esz(j);
  return j->w + (size_t)(c < c_hi ? c : c_hi - 1) * (size_t)j->in * esz + (size_t)k0 * esz;
}

/* One task: outputs t·48 .. +48, every row of x, every K block; the sums of its
 * tiles kept in acc (lanes along rows) until the last block, then written to y. */
static void zz_rl_task(void *arg, int64_t t) {
  const zz_pk_job *j = arg;
  int64_t c_lo, c_hi;
  zz_rl_span(j, t, &c_lo, &c_hi);
  int64_t groups = (j->n + ZZ_RL_MR - 1) / ZZ_RL_MR, panels = (c_hi - c_lo + ZZ_RL_NR - 1) / ZZ_RL_NR;
  _Alignas(64) float acc[ZZ_RL_GROUPS * ZZ_RL_TASK * ZZ_RL_MR];
  void (*micro)(int64_t, const float *, const void *const[ZZ_RL_NR], float *, bool) = j->bf16 ? zz_rl_micro_bf16
                                                                                              : zz_rl_micro_f32;
  for (int64_t k0 = 0; k0 < j->in; k0 += ZZ_RL_KC) {
    int64_t kc = j->in - k0 < ZZ_RL_KC ? j->in - k0 : ZZ_RL_KC;
    for (int64_t g = 0; g < groups; g++) {
      const float *a = zz_rl_x_at(j, g, k0);
      for (int64_t p = 0; p < panels; p++) {
        const void *w[ZZ_RL_NR];
        for (int o = 0; o < ZZ_RL_NR; o++) w[o] = zz_rl_w_at(j, c_lo + p * ZZ_RL_NR + o, c_hi, k0);
        micro(kc, a, w, zz_rl_sums(acc, g, p, ZZ_RL_NR), k0 == 0);
      }
    }
  }
  zz_rl_store(j, acc, c_lo, c_hi, ZZ_RL_NR);
}

/* The AVX-512 tile's task: the same outputs and sums; per K piece and tile of
 * 24 outputs, W widened once into the L1 buffer, then every group of rows.
 * Up to ZZ_RL5_STREAM_G groups (decode at batch 16-32) a tile's K pieces run
 * back to back, so its 24 W rows stream start to end (x, at most 512 KiB,
 * stays in L2); with the pieces outside, the task's 48 rows were 48 streams
 * revisited in 256-byte steps, more than the L2 prefetcher follows. Each
 * output's chain runs along k ascending either way: the same bits. */
#ifndef ZZ_RL5_STREAM_G
#define ZZ_RL5_STREAM_G 2
#endif
#ifndef ZZ_RL5_PFD
#define ZZ_RL5_PFD 2
#endif
/* Unit e of a task (panels tiles × pieces K pieces) as its tile *p and piece
 * *q: streaming, a tile's pieces back to back; else a piece's tiles. */
static inline void zz_rl5_unit(bool stream, int64_t panels, int64_t pieces, int64_t e, int64_t *p, int64_t *q) {
  *p = stream ? e / pieces : e % panels;
  *q = stream ? e % pieces : e / panels;
}

static void zz_rl5_task(void *arg, int64_t t) {
  const zz_pk_job *j = arg;
  int64_t c_lo, c_hi;
  zz_rl_span(j, t, &c_lo, &c_hi);
  int64_t groups = (j->n + ZZ_RL_MR - 1) / ZZ_RL_MR, panels = (c_hi - c_lo + ZZ_RL5_NR - 1) / ZZ_RL5_NR;
  int64_t pieces = (j->in + ZZ_RL5_KS - 1) / ZZ_RL5_KS; /* ZZ_RL5_KS divides ZZ_RL_KC */
  bool stream = groups <= ZZ_RL5_STREAM_G;
  /* the W rows of the unit (tile p, piece q) ZZ_RL5_PFD ahead when streaming
   * (1 left too little time, 4 too much), else of the next unit, are fetched
   * during a unit (with more groups the first form of the walk, 13 µops a
   * step, cost 3-9% at 512 rows; this one gains there too) */
  int64_t units = panels * pieces;
  int64_t esz = (int64_t)zz_pk_esz(j), pfs = j->in * esz, pfl = ZZ_RL5_KS * esz / ZZ_RL5_PF_STEPS;
  _Alignas(64) float acc[ZZ_RL_GROUPS * ZZ_RL_TASK * ZZ_RL_MR];
  _Alignas(64) float wp[ZZ_RL5_NR * ZZ_RL5_KS];
  memset(acc, 0, (size_t)groups * ZZ_RL_TASK * ZZ_RL_MR * sizeof *acc); /* the groups' chains start at 0 */
  for (int64_t e = 0; e < units; e++) {
    int64_t p, q, fp, fq, ahead = stream ? ZZ_RL5_PFD : 1;
    zz_rl5_unit(stream, panels, pieces, e, &p, &q);
    zz_rl5_unit(stream, panels, pieces, e + ahead < units ? e + ahead : e, &fp, &fq);
    int64_t k = q * ZZ_RL5_KS, k0 = k - k % ZZ_RL_KC, len = j->in - k < ZZ_RL5_KS ? j->in - k : ZZ_RL5_KS;
    const char *pf = zz_rl_w_at(j, c_lo + fp * ZZ_RL5_NR, c_hi, fq * ZZ_RL5_KS);
    const void *w[ZZ_RL5_NR];
    for (int o = 0; o < ZZ_RL5_NR; o++) w[o] = zz_rl_w_at(j, c_lo + p * ZZ_RL5_NR + o, c_hi, k);
    zz_rl5_widen(w, j->bf16, len, wp);
    /* the first group (pair) walks the fetch: once is all it takes */
    int64_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      const float *a = zz_rl_x_at(j, g, k0) + (k - k0) * ZZ_RL_MR;
      int64_t gs = zz_rl_x_at(j, g + 1, k0) - zz_rl_x_at(j, g, k0), l = g ? 0 : pfl;
      float *t0 = zz_rl_sums(acc, g, p, ZZ_RL5_NR), *t1 = zz_rl_sums(acc, g + 1, p, ZZ_RL5_NR);
      for (int h = 0; h < ZZ_RL5_NR; h += ZZ_RL5_NR / 2)
        zz_rl5_micro2(len, a, gs, wp + h * ZZ_RL5_KS, t0 + h * ZZ_RL_MR, t1 + h * ZZ_RL_MR, pf + h * pfs, pfs, l);
    }
    for (; g < groups; g++)
      zz_rl5_micro(len, zz_rl_x_at(j, g, k0) + (k - k0) * ZZ_RL_MR, wp, zz_rl_sums(acc, g, p, ZZ_RL5_NR), pf, pfs,
                   g ? 0 : pfl);
  }
  zz_rl_store(j, acc, c_lo, c_hi, ZZ_RL5_NR);
}

/* The row-lane task for the process's ISA choice (kernels/cpu/isa.c). */
static void (*zz_rl_task_for_isa(void))(void *, int64_t) {
  return zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX512 ? zz_rl5_task : zz_rl_task;
}
#endif

bool zz_pk_rl_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, bool w_bf16, const float *b,
                   int64_t out, float *y, int relu, float *xp) {
#ifdef ZZ_PK_X86
  /* slices of at most zz_rl_slice rows, as even as whole pairs of groups
   * allow (512 rows at 160 a slice: 4 of 128, not a last one of 32 that
   * reads W for so few): a task's sums (at most 96 KiB) stay on its stack;
   * x's piece of a unit, 512 rows × ZZ_RL5_KS at most, is 256 KiB, in L2 */
  const int64_t most = zz_rl_slice(in), pair = 2 * ZZ_RL_MR, slices = n > most ? (n + most - 1) / most : 1;
  const int64_t slice = ((n + slices - 1) / slices + pair - 1) / pair * pair;
  float *xa = zz_rl_xp(xp);
  for (int64_t m0 = 0; m0 < n; m0 += slice) {
    int64_t m = n - m0 < slice ? n - m0 : slice;
    zz_pk_job j = {.x = x + m0 * in, .xp = xa, .w = (const char *)w, .b = b, .y = y + m0 * out, .ldy = out};
    j.n = m, j.in = in, j.out = out, j.relu = relu, j.bf16 = w_bf16;
    zz_pool_run(pool, zz_rl_pack_x, &j, (m + ZZ_RL_MR - 1) / ZZ_RL_MR);
    zz_pool_run(pool, zz_rl_task_for_isa(), &j, (out + ZZ_RL_TASK - 1) / ZZ_RL_TASK);
  }
  return true;
#else
  (void)pool, (void)x, (void)n, (void)in, (void)w, (void)w_bf16, (void)b, (void)out, (void)y, (void)relu, (void)xp;
  return false;
#endif
}

bool zz_pk_rl_pack_x(zz_pool *pool, const float *x, int64_t n, int64_t in, float *xp) {
#ifdef ZZ_PK_X86
  zz_pk_job j = {.x = x, .xp = zz_rl_xp(xp), .n = n, .in = in};
  zz_pool_run(pool, zz_rl_pack_x, &j, (n + ZZ_RL_MR - 1) / ZZ_RL_MR);
  return true;
#else
  (void)pool, (void)x, (void)n, (void)in, (void)xp;
  return false;
#endif
}

void zz_pk_rl_panel(const float *xp, int64_t n, int64_t in, const float *w, int64_t out, float *y, int64_t ldy) {
#ifdef ZZ_PK_X86
  /* the tasks only read xp (the job's is writable for the packing) */
  zz_pk_job j = {.xp = zz_rl_xp((float *)xp), .w = (const char *)w, .y = y, .n = n, .in = in, .out = out, .ldy = ldy};
  void (*task)(void *, int64_t) = zz_rl_task_for_isa();
  for (int64_t t = 0; t < (out + ZZ_RL_TASK - 1) / ZZ_RL_TASK; t++) task(&j, t);
#else
  (void)xp, (void)n, (void)in, (void)w, (void)out, (void)y, (void)ldy;
#endif
}
