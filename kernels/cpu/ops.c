/*
 * ops.c — the reference kernels (float32). Every CUDA kernel is checked against
 * these; keep them simple and exact rather than clever.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

void zz_cpu_embed_rows(const float *table, int64_t dim, const int32_t *ids, int64_t n, float *out) {
  for (int64_t i = 0; i < n; i++)
    memcpy(out + i * dim, table + (int64_t)ids[i] * dim, (size_t)dim * sizeof(float));
}

void zz_cpu_add_rows(float *x, int64_t dim, const float *table, const int32_t *ids, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float *row = table + (int64_t)ids[i] * dim;
    float *xi = x + i * dim;
    for (int64_t j = 0; j < dim; j++) xi[j] += row[j];
  }
}

typedef struct zz_ln_job {
  const float *x, *gamma, *beta;
  float *y;
  int64_t dim;
  float eps;
} zz_ln_job;

static void zz_ln_row(void *arg, int64_t i) {
  const zz_ln_job *j = arg;
  const float *x = j->x + i * j->dim;
  float *y = j->y + i * j->dim;
  /* two passes in double: the mean is subtracted before squaring, as torch does */
  double mean = 0;
  for (int64_t k = 0; k < j->dim; k++) mean += x[k];
  mean /= (double)j->dim;
  double var = 0;
  for (int64_t k = 0; k < j->dim; k++) {
    double d = x[k] - mean;
    var += d * d;
  }
  var /= (double)j->dim;
  float rstd = (float)(1.0 / sqrt(var + j->eps));
  float m = (float)mean;
  for (int64_t k = 0; k < j->dim; k++) y[k] = (x[k] - m) * rstd * j->gamma[k] + j->beta[k];
}

void zz_cpu_layernorm(zz_pool *pool, const float *x, int64_t n, int64_t dim, const float *gamma,
                      const float *beta, float eps, float *y) {
  zz_ln_job job = {x, gamma, beta, y, dim, eps};
  zz_pool_run(pool, zz_ln_row, &job, n);
}

void zz_cpu_linear(const float *x, int64_t n, int64_t in, const float *w, const float *b,
                   int64_t out, float *y, int relu) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)out, (blasint)in,
              1.0f, x, (blasint)in, w, (blasint)in, 0.0f, y, (blasint)out);
  if (!b && !relu) return;
  for (int64_t i = 0; i < n; i++) {
    float *yi = y + i * out;
    if (b)
      for (int64_t j = 0; j < out; j++) yi[j] += b[j];
    if (relu)
      for (int64_t j = 0; j < out; j++) yi[j] = yi[j] > 0 ? yi[j] : 0;
  }
}

void zz_cpu_add(const float *a, const float *b, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void zz_cpu_kv_append(const float *x, int64_t b, int64_t sq, int64_t h, float *cache,
                      int64_t kv_stride, int64_t pos) {
  for (int64_t i = 0; i < b; i++)
    memcpy(cache + i * kv_stride + pos * h, x + i * sq * h, (size_t)(sq * h) * sizeof(float));
}

typedef struct zz_attn_job {
  zz_attn_args a;
  const float *lut; /* f16 → f32 */
  size_t row_bytes; /* one position's K (or V) row of the cache */
} zz_attn_job;

/* KV head hh's part of cache row kk of sequence i as f32: a pointer into an f32
 * cache, or widened (f16) / dequantized (Q4) into buf. */
static const float *zz_kv_head(const zz_attn_job *j, const void *base, int64_t i, int64_t kk, int64_t hh,
                               float *buf) {
  const zz_attn_args *a = &j->a;
  const char *row = (const char *)base + (size_t)(i * a->seq_bytes) + (size_t)kk * j->row_bytes;
  switch (a->kv_dt) {
    case ZZ_DTYPE_F32: return (const float *)row + hh * a->hd;
    case ZZ_DTYPE_F16: {
      const uint16_t *h = (const uint16_t *)row + hh * a->hd;
      for (int64_t d = 0; d < a->hd; d++) buf[d] = j->lut[h[d]];
      return buf;
    }
    default:
      zz_q_dequantize(a->kv_q, row + (size_t)hh * zz_q_row_bytes(a->kv_q, a->hd), 1, a->hd, buf);
      return buf;
  }
}

int64_t zz_attn_keep_count(double keep, int64_t visible) {
  if (keep >= 1) return visible;
  int64_t k = (int64_t)ceil(keep * (double)visible - 1e-9);
  return k < 1 ? 1 : (k > visible ? visible : k);
}

/* The m-th largest of x[0..n) (1 <= m <= n); x is reordered. */
static float zz_mth_largest(float *x, int64_t n, int64_t m) {
  int64_t lo = 0, hi = n - 1, want = m - 1;
  while (lo < hi) {
    float pivot = x[lo + (hi - lo) / 2];
    int64_t a = lo, b = hi;
    while (a <= b) {
      while (x[a] > pivot) a++;
      while (x[b] < pivot) b--;
      if (a <= b) {
        float t = x[a];
        x[a++] = x[b];
        x[b--] = t;
      }
    }
    if (want <= b) hi = b;
    else if (want >= a) lo = a;
    else return x[want];
  }
  return x[want];
}

/* One (sequence, head) pair: every query row of that head, scores in scratch. */
static void zz_attn_task(void *arg, int64_t task) {
  const zz_attn_job *j = arg;
  const zz_attn_args *a = &j->a;
  int64_t i = task / a->heads, hh = task % a->heads;
  int64_t h = a->heads * a->hd;
  int64_t kvh = hh / (a->heads / a->kv_heads); /* the K/V head query head hh reads (grouped-query) */
  float *scores = a->scratch + 2 * task * a->t, *sel = scores + a->t;
  float buf[ZZ_ATTN_MAX_HEAD_DIM];
  const float scale = 1.0f / sqrtf((float)a->hd);
  int64_t lo = a->pad[i] > 0 ? a->pad[i] : 0;
  for (int64_t r = 0; r < a->sq; r++) {
    const float *q = a->q + (i * a->sq + r) * h + hh * a->hd;
    float *o = a->out + (i * a->sq + r) * h + hh * a->hd;
    int64_t hi = a->q_start + r; /* last visible key */
    if (hi >= a->t) hi = a->t - 1;
    memset(o, 0, (size_t)a->hd * sizeof(float));
    if (hi < lo) continue;
    float mx = -INFINITY;
    for (int64_t kk = lo; kk <= hi; kk++) {
      float s = zz_dot(q, zz_kv_head(j, a->k, i, kk, kvh, buf), a->hd) * scale;
      scores[kk] = s;
      if (s > mx) mx = s;
    }
    double sum = 0;
    for (int64_t kk = lo; kk <= hi; kk++) {
      scores[kk] = expf(scores[kk] - mx);
      sum += scores[kk];
    }
    float inv = (float)(1.0 / sum);
    /* top-k: the kept keys are those whose score reaches the m-th largest; ties
     * at the threshold are taken in key order until m are kept */
    int64_t n_vis = hi - lo + 1, m = zz_attn_keep_count(a->keep, n_vis), ties = 0;
    float thr = 0;
    if (m < n_vis) {
      memcpy(sel, scores + lo, (size_t)n_vis * sizeof(float));
      thr = zz_mth_largest(sel, n_vis, m);
      int64_t above = 0;
      for (int64_t kk = lo; kk <= hi; kk++) above += scores[kk] > thr;
      ties = m - above;
    }
    for (int64_t kk = lo; kk <= hi; kk++) {
      if (m < n_vis) {
        if (scores[kk] < thr) continue;
        if (scores[kk] == thr && ties-- <= 0) continue;
      }
      float p = scores[kk] * inv;
      const float *vr = zz_kv_head(j, a->v, i, kk, kvh, buf);
      for (int64_t d = 0; d < a->hd; d++) o[d] += p * vr[d];
    }
  }
}

void zz_cpu_attention_ex(zz_pool *pool, const zz_attn_args *a) {
  zz_attn_job job = {*a, a->kv_dt == ZZ_DTYPE_F16 ? zz_f16_table() : NULL,
                     zz_kv_row_bytes(a->kv_dt, a->kv_q, a->kv_heads, a->hd)};
  zz_pool_run(pool, zz_attn_task, &job, a->b * a->heads);
}

void zz_cpu_attention_kv(zz_pool *pool, const float *q, const void *k, const void *v, zz_dtype kv_dt, int64_t kv_stride,
                         int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                         int64_t hd, const int32_t *pad, float *out, float *scratch) {
  zz_attn_args a = {.q = q, .k = k, .v = v, .kv_dt = kv_dt, .kv_q = ZZ_QFMT_DEFAULT,
                    .seq_bytes = (int64_t)zz_dtype_nbytes(kv_dt, kv_stride), .b = b, .sq = sq, .t = t,
                    .q_start = q_start, .heads = heads, .kv_heads = kv_heads, .hd = hd, .pad = pad, .keep = 1, .out = out,
                    .scratch = scratch};
  zz_cpu_attention_ex(pool, &a);
}

void zz_cpu_attention(zz_pool *pool, const float *q, const float *k, const float *v, int64_t kv_stride,
                      int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                      int64_t hd, const int32_t *pad, float *out, float *scratch) {
  zz_cpu_attention_kv(pool, q, k, v, ZZ_DTYPE_F32, kv_stride, b, sq, t, q_start, heads, kv_heads, hd, pad, out,
                      scratch);
}

size_t zz_cpu_attention_scratch(int64_t b, int64_t heads, int64_t t) {
  return (size_t)(2 * b * heads * t); /* scores, and their copy for the top-k selection */
}
