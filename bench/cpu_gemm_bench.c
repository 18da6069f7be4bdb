/*
 * cpu_gemm_bench.c — the CPU device's linear kernels on OPT-1.3B's shapes, in one
 * run, against OpenBLAS sgemm's large-M peak measured the same way:
 *   sgemm   zz_cpu_linear (OpenBLAS, its own threads; packs W on every call)
 *   f32     zz_cpu_gemm, f32 weights (kernels/cpu/gemm.c, the pool's threads)
 *   bf16    zz_cpu_gemm, bf16 weights (x rounded to bf16 once per call)
 * at decode M = 1, 4, 16, 64 (the GPU batch) and prefill M = 64 × 128 rows.
 * Output: CSV on stdout, the peak on stderr. Not a test: never part of ctest.
 * Where zz_cpu_linear_w switches from the f32 kernel to sgemm (ZZ_GEMM_SMALL_M
 * in kernels/cpu/gemm.c) comes from these numbers (docs/cpu.md, "GEMM").
 *
 *   cpu_gemm_bench [threads=2] [decode Ms=1,4,16,64] [prefill M=8192 (0: none)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct zz_gemm_call {
  zz_pool *pool; /* NULL: sgemm */
  const float *x, *b;
  const void *w;
  zz_dtype w_dt;
  int64_t n, in, out;
  float *y;
  void *xb;
} zz_gemm_call;

static void zz_gemm_run(void *arg) {
  const zz_gemm_call *c = arg;
  if (!c->pool)
    zz_cpu_linear(c->x, c->n, c->in, c->w, c->b, c->out, c->y, 0);
  else
    zz_cpu_gemm(c->pool, c->x, c->n, c->in, c->w, c->w_dt, c->b, c->out, c->y, 0, c->xb);
}

/* GFLOP/s of one kernel on one shape; prefill-sized calls are timed once. */
static double zz_gflops(zz_gemm_call c) {
  double flop = 2.0 * (double)c.n * (double)c.in * (double)c.out;
  bool big = flop > 2e10;
  double t = zz_bench_best(zz_gemm_run, &c, big ? 1 : 3, big ? 0 : 0.15);
  return flop / t / 1e9;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *ms = argc > 2 ? argv[2] : "1,4,16,64";
  int64_t prefill = argc > 3 ? atoll(argv[3]) : 64 * 128;
  zz_pool *pool = NULL;
  if (threads < 1 || zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "cpu_gemm_bench: cannot make a pool of %d threads\n", threads);
    return 1;
  }
  fprintf(stderr, "cpu_gemm_bench: bf16 micro-kernel %s; pool %d threads (OpenBLAS: OPENBLAS_NUM_THREADS or all)\n",
          zz_cpu_has_bf16() ? "avx512_bf16" : "portable", threads);

  /* sgemm's large-M peak: a square 2048³ problem */
  int64_t sq = 2048;
  float *A = zz_bench_fill(sq * sq, 2), *B = zz_bench_fill(sq * sq, 3), *C = zz_bench_fill(sq * sq, 4);
  double peak = zz_gflops((zz_gemm_call){.x = A, .w = B, .n = sq, .in = sq, .out = sq, .y = C});
  free(A), free(B), free(C);
  fprintf(stderr, "sgemm peak (2048^3): %.1f GFLOP/s\n", peak);

  const struct {
    const char *name;
    int64_t in, out;
  } ops[] = {{"out_proj", 2048, 2048}, {"qkv", 2048, 6144}, {"fc1", 2048, 8192}, {"fc2", 8192, 2048},
             {"lm_head", 2048, 50272}};
  int64_t mlist[16], nm = 0;
  char *list = strdup(ms);
  for (char *tok = strtok(list, ","); tok && nm < 15; tok = strtok(NULL, ","))
    if (atoll(tok) > 0) mlist[nm++] = atoll(tok);
  free(list);
  if (prefill > 0) mlist[nm++] = prefill;

  printf("op,m,in,out,sgemm_gflops,sgemm_frac_peak,f32_gflops,f32_vs_sgemm,bf16_gflops,bf16_frac_peak,bf16_vs_sgemm\n");
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    int64_t in = ops[k].in, out = ops[k].out;
    float *w = zz_bench_fill(in * out, 6), *b = zz_bench_fill(out, 7);
    uint16_t *wb = malloc((size_t)(in * out) * sizeof *wb);
    zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, in * out);
    for (int64_t i = 0; i < nm; i++) {
      int64_t m = mlist[i];
      if (m == prefill && out > 8192) continue; /* the LM head runs on decode rows only */
      float *x = zz_bench_fill(m * in, 5), *y = zz_bench_fill(m * out, 8);
      void *xb = malloc(zz_cpu_gemm_scratch(m, in, ZZ_DTYPE_BF16));
      zz_gemm_call c = {.x = x, .b = b, .w = w, .w_dt = ZZ_DTYPE_F32, .n = m, .in = in, .out = out, .y = y};
      double s = zz_gflops(c);
      c.pool = pool;
      double f = zz_gflops(c);
      c.w = wb, c.w_dt = ZZ_DTYPE_BF16, c.xb = xb;
      double h = zz_gflops(c);
      printf("%s,%lld,%lld,%lld,%.1f,%.3f,%.1f,%.2f,%.1f,%.3f,%.2f\n", ops[k].name, (long long)m, (long long)in,
             (long long)out, s, s / peak, f, f / s, h, h / peak, h / s);
      fflush(stdout);
      free(x), free(y), free(xb);
    }
    free(w), free(b), free(wb);
  }
  zz_pool_destroy(pool);
  return 0;
}
