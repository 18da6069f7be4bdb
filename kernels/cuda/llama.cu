/*
 * llama.cu — the f16 kernels LLaMA-family models add, f32 arithmetic inside:
 * RMSNorm (one block per row), rotary embeddings in place (one thread per rotary
 * pair), and the SiLU gate of the SwiGLU MLP (grid-stride). Same contracts as the
 * CPU reference in kernels/cpu/ops_llama.c; the inverse frequencies come from the
 * one formula both share (zz_rope_inv_freq in zz_kernels.h).
 */
#include "zz_cuda_impl.h"

namespace {

const int kThreads = 256;

/* x, y [n, dim] (y may alias x: the write pass starts after the reduction's
 * barrier); gamma [dim]. grid = n blocks, blockDim a multiple of 32. */
__global__ void zz_rmsnorm_kernel(const __half *x, int64_t dim, const __half *gamma, float eps, __half *y) {
  __shared__ float shm[32];
  const __half *xr = x + (int64_t)blockIdx.x * dim;
  __half *yr = y + (int64_t)blockIdx.x * dim;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const float v = __half2float(xr[j]);
    s += v * v;
  }
  const float r = rsqrtf(zz_block_sum(s, shm) / (float)dim + eps);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    yr[j] = __float2half_rn(__half2float(gamma[j]) * (__half2float(xr[j]) * r));
}

/* x [n, heads*hd] in place; pos [n]. One thread per (row, head, pair d < rot/2);
 * the dims past rot (partial rotary) pass as they are. */
__global__ void zz_rope_kernel(__half *x, int64_t n, int64_t heads, int64_t hd, const int32_t *__restrict__ pos,
                               zz_rope rope) {
  const int64_t half = zz_rope_dims(&rope, hd) / 2, total = n * heads * half;
  const float scale = zz_rope_scale(&rope);
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t d = e % half, rh = e / half; /* rh = row * heads + head */
    const int64_t row = rh / heads;
    const float a = zz_rope_inv_freq_at(&rope, d, 2 * half, zz_rope_long(&rope, pos, row)) * (float)pos[row];
    float s, c;
    sincosf(a, &s, &c);
    c *= scale, s *= scale;
    __half *p = x + rh * hd;
    const float x0 = __half2float(p[d]), x1 = __half2float(p[d + half]);
    p[d] = __float2half_rn(x0 * c - x1 * s);
    p[d + half] = __float2half_rn(x1 * c + x0 * s);
  }
}

__global__ void zz_silu_mul_kernel(const __half *g, const __half *u, int64_t n, __half *y) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    const float gv = __half2float(g[e]);
    y[e] = __float2half_rn(gv / (1.0f + __expf(-gv)) * __half2float(u[e]));
  }
}

} // namespace

extern "C" int zz_cuda_rmsnorm(const uint16_t *x, int64_t n, int64_t dim, const uint16_t *gamma, float eps, uint16_t *y,
                               void *stream) {
  if (n < 0 || dim < 0 || n > 2147483647) return (int)cudaErrorInvalidValue;
  if (n == 0 || dim == 0) return 0;
  const int threads = zz_cu_row_threads(dim);
  zz_rmsnorm_kernel<<<(unsigned)n, threads, 0, zz_cu_stream(stream)>>>((const __half *)x, dim, (const __half *)gamma,
                                                                       eps, (__half *)y);
  ZZ_CU_LAUNCHED();
  return 0;
}

extern "C" int zz_cuda_rope(uint16_t *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos, const zz_rope *rope,
                            void *stream) {
  if (n < 0 || heads < 0 || hd < 0 || hd % 2 != 0 || !rope) return (int)cudaErrorInvalidValue;
  const int64_t total = n * heads * (zz_rope_dims(rope, hd) / 2);
  if (total == 0) return 0;
  zz_rope_kernel<<<zz_cu_blocks(total, kThreads), kThreads, 0, zz_cu_stream(stream)>>>((__half *)x, n, heads, hd, pos,
                                                                                       *rope);
  ZZ_CU_LAUNCHED();
  return 0;
}

extern "C" int zz_cuda_silu_mul(const uint16_t *g, const uint16_t *u, int64_t n, uint16_t *y, void *stream) {
  if (n < 0) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  zz_silu_mul_kernel<<<zz_cu_blocks(n, kThreads), kThreads, 0, zz_cu_stream(stream)>>>(
      (const __half *)g, (const __half *)u, n, (__half *)y);
  ZZ_CU_LAUNCHED();
  return 0;
}
