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
 * Each set of weights is copied to at least ZZ_SET_BYTES and the copies taken
 * in turn, so no set is served by a large L3 (300 MiB on this project's Xeon
 * VMs). Under heavy load (a loaded 2-core VM gave the process 5-10% of its
 * CPUs) wall time measures the scheduler; so each kind is also timed in CPU
 * seconds (pool workers sleep when idle) against a streaming sum of the same
 * bytes on the same pool, the "by CPU time" line.
 * On a shared machine the read rate moves by 1.5x between seconds, so each
 * round measures the read rate (bench/peak.c) right before the layer and
 * divides by that one; the median over the rounds is one figure, the best
 * layer rate over the best read rate of all rounds the other. CSV on stdout.
 * Not a test: never part of ctest.
 *
 *   gemv_bw_bench [threads=2] [rounds=5] [batch=1] [kinds=all]
 * kinds: a comma-separated list of the names below (bf16,q4,q4i8,q8,q8i8,f32);
 * only their weight sets are built and timed (a kind left out prints 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "peak.h"

typedef struct zz_layer_call {
  zz_pool *pool;
  int kind;         /* an index of zz_gemv_kind */
  int64_t n;        /* rows of x: the batch */
  const float *x;   /* [n, 11008]: n tokens, rows as wide as the widest input */
  void **w;         /* [copies][7]: [out, in] each, the shapes below in order */
  int copies, next; /* each run takes the next copy of the layer */
  float *y;         /* [n, 11008] */
  void *xb;         /* bf16 scratch of x */
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
#define ZZ_SET_BYTES 640e6

/* LLaMA-7B: q, k, v, o (4096 -> 4096), gate, up (4096 -> 11008), down (11008 -> 4096) */
static const int64_t zz_gemv_shape[3][3] = {{4096, 4096, 4}, {4096, 11008, 2}, {11008, 4096, 1}}; /* in, out, count */

static void zz_layer_run(void *arg) {
  zz_layer_call *c = arg;
  void *const *w = c->w + 7 * c->next;
  c->next = (c->next + 1) % c->copies;
  int m = 0;
  for (int s = 0; s < 3; s++)
    for (int r = 0; r < zz_gemv_shape[s][2]; r++, m++) {
      int64_t in = zz_gemv_shape[s][0], out = zz_gemv_shape[s][1];
      int set = zz_gemv_kind[c->kind].set;
      if (set == 1 || set == 3)
        zz_cpu_linear_q(c->pool, c->x, c->n, in, w[m], set == 1 ? ZZ_QFMT_DEFAULT : zz_gemv_q8,
                        zz_gemv_kind[c->kind].act, NULL, out, c->y, 0);
      else
        zz_cpu_linear_w(c->pool, c->x, c->n, in, w[m], set ? ZZ_DTYPE_F32 : ZZ_DTYPE_BF16, NULL, out, c->y, 0, c->xb);
    }
}

/* ---- the same bytes read by a plain streaming sum, on the same pool: each
 * task sums one ZZ_READ_PIECE of one matrix of the set (its copies in turn) */
#define ZZ_READ_PIECE ((size_t)1 << 20)
typedef struct zz_read_call {
  zz_pool *pool;
  void **w;             /* [copies * 7] */
  const size_t *len;    /* [copies * 7]: bytes of each */
  const int64_t *first; /* [copies * 7 + 1]: each matrix's first piece */
  int mats;
} zz_read_call;

static volatile float zz_read_sink;

static void zz_read_piece(void *arg, int64_t t) {
  const zz_read_call *c = arg;
  int m = 0;
  while (c->first[m + 1] <= t) m++;
  size_t off = (size_t)(t - c->first[m]) * ZZ_READ_PIECE, end = off + ZZ_READ_PIECE;
  if (end > c->len[m]) end = c->len[m];
  const float *p = (const float *)((const char *)c->w[m] + off);
  int64_t nf = (int64_t)((end - off) / sizeof(float));
  float s[16] = {0}; /* independent lanes: the compiler's vector adds, no reassociation needed */
  for (int64_t i = 0; i + 16 <= nf; i += 16)
    for (int u = 0; u < 16; u++) s[u] += p[i + u];
  zz_read_sink = s[0] + s[15];
}

static void zz_read_run(void *arg) {
  const zz_read_call *c = arg;
  zz_pool_run(c->pool, zz_read_piece, (void *)c, c->first[c->mats]);
}

/* The process's CPU seconds (every thread's): under load a thread off the CPU
 * costs wall time but none of this; pool workers sleep when idle. */
static double zz_cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The best of reps runs of fn, each in CPU seconds per thread. */
static double zz_cpu_best(void (*fn)(void *arg), void *arg, int reps, int threads) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = zz_cpu_now();
    fn(arg);
    double t = (zz_cpu_now() - t0) / threads;
    if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5;
  int64_t n = argc > 3 ? atoll(argv[3]) : 1;
  bool want[ZZ_KINDS], need[ZZ_SETS] = {false};
  for (int q = 0; q < ZZ_KINDS; q++) {
    const char *l = argc > 4 ? argv[4] : NULL, *h = l ? strstr(l, zz_gemv_kind[q].name) : NULL;
    size_t len = strlen(zz_gemv_kind[q].name);
    while (h && !((h == l || h[-1] == ',') && (h[len] == ',' || h[len] == 0))) h = strstr(h + 1, zz_gemv_kind[q].name);
    want[q] = !l || h;
    if (want[q]) need[zz_gemv_kind[q].set] = true;
  }
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
      w[0][m] = need[0] ? malloc((size_t)(in * out) * sizeof(uint16_t)) : NULL;
      w[1][m] = need[1] ? malloc(qb) : NULL;
      w[3][m] = need[3] ? malloc(q8b) : NULL;
      w[2][m] = f; /* the last of a shape keeps the filled matrix itself */
      if (r + 1 < zz_gemv_shape[s][2]) {
        w[2][m] = need[2] ? malloc((size_t)(in * out) * sizeof(float)) : NULL;
        if (need[2]) memcpy(w[2][m], f, (size_t)(in * out) * sizeof(float));
      }
      if (r) { /* the shape's first matrix again */
        if (need[0]) memcpy(w[0][m], w[0][m - r], (size_t)(in * out) * sizeof(uint16_t));
        if (need[1]) memcpy(w[1][m], w[1][m - r], qb);
        if (need[3]) memcpy(w[3][m], w[3][m - r], q8b);
      } else {
        if (need[0]) zz_convert(ZZ_DTYPE_F32, f, ZZ_DTYPE_BF16, w[0][m], in * out);
        if (need[1]) zz_q_quantize(ZZ_QFMT_DEFAULT, f, out, in, w[1][m]);
        if (need[3]) zz_q_quantize(zz_gemv_q8, f, out, in, w[3][m]);
      }
      bytes[0] += 2.0 * (double)(in * out);
      bytes[1] += (double)qb;
      bytes[2] += 4.0 * (double)(in * out);
      bytes[3] += (double)q8b;
      params += (double)(in * out);
    }
    if (!need[2]) free(f); /* else the f32 set's last matrix of the shape */
  }
  /* Copies of each set to at least ZZ_SET_BYTES, taken in turn: a 4-bit layer
   * (114 MB) run again and again would be served by a large L3 (this project's
   * Xeon VMs report 300 MiB) and read faster than memory. */
  void **wc[ZZ_SETS];
  int copies[ZZ_SETS];
  for (int s = 0; s < ZZ_SETS; s++) {
    copies[s] = need[s] ? (int)(ZZ_SET_BYTES / bytes[s]) + 1 : 0;
    wc[s] = malloc(sizeof(void *) * 7 * (size_t)copies[s]);
    for (int k = 0, m = 0; k < copies[s]; k++)
      for (int t = 0; t < 3; t++)
        for (int r = 0; r < zz_gemv_shape[t][2]; r++, m++) {
          size_t sz = (size_t)(s == 0 ? 2 : s == 2 ? 4 : 0) * (size_t)(zz_gemv_shape[t][0] * zz_gemv_shape[t][1]);
          if (!sz)
            sz = zz_q_row_bytes(s == 1 ? ZZ_QFMT_DEFAULT : zz_gemv_q8, zz_gemv_shape[t][0]) *
                 (size_t)zz_gemv_shape[t][1];
          wc[s][m] = k ? memcpy(malloc(sz), w[s][m % 7], sz) : w[s][m];
        }
  }
  size_t *len[ZZ_SETS];
  int64_t *first[ZZ_SETS];
  for (int s = 0; s < ZZ_SETS; s++) {
    len[s] = malloc(sizeof(size_t) * 7 * (size_t)copies[s]);
    first[s] = malloc(sizeof(int64_t) * (7 * (size_t)copies[s] + 1));
    first[s][0] = 0;
    for (int m = 0; m < 7 * copies[s]; m++) {
      int t = m % 7 < 4 ? 0 : m % 7 < 6 ? 1 : 2;
      int64_t in = zz_gemv_shape[t][0], out = zz_gemv_shape[t][1];
      len[s][m] = s == 0   ? (size_t)(2 * in * out)
                  : s == 2 ? (size_t)(4 * in * out)
                           : zz_q_row_bytes(s == 1 ? ZZ_QFMT_DEFAULT : zz_gemv_q8, in) * (size_t)out;
      first[s][m + 1] = first[s][m] + (int64_t)((len[s][m] + ZZ_READ_PIECE - 1) / ZZ_READ_PIECE);
    }
  }
  double cfrac[ZZ_KINDS][64], cgbs[ZZ_KINDS][64];
  float *x = zz_bench_fill(n * 11008, 5), *y = zz_bench_fill(n * 11008, 8);
  void *xb = malloc(zz_cpu_gemm_scratch(n, 11008, ZZ_DTYPE_BF16));
  double frac[ZZ_KINDS][64], best[ZZ_KINDS] = {0}, best_bw = 0;
  printf("cpu,threads,batch,round,read_gbs");
  for (int q = 0; q < ZZ_KINDS; q++)
    printf(",%s_gbs,%s_frac_read,%s_frac_cpu", zz_gemv_kind[q].name, zz_gemv_kind[q].name, zz_gemv_kind[q].name);
  printf("\n");
  for (int r = 0; r < rounds; r++) {
    double bw = zz_peak_read(threads);
    if (bw > best_bw) best_bw = bw;
    printf("%s,%d,%lld,%d,%.2f", model, threads, (long long)n, r, bw);
    for (int q = 0; q < ZZ_KINDS; q++) {
      int set = zz_gemv_kind[q].set;
      if (!want[q]) {
        frac[q][r] = cfrac[q][r] = cgbs[q][r] = 0;
        printf(",0,0,0");
        continue;
      }
      zz_layer_call c = {pool, q, n, x, wc[set], copies[set], 0, y, xb};
      double gbs = bytes[set] / zz_bench_best(zz_layer_run, &c, 3, 0) / 1e9;
      frac[q][r] = gbs / bw;
      /* by CPU time: the layer against a streaming sum of the same copies */
      zz_read_call rc = {pool, wc[set], len[set], first[set], 7 * copies[set]};
      double cpu_read = zz_cpu_best(zz_read_run, &rc, 2, threads) / copies[set]; /* one copy's share */
      double cpu_layer = zz_cpu_best(zz_layer_run, &c, copies[set] > 3 ? copies[set] : 3, threads);
      cfrac[q][r] = cpu_read / cpu_layer;
      cgbs[q][r] = bytes[set] / cpu_layer / 1e9;
      if (gbs > best[q]) best[q] = gbs;
      printf(",%.2f,%.3f,%.3f", gbs, frac[q][r], cfrac[q][r]);
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
  printf("# by CPU time (median of %d rounds), the layer's read rate over a streaming sum of the same bytes:", rounds);
  for (int q = 0; q < ZZ_KINDS; q++)
    printf(" %s %.3f (%.2f GB/s, %.1f GFLOP/s while on the CPU)%s", zz_gemv_kind[q].name,
           zz_bench_median(cfrac[q], rounds), zz_bench_median(cgbs[q], rounds),
           2.0 * (double)n * params * zz_bench_median(cgbs[q], rounds) / bytes[zz_gemv_kind[q].set],
           q + 1 < ZZ_KINDS ? "," : "\n");
  printf("# best of %d rounds: read %.2f GB/s;", rounds, best_bw);
  for (int q = 0; q < ZZ_KINDS; q++)
    printf(" %s %.2f GB/s = %.3f of it (%.1f GFLOP/s)%s", zz_gemv_kind[q].name, best[q], best[q] / best_bw,
           2.0 * (double)n * params * best[q] / bytes[zz_gemv_kind[q].set], q + 1 < ZZ_KINDS ? "," : "\n");
  for (int s = 0; s < ZZ_SETS; s++) {
    for (int m = 0; m < 7 * copies[s]; m++) free(wc[s][m]);
    free(wc[s]), free(len[s]), free(first[s]);
  }
  free(x), free(y), free(xb);
  zz_pool_destroy(pool);
  return 0;
}
