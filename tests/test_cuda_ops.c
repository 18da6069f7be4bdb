/*
 * test_cuda_ops.c — the CUDA kernels that no device op reaches, against host
 * references: zz_cuda_convert between every pair of f32, f16 and bf16 (the device
 * only ever converts to and from f16).
 * Every op of the ops table is checked against the CPU device, through the
 * wrappers, by test_backend_ops.
 *
 * Like ggml's test-backend-ops: fresh random inputs; GPU outputs poisoned with NaN
 * (0xFF bytes) before each call, so a slot the kernel forgets to write fails; error
 * measured as max |gpu - ref| / max(1e-6, max |ref|) and passing at <= 1e-2. A NaN
 * never passes.
 *
 * One line per case, then "N passed, N failed". Exit status: 0 when all pass, 1
 * otherwise, 77 (ctest SKIP_RETURN_CODE) without a GPU or without CUDA.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_kernels.h"

#ifndef ZZ_HAVE_CUDA

int main(void) {
  printf("no CUDA device: skipped (built without CUDA)\n");
  return 77;
}

#else

#include <cuda_runtime_api.h>

#define ZZ_TOL 1e-2

static int g_pass, g_fail;
static cudaStream_t g_stream;

/* ================================================================ helpers */

static void zz_die(const char *what, cudaError_t e) {
  fprintf(stderr, "test_cuda_ops: %s: %s\n", what, cudaGetErrorString(e));
  printf("%d passed, %d failed\n", g_pass, g_fail + 1);
  exit(1);
}

#define ZZ_T_CUDA(call)                                                                                                \
  do {                                                                                                                 \
    cudaError_t zz_e_ = (call);                                                                                        \
    if (zz_e_ != cudaSuccess) zz_die(#call, zz_e_);                                                                    \
  } while (0)

static uint64_t g_rng = 0x243f6a8885a308d3ull;

/* splitmix64: reproducible across runs and platforms. */
static uint64_t zz_t_next(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float zz_t_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(zz_t_next() >> 11) * 0x1.0p-53);
}

static void *zz_t_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_cuda_ops: out of host memory\n");
    exit(1);
  }
  return p;
}

static void *zz_t_dev(size_t bytes) {
  void *p = NULL;
  ZZ_T_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

static void *zz_t_dev_copy(const void *host, size_t bytes) {
  void *p = zz_t_dev(bytes);
  ZZ_T_CUDA(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, g_stream));
  ZZ_T_CUDA(cudaStreamSynchronize(g_stream));
  return p;
}

/* All-ones bytes: NaN as f16, bf16 and f32 alike. On the kernels' own stream and
 * waited for: g_stream does not wait for the legacy stream that a plain cudaMemset
 * uses, so on an H100 under load the poison landed after the kernel (every
 * convert case "failed" with NaN outputs when ctest ran eight tests at once). */
static void zz_t_poison(void *dev, size_t bytes) {
  ZZ_T_CUDA(cudaMemsetAsync(dev, 0xff, bytes, g_stream));
  ZZ_T_CUDA(cudaStreamSynchronize(g_stream));
}

static void zz_t_fetch(void *host, const void *dev, size_t bytes) {
  ZZ_T_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, g_stream));
  ZZ_T_CUDA(cudaStreamSynchronize(g_stream));
}

/* A kernel's return code, then whatever its execution reports. */
static int zz_t_finish(int rc) {
  if (rc != 0) return rc;
  return (int)cudaStreamSynchronize(g_stream);
}

/* max|got - ref| / max(1e-6, max|ref|); +inf when got has a NaN or inf where ref is
 * finite, NaN when ref itself is not finite (a broken test). */
static double zz_t_err(const float *got, const float *ref, int64_t n) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(ref[i])) return NAN;
    if (!isfinite(got[i])) return INFINITY;
    const double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff) max_diff = d;
    if (fabs((double)ref[i]) > max_ref) max_ref = fabs((double)ref[i]);
  }
  return max_diff / (max_ref > 1e-6 ? max_ref : 1e-6);
}

static void zz_t_report(const char *op, const char *shape, int rc, double err) {
  const int ok = rc == 0 && err <= ZZ_TOL; /* false for NaN */
  if (rc != 0) printf("%-11s %-58s rc=%d (%s)  FAIL\n", op, shape, rc, cudaGetErrorString((cudaError_t)rc));
  else
    printf("%-11s %-58s err=%.3e  %s\n", op, shape, err, ok ? "PASS" : "FAIL");
  fflush(stdout);
  if (ok) g_pass++;
  else
    g_fail++;
}

/* ================================================================ convert */

static size_t zz_t_esize(zz_dtype dt) { return dt == ZZ_DTYPE_F32 ? 4 : 2; }

static float zz_t_load(zz_dtype dt, const void *p, int64_t i) {
  if (dt == ZZ_DTYPE_F32) return ((const float *)p)[i];
  if (dt == ZZ_DTYPE_F16) return zz_f16_to_f32(((const uint16_t *)p)[i]);
  return zz_bf16_to_f32(((const uint16_t *)p)[i]);
}

static void zz_t_convert(zz_dtype s_dt, zz_dtype d_dt, int64_t n) {
  /* Values across the f16 range, some tiny enough for f16 subnormals. */
  float *vals = zz_t_malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) vals[i] = (i % 5 == 4) ? zz_t_uniform(-1e-5f, 1e-5f) : zz_t_uniform(-6e4f, 6e4f);
  void *src = zz_t_malloc((size_t)n * zz_t_esize(s_dt));
  zz_convert(ZZ_DTYPE_F32, vals, s_dt, src, n);
  void *ref = zz_t_malloc((size_t)n * zz_t_esize(d_dt));
  zz_convert(s_dt, src, d_dt, ref, n);

  void *d_src = zz_t_dev_copy(src, (size_t)n * zz_t_esize(s_dt));
  void *d_dst = zz_t_dev((size_t)n * zz_t_esize(d_dt));
  zz_t_poison(d_dst, (size_t)n * zz_t_esize(d_dt));
  const int rc = zz_t_finish(zz_cuda_convert(s_dt, d_src, d_dt, d_dst, n, g_stream));
  void *got = zz_t_malloc((size_t)n * zz_t_esize(d_dt));
  zz_t_fetch(got, d_dst, (size_t)n * zz_t_esize(d_dt));

  float *gf = zz_t_malloc((size_t)n * 4), *rf = zz_t_malloc((size_t)n * 4);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    gf[i] = zz_t_load(d_dt, got, i);
    rf[i] = zz_t_load(d_dt, ref, i);
    differ += memcmp((char *)got + i * zz_t_esize(d_dt), (char *)ref + i * zz_t_esize(d_dt), zz_t_esize(d_dt)) != 0;
  }
  char shape[96];
  snprintf(shape, sizeof shape, "%s -> %s n=%lld (%lld values differ in bits)", zz_dtype_name(s_dt),
           zz_dtype_name(d_dt), (long long)n, (long long)differ);
  zz_t_report("convert", shape, rc, zz_t_err(gf, rf, n));

  cudaFree(d_src);
  cudaFree(d_dst);
  free(vals), free(src), free(ref), free(got), free(gf), free(rf);
}

/* ================================================================ main */

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  ZZ_T_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  ZZ_T_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));

  const zz_dtype dts[3] = {ZZ_DTYPE_F32, ZZ_DTYPE_F16, ZZ_DTYPE_BF16};
  const int64_t conv_n[2] = {1, 100003};
  for (int s = 0; s < 3; s++)
    for (int d = 0; d < 3; d++)
      for (int c = 0; c < 2; c++) zz_t_convert(dts[s], dts[d], conv_n[c]);

  printf("%d passed, %d failed\n", g_pass, g_fail);
  cudaStreamDestroy(g_stream);
  return g_fail ? 1 : 0;
}

#endif /* ZZ_HAVE_CUDA */
