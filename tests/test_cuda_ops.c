/*
 * test_cuda_ops.c — every zz_cuda_* kernel against its CPU twin (zz_cpu_*, f32).
 *
 * Like ggml's test-backend-ops: fresh random inputs, rounded to f16 first so both
 * backends see the same numbers; GPU outputs poisoned with NaN (0xFFFF halves) before
 * each op, so a slot the kernel forgets to write fails; error measured per op as
 *     max |gpu - cpu| / max(1e-6, max |cpu|)
 * and passing at <= 1e-2 (f16 keeps 11 bits; the GEMMs and softmax accumulate in
 * f32). A NaN never passes. Shapes include odd sizes, b = 1, decode (sq = 1) and
 * prefill (sq > 1) with left padding, and key counts that are multiples of nothing.
 *
 * One line per op and shape, then "N passed, N failed". Exit status: 0 when all
 * pass, 1 otherwise, 77 (ctest SKIP_RETURN_CODE) without a GPU or without CUDA.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_kernels.h"

#ifndef ZZ_HAVE_CUDA

int main(void) {
  printf("no CUDA device: skipped (built without CUDA)\n");
  return 77;
}

#else

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define ZZ_TOL 1e-2

static int g_pass, g_fail;
static cudaStream_t g_stream;
static cublasHandle_t g_blas;
static zz_pool *g_pool; /* the CPU twins' threads */

/* ================================================================ helpers */

static void zz_die(const char *what, cudaError_t e) {
  fprintf(stderr, "test_cuda_ops: %s: %s\n", what, cudaGetErrorString(e));
  printf("%d passed, %d failed\n", g_pass, g_fail + 1);
  exit(1);
}

#define ZZ_T_CUDA(call)                                                                     \
  do {                                                                                     \
    cudaError_t zz_e_ = (call);                                                            \
    if (zz_e_ != cudaSuccess) zz_die(#call, zz_e_);                                        \
  } while (0)

static uint64_t g_rng = 0x243f6a8885a308d3ull;

/* splitmix64: reproducible across runs and platforms. */
static uint64_t zz_t_next(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float zz_t_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(zz_t_next() >> 11) * 0x1.0p-53);
}

static int64_t zz_t_below(int64_t n) { return (int64_t)(zz_t_next() % (uint64_t)n); }

static void *zz_t_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_cuda_ops: out of host memory\n");
    exit(1);
  }
  return p;
}

/* A host tensor of n f16 values (h) and their exact f32 images (f). */
typedef struct zz_t_half {
  uint16_t *h;
  float *f;
  int64_t n;
} zz_t_half;

static zz_t_half zz_t_half_rand(int64_t n, float lo, float hi) {
  zz_t_half t = {zz_t_malloc((size_t)n * 2), zz_t_malloc((size_t)n * 4), n};
  for (int64_t i = 0; i < n; i++) {
    t.h[i] = zz_f32_to_f16(zz_t_uniform(lo, hi));
    t.f[i] = zz_f16_to_f32(t.h[i]);
  }
  return t;
}

static void zz_t_half_free(zz_t_half *t) {
  free(t->h);
  free(t->f);
}

static void *zz_t_dev(size_t bytes) {
  void *p = NULL;
  ZZ_T_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

static void *zz_t_dev_copy(const void *host, size_t bytes) {
  void *p = zz_t_dev(bytes);
  ZZ_T_CUDA(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  return p;
}

/* All-ones bytes: NaN as f16, bf16 and f32 alike. */
static void zz_t_poison(void *dev, size_t bytes) { ZZ_T_CUDA(cudaMemset(dev, 0xff, bytes)); }

static void zz_t_fetch(void *host, const void *dev, size_t bytes) {
  ZZ_T_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* A kernel's return code, then whatever its execution reports. */
static int zz_t_finish(int rc) {
  if (rc != 0) return rc;
  return (int)cudaStreamSynchronize(g_stream);
}

/* max|got - ref| / max(1e-6, max|ref|); +inf when got has a NaN or inf where ref is
 * finite, NaN when ref itself is not finite (a broken test). */
static double zz_t_err(const float *got, const float *ref, int64_t n) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(ref[i])) return NAN;
    if (!isfinite(got[i])) return INFINITY;
    const double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff) max_diff = d;
    if (fabs((double)ref[i]) > max_ref) max_ref = fabs((double)ref[i]);
  }
  return max_diff / (max_ref > 1e-6 ? max_ref : 1e-6);
}

/* Fetches n f16 values from dev and compares them with ref. */
static double zz_t_err_f16(const void *dev, const float *ref, int64_t n) {
  uint16_t *h = zz_t_malloc((size_t)n * 2);
  float *f = zz_t_malloc((size_t)n * 4);
  zz_t_fetch(h, dev, (size_t)n * 2);
  for (int64_t i = 0; i < n; i++) f[i] = zz_f16_to_f32(h[i]);
  const double e = zz_t_err(f, ref, n);
  free(h);
  free(f);
  return e;
}

static void zz_t_report(const char *op, const char *shape, int rc, double err) {
  const int ok = rc == 0 && err <= ZZ_TOL; /* false for NaN */
  if (rc != 0)
    printf("%-11s %-58s rc=%d (%s)  FAIL\n", op, shape, rc,
           rc > 0 ? cudaGetErrorString((cudaError_t)rc) : "cuBLAS status, negated");
  else
    printf("%-11s %-58s err=%.3e  %s\n", op, shape, err, ok ? "PASS" : "FAIL");
  fflush(stdout);
  if (ok)
    g_pass++;
  else
    g_fail++;
}

static int32_t *zz_t_ids(int64_t n, int64_t rows) {
  int32_t *ids = zz_t_malloc((size_t)n * sizeof(int32_t));
  for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)zz_t_below(rows);
  return ids;
}

/* ================================================================ convert */

static size_t zz_t_esize(zz_dtype dt) { return dt == ZZ_DTYPE_F32 ? 4 : 2; }

static float zz_t_load(zz_dtype dt, const void *p, int64_t i) {
  if (dt == ZZ_DTYPE_F32) return ((const float *)p)[i];
  if (dt == ZZ_DTYPE_F16) return zz_f16_to_f32(((const uint16_t *)p)[i]);
  return zz_bf16_to_f32(((const uint16_t *)p)[i]);
}

static void zz_t_convert(zz_dtype s_dt, zz_dtype d_dt, int64_t n) {
  /* Values across the f16 range, some tiny enough for f16 subnormals. */
  float *vals = zz_t_malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    vals[i] = (i % 5 == 4) ? zz_t_uniform(-1e-5f, 1e-5f) : zz_t_uniform(-6e4f, 6e4f);
  void *src = zz_t_malloc((size_t)n * zz_t_esize(s_dt));
  zz_convert(ZZ_DTYPE_F32, vals, s_dt, src, n);
  void *ref = zz_t_malloc((size_t)n * zz_t_esize(d_dt));
  zz_convert(s_dt, src, d_dt, ref, n);

  void *d_src = zz_t_dev_copy(src, (size_t)n * zz_t_esize(s_dt));
  void *d_dst = zz_t_dev((size_t)n * zz_t_esize(d_dt));
  zz_t_poison(d_dst, (size_t)n * zz_t_esize(d_dt));
  const int rc = zz_t_finish(zz_cuda_convert(s_dt, d_src, d_dt, d_dst, n, g_stream));
  void *got = zz_t_malloc((size_t)n * zz_t_esize(d_dt));
  zz_t_fetch(got, d_dst, (size_t)n * zz_t_esize(d_dt));

  float *gf = zz_t_malloc((size_t)n * 4), *rf = zz_t_malloc((size_t)n * 4);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    gf[i] = zz_t_load(d_dt, got, i);
    rf[i] = zz_t_load(d_dt, ref, i);
    differ += memcmp((char *)got + i * zz_t_esize(d_dt), (char *)ref + i * zz_t_esize(d_dt),
                     zz_t_esize(d_dt)) != 0;
  }
  char shape[96];
  snprintf(shape, sizeof shape, "%s -> %s n=%lld (%lld values differ in bits)",
           zz_dtype_name(s_dt), zz_dtype_name(d_dt), (long long)n, (long long)differ);
  zz_t_report("convert", shape, rc, zz_t_err(gf, rf, n));

  cudaFree(d_src);
  cudaFree(d_dst);
  free(vals), free(src), free(ref), free(got), free(gf), free(rf);
}

/* ================================================================ gathers */

static void zz_t_embed(int64_t rows, int64_t dim, int64_t n) {
  zz_t_half table = zz_t_half_rand(rows * dim, -1, 1);
  int32_t *ids = zz_t_ids(n, rows);
  float *ref = zz_t_malloc((size_t)(n * dim) * 4);
  zz_cpu_embed_rows(table.f, dim, ids, n, ref);

  void *d_table = zz_t_dev_copy(table.h, (size_t)(rows * dim) * 2);
  void *d_ids = zz_t_dev_copy(ids, (size_t)n * 4);
  void *d_out = zz_t_dev((size_t)(n * dim) * 2);
  zz_t_poison(d_out, (size_t)(n * dim) * 2);
  const int rc = zz_t_finish(zz_cuda_embed_rows(d_table, dim, d_ids, n, d_out, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "table [%lld, %lld] n=%lld", (long long)rows, (long long)dim,
           (long long)n);
  zz_t_report("embed_rows", shape, rc, zz_t_err_f16(d_out, ref, n * dim));

  cudaFree(d_table), cudaFree(d_ids), cudaFree(d_out);
  zz_t_half_free(&table);
  free(ids), free(ref);
}

static void zz_t_add_rows(int64_t rows, int64_t dim, int64_t n) {
  zz_t_half table = zz_t_half_rand(rows * dim, -1, 1);
  zz_t_half x = zz_t_half_rand(n * dim, -1, 1);
  int32_t *ids = zz_t_ids(n, rows);
  float *ref = zz_t_malloc((size_t)(n * dim) * 4);
  memcpy(ref, x.f, (size_t)(n * dim) * 4);
  zz_cpu_add_rows(ref, dim, table.f, ids, n);

  void *d_table = zz_t_dev_copy(table.h, (size_t)(rows * dim) * 2);
  void *d_ids = zz_t_dev_copy(ids, (size_t)n * 4);
  void *d_x = zz_t_dev_copy(x.h, (size_t)(n * dim) * 2); /* in and out: not poisoned */
  const int rc = zz_t_finish(zz_cuda_add_rows(d_x, dim, d_table, d_ids, n, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "table [%lld, %lld] n=%lld", (long long)rows, (long long)dim,
           (long long)n);
  zz_t_report("add_rows", shape, rc, zz_t_err_f16(d_x, ref, n * dim));

  cudaFree(d_table), cudaFree(d_ids), cudaFree(d_x);
  zz_t_half_free(&table);
  zz_t_half_free(&x);
  free(ids), free(ref);
}

/* ================================================================ layernorm, add */

static void zz_t_layernorm(int64_t n, int64_t dim, int in_place) {
  /* An offset mean, as in OPT's residual stream, to catch one-pass variances. */
  zz_t_half x = zz_t_half_rand(n * dim, 2, 4);
  zz_t_half g = zz_t_half_rand(dim, 0.5f, 1.5f);
  zz_t_half b = zz_t_half_rand(dim, -0.1f, 0.1f);
  const float eps = 1e-5f;
  float *ref = zz_t_malloc((size_t)(n * dim) * 4);
  zz_cpu_layernorm(g_pool, x.f, n, dim, g.f, b.f, eps, ref);

  void *d_x = zz_t_dev_copy(x.h, (size_t)(n * dim) * 2);
  void *d_g = zz_t_dev_copy(g.h, (size_t)dim * 2);
  void *d_b = zz_t_dev_copy(b.h, (size_t)dim * 2);
  void *d_y = d_x;
  if (!in_place) {
    d_y = zz_t_dev((size_t)(n * dim) * 2);
    zz_t_poison(d_y, (size_t)(n * dim) * 2);
  }
  const int rc = zz_t_finish(zz_cuda_layernorm(d_x, n, dim, d_g, d_b, eps, d_y, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "[%lld, %lld]%s", (long long)n, (long long)dim,
           in_place ? " in place" : "");
  zz_t_report("layernorm", shape, rc, zz_t_err_f16(d_y, ref, n * dim));

  if (d_y != d_x) cudaFree(d_y);
  cudaFree(d_x), cudaFree(d_g), cudaFree(d_b);
  zz_t_half_free(&x), zz_t_half_free(&g), zz_t_half_free(&b);
  free(ref);
}

static void zz_t_add(int64_t n, int alias) {
  zz_t_half a = zz_t_half_rand(n, -1, 1), b = zz_t_half_rand(n, -1, 1);
  float *ref = zz_t_malloc((size_t)n * 4);
  zz_cpu_add(a.f, b.f, n, ref);
  void *d_a = zz_t_dev_copy(a.h, (size_t)n * 2), *d_b = zz_t_dev_copy(b.h, (size_t)n * 2);
  void *d_y = d_a;
  if (!alias) {
    d_y = zz_t_dev((size_t)n * 2);
    zz_t_poison(d_y, (size_t)n * 2);
  }
  const int rc = zz_t_finish(zz_cuda_add(d_a, d_b, n, d_y, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "n=%lld%s", (long long)n, alias ? " y = a" : "");
  zz_t_report("add", shape, rc, zz_t_err_f16(d_y, ref, n));
  if (d_y != d_a) cudaFree(d_y);
  cudaFree(d_a), cudaFree(d_b);
  zz_t_half_free(&a), zz_t_half_free(&b);
  free(ref);
}

/* ================================================================ linear */

static void zz_t_linear(int64_t n, int64_t in, int64_t out, int bias, int relu) {
  const float ws = 1.0f / sqrtf((float)in); /* keeps outputs O(1), like trained weights */
  zz_t_half x = zz_t_half_rand(n * in, -1, 1);
  zz_t_half w = zz_t_half_rand(out * in, -ws, ws);
  zz_t_half b = zz_t_half_rand(out, -0.5f, 0.5f);
  float *ref = zz_t_malloc((size_t)(n * out) * 4);
  zz_cpu_linear(x.f, n, in, w.f, bias ? b.f : NULL, out, ref, relu);

  void *d_x = zz_t_dev_copy(x.h, (size_t)(n * in) * 2);
  void *d_w = zz_t_dev_copy(w.h, (size_t)(out * in) * 2);
  void *d_b = zz_t_dev_copy(b.h, (size_t)out * 2);
  void *d_y = zz_t_dev((size_t)(n * out) * 2);
  zz_t_poison(d_y, (size_t)(n * out) * 2);
  const int rc = zz_t_finish(
      zz_cuda_linear(g_blas, d_x, n, in, d_w, bias ? d_b : NULL, out, d_y, relu, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "[%lld, %lld] x [%lld, %lld]^T%s%s", (long long)n,
           (long long)in, (long long)out, (long long)in, bias ? " + b" : "",
           relu ? " relu" : "");
  zz_t_report("linear", shape, rc, zz_t_err_f16(d_y, ref, n * out));

  cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_y);
  zz_t_half_free(&x), zz_t_half_free(&w), zz_t_half_free(&b);
  free(ref);
}

/* ================================================================ KV cache, attention */

static void zz_t_kv_append(int64_t b, int64_t sq, int64_t h, int64_t t_max, int64_t pos) {
  const int64_t stride = t_max * h, nc = b * stride;
  /* The whole cache starts random on both sides and is compared whole: rows the
   * append must not touch have to survive it. */
  zz_t_half cache = zz_t_half_rand(nc, -1, 1);
  zz_t_half x = zz_t_half_rand(b * sq * h, -1, 1);
  float *ref = zz_t_malloc((size_t)nc * 4);
  memcpy(ref, cache.f, (size_t)nc * 4);
  zz_cpu_kv_append(x.f, b, sq, h, ref, stride, pos);

  void *d_cache = zz_t_dev_copy(cache.h, (size_t)nc * 2);
  void *d_x = zz_t_dev_copy(x.h, (size_t)(b * sq * h) * 2);
  const int rc =
      zz_t_finish(zz_cuda_kv_append(d_x, b, sq, h, d_cache, stride, pos, g_stream));
  char shape[96];
  snprintf(shape, sizeof shape, "b=%lld sq=%lld h=%lld t_max=%lld pos=%lld", (long long)b,
           (long long)sq, (long long)h, (long long)t_max, (long long)pos);
  zz_t_report("kv_append", shape, rc, zz_t_err_f16(d_cache, ref, nc));

  cudaFree(d_cache), cudaFree(d_x);
  zz_t_half_free(&cache), zz_t_half_free(&x);
  free(ref);
}

/* pads: b left-padding counts. K and V hold t_max >= t rows per sequence, all
 * finite (see attention.cu on why rows j < t must be). */
static void zz_t_attention(int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads,
                           int64_t hd, int64_t t_max, const int32_t *pads) {
  const int64_t row = heads * hd, stride = t_max * row;
  zz_t_half q = zz_t_half_rand(b * sq * row, -3, 3); /* peaked enough to test the softmax */
  zz_t_half k = zz_t_half_rand(b * stride, -1, 1);
  zz_t_half v = zz_t_half_rand(b * stride, -1, 1);
  float *ref = zz_t_malloc((size_t)(b * sq * row) * 4);
  float *cpu_scratch = zz_t_malloc(zz_cpu_attention_scratch(b, heads, t) * 4);
  zz_cpu_attention(g_pool, q.f, k.f, v.f, stride, b, sq, t, q_start, heads, hd, pads, ref, cpu_scratch);

  void *d_q = zz_t_dev_copy(q.h, (size_t)(b * sq * row) * 2);
  void *d_k = zz_t_dev_copy(k.h, (size_t)(b * stride) * 2);
  void *d_v = zz_t_dev_copy(v.h, (size_t)(b * stride) * 2);
  void *d_pad = zz_t_dev_copy(pads, (size_t)b * 4);
  void *d_out = zz_t_dev((size_t)(b * sq * row) * 2);
  zz_t_poison(d_out, (size_t)(b * sq * row) * 2);
  const size_t sb = zz_cuda_attention_scratch(b, sq, t, heads);
  void *d_scratch = sb ? zz_t_dev(sb) : NULL;
  if (sb) zz_t_poison(d_scratch, sb); /* masked scores must never be read */
  const int rc = zz_t_finish(zz_cuda_attention(g_blas, d_q, d_k, d_v, stride, b, sq, t, q_start,
                                               heads, hd, d_pad, d_out, d_scratch, g_stream));
  char shape[96], pad_s[40] = "";
  for (int64_t i = 0, o = 0; i < b && o < (int64_t)sizeof pad_s - 8; i++)
    o += snprintf(pad_s + o, sizeof pad_s - (size_t)o, "%s%d", i ? "," : "", (int)pads[i]);
  snprintf(shape, sizeof shape, "%s b=%lld sq=%lld t=%lld q0=%lld h=%lldx%lld pad=%s",
           sq == 1 ? "dec" : "pre", (long long)b, (long long)sq, (long long)t,
           (long long)q_start, (long long)heads, (long long)hd, pad_s);
  zz_t_report("attention", shape, rc, zz_t_err_f16(d_out, ref, b * sq * row));

  cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_pad), cudaFree(d_out);
  if (d_scratch) cudaFree(d_scratch);
  zz_t_half_free(&q), zz_t_half_free(&k), zz_t_half_free(&v);
  free(ref), free(cpu_scratch);
}

/* ================================================================ argmax */

static void zz_t_argmax(int64_t n, int64_t vocab, int ties) {
  zz_t_half x = zz_t_half_rand(n * vocab, -8, 8);
  if (ties && vocab > 1) /* the same maximum twice per row: the first must win */
    for (int64_t i = 0; i < n; i++) {
      const int64_t a = zz_t_below(vocab), c = zz_t_below(vocab);
      x.h[i * vocab + a] = x.h[i * vocab + c] = zz_f32_to_f16(100.0f);
      x.f[i * vocab + a] = x.f[i * vocab + c] = 100.0f;
    }
  int32_t *ref = zz_t_malloc((size_t)n * 4), *got = zz_t_malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) { /* first maximal index, like zz_argmax */
    int64_t best = 0;
    for (int64_t j = 1; j < vocab; j++)
      if (x.f[i * vocab + j] > x.f[i * vocab + best]) best = j;
    ref[i] = (int32_t)best;
  }
  void *d_x = zz_t_dev_copy(x.h, (size_t)(n * vocab) * 2);
  void *d_ids = zz_t_dev((size_t)n * 4);
  zz_t_poison(d_ids, (size_t)n * 4);
  const int rc = zz_t_finish(zz_cuda_argmax(d_x, n, vocab, d_ids, g_stream));
  zz_t_fetch(got, d_ids, (size_t)n * 4);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += got[i] != ref[i];
  char shape[96];
  snprintf(shape, sizeof shape, "[%lld, %lld]%s (%lld rows wrong)", (long long)n,
           (long long)vocab, ties ? " ties" : "", (long long)wrong);
  zz_t_report("argmax", shape, rc, wrong ? 1.0 : 0.0);
  cudaFree(d_x), cudaFree(d_ids);
  zz_t_half_free(&x);
  free(ref), free(got);
}

/* ================================================================ main */

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  ZZ_T_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  ZZ_T_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(g_blas, g_stream) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "test_cuda_ops: cuBLAS initialisation failed\n");
    return 1;
  }
  if (zz_pool_create(0, &g_pool) != 0) {
    fprintf(stderr, "test_cuda_ops: cannot start the CPU threads\n");
    return 1;
  }

  const zz_dtype dts[3] = {ZZ_DTYPE_F32, ZZ_DTYPE_F16, ZZ_DTYPE_BF16};
  const int64_t conv_n[2] = {1, 100003};
  for (int s = 0; s < 3; s++)
    for (int d = 0; d < 3; d++)
      for (int c = 0; c < 2; c++) zz_t_convert(dts[s], dts[d], conv_n[c]);

  zz_t_embed(50, 33, 7);
  zz_t_embed(1000, 768, 1);
  zz_t_embed(64, 64, 130);
  zz_t_embed(10, 1, 3);
  zz_t_embed(2050, 768, 259); /* positions table, prefill of 259 tokens */

  zz_t_add_rows(50, 33, 7);
  zz_t_add_rows(2050, 768, 1);
  zz_t_add_rows(64, 64, 130);
  zz_t_add_rows(10, 1, 3);

  zz_t_layernorm(1, 7, 0);
  zz_t_layernorm(5, 768, 0);
  zz_t_layernorm(5, 768, 1);
  zz_t_layernorm(3, 12288, 0);
  zz_t_layernorm(2, 1001, 0);
  zz_t_layernorm(130, 2560, 0);

  zz_t_add(1, 0);
  zz_t_add(7, 0);
  zz_t_add(100003, 0);
  zz_t_add(1 << 20, 1);

  zz_t_linear(1, 7, 5, 0, 0);
  zz_t_linear(13, 64, 33, 1, 1);
  zz_t_linear(37, 768, 3072, 1, 0);
  zz_t_linear(37, 3072, 768, 1, 1);
  zz_t_linear(5, 1000, 1, 1, 1);
  zz_t_linear(64, 129, 257, 1, 1);
  zz_t_linear(3, 256, 50272, 0, 0); /* LM head shaped */

  zz_t_kv_append(1, 1, 768, 16, 5);
  zz_t_kv_append(3, 7, 64, 20, 0);
  zz_t_kv_append(2, 5, 13, 11, 6);
  zz_t_kv_append(4, 1, 96, 33, 32);

  /* decode (sq = 1): one fused pass, vectorised and scalar lanes */
  zz_t_attention(1, 1, 1, 0, 2, 64, 1, (const int32_t[]){0});
  zz_t_attention(3, 1, 37, 36, 4, 80, 40, (const int32_t[]){0, 5, 36});
  zz_t_attention(2, 1, 300, 299, 12, 64, 301, (const int32_t[]){0, 300}); /* 2nd sees none */
  zz_t_attention(4, 1, 1000, 999, 2, 128, 1003, (const int32_t[]){0, 17, 500, 999});
  zz_t_attention(2, 1, 19, 18, 3, 13, 23, (const int32_t[]){0, 4});
  zz_t_attention(1, 1, 50, 49, 1, 256, 50, (const int32_t[]){3});
  zz_t_attention(1, 1, 20, 10, 2, 64, 20, (const int32_t[]){0}); /* q before the last key */
  zz_t_attention(8, 1, 129, 128, 32, 128, 160, (const int32_t[]){0, 1, 2, 3, 60, 61, 62, 128});
  /* prefill (sq > 1): cuBLAS + masked softmax */
  zz_t_attention(2, 7, 7, 0, 3, 16, 7, (const int32_t[]){0, 3});
  zz_t_attention(1, 2, 2, 0, 1, 64, 2, (const int32_t[]){0});
  zz_t_attention(1, 5, 16, 11, 2, 64, 16, (const int32_t[]){2});
  zz_t_attention(3, 33, 33, 0, 12, 64, 40, (const int32_t[]){0, 10, 32});
  zz_t_attention(2, 17, 17, 0, 4, 80, 17, (const int32_t[]){1, 0});
  zz_t_attention(2, 9, 9, 0, 3, 13, 12, (const int32_t[]){0, 8});
  zz_t_attention(2, 128, 128, 0, 32, 128, 128, (const int32_t[]){0, 77});
  zz_t_attention(1, 600, 600, 0, 2, 64, 601, (const int32_t[]){5}); /* t > 2 * blockDim */

  zz_t_argmax(1, 50272, 0);
  zz_t_argmax(3, 7, 0);
  zz_t_argmax(4, 1000, 1);
  zz_t_argmax(16, 50272, 1);
  zz_t_argmax(2, 1, 0);

  printf("%d passed, %d failed\n", g_pass, g_fail);
  cublasDestroy(g_blas);
  cudaStreamDestroy(g_stream);
  zz_pool_destroy(g_pool);
  return g_fail ? 1 : 0;
}

#endif /* ZZ_HAVE_CUDA */
