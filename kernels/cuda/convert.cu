/*
 * convert.cu — dtype conversion on the GPU (f32, f16, bf16).
 *
 * Used by the CUDA device to turn uploaded f32/bf16 data into the f16 compute
 * dtype (and back for downloads) without spending host cycles: the host side of an
 * offloading run is busy reading the disk tier and running CPU attention.
 */
#include "zz_cuda_impl.h"

namespace {

/* bf16 by hand rather than through cuda_bf16.h: the bit recipe is the same as the
 * CPU's zz_f32_to_bf16 (round to nearest even, NaN stays a quiet NaN), so both
 * backends store identical bits, and it needs no sm_80 instruction on sm_75. */
__device__ __forceinline__ float zz_bf16_load(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t zz_bf16_store(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

template <zz_dtype DT>
struct zz_elem;
template <>
struct zz_elem<ZZ_DTYPE_F32> {
  typedef float t;
  static __device__ __forceinline__ float load(float v) { return v; }
  static __device__ __forceinline__ float store(float f) { return f; }
};
template <>
struct zz_elem<ZZ_DTYPE_F16> {
  typedef __half t;
  static __device__ __forceinline__ float load(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half store(float f) { return __float2half_rn(f); }
};
template <>
struct zz_elem<ZZ_DTYPE_BF16> {
  typedef uint16_t t;
  static __device__ __forceinline__ float load(uint16_t v) { return zz_bf16_load(v); }
  static __device__ __forceinline__ uint16_t store(float f) { return zz_bf16_store(f); }
};

/* src [n] of SRC, dst [n] of DST; grid-stride over n. Every pair goes through f32,
 * which holds f16 and bf16 exactly, so one rounding happens at most. */
template <zz_dtype SRC, zz_dtype DST>
__global__ void zz_convert_kernel(const typename zz_elem<SRC>::t *__restrict__ src,
                                  typename zz_elem<DST>::t *__restrict__ dst, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = zz_elem<DST>::store(zz_elem<SRC>::load(src[i]));
}

template <zz_dtype SRC, zz_dtype DST>
int zz_convert_launch(const void *src, void *dst, int64_t n, cudaStream_t st) {
  const int threads = 256;
  zz_convert_kernel<SRC, DST><<<zz_cu_blocks(n, threads), threads, 0, st>>>((const typename zz_elem<SRC>::t *)src,
                                                                            (typename zz_elem<DST>::t *)dst, n);
  ZZ_CU_LAUNCHED();
  return 0;
}

size_t zz_elem_size(zz_dtype dt) { return dt == ZZ_DTYPE_F32 ? 4 : 2; }

} // namespace

extern "C" int zz_cuda_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n, void *stream) {
  cudaStream_t st = zz_cu_stream(stream);
  const bool src_ok = src_dt == ZZ_DTYPE_F32 || src_dt == ZZ_DTYPE_F16 || src_dt == ZZ_DTYPE_BF16;
  const bool dst_ok = dst_dt == ZZ_DTYPE_F32 || dst_dt == ZZ_DTYPE_F16 || dst_dt == ZZ_DTYPE_BF16;
  if (!src_ok || !dst_ok || n < 0) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  if (src_dt == dst_dt) {
    if (src != dst)
      ZZ_CU_TRY(cudaMemcpyAsync(dst, src, (size_t)n * zz_elem_size(src_dt), cudaMemcpyDeviceToDevice, st));
    return 0;
  }
#define ZZ_CONVERT_CASE(S, D)                                                                                          \
  if (src_dt == S && dst_dt == D) return zz_convert_launch<S, D>(src, dst, n, st)
  ZZ_CONVERT_CASE(ZZ_DTYPE_F32, ZZ_DTYPE_F16);
  ZZ_CONVERT_CASE(ZZ_DTYPE_F32, ZZ_DTYPE_BF16);
  ZZ_CONVERT_CASE(ZZ_DTYPE_F16, ZZ_DTYPE_F32);
  ZZ_CONVERT_CASE(ZZ_DTYPE_F16, ZZ_DTYPE_BF16);
  ZZ_CONVERT_CASE(ZZ_DTYPE_BF16, ZZ_DTYPE_F32);
  ZZ_CONVERT_CASE(ZZ_DTYPE_BF16, ZZ_DTYPE_F16);
#undef ZZ_CONVERT_CASE
  return (int)cudaErrorInvalidValue;
}
