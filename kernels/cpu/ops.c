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
  for (int64_t i = 0; i < n; i++) memcpy(out + i * dim, table + (int64_t)ids[i] * dim, (size_t)dim * sizeof(float));
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

void zz_cpu_layernorm(zz_pool *pool, const float *x, int64_t n, int64_t dim, const float *gamma, const float *beta,
                      float eps, float *y) {
  zz_ln_job job = {.x = x, .gamma = gamma, .beta = beta, .y = y, .dim = dim, .eps = eps};
  zz_pool_run(pool, zz_ln_row, &job, n);
}

void zz_cpu_linear(const float *x, int64_t n, int64_t in, const float *w, const float *b, int64_t out, float *y,
                   int relu) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)out, (blasint)in, 1.0f, x, (blasint)in, w,
              (blasint)in, 0.0f, y, (blasint)out);
  zz_bias_relu_cols(y, n, out, 0, out, b, relu);
}

void zz_cpu_add(const float *a, const float *b, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void zz_cpu_kv_append(const float *x, int64_t b, int64_t sq, int64_t h, float *cache, int64_t kv_stride, int64_t pos) {
  for (int64_t i = 0; i < b; i++)
    memcpy(cache + i * kv_stride + pos * h, x + i * sq * h, (size_t)(sq * h) * sizeof(float));
}
