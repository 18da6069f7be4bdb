/*
 * linear.cu — y[n, out] = x[n, in] · W[out, in]ᵀ (+ b) (then ReLU), f16 storage,
 * f32 accumulation.
 *
 * The GEMM is cuBLAS (cublasGemmEx, f16 A/B/C, CUBLAS_COMPUTE_32F, default algorithm,
 * which uses tensor cores on every architecture we build for). cuBLAS is column
 * major; a row-major matrix is the column-major matrix of its transpose, so the
 * row-major product y = x·Wᵀ is the column-major product yᵀ = W·xᵀ where
 *   - W row-major [out, in] reads as a column-major [in, out] with ld = in, taken
 *     with op T to give [out, in];
 *   - x row-major [n, in] reads as a column-major [in, n] with ld = in, op N;
 *   - y row-major [n, out] is the column-major [out, n] with ld = out.
 * No copy or transpose of the weight is ever made: the Hugging Face layout is used
 * as it lies on the device.
 *
 * Bias and ReLU run as one small element-wise kernel after the GEMM (one extra read
 * and write of y, against the GEMM reading all of W, which dominates at decode).
 */
#include "zz_cuda_impl.h"

namespace {

const int kThreads = 256;

/* y [n, out] halves, b [out] halves or NULL; relu != 0 clamps at zero after the
 * bias. The sum is taken in f32 and rounded once. */
__global__ void zz_bias_relu_kernel(__half *__restrict__ y, int64_t n, int64_t out, const __half *__restrict__ b,
                                    int relu) {
  const int64_t total = n * out;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    float v = __half2float(y[e]);
    if (b) v += __half2float(b[e % out]);
    if (relu) v = fmaxf(v, 0.0f);
    y[e] = __float2half_rn(v);
  }
}

/* Same on half2 units: y [n, out2] half2, b [out2] half2 or NULL (out even). */
__global__ void zz_bias_relu2_kernel(__half2 *__restrict__ y, int64_t n, int64_t out2, const __half2 *__restrict__ b,
                                     int relu) {
  const int64_t total = n * out2;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    float2 v = __half22float2(y[e]);
    if (b) {
      const float2 bb = __half22float2(b[e % out2]);
      v.x += bb.x;
      v.y += bb.y;
    }
    if (relu) {
      v.x = fmaxf(v.x, 0.0f);
      v.y = fmaxf(v.y, 0.0f);
    }
    y[e] = __floats2half2_rn(v.x, v.y);
  }
}

} // namespace

extern "C" int zz_cuda_linear(void *cublas, const uint16_t *x, int64_t n, int64_t in, const uint16_t *w,
                              const uint16_t *b, int64_t out, uint16_t *y, int relu, void *stream) {
  if (!zz_cu_fits_int(n) || !zz_cu_fits_int(in) || !zz_cu_fits_int(out)) return -(int)CUBLAS_STATUS_INVALID_VALUE;
  if (n == 0 || out == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  if (in == 0) {
    /* An empty sum: cuBLAS would leave y alone, the contract says zeros. */
    ZZ_CU_TRY(cudaMemsetAsync(y, 0, (size_t)(n * out) * 2, st));
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    ZZ_CUBLAS_TRY(cublasGemmEx((cublasHandle_t)cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &alpha, w,
                               CUDA_R_16F, (int)in, x, CUDA_R_16F, (int)in, &beta, y, CUDA_R_16F, (int)out,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  if (!b && !relu) return 0;
  const bool pairs = out % 2 == 0 && (((uintptr_t)y | (uintptr_t)b) & 3) == 0;
  if (pairs) {
    zz_bias_relu2_kernel<<<zz_cu_blocks(n * out / 2, kThreads), kThreads, 0, st>>>((__half2 *)y, n, out / 2,
                                                                                   (const __half2 *)b, relu);
  } else {
    zz_bias_relu_kernel<<<zz_cu_blocks(n * out, kThreads), kThreads, 0, st>>>((__half *)y, n, out, (const __half *)b,
                                                                              relu);
  }
  ZZ_CU_LAUNCHED();
  return 0;
}
