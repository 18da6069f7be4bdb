/*
 * test_runtime_attn.c — the fast CPU attention (kernels/cpu/attn.c) against the
 * scalar reference zz_cpu_attention_ref, on every ISA path this CPU has
 * (portable always; AVX2 and AVX-512 where present), over f32, f16 and Q4 caches.
 * The fast kernel keeps the reference's operations and their order (only the
 * memory order and the vector width change), so the outputs must be bitwise equal,
 * except on an f16 cache under AVX-512: that path (which the CPU device's golden
 * runs never take) fuses multiply-adds and sums in another order, and is held to
 * ZZ_ATTN_F16_TOL of the reference instead; and on a 4-bit cache, whose passes
 * read the nibbles in registers (ZZ_ATTN_Q4_TOL; test_attn_q4_fused below).
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_tests.h"

static zz_pool *g_pool; /* 2 threads, for the cases of test_attn_fast_vs_ref */

/* Elements of a that are not exactly b's (NaN never equals: an output never
 * written, pre-filled with NaN, counts). */
static int64_t zz_attn_diff(const float *a, const float *b, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !(a[i] == b[i]);
  return bad;
}

/* The f16 AVX-512 path's bound: |out - ref| <= ZZ_ATTN_F16_TOL · max |ref| over the
 * same output row of one head (hd values; a row of zeros must be exact). */
#define ZZ_ATTN_F16_TOL 1e-5

/* The fused 4-bit cache passes' bound (every ISA), in the same form: they split
 * each group's dot into step · Σ q·n + lo · Σ q and fuse the multiply-adds. */
#define ZZ_ATTN_Q4_TOL 1e-5

/* Elements of a outside the bound tol around b, rows of hd (NaN counts). */
static int64_t zz_attn_diff_tol(const float *a, const float *b, int64_t n, int64_t hd, double tol) {
  int64_t bad = 0;
  for (int64_t r = 0; r < n; r += hd) {
    float mx = 0;
    for (int64_t d = r; d < r + hd; d++) mx = fabsf(b[d]) > mx ? fabsf(b[d]) : mx;
    for (int64_t d = r; d < r + hd; d++) bad += !(fabsf(a[d] - b[d]) <= (float)tol * mx);
  }
  return bad;
}

static void zz_fill(zz_rng *r, float *x, int64_t n, float amp) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(2 * zz_rng_uniform(r) - 1) * amp;
}

typedef struct zz_attn_case {
  int64_t b, sq, t, heads, kv_heads, hd;
  int64_t q_back; /* q_start = t - sq - q_back: the last q_back keys are in the future */
  int64_t window; /* sliding window (0: none) */
} zz_attn_case;

/* f32, f16 and Q4 caches of the same random values; every ISA against the reference. */
static void zz_check_case(zz_rng *r, const zz_attn_case *c) {
  CU_ASSERT_FATAL(c->b <= 16); /* pad[] below */
  const int64_t t_max = c->t + 3, kvw = c->kv_heads * c->hd, h = c->heads * c->hd;
  const int64_t n_q = c->b * c->sq * h, n_kv = c->b * t_max * kvw;
  float *q = malloc((size_t)n_q * 4), *k = malloc((size_t)n_kv * 4), *v = malloc((size_t)n_kv * 4);
  float *out = malloc((size_t)n_q * 4), *ref = malloc((size_t)n_q * 4);
  float *scratch = malloc(zz_cpu_attention_scratch(c->b, c->heads, c->t) * sizeof(float));
  uint16_t *k16 = malloc((size_t)n_kv * 2), *v16 = malloc((size_t)n_kv * 2);
  const zz_qfmt f = ZZ_QFMT_DEFAULT;
  const size_t qrow = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, c->kv_heads, c->hd);
  unsigned char *kq = malloc((size_t)(c->b * t_max) * qrow), *vq = malloc((size_t)(c->b * t_max) * qrow);
  int32_t pad[16];          /* b <= 16 in the table below */
  zz_fill(r, q, n_q, 3.0f); /* scores up to a few units: a peaked softmax too */
  zz_fill(r, k, n_kv, 1.0f);
  zz_fill(r, v, n_kv, 1.0f);
  zz_convert(ZZ_DTYPE_F32, k, ZZ_DTYPE_F16, k16, n_kv);
  zz_convert(ZZ_DTYPE_F32, v, ZZ_DTYPE_F16, v16, n_kv);
  zz_q_quantize(f, k, c->b * t_max * c->kv_heads, c->hd, kq);
  zz_q_quantize(f, v, c->b * t_max * c->kv_heads, c->hd, vq);
  /* left padding 0 for the first sequence, some for the next, and a sequence
   * padded past every key (its rows see nothing: zeros) when there are 3+ */
  for (int64_t i = 0; i < c->b; i++) pad[i] = (int32_t)((i * 7) % (c->t / 2 + 1));
  if (c->b >= 3) pad[c->b - 1] = (int32_t)c->t;
  for (int dt = 0; dt < 3; dt++) {
    zz_attn_args a = {
        .q = q,
        .k = dt == 0   ? (const void *)k
             : dt == 1 ? (const void *)k16
                       : (const void *)kq,
        .v = dt == 0   ? (const void *)v
             : dt == 1 ? (const void *)v16
                       : (const void *)vq,
        .kv = {.dt = dt == 0   ? ZZ_DTYPE_F32
                     : dt == 1 ? ZZ_DTYPE_F16
                               : ZZ_DTYPE_Q4,
               .q = f,
               .seq_bytes = dt == 2 ? (int64_t)(t_max * qrow)
                                    : (int64_t)zz_dtype_nbytes(dt ? ZZ_DTYPE_F16 : ZZ_DTYPE_F32, t_max * kvw)},
        .b = c->b,
        .sq = c->sq,
        .t = c->t,
        .q_start = c->t - c->sq - c->q_back,
        .heads = c->heads,
        .kv_heads = c->kv_heads,
        .hd = c->hd,
        .pad = pad,
        .keep = 1,
        .window = c->window,
        .out = ref,
        .scratch = scratch};
    zz_cpu_attention_ref(g_pool, &a);
    for (int isa = ZZ_CPU_ISA_PORTABLE; isa <= ZZ_CPU_ISA_AVX512; isa++) {
      if (zz_cpu_isa_set((zz_cpu_isa)isa) != 0) continue; /* this CPU lacks it */
      for (int64_t x = 0; x < n_q; x++) out[x] = NAN;
      a.out = out;
      zz_cpu_attention_ex(g_pool, &a);
      /* the same operations in the same order: the same bits (f16 on AVX-512 and the
       * fused Q4 passes: FMA, within their bounds) */
      const double tol = a.kv.dt == ZZ_DTYPE_F16 && isa >= ZZ_CPU_ISA_AVX512 ? ZZ_ATTN_F16_TOL
                         : a.kv.dt == ZZ_DTYPE_Q4                            ? ZZ_ATTN_Q4_TOL
                                                                             : 0;
      int64_t bad = tol > 0 ? zz_attn_diff_tol(out, ref, n_q, c->hd, tol) : zz_attn_diff(out, ref, n_q);
      if (bad) {
        fprintf(stderr,
                "\nattention %s cache, %s: b %ld sq %ld t %ld heads %ld/%ld hd %ld window %ld: %ld of %ld outputs "
                "differ%s\n",
                zz_dtype_name(a.kv.dt), zz_cpu_isa_name((zz_cpu_isa)isa), (long)c->b, (long)c->sq, (long)c->t,
                (long)c->heads, (long)c->kv_heads, (long)c->hd, (long)c->window, (long)bad, (long)n_q,
                tol ? " beyond the tolerance" : "");
        CU_FAIL("fast attention differs from the reference");
      }
      a.out = ref;
    }
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
  free(q), free(k), free(v), free(out), free(ref), free(scratch), free(k16), free(v16), free(kq), free(vq);
}

static void test_attn_fast_vs_ref(void) {
  zz_rng r;
  zz_rng_seed(&r, 14, 1);
  /* b, sq, t, heads, kv_heads, hd, q_back */
  const zz_attn_case cases[] = {
      {1, 1, 1, 1, 1, 64, 0, 0},     /* one key */
      {2, 1, 17, 4, 4, 64, 0, 0},    /* t not a multiple of 16 */
      {3, 1, 100, 4, 1, 80, 0, 0},   /* grouped-query 4:1, hd 80 (AVX-512 tail of 0, 5 vectors) */
      {5, 1, 2100, 8, 2, 128, 0, 0}, /* GQA 4:1 over a long cache */
      {2, 1, 1023, 2, 2, 80, 0, 0},
      {4, 1, 513, 6, 3, 72, 0, 0},  /* hd 72: an AVX-512 tail of 8 */
      {2, 1, 50, 2, 2, 20, 9, 0},   /* hd 20: an AVX2 tail of 4; q_start before the end */
      {3, 37, 37, 4, 2, 64, 0, 0},  /* prefill with left padding */
      {2, 5, 300, 4, 4, 128, 0, 0}, /* several query rows over a history */
      {5, 3, 64, 2, 1, 64, 2, 0},   /* multi-query attention, rows in the future masked */
      {9, 1, 130, 6, 3, 64, 0, 0},  /* a batch that fills the pool: whole rows (3 KV heads) per task */
      {2, 1, 40, 20, 20, 16, 0, 0}, /* hd 16 (one vector, no tail); 20 query heads: a block of 16 and 4 */
      {9, 1, 33, 36, 12, 32, 0, 0}, /* GQA 3:1 with whole rows: 36 query heads per task (16, 16, 4) */
      /* sliding windows: prefill rows each starting elsewhere, past the padding or not */
      {3, 37, 37, 4, 2, 64, 0, 5},
      {5, 1, 2100, 8, 2, 128, 0, 1000}, /* decode over a long cache */
      {2, 5, 300, 4, 4, 128, 0, 7},
      {5, 3, 64, 2, 1, 64, 2, 1}, /* a window of one: each query sees itself */
  };
  CU_ASSERT_FATAL(zz_pool_create(2, &g_pool) == 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) zz_check_case(&r, &cases[i]);
  zz_pool_destroy(g_pool);
}

/* A sliding window is padding that moves with the query: a decode query at
 * position p with window w over keys [0, p] gives, on every path (f32, f16, Q4
 * cache, top-k), exactly what the same query gives with no window and the first
 * p - w + 1 keys padded; a prompt row r of a window equals that row decoded
 * alone. Guards the window rule itself, which the fast-vs-reference cases share. */
static void test_attn_window_is_padding(void) {
  zz_rng r;
  zz_rng_seed(&r, 45, 1);
  zz_pool *pool;
  CU_ASSERT_FATAL(zz_pool_create(2, &pool) == 0);
  const int64_t t = 40, heads = 4, kvh = 2, hd = 32, kvw = kvh * hd, h = heads * hd, w = 6;
  const zz_qfmt f = ZZ_QFMT_DEFAULT;
  const size_t qrow = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, kvh, hd);
  float *q = malloc((size_t)(t * h) * 4), *k = malloc((size_t)(t * kvw) * 4), *v = malloc((size_t)(t * kvw) * 4);
  float *o_win = malloc((size_t)(t * h) * 4), *o_pad = malloc((size_t)h * 4);
  float *scratch = malloc(zz_cpu_attention_scratch(1, heads, t) * sizeof(float));
  uint16_t *k16 = malloc((size_t)(t * kvw) * 2), *v16 = malloc((size_t)(t * kvw) * 2);
  unsigned char *kq = malloc((size_t)t * qrow), *vq = malloc((size_t)t * qrow);
  zz_fill(&r, q, t * h, 3.0f);
  zz_fill(&r, k, t * kvw, 1.0f);
  zz_fill(&r, v, t * kvw, 1.0f);
  zz_convert(ZZ_DTYPE_F32, k, ZZ_DTYPE_F16, k16, t * kvw);
  zz_convert(ZZ_DTYPE_F32, v, ZZ_DTYPE_F16, v16, t * kvw);
  zz_q_quantize(f, k, t * kvh, hd, kq);
  zz_q_quantize(f, v, t * kvh, hd, vq);
  const void *ks[3] = {k, k16, kq}, *vs[3] = {v, v16, vq};
  const zz_dtype dts[3] = {ZZ_DTYPE_F32, ZZ_DTYPE_F16, ZZ_DTYPE_Q4};
  const int64_t seq[3] = {t * kvw * 4, t * kvw * 2, (int64_t)(t * qrow)};
  const double keeps[2] = {1.0, 0.5};
  int64_t bad = 0;
  for (int dt = 0; dt < 3; dt++)
    for (int kp = 0; kp < 2; kp++) {
      const int32_t none = 0;
      zz_attn_args a = {.q = q,
                        .k = ks[dt],
                        .v = vs[dt],
                        .kv = {.dt = dts[dt], .q = f, .seq_bytes = seq[dt]},
                        .b = 1,
                        .sq = t,
                        .t = t,
                        .q_start = 0,
                        .heads = heads,
                        .kv_heads = kvh,
                        .hd = hd,
                        .pad = &none,
                        .keep = keeps[kp],
                        .window = w,
                        .out = o_win,
                        .scratch = scratch};
      zz_cpu_attention_ex(pool, &a); /* every row of a prompt under the window */
      for (int64_t p = 0; p < t; p++) {
        const int32_t pad = (int32_t)(p - w + 1 > 0 ? p - w + 1 : 0);
        zz_attn_args d = a;
        d.q = q + p * h, d.sq = 1, d.t = p + 1, d.q_start = p, d.pad = &pad, d.window = 0, d.out = o_pad;
        zz_cpu_attention_ex(pool, &d);
        /* the prompt's rows take the same path as one decode row only in f32/f16
         * order; Q4 fuses per block of keys from the first visible one (same here) */
        bad += zz_attn_diff_tol(o_win + p * h, o_pad, h, hd, dt == 0 ? 0 : ZZ_ATTN_Q4_TOL);
      }
    }
  if (bad) fprintf(stderr, "\nwindowed attention: %ld outputs differ from padding the old keys\n", (long)bad);
  CU_ASSERT_EQUAL(bad, 0);
  free(q), free(k), free(v), free(o_win), free(o_pad), free(scratch), free(k16), free(v16), free(kq), free(vq);
  zz_pool_destroy(pool);
}

/* The ISA names round trip; an unknown name is refused. */
static void test_attn_isa_names(void) {
  zz_cpu_isa isa;
  for (int i = ZZ_CPU_ISA_PORTABLE; i <= ZZ_CPU_ISA_AVX512; i++) {
    CU_ASSERT_EQUAL(zz_cpu_isa_parse(zz_cpu_isa_name((zz_cpu_isa)i), &isa), 0);
    CU_ASSERT_EQUAL((int)isa, i);
  }
  CU_ASSERT_EQUAL(zz_cpu_isa_parse("sse9", &isa), -1);
  CU_ASSERT_EQUAL(zz_cpu_isa_parse("auto", &isa), 0);
  CU_ASSERT_EQUAL(isa, zz_cpu_isa_best());
  CU_ASSERT(zz_cpu_isa_supported(ZZ_CPU_ISA_PORTABLE));
  CU_ASSERT_EQUAL(zz_cpu_isa_set(ZZ_CPU_ISA_PORTABLE), 0);
  CU_ASSERT_EQUAL(zz_cpu_isa_get(), ZZ_CPU_ISA_PORTABLE);
  CU_ASSERT_EQUAL(zz_cpu_isa_set(zz_cpu_isa_best()), 0);
}

/* ---------------------------------------------------------------- 4-bit cache, fused */

typedef struct zz_q4_case {
  int64_t b, sq, t, heads, kv_heads, hd, group;
} zz_q4_case;

/* One case on every ISA and 1-3 threads: the fused passes within ZZ_ATTN_Q4_TOL of
 * the reference, bitwise the same for every thread count (a query head's result
 * must not depend on the task it falls in: tokens would follow the batch), and the
 * unfused path (q4_unfused) still the reference's bits. Returns the largest
 * |out - ref| / max |ref row| seen. */
static double zz_check_q4(zz_rng *r, const zz_q4_case *c, zz_pool *pools[3]) {
  const zz_qfmt f = {.bits = 4, .group = (int)c->group};
  const int64_t t_max = c->t + 2, h = c->heads * c->hd, n_q = c->b * c->sq * h;
  const size_t qrow = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, c->kv_heads, c->hd);
  float *q = malloc((size_t)n_q * 4), *x = malloc((size_t)(c->b * t_max * c->kv_heads * c->hd) * 4);
  float *ref = malloc((size_t)n_q * 4), *out = malloc((size_t)n_q * 4), *first = malloc((size_t)n_q * 4);
  float *scratch = malloc(zz_cpu_attention_scratch(c->b, c->heads, c->t) * sizeof(float));
  unsigned char *kq = malloc((size_t)(c->b * t_max) * qrow), *vq = malloc((size_t)(c->b * t_max) * qrow);
  int32_t *pad = calloc((size_t)c->b, sizeof *pad);
  zz_fill(r, q, n_q, 3.0f);
  zz_fill(r, x, c->b * t_max * c->kv_heads * c->hd, 1.0f);
  zz_q_quantize(f, x, c->b * t_max * c->kv_heads, c->hd, kq);
  zz_fill(r, x, c->b * t_max * c->kv_heads * c->hd, 1.0f);
  zz_q_quantize(f, x, c->b * t_max * c->kv_heads, c->hd, vq);
  for (int64_t i = 1; i < c->b; i++) pad[i] = (int32_t)((i * 5) % (c->t / 2 + 1));
  zz_attn_args a = {.q = q,
                    .k = kq,
                    .v = vq,
                    .kv = {.dt = ZZ_DTYPE_Q4, .q = f, .seq_bytes = (int64_t)(t_max * qrow)},
                    .b = c->b,
                    .sq = c->sq,
                    .t = c->t,
                    .q_start = c->t - c->sq,
                    .heads = c->heads,
                    .kv_heads = c->kv_heads,
                    .hd = c->hd,
                    .pad = pad,
                    .keep = 1,
                    .out = ref,
                    .scratch = scratch};
  zz_cpu_attention_ref(pools[1], &a);
  double worst = 0;
  for (int isa = ZZ_CPU_ISA_PORTABLE; isa <= ZZ_CPU_ISA_AVX512; isa++) {
    if (zz_cpu_isa_set((zz_cpu_isa)isa) != 0) continue;
    for (int th = 0; th < 3; th++) {
      for (int64_t e = 0; e < n_q; e++) out[e] = NAN;
      a.out = out;
      zz_cpu_attention_ex(pools[th], &a);
      for (int64_t row = 0; row < n_q; row += c->hd) {
        float mx = 0;
        for (int64_t d = row; d < row + c->hd; d++) mx = fabsf(ref[d]) > mx ? fabsf(ref[d]) : mx;
        for (int64_t d = row; d < row + c->hd; d++) {
          double e = mx > 0 ? fabs((double)out[d] - ref[d]) / mx : (out[d] == ref[d] ? 0 : INFINITY);
          worst = e > worst || e != e ? e : worst;
        }
      }
      int64_t bad = zz_attn_diff_tol(out, ref, n_q, c->hd, ZZ_ATTN_Q4_TOL);
      int64_t moved = th ? zz_attn_diff(out, first, n_q) : 0;
      if (!th) memcpy(first, out, (size_t)n_q * 4);
      if (bad || moved) {
        fprintf(stderr,
                "\nfused q4 attention, %s, %d threads: b %ld sq %ld t %ld heads %ld/%ld hd %ld group %ld: %ld of %ld "
                "outputs beyond the tolerance, %ld differ from 1 thread's\n",
                zz_cpu_isa_name((zz_cpu_isa)isa), th + 1, (long)c->b, (long)c->sq, (long)c->t, (long)c->heads,
                (long)c->kv_heads, (long)c->hd, (long)c->group, (long)bad, (long)n_q, (long)moved);
        CU_FAIL("fused q4 attention differs from the reference");
      }
    }
    a.q4_unfused = 1; /* the path before: the reference's bits */
    zz_cpu_attention_ex(pools[2], &a);
    CU_ASSERT_EQUAL(zz_attn_diff(out, ref, n_q), 0);
    a.q4_unfused = 0;
  }
  zz_cpu_isa_set(zz_cpu_isa_best());
  free(q), free(x), free(ref), free(out), free(first), free(scratch), free(kq), free(vq), free(pad);
  return worst;
}

static void test_attn_q4_fused(void) {
  zz_rng r;
  zz_rng_seed(&r, 27, 3);
  zz_pool *pools[3];
  for (int th = 0; th < 3; th++) CU_ASSERT_FATAL(zz_pool_create(th + 1, &pools[th]) == 0);
  /* b, sq, t, heads, kv_heads, hd, group */
  const zz_q4_case cases[] = {
      {1, 1, 1, 1, 1, 64, 64},      /* one key, hd = group */
      {4, 1, 17, 8, 8, 128, 64},    /* two groups per head */
      {3, 1, 300, 8, 2, 80, 64},    /* GQA 4:1; hd 80: a last group of 16 */
      {2, 1, 513, 6, 3, 72, 64},    /* a last group of 8 (scalar only) */
      {5, 1, 1100, 8, 1, 64, 32},   /* multi-query, two groups of 32, a long cache */
      {2, 1, 64, 4, 2, 68, 34},     /* groups of 34: 16 + 16 + a scalar tail of 2 each */
      {3, 1, 40, 6, 2, 96, 48},     /* groups of 48, GQA 3:1 (blocks of 4 across KV heads) */
      {9, 1, 33, 40, 40, 128, 64},  /* whole rows per task: 40 query heads in sweeps of 32 + 8 */
      {2, 1, 20, 16, 2, 1024, 128}, /* the widest head: sweeps of 4 split a KV group of 8 */
      {2, 1, 25, 6, 2, 20, 64},     /* hd 20 under one group: 16 + a tail of 4 */
      {3, 5, 200, 8, 4, 64, 64},    /* several query rows over a history */
      {2, 9, 9, 12, 4, 128, 64},    /* prefill, GQA 3:1 */
  };
  double worst = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double w = zz_check_q4(&r, &cases[i], pools);
    worst = w > worst ? w : worst;
  }
  fprintf(stderr, "\nfused q4 attention: largest error %.3g of the row's largest output (bound %.0e)\n", worst,
          ZZ_ATTN_Q4_TOL);
  for (int th = 0; th < 3; th++) zz_pool_destroy(pools[th]);
}

/* A sequence's result must not depend on its left padding (the batch it is in sets
 * the padding, and every policy must give the same tokens): the same keys behind P
 * padding rows give the same bits on every ISA, for heads of 1, 2 and 4 query heads
 * per KV head and visible lengths that do and do not fill the kernel's key blocks. */
static void test_attn_q4_pad_shift(void) {
  zz_rng r;
  zz_rng_seed(&r, 27, 5);
  zz_pool *pool;
  CU_ASSERT_FATAL(zz_pool_create(2, &pool) == 0);
  const zz_qfmt f = ZZ_QFMT_DEFAULT;
  const int64_t hd = 80, kvh = 2, P = 5;
  const size_t qrow = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, kvh, hd);
  for (int64_t G = 1; G <= 4; G *= 2)
    for (int64_t n = 3; n <= 37; n += 17) { /* visible keys */
      const int64_t heads = kvh * G, t = n + P;
      float *q = malloc((size_t)(heads * hd) * 4), *x = malloc((size_t)(t * kvh * hd) * 4);
      float *o0 = malloc((size_t)(heads * hd) * 4), *o1 = malloc((size_t)(heads * hd) * 4);
      float *scratch = malloc(zz_cpu_attention_scratch(1, heads, t) * sizeof(float));
      unsigned char *k = malloc((size_t)t * qrow), *v = malloc((size_t)t * qrow);
      zz_fill(&r, q, heads * hd, 3.0f);
      zz_fill(&r, x, t * kvh * hd, 1.0f);
      zz_q_quantize(f, x, t * kvh, hd, k);
      zz_fill(&r, x, t * kvh * hd, 1.0f);
      zz_q_quantize(f, x, t * kvh, hd, v);
      for (int isa = ZZ_CPU_ISA_PORTABLE; isa <= ZZ_CPU_ISA_AVX512; isa++) {
        if (zz_cpu_isa_set((zz_cpu_isa)isa) != 0) continue;
        for (int shifted = 0; shifted < 2; shifted++) {
          const int32_t pad = shifted ? (int32_t)P : 0;
          const size_t skip = shifted ? 0 : (size_t)P * qrow; /* unshifted: the same keys from row 0 */
          zz_attn_args a = {.q = q,
                            .k = k + skip,
                            .v = v + skip,
                            .kv = {.dt = ZZ_DTYPE_Q4, .q = f, .seq_bytes = (int64_t)((size_t)t * qrow)},
                            .b = 1,
                            .sq = 1,
                            .t = shifted ? t : n,
                            .q_start = (shifted ? t : n) - 1,
                            .heads = heads,
                            .kv_heads = kvh,
                            .hd = hd,
                            .pad = &pad,
                            .keep = 1,
                            .out = shifted ? o1 : o0,
                            .scratch = scratch};
          zz_cpu_attention_ex(pool, &a);
        }
        int64_t bad = zz_attn_diff(o1, o0, heads * hd);
        if (bad)
          fprintf(stderr, "\nfused q4 attention, %s: G %ld, %ld keys: %ld outputs move with %ld rows of padding\n",
                  zz_cpu_isa_name((zz_cpu_isa)isa), (long)G, (long)n, (long)bad, (long)P);
        CU_ASSERT_EQUAL(bad, 0);
      }
      free(q), free(x), free(o0), free(o1), free(scratch), free(k), free(v);
    }
  zz_cpu_isa_set(zz_cpu_isa_best());
  zz_pool_destroy(pool);
}

void zz_test_attn_register(void) {
  CU_pSuite s = CU_add_suite("attn", NULL, NULL);
  CU_add_test(s, "fast attention vs the reference, every ISA, f32/f16/q4", test_attn_fast_vs_ref);
  CU_add_test(s, "ISA names and selection", test_attn_isa_names);
  CU_add_test(s, "a sliding window is padding that moves with the query", test_attn_window_is_padding);
  CU_add_test(s, "fused 4-bit cache attention vs the reference, every ISA, 1-3 threads", test_attn_q4_fused);
  CU_add_test(s, "fused 4-bit cache attention: the same bits behind left padding", test_attn_q4_pad_shift);
}
