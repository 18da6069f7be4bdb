/*
 * quant.c — group-wise min/max quantization (FlexGen §5): the format's sizes, the
 * quantizer and dequantizer, and the CPU kernels that read quantized tensors
 * (embedding rows, cache appends; the linear is kernels/cpu/linear.c's driver).
 * The layout is drawn in zz_dtype.h and docs/compression.md.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* ---------------------------------------------------------------- sizes */

int zz_qfmt_valid(zz_qfmt f) {
  return (f.bits == 2 || f.bits == 4 || f.bits == 8) && f.group >= ZZ_QGROUP_MIN && f.group <= ZZ_QGROUP_MAX &&
         f.group % 2 == 0;
}

/* Header (min, step) then the packed values, padded to an even byte count. */
static size_t zz_q_group_bytes(zz_qfmt f, int64_t m) { return (size_t)zz_q_group_nbytes(f.bits, m); }

size_t zz_q_row_bytes(zz_qfmt f, int64_t len) {
  int64_t full = len / f.group, rest = len % f.group;
  return (size_t)full * zz_q_group_bytes(f, f.group) + (rest ? zz_q_group_bytes(f, rest) : 0);
}

size_t zz_kv_row_bytes(zz_dtype dt, zz_qfmt f, int64_t heads, int64_t hd) {
  if (dt == ZZ_DTYPE_Q4) return (size_t)heads * zz_q_row_bytes(f, hd);
  return zz_dtype_nbytes(dt, heads * hd);
}

/* ---------------------------------------------------------------- one group */

/* The largest half <= x and the smallest half >= x (finite x within half range). */
static uint16_t zz_f16_down(float x) {
  uint16_t h = zz_f32_to_f16(x);
  if (zz_f16_to_f32(h) <= x) return h;
  if (h == 0) return 0x8001; /* +0 → the smallest negative subnormal */
  return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

static uint16_t zz_f16_up(float x) {
  uint16_t h = zz_f32_to_f16(x);
  if (zz_f16_to_f32(h) >= x) return h;
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? (uint16_t)(h - 1) : (uint16_t)(h + 1);
}

static void zz_q_put_group(zz_qfmt f, const float *x, int64_t m, unsigned char *g) {
  float mn = x[0], mx = x[0];
  for (int64_t e = 1; e < m; e++) {
    if (x[e] < mn) mn = x[e];
    if (x[e] > mx) mx = x[e];
  }
  const int levels = (1 << f.bits) - 1;
  uint16_t hmin = zz_f16_down(mn);
  float lo = zz_f16_to_f32(hmin);
  /* the step is rounded up so that lo + levels * step still reaches the maximum */
  uint16_t hstep = mx > lo ? zz_f16_up((mx - lo) / (float)levels) : 0;
  float step = zz_f16_to_f32(hstep), inv = step > 0 ? 1.0f / step : 0;
  memcpy(g, &hmin, 2);
  memcpy(g + 2, &hstep, 2);
  unsigned char *d = g + 4;
  memset(d, 0, zz_q_group_bytes(f, m) - 4);
  for (int64_t e = 0; e < m; e++) {
    long q = lrintf((x[e] - lo) * inv);
    if (q < 0) q = 0;
    if (q > levels) q = levels;
    int64_t bit = e * f.bits;
    d[bit / 8] |= (unsigned char)(q << (bit % 8));
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The 4-bit body of zz_q_get_group, 8 values a step: the same multiply, then add
 * (no "fma" target: nothing may contract them), so the same bits. Returns the
 * elements done (a multiple of 8); the caller widens the rest. */
__attribute__((target("avx2"))) static int64_t zz_q4_get_avx2(const unsigned char *d, int64_t m, float lo, float step,
                                                              float *y) {
  const __m256 vlo = _mm256_set1_ps(lo), vstep = _mm256_set1_ps(step);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  int64_t e = 0;
  for (; e + 8 <= m; e += 8) {
    uint32_t b4;
    memcpy(&b4, d + e / 2, 4);
    __m128i v = _mm_cvtsi32_si128((int)b4);
    __m128i q = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    _mm256_storeu_ps(y + e, _mm256_add_ps(vlo, _mm256_mul_ps(f, vstep)));
  }
  return e;
}
#define ZZ_Q_X86 1
#endif

/* The code of element e of a group's packed values d (bits divides 8). */
static inline unsigned zz_q_code(zz_qfmt f, const unsigned char *d, int64_t e) {
  int64_t bit = e * f.bits;
  return (d[bit / 8] >> (bit % 8)) & ((1u << f.bits) - 1);
}

/* vec: the process's ISA has AVX2 (zz_cpu_isa_get, asked once per call by the caller) */
static void zz_q_get_group(zz_qfmt f, const unsigned char *g, int64_t m, float *y, bool vec) {
  uint16_t hmin, hstep;
  memcpy(&hmin, g, 2);
  memcpy(&hstep, g + 2, 2);
  const float *tab = zz_f16_table();
  float lo = tab[hmin], step = tab[hstep];
  const unsigned char *d = g + 4;
  if (f.bits == 4) {
    int64_t e = 0;
#ifdef ZZ_Q_X86
    if (vec) e = zz_q4_get_avx2(d, m, lo, step, y);
#else
    (void)vec;
#endif
    for (; e + 2 <= m; e += 2) {
      unsigned char b = d[e / 2];
      y[e] = lo + (float)(b & 15) * step;
      y[e + 1] = lo + (float)(b >> 4) * step;
    }
    if (e < m) y[e] = lo + (float)(d[e / 2] & 15) * step;
    return;
  }
  for (int64_t e = 0; e < m; e++) y[e] = lo + (float)zz_q_code(f, d, e) * step;
}

/* ---------------------------------------------------------------- rows */

void zz_q_quantize(zz_qfmt f, const float *x, int64_t rows, int64_t len, void *dst) {
  unsigned char *p = dst;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t at = 0; at < len; at += f.group) {
      int64_t m = len - at < f.group ? len - at : f.group;
      zz_q_put_group(f, x + r * len + at, m, p);
      p += zz_q_group_bytes(f, m);
    }
}

void zz_q_dequantize(zz_qfmt f, const void *src, int64_t rows, int64_t len, float *y) {
  const unsigned char *p = src;
  const bool vec = zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX2;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t at = 0; at < len; at += f.group) {
      int64_t m = len - at < f.group ? len - at : f.group;
      zz_q_get_group(f, p, m, y + r * len + at, vec);
      p += zz_q_group_bytes(f, m);
    }
}

float zz_q_at(zz_qfmt f, const void *row, int64_t e) {
  const unsigned char *g = (const unsigned char *)row + (size_t)(e / f.group) * zz_q_group_bytes(f, f.group);
  uint16_t hmin, hstep;
  memcpy(&hmin, g, 2);
  memcpy(&hstep, g + 2, 2);
  const float *tab = zz_f16_table();
  return tab[hmin] + (float)zz_q_code(f, g + 4, e % f.group) * tab[hstep];
}

float zz_q_half_step(zz_qfmt f, const void *row, int64_t len, int64_t e) {
  (void)len;
  const unsigned char *g = (const unsigned char *)row + (size_t)(e / f.group) * zz_q_group_bytes(f, f.group);
  uint16_t hstep;
  memcpy(&hstep, g + 2, 2);
  return zz_f16_to_f32(hstep) / 2;
}

/* ---------------------------------------------------------------- kernels */

void zz_cpu_embed_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, float *out,
                         int add) {
  size_t rb = zz_q_row_bytes(f, dim);
  const bool vec = zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX2;
  float row[ZZ_QGROUP_MAX];
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *src = (const unsigned char *)table + (size_t)ids[i] * rb;
    float *o = out + i * dim;
    for (int64_t at = 0; at < dim; at += f.group) {
      int64_t m = dim - at < f.group ? dim - at : f.group;
      zz_q_get_group(f, src, m, add ? row : o + at, vec);
      if (add)
        for (int64_t e = 0; e < m; e++) o[at + e] += row[e];
      src += zz_q_group_bytes(f, m);
    }
  }
}

void zz_cpu_kv_append_q(const float *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos) {
  size_t row = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, heads, hd);
  for (int64_t i = 0; i < b; i++)
    zz_q_quantize(f, x + i * sq * heads * hd, sq * heads, hd,
                  (char *)cache + (size_t)(i * seq_bytes) + (size_t)pos * row);
}
