/*
 * linear_int8.c — the int8-activation GEMM of the 4/8-bit linear
 * (--cpu-act int8, ZZ_CPU_ACT; opt-in, the f32 path stays the reference): x is
 * quantized once per call, per row and per group of K (the weight's groups), to
 * signed int8 with a symmetric scale, and each group's dot is an integer sum
 * u8(q) · s8(xi) (vpmaddubsw, vpmaddwd on AVX2), as llama.cpp's Q4_0/Q8_0 do.
 *
 * Numerics (docs/cpu.md, "int8 activations"): for row i, group g of m elements,
 *   a = max |x_k|, sx = a / 127, xi_k = round(x_k · (127 / a)) in [-127, 127]
 *   (all 0 when a = 0), S = Σ xi_k (exact), sxs = sx · S (one rounding);
 * and for a weight row c with the group's (min, step) and values q_k:
 *   I = Σ q_k · xi_k (exact in int32; |I| < 2^24 for groups <= 256, so exact in f32)
 *   acc = fma(step · sx, I, acc); acc = fma(min, sxs, acc)   (groups ascending)
 * Only the float part can round, and the portable and AVX2 kernels do it in the
 * same order with the same fused operations: their bits are equal whatever
 * order each forms its integer sums in. Against the exact path the error is
 * the activations' rounding, |x_k - sx·xi_k| <= sx/2 per element, so
 * |y - y_exact| <= Σ_g (sx_g / 2) Σ_{k in g} |w_k| plus f32 summation terms.
 *
 * The stored row of x (zz_xq_row_bytes): sx[ng] f32, sxs[ng] f32, S[ng] i32,
 * then the in int8 values; 4-bit groups keep each whole 64 elements as its 32
 * even then its 32 odd ones, the order of a 32-byte load's low and high nibbles
 * (element 2j of a 4-bit group is byte j's low nibble), so the AVX2 kernel
 * multiplies nibbles as they lie; the rest of a group is in order.
 *
 * The GEMM (zz_xq_gemm) takes any number of rows of x: pool tasks of
 * ZZ_XQ_CHUNK W rows; on AVX2 from 4 rows of x with groups of whole 64s
 * (a model's linears) each panel of 8 W rows is unpacked once per block of
 * rows and K into an int8 buffer that a 4-row register tile multiplies with
 * x broadcast 8 bytes at a time (zz_xq_tile_chunk walks any tile; with AVX-512
 * VNNI panels of 16 W rows and vpdpbusd, zz_xq_tiles_vnni); otherwise blocks of up to
 * ZZ_XQ_MB rows of x and a panel kernel that unpacks ZZ_XQ_NR W rows once per
 * group step for the whole block; one to three
 * rows of x with 4-bit weights (decoding at batch 1-3) take a GEMV of 8 W rows
 * a step instead, one pass over W (AVX2; the portable panel is its reference),
 * and under AVX-512 with VNNI, groups and K whole 64s, a GEMV of 16 W rows on
 * vpdpbusd for either width (zz_xv_gemv8, zz_xv_gemv4). There W is read
 * once and the kernel must keep pace with memory, so every AVX2 kernel
 * prefetches the W rows it reads next (a row of a few KB ends before the
 * hardware prefetcher runs ahead of it).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"


static inline int64_t zz_xq_groups(int64_t in, int group) { return (in + group - 1) / group; }

/* Whether block blk (64 values of K), the *jb-th block of its group (bpg blocks
 * of 64), ends that group: its last block, or K's (in); *jb moves on to the
 * next block's place (0 after an end). Every tile's walk over K blocks. */
static inline int zz_xq_group_end(int *jb, int bpg, int64_t blk, int64_t in) {
  const int end = *jb == bpg - 1 || (blk + 1) * 64 == in;
  *jb = end ? 0 : *jb + 1;
  return end;
}

/* The packing's walk, shared by both packed tiles: each W row's byte offset
 * from row 0 (o[c], rows of one weight lie a row's bytes apart, so one base
 * and offsets address them all), and 64-block kb's group g, element e in it,
 * and that group's record in row 0 (gb bytes a group). */
static inline __attribute__((always_inline)) void zz_xq_row_offsets(const void *const *wr, int rows, size_t *o) {
  for (int c = 0; c < rows; c++) o[c] = (size_t)((const unsigned char *)wr[c] - (const unsigned char *)wr[0]);
}
/* A walk over 64-blocks of K from block kb: the block's group g and its place e
 * (elements) in it, moved on a block at a time (groups of whole 64s; one
 * division at the start, none per block). */
typedef struct zz_xq_walk {
  int64_t g, e;
} zz_xq_walk;

static inline __attribute__((always_inline)) zz_xq_walk zz_xq_walk_at(int64_t kb, int group) {
  return (zz_xq_walk){kb * 64 / group, kb * 64 % group};
}

static inline __attribute__((always_inline)) void zz_xq_walk_next(zz_xq_walk *k, int group) {
  k->e += 64;
  if (k->e == group) k->e = 0, k->g++;
}

size_t zz_xq_row_bytes(int64_t in, int group) {
  size_t b = (size_t)zz_xq_groups(in, group) * 12 + (size_t)in;
  return (b + 63) / 64 * 64;
}

/* Where element e of a group of m elements lies among the group's stored int8. */
static inline int64_t zz_xq_pos(int bits, int64_t e, int64_t m) {
  if (bits != 4 || e >= m - m % 64) return e;
  int64_t j = e & 63;
  return (e - j) + (j & 1) * 32 + (j >> 1);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static void zz_xq_quantize_row_avx2(const float *x, int64_t in, int group, int bits, void *rec);
#endif

void zz_xq_quantize_row(const float *x, int64_t in, int group, int bits, void *rec) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX2) {
    zz_xq_quantize_row_avx2(x, in, group, bits, rec);
    return;
  }
#endif
  const int64_t ng = zz_xq_groups(in, group);
  float *sx = rec, *sxs = sx + ng;
  int32_t *sum = (int32_t *)(sxs + ng);
  int8_t *q = (int8_t *)(sum + ng);
  for (int64_t g = 0; g < ng; g++) {
    const int64_t k0 = g * group, m = in - k0 < group ? in - k0 : group;
    float a = 0;
    for (int64_t e = 0; e < m; e++) a = fabsf(x[k0 + e]) > a ? fabsf(x[k0 + e]) : a;
    const float inv = a > 0 ? 127.0f / a : 0.0f;
    int32_t s = 0;
    for (int64_t e = 0; e < m; e++) {
      long v = lrintf(x[k0 + e] * inv);
      v = v > 127 ? 127 : v < -127 ? -127 : v;
      q[k0 + zz_xq_pos(bits, e, m)] = (int8_t)v;
      s += (int32_t)v;
    }
    sx[g] = a / 127.0f;
    sum[g] = s;
    sxs[g] = sx[g] * (float)s;
  }
}

/* W rows a step of the decoding GEMV (AVX2 below; the driver steps by it), and
 * the most rows of x it takes: at 2-3 rows the 4-row panel read LLaMA-7B's W at
 * 0.24-0.51 of the read rate (the one-row GEMV 0.62-0.97), this GEMV at
 * 0.36-0.69 (bench/cpu_gemm_bench q4i8, AVX-512 Xeon, docs/cpu.md). */
#define ZZ_XQ_GEMV_NR 8
#define ZZ_XQ_GEMV_ROWS 3

/* ---------------------------------------------------------------- the job */

/* One call of the GEMM as its pool tasks see it: the kernels the driver picked
 * (zz_xq_gemm) and what every task reads and writes. */
typedef void (*zz_xq_panel_fn)(const char *xq, size_t x_row, int rows, const void *const wr[ZZ_XQ_NR], int nw,
                               int64_t in, int group, float *y, int64_t ldy, size_t pf);

typedef void (*zz_xq_gemv_fn)(const char *xq, size_t x_row, int rows, const unsigned char *w, size_t w_row, int nw,
                              int64_t in, int group, float *y, int64_t ldy, size_t pf);

typedef struct zz_xq_gemm_job {
  const char *xq;         /* [n] stored rows of x, x_row bytes apart */
  const unsigned char *w; /* [out] rows of w_row bytes */
  const float *b;         /* [out] or NULL */
  float *y;               /* [n, out] */
  int64_t n, in, out;
  size_t x_row, w_row;
  int group, relu;
  zz_xq_panel_fn panel;
  zz_xq_gemv_fn gemv;                /* 1-3 rows of x (n <= ZZ_XQ_GEMV_ROWS), or NULL: the panel */
  int gemv_nr;                       /* W rows a call of gemv */
  const struct zz_xq_tile_ops *tile; /* the packed tile instead of both (zz_xq_tile_pick), or NULL */
  int bits;                          /* 4 or 8 */
} zz_xq_gemm_job;

/* ---------------------------------------------------------------- portable (the reference) */

/* Where a stored row of x keeps its parts (zz_xq_row_bytes): sx, sxs, S, the int8 values. */
typedef struct zz_xq_view {
  const float *sx, *sxs;
  const int32_t *sum;
  const int8_t *q;
} zz_xq_view;

static inline zz_xq_view zz_xq_view_of(const char *rec, int64_t ng) {
  zz_xq_view v;
  v.sx = (const float *)rec, v.sxs = v.sx + ng, v.sum = (const int32_t *)(v.sxs + ng);
  v.q = (const int8_t *)(v.sum + ng);
  return v;
}

/* y[r * ldy + c] = row r of x (rows rows, x_row bytes apart) · W row wr[c], c < nw.
 * (The panels' last argument pf: the AVX2 ones prefetch W pf bytes past each
 * group they read, none where 0; the driver passes the next panel's distance.) */
static void zz_xq_panel_c(const char *xq, size_t x_row, int rows, const void *const wr[ZZ_XQ_NR], int nw, int64_t in,
                          int group, const int bits, float *y, int64_t ldy) {
  const float *tab = zz_f16_table();
  const int64_t ng = zz_xq_groups(in, group);
  const size_t gb = zz_q_group_nbytes(bits, group);
  for (int r = 0; r < rows; r++) {
    const zz_xq_view x = zz_xq_view_of(xq + (size_t)r * x_row, ng);
    for (int c = 0; c < nw; c++) {
      float acc = 0;
      for (int64_t g = 0; g < ng; g++) {
        const int64_t k0 = g * group, m = in - k0 < group ? in - k0 : group;
        const unsigned char *gp = (const unsigned char *)wr[c] + (size_t)g * gb, *d = gp + 4;
        uint16_t hmin, hstep;
        memcpy(&hmin, gp, 2);
        memcpy(&hstep, gp + 2, 2);
        int32_t isum = 0;
        for (int64_t e = 0; e < m; e++) {
          int32_t qv = bits == 4 ? (d[e / 2] >> (4 * (e & 1))) & 15 : d[e];
          isum += qv * x.q[k0 + zz_xq_pos(bits, e, m)];
        }
        acc = fmaf(tab[hstep] * x.sx[g], (float)isum, acc);
        acc = fmaf(tab[hmin], x.sxs[g], acc);
      }
      y[(int64_t)r * ldy + c] = acc;
    }
  }
}

static void zz_xq_panel4_c(const char *xq, size_t x_row, int rows, const void *const wr[ZZ_XQ_NR], int nw, int64_t in,
                           int group, float *y, int64_t ldy, size_t pf) {
  (void)pf;
  zz_xq_panel_c(xq, x_row, rows, wr, nw, in, group, 4, y, ldy);
}

static void zz_xq_panel8_c(const char *xq, size_t x_row, int rows, const void *const wr[ZZ_XQ_NR], int nw, int64_t in,
                           int group, float *y, int64_t ldy, size_t pf) {
  (void)pf;
  zz_xq_panel_c(xq, x_row, rows, wr, nw, in, group, 8, y, ldy);
}

/* ---------------------------------------------------------------- AVX2 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZZ_XQ_X86 1
#include <immintrin.h>
#define ZZ_QX_AVX2 __attribute__((target("avx2,fma,f16c")))

/* ZZ_XQ_NR W rows against up to ZZ_XQ_MB rows of x, the whole of K. Per group
 * and vector step (64 4-bit values, or 32 8-bit ones, a row) the 4 W rows are
 * unpacked once into registers and multiplied with every row of x: u8 × s8
 * pairs summed to int16 (vpmaddubsw), two W rows' int16 folded pairwise
 * (vphaddw) and widened to int32 (vpmaddwd), then the 4 W rows folded into one
 * vector [c0..c3 | c0..c3] per x row (vphaddd), kept per row in hacc (L1).
 * After the group's steps two x rows at a time: the halves summed (8 exact
 * int32 sums, rows r and r+1), the group's rest in scalar integers, then the
 * float part in 8 lanes, each lane in the portable order (same products, same
 * fused operations: the same bits). */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_panel_avx2(const char *xq, size_t x_row, int rows,
                                                                              const void *const wr[ZZ_XQ_NR], int nw,
                                                                              int64_t in, int group, const int BITS,
                                                                              const int ROWS, float *y, int64_t ldy,
                                                                              size_t pf) {
  if (ROWS) rows = ROWS; /* a constant: the row loops unroll and their sums stay in registers */
  const int64_t ng = zz_xq_groups(in, group);
  const size_t gb = zz_q_group_nbytes(BITS, group);
  const int STEP = BITS == 4 ? 64 : 32;
  const __m256i mins_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);
  __m256i hacc[ROWS ? ROWS : ZZ_XQ_MB];
  __m256 facc[ROWS ? (ROWS + 1) / 2 : (ZZ_XQ_MB + 1) / 2];
  zz_xq_view xv[ROWS ? ROWS : ZZ_XQ_MB];
  for (int r = 0; r < rows; r++) xv[r] = zz_xq_view_of(xq + (size_t)r * x_row, ng);
  for (int p = 0; p < (rows + 1) / 2; p++) facc[p] = _mm256_setzero_ps();
  __m128 acc1 = _mm_setzero_ps(); /* ROWS == 1: its 4 outputs */
  for (int64_t g = 0; g < ng; g++) {
    const int64_t k0 = g * group, m = in - k0 < group ? in - k0 : group, mv = m - m % STEP;
    /* the 4 headers (min, step) widened by vcvtph2ps: exact, the table's values */
    const unsigned char *d[ZZ_XQ_NR];
    uint32_t h[ZZ_XQ_NR];
    for (int c = 0; c < ZZ_XQ_NR; c++) {
      const unsigned char *gp = (const unsigned char *)wr[c] + (size_t)g * gb;
      memcpy(&h[c], gp, 4);
      d[c] = gp + 4;
      if (pf) _mm_prefetch((const char *)gp + pf, _MM_HINT_T0);
    }
    const __m256 hf = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3])), mins_first);
    const __m128 vmn4 = _mm256_castps256_ps128(hf), vst4 = _mm256_extractf128_ps(hf, 1);
    const __m256 vmn = _mm256_set_m128(vmn4, vmn4), vst = _mm256_set_m128(vst4, vst4);
    if (mv == 0)
      for (int r = 0; r < rows; r++) hacc[r] = _mm256_setzero_si256();
    for (int64_t e = 0; e < mv; e += STEP) {
      if (BITS == 4) {
        __m256i lo[ZZ_XQ_NR], hi[ZZ_XQ_NR];
        for (int c = 0; c < ZZ_XQ_NR; c++) {
          __m256i v = _mm256_loadu_si256((const __m256i *)(d[c] + e / 2));
          lo[c] = _mm256_and_si256(v, m4), hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        const int8_t *xp = (const int8_t *)xq + ng * 12 + k0 + e;
        for (int r = 0; r < rows; r++, xp += x_row) {
          __m256i xe = _mm256_loadu_si256((const __m256i *)xp), xo = _mm256_loadu_si256((const __m256i *)(xp + 32));
          __m256i p[ZZ_XQ_NR];
          /* each pair <= 2 · 15 · 127, a lane of p <= 7620: no int16 saturation */
          for (int c = 0; c < ZZ_XQ_NR; c++)
            p[c] = _mm256_add_epi16(_mm256_maddubs_epi16(lo[c], xe), _mm256_maddubs_epi16(hi[c], xo));
          /* folded twice, a lane <= 4 · 7620 = 30480: still int16; then one widening to
           * [c0..c3 | c0..c3] (each half's sum of its 8 int16 lanes of p[c]) */
          __m256i f = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
          f = _mm256_madd_epi16(f, ones);
          hacc[r] = e ? _mm256_add_epi32(hacc[r], f) : f;
        }
      } else {
        /* q - 128 in s8; |q - 128| <= 128 times |xi| <= 127, pairs <= 32512: no
         * saturation (q itself, up to 255, could overflow a pair); S · 128 is added back */
        __m256i a[ZZ_XQ_NR], aa[ZZ_XQ_NR];
        for (int c = 0; c < ZZ_XQ_NR; c++) {
          a[c] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(d[c] + e)), bias);
          aa[c] = _mm256_abs_epi8(a[c]);
        }
        const int8_t *xp = (const int8_t *)xq + ng * 12 + k0 + e;
        for (int r = 0; r < rows; r++, xp += x_row) {
          __m256i xv = _mm256_loadu_si256((const __m256i *)xp), s[ZZ_XQ_NR];
          for (int c = 0; c < ZZ_XQ_NR; c++)
            s[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(aa[c], _mm256_sign_epi8(xv, a[c])), ones);
          __m256i f = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
          hacc[r] = e ? _mm256_add_epi32(hacc[r], f) : f;
        }
      }
    }
    if (ROWS == 1) { /* one row (decoding at batch 1): the same in 4 lanes */
      __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(hacc[0]), _mm256_extracti128_si256(hacc[0], 1));
      if (BITS == 8) isum = _mm_add_epi32(isum, _mm_set1_epi32(128 * xv[0].sum[g]));
      if (mv < m) {
        int32_t rest[4] = {0, 0, 0, 0};
        for (int c = 0; c < ZZ_XQ_NR; c++)
          for (int64_t e = mv; e < m; e++)
            rest[c] += (BITS == 4 ? (d[c][e / 2] >> (4 * (e & 1))) & 15 : d[c][e] - 128) * xv[0].q[k0 + e];
        isum = _mm_add_epi32(isum, _mm_loadu_si128((const __m128i *)rest));
      }
      acc1 = _mm_fmadd_ps(_mm_mul_ps(vst4, _mm_broadcast_ss(xv[0].sx + g)), _mm_cvtepi32_ps(isum), acc1);
      acc1 = _mm_fmadd_ps(vmn4, _mm_broadcast_ss(xv[0].sxs + g), acc1);
      continue;
    }
    for (int r = 0; r < rows; r += 2) {
      const int r1 = r + 1 < rows ? r + 1 : r; /* a last odd row pairs with itself; its copy is not stored */
      const zz_xq_view *x0 = &xv[r], *x1 = &xv[r1];
      /* [row r: c0..c3 | row r1: c0..c3], each the sum of its row's two halves */
      __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(hacc[r], hacc[r1], 0x20),
                                      _mm256_permute2x128_si256(hacc[r], hacc[r1], 0x31));
      if (BITS == 8)
        isum = _mm256_add_epi32(isum,
                                _mm256_set_m128i(_mm_set1_epi32(128 * x1->sum[g]), _mm_set1_epi32(128 * x0->sum[g])));
      if (mv < m) { /* the group's rest past the vector steps */
        int32_t rest[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int c = 0; c < ZZ_XQ_NR; c++)
          for (int64_t e = mv; e < m; e++) {
            int32_t qv = BITS == 4 ? (d[c][e / 2] >> (4 * (e & 1))) & 15 : d[c][e] - 128;
            rest[c] += qv * x0->q[k0 + e];
            rest[4 + c] += qv * x1->q[k0 + e];
          }
        isum = _mm256_add_epi32(isum, _mm256_loadu_si256((const __m256i *)rest));
      }
      const __m256 sx = _mm256_set_m128(_mm_broadcast_ss(x1->sx + g), _mm_broadcast_ss(x0->sx + g));
      const __m256 sxs = _mm256_set_m128(_mm_broadcast_ss(x1->sxs + g), _mm_broadcast_ss(x0->sxs + g));
      __m256 f = _mm256_fmadd_ps(_mm256_mul_ps(vst, sx), _mm256_cvtepi32_ps(isum), facc[r / 2]);
      facc[r / 2] = _mm256_fmadd_ps(vmn, sxs, f);
    }
  }
  if (ROWS == 1) facc[0] = _mm256_castps128_ps256(acc1); /* lanes 4..7 are not stored */
  for (int r = 0; r < rows; r += 2) {
    float l[8];
    _mm256_storeu_ps(l, facc[r / 2]);
    for (int c = 0; c < nw; c++) y[(int64_t)r * ldy + c] = l[c];
    if (r + 1 < rows)
      for (int c = 0; c < nw; c++) y[(int64_t)(r + 1) * ldy + c] = l[4 + c];
  }
}

/* The portable quantizer's bits, 8 elements a step: the max of |x| is exact in
 * any order (a NaN never wins, as in the scalar comparison), the product x ·
 * (127 / a) is the same float multiply, vcvtps2dq rounds to nearest even as
 * lrintf does in the default mode (a NaN gives INT32_MIN, as lrintf's LONG_MIN,
 * and both clamp to -127); the values go to their stored places one by one. */
ZZ_QX_AVX2 static void zz_xq_quantize_row_avx2(const float *x, int64_t in, int group, int bits, void *rec) {
  const int64_t ng = zz_xq_groups(in, group);
  float *sx = rec, *sxs = sx + ng;
  int32_t *sum = (int32_t *)(sxs + ng);
  int8_t *q = (int8_t *)(sum + ng);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int64_t g = 0; g < ng; g++) {
    const int64_t k0 = g * group, m = in - k0 < group ? in - k0 : group, mv = m - m % 8;
    const float *xg = x + k0;
    __m256 va = _mm256_setzero_ps();
    for (int64_t e = 0; e < mv; e += 8) va = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + e), absmask), va);
    float l[8], a = 0;
    _mm256_storeu_ps(l, va);
    for (int i = 0; i < 8; i++) a = l[i] > a ? l[i] : a;
    for (int64_t e = mv; e < m; e++) a = fabsf(xg[e]) > a ? fabsf(xg[e]) : a;
    const float inv = a > 0 ? 127.0f / a : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i vs = _mm256_setzero_si256();
    int32_t s = 0;
    for (int64_t e = 0; e < mv; e += 8) {
      __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + e), vinv));
      v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
      vs = _mm256_add_epi32(vs, v);
      int32_t t[8];
      _mm256_storeu_si256((__m256i *)t, v);
      for (int i = 0; i < 8; i++) q[k0 + zz_xq_pos(bits, e + i, m)] = (int8_t)t[i];
    }
    for (int64_t e = mv; e < m; e++) {
      long v = lrintf(xg[e] * inv);
      v = v > 127 ? 127 : v < -127 ? -127 : v;
      q[k0 + zz_xq_pos(bits, e, m)] = (int8_t)v;
      s += (int32_t)v;
    }
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, vs);
    for (int i = 0; i < 8; i++) s += t[i];
    sx[g] = a / 127.0f;
    sum[g] = s;
    sxs[g] = sx[g] * (float)s;
  }
}

/* Blocks of 1 to 3 rows (decoding) with the row count a constant, the rest with it a variable. */
#define ZZ_XQ_PANEL_AVX2(BITS)                                                                                         \
  ZZ_QX_AVX2 static void zz_xq_panel##BITS##_avx2(const char *xq, size_t x_row, int rows,                              \
                                                  const void *const wr[ZZ_XQ_NR], int nw, int64_t in, int group,       \
                                                  float *y, int64_t ldy, size_t pf) {                                  \
    switch (rows) {                                                                                                    \
      case 1: zz_xq_panel_avx2(xq, x_row, rows, wr, nw, in, group, BITS, 1, y, ldy, pf); break;                        \
      case 2: zz_xq_panel_avx2(xq, x_row, rows, wr, nw, in, group, BITS, 2, y, ldy, pf); break;                        \
      case 3: zz_xq_panel_avx2(xq, x_row, rows, wr, nw, in, group, BITS, 3, y, ldy, pf); break;                        \
      default: zz_xq_panel_avx2(xq, x_row, rows, wr, nw, in, group, BITS, 0, y, ldy, pf); break;                       \
    }                                                                                                                  \
  }
ZZ_XQ_PANEL_AVX2(4)
ZZ_XQ_PANEL_AVX2(8)

/* Decoding at batch 1 with 4-bit weights, where the panel above (4 W rows, its
 * row count a variable, spills) used half the read rate (and at batch 2-3,
 * with the count a constant, 0.24-0.51 of it): one row of x (or 2-3) against
 * ZZ_XQ_GEMV_NR W rows at a time, W row c at w + c · w_row, c < nw. Per group
 * and 64-step each W row's 32 bytes are unpacked (and, shift) and multiplied
 * with x's 32 even and 32 odd int8 (vpmaddubsw, pairs <= 7620), the 8 rows'
 * int16 folded twice (vphaddw, <= 30480) and widened (vpmaddwd) into one vector
 * of exact int32 sums [c0..c7]; the float part is then one 8-lane FMA pair per
 * group, lane c in the portable order (the same bits). The 8 headers become
 * 8-lane mins and steps by one shuffle and two vcvtph2ps. W is prefetched pf
 * bytes ahead of each read (the driver: the next 8 rows' same group): a row is
 * a few KB, too short for the hardware prefetcher to run ahead of its start. */
/* 4 W rows' 16 int16 lanes of one 64-step, folded to [c0..c3 | c0..c3] int32:
 * row c's 32 bytes at d + o[c], x's 32 even and 32 odd int8 in xe, xo. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) __m256i zz_xq_gemv4_quad(const unsigned char *d, size_t o0,
                                                                                 size_t o1, size_t o2, size_t o3,
                                                                                 __m256i xe, __m256i xo) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const size_t o[4] = {o0, o1, o2, o3};
  __m256i p[4];
  for (int c = 0; c < 4; c++) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(d + o[c]));
    p[c] = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, m4), xe),
                            _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xo));
  }
  return _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3])),
                           _mm256_set1_epi16(1));
}

/* The 8 headers (min, step halves; row c's at d + o[c]) as 8-lane mins and steps, exactly. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_gemv4_heads(const unsigned char *d,
                                                                               const size_t o[8], __m256 *mn,
                                                                               __m256 *st) {
  /* per 128-bit lane of 4 headers: the 4 mins' halves, then the 4 steps' */
  const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13,
                                         2, 3, 6, 7, 10, 11, 14, 15);
  int32_t v[ZZ_XQ_GEMV_NR];
  for (int c = 0; c < ZZ_XQ_GEMV_NR; c++) memcpy(&v[c], d + o[c], 4);
  /* [mins 0-3 | mins 4-7 | steps 0-3 | steps 4-7] */
  const __m256i hv = _mm256_permute4x64_epi64(
      _mm256_shuffle_epi8(_mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]), split), 0xd8);
  *mn = _mm256_cvtph_ps(_mm256_castsi256_si128(hv));
  *st = _mm256_cvtph_ps(_mm256_extracti128_si256(hv, 1));
}

/* FAST: groups of 64 over the whole of in and 8 rows w_row apart (the shapes of
 * a model's linears): each group one step; else any group and in, the last
 * rows repeated up to 8 (their outputs not stored). ROWS (1 to
 * ZZ_XQ_GEMV_ROWS, a constant) rows of x, x_row bytes apart, against the same
 * pass over W, y's rows ldy apart: each row's sums are the one-row GEMV's. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_gemv4_body(const char *xq, size_t x_row,
                                                                              const unsigned char *w, size_t w_row,
                                                                              int nw, int64_t in, int group, float *y,
                                                                              int64_t ldy, size_t pf, const int FAST,
                                                                              const int ROWS) {
  if (FAST) group = 64, nw = ZZ_XQ_GEMV_NR;
  const int64_t ng = zz_xq_groups(in, group);
  const size_t gb = zz_q_group_nbytes(4, group);
  zz_xq_view xv[ZZ_XQ_GEMV_ROWS];
  for (int r = 0; r < ROWS; r++) xv[r] = zz_xq_view_of(xq + (size_t)r * x_row, ng);
  size_t o[ZZ_XQ_GEMV_NR]; /* row c's offset from row 0 */
  for (int c = 0; c < ZZ_XQ_GEMV_NR; c++) o[c] = (size_t)(c < nw ? c : nw - 1) * w_row;
  __m256 acc[ZZ_XQ_GEMV_ROWS];
  for (int r = 0; r < ROWS; r++) acc[r] = _mm256_setzero_ps();
  const unsigned char *gp = w; /* group g of row 0 */
  for (int64_t g = 0; g < ng; g++, gp += gb) {
    const int64_t k0 = g * group, m = FAST ? 64 : in - k0 < group ? in - k0 : group, mv = m - m % 64;
    for (int c = 0; c < ZZ_XQ_GEMV_NR; c++) _mm_prefetch((const char *)gp + pf + o[c], _MM_HINT_T0);
    __m256i isum[ZZ_XQ_GEMV_ROWS];
    for (int r = 0; r < ROWS; r++) isum[r] = _mm256_setzero_si256();
    for (int64_t e = 0; e < mv; e += 64) {
      const unsigned char *d = gp + 4 + e / 2;
      for (int r = 0; r < ROWS; r++) { /* W's lines are in L1 after the first row */
        const int8_t *xp = xv[r].q + k0 + e;
        const __m256i xe = _mm256_loadu_si256((const __m256i *)xp), xo = _mm256_loadu_si256((const __m256i *)(xp + 32));
        const __m256i a = zz_xq_gemv4_quad(d, o[0], o[1], o[2], o[3], xe, xo);
        const __m256i b = zz_xq_gemv4_quad(d, o[4], o[5], o[6], o[7], xe, xo);
        /* [c0..c3 | c4..c7], each the sum of its two halves */
        isum[r] = _mm256_add_epi32(
            isum[r], _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31)));
      }
    }
    if (!FAST && mv < m) { /* the group's rest past the 64-steps, in order */
      for (int r = 0; r < ROWS; r++) {
        const int8_t *xp = xv[r].q + k0;
        int32_t rest[ZZ_XQ_GEMV_NR];
        for (int c = 0; c < ZZ_XQ_GEMV_NR; c++) {
          const unsigned char *d = gp + o[c] + 4;
          rest[c] = 0;
          for (int64_t e = mv; e < m; e++) rest[c] += ((d[e / 2] >> (4 * (e & 1))) & 15) * xp[e];
        }
        isum[r] = _mm256_add_epi32(isum[r], _mm256_loadu_si256((const __m256i *)rest));
      }
    }
    __m256 vmn, vst;
    zz_xq_gemv4_heads(gp, o, &vmn, &vst);
    for (int r = 0; r < ROWS; r++) {
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(vst, _mm256_broadcast_ss(xv[r].sx + g)), _mm256_cvtepi32_ps(isum[r]),
                               acc[r]);
      acc[r] = _mm256_fmadd_ps(vmn, _mm256_broadcast_ss(xv[r].sxs + g), acc[r]);
    }
  }
  for (int r = 0; r < ROWS; r++) {
    float l[ZZ_XQ_GEMV_NR];
    _mm256_storeu_ps(l, acc[r]);
    for (int c = 0; c < nw; c++) y[r * ldy + c] = l[c];
  }
}

/* The body for rows (1 to ZZ_XQ_GEMV_ROWS) rows of x, each count and the fast shape its own constants. */
#define ZZ_XQ_GEMV_CASE(R)                                                                                             \
  case R:                                                                                                              \
    if (fast) zz_xq_gemv4_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, 1, R);                                  \
    else                                                                                                               \
      zz_xq_gemv4_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, 0, R);                                          \
    break;
ZZ_QX_AVX2 static void zz_xq_gemv4_avx2(const char *xq, size_t x_row, int rows, const unsigned char *w, size_t w_row,
                                        int nw, int64_t in, int group, float *y, int64_t ldy, size_t pf) {
  const int fast = group == 64 && in % 64 == 0 && nw == ZZ_XQ_GEMV_NR;
  switch (rows) {
    ZZ_XQ_GEMV_CASE(1)
    ZZ_XQ_GEMV_CASE(2)
    default: ZZ_XQ_GEMV_CASE(3)
  }
}
#undef ZZ_XQ_GEMV_CASE

/* ---------------------------------------------------------------- AVX2 packed tile (4 and 8 bits, 4+ rows of x) */

/* From ZZ_XQ_TILE_MIN rows of x, groups that are whole 64s over a K of whole
 * 64s (a model's linears) take this path instead of the panel above, which
 * spent a third of its work folding int16 lanes (vphaddw) per W row, x row
 * and group (8-bit: a vpmaddwd per W row and x row, and the sign trick).
 * Here each W panel of ZZ_XQ_PW rows is unpacked once per block of rows and
 * K into an int8 buffer laid out for a broadcast of x (8 bytes, one
 * vpbroadcastq) against 4 W rows × 8 bytes a vector: a lane of vpmaddubsw is
 * then one W row's pair, it sums in int16 over the 8 steps of a 64-block
 * (8 · 2 · 15 · 127 = 30480: no saturation), and one vpmaddwd + vphaddd per
 * 64-block and x row give the 8 rows' exact int32 sums, with no fold per step.
 * 8-bit values are split into their two nibbles (two such sub-blocks, the
 * sums added as lo + 16 · hi, exact): twice 4-bit's work, without the sign
 * trick. The float part is the panel's: per group, lane c in the portable order. */
#define ZZ_XQ_PW 8 /* W rows of a packed panel: the 8 float lanes */
/* rows of x in a register tile: 2 · 4 int16 sums, 2 W vectors, x, a product (of 2-6: best on Zen 3) */
#define ZZ_XQ_TM 4
#define ZZ_XQ_KC_MAX 2048 /* K of a 4-bit packed panel (8-bit: half): 16 KB + heads on the stack, in L1 */
#define ZZ_XQ_TILE_MIN 4
#define ZZ_XQ_XBLOCK (192 << 10) /* bytes of x's int8 in a row block's K block: in L2 across the panels */

/* Bytes of one 64-block of a packed panel: 8 steps of [rows 0,1,4,5 | rows 2,3,6,7], 8 bytes each. */
#define ZZ_XQ_PB 512

/* What every tile of one packed panel shares (each ISA's tile below): the
 * panel pk and its heads hd (64-blocks b0 .. b0 + nb - 1 of groups of `group`
 * over a K of `in`), the stored rows of x x_row bytes apart (whole rows of ng
 * groups), the outputs' row stride ldy and the panel's W rows nw, and first:
 * the sums start from 0 (the first K block, as the portable kernel starts),
 * else from y. A tile call adds its own rows of x (xq), their count and their
 * outputs y[r * ldy + c], c < nw. */
typedef struct zz_xq_tile_args {
  const int8_t *pk;
  const float *hd;
  int64_t b0, in, ng, ldy;
  size_t x_row;
  int nb, group, nw, first;
} zz_xq_tile_args;

/* The 4 rows' qwords q_s (s < 4) of a, b, c, d as 4 vectors [a.q_s b.q_s | c.q_s d.q_s], stored 64 bytes apart. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_pack_t4(__m256i a, __m256i b, __m256i c, __m256i d,
                                                                           int8_t *o) {
  const __m256i u = _mm256_unpacklo_epi64(a, b), v = _mm256_unpackhi_epi64(a, b);
  const __m256i u2 = _mm256_unpacklo_epi64(c, d), v2 = _mm256_unpackhi_epi64(c, d);
  _mm256_store_si256((__m256i *)o, _mm256_permute2x128_si256(u, u2, 0x20));
  _mm256_store_si256((__m256i *)(o + 64), _mm256_permute2x128_si256(v, v2, 0x20));
  _mm256_store_si256((__m256i *)(o + 128), _mm256_permute2x128_si256(u, u2, 0x31));
  _mm256_store_si256((__m256i *)(o + 192), _mm256_permute2x128_si256(v, v2, 0x31));
}

/* W rows wr[0..7], 64-blocks b0 .. b0 + nb - 1 (b0 at a group's start) into pk
 * (nb · ZZ_XQ_PB · BITS / 4 bytes, 32-aligned) and hd (per group of the block:
 * the 8 steps, then the 8 mins, as floats). 4-bit: step s of a block holds the
 * stored positions of x 8s .. 8s + 7: low nibbles of bytes 8s.. for s < 4
 * (x's even elements), high nibbles of bytes 8(s - 4).. after (the odd ones).
 * 8-bit: two such sub-blocks, the bytes' low nibbles then their high ones, each
 * in x's order (q · xi = 16 · qh · xi + ql · xi, both in 4-bit ranges). W is
 * prefetched pf bytes ahead of each read (the next panel's rows), none where 0. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_pack_avx2(const void *const wr[ZZ_XQ_PW], int64_t b0,
                                                                             int nb, int group, size_t gb, int8_t *pk,
                                                                             float *hd, size_t pf, const int BITS) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  size_t o[ZZ_XQ_PW];
  zz_xq_row_offsets(wr, ZZ_XQ_PW, o);
  zz_xq_walk k = zz_xq_walk_at(b0, group);
  const int64_t g0 = k.g;
  for (int b = 0; b < nb; b++, zz_xq_walk_next(&k, group)) {
    const int64_t g = k.g, e = k.e;
    const unsigned char *gp = (const unsigned char *)wr[0] + (size_t)g * gb;
    int8_t *p = pk + (size_t)b * ZZ_XQ_PB * BITS / 4;
    for (int h = 0; h < BITS / 4; h++) { /* 4-bit: the block; 8-bit: its halves of 32 bytes */
      __m256i lo[ZZ_XQ_PW], hi[ZZ_XQ_PW];
      for (int c = 0; c < ZZ_XQ_PW; c++) {
        const unsigned char *d = gp + o[c] + 4 + (BITS == 4 ? e / 2 : e + 32 * h);
        if (pf) _mm_prefetch((const char *)d + pf, _MM_HINT_T0);
        const __m256i v = _mm256_loadu_si256((const __m256i *)d);
        lo[c] = _mm256_and_si256(v, m4), hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
      /* 4-bit: lo steps 0-3, hi steps 4-7; 8-bit half h: steps 4h.. of the low
       * sub-block from lo, of the high sub-block (ZZ_XQ_PB on) from hi */
      int8_t *pl = p + (BITS == 4 ? 0 : 256 * h), *ph = p + (BITS == 4 ? 256 : ZZ_XQ_PB + 256 * h);
      zz_xq_pack_t4(lo[0], lo[1], lo[4], lo[5], pl);
      zz_xq_pack_t4(lo[2], lo[3], lo[6], lo[7], pl + 32);
      zz_xq_pack_t4(hi[0], hi[1], hi[4], hi[5], ph);
      zz_xq_pack_t4(hi[2], hi[3], hi[6], hi[7], ph + 32);
    }
    if (e == 0) {
      __m256 mn, st;
      zz_xq_gemv4_heads(gp, o, &mn, &st);
      _mm256_storeu_ps(hd + (g - g0) * 16, st);
      _mm256_storeu_ps(hd + (g - g0) * 16 + 8, mn);
    }
  }
}

/* One 64-block's 8 steps of a packed sub-block p (ZZ_XQ_PB bytes) against x's
 * bytes o .. o + 63 of rows xb[r]: per row the int16 sums of W rows 0,1,4,5
 * (aa) and 2,3,6,7 (ab), each lane one row's pair, <= 8 · 2 · 15 · 127. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_tile_steps(const int8_t *p,
                                                                              const int8_t *const xb[ZZ_XQ_TM],
                                                                              int64_t o, __m256i aa[ZZ_XQ_TM],
                                                                              __m256i ab[ZZ_XQ_TM], const int ROWS) {
  if (ROWS == 4) {
    /* a whole step (4 rows of x times 2 W vectors) in assembly: written with
     * intrinsics the compiler copied each int16 sum to another register every
     * step (and, unrolled, computed every product first and spilled them); this
     * keeps the 8 sums, 2 W vectors, x and a product in 12 registers */
#define ZZ_XQ_STEP_ROW(X, A, C)                                                                                        \
  "vpbroadcastq %[" X "], %[t]\n\t"                                                                                    \
  "vpmaddubsw %[t], %[wa], %[u]\n\t"                                                                                   \
  "vpaddw %[u], %[" A "], %[" A "]\n\t"                                                                                \
  "vpmaddubsw %[t], %[wb], %[u]\n\t"                                                                                   \
  "vpaddw %[u], %[" C "], %[" C "]\n\t"
    const int8_t *x0 = xb[0] + o, *x1 = xb[ROWS - 3] + o, *x2 = xb[ROWS - 2] + o, *x3 = xb[ROWS - 1] + o;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
    for (int s = 0; s < 8; s++) {
      __m256i wa, wb, t, u;
      __asm__("vmovdqa %[pa], %[wa]\n\t"
              "vmovdqa %[pb], %[wb]\n\t" ZZ_XQ_STEP_ROW("x0", "a0", "c0") ZZ_XQ_STEP_ROW("x1", "a1", "c1")
                  ZZ_XQ_STEP_ROW("x2", "a2", "c2") ZZ_XQ_STEP_ROW("x3", "a3", "c3")
              : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2),
                [c3] "+x"(c3), [wa] "=&x"(wa), [wb] "=&x"(wb), [t] "=&x"(t), [u] "=&x"(u)
              : [pa] "m"(*(const __m256i *)(p + s * 64)), [pb] "m"(*(const __m256i *)(p + s * 64 + 32)),
                [x0] "m"(*(const int64_t *)(x0 + s * 8)), [x1] "m"(*(const int64_t *)(x1 + s * 8)),
                [x2] "m"(*(const int64_t *)(x2 + s * 8)), [x3] "m"(*(const int64_t *)(x3 + s * 8)));
    }
#undef ZZ_XQ_STEP_ROW
    aa[0] = a0, aa[ROWS - 3] = a1, aa[ROWS - 2] = a2, aa[ROWS - 1] = a3;
    ab[0] = c0, ab[ROWS - 3] = c1, ab[ROWS - 2] = c2, ab[ROWS - 1] = c3;
  } else {
    /* the leftover 1-3 rows: one step at a time (all 8 unrolled, the compiler
     * computed every product first and spilled them) */
    for (int r = 0; r < ROWS; r++) aa[r] = ab[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int s = 0; s < 8; s++) {
      const __m256i wa = _mm256_load_si256((const __m256i *)(p + s * 64)),
                    wb = _mm256_load_si256((const __m256i *)(p + s * 64 + 32));
      for (int r = 0; r < ROWS; r++) {
        int64_t q;
        memcpy(&q, xb[r] + o + s * 8, 8);
        const __m256i xv = _mm256_set1_epi64x(q);
        aa[r] = _mm256_add_epi16(aa[r], _mm256_maddubs_epi16(wa, xv));
        ab[r] = _mm256_add_epi16(ab[r], _mm256_maddubs_epi16(wb, xv));
      }
    }
  }
}

/* ROWS rows of x from xq times a packed panel (zz_xq_pack4_avx2; a: the
 * panel's zz_xq_tile_args), into y[r * ldy + c], c < nw: the sums so far loaded
 * from y (first: from 0), the block's groups added in order, stored back. G64:
 * groups of 64 (each 64-block a group); else a group's blocks' int32 sums add
 * up before its float part. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_xq_tile_avx2(const zz_xq_tile_args *a, const char *xq,
                                                                             float *y, const int ROWS, const int G64,
                                                                             const int BITS) {
  const int8_t *pk = a->pk;
  const float *hd = a->hd;
  const int64_t b0 = a->b0, in = a->in, ng = a->ng, ldy = a->ldy;
  const size_t x_row = a->x_row;
  const int nb = a->nb, group = G64 ? 64 : a->group, nw = a->nw, first = a->first;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nw), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const int64_t g0 = b0 * 64 / group;
  __m256 facc[ZZ_XQ_TM];
  __m256i isum[ZZ_XQ_TM];
  const int8_t *xb[ZZ_XQ_TM];
  const float *sx[ZZ_XQ_TM];
  for (int r = 0; r < ROWS; r++) {
    const char *rec = xq + (size_t)r * x_row;
    sx[r] = (const float *)rec;
    xb[r] = (const int8_t *)rec + ng * 12 + b0 * 64;
    facc[r] = first            ? _mm256_setzero_ps()
              : nw == ZZ_XQ_PW ? _mm256_loadu_ps(y + r * ldy)
                               : _mm256_maskload_ps(y + r * ldy, mask);
    isum[r] = _mm256_setzero_si256();
  }
  const int bpg = group / 64;
  int64_t g = g0;
  for (int b = 0, jb = 0; b < nb; b++) { /* jb: the block's place in its group */
    __m256i iv[ZZ_XQ_TM];
    for (int r = 0; r < ROWS; r++) iv[r] = _mm256_setzero_si256(); /* (gcc's maybe-uninitialized) */
    for (int h = 0; h < BITS / 4; h++) { /* 8-bit: the low nibbles' sums, then 16 · the high ones' */
      __m256i aa[ZZ_XQ_TM], ab[ZZ_XQ_TM];
      zz_xq_tile_steps(pk + ((size_t)b * BITS / 4 + h) * ZZ_XQ_PB, xb, b * 64, aa, ab, ROWS);
      for (int r = 0; r < ROWS; r++) {
        /* [r0..r3 | r4..r7]: rows 0,1,4,5 of aa and 2,3,6,7 of ab, each lane pair one row */
        const __m256i v = _mm256_hadd_epi32(_mm256_madd_epi16(aa[r], ones), _mm256_madd_epi16(ab[r], ones));
        iv[r] = h ? _mm256_add_epi32(iv[r], _mm256_slli_epi32(v, 4)) : v;
      }
    }
    const int start = G64 || jb == 0, end = G64 || zz_xq_group_end(&jb, bpg, b0 + b, in);
    __m256 st = _mm256_setzero_ps(), mn = _mm256_setzero_ps();
    if (end) st = _mm256_load_ps(hd + (g - g0) * 16), mn = _mm256_load_ps(hd + (g - g0) * 16 + 8);
    for (int r = 0; r < ROWS; r++) {
      if (!G64) {
        if (!start) iv[r] = _mm256_add_epi32(isum[r], iv[r]);
        isum[r] = iv[r];
      }
      if (end) {
        const __m256 f = _mm256_fmadd_ps(_mm256_mul_ps(st, _mm256_broadcast_ss(sx[r] + g)), _mm256_cvtepi32_ps(iv[r]),
                                         facc[r]);
        facc[r] = _mm256_fmadd_ps(mn, _mm256_broadcast_ss(sx[r] + ng + g), f);
      }
    }
    g += end;
  }
  for (int r = 0; r < ROWS; r++) {
    if (nw == ZZ_XQ_PW) _mm256_storeu_ps(y + r * ldy, facc[r]);
    else
      _mm256_maskstore_ps(y + r * ldy, mask, facc[r]);
  }
}

/* The tile with its row count, G64 and BITS constants. */
ZZ_QX_AVX2 static void zz_xq_tile_rows(const zz_xq_tile_args *a, const char *xq, int rows, float *y, int bits) {
#define ZZ_XQ_TILE_CASE(R)                                                                                             \
  case R:                                                                                                              \
    if (a->group == 64 && bits == 4) zz_xq_tile_avx2(a, xq, y, R, 1, 4);                                               \
    else if (a->group == 64)                                                                                           \
      zz_xq_tile_avx2(a, xq, y, R, 1, 8);                                                                              \
    else if (bits == 4)                                                                                                \
      zz_xq_tile_avx2(a, xq, y, R, 0, 4);                                                                              \
    else                                                                                                               \
      zz_xq_tile_avx2(a, xq, y, R, 0, 8);                                                                              \
    break;
  switch (rows) {
    ZZ_XQ_TILE_CASE(1)
    ZZ_XQ_TILE_CASE(2)
    ZZ_XQ_TILE_CASE(3)
    ZZ_XQ_TILE_CASE(4)
  }
#undef ZZ_XQ_TILE_CASE
}

ZZ_QX_AVX2 static void zz_xq_pack4_avx2(const void *const wr[ZZ_XQ_PW], int64_t b0, int nb, int group, size_t gb,
                                        int8_t *pk, float *hd, size_t pf) {
  zz_xq_pack_avx2(wr, b0, nb, group, gb, pk, hd, pf, 4);
}

ZZ_QX_AVX2 static void zz_xq_pack8_avx2(const void *const wr[ZZ_XQ_PW], int64_t b0, int nb, int group, size_t gb,
                                        int8_t *pk, float *hd, size_t pf) {
  zz_xq_pack_avx2(wr, b0, nb, group, gb, pk, hd, pf, 8);
}

ZZ_QX_AVX2 static void zz_xq_rows4_avx2(const zz_xq_tile_args *a, const char *xq, int rows, float *y) {
  zz_xq_tile_rows(a, xq, rows, y, 4);
}

ZZ_QX_AVX2 static void zz_xq_rows8_avx2(const zz_xq_tile_args *a, const char *xq, int rows, float *y) {
  zz_xq_tile_rows(a, xq, rows, y, 8);
}


/* ---------------------------------------------------------------- AVX-512 VNNI
 *
 * The packed tile with vpdpbusd (avx512_vnni): each int32 lane adds the 4
 * products of 4 u8 W values with 4 s8 x values, so a zmm holds 16 W rows' sums
 * directly in int32 (exact: 64 · 255 · 127 per 64-block), with none of AVX2's
 * int16 sums, folds or nibble split for 8 bits. A panel is 16 W rows; each
 * 64-block of it is packed once per block of rows and K as 16 steps of 64 bytes,
 * step s = [row c's stored positions 4s .. 4s + 3 for c = 0..15] (4-bit: the
 * nibbles unpacked to bytes in x's stored order, low nibbles then high ones;
 * 8-bit: the bytes as they lie), by a 16 × 16 transpose of dwords. A register
 * tile of ZZ_XV_TM rows of x then pays one W load and, per row, one vpdpbusd
 * with x's 4 bytes broadcast from memory per step; the int32 sums run over a
 * whole group and the float part is the portable one per lane (same products,
 * same fused operations: the same bits as zz_xq_panel_c). */
#define ZZ_QX_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define ZZ_XV_PW 16   /* W rows of a panel: the 16 int32 lanes */
#define ZZ_XV_TM 8    /* rows of x in a register tile: 8 int32 and 8 float accumulators */
#define ZZ_XV_KC 1024 /* K of a packed panel (4 and 8 bits alike: a byte per value): 16 KB + heads, in L1 */
#define ZZ_XV_PB 1024 /* bytes of one 64-block of a panel: 16 steps × 16 rows × 4 */

/* r[c] (dword s: row c's positions 4s .. 4s + 3) transposed: step s = [r[0].s .. r[15].s] at o + 64 s. */
ZZ_QX_VNNI static inline __attribute__((always_inline)) void zz_xv_transpose(const __m512i r[ZZ_XV_PW], int8_t *o) {
  __m512i a[16], b[16];
  for (int k = 0; k < 8; k++) { /* per 128-bit lane L: [r2k.4L r2k+1.4L r2k.4L+1 r2k+1.4L+1], then the .4L+2, .4L+3 */
    a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; k++) { /* b[4k + m], lane L: column 4L + m of rows 4k .. 4k + 3 */
    b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
  }
  for (int m = 0; m < 4; m++) { /* column 4L + m: lane L of b[m], b[4 + m], b[8 + m], b[12 + m] */
    const __m512i c0 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0x44), c1 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0xee);
    const __m512i d0 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0x44),
                  d1 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0xee);
    _mm512_store_si512(o + 64 * m, _mm512_shuffle_i32x4(c0, d0, 0x88));
    _mm512_store_si512(o + 64 * (4 + m), _mm512_shuffle_i32x4(c0, d0, 0xdd));
    _mm512_store_si512(o + 64 * (8 + m), _mm512_shuffle_i32x4(c1, d1, 0x88));
    _mm512_store_si512(o + 64 * (12 + m), _mm512_shuffle_i32x4(c1, d1, 0xdd));
  }
}

/* W rows wr[0..15], 64-blocks b0 .. b0 + nb - 1 (b0 at a group's start) into pk
 * (nb · ZZ_XV_PB bytes, 64-aligned) and hd (per group of the block: the 16
 * steps, then the 16 mins, as floats). W is prefetched pf bytes ahead of each
 * read (the next panel's rows), none where 0. */
ZZ_QX_VNNI static inline __attribute__((always_inline)) void zz_xv_pack(const void *const wr[ZZ_XV_PW], int64_t b0,
                                                                        int nb, int group, size_t gb, int8_t *pk,
                                                                        float *hd, size_t pf, const int BITS) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  size_t o[ZZ_XV_PW];
  zz_xq_row_offsets(wr, ZZ_XV_PW, o);
  zz_xq_walk k = zz_xq_walk_at(b0, group);
  const int64_t g0 = k.g;
  for (int b = 0; b < nb; b++, zz_xq_walk_next(&k, group)) {
    const int64_t g = k.g, e = k.e;
    const unsigned char *gp = (const unsigned char *)wr[0] + (size_t)g * gb;
    __m512i r[ZZ_XV_PW];
    for (int c = 0; c < ZZ_XV_PW; c++) {
      const unsigned char *d = gp + o[c] + 4 + (BITS == 4 ? e / 2 : e);
      if (pf) _mm_prefetch((const char *)d + pf, _MM_HINT_T0);
      if (BITS == 4) {
        /* the 32 bytes in both halves; the upper half's nibbles shifted down */
        const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)d));
        r[c] = _mm512_and_si512(_mm512_mask_srli_epi16(v, (__mmask32)0xffff0000u, v, 4), m4);
      } else {
        r[c] = _mm512_loadu_si512(d);
      }
    }
    zz_xv_transpose(r, pk + (size_t)b * ZZ_XV_PB);
    if (e == 0) {
      /* the 16 rows' heads (min, step: f16, one dword each) in one vector, then
       * split by halves: not a vpgatherdd, which an index in zmm16-31 made an
       * invalid opcode under the emulator the AVX-512 paths are checked on
       * (scripts/isa_emu.sh), and not 32 two-byte inserts (the old way) */
      uint32_t hw[ZZ_XV_PW];
      for (int c = 0; c < ZZ_XV_PW; c++) memcpy(&hw[c], gp + o[c], 4);
      const __m512i v = _mm512_loadu_si512(hw); /* min in each dword's low half, step in the high */
      _mm512_storeu_ps(hd + (g - g0) * 32, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))));
      _mm512_storeu_ps(hd + (g - g0) * 32 + 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)));
    }
  }
}

/* One 64-block's 16 steps of a packed panel p against x's bytes o .. o + 63 of
 * rows xb[r]: acc[r] lane c += Σ W row c · x row r over the block. */
ZZ_QX_VNNI static inline __attribute__((always_inline)) void zz_xv_tile_steps(const int8_t *p,
                                                                              const int8_t *const xb[ZZ_XV_TM],
                                                                              int64_t o, __m512i acc[ZZ_XV_TM],
                                                                              const int ROWS) {
  /* the block's 16 steps in one asm block, x's 4 bytes broadcast by the
   * vpdpbusd itself ({1to16}): with the intrinsic GCC copied each sum to another
   * register every step (its vpdpbusd overwrites the sum it adds to), and a step
   * per asm block still had the sums change registers between them. One text
   * per row count (the first ROWS rows of the 8 operands; the rest unused). */
  __m512i a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7], wv;
/* clang-format off */
#define ZZ_XV_ROW(S4, X, A) "vpdpbusd " #S4 "(%[" X "])%{1to16%}, %[wv], %[" A "]\n\t"
#define ZZ_XV_R1(S4) ZZ_XV_ROW(S4, "x0", "a0")
#define ZZ_XV_R2(S4) ZZ_XV_R1(S4) ZZ_XV_ROW(S4, "x1", "a1")
#define ZZ_XV_R3(S4) ZZ_XV_R2(S4) ZZ_XV_ROW(S4, "x2", "a2")
#define ZZ_XV_R4(S4) ZZ_XV_R3(S4) ZZ_XV_ROW(S4, "x3", "a3")
#define ZZ_XV_R5(S4) ZZ_XV_R4(S4) ZZ_XV_ROW(S4, "x4", "a4")
#define ZZ_XV_R6(S4) ZZ_XV_R5(S4) ZZ_XV_ROW(S4, "x5", "a5")
#define ZZ_XV_R7(S4) ZZ_XV_R6(S4) ZZ_XV_ROW(S4, "x6", "a6")
#define ZZ_XV_R8(S4) ZZ_XV_R7(S4) ZZ_XV_ROW(S4, "x7", "a7")
#define ZZ_XV_STEP(R, S64, S4) "vmovdqa64 " #S64 "(%[p]), %[wv]\n\t" R(S4)
#define ZZ_XV_BLOCK(R)                                                                                                 \
  ZZ_XV_STEP(R, 0, 0) ZZ_XV_STEP(R, 64, 4) ZZ_XV_STEP(R, 128, 8) ZZ_XV_STEP(R, 192, 12)                              \
  ZZ_XV_STEP(R, 256, 16) ZZ_XV_STEP(R, 320, 20) ZZ_XV_STEP(R, 384, 24) ZZ_XV_STEP(R, 448, 28)                        \
  ZZ_XV_STEP(R, 512, 32) ZZ_XV_STEP(R, 576, 36) ZZ_XV_STEP(R, 640, 40) ZZ_XV_STEP(R, 704, 44)                        \
  ZZ_XV_STEP(R, 768, 48) ZZ_XV_STEP(R, 832, 52) ZZ_XV_STEP(R, 896, 56) ZZ_XV_STEP(R, 960, 60)
#define ZZ_XV_ASM(R)                                                                                                   \
  __asm__(ZZ_XV_BLOCK(R)                                                                                               \
          : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5),                  \
            [a6] "+v"(a6), [a7] "+v"(a7), [wv] "=&v"(wv)                                                               \
          : [p] "r"(p), [x0] "r"(xb[0] + o), [x1] "r"(xb[1] + o), [x2] "r"(xb[2] + o), [x3] "r"(xb[3] + o),           \
            [x4] "r"(xb[4] + o), [x5] "r"(xb[5] + o), [x6] "r"(xb[6] + o), [x7] "r"(xb[7] + o)                         \
          : "memory")
  switch (ROWS) {
    case 1: ZZ_XV_ASM(ZZ_XV_R1); break;
    case 2: ZZ_XV_ASM(ZZ_XV_R2); break;
    case 3: ZZ_XV_ASM(ZZ_XV_R3); break;
    case 4: ZZ_XV_ASM(ZZ_XV_R4); break;
    case 5: ZZ_XV_ASM(ZZ_XV_R5); break;
    case 6: ZZ_XV_ASM(ZZ_XV_R6); break;
    case 7: ZZ_XV_ASM(ZZ_XV_R7); break;
    default: ZZ_XV_ASM(ZZ_XV_R8); break;
  }
#undef ZZ_XV_ASM
#undef ZZ_XV_BLOCK
#undef ZZ_XV_STEP
#undef ZZ_XV_R8
#undef ZZ_XV_R7
#undef ZZ_XV_R6
#undef ZZ_XV_R5
#undef ZZ_XV_R4
#undef ZZ_XV_R3
#undef ZZ_XV_R2
#undef ZZ_XV_R1
#undef ZZ_XV_ROW
  /* clang-format on */
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
}

/* One group's float part for a row of x (its scales sx, ng groups) and 16 W
 * rows: acc (+)= step · sx_g · I + min · sx_g · Σxi, the portable kernel's
 * rounding per lane (hd_g: the group's 16 steps, then its 16 mins; i32: the
 * group's integer sums). */
ZZ_QX_VNNI static inline __attribute__((always_inline)) __m512 zz_xv_fold(const float *hd_g, const float *sx, int64_t g,
                                                                          int64_t ng, __m512i i32, __m512 acc) {
  const __m512 st = _mm512_load_ps(hd_g), mn = _mm512_load_ps(hd_g + 16);
  const __m512 f = _mm512_fmadd_ps(_mm512_mul_ps(st, _mm512_set1_ps(sx[g])), _mm512_cvtepi32_ps(i32), acc);
  return _mm512_fmadd_ps(mn, _mm512_set1_ps(sx[ng + g]), f);
}

/* ROWS rows of x from xq times a packed panel (whole groups; a: the panel's
 * zz_xq_tile_args), into y[r * ldy + c], c < nw: the sums so far loaded from y
 * (first: from 0), the block's groups added in order, stored back. */
ZZ_QX_VNNI static inline __attribute__((always_inline)) void zz_xv_tile(const zz_xq_tile_args *a, const char *xq,
                                                                        float *y, const int ROWS) {
  const int8_t *pk = a->pk;
  const float *hd = a->hd;
  const int64_t b0 = a->b0, in = a->in, ng = a->ng, ldy = a->ldy;
  const size_t x_row = a->x_row;
  const int nb = a->nb, group = a->group, nw = a->nw, first = a->first;
  const __mmask16 mask = (__mmask16)(nw >= ZZ_XV_PW ? 0xffff : (1u << nw) - 1);
  const int64_t g0 = b0 * 64 / group;
  __m512 facc[ZZ_XV_TM];
  __m512i acc[ZZ_XV_TM];
  const int8_t *xb[ZZ_XV_TM];
  const float *sx[ZZ_XV_TM];
  for (int r = 0; r < ZZ_XV_TM; r++) { /* rows past ROWS: row 0's pointers, sums never read */
    const char *rec = xq + (size_t)(r < ROWS ? r : 0) * x_row;
    sx[r] = (const float *)rec;
    xb[r] = (const int8_t *)rec + ng * 12 + b0 * 64;
    facc[r] = first || r >= ROWS ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + r * ldy);
    acc[r] = _mm512_setzero_si512();
  }
  const int bpg = group / 64;
  int64_t g = g0;
  for (int b = 0, jb = 0; b < nb; b++) { /* jb: the block's place in its group */
    zz_xv_tile_steps(pk + (size_t)b * ZZ_XV_PB, xb, b * 64, acc, ROWS);
    if (!zz_xq_group_end(&jb, bpg, b0 + b, in)) continue; /* the group goes on */
    for (int r = 0; r < ROWS; r++) {
      facc[r] = zz_xv_fold(hd + (g - g0) * 32, sx[r], g, ng, acc[r], facc[r]);
      acc[r] = _mm512_setzero_si512();
    }
    g++;
  }
  for (int r = 0; r < ROWS; r++) _mm512_mask_storeu_ps(y + r * ldy, mask, facc[r]);
}

/* The tile with its row count a constant. */
ZZ_QX_VNNI static void zz_xv_tile_rows(const zz_xq_tile_args *a, const char *xq, int rows, float *y) {
  switch (rows) {
#define ZZ_XV_TILE_CASE(R)                                                                                             \
  case R: zz_xv_tile(a, xq, y, R); break;
    ZZ_XV_TILE_CASE(1)
    ZZ_XV_TILE_CASE(2)
    ZZ_XV_TILE_CASE(3)
    ZZ_XV_TILE_CASE(4)
    ZZ_XV_TILE_CASE(5)
    ZZ_XV_TILE_CASE(6)
    ZZ_XV_TILE_CASE(7)
    ZZ_XV_TILE_CASE(8)
#undef ZZ_XV_TILE_CASE
  }
}

ZZ_QX_VNNI static void zz_xv_pack4(const void *const wr[ZZ_XV_PW], int64_t b0, int nb, int group, size_t gb, int8_t *pk,
                                   float *hd, size_t pf) {
  zz_xv_pack(wr, b0, nb, group, gb, pk, hd, pf, 4);
}

ZZ_QX_VNNI static void zz_xv_pack8(const void *const wr[ZZ_XV_PW], int64_t b0, int nb, int group, size_t gb, int8_t *pk,
                                   float *hd, size_t pf) {
  zz_xv_pack(wr, b0, nb, group, gb, pk, hd, pf, 8);
}

/* ---- 8-bit at 1-3 rows of x (decoding) with VNNI: a GEMV of 16 W rows a call
 *
 * At batch 1 the AVX2 8-bit panel read LLaMA-7B's W at 0.55 of the read rate
 * on a Zen 5 (its sign trick, vpmaddubsw + vpmaddwd per W row, and a fold per
 * step) and the packed tile no better (a transpose per 64-block for one row).
 * Here W's bytes meet x's as they lie: per group, 64-block and W row one load
 * and one vpdpbusd (u8 W × s8 x, exact int32), the 16 rows' lanes summed by
 * one transpose-add tree into [c0 .. c15], then the float part per lane in the
 * portable order (the same bits). W rows c < nw lie w_row apart (the last
 * repeated up to 16, its outputs not stored); groups and K whole 64s
 * (zz_xv_gemv_takes). W is prefetched pf bytes ahead (the driver: the next
 * 16 rows' same group), every line of each row's group: on a Zen 5 (2 threads, LLaMA-7B's layer, by CPU time) it read W at
 * 0.70-0.71 of the streaming sum's rate without, 0.77-0.86 with (one line a
 * block: no gain), where the AVX2 panel read 0.53-0.58. */
#define ZZ_XV_GEMV_NR 16

/* [Σ p[0], Σ p[1], .., Σ p[15]]: each vector's 16 int32 lanes summed (exact) */
ZZ_QX_VNNI static inline __attribute__((always_inline)) __m512i zz_xv_sum16(const __m512i p[16]) {
  __m512i t[8], u[4];
  for (int i = 0; i < 8; i++) /* per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] of a = p[2i], b = p[2i + 1] */
    t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
                            _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
  for (int i = 0; i < 4; i++) /* per 128-bit lane: rows 4i .. 4i + 3, that lane's part */
    u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                            _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
  /* the 128-bit lanes summed: [u0 L0+L1, u0 L2+L3, u1 L0+L1, u1 L2+L3], then whole */
  const __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88), _mm512_shuffle_i32x4(u[0], u[1], 0xdd));
  const __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], 0x88), _mm512_shuffle_i32x4(u[2], u[3], 0xdd));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(s01, s23, 0x88), _mm512_shuffle_i32x4(s01, s23, 0xdd));
}

/* ---- 4-bit at 1-3 rows of x with VNNI: the same GEMV on nibbles, two W rows a zmm
 *
 * Rows c and c + 8 share a zmm (one 32-byte load each): the low nibbles meet
 * x's 32 even int8 and the high nibbles its 32 odd ones (the stored order of
 * a 64-block), each by one vpdpbusd with x's half broadcast to both rows; so
 * per 64 values of a row half a load, and and shift, and one vpdpbusd, where
 * the AVX2 GEMV (zz_xq_gemv4_avx2, its rate with W in L3 about what memory
 * gives a core on a Zen 5) spends two vpmaddubsw, an add and a fold. The 8
 * pair vectors are summed into one lane per row in the order
 * ZZ_XV_PAIR_ROWS (29 operations for 16 rows); the headers are read in that
 * order too and the sums put back in row order once, at the store. With W in
 * L3 it ran 47 GB/s a core (51 without its prefetch) where the AVX2 GEMV ran
 * 38-40; from memory it needs the prefetch of the next call's rows: without
 * it 0.55-0.60 of the read, with it 0.76-0.92 (AVX2 GEMV: 0.78-0.87). */
#define ZZ_XV_PAIR_ROWS 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15 /* lane -> W row */
#define ZZ_XV_ROW_LANES 0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15 /* W row -> lane */

/* Lane l = the sum of W row ZZ_XV_PAIR_ROWS[l]'s int32 lanes, where P[i] holds
 * row i in lanes 0-7 and row i + 8 in lanes 8-15 (exact). */
ZZ_QX_VNNI static inline __attribute__((always_inline)) __m512i zz_xv_sum_pairs(const __m512i P[8]) {
  __m512i v[4];
  for (int k = 0; k < 4; k++) {
    /* each pair's 128-bit lanes added: L0 row 2k's 4 parts, L2 row 2k + 8's (L1, L3 the same again) */
    const __m512i a = _mm512_add_epi32(P[2 * k], _mm512_shuffle_i32x4(P[2 * k], P[2 * k], 0xb1));
    const __m512i b = _mm512_add_epi32(P[2 * k + 1], _mm512_shuffle_i32x4(P[2 * k + 1], P[2 * k + 1], 0xb1));
    v[k] = _mm512_mask_blend_epi32(0xf0f0, a, b); /* L0 row 2k, L1 row 2k + 1, L2 row 2k + 8, L3 row 2k + 9 */
  }
  /* per 128-bit lane L, [v0 v1 v2 v3]'s 4 parts summed: lane 4L + k = v[k]'s row at L */
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

/* The VNNI GEMV of either width (BITS 4 or 8). FAST: 16 W rows (nw == 16) in
 * groups of 64 (a model's weights), each group one 64-block and the rows
 * addressed from 4 bases a row's bytes apart (a table of 16 offsets spilled);
 * else any whole 64s and the last row repeated. The sums' lanes follow W rows
 * in row order at 8 bits, in ZZ_XV_PAIR_ROWS order at 4 (the headers read in
 * the same order, the sums put back at the store). */
ZZ_QX_VNNI static inline __attribute__((always_inline)) void zz_xv_gemv_body(const char *xq, size_t x_row,
                                                                             const unsigned char *w, size_t w_row,
                                                                             int nw, int64_t in, int group, float *y,
                                                                             int64_t ldy, size_t pf, const int BITS,
                                                                             const int ROWS, const int FAST) {
  if (FAST) group = 64, nw = ZZ_XV_GEMV_NR;
  static const int32_t pair_rows[ZZ_XV_GEMV_NR] = {ZZ_XV_PAIR_ROWS}, row_lanes[ZZ_XV_GEMV_NR] = {ZZ_XV_ROW_LANES};
  const int64_t ng = zz_xq_groups(in, group);
  const size_t gb = zz_q_group_nbytes(BITS, group);
  zz_xq_view xv[ZZ_XQ_GEMV_ROWS];
  for (int r = 0; r < ROWS; r++) xv[r] = zz_xq_view_of(xq + (size_t)r * x_row, ng);
  size_t o[ZZ_XV_GEMV_NR]; /* row c's offset from row 0 (the last row repeated past nw) */
  for (int c = 0; c < ZZ_XV_GEMV_NR; c++) o[c] = (size_t)(c < nw ? c : nw - 1) * w_row;
  const __mmask16 mask = (__mmask16)(nw >= ZZ_XV_GEMV_NR ? 0xffff : (1u << nw) - 1);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512 acc[ZZ_XQ_GEMV_ROWS];
  for (int r = 0; r < ROWS; r++) acc[r] = _mm512_setzero_ps();
  const unsigned char *gp = w; /* group g of row 0 */
#define ZZ_XV_ROWP(c) (FAST ? bq[(c) >> 2] + ((c)&3) * w_row : gp + o[c])
  for (int64_t g = 0; g < ng; g++, gp += gb) {
    const unsigned char *bq[4] = {gp, gp + 4 * w_row, gp + 8 * w_row, gp + 12 * w_row};
    const int64_t k0 = g * group, m = FAST ? 64 : in - k0 < group ? in - k0 : group; /* a multiple of 64 */
    /* the 16 headers (f16 min, f16 step) lane by lane, widened exactly as the table does */
    int32_t hv[ZZ_XV_GEMV_NR];
    for (int l = 0; l < ZZ_XV_GEMV_NR; l++) memcpy(&hv[l], ZZ_XV_ROWP(BITS == 4 ? pair_rows[l] : l), 4);
    const __m512i h = _mm512_loadu_si512(hv);
    const __m512 mn = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)),
                 st = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
    for (int64_t b = 0; b < 4 + m * BITS / 8; b += 64) /* each line of the next call's rows' group */
      for (int c = 0; c < ZZ_XV_GEMV_NR; c++) _mm_prefetch((const char *)ZZ_XV_ROWP(c) + pf + b, _MM_HINT_T0);
    for (int r = 0; r < ROWS; r++) { /* W's lines are in L1 after the first row */
      const int8_t *xp = xv[r].q + k0;
      __m512i isum;
      if (BITS == 8) {
        __m512i p[ZZ_XV_GEMV_NR];
        for (int c = 0; c < ZZ_XV_GEMV_NR; c++) p[c] = _mm512_setzero_si512();
        for (int64_t e = 0; e < m; e += 64) {
          const __m512i xz = _mm512_loadu_si512((const void *)(xp + e));
          for (int c = 0; c < ZZ_XV_GEMV_NR; c++)
            p[c] = _mm512_dpbusd_epi32(p[c], _mm512_loadu_si512((const void *)(ZZ_XV_ROWP(c) + 4 + e)), xz);
        }
        isum = zz_xv_sum16(p);
      } else {
        __m512i p[ZZ_XV_GEMV_NR / 2];
        for (int i = 0; i < ZZ_XV_GEMV_NR / 2; i++) p[i] = _mm512_setzero_si512();
        for (int64_t e = 0; e < m; e += 64) {
          const __m512i xe = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xp + e)));
          const __m512i xo = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xp + e + 32)));
          for (int i = 0; i < ZZ_XV_GEMV_NR / 2; i++) {
            const __m512i z = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ZZ_XV_ROWP(i) + 4 + e / 2))),
                _mm256_loadu_si256((const __m256i *)(ZZ_XV_ROWP(i + 8) + 4 + e / 2)), 1);
            p[i] = _mm512_dpbusd_epi32(p[i], _mm512_and_si512(z, m4), xe);
            p[i] = _mm512_dpbusd_epi32(p[i], _mm512_and_si512(_mm512_srli_epi16(z, 4), m4), xo);
          }
        }
        isum = zz_xv_sum_pairs(p);
      }
      const __m512 f = _mm512_fmadd_ps(_mm512_mul_ps(st, _mm512_set1_ps(xv[r].sx[g])), _mm512_cvtepi32_ps(isum),
                                       acc[r]);
      acc[r] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xv[r].sxs[g]), f);
    }
  }
#undef ZZ_XV_ROWP
  const __m512i row_lane = _mm512_loadu_si512(row_lanes);
  for (int r = 0; r < ROWS; r++)
    _mm512_mask_storeu_ps(y + r * ldy, mask, BITS == 4 ? _mm512_permutexvar_ps(row_lane, acc[r]) : acc[r]);
}

/* The body with its row count and shape constants. */
#define ZZ_XV_GEMV_FN(name, BITS)                                                                                      \
  ZZ_QX_VNNI static void name(const char *xq, size_t x_row, int rows, const unsigned char *w, size_t w_row, int nw,    \
                              int64_t in, int group, float *y, int64_t ldy, size_t pf) {                               \
    const int fast = nw == ZZ_XV_GEMV_NR && group == 64;                                                               \
    switch (rows * 2 + fast) {                                                                                         \
      case 2: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 1, 0); break;                      \
      case 3: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 1, 1); break;                      \
      case 4: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 2, 0); break;                      \
      case 5: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 2, 1); break;                      \
      case 6: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 3, 0); break;                      \
      default: zz_xv_gemv_body(xq, x_row, w, w_row, nw, in, group, y, ldy, pf, BITS, 3, 1); break;                     \
    }                                                                                                                  \
  }
ZZ_XV_GEMV_FN(zz_xv_gemv8, 8)
ZZ_XV_GEMV_FN(zz_xv_gemv4, 4)
#undef ZZ_XV_GEMV_FN

/* Whether the VNNI GEMVs (4 and 8 bits) take n rows of x against a weight of
 * `in` in groups of `group` (whole 64s) on this process's ISA and CPU. */
static bool zz_xv_gemv_takes(int64_t n, int64_t in, int group) {
  return n <= ZZ_XQ_GEMV_ROWS && group % 64 == 0 && in % 64 == 0 && zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX512 &&
         zz_cpu_has_vnni();
}

/* ---------------------------------------------------------------- AMX (ISA amx)
 *
 * The VNNI tile's panel is, 64-block by 64-block, an AMX B tile as it lies:
 * 16 rows (steps s: positions 4s .. 4s + 3) of 16 W rows × 4 u8. So under ISA
 * amx the same packing feeds tdpbsud (s8 A × u8 B into i32): A = up to 16 rows
 * of x's int8, the block's 64 bytes of each, loaded from the stored rows as
 * they are (x_row apart), C = those rows × the panel's 16 W rows, the exact
 * integer sums over a group (tiles 4, 6 and 0 of zz_amx_cfg_fill), stored at
 * the group's end and folded by the VNNI tile's float part (zz_xv_fold): the
 * same bits as zz_xq_panel_c, 16 rows of x a tile. */
#define ZZ_XA_TM 16 /* rows of x in a tile */
#ifndef ZZ_XA_PF
#define ZZ_XA_PF 2 /* x's lines prefetched (into L1) this many 64-blocks ahead of their tile load */
#endif
#define ZZ_QX_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")))

/* Group gi's blocks blk[gi] .. blk[gi + 1] into C tile T by A tile TA and B tile
 * TB (two groups in flight use disjoint tiles; literal numbers: the intrinsics
 * paste them into the instruction). */
#define ZZ_XA_GROUP(T, TA, TB, gi)                                                                                     \
  do {                                                                                                                 \
    _tile_zero(T);                                                                                                     \
    for (int b = blk[gi]; b < blk[(gi) + 1]; b++) {                                                                    \
      if (b + ZZ_XA_PF < nb)                                                                                           \
        for (int r = 0; r < rows; r++) _mm_prefetch((const char *)xb + (b + ZZ_XA_PF) * 64 + r * x_row, _MM_HINT_T0);  \
      _tile_loadd(TA, xb + b * 64, x_row);                                                                             \
      _tile_loadd(TB, pk + (size_t)b * ZZ_XV_PB, 64);                                                                  \
      _tile_dpbsud(T, TA, TB);                                                                                         \
    }                                                                                                                  \
  } while (0)

/* Group gi's sums, stored from C tile T, folded into facc (the VNNI tile's float part). */
#define ZZ_XA_FOLD(T, gi)                                                                                              \
  do {                                                                                                                 \
    _tile_stored(T, c, sizeof c[0]);                                                                                   \
    for (int r = 0; r < rows; r++)                                                                                     \
      facc[r] = zz_xv_fold(hd + (gi)*32, (const float *)(xq + (size_t)r * x_row), g0 + (gi), ng,                       \
                           _mm512_load_si512(c[r]), facc[r]);                                                          \
  } while (0)

/* The fold of a group (a tile store, then 4 vector operations a row) takes about
 * twice the time of its tdpbsud, and waits for it: so the groups go two at a time
 * through C tiles 0 and 1, the next group's tdpbsud issued before this one's
 * fold, and the tile unit runs while the vector units fold. */
ZZ_QX_AMX static void zz_xa_tile_rows(const zz_xq_tile_args *a, const char *xq, int rows, float *y) {
  const int8_t *pk = a->pk;
  const float *hd = a->hd;
  const int64_t b0 = a->b0, in = a->in, ng = a->ng, ldy = a->ldy;
  const size_t x_row = a->x_row;
  const int nb = a->nb, group = a->group, nw = a->nw, first = a->first;
  const __mmask16 mask = (__mmask16)(nw >= ZZ_XV_PW ? 0xffff : (1u << nw) - 1);
  const int64_t g0 = b0 * 64 / group;
  int blk[ZZ_XV_KC / 64 + 1], ngr = 0; /* group gi: blocks blk[gi] .. blk[gi + 1] */
  blk[0] = 0;
  for (int b = 0, jb = 0; b < nb; b++)
    if (zz_xq_group_end(&jb, group / 64, b0 + b, in)) blk[++ngr] = b + 1;
  zz_amx_cfg cfg;
  zz_amx_cfg_fill(&cfg, rows, rows); /* C 0, 1 and A 4, 5: the rows of x; B 6, 7 */
  _tile_loadconfig(&cfg);
  __m512 facc[ZZ_XA_TM];
  for (int r = 0; r < rows; r++) facc[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + r * ldy);
  const int8_t *xb = (const int8_t *)xq + ng * 12 + b0 * 64;
  _Alignas(64) int32_t c[ZZ_XA_TM][ZZ_XV_PW];
  if (ngr > 0) ZZ_XA_GROUP(0, 4, 6, 0);
  for (int gi = 0; gi < ngr; gi += 2) {
    if (gi + 1 < ngr) ZZ_XA_GROUP(1, 5, 7, gi + 1);
    ZZ_XA_FOLD(0, gi);
    if (gi + 1 == ngr) break;
    if (gi + 2 < ngr) ZZ_XA_GROUP(0, 4, 6, gi + 2);
    ZZ_XA_FOLD(1, gi + 1);
  }
  _tile_release();
  for (int r = 0; r < rows; r++) _mm512_mask_storeu_ps(y + r * ldy, mask, facc[r]);
}
#undef ZZ_XA_FOLD
#undef ZZ_XA_GROUP

/* A packed tile's kernels and blocking: W rows of a panel, rows of x of a
 * register tile, K of a packed panel (whole groups within it), the panel's
 * packing and the tile over rows of x (both at one number of bits). */
typedef void (*zz_xq_pack_fn)(const void *const *wr, int64_t b0, int nb, int group, size_t gb, int8_t *pk, float *hd,
                              size_t pf);
typedef void (*zz_xq_rows_fn)(const zz_xq_tile_args *a, const char *xq, int rows, float *y);
typedef struct zz_xq_tile_ops {
  int pw, tm;
  int64_t kc;
  zz_xq_pack_fn pack;
  zz_xq_rows_fn rows;
} zz_xq_tile_ops;

/* the walker's stack buffers hold a packed panel and its heads of either tile */
#define ZZ_XQ_PK_BYTES (16 << 10)
#define ZZ_XQ_HD_FLOATS 512
#define ZZ_XQ_PW_MAX ZZ_XV_PW
_Static_assert(ZZ_XQ_KC_MAX / 64 * ZZ_XQ_PB <= ZZ_XQ_PK_BYTES && ZZ_XV_KC / 64 * ZZ_XV_PB <= ZZ_XQ_PK_BYTES,
               "a packed panel fits the walker's buffer");
_Static_assert(ZZ_XQ_KC_MAX / 64 * 16 <= ZZ_XQ_HD_FLOATS && ZZ_XV_KC / 64 * 32 <= ZZ_XQ_HD_FLOATS,
               "a panel's heads fit the walker's buffer");
_Static_assert(ZZ_XQ_PW <= ZZ_XQ_PW_MAX, "a panel's rows fit the walker's pointers");

/* AVX2 [4-bit, 8-bit] (8-bit's blocks take twice the bytes: half the K), AVX-512 VNNI [4-bit, 8-bit]. */
static const zz_xq_tile_ops zz_xq_tiles_avx2[2] = {
    {.pw = ZZ_XQ_PW, .tm = ZZ_XQ_TM, .kc = ZZ_XQ_KC_MAX, .pack = zz_xq_pack4_avx2, .rows = zz_xq_rows4_avx2},
    {.pw = ZZ_XQ_PW, .tm = ZZ_XQ_TM, .kc = ZZ_XQ_KC_MAX / 2, .pack = zz_xq_pack8_avx2, .rows = zz_xq_rows8_avx2}};
static const zz_xq_tile_ops zz_xq_tiles_vnni[2] = {
    {.pw = ZZ_XV_PW, .tm = ZZ_XV_TM, .kc = ZZ_XV_KC, .pack = zz_xv_pack4, .rows = zz_xv_tile_rows},
    {.pw = ZZ_XV_PW, .tm = ZZ_XV_TM, .kc = ZZ_XV_KC, .pack = zz_xv_pack8, .rows = zz_xv_tile_rows}};
static const zz_xq_tile_ops zz_xq_tiles_amx[2] = {
    {.pw = ZZ_XV_PW, .tm = ZZ_XA_TM, .kc = ZZ_XV_KC, .pack = zz_xv_pack4, .rows = zz_xa_tile_rows},
    {.pw = ZZ_XV_PW, .tm = ZZ_XA_TM, .kc = ZZ_XV_KC, .pack = zz_xv_pack8, .rows = zz_xa_tile_rows}};

/* Which packed tile takes n rows of x of `in` against groups of `bits`, `group`:
 * the AMX one under ISA amx, the VNNI one where the process's ISA is AVX-512
 * and the CPU has avx512_vnni, else the AVX2 one; NULL where none applies
 * (fewer than ZZ_XQ_TILE_MIN rows, groups or K not whole 64s, a group larger
 * than the tile's K block). */
static const zz_xq_tile_ops *zz_xq_tile_pick(int bits, int64_t n, int64_t in, int group) {
  if (n < ZZ_XQ_TILE_MIN || group % 64 != 0 || in % 64 != 0) return NULL;
  const zz_cpu_isa isa = zz_cpu_isa_get();
  const zz_xq_tile_ops *t = isa == ZZ_CPU_ISA_AMX                           ? &zz_xq_tiles_amx[bits == 8]
                            : isa >= ZZ_CPU_ISA_AVX512 && zz_cpu_has_vnni() ? &zz_xq_tiles_vnni[bits == 8]
                                                                            : &zz_xq_tiles_avx2[bits == 8];
  return group <= t->kc ? t : NULL;
}

/* What every panel of one task reads and writes beyond its job j (whose tile,
 * x's int8 rows and W's rows it walks): the bytes of one group of a W row, x's
 * groups per row, the K block kc, the task's last output c_hi, and its
 * packing buffers. */
typedef struct zz_xq_chunk {
  const zz_xq_gemm_job *j;
  size_t gb;
  int64_t ng, kc, c_hi;
  int8_t *pk;
  float *hd;
} zz_xq_chunk;

/* Panel c0 (W rows c0 .. c0 + t->pw, clamped to c_hi) over the K block from k0:
 * packed into pk / hd (W fetched pf bytes ahead of each read), then times every
 * tile of t->tm rows of x in m0 .. m1. */
static inline void zz_xq_tile_panel(const zz_xq_chunk *q, int64_t c0, int64_t k0, int64_t m0, int64_t m1, size_t pf) {
  const zz_xq_gemm_job *j = q->j;
  const zz_xq_tile_ops *t = j->tile;
  const int nw = q->c_hi - c0 < t->pw ? (int)(q->c_hi - c0) : t->pw;
  const int nb = (int)((j->in - k0 < q->kc ? j->in - k0 : q->kc) / 64);
  const void *wr[ZZ_XQ_PW_MAX];
  for (int c = 0; c < t->pw; c++) wr[c] = j->w + (size_t)(c0 + (c < nw ? c : nw - 1)) * j->w_row;
  t->pack(wr, k0 / 64, nb, j->group, q->gb, q->pk, q->hd, pf);
  const zz_xq_tile_args a = {.pk = q->pk,
                             .hd = q->hd,
                             .b0 = k0 / 64,
                             .nb = nb,
                             .first = k0 == 0,
                             .nw = nw,
                             .in = j->in,
                             .ng = q->ng,
                             .group = j->group,
                             .x_row = j->x_row,
                             .ldy = j->out};
  for (int64_t r0 = m0; r0 < m1; r0 += t->tm) {
    const int rows = m1 - r0 < t->tm ? (int)(m1 - r0) : t->tm;
    t->rows(&a, j->xq + (size_t)r0 * j->x_row, rows, j->y + r0 * j->out + c0);
  }
}

/* One task's W rows [c_lo, c_hi) against all n rows of x by the job's tile. Up to
 * ZZ_XQ_STREAM_N rows (decode) each panel's K blocks run back to back, so its
 * W rows stream start to end and x (at most 16 rows) stays in L2; each read
 * fetches the same place of the panel's next K block, or of the next panel's
 * first. With more rows, blocks of rows of x (their int8 within ZZ_XQ_XBLOCK
 * over a K block: in L2 across the panels) outside, then K blocks of up to
 * t->kc, then panels of t->pw W rows (packed once per row block, in L1) times
 * every tile of t->tm rows of the block: a row block's outputs (its rows × the
 * task's 64 columns) stay in cache across the K blocks (small K blocks over
 * all n rows sent each tile's sums to L3 and back: half the speed at 512
 * rows). y holds each output's float sum between K blocks; groups go in order
 * either way, so the bits are the panel's. */
#define ZZ_XQ_STREAM_N 16
static void zz_xq_tile_chunk(const zz_xq_gemm_job *j, int64_t c_lo, int64_t c_hi) {
  _Alignas(64) int8_t pk[ZZ_XQ_PK_BYTES];
  _Alignas(64) float hd[ZZ_XQ_HD_FLOATS];
  const zz_xq_tile_ops *t = j->tile;
  const int64_t n = j->n, in = j->in, out = j->out;
  const int group = j->group;
  const size_t w_row = j->w_row;
  const int64_t kmax = t->kc / group * group;
  const int64_t kc = kmax < in ? kmax : in;
  const size_t gb = zz_q_group_nbytes(j->bits, group);
  const zz_xq_chunk q = {.j = j, .gb = gb, .ng = zz_xq_groups(in, group), .kc = kc, .c_hi = c_hi, .pk = pk, .hd = hd};
  if (n <= ZZ_XQ_STREAM_N) {
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += t->pw)
      for (int64_t k0 = 0; k0 < in; k0 += kc) {
        const size_t kb = (size_t)(k0 / group) * gb; /* the K block's first byte in a row */
        const size_t pf = k0 + kc < in            ? (size_t)(kc / group) * gb
                          : c0 + 2 * t->pw <= out ? (size_t)t->pw * w_row - kb
                                                  : 0;
        zz_xq_tile_panel(&q, c0, k0, 0, n, pf);
      }
    return;
  }
  int64_t mb = ZZ_XQ_XBLOCK / kc;
  mb = mb < t->tm ? t->tm : mb - mb % t->tm;
  for (int64_t m0 = 0; m0 < n; m0 += mb) {
    const int64_t m1 = n - m0 < mb ? n : m0 + mb;
    for (int64_t k0 = 0; k0 < in; k0 += kc)
      for (int64_t c0 = c_lo; c0 < c_hi; c0 += t->pw) {
        /* the first row block reads W from memory: prefetch the next panel's rows,
         * past this task's too (often this thread's next); none past the matrix */
        const size_t pf = m0 == 0 && c0 + 2 * t->pw <= out ? (size_t)t->pw * w_row : 0;
        zz_xq_tile_panel(&q, c0, k0, m0, m1, pf);
      }
  }
}
#endif

/* ---------------------------------------------------------------- the driver */

/* One task: ZZ_XQ_CHUNK rows of W against all rows of x, blocks of ZZ_XQ_MB rows
 * of x outside (a block's int8 rows stay in L2 while the chunk's W panels pass;
 * the chunk's W, 64 rows, stays in L2 for the next block). Each output is one
 * panel call's whole sum, whatever the blocking: the bits follow the shape alone.
 * 1-3 rows of x with a GEMV: its gemv_nr rows a call instead. */
static void zz_xq_gemm_chunk(void *arg, int64_t t) {
  const zz_xq_gemm_job *j = arg;
  const int64_t c_lo = t * ZZ_XQ_CHUNK, c_hi = c_lo + ZZ_XQ_CHUNK < j->out ? c_lo + ZZ_XQ_CHUNK : j->out;
  if (j->gemv) {
    const int nr = j->gemv_nr;
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += nr) {
      const int nw = c_hi - c0 < nr ? (int)(c_hi - c0) : nr;
      /* prefetch the next call's rows, past this task's too (the next task is often
       * this thread's); none past the matrix */
      const size_t pf = c0 + 2 * nr <= j->out ? (size_t)nr * j->w_row : 0;
      j->gemv(j->xq, j->x_row, (int)j->n, j->w + (size_t)c0 * j->w_row, j->w_row, nw, j->in, j->group, j->y + c0,
              j->out, pf);
    }
    zz_bias_relu_cols(j->y, j->n, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
    return;
  }
#ifdef ZZ_XQ_X86
  if (j->tile) {
    zz_xq_tile_chunk(j, c_lo, c_hi);
    zz_bias_relu_cols(j->y, j->n, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
    return;
  }
#endif
  for (int64_t m0 = 0; m0 < j->n; m0 += ZZ_XQ_MB) {
    const int rows = j->n - m0 < ZZ_XQ_MB ? (int)(j->n - m0) : ZZ_XQ_MB;
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_XQ_NR) {
      const int nw = c_hi - c0 < ZZ_XQ_NR ? (int)(c_hi - c0) : ZZ_XQ_NR;
      const void *wr[ZZ_XQ_NR];
      for (int c = 0; c < ZZ_XQ_NR; c++) wr[c] = j->w + (size_t)(c0 + (c < nw ? c : nw - 1)) * j->w_row;
      /* the first block reads W from memory: prefetch the next panel (as the
       * GEMV does); the later ones find the chunk in L2 */
      const size_t pf = m0 == 0 && c0 + 2 * ZZ_XQ_NR <= j->out ? ZZ_XQ_NR * j->w_row : 0;
      j->panel(j->xq + (size_t)m0 * j->x_row, j->x_row, rows, wr, nw, j->in, j->group, j->y + m0 * j->out + c0, j->out,
               pf);
    }
    zz_bias_relu_cols(j->y + m0 * j->out, rows, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
  }
}

void zz_xq_gemm(zz_pool *pool, const void *xq, size_t x_row, int64_t n, int64_t in, const void *w, size_t w_row,
                int bits, int group, const float *b, int64_t out, float *y, int relu) {
  zz_xq_gemm_job j = {.xq = xq, .x_row = x_row, .w = w, .w_row = w_row, .b = b, .y = y, .relu = relu, .bits = bits};
  j.n = n, j.in = in, j.out = out, j.group = group, j.panel = bits == 4 ? zz_xq_panel4_c : zz_xq_panel8_c;
#ifdef ZZ_XQ_X86
  if (zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX2) {
    j.panel = bits == 4 ? zz_xq_panel4_avx2 : zz_xq_panel8_avx2;
    if (n <= ZZ_XQ_GEMV_ROWS && bits == 4) j.gemv = zz_xq_gemv4_avx2, j.gemv_nr = ZZ_XQ_GEMV_NR;
    if (zz_xv_gemv_takes(n, in, group)) j.gemv = bits == 8 ? zz_xv_gemv8 : zz_xv_gemv4, j.gemv_nr = ZZ_XV_GEMV_NR;
    j.tile = zz_xq_tile_pick(bits, n, in, group);
  }
#endif
  zz_pool_run(pool, zz_xq_gemm_chunk, &j, (out + ZZ_XQ_CHUNK - 1) / ZZ_XQ_CHUNK);
}
