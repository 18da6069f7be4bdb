/*
 * gemv_bw_bench.c — decode at batch 1 against the streaming-read bound (issue
 * #27 item 4): one token through a LLaMA-7B-shaped layer's linears (q, k, v, o,
 * gate, up, down) on the CPU device's linear (kernels/cpu/linear.c), weights in
 * bf16 and in 4-bit groups of 64 (bytes: packed weights and their scales; the
 * exact path, and x in int8 per group as --cpu-act int8 takes it), and the
 * fraction
 *     (weight bytes per token / seconds per token) / measured read GB/s.
 * On a shared machine the read rate moves by 1.5x between seconds, so each
 * round measures the read rate (bench/peak.c) right before the layer and
 * divides by that one; the median over the rounds is one figure, the best
 * layer rate over the best read rate of all rounds the other. CSV on stdout.
 * Not a test: never part of ctest.
 *
 *   gemv_bw_bench [threads=2] [rounds=5]
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "peak.h"

typedef struct zz_layer_call {
  zz_pool *pool;
  int q4;         /* 0: bf16 weights, 1: 4-bit groups (ZZ_QFMT_DEFAULT), 2: the same with x in int8 */
  const float *x; /* [11008]: one token, as wide as the widest input */
  void *const *w; /* [7]: [out, in] each, the shapes below in order */
  float *y;       /* [11008] */
  void *xb;       /* bf16 scratch of x */
} zz_layer_call;

/* LLaMA-7B: q, k, v, o (4096 -> 4096), gate, up (4096 -> 11008), down (11008 -> 4096) */
static const int64_t zz_gemv_shape[3][3] = {{4096, 4096, 4}, {4096, 11008, 2}, {11008, 4096, 1}}; /* in, out, count */

static void zz_layer_run(void *arg) {
  const zz_layer_call *c = arg;
  int m = 0;
  for (int s = 0; s < 3; s++)
    for (int r = 0; r < zz_gemv_shape[s][2]; r++, m++) {
      int64_t in = zz_gemv_shape[s][0], out = zz_gemv_shape[s][1];
      if (c->q4)
        zz_cpu_linear_q(c->pool, c->x, 1, in, c->w[m], ZZ_QFMT_DEFAULT, c->q4 == 2 ? ZZ_CPU_ACT_INT8 : ZZ_CPU_ACT_F32,
                        NULL, out, c->y, 0);
      else
        zz_cpu_linear_w(c->pool, c->x, 1, in, c->w[m], ZZ_DTYPE_BF16, NULL, out, c->y, 0, c->xb);
    }
}

static int zz_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5;
  zz_pool *pool = NULL;
  if (threads < 1 || rounds < 1 || rounds > 64 || zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "gemv_bw_bench: bad threads %d or rounds %d (1..64)\n", threads, rounds);
    return 1;
  }
  char model[256];
  zz_peak_cpu_model(model, sizeof model);
  /* Seven matrices of their own (405 MB in bf16): one reused 4096 x 4096 bf16
   * matrix (34 MB) would be partly served by a 32 MB L3. */
  void *w[2][7];
  double bytes[2] = {0, 0};
  for (int s = 0, m = 0; s < 3; s++) {
    int64_t in = zz_gemv_shape[s][0], out = zz_gemv_shape[s][1];
    float *f = zz_bench_fill(in * out, 6 + s);
    size_t qb = zz_q_row_bytes(ZZ_QFMT_DEFAULT, in) * (size_t)out;
    for (int r = 0; r < zz_gemv_shape[s][2]; r++, m++) {
      w[0][m] = malloc((size_t)(in * out) * sizeof(uint16_t));
      w[1][m] = malloc(qb);
      zz_convert(ZZ_DTYPE_F32, f, ZZ_DTYPE_BF16, w[0][m], in * out);
      zz_q_quantize(ZZ_QFMT_DEFAULT, f, out, in, w[1][m]);
      bytes[0] += 2.0 * (double)(in * out);
      bytes[1] += (double)qb;
    }
    free(f);
  }
  float *x = zz_bench_fill(11008, 5), *y = zz_bench_fill(11008, 8);
  void *xb = malloc(zz_cpu_gemm_scratch(1, 11008, ZZ_DTYPE_BF16));
  double frac[3][64], best[3] = {0, 0, 0}, best_bw = 0;
  printf("cpu,threads,round,read_gbs,bf16_gbs,bf16_frac_read,q4_gbs,q4_frac_read,q4i8_gbs,q4i8_frac_read\n");
  for (int r = 0; r < rounds; r++) {
    double bw = zz_peak_read(threads), gbs[3];
    if (bw > best_bw) best_bw = bw;
    for (int q = 0; q < 3; q++) {
      zz_layer_call c = {pool, q, x, w[q ? 1 : 0], y, xb};
      gbs[q] = bytes[q ? 1 : 0] / zz_bench_best(zz_layer_run, &c, 3, 0) / 1e9;
      frac[q][r] = gbs[q] / bw;
      if (gbs[q] > best[q]) best[q] = gbs[q];
    }
    printf("%s,%d,%d,%.2f,%.2f,%.3f,%.2f,%.3f,%.2f,%.3f\n", model, threads, r, bw, gbs[0], frac[0][r], gbs[1],
           frac[1][r], gbs[2], frac[2][r]);
    fflush(stdout);
  }
  for (int q = 0; q < 3; q++) qsort(frac[q], (size_t)rounds, sizeof frac[q][0], zz_cmp);
  printf("# median of %d rounds: bf16 %.3f of the read bound (%.1f MB a token), 4-bit groups of 64 %.3f (%.1f MB), "
         "with x in int8 %.3f\n",
         rounds, frac[0][rounds / 2], bytes[0] / 1e6, frac[1][rounds / 2], bytes[1] / 1e6, frac[2][rounds / 2]);
  /* Under load each round's pair is taken at other moments; the best of each
   * over all rounds (both the machine's least disturbed) is the steadier ratio. */
  printf("# best of %d rounds: read %.2f GB/s, bf16 %.2f GB/s = %.3f of it, 4-bit %.2f GB/s = %.3f, int8 x %.2f GB/s = "
         "%.3f\n",
         rounds, best_bw, best[0], best[0] / best_bw, best[1], best[1] / best_bw, best[2], best[2] / best_bw);
  for (int m = 0; m < 7; m++) free(w[0][m]), free(w[1][m]);
  free(x), free(y), free(xb);
  zz_pool_destroy(pool);
  return 0;
}
