/*
 * dtype.c — element types and conversions between them (IEEE half, bfloat16,
 * float32). Used by loaders (checkpoint dtype → storage dtype) and by the CPU
 * device's upload/download (storage dtype ⇄ f32 compute dtype).
 */
#include <pthread.h>
#include <string.h>

#include "zz_kernels.h"


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
  if (exp == 31) return zz_bits_f32(sign | 0x7f800000u | (man << 13));
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

uint16_t zz_f32_to_bf16(float f) {
  uint32_t u = zz_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  uint32_t lsb = (u >> 16) & 1;
  u += 0x7fff + lsb;
  return (uint16_t)(u >> 16);
}

static float zz_load(zz_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case ZZ_DTYPE_F16: return zz_f16_to_f32(((const uint16_t *)p)[i]);
    case ZZ_DTYPE_BF16: return zz_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

/* Every half value as a float: the CPU device widens each offloaded layer's
 * weights once per block, so this is on the weight-load lane's critical path. */
static float zz_f16_tab[65536];
static pthread_once_t zz_f16_once = PTHREAD_ONCE_INIT;
static void zz_f16_table_init(void) {
  for (uint32_t h = 0; h < 65536; h++) zz_f16_tab[h] = zz_f16_to_f32((uint16_t)h);
}

const float *zz_f16_table(void) {
  pthread_once(&zz_f16_once, zz_f16_table_init);
  return zz_f16_tab;
}

void zz_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n) {
  if (src_dt == dst_dt) {
    memmove(dst, src, zz_dtype_nbytes(src_dt, n));
    return;
  }
  if (src_dt == ZZ_DTYPE_F16 && dst_dt == ZZ_DTYPE_F32) {
    pthread_once(&zz_f16_once, zz_f16_table_init);
    const uint16_t *s = src;
    float *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = zz_f16_tab[s[i]];
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
