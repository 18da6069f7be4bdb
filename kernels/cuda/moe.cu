/*
 * moe.cu — the f16 kernels of a mixture-of-experts feed-forward, f32 arithmetic
 * inside: the router's top-k (one thread per row) and one expert's weighted
 * scatter-add (grid-stride). Same contracts as kernels/cpu/moe.c.
 */
#include "zz_cuda_impl.h"

namespace {

const int kThreads = 256;
const int kMaxK = 32; /* the most experts a row may choose here */

__global__ void zz_moe_route_kernel(const __half *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                                    int32_t *idx, float *w) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (int64_t)gridDim.x * blockDim.x) {
    const __half *x = logits + r * experts;
    int32_t ir[kMaxK];
    float wr[kMaxK];
    float mx = __half2float(x[0]), s = 0.0f;
    for (int64_t e = 1; e < experts; e++) mx = fmaxf(mx, __half2float(x[e]));
    for (int64_t e = 0; e < experts; e++) s += expf(__half2float(x[e]) - mx);
    int64_t have = 0;
    for (int64_t e = 0; e < experts; e++)
      zz_moe_topk_offer(expf(__half2float(x[e]) - mx) / s, (int32_t)e, k, &have, ir, wr);
    float t = 0.0f;
    for (int64_t i = 0; i < k; i++) t += wr[i];
    for (int64_t i = 0; i < k; i++) {
      idx[r * k + i] = ir[i];
      w[r * k + i] = renorm ? wr[i] / t : wr[i];
    }
  }
}

/* out[rows[i], d] += w[i] * y[i, d]; rows distinct, so no two threads meet. */
__global__ void zz_moe_scatter_kernel(const __half *y, const int32_t *rows, const float *w, int64_t m, int64_t dim,
                                      __half *out) {
  const int64_t total = m * dim;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / dim, d = e % dim;
    __half *o = out + (int64_t)rows[i] * dim + d;
    *o = __float2half_rn(__half2float(*o) + __half2float(y[e]) * w[i]);
  }
}

} // namespace

extern "C" int zz_cuda_moe_route(const uint16_t *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                                 int32_t *idx, float *w, void *stream) {
  if (n < 0 || experts < 1 || k < 1 || k > experts || k > kMaxK) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  zz_moe_route_kernel<<<zz_cu_blocks(n, kThreads), kThreads, 0, zz_cu_stream(stream)>>>((const __half *)logits, n,
                                                                                        experts, k, renorm, idx, w);
  ZZ_CU_LAUNCHED();
  return 0;
}

extern "C" int zz_cuda_moe_scatter(const uint16_t *y, const int32_t *rows, const float *w, int64_t m, int64_t dim,
                                   uint16_t *out, void *stream) {
  if (m < 0 || dim < 0) return (int)cudaErrorInvalidValue;
  if (m == 0 || dim == 0) return 0;
  zz_moe_scatter_kernel<<<zz_cu_blocks(m * dim, kThreads), kThreads, 0, zz_cu_stream(stream)>>>(
      (const __half *)y, rows, w, m, dim, (__half *)out);
  ZZ_CU_LAUNCHED();
  return 0;
}
