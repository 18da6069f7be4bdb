/*
 * test_runtime_gemm.c — the CPU device's linear driver (kernels/cpu/linear.c)
 * for f32 and bf16 weights, on its AVX-512 micro-kernels (where the CPU has
 * them) and on the portable ones: against an f64 reference of the same inputs
 * (bf16: of the bf16-rounded x and W), and f32 against OpenBLAS's sgemm, over
 * shapes with every kind of tail (n 1..130, odd in and out, in across K blocks).
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static zz_pool *g_pool;

/* max |a - b| / max |b| */
static double zz_rel(const float *a, const float *b, int64_t n) {
  double mx = 1e-12, err = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) return INFINITY;
    if (fabs(b[i]) > mx) mx = fabs(b[i]);
    if (fabs(a[i] - b[i]) > err) err = fabs(a[i] - b[i]);
  }
  return err / mx;
}

/* y = x·Wᵀ (+b, relu) in f64 over the inputs as the kernel sees them */
static void zz_ref(const float *x, const float *w, const float *b, int64_t n, int64_t in, int64_t out, int relu,
                   float *ref) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t o = 0; o < out; o++) {
      double acc = b ? b[o] : 0;
      for (int64_t k = 0; k < in; k++) acc += (double)x[i * in + k] * w[o * in + k];
      ref[i * out + o] = (float)(relu && acc < 0 ? 0 : acc);
    }
}

/* bf16 without a bf16 dot: {12, 2600, 37} and {9, 513, 70} take the wide tiles
 * over K blocks and K pieces (n 9..15); {40, 2600, 37} the row-lane tile over
 * several row groups and K blocks (n 16..127); {130, 700, 300} the packed GEMM
 * (n >= 128); {5, 4100, 9} AVX-512's 3-8-row tile over three K blocks (x's
 * widened pairs at each block's offset, an odd last row, a last block of 4). */
static const int64_t g_shapes[][3] = {
    /* n, in, out */
    {1, 1, 1},      {1, 7, 5},      {2, 16, 4},     {3, 33, 9},    {4, 64, 64},   {5, 100, 65},   {7, 31, 130},
    {16, 1023, 17}, {17, 1025, 70}, {33, 2049, 19}, {64, 4099, 8}, {130, 96, 67}, {40, 2600, 37}, {130, 700, 300},
    {12, 2600, 37}, {9, 513, 70},   {8, 1030, 33},  {6, 520, 21},  {5, 4100, 9},
};

static void zz_check_gemm(zz_dtype w_dt, bool portable) {
  zz_rng r;
  zz_rng_seed(&r, 7, w_dt);
  if (portable) zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE); /* the C micro-kernels even where AVX-512 is */
  for (size_t s = 0; s < sizeof g_shapes / sizeof g_shapes[0]; s++) {
    int64_t n = g_shapes[s][0], in = g_shapes[s][1], out = g_shapes[s][2];
    float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
    float *b = malloc((size_t)out * sizeof *b), *y = malloc((size_t)(n * out) * sizeof *y);
    float *ref = malloc((size_t)(n * out) * sizeof *ref), *blas = malloc((size_t)(n * out) * sizeof *blas);
    uint16_t *wb = malloc((size_t)(out * in) * sizeof *wb);
    void *xb = malloc(zz_cpu_gemm_scratch(n, in, w_dt) + 1);
    for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
    for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
    for (int64_t i = 0; i < out; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
    const void *wk = w;
    if (w_dt == ZZ_DTYPE_BF16) {
      zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, out * in);
      zz_convert(ZZ_DTYPE_BF16, wb, ZZ_DTYPE_F32, w, out * in); /* the reference sees W rounded */
      wk = wb;
    }
    for (int relu = 0; relu < 2; relu++) {
      zz_cpu_gemm(g_pool, x, n, in, wk, w_dt, relu ? b : NULL, out, y, relu, xb);
      if (w_dt == ZZ_DTYPE_BF16) { /* and x rounded, as the kernel does once per call */
        float *xr = malloc((size_t)(n * in) * sizeof *xr);
        for (int64_t i = 0; i < n * in; i++) xr[i] = zz_bf16_to_f32(zz_f32_to_bf16(x[i]));
        zz_ref(xr, w, relu ? b : NULL, n, in, out, relu, ref);
        free(xr);
      } else {
        zz_ref(x, w, relu ? b : NULL, n, in, out, relu, ref);
        zz_cpu_linear(x, n, in, w, relu ? b : NULL, out, blas, relu);
        double eb = zz_rel(y, blas, n * out);
        if (!(eb < 1e-5))
          printf("\n  f32 n=%lld in=%lld out=%lld relu=%d: %.3g vs sgemm\n", (long long)n, (long long)in,
                 (long long)out, relu, eb);
        CU_ASSERT(eb < 1e-5);
      }
      double e = zz_rel(y, ref, n * out);
      if (!(e < 1e-5))
        printf("\n  %s%s n=%lld in=%lld out=%lld relu=%d: %.3g vs f64\n", zz_dtype_name(w_dt),
               portable ? " (portable)" : "", (long long)n, (long long)in, (long long)out, relu, e);
      CU_ASSERT(e < 1e-5);
    }
    free(x), free(w), free(b), free(y), free(ref), free(blas), free(wb), free(xb);
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
}

static void test_gemm_f32(void) { zz_check_gemm(ZZ_DTYPE_F32, false); }
static void test_gemm_bf16(void) { zz_check_gemm(ZZ_DTYPE_BF16, false); }
static void test_gemm_f32_portable(void) { zz_check_gemm(ZZ_DTYPE_F32, true); }
static void test_gemm_bf16_portable(void) { zz_check_gemm(ZZ_DTYPE_BF16, true); }

/* Every n from 1 to 130 through the dispatching linear (own kernel, or sgemm past
 * the crossover), one shape with tails in both directions. */
static void test_linear_w_every_n(void) {
  zz_rng r;
  zz_rng_seed(&r, 11, 0);
  const int64_t in = 75, out = 37, nmax = 130;
  float *x = malloc((size_t)(nmax * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
  float *y = malloc((size_t)(nmax * out) * sizeof *y), *ref = malloc((size_t)(nmax * out) * sizeof *ref);
  void *xb = malloc(zz_cpu_gemm_scratch(nmax, in, ZZ_DTYPE_F32));
  for (int64_t i = 0; i < nmax * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  int bad = 0;
  for (int64_t n = 1; n <= nmax; n++) {
    zz_cpu_linear_w(g_pool, x, n, in, w, ZZ_DTYPE_F32, NULL, out, y, 0, xb);
    zz_ref(x, w, NULL, n, in, out, 0, ref);
    if (!(zz_rel(y, ref, n * out) < 1e-5)) bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  free(x), free(w), free(y), free(ref), free(xb);
}

/* --cpu-dtype bf16 on the golden fixtures against Hugging Face's f32 logits (which
 * the f32 CPU device meets within 1e-4): the first step's logits within
 * ZZ_BF16_FIRST_ERR relative, and greedy tokens agreeing on at least
 * ZZ_BF16_AGREE of the positions (a bf16 rounding may flip a near tie, and every
 * later token of that prompt follows the flip). Measured figures: docs/cpu.md. */
#define ZZ_BF16_FIRST_ERR 0.08
#define ZZ_BF16_AGREE 0.75
static void test_bf16_golden(void) {
  const char *fixtures[] = {"tiny-opt", "tiny-opt-postln", "tiny-llama", "tiny-llama-tied"};
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    zz_device *dev = NULL;
    CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
    CU_ASSERT_FATAL(zz_device_set_weight_dtype(dev, ZZ_DTYPE_BF16) == ZZ_OK);
    zz_golden_report r;
    zz_status st = zz_golden_run(fixtures[f], dev, "gbs=4 num_gb=1", ZZ_BF16_FIRST_ERR, &r);
    if (st != ZZ_OK) fprintf(stderr, "\n%s bf16: %s\n", fixtures[f], zz_error_message());
    CU_ASSERT_EQUAL_FATAL(st, ZZ_OK);
    printf("\n    %s bf16: %d prompts, %d exact, %d near-tie flips, %d wrong; token agreement %.3f; "
           "first-step logits rel err %.3g, last %.3g",
           fixtures[f], r.prompts, r.prompts_exact, r.prompts_rounding, r.prompts_wrong, r.agreement, r.first_err,
           r.last_err);
    CU_ASSERT(r.first_err <= ZZ_BF16_FIRST_ERR);
    CU_ASSERT(r.agreement >= ZZ_BF16_AGREE);
    zz_device_destroy(dev);
  }
}

/* ---------------------------------------------------------------- one driver: fused Q4, bf16 on AVX2, threads */

/* The vector ISAs this CPU has besides portable (avx2, avx512), for tests that
 * compare each against the portable reference. */
static int zz_isas_here(zz_cpu_isa out[2]) {
  int k = 0;
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) out[k++] = ZZ_CPU_ISA_AVX2;
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512)) out[k++] = ZZ_CPU_ISA_AVX512;
  return k;
}

/* Shapes for the Q4 linear at decode sizes (the fused micro-kernel: n <= 16):
 * in with tails past the last whole 8 and past the last whole group, out with
 * tails past the 4-row panel and the 64-row chunk. */
static const int64_t g_qshapes[][3] = {
    {1, 64, 4},    {1, 4096, 67}, {2, 100, 9},  {3, 131, 5},   {4, 256, 64},
    {5, 1000, 13}, {7, 72, 130},  {13, 520, 7}, {16, 333, 21}, {16, 2048, 66},
};

/* The fused Q4 micro-kernels (AVX2, AVX-512 where present) against the exact
 * path, dequantize-then-multiply (the portable ISA: zz_q_dequantize into a
 * panel, zz_dot), 4 and 8 bits: the same bits, since both widen min + q·step with a rounded
 * product and sum and add each output's products in zz_dot's order. Both also
 * against f64 within the bound of any f32 summation order, γ_K Σ|x_k w_k| with
 * γ_K = K u / (1 - K u), u = 2^-24 (Higham, 3.1). Formats: 4 and 8 bits in
 * groups 32..256 and 40 (a multiple of 8 that is no power of 2); group 34 and 2
 * bits take the panels on every ISA and must still meet the f64 bound. */
static void test_q4_fused(void) {
  zz_cpu_isa isas[2];
  int nisa = zz_isas_here(isas);
  zz_rng r;
  zz_rng_seed(&r, 23, 0);
  const zz_qfmt fmts[] = {{4, 64}, {4, 32}, {4, 128}, {4, 256}, {4, 40}, {4, 34}, {8, 64}, {8, 40}, {8, 34}, {2, 64}};
  int bad_bits = 0, bad_f64 = 0, cases = 0;
  for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
    for (size_t s = 0; s < sizeof g_qshapes / sizeof g_qshapes[0]; s++) {
      zz_qfmt f = fmts[fi];
      int64_t n = g_qshapes[s][0], in = g_qshapes[s][1], out = g_qshapes[s][2];
      float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
      float *wd = malloc((size_t)(out * in) * sizeof *wd), *b = malloc((size_t)out * sizeof *b);
      float *y0 = malloc((size_t)(n * out) * sizeof *y0), *y1 = malloc((size_t)(n * out) * sizeof *y1);
      void *q = malloc(zz_q_row_bytes(f, in) * (size_t)out);
      for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
      for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1) * (i % 7 == 0 ? 8 : 1);
      for (int64_t i = 0; i < out; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
      zz_q_quantize(f, w, out, in, q);
      zz_q_dequantize(f, q, out, in, wd);
      for (int relu = 0; relu < 2; relu++) {
        const float *bb = relu ? NULL : b;
        zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
        zz_cpu_linear_q(g_pool, x, n, in, q, f, ZZ_CPU_ACT_F32, bb, out, y0, relu);
        const double u = 0x1p-24, gam = (double)(in + 1) * u / (1 - (double)(in + 1) * u);
        for (int64_t i = 0; i < n; i++)
          for (int64_t o = 0; o < out; o++) {
            double acc, mag;
            zz_test_dot_f64(x + i * in, wd + o * in, bb ? bb + o : NULL, in, relu, &acc, &mag);
            if (fabs(acc - y0[i * out + o]) > gam * mag + 1e-30) bad_f64++;
          }
        for (int a = 0; a < nisa; a++) {
          zz_cpu_isa_set(isas[a]);
          zz_cpu_linear_q(g_pool, x, n, in, q, f, ZZ_CPU_ACT_F32, bb, out, y1, relu);
          cases++;
          if (memcmp(y0, y1, (size_t)(n * out) * sizeof *y0) != 0) {
            bad_bits++;
            printf("\n  q4 %s bits=%d group=%d n=%lld in=%lld out=%lld relu=%d: bits differ from dequantize-then-dot",
                   zz_cpu_isa_name(isas[a]), f.bits, f.group, (long long)n, (long long)in, (long long)out, relu);
          }
        }
      }
      free(x), free(w), free(wd), free(b), free(y0), free(y1), free(q);
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad_bits, 0);
  CU_ASSERT_EQUAL(bad_f64, 0);
  CU_ASSERT(nisa == 0 || cases > 0);
}

/* The bf16 linear under isa against the portable path, bit for bit, over g_shapes
 * (on AVX-512, only n <= 8: the micro-kernels' rows). */
static void zz_bf16_bits_on(zz_cpu_isa isa) {
  zz_rng r;
  zz_rng_seed(&r, 29, 0);
  int bad = 0;
  for (size_t s = 0; s < sizeof g_shapes / sizeof g_shapes[0]; s++) {
    int64_t n = g_shapes[s][0], in = g_shapes[s][1], out = g_shapes[s][2];
    float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
    float *y0 = malloc((size_t)(n * out) * sizeof *y0), *y1 = malloc((size_t)(n * out) * sizeof *y1);
    uint16_t *wb = malloc((size_t)(out * in) * sizeof *wb);
    void *xb = malloc(zz_cpu_gemm_scratch(n, in, ZZ_DTYPE_BF16) + 1);
    for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
    for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
    zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, out * in);
    zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
    zz_cpu_linear_w(g_pool, x, n, in, wb, ZZ_DTYPE_BF16, NULL, out, y0, 0, xb);
    zz_cpu_isa_set(isa);
    zz_cpu_linear_w(g_pool, x, n, in, wb, ZZ_DTYPE_BF16, NULL, out, y1, 0, xb);
    if ((isa == ZZ_CPU_ISA_AVX2 || n <= 8) && memcmp(y0, y1, (size_t)(n * out) * sizeof *y0) != 0) {
      bad++;
      printf("\n  bf16 %s n=%lld in=%lld out=%lld: bits differ from portable", zz_cpu_isa_name(isa), (long long)n,
             (long long)in, (long long)out);
    }
    free(x), free(w), free(y0), free(y1), free(wb), free(xb);
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad, 0);
}

/* bf16 weights: the AVX2 micro-kernel (bf16 widened by a shift, FMA; at 9-15
 * rows of x with W's K blocks widened once by the driver; from 16 rows the
 * row-lane tile or the packed GEMM, one FMA chain per output) and, on AVX-512
 * without vdpbf16ps, its zmm form for tiles of 3-8 rows (two rows of x a zmm,
 * each W value widened once for the tile by a byte shuffle) give the portable
 * path's bits, since a product of two bf16 is exact in f32 (from 9 rows AVX-512
 * takes the row-lane tile: test_gemm_bf16_9_15). (AVX-512 BF16's vdpbf16ps sums in
 * another order: checked against f64 by test_gemm_bf16 instead.) */
static void test_bf16_avx2_bits(void) {
  for (zz_cpu_isa isa = ZZ_CPU_ISA_AVX2; isa <= ZZ_CPU_ISA_AVX512; isa++)
    if (zz_cpu_isa_supported(isa) && !(isa == ZZ_CPU_ISA_AVX512 && zz_cpu_has_bf16())) zz_bf16_bits_on(isa);
}

/* Pools of 1, 2 and 3 threads, for the thread-count checks. */
static void zz_pools3_new(zz_pool *pools[3]) {
  for (int t = 0; t < 3; t++) {
    pools[t] = NULL;
    CU_ASSERT_FATAL(zz_pool_create(t + 1, &pools[t]) == 0);
  }
}

/* The one driver's tiles follow the shape alone: pools of 1, 2 and 3 threads give
 * the same bits for every dtype (f32: own kernel or sgemm tiles; bf16; Q4 fused
 * and panels, wide panels from 256 rows), at decode and prefill row counts. */
static void test_linear_threads_bits(void) {
  zz_pool *pools[3];
  zz_pools3_new(pools);
  zz_rng r;
  zz_rng_seed(&r, 31, 0);
  const int64_t in = 300, out = 200, ns[5] = {1, 5, 16, 70, 300}, nmax = 300;
  zz_qfmt f = ZZ_QFMT_DEFAULT;
  float *x = malloc((size_t)(nmax * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
  float *y[3];
  uint16_t *wb = malloc((size_t)(out * in) * sizeof *wb);
  size_t xb_f32 = zz_cpu_gemm_scratch(nmax, in, ZZ_DTYPE_F32), xb_bf16 = zz_cpu_gemm_scratch(nmax, in, ZZ_DTYPE_BF16);
  void *q = malloc(zz_q_row_bytes(f, in) * (size_t)out), *xb = malloc(xb_f32 > xb_bf16 ? xb_f32 : xb_bf16);
  for (int t = 0; t < 3; t++) y[t] = malloc((size_t)(nmax * out) * sizeof(float));
  for (int64_t i = 0; i < nmax * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, out * in);
  zz_q_quantize(f, w, out, in, q);
  int bad = 0;
  for (int d = 0; d < 3; d++)
    for (int k = 0; k < 5; k++) {
      for (int t = 0; t < 3; t++) {
        if (d == 0) zz_cpu_linear_w(pools[t], x, ns[k], in, w, ZZ_DTYPE_F32, NULL, out, y[t], 0, xb);
        if (d == 1) zz_cpu_linear_w(pools[t], x, ns[k], in, wb, ZZ_DTYPE_BF16, NULL, out, y[t], 0, xb);
        if (d == 2) zz_cpu_linear_q(pools[t], x, ns[k], in, q, f, ZZ_CPU_ACT_F32, NULL, out, y[t], 0);
      }
      size_t bytes = (size_t)(ns[k] * out) * sizeof(float);
      if (memcmp(y[0], y[1], bytes) != 0 || memcmp(y[0], y[2], bytes) != 0) {
        bad++;
        printf("\n  dtype %d n=%lld: bits depend on the thread count", d, (long long)ns[k]);
      }
    }
  CU_ASSERT_EQUAL(bad, 0);
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]), free(y[t]);
  free(x), free(w), free(wb), free(q), free(xb);
}

/* zz_q_dequantize (the panels' widening, embedding rows) under AVX2 gives the
 * portable bits, for every 4-bit group size kind (power of 2, multiple of 8, only
 * even) and ragged row lengths. */
static void test_q4_dequant_bits(void) {
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) return;
  zz_rng r;
  zz_rng_seed(&r, 37, 0);
  const int groups[] = {32, 34, 40, 64, 256};
  const int64_t lens[] = {1, 9, 63, 64, 65, 1000};
  int bad = 0;
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
      zz_qfmt f = {4, groups[g]};
      int64_t rows = 3, len = lens[l];
      float *x = malloc((size_t)(rows * len) * sizeof *x), *y0 = malloc((size_t)(rows * len) * sizeof *y0);
      float *y1 = malloc((size_t)(rows * len) * sizeof *y1);
      void *q = malloc(zz_q_row_bytes(f, len) * (size_t)rows);
      for (int64_t i = 0; i < rows * len; i++) x[i] = (float)(zz_rng_uniform(&r) * 20 - 10);
      zz_q_quantize(f, x, rows, len, q);
      zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
      zz_q_dequantize(f, q, rows, len, y0);
      zz_cpu_isa_set(ZZ_CPU_ISA_AVX2);
      zz_q_dequantize(f, q, rows, len, y1);
      if (memcmp(y0, y1, (size_t)(rows * len) * sizeof *y0) != 0) bad++;
      free(x), free(y0), free(y1), free(q);
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad, 0);
}

/* At decode (n <= 8, W not widened) the driver runs each W panel's K blocks
 * back to back, above it the K blocks outside the panels: every output must
 * still get its K blocks' sums in the same order, so row 0 of a 1-row call
 * equals row 0 of a 12-row call bit for bit (f32 and bf16, each ISA, K of
 * several blocks and a ragged last one; not f32 on a vector ISA, nor bf16 on
 * AVX-512 without vdpbf16ps, where 12 rows take the row-lane tile, its own
 * chain per output; AVX2 keeps the dot kernels' bits to 15 rows). */
static void test_gemm_stream_bits(void) {
  zz_rng r;
  zz_rng_seed(&r, 37, 0);
  const int64_t in = 5000, out = 70, n = 12;
  float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
  float *y1 = malloc((size_t)out * sizeof *y1), *yn = malloc((size_t)(n * out) * sizeof *yn);
  uint16_t *wb = malloc((size_t)(out * in) * sizeof *wb);
  size_t xb_f32 = zz_cpu_gemm_scratch(n, in, ZZ_DTYPE_F32), xb_bf16 = zz_cpu_gemm_scratch(n, in, ZZ_DTYPE_BF16);
  void *xb = malloc(xb_f32 > xb_bf16 ? xb_f32 : xb_bf16);
  for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, out * in);
  int bad = 0;
  const zz_cpu_isa isas[3] = {ZZ_CPU_ISA_PORTABLE, ZZ_CPU_ISA_AVX2, zz_cpu_isa_best()};
  for (int a = 0; a < 3; a++)
    for (int d = 0; d < 2; d++) {
      zz_dtype dt = d ? ZZ_DTYPE_BF16 : ZZ_DTYPE_F32;
      if (!zz_cpu_isa_supported(isas[a]) || (!d && isas[a] != ZZ_CPU_ISA_PORTABLE)) continue;
      if (d && isas[a] >= ZZ_CPU_ISA_AVX512 && !zz_cpu_has_bf16()) continue;
      const void *wk = d ? (const void *)wb : (const void *)w;
      zz_cpu_isa_set(isas[a]);
      zz_cpu_gemm(g_pool, x, 1, in, wk, dt, NULL, out, y1, 0, xb);
      zz_cpu_gemm(g_pool, x, n, in, wk, dt, NULL, out, yn, 0, xb);
      if (memcmp(y1, yn, (size_t)out * sizeof *y1) != 0) {
        bad++;
        printf("\n  %s %s: 1 row and 12 rows give other bits", zz_cpu_isa_name(isas[a]), d ? "bf16" : "f32");
      }
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad, 0);
  free(x), free(w), free(y1), free(yn), free(wb), free(xb);
}

/* Whether got, one output of a linear (x_i · w_o (+ bias_o), ReLU), is within
 * γ_K Σ|x_k w_k| of f64 (the bound of any f32 summation order, γ_K = K u /
 * (1 − K u), u = 2⁻²⁴; one more term for the bias); the f64 value and the bound
 * into ref_out, bound_out for the message. */
static bool zz_order_bound_ok(const float *xi, const float *wo, int64_t in, const float *bias_o, int relu, float got,
                              double *ref_out, double *bound_out) {
  double acc = bias_o ? *bias_o : 0, mag = bias_o ? fabs(*bias_o) : 0;
  for (int64_t k = 0; k < in; k++) {
    double p = (double)xi[k] * wo[k];
    acc += p, mag += fabs(p);
  }
  double u = ldexp(1, -24), terms = (double)in + (bias_o ? 1 : 0), g = terms * u / (1 - terms * u);
  *ref_out = relu && acc < 0 ? 0 : acc;
  *bound_out = g * mag;
  return fabs(got - *ref_out) <= *bound_out;
}

/* A bf16 linear of n rows, in, out for the tests below: x, x rounded to bf16
 * (xr), W in bf16 (wb) and as f32 (w: the same values), a bias, xb of
 * zz_cpu_gemm_scratch, and y[t] for a run on t + 1 threads. */
typedef struct zz_bf16_case {
  int64_t n, in, out;
  float *x, *xr, *w, *b, *y[3];
  uint16_t *wb;
  void *xb;
} zz_bf16_case;

static zz_bf16_case zz_bf16_case_new(zz_rng *r, int64_t n, int64_t in, int64_t out) {
  zz_bf16_case c = {n,
                    in,
                    out,
                    malloc((size_t)(n * in) * sizeof(float)),
                    malloc((size_t)(n * in) * sizeof(float)),
                    malloc((size_t)(out * in) * sizeof(float)),
                    malloc((size_t)out * sizeof(float)),
                    {NULL},
                    malloc((size_t)(out * in) * sizeof(uint16_t)),
                    malloc(zz_cpu_gemm_scratch(n, in, ZZ_DTYPE_BF16))};
  for (int t = 0; t < 3; t++) c.y[t] = malloc((size_t)(n * out) * sizeof(float));
  for (int64_t i = 0; i < n * in; i++) c.x[i] = (float)(zz_rng_uniform(r) * 2 - 1);
  for (int64_t i = 0; i < out * in; i++) c.w[i] = (float)(zz_rng_uniform(r) * 2 - 1);
  for (int64_t i = 0; i < out; i++) c.b[i] = (float)(zz_rng_uniform(r) - 0.5);
  zz_convert(ZZ_DTYPE_F32, c.w, ZZ_DTYPE_BF16, c.wb, out * in);
  zz_convert(ZZ_DTYPE_BF16, c.wb, ZZ_DTYPE_F32, c.w, out * in);
  for (int64_t i = 0; i < n * in; i++) c.xr[i] = zz_bf16_to_f32(zz_f32_to_bf16(c.x[i]));
  return c;
}

static void zz_bf16_case_free(zz_bf16_case *c) {
  for (int t = 0; t < 3; t++) free(c->y[t]);
  free(c->x), free(c->xr), free(c->w), free(c->b), free(c->wb), free(c->xb);
}

/* The case on 1, 2 and 3 threads (pools[t]; relu: with the bias and ReLU, else
 * neither): every output of y[0] within the order bound of f64 (else
 * ++*bad_bound, the first three printed), y[1] and y[2] its bits (else ++*bad_bits). */
static void zz_bf16_case_run(zz_bf16_case *c, zz_pool *pools[3], int relu, const char *what, int *bad_bound,
                             int *bad_bits) {
  int64_t n = c->n, in = c->in, out = c->out;
  const float *bias = relu ? c->b : NULL;
  for (int t = 0; t < 3; t++)
    zz_cpu_linear_w(pools[t], c->x, n, in, c->wb, ZZ_DTYPE_BF16, bias, out, c->y[t], relu, c->xb);
  for (int64_t i = 0; i < n; i++)
    for (int64_t o = 0; o < out; o++) {
      double ref, bound, got = c->y[0][i * out + o];
      if (!zz_order_bound_ok(c->xr + i * in, c->w + o * in, in, bias ? bias + o : NULL, relu, (float)got, &ref,
                             &bound) &&
          (*bad_bound)++ < 3)
        printf("\n  %s n=%lld in=%lld out=%lld relu=%d y[%lld][%lld] = %.9g, f64 %.9g, bound %.3g", what, (long long)n,
               (long long)in, (long long)out, relu, (long long)i, (long long)o, got, ref, bound);
    }
  size_t bytes = (size_t)(n * out) * sizeof(float);
  if (memcmp(c->y[0], c->y[1], bytes) != 0 || memcmp(c->y[0], c->y[2], bytes) != 0) {
    (*bad_bits)++;
    printf("\n  %s n=%lld in=%lld out=%lld: bits depend on the thread count", what, (long long)n, (long long)in,
           (long long)out);
  }
}

/* bf16 from ZZ_BF16_PANEL_N (16) rows without vdpbf16ps: one FMA chain per
 * output (kernels/cpu/linear_pack.c). From 128 rows the packed GEMM (6-row x
 * slivers, 16-output W slivers, K blocks of 256, 128 outputs a task); at
 * 16-127 rows on AVX2 the row-lane tile (16-row x groups, 6 outputs broadcast
 * from W, K blocks of 512, 48 outputs a task, the first product apart);
 * AVX-512 takes its row-lane tile at every n from 16, in slices of 512 rows
 * and of at most 8 MiB of packed x (n 530 crosses a slice of 512, n 130 at
 * K 16400 two of 96). Shapes
 * with every remainder: rows past a sliver or group (n mod 6, n mod 16),
 * outputs past a tile and a task (out mod 16, out mod 6, out > 128, out > 48),
 * K past a block (in mod 256, in mod 512; a last block of one element) and
 * shorter than one (in = 1: only the first product). Each output is one FMA
 * chain along K, so: within γ_K Σ|x_k w_k| of f64 (the bound of any f32
 * summation order, γ_K = K u / (1 − K u), u = 2⁻²⁴; one more term for the
 * bias), the portable kernel's bits (the packed GEMM's C tile: the reference
 * of both vector tiles), the same bits on 1, 2 and 3 threads, and a row's bits
 * do not depend on the rows beside it nor on the path (rows of a 16-row call,
 * the row-lane tile, = the same rows of a larger call, either tile). */
/* Each case of shapes (n, in, out; x, W, bias drawn from seed) run by
 * zz_bf16_case_run with and without bias and ReLU, then extra (when not NULL)
 * on the same case: the counts of outputs off the order bound and of bit
 * mismatches must be 0. */
typedef void (*zz_bf16_extra)(zz_bf16_case *c, int relu, int *bad_bits);
static void zz_bf16_cases(const int64_t (*shapes)[3], size_t count, uint64_t seed, const char *what,
                          zz_bf16_extra extra) {
  zz_pool *pools[3];
  zz_pools3_new(pools);
  zz_rng r;
  zz_rng_seed(&r, seed, 0);
  int bad_bound = 0, bad_bits = 0;
  for (size_t s = 0; s < count; s++) {
    zz_bf16_case c = zz_bf16_case_new(&r, shapes[s][0], shapes[s][1], shapes[s][2]);
    for (int relu = 0; relu < 2; relu++) {
      zz_bf16_case_run(&c, pools, relu, what, &bad_bound, &bad_bits);
      if (extra) extra(&c, relu, &bad_bits);
    }
    zz_bf16_case_free(&c);
  }
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]);
  CU_ASSERT_EQUAL(bad_bound, 0);
  CU_ASSERT_EQUAL(bad_bits, 0);
}

/* test_gemm_packed's checks past the order bound and the thread count: every
 * vector ISA here against the portable kernel, and rows 0..15 against a 16-row call. */
static void zz_packed_extra(zz_bf16_case *c, int relu, int *bad_bits) {
  int64_t n = c->n, in = c->in, out = c->out;
  const float *bias = relu ? c->b : NULL;
  size_t bytes = (size_t)(n * out) * sizeof(float);
  float *yp = malloc(bytes), *yi = malloc(bytes), *y16 = malloc((size_t)(16 * out) * sizeof *y16);
  zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
  zz_cpu_linear_w(g_pool, c->x, n, in, c->wb, ZZ_DTYPE_BF16, bias, out, yp, relu, c->xb);
  /* every vector ISA here (AVX2's tile, AVX-512's) against the portable
   * kernel; vdpbf16ps (avx512_bf16) has its own kernel and order */
  for (zz_cpu_isa isa = ZZ_CPU_ISA_AVX2; isa <= ZZ_CPU_ISA_AVX512; isa++) {
    if (!zz_cpu_isa_supported(isa) || (isa == ZZ_CPU_ISA_AVX512 && zz_cpu_has_bf16())) continue;
    zz_cpu_isa_set(isa);
    zz_cpu_linear_w(g_pool, c->x, n, in, c->wb, ZZ_DTYPE_BF16, bias, out, yi, relu, c->xb);
    if (memcmp(yi, yp, bytes) != 0) {
      (*bad_bits)++;
      printf("\n  packed n=%lld in=%lld out=%lld: isa %d and the portable kernel give other bits", (long long)n,
             (long long)in, (long long)out, (int)isa);
    }
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
  if (!zz_cpu_has_bf16() && memcmp(c->y[0], yp, bytes) != 0) {
    (*bad_bits)++;
    printf("\n  packed n=%lld in=%lld out=%lld: the vector and portable kernels give other bits", (long long)n,
           (long long)in, (long long)out);
  }
  zz_cpu_linear_w(g_pool, c->x, 16, in, c->wb, ZZ_DTYPE_BF16, bias, out, y16, relu, c->xb);
  if (!zz_cpu_has_bf16() && memcmp(c->y[0], y16, (size_t)(16 * out) * sizeof(float)) != 0) {
    (*bad_bits)++;
    printf("\n  packed n=%lld in=%lld out=%lld: rows 0..15 differ from a 16-row call", (long long)n, (long long)in,
           (long long)out);
  }
  free(yp), free(yi), free(y16);
}

static void test_gemm_packed(void) {
  static const int64_t shapes[][3] = {{128, 256, 16}, {133, 513, 35}, {200, 300, 130}, {129, 7, 1}, {140, 1100, 17},
                                      {16, 300, 50},  {17, 1100, 7},  {40, 513, 49},   {20, 1, 13}, {127, 600, 100},
                                      {64, 1024, 48}, {530, 300, 50}, {130, 16400, 30}};
  zz_bf16_cases(shapes, sizeof shapes / sizeof shapes[0], 41, "packed", zz_packed_extra);
}

/* f32 weights on AVX2 (zz_micro_f32_avx2): zz_dot's order, each product rounded
 * before its add, so the portable kernel's bits, over every remainder: rows in
 * the last 4-row tile (n mod 4, each 2-row pass and a 1-row one; n <= 8 streams
 * each W panel's K blocks; from 9 rows f32 takes the row-lane tile, checked by
 * test_gemm_f32_lanes), W rows past a
 * 4-row tile and a 64-row chunk (out 1, 3, 5, 66, 130), K tails past 8 lanes and
 * past a 1024-element K block (in 1, 7, 9, 1024, 1031, 2053); on 1, 2 and 3
 * threads; and f64 within γ_K Σ|x_k w_k| (+ the bias), the bound of any f32
 * summation order. The dispatching linear takes the kernel for decode
 * (zz_cpu_gemm_own(1) under AVX2) and gives the same bits there. */
static void test_f32_avx2_bits(void) {
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) return;
  static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8}, ins[] = {1, 7, 9, 1024, 1031, 2053},
                       outs[] = {1, 3, 5, 66, 130};
  const int64_t nmax = 8, inmax = 2053, outmax = 130;
  zz_pool *pools[3];
  zz_pools3_new(pools);
  zz_rng r;
  zz_rng_seed(&r, 43, 0);
  float *x = malloc((size_t)(nmax * inmax) * sizeof *x), *w = malloc((size_t)(outmax * inmax) * sizeof *w);
  float *b = malloc((size_t)outmax * sizeof *b), *yp = malloc((size_t)(nmax * outmax) * sizeof *yp), *y[3];
  for (int t = 0; t < 3; t++) y[t] = malloc((size_t)(nmax * outmax) * sizeof(float));
  for (int64_t i = 0; i < nmax * inmax; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < outmax * inmax; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < outmax; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
  int bad_bits = 0, bad_bound = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t c = 0; c < sizeof ins / sizeof ins[0]; c++)
      for (size_t d = 0; d < sizeof outs / sizeof outs[0]; d++) {
        int64_t n = ns[a], in = ins[c], out = outs[d];
        int relu = (int)((a + c + d) % 2);
        const float *bias = relu ? b : NULL;
        size_t bytes = (size_t)(n * out) * sizeof(float);
        zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
        zz_cpu_gemm(g_pool, x, n, in, w, ZZ_DTYPE_F32, bias, out, yp, relu, NULL);
        zz_cpu_isa_set(ZZ_CPU_ISA_AVX2);
        for (int t = 0; t < 3; t++) zz_cpu_gemm(pools[t], x, n, in, w, ZZ_DTYPE_F32, bias, out, y[t], relu, NULL);
        if (memcmp(y[0], yp, bytes) != 0 || memcmp(y[1], yp, bytes) != 0 || memcmp(y[2], yp, bytes) != 0) {
          if (bad_bits++ < 3)
            printf("\n  f32 avx2 n=%lld in=%lld out=%lld: bits differ from portable or between thread counts",
                   (long long)n, (long long)in, (long long)out);
        }
        if (zz_cpu_gemm_own(n)) { /* the dispatching linear: the same kernel */
          zz_cpu_linear_w(pools[1], x, n, in, w, ZZ_DTYPE_F32, bias, out, y[1], relu, NULL);
          if (memcmp(y[1], yp, bytes) != 0 && bad_bits++ < 3)
            printf("\n  f32 avx2 linear_w n=%lld in=%lld out=%lld: other bits", (long long)n, (long long)in,
                   (long long)out);
        }
        for (int64_t i = 0; i < n; i++)
          for (int64_t o = 0; o < out; o++) {
            double ref, bound, got = y[0][i * out + o];
            if (!zz_order_bound_ok(x + i * in, w + o * in, in, bias ? bias + o : NULL, relu, (float)got, &ref,
                                   &bound) &&
                bad_bound++ < 3)
              printf("\n  f32 avx2 n=%lld in=%lld out=%lld y[%lld][%lld] = %.9g, f64 %.9g, bound %.3g", (long long)n,
                     (long long)in, (long long)out, (long long)i, (long long)o, got, ref, bound);
          }
      }
  CU_ASSERT(zz_cpu_gemm_own(1)); /* decode on AVX2 takes the own kernel, not sgemm */
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad_bits, 0);
  CU_ASSERT_EQUAL(bad_bound, 0);
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]), free(y[t]);
  free(x), free(w), free(b), free(yp);
}

/* One output as one fmaf chain along k from 0, then + bias, then ReLU (as
 * zz_bias_relu_cols): the bits linear_pack.c's paths promise. */
static float zz_fma_chain(const float *xi, const float *wo, int64_t in, const float *bias_o, int relu) {
  float chain = 0.0f;
  for (int64_t k = 0; k < in; k++) chain = fmaf(xi[k], wo[k], chain);
  if (bias_o) chain += *bias_o;
  return relu ? (chain > 0 ? chain : 0) : chain;
}

/* f32 weights on AVX2 and AVX-512 from ZZ_F32_LANE_N (9) rows: the row-lane
 * tile (kernels/cpu/linear_pack.c, x in 16-row lanes; AVX2: 6 outputs
 * broadcast from W's f32 rows, AVX-512: 24, or 12 for two groups, from a copy
 * in L1; K blocks of 512, 48 outputs a task, slices of 512 rows), one FMA
 * chain per output along k from 0. Shapes with every remainder: rows past a
 * 16-row group and a 512-row slice (n 9, 16, 17, 40, 127 through the
 * dispatching linear; 130, 260 and 530 through zz_cpu_gemm, which keeps the tile
 * where zz_cpu_linear_w takes sgemm), outputs past a 6-output tile and a
 * 48-output task (out 1, 7, 49, 100), K past a block (in 1: only the first
 * product; 513: a last block of one; 1100). From ZZ_F32_SGEMM_N (128) rows on
 * AVX-512, `in` a whole number of 16s (1120: 8 K blocks of 128 and a part of
 * one), the f32 packed tiles (linear_amx.c, zz_fp_task) take it, the same
 * chain: rows past a micro-kernel's 8 and a group's 32, outputs past a tile's
 * 16, a micro-kernel's 48 and none past a task's 128. Checked: each output bit for bit
 * the plain fmaf chain (then + bias, ReLU, as zz_bias_relu_cols), hence f64
 * within γ_K Σ|x_k w_k| (checked too); the same bits on 1, 2 and 3 threads;
 * a row's bits the same in a 9-row call as in a larger one. */
static void zz_f32_lanes_on(zz_cpu_isa isa) {
  zz_cpu_isa_set(isa);
  static const int64_t ns[] = {9, 16, 17, 40, 127, 130, 260, 530}, ins[] = {1, 513, 1100, 1120},
                       outs[] = {1, 7, 49, 100};
  const int64_t nmax = 530, inmax = 1120, outmax = 100;
  zz_pool *pools[3];
  zz_pools3_new(pools);
  zz_rng r;
  zz_rng_seed(&r, 47, 0);
  float *x = malloc((size_t)(nmax * inmax) * sizeof *x), *w = malloc((size_t)(outmax * inmax) * sizeof *w);
  float *b = malloc((size_t)outmax * sizeof *b), *y[3], *y9 = malloc((size_t)(9 * outmax) * sizeof *y9);
  void *xb = malloc(zz_cpu_gemm_scratch(nmax, inmax, ZZ_DTYPE_F32));
  for (int t = 0; t < 3; t++) y[t] = malloc((size_t)(nmax * outmax) * sizeof(float));
  for (int64_t i = 0; i < nmax * inmax; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < outmax * inmax; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < outmax; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
  int bad_chain = 0, bad_bound = 0, bad_threads = 0, bad_rows = 0, own = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t c = 0; c < sizeof ins / sizeof ins[0]; c++)
      for (size_t d = 0; d < sizeof outs / sizeof outs[0]; d++) {
        int64_t n = ns[a], in = ins[c], out = outs[d];
        int relu = (int)((a + c + d) % 2);
        const float *bias = relu ? b : NULL;
        bool linear_w = zz_cpu_gemm_own(n); /* below ZZ_F32_SGEMM_N: the dispatching linear */
        own += linear_w;
        for (int t = 0; t < 3; t++) {
          if (linear_w) zz_cpu_linear_w(pools[t], x, n, in, w, ZZ_DTYPE_F32, bias, out, y[t], relu, xb);
          else
            zz_cpu_gemm(pools[t], x, n, in, w, ZZ_DTYPE_F32, bias, out, y[t], relu, xb);
        }
        size_t bytes = (size_t)(n * out) * sizeof(float);
        if ((memcmp(y[0], y[1], bytes) != 0 || memcmp(y[0], y[2], bytes) != 0) && bad_threads++ < 3)
          printf("\n  f32 lanes n=%lld in=%lld out=%lld: bits depend on the thread count", (long long)n, (long long)in,
                 (long long)out);
        zz_cpu_gemm(g_pool, x, 9, in, w, ZZ_DTYPE_F32, bias, out, y9, relu, xb);
        if (memcmp(y[0], y9, (size_t)(9 * out) * sizeof(float)) != 0 && bad_rows++ < 3)
          printf("\n  f32 lanes n=%lld in=%lld out=%lld: rows 0..8 differ from a 9-row call", (long long)n,
                 (long long)in, (long long)out);
        for (int64_t i = 0; i < n; i++)
          for (int64_t o = 0; o < out; o++) {
            float got = y[0][i * out + o],
                  chain = zz_fma_chain(x + i * in, w + o * in, in, bias ? bias + o : NULL, relu);
            if (memcmp(&got, &chain, sizeof got) != 0 && bad_chain++ < 3)
              printf("\n  f32 lanes n=%lld in=%lld out=%lld y[%lld][%lld] = %.9g, the fmaf chain %.9g", (long long)n,
                     (long long)in, (long long)out, (long long)i, (long long)o, got, chain);
            double ref, bound;
            if (!zz_order_bound_ok(x + i * in, w + o * in, in, bias ? bias + o : NULL, relu, got, &ref, &bound) &&
                bad_bound++ < 3)
              printf("\n  f32 lanes n=%lld in=%lld out=%lld y[%lld][%lld] = %.9g, f64 %.9g, bound %.3g", (long long)n,
                     (long long)in, (long long)out, (long long)i, (long long)o, got, ref, bound);
          }
      }
  CU_ASSERT(zz_cpu_gemm_own(16) && zz_cpu_gemm_own(9)); /* prefill rows take the tile, not sgemm */
  if (isa >= ZZ_CPU_ISA_AVX512)                         /* the packed tiles from 128 rows, `in` a whole number of 16s */
    CU_ASSERT(zz_cpu_gemm_tiles(130, 1120, ZZ_DTYPE_F32) && !zz_cpu_gemm_tiles(130, 1100, ZZ_DTYPE_F32) &&
              !zz_cpu_gemm_tiles(127, 1120, ZZ_DTYPE_F32));
  CU_ASSERT(own > 0);
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad_chain, 0);
  CU_ASSERT_EQUAL(bad_bound, 0);
  CU_ASSERT_EQUAL(bad_threads, 0);
  CU_ASSERT_EQUAL(bad_rows, 0);
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]), free(y[t]);
  free(x), free(w), free(b), free(y9), free(xb);
}

/* bf16 at 9-15 rows (decode at batch 9-15): on AVX-512 without vdpbf16ps the
 * row-lane tile (ZZ_BF16_PANEL5_N), so each output is the fmaf chain of the
 * rounded x and W along k ascending from 0 (the tile's W is widened into L1,
 * K pieces of 128, groups of 16 rows: n mod 16 leaves 7-1 lanes idle); on AVX2
 * the wide tiles, with bf16_dot vdpbf16ps (their bits: the tests above). On
 * every ISA: f64 within the order bound and the same bits on 1-3 threads. */
static void zz_bf16_chain_extra(zz_bf16_case *c, int relu, int *bad_bits) {
  if (zz_cpu_isa_get() < ZZ_CPU_ISA_AVX512 || zz_cpu_has_bf16()) return;
  const float *bias = relu ? c->b : NULL;
  for (int64_t i = 0; i < c->n; i++)
    for (int64_t o = 0; o < c->out; o++) {
      float got = c->y[0][i * c->out + o],
            chain = zz_fma_chain(c->xr + i * c->in, c->w + o * c->in, c->in, bias ? bias + o : NULL, relu);
      if (memcmp(&got, &chain, sizeof got) != 0 && (*bad_bits)++ < 3)
        printf("\n  bf16 9-15 rows n=%lld in=%lld out=%lld y[%lld][%lld] = %.9g, the fmaf chain %.9g", (long long)c->n,
               (long long)c->in, (long long)c->out, (long long)i, (long long)o, got, chain);
    }
}

static void test_gemm_bf16_9_15(void) {
  static const int64_t shapes[][3] = {{9, 300, 50}, {12, 1100, 7},  {15, 513, 49},
                                      {10, 1, 13},  {13, 600, 100}, {11, 1024, 48}};
  zz_bf16_cases(shapes, sizeof shapes / sizeof shapes[0], 47, "bf16 9-15 rows", zz_bf16_chain_extra);
}

/* check on every vector ISA the CPU has (AVX2's tiles, AVX-512's). */
static void zz_on_vector_isas(void (*check)(zz_cpu_isa)) {
  for (zz_cpu_isa isa = ZZ_CPU_ISA_AVX2; isa <= ZZ_CPU_ISA_AVX512; isa++)
    if (zz_cpu_isa_supported(isa)) check(isa);
}

static void test_gemm_f32_lanes(void) { zz_on_vector_isas(zz_f32_lanes_on); }

/* The exact 4- and 8-bit linear at 17-127 rows on AVX2 and AVX-512: its widened panels
 * (64 outputs each) multiplied by the f32 row-lane tile, x packed once per
 * call: each output bit for bit the fmaf chain over the dequantized row (then
 * + bias, ReLU), the same bits on 1 and 2 threads. Rows 17 (one past the fused
 * kernels), 40, 127 (the last before sgemm); outputs past a panel and a 6-output
 * tile (70); K with a ragged last group and past a 512 block (600). */
static void zz_q_lanes_on(zz_cpu_isa isa) {
  zz_cpu_isa_set(isa);
  static const int64_t ns[] = {17, 40, 127};
  const int64_t nmax = 127, in = 600, out = 70;
  const zz_qfmt fmts[2] = {ZZ_QFMT_DEFAULT, {8, 64}};
  zz_pool *pools[2] = {NULL, NULL};
  for (int t = 0; t < 2; t++) CU_ASSERT_FATAL(zz_pool_create(t + 1, &pools[t]) == 0);
  zz_rng r;
  zz_rng_seed(&r, 53, 0);
  float *x = malloc((size_t)(nmax * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
  float *wd = malloc((size_t)(out * in) * sizeof *wd), *b = malloc((size_t)out * sizeof *b), *y[2];
  for (int t = 0; t < 2; t++) y[t] = malloc((size_t)(nmax * out) * sizeof(float));
  for (int64_t i = 0; i < nmax * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < out; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
  int bad_chain = 0, bad_threads = 0;
  for (int f = 0; f < 2; f++) {
    void *q = malloc(zz_q_row_bytes(fmts[f], in) * (size_t)out);
    zz_q_quantize(fmts[f], w, out, in, q);
    zz_q_dequantize(fmts[f], q, out, in, wd);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      int64_t n = ns[a];
      int relu = (int)((f + a) % 2);
      const float *bias = relu ? b : NULL;
      for (int t = 0; t < 2; t++)
        zz_cpu_linear_q(pools[t], x, n, in, q, fmts[f], ZZ_CPU_ACT_F32, bias, out, y[t], relu);
      if (memcmp(y[0], y[1], (size_t)(n * out) * sizeof(float)) != 0 && bad_threads++ < 3)
        printf("\n  q%d lanes n=%lld: bits depend on the thread count", fmts[f].bits, (long long)n);
      for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
          float got = y[0][i * out + o],
                chain = zz_fma_chain(x + i * in, wd + o * in, in, bias ? bias + o : NULL, relu);
          if (memcmp(&got, &chain, sizeof got) != 0 && bad_chain++ < 3)
            printf("\n  q%d lanes n=%lld y[%lld][%lld] = %.9g, the fmaf chain %.9g", fmts[f].bits, (long long)n,
                   (long long)i, (long long)o, got, chain);
        }
    }
    free(q);
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad_chain, 0);
  CU_ASSERT_EQUAL(bad_threads, 0);
  for (int t = 0; t < 2; t++) zz_pool_destroy(pools[t]), free(y[t]);
  free(x), free(w), free(wd), free(b);
}

static void test_q_lanes(void) { zz_on_vector_isas(zz_q_lanes_on); }

/* Every case of test_gemm_amx takes the tiles. */
static void zz_amx_extra(zz_bf16_case *c, int relu, int *bad_bits) {
  (void)relu, (void)bad_bits;
  CU_ASSERT(zz_cpu_gemm_amx(c->n, c->in, ZZ_DTYPE_BF16));
}

/* bf16 on AMX tiles (ISA amx, kernels/cpu/linear_amx.c), from 16 rows where
 * `in` is a whole number of 32s. Where the process may use AMX: every output
 * within γ_K Σ|x_k w_k| of f64 (tdpbf16ps sums in its own order), the same bits
 * on 1, 2 and 3 threads, with one 16-row tile (16) and a part of a second (20),
 * rows past a pair of 16-row tiles (33, 50, 100),
 * outputs past a pair of 16-output tiles (17, 40: the last task's tiles
 * configured with fewer rows; 16: one tile), bias and ReLU; K of one tile
 * step, of several, and past a K block (1120: four blocks of 256 and a part,
 * the sums carried through y) with outputs past a task's panel (300: panels
 * of 128, the last of 44); `in` not a whole number of 32s and fewer than 16 rows
 * left to the other kernels. Elsewhere (no AMX in CPUID, or the kernel refused
 * the tiles' state): amx is refused with the reason, never chosen, and no
 * product takes it. */
static void test_gemm_amx(void) {
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AMX)) {
    const char *why = zz_cpu_isa_why_not(ZZ_CPU_ISA_AMX);
    CU_ASSERT_PTR_NOT_NULL_FATAL(why);
    CU_ASSERT_EQUAL(zz_cpu_isa_set(ZZ_CPU_ISA_AMX), -1);
    CU_ASSERT_NOT_EQUAL(zz_cpu_isa_best(), ZZ_CPU_ISA_AMX);
    CU_ASSERT_NOT_EQUAL(zz_cpu_isa_get(), ZZ_CPU_ISA_AMX);
    CU_ASSERT_FALSE(zz_cpu_gemm_amx(64, 64, ZZ_DTYPE_BF16));
    printf("\n  amx: %s (checked the fallback only)", why);
    return;
  }
  CU_ASSERT_EQUAL(zz_cpu_isa_best(), ZZ_CPU_ISA_AMX);
  CU_ASSERT_EQUAL_FATAL(zz_cpu_isa_set(ZZ_CPU_ISA_AMX), 0);
  CU_ASSERT_FALSE(zz_cpu_gemm_amx(64, 40, ZZ_DTYPE_BF16));
  CU_ASSERT_FALSE(zz_cpu_gemm_amx(15, 64, ZZ_DTYPE_BF16));
  CU_ASSERT_FALSE(zz_cpu_gemm_amx(64, 64, ZZ_DTYPE_F32));
  static const int64_t shapes[][3] = {{16, 64, 17}, {20, 96, 40},   {32, 32, 16},  {33, 64, 17},
                                      {50, 96, 40}, {100, 256, 33}, {64, 512, 64}, {130, 1120, 300}};
  zz_bf16_cases(shapes, sizeof shapes / sizeof shapes[0], 43, "amx", zz_amx_extra);
  zz_cpu_isa_set(zz_cpu_isa_best());
}

/* Every case of test_gemm_bf16_tiles takes the tiles, and rows 0..31 of it are
 * the bits of a 32-row call (each output one chain over its pairs of k: n
 * changes no bit). */
static void zz_bf16_tiles_extra(zz_bf16_case *c, int relu, int *bad_bits) {
  CU_ASSERT(zz_cpu_gemm_tiles(c->n, c->in, ZZ_DTYPE_BF16));
  const float *bias = relu ? c->b : NULL;
  float *y32 = malloc((size_t)(32 * c->out) * sizeof *y32);
  zz_cpu_linear_w(g_pool, c->x, 32, c->in, c->wb, ZZ_DTYPE_BF16, bias, c->out, y32, relu, c->xb);
  if (memcmp(c->y[0], y32, (size_t)(32 * c->out) * sizeof *y32) != 0) {
    (*bad_bits)++;
    printf("\n  bf16 tiles n=%lld in=%lld out=%lld: rows 0..31 differ from a 32-row call", (long long)c->n,
           (long long)c->in, (long long)c->out);
  }
  free(y32);
}

/* bf16 on AMX's packed tiles in zmm registers (vdpbf16ps, ISA avx512 with
 * avx512_bf16; kernels/cpu/linear_amx.c, zz_dp_task), from 32 rows where `in`
 * is a whole number of 32s: every output within γ_K Σ|x_k w_k| of f64, the same
 * bits on 1, 2 and 3 threads and in a 32-row call, with rows past a micro-kernel's
 * 8 and a group's 32 (33, 50, 100, 130), outputs past a micro-kernel's 48 and a
 * tile's 16 (17, 40, 49, 300: a task's panel of 128 then 44), bias and ReLU, K
 * of one tile step, of several and past a K block (1120: the sums carried
 * through y); fewer rows, `in` not a whole number of 32s and f32 W left to the
 * other kernels. Without avx512_bf16 the rule never takes them. */
static void test_gemm_bf16_tiles(void) {
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512) || !zz_cpu_has_bf16()) {
    CU_ASSERT_FALSE(zz_cpu_gemm_tiles(64, 64, ZZ_DTYPE_BF16));
    printf("\n  bf16 tiles: no avx512_bf16 here (checked the rule only)");
    return;
  }
  CU_ASSERT_EQUAL_FATAL(zz_cpu_isa_set(ZZ_CPU_ISA_AVX512), 0);
  CU_ASSERT_FALSE(zz_cpu_gemm_tiles(64, 40, ZZ_DTYPE_BF16));
  CU_ASSERT_FALSE(zz_cpu_gemm_tiles(31, 64, ZZ_DTYPE_BF16));
  CU_ASSERT_FALSE(zz_cpu_gemm_tiles(64, 64, ZZ_DTYPE_F32));
  static const int64_t shapes[][3] = {{32, 32, 16},   {33, 64, 17},  {50, 96, 40},    {40, 288, 49},
                                      {100, 256, 33}, {64, 512, 64}, {130, 1120, 300}};
  zz_bf16_cases(shapes, sizeof shapes / sizeof shapes[0], 47, "bf16 tiles", zz_bf16_tiles_extra);
  zz_cpu_isa_set(zz_cpu_isa_best());
}

static int zz_gemm_init(void) { return zz_pool_create(2, &g_pool); }
static int zz_gemm_clean(void) {
  zz_pool_destroy(g_pool);
  g_pool = NULL;
  return 0;
}

void zz_test_gemm_register(void) {
  CU_pSuite s = CU_add_suite("gemm", zz_gemm_init, zz_gemm_clean);
  CU_add_test(s, "f32 kernel vs f64 and sgemm", test_gemm_f32);
  CU_add_test(s, "bf16 kernel vs f64 of rounded inputs", test_gemm_bf16);
  CU_add_test(s, "f32 portable micro-kernel", test_gemm_f32_portable);
  CU_add_test(s, "bf16 portable micro-kernel", test_gemm_bf16_portable);
  CU_add_test(s, "f32 linear at every n 1..130", test_linear_w_every_n);
  CU_add_test(s, "bf16 weights on the golden fixtures", test_bf16_golden);
  CU_add_test(s, "q4 fused micro-kernels: the bits of dequantize-then-multiply, f64 within the order bound",
              test_q4_fused);
  CU_add_test(s, "bf16 avx2 and avx512 micro-kernels: the portable one's bits", test_bf16_avx2_bits);
  CU_add_test(s, "every dtype: the same bits on 1, 2 and 3 threads", test_linear_threads_bits);
  CU_add_test(s, "q4 dequantize: avx2 = portable bits", test_q4_dequant_bits);
  CU_add_test(s, "decode panels streamed: the bits of K blocks outside", test_gemm_stream_bits);
  CU_add_test(s,
              "bf16 one chain per output (>= 16 rows: row-lane tile, packed GEMM): f64 within the order bound, "
              "remainders, threads, ISAs, rows",
              test_gemm_packed);
  CU_add_test(s, "f32 avx2 micro-kernel: the portable one's bits, f64 within the order bound, remainders, threads",
              test_f32_avx2_bits);
  CU_add_test(
      s,
      "f32 row-lane tile (>= 9 rows, avx2 and avx512): the fmaf chain's bits, f64 within the order bound, remainders, "
      "threads, rows",
      test_gemm_f32_lanes);
  CU_add_test(
      s,
      "4/8-bit exact linear at 17-127 rows on avx2 and avx512: widened panels by the row-lane tile, the fmaf chain's bits",
      test_q_lanes);
  CU_add_test(s,
              "bf16 at 9-15 rows: the row-lane tile's fmaf chain on avx512 without vdpbf16ps; f64 within the order "
              "bound, threads",
              test_gemm_bf16_9_15);
  CU_add_test(s,
              "bf16 on AMX's packed tiles in zmm (vdpbf16ps, >= 32 rows): f64 within the order bound, remainders, "
              "threads, rows",
              test_gemm_bf16_tiles);
  CU_add_test(s, "bf16 on AMX tiles (>= 16 rows): f64 within the order bound, remainders, threads; else refused",
              test_gemm_amx);
}
