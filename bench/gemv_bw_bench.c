/*
 * gemv_bw_bench.c — decode against the streaming-read bound (issue #27 item 4,
 * #48 item 2): one step of `batch` tokens (1 by default) through a
 * LLaMA-7B-shaped layer's linears (q, k, v, o, gate, up, down) on the CPU
 * device's linear (kernels/cpu/linear.c), weights in bf16, in 4- and 8-bit
 * groups of 64 (bytes: packed weights and their scales; the exact path, and x
 * in int8 per group as --cpu-act int8 takes it) and in f32 (the own f32 kernel
 * where the ISA has one, else sgemm tiles), and the fraction
 *     (weight bytes per step / seconds per step) / measured read GB/s.
 * At a batch the FMA peak cannot feed at the read rate (2 · batch FLOP per
 * weight), the read bound is out of reach: the last line also gives each
 * kind's FLOP rate, to set beside bench/peak_probe's.
 * On a shared machine the read rate moves by 1.5x between seconds, so each
 * round measures the read rate (bench/peak.c) right before the layer and
 * divides by that one; the median over the rounds is one figure, the best
 * layer rate over the best read rate of all rounds the other. CSV on stdout.
 * Not a test: never part of ctest.
 *
 *   gemv_bw_bench [threads=2] [rounds=5] [batch=1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "peak.h"

typedef struct zz_layer_call {
  zz_pool *pool;
  int kind;       /* an index of zz_gemv_kind */
  int64_t n;      /* rows of x: the batch */
  const float *x; /* [n, 11008]: n tokens, rows as wide as the widest input */
  void *const *w; /* [7]: [out, in] each, the shapes below in order */
  float *y;       /* [n, 11008] */
  void *xb;       /* bf16 scratch of x */
} zz_layer_call;

/* The rows measured: the weights' dtype, the matrices they use (0 bf16, 1 4-bit
 * groups of ZZ_QFMT_DEFAULT, 2 f32, 3 8-bit groups of 64) and x's dtype for the
 * 4- and 8-bit ones. */
static const struct {
  const char *name;
  int set;
  zz_cpu_act act;
} zz_gemv_kind[] = {{"bf16", 0, ZZ_CPU_ACT_F32}, {"q4", 1, ZZ_CPU_ACT_F32},    {"q4i8", 1, ZZ_CPU_ACT_INT8},
                    {"q8", 3, ZZ_CPU_ACT_F32},   {"q8i8", 3, ZZ_CPU_ACT_INT8}, {"f32", 2, ZZ_CPU_ACT_F32}};
#define ZZ_KINDS 6
#define ZZ_SETS 4
static const zz_qfmt zz_gemv_q8 = {8, 64};

/* LLaMA-7B: q, k, v, o (4096 -> 4096), gate, up (4096 -> 11008), down (11008 -> 4096) */
static const int64_t zz_gemv_shape[3][3] = {{4096, 4096, 4}, {4096, 11008, 2}, {11008, 4096, 1}}; /* in, out, count */

static void zz_layer_run(void *arg) {
  const zz_layer_call *c = arg;
  int m = 0;
  for (int s = 0; s < 3; s++)
    for (int r = 0; r < zz_gemv_shape[s][2]; r++, m++) {
      int64_t in = zz_gemv_shape[s][0], out = zz_gemv_shape[s][1];
      int set = zz_gemv_kind[c->kind].set;
      if (set == 1 || set == 3)
        zz_cpu_linear_q(c->pool, c->x, c->n, in, c->w[m], set == 1 ? ZZ_QFMT_DEFAULT : zz_gemv_q8,
                        zz_gemv_kind[c->kind].act, NULL, out, c->y, 0);
      else
        zz_cpu_linear_w(c->pool, c->x, c->n, in, c->w[m], set ? ZZ_DTYPE_F32 : ZZ_DTYPE_BF16, NULL, out, c->y, 0,
                        c->xb);
    }
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5;
  int64_t n = argc > 3 ? atoll(argv[3]) : 1;
  zz_pool *pool = NULL;
  if (threads < 1 || rounds < 1 || rounds > 64 || n < 1 || n > 256 || zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "usage: gemv_bw_bench [threads >= 1] [rounds 1..64] [batch 1..256]\n");
    return 1;
  }
  char model[256];
  zz_peak_cpu_model(model, sizeof model);
  /* Seven matrices of their own (405 MB in bf16, 810 MB in f32): one reused
   * 4096 x 4096 bf16 matrix (34 MB) would be partly served by a 32 MB L3. */
  void *w[ZZ_SETS][7];
  double bytes[ZZ_SETS] = {0, 0, 0, 0}, params = 0;
  for (int s = 0, m = 0; s < 3; s++) {
    int64_t in = zz_gemv_shape[s][0], out = zz_gemv_shape[s][1];
    float *f = zz_bench_fill(in * out, 6 + s);
    size_t qb = zz_q_row_bytes(ZZ_QFMT_DEFAULT, in) * (size_t)out, q8b = zz_q_row_bytes(zz_gemv_q8, in) * (size_t)out;
    for (int r = 0; r < zz_gemv_shape[s][2]; r++, m++) {
      w[0][m] = malloc((size_t)(in * out) * sizeof(uint16_t));
      w[1][m] = malloc(qb);
      w[3][m] = malloc(q8b);
      w[2][m] = f; /* the last of a shape keeps the filled matrix itself */
      if (r + 1 < zz_gemv_shape[s][2]) {
        w[2][m] = malloc((size_t)(in * out) * sizeof(float));
        memcpy(w[2][m], f, (size_t)(in * out) * sizeof(float));
      }
      zz_convert(ZZ_DTYPE_F32, f, ZZ_DTYPE_BF16, w[0][m], in * out);
      zz_q_quantize(ZZ_QFMT_DEFAULT, f, out, in, w[1][m]);
      zz_q_quantize(zz_gemv_q8, f, out, in, w[3][m]);
      bytes[0] += 2.0 * (double)(in * out);
      bytes[1] += (double)qb;
      bytes[2] += 4.0 * (double)(in * out);
      bytes[3] += (double)q8b;
      params += (double)(in * out);
    }
  }
  float *x = zz_bench_fill(n * 11008, 5), *y = zz_bench_fill(n * 11008, 8);
  void *xb = malloc(zz_cpu_gemm_scratch(n, 11008, ZZ_DTYPE_BF16));
  double frac[ZZ_KINDS][64], best[ZZ_KINDS] = {0}, best_bw = 0;
  printf("cpu,threads,batch,round,read_gbs");
  for (int q = 0; q < ZZ_KINDS; q++) printf(",%s_gbs,%s_frac_read", zz_gemv_kind[q].name, zz_gemv_kind[q].name);
  printf("\n");
  for (int r = 0; r < rounds; r++) {
    double bw = zz_peak_read(threads);
    if (bw > best_bw) best_bw = bw;
    printf("%s,%d,%lld,%d,%.2f", model, threads, (long long)n, r, bw);
    for (int q = 0; q < ZZ_KINDS; q++) {
      int set = zz_gemv_kind[q].set;
      zz_layer_call c = {pool, q, n, x, w[set], y, xb};
      double gbs = bytes[set] / zz_bench_best(zz_layer_run, &c, 3, 0) / 1e9;
      frac[q][r] = gbs / bw;
      if (gbs > best[q]) best[q] = gbs;
      printf(",%.2f,%.3f", gbs, frac[q][r]);
    }
    printf("\n");
    fflush(stdout);
  }
  /* Under load each round's kinds are taken at other moments; the best of each
   * over all rounds (each the machine's least disturbed) is the steadier ratio. */
  printf("# median of %d rounds, fraction of the read bound:", rounds);
  for (int q = 0; q < ZZ_KINDS; q++)
    printf(" %s %.3f (%.1f MB a token)%s", zz_gemv_kind[q].name, zz_bench_median(frac[q], rounds),
           bytes[zz_gemv_kind[q].set] / 1e6, q + 1 < ZZ_KINDS ? "," : "\n");
  printf("# best of %d rounds: read %.2f GB/s;", rounds, best_bw);
  for (int q = 0; q < ZZ_KINDS; q++)
    printf(" %s %.2f GB/s = %.3f of it (%.1f GFLOP/s)%s", zz_gemv_kind[q].name, best[q], best[q] / best_bw,
           2.0 * (double)n * params * best[q] / bytes[zz_gemv_kind[q].set], q + 1 < ZZ_KINDS ? "," : "\n");
  for (int m = 0; m < 7; m++)
    for (int s = 0; s < ZZ_SETS; s++) free(w[s][m]);
  free(x), free(y), free(xb);
  zz_pool_destroy(pool);
  return 0;
}
