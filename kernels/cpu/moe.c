/*
 * moe.c — the reference kernels (float32) of a mixture-of-experts feed-forward
 * (runtime/moe.c composes them with the linear path): the router's choice of k
 * experts per row, and the weighted scatter-add of one expert's output rows back
 * into the rows that chose it.
 */
#include <math.h>

#include "zz_kernels.h"

/* Whether value a at expert ia ranks before b at ib: the larger first (NaN the
 * largest, as torch.topk orders it); of equal values, the lower expert first. */
static bool zz_moe_before(float a, int32_t ia, float b, int32_t ib) {
  if (isnan(a) != isnan(b)) return isnan(a);
  if (a != b && !isnan(a)) return a > b;
  return ia < ib;
}

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
  /* top-k by insertion among the kept (k is small: 1 to a few dozen) */
  int64_t have = 0;
  for (int64_t e = 0; e < j->experts; e++) {
    float p = expf(x[e] - mx) / s;
    int64_t at = have;
    while (at > 0 && zz_moe_before(p, (int32_t)e, wr[at - 1], ir[at - 1])) at--;
    if (at >= k) continue;
    int64_t last = have < k ? have : k - 1;
    for (int64_t i = last; i > at; i--) {
      ir[i] = ir[i - 1];
      wr[i] = wr[i - 1];
    }
    ir[at] = (int32_t)e;
    wr[at] = p;
    if (have < k) have++;
  }
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
