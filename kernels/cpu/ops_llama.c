/*
 * ops_llama.c — the reference kernels (float32) LLaMA-family models add: RMSNorm,
 * rotary position embeddings and the SiLU gate of the SwiGLU MLP, as Hugging
 * Face's LlamaForCausalLM computes them in float32.
 */
#include <math.h>

#include "zz_kernels.h"

typedef struct zz_rms_job {
  const float *x, *gamma;
  float *y;
  int64_t dim;
  float eps;
} zz_rms_job;

static void zz_rms_row(void *arg, int64_t i) {
  const zz_rms_job *j = arg;
  const float *x = j->x + i * j->dim;
  float *y = j->y + i * j->dim;
  double ss = 0;
  for (int64_t k = 0; k < j->dim; k++) ss += (double)x[k] * x[k];
  /* HF: x * rsqrt(mean(x²) + eps), then gamma * that */
  float r = (float)(1.0 / sqrt((double)(float)(ss / (double)j->dim) + j->eps));
  for (int64_t k = 0; k < j->dim; k++) y[k] = j->gamma[k] * (x[k] * r);
}

void zz_cpu_rmsnorm(zz_pool *pool, const float *x, int64_t n, int64_t dim, const float *gamma, float eps, float *y) {
  zz_rms_job job = {.x = x, .gamma = gamma, .y = y, .dim = dim, .eps = eps};
  zz_pool_run(pool, zz_rms_row, &job, n);
}

void zz_cpu_rope(float *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos, const zz_rope *rope) {
  int64_t half = zz_rope_dims(rope, hd) / 2; /* the dims past 2 * half pass as they are */
  const float scale = zz_rope_scale(rope);
  for (int64_t d = 0; d < half; d++) {
    const float inv[2] = {zz_rope_inv_freq_at(rope, d, 2 * half, false), zz_rope_inv_freq_at(rope, d, 2 * half, true)};
    for (int64_t i = 0; i < n; i++) {
      float a = inv[zz_rope_long(rope, pos, i)] * (float)pos[i]; /* float32 product, as HF's matmul of one term */
      float c = cosf(a), s = sinf(a);
      if (scale != 1.0f) c *= scale, s *= scale; /* longrope: cos and sin times its attention factor */
      for (int64_t h = 0; h < heads; h++) {
        float *p = x + i * heads * hd + h * hd;
        float x0 = p[d], x1 = p[d + half];
        p[d] = x0 * c - x1 * s;
        p[d + half] = x1 * c + x0 * s;
      }
    }
  }
}

void zz_cpu_silu_mul(const float *g, const float *u, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
