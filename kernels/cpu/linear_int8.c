/*
 * linear_int8.c — the int8-activation micro-kernels of the 4/8-bit linear
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
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* Bytes of the group holding m elements of `bits`, as kernels/cpu/quant.c lays it out. */
static inline size_t zz_xq_group_bytes(int bits, int64_t m) { return 4 + (size_t)((m * bits + 7) / 8 + 1) / 2 * 2; }

static inline int64_t zz_xq_groups(int64_t in, int group) { return (in + group - 1) / group; }

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

void zz_xq_quantize_row(const float *x, int64_t in, int group, int bits, void *rec) {
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

/* ---------------------------------------------------------------- portable (the reference) */

static inline void zz_qx_c(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group,
                           const int bits, float tile[4][4]) {
  const float *tab = zz_f16_table();
  const int64_t ng = zz_xq_groups(kc, group);
  const size_t gb = zz_xq_group_bytes(bits, group);
  for (int r = 0; r < mr; r++) {
    const float *sx = xr[r], *sxs = sx + ng;
    const int8_t *xq = (const int8_t *)((const int32_t *)(sxs + ng) + ng);
    for (int c = 0; c < 4; c++) {
      float acc = 0;
      for (int64_t g = 0; g < ng; g++) {
        const int64_t k0 = g * group, m = kc - k0 < group ? kc - k0 : group;
        const unsigned char *gp = (const unsigned char *)wr[c] + (size_t)g * gb, *d = gp + 4;
        uint16_t hmin, hstep;
        memcpy(&hmin, gp, 2);
        memcpy(&hstep, gp + 2, 2);
        int32_t isum = 0;
        for (int64_t e = 0; e < m; e++) {
          int32_t qv = bits == 4 ? (d[e / 2] >> (4 * (e & 1))) & 15 : d[e];
          isum += qv * xq[k0 + zz_xq_pos(bits, e, m)];
        }
        acc = fmaf(tab[hstep] * sx[g], (float)isum, acc);
        acc = fmaf(tab[hmin], sxs[g], acc);
      }
      tile[r][c] = acc;
    }
  }
}

void zz_micro_q4x_c(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group, float tile[4][4]) {
  zz_qx_c(xr, wr, kc, mr, group, 4, tile);
}

void zz_micro_q8x_c(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group, float tile[4][4]) {
  zz_qx_c(xr, wr, kc, mr, group, 8, tile);
}

/* ---------------------------------------------------------------- AVX2 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZZ_QX_AVX2 __attribute__((target("avx2,fma,f16c")))

/* The 4 (or 2) int32 sums of a[c]'s 8 lanes each, in lanes 0..COLS-1. */
ZZ_QX_AVX2 static inline __m128i zz_hsum_cols(const __m256i a[4], const int COLS) {
  __m256i h = COLS == 4 ? _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]))
                        : _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_setzero_si256());
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* ROWS rows of x against COLS W rows (all constants after inlining). Per group:
 * 64 4-bit values (or 32 8-bit ones) a step as u8 × s8 pairs summed to int16
 * and then to int32 lanes; the group's rest in scalar integers; the lanes
 * summed, then the float part in lanes 0..COLS-1, in the portable order. */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_qx_avx2_tile(const void *const *xr,
                                                                             const void *const *wr, int64_t kc,
                                                                             int group, const int BITS, const int ROWS,
                                                                             const int COLS, float out[4][4]) {
  const int64_t ng = zz_xq_groups(kc, group);
  const size_t gb = zz_xq_group_bytes(BITS, group);
  const __m256i mins_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);
  const float *sx[4], *sxs[4];
  const int32_t *xsum[4];
  const int8_t *xq[4];
  for (int r = 0; r < ROWS; r++) {
    sx[r] = xr[r], sxs[r] = sx[r] + ng, xsum[r] = (const int32_t *)(sxs[r] + ng),
    xq[r] = (const int8_t *)(xsum[r] + ng);
  }
  __m128 acc[4];
  for (int r = 0; r < ROWS; r++) acc[r] = _mm_setzero_ps();
  for (int64_t g = 0; g < ng; g++) {
    const int64_t k0 = g * group, m = kc - k0 < group ? kc - k0 : group;
    const int64_t mv = BITS == 4 ? m - m % 64 : m - m % 32; /* vector part */
    /* the COLS headers (min, step) widened by vcvtph2ps: exact, the table's values;
     * built in registers (4 scalar stores read back as one vector stall the
     * store forwarding, about as long as the group's products) */
    const unsigned char *d[4];
    uint32_t h[4] = {0, 0, 0, 0};
    for (int c = 0; c < COLS; c++) {
      const unsigned char *gp = (const unsigned char *)wr[c] + (size_t)g * gb;
      memcpy(&h[c], gp, 4);
      d[c] = gp + 4;
    }
    const __m256 hf = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3])), mins_first);
    const __m128 vmn = _mm256_castps256_ps128(hf), vst = _mm256_extractf128_ps(hf, 1);
    __m256i is[4][4];
    for (int r = 0; r < ROWS; r++)
      for (int c = 0; c < COLS; c++) is[r][c] = _mm256_setzero_si256();
    for (int64_t e = 0; e < mv; e += (BITS == 4 ? 64 : 32)) {
      for (int c = 0; c < COLS; c++) {
        if (BITS == 4) {
          __m256i v = _mm256_loadu_si256((const __m256i *)(d[c] + e / 2));
          __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          for (int r = 0; r < ROWS; r++) {
            __m256i xe = _mm256_loadu_si256((const __m256i *)(xq[r] + k0 + e));
            __m256i xo = _mm256_loadu_si256((const __m256i *)(xq[r] + k0 + e + 32));
            /* each pair <= 2 · 15 · 127, the two sums <= 7620: no int16 saturation */
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
            is[r][c] = _mm256_add_epi32(is[r][c], _mm256_madd_epi16(p, ones));
          }
        } else {
          /* q - 128 in s8; |q - 128| <= 128 times |xi| <= 127, pairs <= 32512: no
           * saturation (q itself, up to 255, could overflow a pair); S · 128 is added back */
          __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(d[c] + e)), bias);
          __m256i aa = _mm256_abs_epi8(a);
          for (int r = 0; r < ROWS; r++) {
            __m256i xs = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xq[r] + k0 + e)), a);
            is[r][c] = _mm256_add_epi32(is[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(aa, xs), ones));
          }
        }
      }
    }
    for (int r = 0; r < ROWS; r++) {
      __m128i isum = zz_hsum_cols(is[r], COLS);
      if (BITS == 8) isum = _mm_add_epi32(isum, _mm_set1_epi32(128 * xsum[r][g]));
      if (mv < m) { /* the group's rest past the vector steps */
        int32_t rest[4] = {0, 0, 0, 0};
        for (int c = 0; c < COLS; c++)
          for (int64_t e = mv; e < m; e++) {
            int32_t qv = BITS == 4 ? (d[c][e / 2] >> (4 * (e & 1))) & 15 : d[c][e] - 128;
            rest[c] += qv * xq[r][k0 + e];
          }
        isum = _mm_add_epi32(isum, _mm_setr_epi32(rest[0], rest[1], rest[2], rest[3]));
      }
      acc[r] = _mm_fmadd_ps(_mm_mul_ps(vst, _mm_set1_ps(sx[r][g])), _mm_cvtepi32_ps(isum), acc[r]);
      acc[r] = _mm_fmadd_ps(vmn, _mm_set1_ps(sxs[r][g]), acc[r]);
    }
  }
  for (int r = 0; r < ROWS; r++) {
    float l[4];
    _mm_storeu_ps(l, acc[r]);
    for (int c = 0; c < COLS; c++) out[r][c] = l[c];
  }
}

/* Rows of x two at a time against all 4 W rows (8 int32 accumulators: with 4
 * rows against 2 W rows the compiler spilled them and the float sums to the
 * stack, 0.6 the speed). */
ZZ_QX_AVX2 static inline __attribute__((always_inline)) void zz_qx_avx2(const void *const xr[4],
                                                                        const void *const wr[4], int64_t kc, int mr,
                                                                        int group, const int BITS, float tile[4][4]) {
  for (int r0 = 0; r0 < mr; r0 += 2) {
    float out[4][4] = {{0}};
    if (mr - r0 >= 2) zz_qx_avx2_tile(xr + r0, wr, kc, group, BITS, 2, 4, out);
    else
      zz_qx_avx2_tile(xr + r0, wr, kc, group, BITS, 1, 4, out);
    for (int r = 0; r < 2 && r0 + r < mr; r++)
      for (int c = 0; c < 4; c++) tile[r0 + r][c] = out[r][c];
  }
}

ZZ_QX_AVX2 void zz_micro_q4x_avx2(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group,
                                  float tile[4][4]) {
  zz_qx_avx2(xr, wr, kc, mr, group, 4, tile);
}

ZZ_QX_AVX2 void zz_micro_q8x_avx2(const void *const xr[4], const void *const wr[4], int64_t kc, int mr, int group,
                                  float tile[4][4]) {
  zz_qx_avx2(xr, wr, kc, mr, group, 8, tile);
}
#endif
