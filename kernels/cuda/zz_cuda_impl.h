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
#define ZZ_CU_TRY(call)                                                                                                \
  do {                                                                                                                 \
    cudaError_t zz_cu_err_ = (call);                                                                                   \
    if (zz_cu_err_ != cudaSuccess) return (int)zz_cu_err_;                                                             \
  } while (0)

/* Returns minus the cublasStatus_t of `call` when it is not CUBLAS_STATUS_SUCCESS. */
#define ZZ_CUBLAS_TRY(call)                                                                                            \
  do {                                                                                                                 \
    cublasStatus_t zz_cb_st_ = (call);                                                                                 \
    if (zz_cb_st_ != CUBLAS_STATUS_SUCCESS) return -(int)zz_cb_st_;                                                    \
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

/* Threads of a block that reduces one row of dim elements (the norms): enough that
 * each handles a handful (8) of elements, from 64 up to the 1024 a block allows. */
static inline int zz_cu_row_threads(int64_t dim) {
  int threads = 64;
  while (threads < 1024 && (int64_t)threads * 8 < dim) threads *= 2;
  return threads;
}

/* ---------------------------------------------------------------- reductions */

/* Sum and maximum share one shuffle tree and one block step; only the operation
 * and its identity differ. */
struct zz_sum_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct zz_max_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename Op>
__device__ __forceinline__ float zz_warp_reduce(float v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float zz_warp_sum(float v) { return zz_warp_reduce(v, zz_sum_op()); }
__device__ __forceinline__ float zz_warp_max(float v) { return zz_warp_reduce(v, zz_max_op()); }

/* op over the block, returned to every thread; identity fills the lanes past the
 * last warp. shm: 32 floats of shared memory. blockDim.x must be a multiple of 32.
 * Ends with a barrier, so shm may be reused (and global memory the block read may
 * be overwritten) right after. */
template <typename Op>
__device__ __forceinline__ float zz_block_reduce(float v, float *shm, float identity, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = zz_warp_reduce(v, op);
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shm[lane] : identity;
  v = zz_warp_reduce(v, op);
  __syncthreads();
  return v;
}

/* Sum over the block (zz_block_reduce's rules). */
__device__ __forceinline__ float zz_block_sum(float v, float *shm) {
  return zz_block_reduce(v, shm, 0.0f, zz_sum_op());
}

/* Maximum over the block (zz_block_reduce's rules). */
__device__ __forceinline__ float zz_block_max(float v, float *shm) {
  return zz_block_reduce(v, shm, -INFINITY, zz_max_op());
}

#endif /* ZZ_CUDA_IMPL_H */
