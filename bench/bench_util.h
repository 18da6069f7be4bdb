/* bench_util.h — what the engine benchmarks share: random prompts, a warm-up,
 * then one timed block (bench/bench_util.c). */
#ifndef ZZ_BENCH_UTIL_H
#define ZZ_BENCH_UTIL_H
#include "zz_runtime.h"

typedef struct zz_bench_timing {
  double prefill_s, decode_s;    /* of the timed block */
  zz_engine_stats before, after; /* engine stats around it */
} zz_bench_timing;

/* Generates 2 tokens for one prompt (warm-up, excluded), then n tokens for b
 * prompts of s random ids each (EOS ignored), timed. ZZ_OK or the engine's error. */
zz_status zz_bench_block(zz_engine *eng, int64_t b, int64_t s, int64_t n, zz_bench_timing *out);
/* n floats uniform in [-0.5, 0.5) from seed (exits on no memory). */
float *zz_bench_fill(int64_t n, uint64_t seed);
/* Seconds per call of fn(arg): the best of reps repetitions, each calling it for
 * at least min_s seconds (and at least once). */
double zz_bench_best(void (*fn)(void *arg), void *arg, int reps, double min_s);
/* The median of v[0..n) (n >= 1; v sorted in place: the upper middle for even n). */
double zz_bench_median(double *v, int n);
#endif
