/*
 * dtype.c — element types and conversions between them (IEEE half, bfloat16,
 * float32). Used by loaders (checkpoint dtype → storage dtype) and by the CPU
 * device's upload/download (storage dtype ⇄ f32 compute dtype).
 */
#include <pthread.h>
#include <string.h>

#include "zz_cpu_kernels.h" /* zz_dtype.h, and the ISA that picks a conversion */

#if defined(__x86_64__)
#include <immintrin.h>
#endif


const char *zz_dtype_name(zz_dtype dt) {
  static const char *const n[ZZ_DTYPE_COUNT] = {"f32", "f16", "bf16", "q4"};
  return (int)dt >= 0 && dt < ZZ_DTYPE_COUNT ? n[dt] : "?";
}

size_t zz_dtype_nbytes(zz_dtype dt, int64_t n) {
  switch (dt) {
    case ZZ_DTYPE_F32: return (size_t)n * 4;
    case ZZ_DTYPE_F16:
    case ZZ_DTYPE_BF16: return (size_t)n * 2;
    case ZZ_DTYPE_Q4: return zz_q_row_bytes(ZZ_QFMT_DEFAULT, n); /* n elements as one row */
    default: return 0;
  }
}

static inline uint32_t zz_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float zz_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float zz_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return zz_bits_f32(sign);
    /* subnormal half: value = man * 2^-24 */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
  }
  /* a NaN comes out quiet, its payload kept: what F16C's vcvtph2ps gives */
  if (exp == 31) return zz_bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
  return zz_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t zz_f32_to_f16(float f) {
  uint32_t u = zz_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) /* inf or nan; keep nan quiet */
    return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
  if (abs >= 0x477ff000u) return sign | 0x7c00; /* rounds past 65504: inf */
  if (abs < 0x38800000u) {                      /* below the smallest normal half */
    /* half subnormals are multiples of 2^-24; round x / 2^-24 to nearest even */
    float a = zz_bits_f32(abs) * 0x1p24f;
    uint32_t q = (uint32_t)a;
    float rem = a - (float)q;
    if (rem > 0.5f || (rem == 0.5f && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carries into the exponent correctly */
  return (uint16_t)(sign | h);
}

float zz_bf16_to_f32(uint16_t h) { return zz_bits_f32((uint32_t)h << 16); }

uint16_t zz_f32_to_bf16(float f) { return (uint16_t)(zz_bf16_round_bits(zz_f32_bits(f)) >> 16); }

static float zz_load(zz_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case ZZ_DTYPE_F16: return zz_f16_to_f32(((const uint16_t *)p)[i]);
    case ZZ_DTYPE_BF16: return zz_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

/* Halves widened to floats: the CPU device widens each offloaded layer's f16
 * weights once per step, on the weight-load lane's critical path. The vector
 * paths (F16C, AVX-512) give zz_f16_to_f32's bits for every half; a lookup
 * table, which looked cheap, ran at half their speed on real weights (its
 * 256 KiB do not stay in L1: random halves miss it, zeros never do). */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void zz_f16_f32_avx512(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
  for (; i < n; i++) d[i] = zz_f16_to_f32(s[i]);
}

/* Floats narrowed to halves (--dummy weights, activations stored as f16): F16C's
 * vcvtps2ph rounds to nearest even like zz_f32_to_f16, subnormals and overflow
 * included; only a NaN's payload differs, so a group of 8 holding a NaN takes
 * the scalar path. */
__attribute__((target("avx2,f16c"))) static void zz_f32_f16_f16c(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(s + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
      for (int k = 0; k < 8; k++) d[i + k] = zz_f32_to_f16(s[i + k]);
      continue;
    }
    _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; i++) d[i] = zz_f32_to_f16(s[i]);
}

__attribute__((target("avx2,f16c"))) static void zz_f16_f32_f16c(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  for (; i < n; i++) d[i] = zz_f16_to_f32(s[i]);
}
#endif

/* Every half value as a float, for kernels that widen scattered halves (the
 * scalar attention reference, 4-bit scales). */
static float zz_f16_tab[65536];
static pthread_once_t zz_f16_once = PTHREAD_ONCE_INIT;
static void zz_f16_table_init(void) {
  for (uint32_t h = 0; h < 65536; h++) zz_f16_tab[h] = zz_f16_to_f32((uint16_t)h);
}

const float *zz_f16_table(void) {
  pthread_once(&zz_f16_once, zz_f16_table_init);
  return zz_f16_tab;
}

static void zz_f16_f32(const uint16_t *s, float *d, int64_t n) {
#if defined(__x86_64__)
  switch (zz_cpu_isa_get()) {
    case ZZ_CPU_ISA_AMX:
    case ZZ_CPU_ISA_AVX512: zz_f16_f32_avx512(s, d, n); return;
    case ZZ_CPU_ISA_AVX2: zz_f16_f32_f16c(s, d, n); return;
    default: break;
  }
#endif
  for (int64_t i = 0; i < n; i++) d[i] = zz_f16_to_f32(s[i]);
}

static void zz_f32_f16(const float *s, uint16_t *d, int64_t n) {
#if defined(__x86_64__)
  if (zz_cpu_isa_get() != ZZ_CPU_ISA_PORTABLE) { /* AVX2 and AVX-512 machines have F16C */
    zz_f32_f16_f16c(s, d, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) d[i] = zz_f32_to_f16(s[i]);
}

/* zz_f32_to_bf16 of each value, its rule inline (zz_bf16_round_bits) so the
 * loop vectorises: a call per value (the generic loop below) was half the time
 * of a bf16 linear of 64 outputs, which rounds its x with it. */
static void zz_f32_bf16(const float *s, uint16_t *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = (uint16_t)(zz_bf16_round_bits(zz_f32_bits(s[i])) >> 16);
}

/* bf16 widened exactly (a shift), inline for the same reason. */
static void zz_bf16_f32(const uint16_t *s, float *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = zz_bits_f32((uint32_t)s[i] << 16);
}

void zz_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n) {
  if (src_dt == dst_dt) {
    memmove(dst, src, zz_dtype_nbytes(src_dt, n));
    return;
  }
  if (src_dt == ZZ_DTYPE_F16 && dst_dt == ZZ_DTYPE_F32) {
    zz_f16_f32(src, dst, n);
    return;
  }
  if (src_dt == ZZ_DTYPE_F32 && dst_dt == ZZ_DTYPE_F16) {
    zz_f32_f16(src, dst, n);
    return;
  }
  if (src_dt == ZZ_DTYPE_F32 && dst_dt == ZZ_DTYPE_BF16) {
    zz_f32_bf16(src, dst, n);
    return;
  }
  if (src_dt == ZZ_DTYPE_BF16 && dst_dt == ZZ_DTYPE_F32) {
    zz_bf16_f32(src, dst, n);
    return;
  }
  switch (dst_dt) {
    case ZZ_DTYPE_F32: {
      float *d = dst;
      for (int64_t i = 0; i < n; i++) d[i] = zz_load(src_dt, src, i);
      break;
    }
    case ZZ_DTYPE_F16: {
      uint16_t *d = dst;
      for (int64_t i = 0; i < n; i++) d[i] = zz_f32_to_f16(zz_load(src_dt, src, i));
      break;
    }
    case ZZ_DTYPE_BF16: {
      uint16_t *d = dst;
      for (int64_t i = 0; i < n; i++) d[i] = zz_f32_to_bf16(zz_load(src_dt, src, i));
      break;
    }
    default: break;
  }
}

void zz_cpu_rows_bf16(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, float *out, int add) {
  for (int64_t i = 0; i < n; i++) {
    const uint16_t *row = table + (int64_t)ids[i] * dim;
    float *o = out + i * dim;
    for (int64_t j = 0; j < dim; j++) o[j] = add ? o[j] + zz_bf16_to_f32(row[j]) : zz_bf16_to_f32(row[j]);
  }
}
