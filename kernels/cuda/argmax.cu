/*
 * argmax.cu — greedy token choice on the device: ids[i] = first index of the maximum
 * of logits row i.
 *
 * Downloading [b, vocab] logits to pick b integers costs a PCIe round trip per step
 * (50272 * 2 bytes per sequence for OPT); this keeps greedy decoding on the GPU.
 * Ties go to the smallest index, as the CPU's zz_argmax (first maximal index).
 * A NaN never wins against a number; a row of NaNs gives its first index.
 */
#include "zz_cuda_impl.h"

namespace {

const int kThreads = 256;

/* Does candidate (vb, ib) beat (va, ia)? idx < 0 means "no candidate yet". A total
 * order, so the tree reduction gives the same answer as a left-to-right scan. */
__device__ __forceinline__ bool zz_argmax_better(float va, int ia, float vb, int ib) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  const bool na = isnan(va), nb = isnan(vb);
  if (na || nb) return na && nb ? ib < ia : na;
  return vb > va || (vb == va && ib < ia);
}

/* logits [n, vocab] halves, ids [n]; grid = n blocks of kThreads. Each thread scans
 * its stride of the row left to right, then the block reduces (value, index) pairs. */
__global__ void __launch_bounds__(kThreads)
    zz_argmax_kernel(const __half *__restrict__ logits, int vocab, int32_t *__restrict__ ids) {
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  const __half *x = logits + (int64_t)blockIdx.x * vocab;
  float best = 0.0f;
  int bi = -1;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float f = __half2float(x[j]);
    if (zz_argmax_better(best, bi, f, j)) {
      best = f;
      bi = j;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (zz_argmax_better(best, bi, ov, oi)) {
      best = ov;
      bi = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; w++)
      if (zz_argmax_better(best, bi, sv[w], si[w])) {
        best = sv[w];
        bi = si[w];
      }
    ids[blockIdx.x] = bi < 0 ? 0 : bi;
  }
}

} // namespace

extern "C" int zz_cuda_argmax(const uint16_t *logits, int64_t n, int64_t vocab, int32_t *ids,
                              void *stream) {
  if (n < 0 || !zz_cu_fits_int(vocab) || !zz_cu_fits_int(n)) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  if (vocab == 0) {
    ZZ_CU_TRY(cudaMemsetAsync(ids, 0, (size_t)n * sizeof(int32_t), st));
    return 0;
  }
  zz_argmax_kernel<<<(unsigned)n, kThreads, 0, st>>>((const __half *)logits, (int)vocab, ids);
  ZZ_CU_LAUNCHED();
  return 0;
}
