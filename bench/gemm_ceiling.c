/*
 * gemm_ceiling.c — how close the CPU engine's decode GEMMs come to what the
 * machine can do, measured in one run:
 *   ceiling 1: OpenBLAS sgemm on a large square problem (compute peak);
 *   ceiling 2: streaming read bandwidth (a decode GEMM reads every weight once,
 *              so with a small batch it is bound by memory, not flops);
 *   measured:  zz_cpu_linear on the decode shapes of a model (n = batch rows,
 *              [h→3h... ] as the attention and MLP layers use them).
 * Output: CSV on stdout (shape, GFLOP/s, fraction of sgemm peak, GB/s, fraction
 * of read bandwidth). Not a test: never part of ctest pass/fail.
 *
 *   gemm_ceiling [hidden=768] [ffn=3072] [batches=1,8,32,64]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct zz_lin_call {
  const float *x, *w, *b;
  int64_t n, in, out;
  float *y;
} zz_lin_call;

static void zz_lin_run(void *arg) {
  const zz_lin_call *c = arg;
  zz_cpu_linear(c->x, c->n, c->in, c->w, c->b, c->out, c->y, 0);
}

/* Best of several timed repetitions, each at least ~0.2 s. */
static double zz_time_linear(const float *x, int64_t n, int64_t in, const float *w, const float *b, int64_t out,
                             float *y) {
  zz_lin_call c = {x, w, b, n, in, out, y};
  return zz_bench_best(zz_lin_run, &c, 5, 0.2);
}

static double zz_read_bandwidth(void) {
  int64_t n = 64 << 20; /* 256 MiB of floats: past every cache */
  float *a = zz_bench_fill(n, 1);
  volatile float sink = 0;
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = zz_now();
    float acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
    for (int64_t i = 0; i < n; i += 4) {
      acc0 += a[i];
      acc1 += a[i + 1];
      acc2 += a[i + 2];
      acc3 += a[i + 3];
    }
    sink = acc0 + acc1 + acc2 + acc3;
    double t = zz_now() - t0;
    if (t < best) best = t;
  }
  (void)sink;
  free(a);
  return (double)n * 4 / best;
}

int main(int argc, char **argv) {
  int64_t h = argc > 1 ? atoll(argv[1]) : 768, ffn = argc > 2 ? atoll(argv[2]) : 3072;
  const char *batches = argc > 3 ? argv[3] : "1,8,32,64";

  int64_t sq = 2048;
  float *A = zz_bench_fill(sq * sq, 2), *B = zz_bench_fill(sq * sq, 3), *C = zz_bench_fill(sq * sq, 4);
  double t_peak = zz_time_linear(A, sq, sq, B, NULL, sq, C);
  double peak = 2.0 * sq * sq * sq / t_peak;
  free(A), free(B), free(C);
  double bw = zz_read_bandwidth();
  fprintf(stderr, "ceilings: sgemm %dx%dx%d %.1f GFLOP/s, streaming read %.2f GB/s\n", (int)sq, (int)sq, (int)sq,
          peak / 1e9, bw / 1e9);

  printf("op,n,in,out,gflops,frac_sgemm_peak,gbytes_s,frac_read_bw\n");
  const struct {
    const char *name;
    int64_t in, out;
  } ops[] = {{"qkv_proj", h, h}, {"out_proj", h, h}, {"fc1", h, ffn}, {"fc2", ffn, h}};
  char *list = strdup(batches);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int64_t n = atoll(tok);
    if (n < 1) continue;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      int64_t in = ops[k].in, out = ops[k].out;
      float *x = zz_bench_fill(n * in, 5), *w = zz_bench_fill(in * out, 6), *b = zz_bench_fill(out, 7),
            *y = zz_bench_fill(n * out, 8);
      double t = zz_time_linear(x, n, in, w, b, out, y);
      double flops = 2.0 * n * in * out / t;
      double bytes = ((double)in * out + (double)n * (in + out)) * 4 / t;
      printf("%s,%lld,%lld,%lld,%.2f,%.3f,%.2f,%.3f\n", ops[k].name, (long long)n, (long long)in, (long long)out,
             flops / 1e9, flops / peak, bytes / 1e9, bytes / bw);
      free(x), free(w), free(b), free(y);
    }
  }
  free(list);
  return 0;
}
