/*
 * zz_cuda_impl.h — helpers shared by the CUDA kernels of zigzag (the .cu files of kernels/cuda).
 *
 * Internal: included only by .cu files, never by C code. It holds the return-code
 * convention of every zz_cuda_* function, launch-shape helpers and the warp/block
 * reductions the kernels share.
 *
 * Return codes of zz_cuda_* (an int, so that C callers need no CUDA header):
 *     0        success
 *     > 0      a cudaError_t (a launch, a copy, or a sticky earlier error)
 *     < 0      minus a cublasStatus_t (only the functions that call cuBLAS)
 * cudaError_t values are all positive and cublasStatus_t values too, so negating the
 * cuBLAS ones keeps one int unambiguous; runtime/device_cuda.c decodes it.
 */
#ifndef ZZ_CUDA_IMPL_H
#define ZZ_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "zz_kernels.h"

/* Returns the cudaError_t of `call` as an int when it is not cudaSuccess. */
#define ZZ_CU_TRY(call)                                                                     \
  do {                                                                                     \
    cudaError_t zz_cu_err_ = (call);                                                       \
    if (zz_cu_err_ != cudaSuccess) return (int)zz_cu_err_;                                 \
  } while (0)

/* Returns minus the cublasStatus_t of `call` when it is not CUBLAS_STATUS_SUCCESS. */
#define ZZ_CUBLAS_TRY(call)                                                                 \
  do {                                                                                     \
    cublasStatus_t zz_cb_st_ = (call);                                                     \
    if (zz_cb_st_ != CUBLAS_STATUS_SUCCESS) return -(int)zz_cb_st_;                        \
  } while (0)

/* After a <<<>>> launch: a bad configuration shows up here, not at the launch. */
#define ZZ_CU_LAUNCHED() ZZ_CU_TRY(cudaGetLastError())

static inline cudaStream_t zz_cu_stream(void *stream) { return (cudaStream_t)stream; }

/* Blocks for a grid-stride loop over n elements: enough to fill any GPU of this
 * decade several times over, few enough that no block is launched to do nothing. */
static inline unsigned zz_cu_blocks(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65536) blocks = 65536;
  if (blocks < 1) blocks = 1;
  return (unsigned)blocks;
}

static inline bool zz_cu_fits_int(int64_t v) { return v >= 0 && v <= 2147483647; }

/* ---------------------------------------------------------------- reductions */

__device__ __forceinline__ float zz_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float zz_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Sum over the block, returned to every thread. shm: 32 floats of shared memory.
 * blockDim.x must be a multiple of 32. Ends with a barrier, so shm may be reused
 * (and global memory the block read may be overwritten) right after. */
__device__ __forceinline__ float zz_block_sum(float v, float *shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = zz_warp_sum(v);
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shm[lane] : 0.0f;
  v = zz_warp_sum(v);
  __syncthreads();
  return v;
}

/* Maximum over the block, returned to every thread; same rules as zz_block_sum. */
__device__ __forceinline__ float zz_block_max(float v, float *shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = zz_warp_max(v);
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shm[lane] : -INFINITY;
  v = zz_warp_max(v);
  __syncthreads();
  return v;
}

#endif /* ZZ_CUDA_IMPL_H */
