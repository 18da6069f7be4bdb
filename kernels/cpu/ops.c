/*
 * ops.c — the reference kernels (float32). Every CUDA kernel is checked against
 * these; keep them simple and exact rather than clever.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

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
  const float *q;
  const void *k, *v;
  zz_dtype kv_dt;
  const float *lut; /* f16 → f32 when kv_dt is f16 */
  const int32_t *pad;
  float *out, *scratch;
  int64_t kv_stride, sq, t, q_start, heads, kv_heads, hd;
} zz_attn_job;

/* Eight independent partial sums: the compiler may vectorise them without
 * reassociating one long float chain (which it must not do on its own). */
static inline float zz_dot(const float *a, const float *b, int64_t n) {
  float acc[8] = {0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int u = 0; u < 8; u++) acc[u] += a[d + u] * b[d + u];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; d < n; d++) s += a[d] * b[d];
  return s;
}

static inline float zz_kv_at(const zz_attn_job *j, const void *base, int64_t idx) {
  return j->kv_dt == ZZ_DTYPE_F16 ? j->lut[((const uint16_t *)base)[idx]] : ((const float *)base)[idx];
}

/* One (sequence, head) pair: every query row of that head, scores in scratch. */
static void zz_attn_task(void *arg, int64_t task) {
  const zz_attn_job *j = arg;
  int64_t i = task / j->heads, hh = task % j->heads;
  int64_t h = j->heads * j->hd, kvw = j->kv_heads * j->hd; /* q row, K/V row */
  float *scores = j->scratch + task * j->t;
  const float scale = 1.0f / sqrtf((float)j->hd);
  /* element index of key 0 of this query head's K/V head (grouped-query attention) */
  int64_t kb = i * j->kv_stride + hh / (j->heads / j->kv_heads) * j->hd;
  int64_t lo = j->pad[i] > 0 ? j->pad[i] : 0;
  for (int64_t r = 0; r < j->sq; r++) {
    const float *q = j->q + (i * j->sq + r) * h + hh * j->hd;
    float *o = j->out + (i * j->sq + r) * h + hh * j->hd;
    int64_t hi = j->q_start + r; /* last visible key */
    if (hi >= j->t) hi = j->t - 1;
    memset(o, 0, (size_t)j->hd * sizeof(float));
    if (hi < lo) continue;
    float mx = -INFINITY;
    for (int64_t kk = lo; kk <= hi; kk++) {
      float s = 0;
      if (j->kv_dt == ZZ_DTYPE_F32) {
        s = zz_dot(q, (const float *)j->k + kb + kk * kvw, j->hd);
      } else {
        for (int64_t d = 0; d < j->hd; d++) s += q[d] * zz_kv_at(j, j->k, kb + kk * kvw + d);
      }
      s *= scale;
      scores[kk] = s;
      if (s > mx) mx = s;
    }
    double sum = 0;
    for (int64_t kk = lo; kk <= hi; kk++) {
      scores[kk] = expf(scores[kk] - mx);
      sum += scores[kk];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t kk = lo; kk <= hi; kk++) {
      float p = scores[kk] * inv;
      if (j->kv_dt == ZZ_DTYPE_F32) {
        const float *vr = (const float *)j->v + kb + kk * kvw;
        for (int64_t d = 0; d < j->hd; d++) o[d] += p * vr[d];
      } else {
        for (int64_t d = 0; d < j->hd; d++) o[d] += p * zz_kv_at(j, j->v, kb + kk * kvw + d);
      }
    }
  }
}

void zz_cpu_attention_kv(zz_pool *pool, const float *q, const void *k, const void *v, zz_dtype kv_dt, int64_t kv_stride,
                         int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                         int64_t hd, const int32_t *pad, float *out, float *scratch) {
  zz_attn_job job = {q, k, v, kv_dt, kv_dt == ZZ_DTYPE_F16 ? zz_f16_table() : NULL, pad, out, scratch,
                     kv_stride, sq, t, q_start, heads, kv_heads, hd};
  zz_pool_run(pool, zz_attn_task, &job, b * heads);
}

void zz_cpu_attention(zz_pool *pool, const float *q, const float *k, const float *v, int64_t kv_stride,
                      int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                      int64_t hd, const int32_t *pad, float *out, float *scratch) {
  zz_cpu_attention_kv(pool, q, k, v, ZZ_DTYPE_F32, kv_stride, b, sq, t, q_start, heads, kv_heads, hd, pad, out,
                      scratch);
}

size_t zz_cpu_attention_scratch(int64_t b, int64_t heads, int64_t t) {
  return (size_t)(b * heads * t);
}
