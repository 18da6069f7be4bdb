/*
 * layernorm.cu — LayerNorm over the last dimension, f16 in and out, f32 statistics.
 *
 * One block per row. The mean and the variance are two separate passes (the
 * variance sums (x - mean)², never E[x²] - mean²): OPT's residual stream carries
 * rows whose mean is large next to their spread, and the one-pass formula loses the
 * variance to cancellation there. Rows are at most a few tens of KiB, so the second
 * and third reads hit L1/L2.
 */
#include "zz_cuda_impl.h"

namespace {

/* x [n, dim], y [n, dim] (y may alias x: every thread reads its elements before it
 * writes them, and the last write pass starts after both reductions' barriers);
 * gamma, beta [dim] (NULL: 1 and 0). grid = n blocks, blockDim a multiple of 32. */
__global__ void zz_layernorm_kernel(const __half *x, int64_t dim, const __half *gamma, const __half *beta, float eps,
                                    __half *y) {
  __shared__ float shm[32];
  const __half *xr = x + (int64_t)blockIdx.x * dim;
  __half *yr = y + (int64_t)blockIdx.x * dim;

  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) s += __half2float(xr[j]);
  const float mean = zz_block_sum(s, shm) / (float)dim;

  float v = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const float d = __half2float(xr[j]) - mean;
    v += d * d;
  }
  const float rstd = rsqrtf(zz_block_sum(v, shm) / (float)dim + eps);

  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const float g = gamma ? __half2float(gamma[j]) : 1.0f;
    const float b = beta ? __half2float(beta[j]) : 0.0f;
    yr[j] = __float2half_rn((__half2float(xr[j]) - mean) * rstd * g + b);
  }
}

} // namespace

extern "C" int zz_cuda_layernorm(const uint16_t *x, int64_t n, int64_t dim, const uint16_t *gamma, const uint16_t *beta,
                                 float eps, uint16_t *y, void *stream) {
  if (n < 0 || dim < 0 || n > 2147483647) return (int)cudaErrorInvalidValue;
  if (n == 0 || dim == 0) return 0;
  const int threads = zz_cu_row_threads(dim);
  zz_layernorm_kernel<<<(unsigned)n, threads, 0, zz_cu_stream(stream)>>>((const __half *)x, dim, (const __half *)gamma,
                                                                         (const __half *)beta, eps, (__half *)y);
  ZZ_CU_LAUNCHED();
  return 0;
}
