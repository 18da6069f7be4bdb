/*
 * moe.c — the reference kernels (float32) of a mixture-of-experts feed-forward
 * (runtime/moe.c composes them with the linear path): the router's choice of k
 * experts per row, and the weighted scatter-add of one expert's output rows back
 * into the rows that chose it.
 */
#include <math.h>

#include "zz_kernels.h"

typedef struct zz_route_job {
  const float *logits;
  int64_t experts, k;
  bool renorm;
  int32_t *idx;
  float *w;
} zz_route_job;

static void zz_route_row(void *arg, int64_t r) {
  const zz_route_job *j = arg;
  const float *x = j->logits + r * j->experts;
  int32_t *ir = j->idx + r * j->k;
  float *wr = j->w + r * j->k;
  int64_t k = j->k;
  /* softmax in f32 as torch computes it, exp(x - max) / sum; each probability is
   * the same expression each time it is formed, so it is not stored */
  float mx = x[0], s = 0.0f;
  for (int64_t e = 1; e < j->experts; e++) mx = x[e] > mx ? x[e] : mx;
  for (int64_t e = 0; e < j->experts; e++) s += expf(x[e] - mx);
  int64_t have = 0;
  for (int64_t e = 0; e < j->experts; e++) zz_moe_topk_offer(expf(x[e] - mx) / s, (int32_t)e, k, &have, ir, wr);
  if (!j->renorm) return;
  float t = 0.0f;
  for (int64_t i = 0; i < k; i++) t += wr[i];
  for (int64_t i = 0; i < k; i++) wr[i] /= t;
}

void zz_cpu_moe_route(zz_pool *pool, const float *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                      int32_t *idx, float *w) {
  zz_route_job job = {.logits = logits, .experts = experts, .k = k, .renorm = renorm, .idx = idx, .w = w};
  zz_pool_run(pool, zz_route_row, &job, n);
}

void zz_cpu_moe_scatter(const float *y, const int32_t *rows, const float *w, int64_t m, int64_t dim, float *out) {
  for (int64_t i = 0; i < m; i++) {
    const float *yr = y + i * dim;
    float *o = out + (int64_t)rows[i] * dim, wi = w[i];
    for (int64_t d = 0; d < dim; d++) o[d] += yr[d] * wi;
  }
}
