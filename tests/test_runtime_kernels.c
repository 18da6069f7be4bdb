/*
 * test_runtime_kernels.c — the CPU reference kernels against naive loops, and
 * the dtype conversions (every half value round-trips exactly).
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static zz_pool *g_pool; /* the suite's two threads */

static float zz_frand(zz_rng *r) { return (float)(zz_rng_uniform(r) * 2.0 - 1.0); }

static float *zz_rand_vec(zz_rng *r, int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++) x[i] = zz_frand(r);
  return x;
}

static double zz_max_rel(const float *a, const float *b, int64_t n) {
  double mx = 1e-6, err = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) return INFINITY;
    if (fabs(b[i]) > mx) mx = fabs(b[i]);
    if (fabs(a[i] - b[i]) > err) err = fabs(a[i] - b[i]);
  }
  return err / mx;
}

/* zz_convert's f16 -> f32 (the CPU device's weight upload) on every vector path
 * this CPU has: all 65536 halves, at odd offsets and lengths (the tails), equal
 * in bits to the scalar zz_f16_to_f32 (NaNs quiet with their payload). */
static void test_f16_widen_paths(void) {
  const int64_t n = 65536 + 13;
  uint16_t *h = malloc((size_t)n * sizeof *h);
  float *f = malloc((size_t)n * sizeof *f);
  CU_ASSERT_FATAL(h && f);
  for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)(i * 40503u); /* every half, scattered */
  zz_cpu_isa keep = zz_cpu_isa_get();
  int paths = 0;
  for (int isa = ZZ_CPU_ISA_PORTABLE; isa <= ZZ_CPU_ISA_AVX512; isa++) {
    if (zz_cpu_isa_set((zz_cpu_isa)isa) != 0) continue;
    paths++;
    for (int64_t off = 0; off < 3; off++) {
      for (int64_t i = 0; i < n; i++) f[i] = NAN;
      zz_convert(ZZ_DTYPE_F16, h + off, ZZ_DTYPE_F32, f + off, n - off - off % 2);
      int64_t bad = 0;
      for (int64_t i = off; i < n - off % 2; i++) {
        float want = zz_f16_to_f32(h[i]);
        bad += memcmp(&f[i], &want, sizeof want) != 0;
      }
      CU_ASSERT_EQUAL(bad, 0);
      if (bad)
        fprintf(stderr, "f16 widen: %s offset %lld: %lld values differ\n", zz_cpu_isa_name((zz_cpu_isa)isa),
                (long long)off, (long long)bad);
    }
  }
  zz_cpu_isa_set(keep);
  CU_ASSERT(paths >= 1);
  free(h), free(f);
}

/* f32 -> f16 narrowing through every vector path this CPU has, equal in bits to
 * the scalar zz_f32_to_f16: every half's exact value, the midpoints between
 * neighbouring halves (ties to even), values around the subnormal range and
 * past 65504, NaNs with payloads, and random bit patterns; odd offsets and
 * lengths for the tails. */
static void test_f16_narrow_paths(void) {
  const int64_t n = 4 * 65536 + 13;
  float *f = malloc((size_t)n * sizeof *f);
  uint16_t *h = malloc((size_t)n * sizeof *h);
  CU_ASSERT_FATAL(f && h);
  zz_rng r;
  zz_rng_seed(&r, 23, 0);
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)zz_rng_next(&r);
    uint16_t a = (uint16_t)(i * 40503u), b = (uint16_t)(a + 1);
    switch (i % 4) {
      case 0: f[i] = zz_f16_to_f32(a); break;
      case 1: f[i] = 0.5f * (zz_f16_to_f32(a) + zz_f16_to_f32(b)); break; /* a tie, or a NaN/inf mix */
      case 2: memcpy(&f[i], &u, sizeof u); break;
      default: f[i] = ldexpf((float)(u & 0xffffff) / 0x1p24f, (int)(u >> 26) - 30) * ((u >> 25) & 1 ? -1 : 1); break;
    }
  }
  zz_cpu_isa keep = zz_cpu_isa_get();
  for (int isa = ZZ_CPU_ISA_PORTABLE; isa <= ZZ_CPU_ISA_AVX512; isa++) {
    if (zz_cpu_isa_set((zz_cpu_isa)isa) != 0) continue;
    for (int64_t off = 0; off < 3; off++) {
      memset(h, 0xAB, (size_t)n * sizeof *h);
      zz_convert(ZZ_DTYPE_F32, f + off, ZZ_DTYPE_F16, h + off, n - off - off % 2);
      int64_t bad = 0;
      for (int64_t i = off; i < n - off % 2; i++) bad += h[i] != zz_f32_to_f16(f[i]);
      CU_ASSERT_EQUAL(bad, 0);
      if (bad)
        fprintf(stderr, "f16 narrow: %s offset %lld: %lld values differ\n", zz_cpu_isa_name((zz_cpu_isa)isa),
                (long long)off, (long long)bad);
    }
  }
  zz_cpu_isa_set(keep);
  free(f), free(h);
}

static void test_f16_roundtrip(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = zz_f16_to_f32((uint16_t)h);
    if (isnan(f)) {
      bad += !isnan(zz_f16_to_f32(zz_f32_to_f16(f)));
      continue;
    }
    bad += zz_f32_to_f16(f) != h;
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* rounding: nearest, ties to even; overflow to infinity; tiny to subnormals */
  CU_ASSERT_EQUAL(zz_f32_to_f16(1.0f), 0x3c00);
  CU_ASSERT_EQUAL(zz_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie → even */
  CU_ASSERT_EQUAL(zz_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie → even (up) */
  CU_ASSERT_EQUAL(zz_f32_to_f16(65504.0f), 0x7bff);
  CU_ASSERT_EQUAL(zz_f32_to_f16(70000.0f), 0x7c00);
  CU_ASSERT_EQUAL(zz_f32_to_f16(-0x1p-24f), 0x8001);
  CU_ASSERT_EQUAL(zz_f32_to_f16(0x1p-26f), 0x0000);
  CU_ASSERT_DOUBLE_EQUAL(zz_f16_to_f32(0x3555), 0.333251953125, 1e-12);
}

static void test_bf16(void) {
  CU_ASSERT_EQUAL(zz_f32_to_bf16(1.0f), 0x3f80);
  CU_ASSERT_EQUAL(zz_bf16_to_f32(0x3f80), 1.0f);
  CU_ASSERT_EQUAL(zz_f32_to_bf16(1.00390625f), 0x3f80); /* tie → even */
  CU_ASSERT_EQUAL(zz_f32_to_bf16(1.01171875f), 0x3f82); /* tie → even (up) */
  CU_ASSERT(isnan(zz_bf16_to_f32(zz_f32_to_bf16(NAN))));
  float in[3] = {0.5f, -2.25f, 3.0f}, out[3];
  uint16_t mid[3];
  zz_convert(ZZ_DTYPE_F32, in, ZZ_DTYPE_BF16, mid, 3);
  zz_convert(ZZ_DTYPE_BF16, mid, ZZ_DTYPE_F32, out, 3);
  CU_ASSERT_EQUAL(memcmp(in, out, sizeof in), 0);
  /* the array conversion (a vectorised loop) is zz_f32_to_bf16 value by value:
   * ties both ways, NaNs, infinities, subnormals, signs, past a vector's width */
  float v[67];
  uint16_t got[67];
  const float special[] = {1.00390625f, 1.01171875f, -1.00390625f, NAN,   -NAN,
                           INFINITY,    -INFINITY,   0x1p-140f,    -0.0f, 3.4028235e38f};
  for (int i = 0; i < 67; i++) v[i] = i < 10 ? special[i] : (float)(i - 33) * 0.3377f + (float)i * 1e-3f;
  zz_convert(ZZ_DTYPE_F32, v, ZZ_DTYPE_BF16, got, 67);
  int diff = 0;
  for (int i = 0; i < 67; i++) diff += got[i] != zz_f32_to_bf16(v[i]);
  CU_ASSERT_EQUAL(diff, 0);
  CU_ASSERT_EQUAL(zz_dtype_nbytes(ZZ_DTYPE_Q4, 64), 36);
  CU_ASSERT_EQUAL(zz_dtype_nbytes(ZZ_DTYPE_Q4, 65), 42); /* a ragged last group: 1 value, 2 padded bytes */
}

static void test_linear(void) {
  zz_rng r;
  zz_rng_seed(&r, 1, 0);
  const int64_t shapes[][3] = {{1, 7, 5}, {3, 64, 33}, {17, 40, 96}};
  for (size_t s = 0; s < 3; s++) {
    int64_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
    float *x = zz_rand_vec(&r, n * in), *w = zz_rand_vec(&r, out * in), *b = zz_rand_vec(&r, out);
    float *y = malloc((size_t)(n * out) * sizeof *y), *ref = malloc((size_t)(n * out) * sizeof *ref);
    for (int relu = 0; relu < 2; relu++) {
      zz_cpu_linear(x, n, in, w, relu ? b : NULL, out, y, relu);
      for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
          double acc = relu ? b[o] : 0;
          for (int64_t k = 0; k < in; k++) acc += (double)x[i * in + k] * w[o * in + k];
          ref[i * out + o] = (float)(relu && acc < 0 ? 0 : acc);
        }
      CU_ASSERT(zz_max_rel(y, ref, n * out) < 1e-5);
    }
    free(x), free(w), free(b), free(y), free(ref);
  }
}

/* zz_cpu_linear_pool's column tiles (few rows) and row tiles (many rows), ragged
 * last tiles, bias and ReLU, against zz_cpu_linear. */
static void test_linear_pool(void) {
  zz_rng r;
  zz_rng_seed(&r, 11, 0);
  zz_pool *pool = NULL;
  CU_ASSERT_FATAL(zz_pool_create(3, &pool) == 0);
  zz_cpu_blas_single();
  const int64_t shapes[][3] = {{5, 33, 2100}, {773, 17, 40}, {2, 9, 7}};
  for (size_t s = 0; s < 3; s++) {
    int64_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
    float *x = zz_rand_vec(&r, n * in), *w = zz_rand_vec(&r, out * in), *b = zz_rand_vec(&r, out);
    float *y = malloc((size_t)(n * out) * sizeof *y), *ref = malloc((size_t)(n * out) * sizeof *ref);
    for (int relu = 0; relu < 2; relu++) {
      for (int64_t i = 0; i < n * out; i++) y[i] = NAN; /* every element must be written */
      zz_cpu_linear(x, n, in, w, relu ? b : NULL, out, ref, relu);
      zz_cpu_linear_pool(pool, x, n, in, w, relu ? b : NULL, out, y, relu);
      CU_ASSERT(zz_max_rel(y, ref, n * out) < 1e-6);
    }
    free(x), free(w), free(b), free(y), free(ref);
  }
  zz_pool_destroy(pool);
}

static void test_layernorm(void) {
  zz_rng r;
  zz_rng_seed(&r, 2, 0);
  int64_t n = 5, d = 37;
  float *x = zz_rand_vec(&r, n * d), *g = zz_rand_vec(&r, d), *b = zz_rand_vec(&r, d);
  float *y = malloc((size_t)(n * d) * sizeof *y), ref[5 * 37];
  for (int64_t i = 0; i < n; i++) {
    double m = 0, v = 0;
    for (int64_t k = 0; k < d; k++) m += x[i * d + k];
    m /= d;
    for (int64_t k = 0; k < d; k++) v += (x[i * d + k] - m) * (x[i * d + k] - m);
    v /= d;
    for (int64_t k = 0; k < d; k++) ref[i * d + k] = (float)((x[i * d + k] - m) / sqrt(v + 1e-5) * g[k] + b[k]);
  }
  zz_cpu_layernorm(g_pool, x, n, d, g, b, 1e-5f, y);
  CU_ASSERT(zz_max_rel(y, ref, n * d) < 1e-5);
  zz_cpu_layernorm(g_pool, x, n, d, g, b, 1e-5f, x); /* in place */
  CU_ASSERT(zz_max_rel(x, ref, n * d) < 1e-5);
  free(x), free(g), free(b), free(y);
}

/* Naive attention with an explicit mask matrix, the contract of zz_kernels.h. */
static void zz_ref_attention(const float *q, const float *k, const float *v, int64_t kv_stride, int64_t b, int64_t sq,
                             int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads, int64_t hd,
                             const int32_t *pad, float *out) {
  int64_t h = heads * hd, kvw = kv_heads * hd;
  double *p = malloc((size_t)t * sizeof *p);
  for (int64_t i = 0; i < b; i++)
    for (int64_t hh = 0; hh < heads; hh++)
      for (int64_t r = 0; r < sq; r++) {
        const float *qr = q + (i * sq + r) * h + hh * hd;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < t; j++) {
          bool vis = j >= pad[i] && j <= q_start + r;
          double s = 0;
          for (int64_t d = 0; d < hd; d++)
            s += (double)qr[d] * k[i * kv_stride + j * kvw + hh / (heads / kv_heads) * hd + d];
          p[j] = vis ? s / sqrt((double)hd) : -INFINITY;
          if (p[j] > mx) mx = p[j];
        }
        for (int64_t j = 0; j < t; j++) sum += p[j] = isinf(p[j]) ? 0 : exp(p[j] - mx);
        for (int64_t d = 0; d < hd; d++) {
          double o = 0;
          for (int64_t j = 0; j < t; j++) o += p[j] * v[i * kv_stride + j * kvw + hh / (heads / kv_heads) * hd + d];
          out[(i * sq + r) * h + hh * hd + d] = sum > 0 ? (float)(o / sum) : 0.0f;
        }
      }
  free(p);
}

static void test_attention(void) {
  zz_rng r;
  zz_rng_seed(&r, 3, 0);
  /* prefill (sq = t) with left padding, and decode (sq = 1) over a longer cache */
  /* the last two: grouped-query attention (2 and 6 query heads per K/V head) */
  const int64_t cases[][6] = {/* b, sq, t, heads, hd, kv_heads */ {3, 9, 9, 2, 8, 2},
                              {2, 1, 13, 4, 16, 4},
                              {1, 5, 5, 1, 4, 1},
                              {3, 7, 7, 4, 8, 2},
                              {3, 1, 11, 6, 8, 1}};
  for (size_t c = 0; c < 5; c++) {
    int64_t b = cases[c][0], sq = cases[c][1], t = cases[c][2], heads = cases[c][3], hd = cases[c][4];
    int64_t kvh = cases[c][5], h = heads * hd, t_max = t + 3, q_start = t - sq, kvw = kvh * hd;
    float *q = zz_rand_vec(&r, b * sq * h), *k = zz_rand_vec(&r, b * t_max * kvw),
          *v = zz_rand_vec(&r, b * t_max * kvw);
    float *out = malloc((size_t)(b * sq * h) * sizeof *out), *ref = malloc((size_t)(b * sq * h) * sizeof *ref);
    float *scratch = malloc(zz_cpu_attention_scratch(b, heads, t) * sizeof(float));
    int32_t pad[3] = {0, 2, 4};
    if (c == 2) pad[0] = 3;
    zz_attn_args a = {.q = q,
                      .k = k,
                      .v = v,
                      .kv = {.dt = ZZ_DTYPE_F32, .seq_bytes = t_max * kvw * 4},
                      .b = b,
                      .sq = sq,
                      .t = t,
                      .q_start = q_start,
                      .heads = heads,
                      .kv_heads = kvh,
                      .hd = hd,
                      .pad = pad,
                      .keep = 1,
                      .out = out,
                      .scratch = scratch};
    zz_cpu_attention_ex(g_pool, &a);
    zz_ref_attention(q, k, v, t_max * kvw, b, sq, t, q_start, heads, kvh, hd, pad, ref);
    CU_ASSERT(zz_max_rel(out, ref, b * sq * h) < 1e-5);
    if (c == 2) /* padded query rows see nothing and must be zero, not NaN */
      for (int64_t x = 0; x < 3 * h; x++) CU_ASSERT_EQUAL(out[x], 0.0f);
    /* an f16 cache read by the CPU (beside a GPU run) equals the f32 kernel on
     * the same rounded values */
    int64_t nkv = b * t_max * kvw;
    uint16_t *k16 = malloc((size_t)nkv * 2), *v16 = malloc((size_t)nkv * 2);
    zz_convert(ZZ_DTYPE_F32, k, ZZ_DTYPE_F16, k16, nkv);
    zz_convert(ZZ_DTYPE_F32, v, ZZ_DTYPE_F16, v16, nkv);
    zz_convert(ZZ_DTYPE_F16, k16, ZZ_DTYPE_F32, k, nkv);
    zz_convert(ZZ_DTYPE_F16, v16, ZZ_DTYPE_F32, v, nkv);
    a.out = ref;
    zz_cpu_attention_ex(g_pool, &a);
    a.k = k16, a.v = v16, a.kv = (zz_kv_layout){.dt = ZZ_DTYPE_F16, .seq_bytes = t_max * kvw * 2}, a.out = out;
    zz_cpu_attention_ex(g_pool, &a);
    CU_ASSERT(zz_max_rel(out, ref, b * sq * h) < 1e-6);
    free(k16), free(v16);
    free(q), free(k), free(v), free(out), free(ref), free(scratch);
  }
}

static void test_rmsnorm(void) {
  zz_rng r;
  zz_rng_seed(&r, 5, 0);
  int64_t n = 7, d = 96;
  float *x = zz_rand_vec(&r, n * d), *g = zz_rand_vec(&r, d), *y = malloc((size_t)(n * d) * sizeof *y);
  float *ref = malloc((size_t)(n * d) * sizeof *ref);
  for (int64_t i = 0; i < n; i++) {
    double ms = 0;
    for (int64_t k = 0; k < d; k++) ms += (double)x[i * d + k] * x[i * d + k];
    ms /= d;
    for (int64_t k = 0; k < d; k++) ref[i * d + k] = (float)(x[i * d + k] / sqrt(ms + 1e-6) * g[k]);
  }
  zz_cpu_rmsnorm(g_pool, x, n, d, g, 1e-6f, y);
  CU_ASSERT(zz_max_rel(y, ref, n * d) < 1e-5);
  zz_cpu_rmsnorm(g_pool, x, n, d, g, 1e-6f, x); /* in place */
  CU_ASSERT(zz_max_rel(x, ref, n * d) < 1e-5);
  free(x), free(g), free(y), free(ref);
}

/* transformers' inverse frequencies (modeling_rope_utils), in double. */
static double zz_ref_inv_freq(const zz_rope *r, int64_t i, int64_t hd) {
  double inv = 1.0 / pow(r->theta, (double)(2 * i) / (double)hd);
  if (r->type == ZZ_ROPE_LINEAR) return inv / r->factor;
  if (r->type != ZZ_ROPE_LLAMA3) return inv;
  double lo_wl = r->original_max_pos / r->low_freq_factor, hi_wl = r->original_max_pos / r->high_freq_factor;
  double wl = 2 * M_PI / inv;
  if (wl < hi_wl) return inv;
  if (wl > lo_wl) return inv / r->factor;
  double sm = (r->original_max_pos / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
  return (1 - sm) * inv / r->factor + sm * inv;
}

static void test_rope(void) {
  zz_rng r;
  zz_rng_seed(&r, 6, 0);
  const zz_rope ropes[3] = {{.type = ZZ_ROPE_DEFAULT, .theta = 10000, .factor = 1},
                            {.type = ZZ_ROPE_LINEAR, .theta = 10000, .factor = 4},
                            {.type = ZZ_ROPE_LLAMA3,
                             .theta = 500000,
                             .factor = 8,
                             .low_freq_factor = 1,
                             .high_freq_factor = 4,
                             .original_max_pos = 64}};
  int64_t n = 5, heads = 3, hd = 32, w = heads * hd;
  int32_t pos[5] = {0, 1, 7, 63, 1000};
  for (int c = 0; c < 3; c++) {
    /* all three regimes of llama3 occur for this head size */
    float *x = zz_rand_vec(&r, n * w), *ref = malloc((size_t)(n * w) * sizeof *ref);
    for (int64_t i = 0; i < n; i++)
      for (int64_t h = 0; h < heads; h++)
        for (int64_t d = 0; d < hd / 2; d++) {
          double a = zz_ref_inv_freq(&ropes[c], d, hd) * pos[i];
          const float *p = x + i * w + h * hd;
          ref[i * w + h * hd + d] = (float)(p[d] * cos(a) - p[d + hd / 2] * sin(a));
          ref[i * w + h * hd + d + hd / 2] = (float)(p[d + hd / 2] * cos(a) + p[d] * sin(a));
        }
    zz_cpu_rope(x, n, heads, hd, pos, &ropes[c]);
    /* float32 angles (as HF) at position 1000 differ from double by ~1e-4 rad */
    CU_ASSERT(zz_max_rel(x, ref, n * w) < 5e-4);
    free(x), free(ref);
  }
}

/* Phi-3's longrope with a partial rotary factor: 12 of a head's 16 dims turn, pair
 * d's frequency divided by its short or long factor, cos and sin scaled by the
 * attention factor, the last 4 dims untouched. Two sequences of 3 rows each
 * (seq_rows 3): the first ends at position 4 (5 <= original 8: short factors on
 * every row), the second at 8 (9 > 8: long factors on every row, its position-2
 * row too), as transformers' longrope_frequency_update picks for one sequence. */
static void test_rope_longrope(void) {
  zz_rng r;
  zz_rng_seed(&r, 16, 0);
  zz_rope rope = {.type = ZZ_ROPE_LONGROPE,
                  .theta = 10000,
                  .original_max_pos = 8,
                  .rot_dims = 12,
                  .attn_factor = 1.25f,
                  .seq_rows = 3};
  for (int d = 0; d < 6; d++) rope.short_factor[d] = 1.0f + 0.2f * d, rope.long_factor[d] = 1.0f + 1.5f * d;
  int64_t n = 6, heads = 2, hd = 16, w = heads * hd, rot = 12;
  int32_t pos[6] = {2, 3, 4, 2, 7, 8};
  float *x = zz_rand_vec(&r, n * w), *ref = malloc((size_t)(n * w) * sizeof *ref);
  memcpy(ref, x, (size_t)(n * w) * sizeof *ref);
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t d = 0; d < rot / 2; d++) {
        double ext = i >= 3 ? rope.long_factor[d] : rope.short_factor[d];
        double a = pos[i] / (ext * pow(10000.0, (double)(2 * d) / (double)rot));
        const float *p = x + i * w + h * hd;
        ref[i * w + h * hd + d] = (float)(1.25 * (p[d] * cos(a) - p[d + rot / 2] * sin(a)));
        ref[i * w + h * hd + d + rot / 2] = (float)(1.25 * (p[d + rot / 2] * cos(a) + p[d] * sin(a)));
      }
  zz_cpu_rope(x, n, heads, hd, pos, &rope);
  CU_ASSERT(zz_max_rel(x, ref, n * w) < 1e-5);
  for (int64_t i = 0; i < n; i++) /* the dims past rot pass exactly */
    for (int64_t h = 0; h < heads; h++)
      CU_ASSERT(memcmp(x + i * w + h * hd + rot, ref + i * w + h * hd + rot, 16) == 0);
  free(x), free(ref);
}

static void test_silu_mul(void) {
  zz_rng r;
  zz_rng_seed(&r, 7, 0);
  int64_t n = 1001;
  float *g = zz_rand_vec(&r, n), *u = zz_rand_vec(&r, n), *y = malloc((size_t)n * sizeof *y);
  float *ref = malloc((size_t)n * sizeof *ref);
  for (int64_t i = 0; i < n; i++) ref[i] = (float)(g[i] / (1 + exp(-(double)g[i])) * u[i]);
  zz_cpu_silu_mul(g, u, n, y);
  CU_ASSERT(zz_max_rel(y, ref, n) < 1e-6);
  zz_cpu_silu_mul(g, u, n, g); /* y aliases g */
  CU_ASSERT(zz_max_rel(g, ref, n) < 1e-6);
  free(g), free(u), free(y), free(ref);
}

static void test_rows_and_append(void) {
  float table[4 * 3] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  int32_t ids[3] = {3, 0, 3};
  float out[9];
  zz_cpu_embed_rows(table, 3, ids, 3, out);
  CU_ASSERT_EQUAL(out[0], 30);
  CU_ASSERT_EQUAL(out[4], 1);
  CU_ASSERT_EQUAL(out[8], 32);
  zz_cpu_add_rows(out, 3, table, ids, 3);
  CU_ASSERT_EQUAL(out[0], 60);
  CU_ASSERT_EQUAL(out[5], 4);
  float cache[2 * 4 * 3] = {0}, x[2 * 2 * 3];
  for (int i = 0; i < 12; i++) x[i] = (float)(i + 1);
  zz_cpu_kv_append(x, 2, 2, 3, cache, 4 * 3, 1);
  CU_ASSERT_EQUAL(cache[3], 1);      /* seq 0, pos 1 */
  CU_ASSERT_EQUAL(cache[8], 6);      /* seq 0, pos 2, last */
  CU_ASSERT_EQUAL(cache[12 + 3], 7); /* seq 1, pos 1 */
  CU_ASSERT_EQUAL(cache[0], 0);
  CU_ASSERT_EQUAL(cache[12 + 9], 0);
}

static void zz_count_task(void *arg, int64_t i) { __atomic_add_fetch((int64_t *)arg + i, 1, __ATOMIC_RELAXED); }

static void test_pool(void) {
  zz_pool *pools[3] = {g_pool, NULL, NULL}; /* NULL: inline on the caller */
  CU_ASSERT_FATAL(zz_pool_create(1, &pools[2]) == 0);
  for (int p = 0; p < 3; p++) {
    int64_t hits[1000] = {0};
    zz_pool_run(pools[p], zz_count_task, hits, 1000);
    int bad = 0;
    for (int i = 0; i < 1000; i++) bad += hits[i] != 1;
    CU_ASSERT_EQUAL(bad, 0);
  }
  CU_ASSERT_EQUAL(zz_pool_threads(g_pool), 2);
  CU_ASSERT_EQUAL(zz_pool_threads(pools[2]), 1);
  CU_ASSERT_EQUAL(zz_pool_threads(NULL), 1);
  zz_pool_destroy(pools[2]);
  zz_pool_destroy(NULL);
  zz_pool *p = NULL;
  CU_ASSERT_EQUAL(zz_pool_create(ZZ_POOL_MAX_THREADS + 1, &p), EINVAL);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_FATAL(zz_pool_create(0, &p) == 0); /* all cores */
  CU_ASSERT(zz_pool_threads(p) >= 1 && zz_pool_threads(p) <= ZZ_POOL_MAX_THREADS);
  zz_pool_destroy(p);
}

/* Each task waits (up to 10 s) until all n tasks have started: only n threads
 * running at once can finish that, so it proves the pool has the threads it says. */
typedef struct zz_meet {
  int n;
  int arrived;
  int timed_out;
} zz_meet;

static void zz_meet_task(void *arg, int64_t i) {
  (void)i;
  zz_meet *m = arg;
  __atomic_add_fetch(&m->arrived, 1, __ATOMIC_SEQ_CST);
  double t0 = zz_now();
  while (__atomic_load_n(&m->arrived, __ATOMIC_SEQ_CST) < m->n) {
    if (zz_now() - t0 > 10) {
      __atomic_store_n(&m->timed_out, 1, __ATOMIC_SEQ_CST);
      return;
    }
    sched_yield();
  }
}

static void test_pool_threads_are_real(void) {
  const int counts[] = {1, 3, 5};
  for (int c = 0; c < 3; c++) {
    zz_pool *p = NULL;
    CU_ASSERT_FATAL(zz_pool_create(counts[c], &p) == 0);
    CU_ASSERT_EQUAL(zz_pool_threads(p), counts[c]);
    zz_meet m = {.n = counts[c]};
    zz_pool_run(p, zz_meet_task, &m, counts[c]);
    CU_ASSERT_EQUAL(m.timed_out, 0);
    CU_ASSERT_EQUAL(m.arrived, counts[c]);
    zz_pool_destroy(p);
  }
}

static int zz_kernels_init(void) { return zz_pool_create(2, &g_pool); }
static int zz_kernels_clean(void) {
  zz_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

void zz_test_kernels_register(void) {
  CU_pSuite s = CU_add_suite("kernels", zz_kernels_init, zz_kernels_clean);
  CU_add_test(s, "f16 round trip and rounding", test_f16_roundtrip);
  CU_add_test(s, "f16 widening: every vector path, every half", test_f16_widen_paths);
  CU_add_test(s, "f16 narrowing: every vector path, ties, subnormals, NaNs", test_f16_narrow_paths);
  CU_add_test(s, "bf16 and q4 sizes", test_bf16);
  CU_add_test(s, "linear vs naive", test_linear);
  CU_add_test(s, "linear on a pool: column and row tiles vs linear", test_linear_pool);
  CU_add_test(s, "layernorm vs naive", test_layernorm);
  CU_add_test(s, "attention vs masked naive", test_attention);
  CU_add_test(s, "rmsnorm vs naive", test_rmsnorm);
  CU_add_test(s, "rope (default, linear, llama3) vs naive", test_rope);
  CU_add_test(s, "rope: longrope, partial rotary, the long set per sequence", test_rope_longrope);
  CU_add_test(s, "silu_mul vs naive", test_silu_mul);
  CU_add_test(s, "embed rows, positions, kv append", test_rows_and_append);
  CU_add_test(s, "worker pools run each task once", test_pool);
  CU_add_test(s, "a pool of n threads runs n tasks at once", test_pool_threads_are_real);
}
