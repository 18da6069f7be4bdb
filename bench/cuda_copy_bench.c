/*
 * cuda_copy_bench.c — how much of the PCIe link the engine's copy lanes get:
 * host→device on the weight-load lane and device→host on the cache-store lane,
 * alone and both at once (the schedule runs them concurrently), each as a
 * fraction of a plain pinned cudaMemcpyAsync measured in the same run on a
 * stream of its own. CSV on stdout. Exits 77 without a GPU.
 *
 *   cuda_copy_bench [MiB per transfer = 256] [repetitions = 10]
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "zz_runtime.h"

static double zz_plain(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, int reps) {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 0;
  double best = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = zz_now();
    cudaMemcpyAsync(dst, src, bytes, kind, s);
    cudaStreamSynchronize(s);
    double bw = (double)bytes / (zz_now() - t0);
    if (bw > best) best = bw;
  }
  cudaStreamDestroy(s);
  return best;
}

/* Engine lanes: write (H2D) on LOAD_WEIGHT and/or read (D2H) on STORE_CACHE. */
static zz_status zz_lanes_bw(zz_device *dev, void *d_in, void *h_in, void *d_out, void *h_out, size_t bytes, int reps,
                             bool h2d, bool d2h, double *bw_out) {
  double best = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = zz_now();
    if (h2d) ZZ_CHECK(zz_device_write(dev, ZZ_LANE_LOAD_WEIGHT, d_in, h_in, bytes));
    if (d2h) ZZ_CHECK(zz_device_read(dev, ZZ_LANE_STORE_CACHE, h_out, d_out, bytes));
    if (h2d) ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_LOAD_WEIGHT));
    if (d2h) ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_STORE_CACHE));
    double bw = (double)bytes * ((h2d ? 1 : 0) + (d2h ? 1 : 0)) / (zz_now() - t0);
    if (bw > best) best = bw;
  }
  *bw_out = best;
  return ZZ_OK;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  size_t bytes = mib << 20;
  zz_device *dev = NULL;
  if (zz_device_create_cuda(0, 0, 0, &dev) != ZZ_OK) {
    printf("no CUDA device: skipped (%s)\n", zz_error_message());
    return 77;
  }
  void *h_in = NULL, *h_out = NULL, *d_in = NULL, *d_out = NULL;
  if (zz_device_host_alloc(dev, bytes, &h_in) || zz_device_host_alloc(dev, bytes, &h_out) ||
      zz_device_alloc(dev, bytes, &d_in) || zz_device_alloc(dev, bytes, &d_out)) {
    fprintf(stderr, "cuda_copy_bench: %s\n", zz_error_message());
    return 1;
  }
  double c_h2d = zz_plain(d_in, h_in, bytes, cudaMemcpyHostToDevice, reps);
  double c_d2h = zz_plain(h_out, d_out, bytes, cudaMemcpyDeviceToHost, reps);
  double l_h2d = 0, l_d2h = 0, l_both = 0;
  if (zz_lanes_bw(dev, d_in, h_in, d_out, h_out, bytes, reps, true, false, &l_h2d) ||
      zz_lanes_bw(dev, d_in, h_in, d_out, h_out, bytes, reps, false, true, &l_d2h) ||
      zz_lanes_bw(dev, d_in, h_in, d_out, h_out, bytes, reps, true, true, &l_both)) {
    fprintf(stderr, "cuda_copy_bench: %s\n", zz_error_message());
    return 1;
  }
  printf("direction,bytes,ceiling_gb_s,lane_gb_s,fraction\n");
  printf("h2d,%zu,%.2f,%.2f,%.3f\n", bytes, c_h2d / 1e9, l_h2d / 1e9, l_h2d / c_h2d);
  printf("d2h,%zu,%.2f,%.2f,%.3f\n", bytes, c_d2h / 1e9, l_d2h / 1e9, l_d2h / c_d2h);
  printf("both,%zu,%.2f,%.2f,%.3f\n", bytes, (c_h2d + c_d2h) / 1e9, l_both / 1e9, l_both / (c_h2d + c_d2h));
  zz_device_free(dev, d_in);
  zz_device_free(dev, d_out);
  zz_device_host_free(dev, h_in);
  zz_device_host_free(dev, h_out);
  zz_device_destroy(dev);
  return 0;
}
