/*
 * test_runtime_int8.c — the 4/8-bit linear with x in int8 (--cpu-act int8,
 * kernels/cpu/linear_int8.c): the AVX2 micro-kernel gives the portable one's
 * bits on any shape, group and thread count; both stay within the bound of
 * rounding x to int8 per group of the exact product (docs/cpu.md, "int8
 * activations").
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"
#include "zz_tests.h"

/* n, in, out: in with tails past the last whole 64 and 32 and past the last
 * whole group, out past the 4-row W tile and the 64-row chunk; n at decode sizes
 * (the blocks of 1-3 rows with their count a constant), past the 16-row block of
 * x by odd counts (a last row paired with itself), and 8-bit past its limit
 * (zz_cpu_act_int8_applies: the exact path's bits there). One row of x (4-bit:
 * the GEMV of 8 W rows, its fast path where groups of 64 cover in and 8 rows
 * remain): out with every tail of 8 (1-7 rows left) inside and past a chunk, in
 * at whole 64s, past them, and below one group; 2 and 3 rows take the same GEMV
 * (its fast path at groups of 64 over whole 64s and 8 rows left, else the other). */
static const int64_t g_i8shapes[][3] = {
    {1, 64, 4},     {1, 4096, 67}, {2, 100, 9},   {3, 131, 5},    {4, 256, 64}, {5, 1000, 13},
    {7, 72, 130},   {13, 520, 7},  {16, 333, 21}, {17, 200, 70},  {19, 64, 3},  {33, 130, 131},
    {37, 2048, 66}, {70, 96, 9},   {129, 72, 6},  {150, 260, 67}, {1, 512, 8},  {1, 768, 521},
    {1, 640, 15},   {1, 192, 70},  {1, 1000, 27}, {1, 30, 11},    {1, 256, 1},  {1, 4160, 17},
    {2, 512, 8},    {3, 768, 70},  {2, 1000, 27}, {3, 4160, 131}, {2, 30, 1},
};
static const zz_qfmt g_i8fmts[] = {{4, 64}, {4, 32}, {4, 128}, {4, 256}, {4, 40}, {4, 34},
                                   {8, 64}, {8, 32}, {8, 256}, {8, 40},  {8, 34}};

/* The bound of the activations' rounding on output (i, o): Σ_g (a_g / 254) Σ_{k in g} |w_k|
 * with a_g = max |x_k| over the group (|x - sx·xi| <= sx / 2, sx = a / 127), in f64. */
static double zz_i8_bound(const float *x, const float *wd, int64_t in, int group) {
  double bound = 0;
  for (int64_t k0 = 0; k0 < in; k0 += group) {
    int64_t m = in - k0 < group ? in - k0 : group;
    double a = 0, sw = 0;
    for (int64_t e = 0; e < m; e++) {
      a = fabs(x[k0 + e]) > a ? fabs(x[k0 + e]) : a;
      sw += fabs(wd[k0 + e]);
    }
    bound += a / 254 * sw;
  }
  return bound;
}

static void test_int8_bits_and_bound(void) {
  zz_pool *pools[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++) CU_ASSERT_FATAL(zz_pool_create(t + 1, &pools[t]) == 0);
  const bool avx2 = zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2);
  zz_rng r;
  zz_rng_seed(&r, 41, 0);
  int bad_bits = 0, bad_threads = 0, bad_bound = 0, wrong_path = 0, cases = 0;
  double worst = 0; /* largest error over its bound */
  for (size_t fi = 0; fi < sizeof g_i8fmts / sizeof g_i8fmts[0]; fi++)
    for (size_t s = 0; s < sizeof g_i8shapes / sizeof g_i8shapes[0]; s++) {
      zz_qfmt f = g_i8fmts[fi];
      int64_t n = g_i8shapes[s][0], in = g_i8shapes[s][1], out = g_i8shapes[s][2];
      float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
      float *wd = malloc((size_t)(out * in) * sizeof *wd), *b = malloc((size_t)out * sizeof *b);
      float *y0 = malloc((size_t)(n * out) * sizeof *y0), *y1 = malloc((size_t)(n * out) * sizeof *y1);
      float *ye = malloc((size_t)(n * out) * sizeof *ye);
      void *q = malloc(zz_q_row_bytes(f, in) * (size_t)out);
      /* x with an outlier every 97 elements, as activations have: a group's scale follows it */
      for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1) * (i % 97 == 0 ? 20 : 1);
      for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1) * (i % 7 == 0 ? 8 : 1);
      for (int64_t i = 0; i < out; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
      zz_q_quantize(f, w, out, in, q);
      zz_q_dequantize(f, q, out, in, wd);
      int relu = (int)(s % 2);
      const float *bb = relu ? NULL : b;
      zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
      zz_cpu_linear_q(pools[1], x, n, in, q, f, ZZ_CPU_ACT_INT8, bb, out, y0, relu);
      zz_cpu_linear_q(pools[1], x, n, in, q, f, ZZ_CPU_ACT_F32, bb, out, ye, relu);
      /* int8 where zz_cpu_act_int8_applies: other bits than exact; elsewhere exact's */
      if ((memcmp(y0, ye, (size_t)(n * out) * sizeof *y0) != 0) != zz_cpu_act_int8_applies(f.bits, n)) wrong_path++;
      for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
          double acc, mag;
          zz_test_dot_f64(x + i * in, wd + o * in, bb ? bb + o : NULL, in, relu, &acc, &mag);
          /* the activations' rounding, then f32 sums: 1e-5 of the terms' magnitude */
          double bound = zz_i8_bound(x + i * in, wd + o * in, in, f.group) * 1.001 + 1e-5 * mag + 1e-30;
          double err = fabs(acc - y0[i * out + o]);
          if (err / bound > worst) worst = err / bound;
          if (err > bound) bad_bound++;
        }
      for (int t = 0; t < 3 && avx2; t++) {
        zz_cpu_isa_set(ZZ_CPU_ISA_AVX2);
        zz_cpu_linear_q(pools[t], x, n, in, q, f, ZZ_CPU_ACT_INT8, bb, out, y1, relu);
        cases++;
        if (memcmp(y0, y1, (size_t)(n * out) * sizeof *y0) != 0) {
          bad_bits++;
          printf("\n  int8 avx2 bits=%d group=%d n=%lld in=%lld out=%lld threads=%d: bits differ from portable", f.bits,
                 f.group, (long long)n, (long long)in, (long long)out, t + 1);
        }
      }
      /* the portable kernel on other pools too: tiles follow the shape alone */
      zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
      zz_cpu_linear_q(pools[2], x, n, in, q, f, ZZ_CPU_ACT_INT8, bb, out, y1, relu);
      if (memcmp(y0, y1, (size_t)(n * out) * sizeof *y0) != 0) bad_threads++;
      free(x), free(w), free(wd), free(b), free(y0), free(y1), free(ye), free(q);
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  printf("\n  int8 activations: worst error / bound %.3f over %zu cases", worst,
         sizeof g_i8fmts / sizeof g_i8fmts[0] * (sizeof g_i8shapes / sizeof g_i8shapes[0]));
  CU_ASSERT_EQUAL(bad_bits, 0);
  CU_ASSERT_EQUAL(bad_threads, 0);
  CU_ASSERT_EQUAL(bad_bound, 0);
  CU_ASSERT_EQUAL(wrong_path, 0);
  CU_ASSERT(!avx2 || cases > 0);
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]);
}

/* The CPU device follows zz_device_set_cpu_act; a CUDA device refuses int8. */
static void test_int8_device_option(void) {
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 1, &dev) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_device_describe(dev)->cpu_act, ZZ_CPU_ACT_F32);
  CU_ASSERT_EQUAL(zz_device_set_cpu_act(dev, ZZ_CPU_ACT_INT8), ZZ_OK);
  CU_ASSERT_EQUAL(zz_device_describe(dev)->cpu_act, ZZ_CPU_ACT_INT8);
  zz_device_destroy(dev);
}

static void test_int8_tile_bits(void); /* below */

void zz_test_int8_register(void) {
  CU_pSuite s = CU_add_suite("int8", NULL, NULL);
  CU_add_test(s, "int8 activations: avx2 = portable bits on any threads, within the rounding bound of exact",
              test_int8_bits_and_bound);
  CU_add_test(s, "int8 activations: the cpu device's option", test_int8_device_option);
  CU_add_test(s, "int8 activations: the packed 4-bit tile = portable bits at every leftover", test_int8_tile_bits);
}

/* The packed tile (4- and 8-bit groups of whole 64s over a K of whole 64s, 4
 * or more rows of x; kernels/cpu/linear_int8.c zz_xq_tile_chunk) against the portable
 * kernel's bits, at every leftover of its blocking: rows of x past the tile of
 * 4 (5, 6, 7, 9; 4 and 12 whole) and past the row block (100 at a K block of
 * 2048: 96 rows);
 * W rows past the panel of 8 (13, 70: 6 left in the second task; 137: 9 left,
 * a whole panel and 1 row) and a whole task (64); K in one 64-block, in two
 * K blocks (2112 = 2048 + 64, 4096; 8-bit: blocks of 1024), with groups of
 * 64, 128 (the last group short at 2112), 192 (K blocks of 1920, 8-bit 960)
 * and 256; 1, 2 and 3 threads, with and without bias and ReLU.
 * Where the CPU has avx512_vnni the same cases run again under ZZ_CPU_ISA_AVX512,
 * the VNNI tile's blocking: tiles of 8 rows (leftovers 1-7; 8, 16 whole), its
 * row block (192 rows at a K block of 1024: 200), panels of 16 W rows (13,
 * 20, 33, 70, 137 leave 13, 4, 1, 6, 9), K blocks of 1024 (1088, 2112, 4096;
 * 960 for groups of 192). Where the process may use AMX, again under
 * ZZ_CPU_ISA_AMX: the same panels, tiles of 16 rows (fewer: 4-9 and 12 rows;
 * 17 and 100 leave 1 and 4 past whole tiles; 200: a row block of 192, then 8).
 * And 1-3 rows of x, where under ZZ_CPU_ISA_AVX512 with avx512_vnni both
 * widths take the VNNI GEMVs (zz_xv_gemv8, zz_xv_gemv4: 16 W rows a call; 137,
 * 70, 33, 17, 13 and 1 leave 9, 6, 1, 1, 13 and 1 past whole calls, 16 none;
 * groups of 1-4 64-blocks, K of one group and many), and under AVX2 the AVX2
 * GEMV (4 bits) and panel (8 bits). */
static void test_int8_tile_bits(void) {
  static const int64_t shapes[][3] = {{4, 64, 8},      {5, 192, 13},   {7, 2112, 70}, {6, 256, 64}, {100, 2112, 9},
                                      {9, 4096, 137},  {4, 768, 1},    {12, 384, 16}, {8, 128, 16}, {17, 1088, 33},
                                      {200, 1088, 20}, {1, 4096, 137}, {2, 1088, 33}, {3, 192, 13}, {1, 64, 1},
                                      {1, 2112, 16},   {3, 4096, 17},  {2, 768, 70}};
  zz_cpu_isa isas[3] = {ZZ_CPU_ISA_AVX2};
  int nisa = 1;
  if (zz_cpu_has_vnni()) isas[nisa++] = ZZ_CPU_ISA_AVX512, printf("\n  (the VNNI tile too: this CPU has avx512_vnni)");
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AMX)) isas[nisa++] = ZZ_CPU_ISA_AMX, printf("\n  (the AMX tile too)");
  static const zz_qfmt fmts[] = {{4, 64}, {4, 128}, {4, 192}, {4, 256}, {8, 64}, {8, 128}, {8, 192}, {8, 256}};
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) return;
  zz_pool *pools[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++) CU_ASSERT_FATAL(zz_pool_create(t + 1, &pools[t]) == 0);
  zz_rng r;
  zz_rng_seed(&r, 43, 0);
  int bad = 0, cases = 0;
  for (size_t gi = 0; gi < sizeof fmts / sizeof fmts[0]; gi++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const zz_qfmt f = fmts[gi];
      const int64_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
      float *x = malloc((size_t)(n * in) * sizeof *x), *w = malloc((size_t)(out * in) * sizeof *w);
      float *b = malloc((size_t)out * sizeof *b), *y0 = malloc((size_t)(n * out) * sizeof *y0);
      float *y1 = malloc((size_t)(n * out) * sizeof *y1);
      void *q = malloc(zz_q_row_bytes(f, in) * (size_t)out);
      for (int64_t i = 0; i < n * in; i++) x[i] = (float)(zz_rng_uniform(&r) * 2 - 1) * (i % 89 == 0 ? 30 : 1);
      /* weights at both ends of each group's range too: nibbles 0 and 15 */
      for (int64_t i = 0; i < out * in; i++) w[i] = (float)(zz_rng_uniform(&r) * 2 - 1) * (i % 5 == 0 ? 6 : 1);
      for (int64_t i = 0; i < out; i++) b[i] = (float)(zz_rng_uniform(&r) - 0.5);
      zz_q_quantize(f, w, out, in, q);
      const int relu = (int)((s + gi) % 2);
      const float *bb = s % 3 ? b : NULL;
      zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE);
      zz_cpu_linear_q(pools[0], x, n, in, q, f, ZZ_CPU_ACT_INT8, bb, out, y0, relu);
      for (int ii = 0; ii < nisa; ii++) {
        CU_ASSERT_FATAL(zz_cpu_isa_set(isas[ii]) == 0);
        for (int t = 0; t < 3; t++) {
          for (int64_t i = 0; i < n * out; i++) y1[i] = NAN; /* every output written */
          zz_cpu_linear_q(pools[t], x, n, in, q, f, ZZ_CPU_ACT_INT8, bb, out, y1, relu);
          cases++;
          if (memcmp(y0, y1, (size_t)(n * out) * sizeof *y0) != 0) {
            bad++;
            printf("\n  int8 tile (%s) bits=%d group=%d n=%lld in=%lld out=%lld threads=%d: bits differ from portable",
                   zz_cpu_isa_name(isas[ii]), f.bits, f.group, (long long)n, (long long)in, (long long)out, t + 1);
          }
        }
      }
      free(x), free(w), free(b), free(y0), free(y1), free(q);
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(cases, nisa * 3 * (int)(sizeof fmts / sizeof fmts[0] * (sizeof shapes / sizeof shapes[0])));
  for (int t = 0; t < 3; t++) zz_pool_destroy(pools[t]);
}
