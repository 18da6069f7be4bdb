/* bench_util.c — the warm-up and timed block the engine benchmarks share. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

zz_status zz_bench_block(zz_engine *eng, int64_t b, int64_t s, int64_t n, zz_bench_timing *out) {
  int32_t **ids = calloc((size_t)b, sizeof *ids);
  int64_t *lens = calloc((size_t)b, sizeof *lens);
  zz_status st = ids && lens ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "bench: out of memory");
  zz_rng r;
  zz_rng_seed(&r, 5, 0);
  for (int64_t i = 0; st == ZZ_OK && i < b; i++) {
    if (!(ids[i] = malloc((size_t)s * sizeof **ids))) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "bench: out of memory");
      break;
    }
    lens[i] = s;
    for (int64_t j = 0; j < s; j++) ids[i][j] = 4 + (int32_t)(zz_rng_next(&r) % 50000);
  }
  zz_result res;
  int64_t one = 1;
  zz_request warm = {.n = 1, .ids = (const int32_t *const *)ids, .lens = &one, .max_new_tokens = 2, .ignore_eos = true};
  zz_request req = {
      .n = b, .ids = (const int32_t *const *)ids, .lens = lens, .max_new_tokens = (int)n, .ignore_eos = true};
  if (st == ZZ_OK && (st = zz_generate(eng, &warm, &res)) == ZZ_OK) {
    zz_result_free(&res, 1);
    zz_engine_get_stats(eng, &out->before);
    if ((st = zz_generate(eng, &req, &res)) == ZZ_OK) {
      zz_engine_get_stats(eng, &out->after);
      out->prefill_s = res.prefill_s;
      out->decode_s = res.decode_s;
      zz_result_free(&res, b);
    }
  }
  for (int64_t i = 0; ids && i < b; i++) free(ids[i]);
  free(ids);
  free(lens);
  return st;
}

float *zz_bench_fill(int64_t n, uint64_t seed) {
  float *x = malloc((size_t)n * sizeof *x);
  if (!x) {
    fprintf(stderr, "bench: out of memory for %lld floats\n", (long long)n);
    exit(1);
  }
  zz_rng r;
  zz_rng_seed(&r, seed, 0);
  for (int64_t i = 0; i < n; i++) x[i] = (float)zz_rng_uniform(&r) - 0.5f;
  return x;
}

double zz_bench_best(void (*fn)(void *arg), void *arg, int reps, double min_s) {
  double best = 1e30;
  for (int rep = 0; rep < reps; rep++) {
    int iters = 0;
    double t0 = zz_now(), t;
    do {
      fn(arg);
      iters++;
    } while ((t = zz_now() - t0) < min_s);
    if (t / iters < best) best = t / iters;
  }
  return best;
}

static int zz_bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double zz_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, zz_bench_cmp);
  return v[n / 2];
}
