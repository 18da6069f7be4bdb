/*
 * elementwise.cu — the memory-bound f16 kernels: embedding gathers, residual adds and
 * the KV-cache append.
 *
 * Each kernel is a grid-stride loop. Copies move the widest unit (16, 4 or 2 bytes)
 * that divides every row length and every base address, because these kernels are
 * limited by memory transactions, not by arithmetic. Additions go through f32 and
 * round once to f16, as the CPU reference (f32) then a cast to f16 would.
 */
#include "zz_cuda_impl.h"

namespace {

const int kThreads = 256;

/* The widest copy unit (bytes) dividing `elems` f16 elements and every pointer. */
int zz_copy_unit(int64_t elems, uintptr_t addr_bits) {
  const int64_t bytes = elems * 2;
  if (bytes % 16 == 0 && (addr_bits & 15) == 0) return 16;
  if (bytes % 4 == 0 && (addr_bits & 3) == 0) return 4;
  return 2;
}

/* ---------------------------------------------------------------- embed_rows */

/* table [rows, dim_u] units, ids [n], out [n, dim_u] units; a unit is U (1, 2 or 8
 * halves). One element of the grid-stride loop moves one unit. */
template <typename U>
__global__ void zz_embed_rows_kernel(const U *__restrict__ table, int64_t dim_u, const int32_t *__restrict__ ids,
                                     int64_t n, U *__restrict__ out) {
  const int64_t total = n * dim_u;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = e / dim_u, col = e - row * dim_u;
    out[e] = table[(int64_t)ids[row] * dim_u + col];
  }
}

template <typename U>
int zz_embed_rows_launch(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out,
                         cudaStream_t st) {
  const int64_t dim_u = dim * 2 / (int64_t)sizeof(U);
  zz_embed_rows_kernel<U>
      <<<zz_cu_blocks(n * dim_u, kThreads), kThreads, 0, st>>>((const U *)table, dim_u, ids, n, (U *)out);
  ZZ_CU_LAUNCHED();
  return 0;
}

/* ---------------------------------------------------------------- add_rows */

/* x [n, dim] (in and out), table [rows, dim], ids [n]; scalar halves. */
__global__ void zz_add_rows_kernel(__half *__restrict__ x, int64_t dim, const __half *__restrict__ table,
                                   const int32_t *__restrict__ ids, int64_t n) {
  const int64_t total = n * dim;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = e / dim, col = e - row * dim;
    const float s = __half2float(x[e]) + __half2float(table[(int64_t)ids[row] * dim + col]);
    x[e] = __float2half_rn(s);
  }
}

/* Same with half2 units: x [n, dim2] half2, table [rows, dim2] half2 (dim even). */
__global__ void zz_add_rows2_kernel(__half2 *__restrict__ x, int64_t dim2, const __half2 *__restrict__ table,
                                    const int32_t *__restrict__ ids, int64_t n) {
  const int64_t total = n * dim2;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = e / dim2, col = e - row * dim2;
    const float2 a = __half22float2(x[e]);
    const float2 b = __half22float2(table[(int64_t)ids[row] * dim2 + col]);
    x[e] = __floats2half2_rn(a.x + b.x, a.y + b.y);
  }
}

/* ---------------------------------------------------------------- add */

/* a, b, y [n] halves; y may alias a or b (each element is read before it is
 * written, by the same thread), hence no __restrict__. */
__global__ void zz_add_kernel(const __half *a, const __half *b, int64_t n, __half *y) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = __float2half_rn(__half2float(a[i]) + __half2float(b[i]));
}

/* a, b, y [n2] half2; same aliasing rule. */
__global__ void zz_add2_kernel(const __half2 *a, const __half2 *b, int64_t n2, __half2 *y) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += (int64_t)gridDim.x * blockDim.x) {
    const float2 fa = __half22float2(a[i]), fb = __half22float2(b[i]);
    y[i] = __floats2half2_rn(fa.x + fb.x, fa.y + fb.y);
  }
}

/* ---------------------------------------------------------------- kv_append */

/* x [b, sq*h_u] units (the new rows of each sequence, contiguous); cache: sequence i
 * starts at i*stride_u units and row pos of it at off_u = pos*h_u units. The new
 * rows of one sequence land contiguously, so a sequence is one run of sq*h_u units. */
template <typename U>
__global__ void zz_kv_append_kernel(const U *__restrict__ x, int64_t b, int64_t run_u, U *__restrict__ cache,
                                    int64_t stride_u, int64_t off_u) {
  const int64_t total = b * run_u;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / run_u, r = e - i * run_u;
    cache[i * stride_u + off_u + r] = x[e];
  }
}

template <typename U>
int zz_kv_append_launch(const uint16_t *x, int64_t b, int64_t run, uint16_t *cache, int64_t stride, int64_t off,
                        cudaStream_t st) {
  const int64_t per = (int64_t)sizeof(U) / 2;
  zz_kv_append_kernel<U><<<zz_cu_blocks(b * (run / per), kThreads), kThreads, 0, st>>>(
      (const U *)x, b, run / per, (U *)cache, stride / per, off / per);
  ZZ_CU_LAUNCHED();
  return 0;
}

} // namespace

/* ---------------------------------------------------------------- C entry points */

extern "C" int zz_cuda_embed_rows(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out,
                                  void *stream) {
  if (dim < 0 || n < 0) return (int)cudaErrorInvalidValue;
  if (dim == 0 || n == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  switch (zz_copy_unit(dim, (uintptr_t)table | (uintptr_t)out)) {
    case 16: return zz_embed_rows_launch<uint4>(table, dim, ids, n, out, st);
    case 4: return zz_embed_rows_launch<uint32_t>(table, dim, ids, n, out, st);
    default: return zz_embed_rows_launch<uint16_t>(table, dim, ids, n, out, st);
  }
}

extern "C" int zz_cuda_add_rows(uint16_t *x, int64_t dim, const uint16_t *table, const int32_t *ids, int64_t n,
                                void *stream) {
  if (dim < 0 || n < 0) return (int)cudaErrorInvalidValue;
  if (dim == 0 || n == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  if (zz_copy_unit(dim, (uintptr_t)x | (uintptr_t)table) >= 4) {
    const int64_t dim2 = dim / 2;
    zz_add_rows2_kernel<<<zz_cu_blocks(n * dim2, kThreads), kThreads, 0, st>>>((__half2 *)x, dim2,
                                                                               (const __half2 *)table, ids, n);
  } else {
    zz_add_rows_kernel<<<zz_cu_blocks(n * dim, kThreads), kThreads, 0, st>>>((__half *)x, dim, (const __half *)table,
                                                                             ids, n);
  }
  ZZ_CU_LAUNCHED();
  return 0;
}

extern "C" int zz_cuda_add(const uint16_t *a, const uint16_t *b, int64_t n, uint16_t *y, void *stream) {
  if (n < 0) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  if (zz_copy_unit(n, (uintptr_t)a | (uintptr_t)b | (uintptr_t)y) >= 4) {
    zz_add2_kernel<<<zz_cu_blocks(n / 2, kThreads), kThreads, 0, st>>>((const __half2 *)a, (const __half2 *)b, n / 2,
                                                                       (__half2 *)y);
  } else {
    zz_add_kernel<<<zz_cu_blocks(n, kThreads), kThreads, 0, st>>>((const __half *)a, (const __half *)b, n, (__half *)y);
  }
  ZZ_CU_LAUNCHED();
  return 0;
}

extern "C" int zz_cuda_kv_append(const uint16_t *x, int64_t b, int64_t sq, int64_t h, uint16_t *cache,
                                 int64_t kv_stride, int64_t pos, void *stream) {
  if (b < 0 || sq < 0 || h < 0 || pos < 0 || kv_stride < 0) return (int)cudaErrorInvalidValue;
  if (b == 0 || sq == 0 || h == 0) return 0;
  if (b > 1 && kv_stride < (pos + sq) * h) return (int)cudaErrorInvalidValue;
  cudaStream_t st = zz_cu_stream(stream);
  const int64_t run = sq * h, off = pos * h;
  /* A unit must divide the run, the sequence stride and the row offset, in
   * elements, as well as both base addresses. */
  int unit = zz_copy_unit(run, (uintptr_t)x | (uintptr_t)cache);
  while (unit > 2 && ((kv_stride * 2) % unit != 0 || (off * 2) % unit != 0)) unit = unit == 16 ? 4 : 2;
  switch (unit) {
    case 16: return zz_kv_append_launch<uint4>(x, b, run, cache, kv_stride, off, st);
    case 4: return zz_kv_append_launch<uint32_t>(x, b, run, cache, kv_stride, off, st);
    default: return zz_kv_append_launch<uint16_t>(x, b, run, cache, kv_stride, off, st);
  }
}
