/*
 * cpu_gemm_bench.c — the CPU device's linear (kernels/cpu/linear.c) on a model's
 * layer shapes, every weight dtype, against the machine's own ceilings measured
 * in the same run (bench/peak.c) and against the portable path (what an AVX2 CPU
 * ran before the vector bf16 and fused 4-bit micro-kernels):
 *   sgemm       zz_cpu_linear (OpenBLAS, its own threads; packs W on every call)
 *   f32         zz_cpu_linear_w, f32 weights (own kernels, or sgemm tiles on the pool where
 *               zz_cpu_gemm_own says no)
 *   f32tiles    zz_cpu_linear_pool, f32 weights: sgemm tiles on the pool at every n (what
 *               f32 runs from ZZ_F32_SGEMM_N; its crossover with the own kernels)
 *   bf16        zz_cpu_linear_w, bf16 weights (x rounded to bf16 once per call)
 *   q4          zz_cpu_linear_q, 4-bit groups of 64 (fused at n <= 16, panels above)
 *   q8          the same with 8-bit groups of 64
 *   q4i8, q8i8  the same with x in int8 (--cpu-act int8, kernels/cpu/linear_int8.c);
 *               their last column is the time of q4 (q8) over theirs, same run
 *   ..._portable the same under ZZ_CPU_ISA=portable
 * Each row: GFLOP/s (the best of 3 rounds) and its fraction of the compute peak
 * of the instructions the kernel can use (the median over the rounds of the
 * round's GFLOP/s over that peak measured again right after it, zz_peak_now:
 * this host's peaks drift by half within an hour, so a peak taken once at the
 * start gave the same bf16 shape 0.55 in one run and 0.74 in the next; in a
 * round the kernel and the peak are each the best of 3 runs of the same
 * length, a call or calls filling 0.1 s: with one run of the kernel against
 * the best of three 20 ms bursts of the probe, a neighbour's burst of a few
 * hundred ms lowered the kernel's figure and rarely the peak's;
 * ceiling_gflops: the median of those peaks), named in the ceiling column: f32_fma, or bf16_dot (vdpbf16ps)
 * for bf16 where the CPU has avx512_bf16; without it bf16 is widened to f32 and
 * multiplied by FMA, so f32_fma is its ceiling (bf16_widened_f32_fma); amx_bf16
 * (tdpbf16ps) where bf16 takes AMX tiles (ISA amx, zz_cpu_gemm_amx); int8_dot
 * (GOP/s of the u8 x s8 dot the probe found) for q4i8 and q8i8, amx_int8 (tdpbusd)
 * where they take the AMX int8 tile,
 * and the weight bytes per second and their fraction of the streaming read
 * bandwidth (the bound at small n, where a linear reads each weight once; paired
 * the same way, zz_peak_read right after each round: read_gbs, the median).
 * Each call reads its weights from memory, as a model's layers do: the calls
 * cycle through copies of W that together exceed any last-level cache
 * (ZZ_BENCH_COLD_BYTES); with one copy, a 32 MiB W sat in a 36 MiB L3 in
 * some runs and not in others.
 * CSV on stdout, the peaks on stderr. Not a test: never part of ctest.
 *
 *   cpu_gemm_bench [threads=2] [Ms=1,16,64] [shapes=llama7b|opt1.3b|opt350m] [kernels=all|list]
 * kernels: a comma list of whole names from sgemm, f32, f32tiles, bf16, q4, q8, q4i8, q8i8 and portable
 * (the portable rows of bf16 and q4, when those are listed); all: every one. A name never matches inside
 * another (q4i8 runs q4i8 alone; q4i8's last column then needs q4 in the list too); an unknown one is refused.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "peak.h"

typedef enum { K_SGEMM, K_F32, K_F32T, K_BF16, K_Q4, K_Q8, K_Q4I8, K_Q8I8, K_COUNT } zz_kind;
static const char *const zz_kind_names[K_COUNT] = {"sgemm", "f32", "f32tiles", "bf16", "q4", "q8", "q4i8", "q8i8"};
static const zz_qfmt zz_q8fmt = {8, 64};

typedef struct zz_gemm_call {
  zz_pool *pool;
  zz_kind kind;
  const float *x, *b;
  void *const *ws; /* the copies of W, one per call in turn */
  int nw, next;
  int64_t n, in, out;
  float *y;
  void *xb;
} zz_gemm_call;

#define ZZ_BENCH_COLD_BYTES ((size_t)256 << 20) /* more than the L3 of any CPU these runs meet */

/* Copies of w (bytes long; w itself the first) that together reach
 * ZZ_BENCH_COLD_BYTES: *n of them. */
static void **zz_cold_copies(void *w, size_t bytes, int *n) {
  *n = (int)((ZZ_BENCH_COLD_BYTES + bytes - 1) / bytes);
  void **c = malloc((size_t)*n * sizeof *c);
  c[0] = w;
  for (int i = 1; i < *n; i++) c[i] = memcpy(malloc(bytes), w, bytes);
  return c;
}

static void zz_cold_free(void **c, int n) {
  for (int i = 0; i < n; i++) free(c[i]);
  free(c);
}

static void zz_gemm_run(void *arg) {
  zz_gemm_call *c = arg;
  const void *w = c->ws[c->next];
  c->next = (c->next + 1) % c->nw;
  switch (c->kind) {
    case K_SGEMM: zz_cpu_linear(c->x, c->n, c->in, w, c->b, c->out, c->y, 0); break;
    case K_F32: zz_cpu_linear_w(c->pool, c->x, c->n, c->in, w, ZZ_DTYPE_F32, c->b, c->out, c->y, 0, c->xb); break;
    case K_F32T: zz_cpu_linear_pool(c->pool, c->x, c->n, c->in, w, c->b, c->out, c->y, 0); break;
    case K_BF16: zz_cpu_linear_w(c->pool, c->x, c->n, c->in, w, ZZ_DTYPE_BF16, c->b, c->out, c->y, 0, c->xb); break;
    default: {
      zz_qfmt f = c->kind == K_Q4 || c->kind == K_Q4I8 ? ZZ_QFMT_DEFAULT : zz_q8fmt;
      zz_cpu_act act = c->kind >= K_Q4I8 ? ZZ_CPU_ACT_INT8 : ZZ_CPU_ACT_F32;
      zz_cpu_linear_q(c->pool, c->x, c->n, c->in, w, f, act, c->b, c->out, c->y, 0);
      break;
    }
  }
}

/* The ceiling of kind (p: its portable row) at m rows, and its name. */
static zz_peak_kind zz_ceiling_of(zz_kind kind, int p, int64_t m, int64_t in, const zz_peak *pk, const char **name) {
  if (kind == K_BF16 && p == 0 && pk->amx_bf16 > 0 && zz_cpu_gemm_amx(m, in, ZZ_DTYPE_BF16)) {
    *name = "amx_bf16"; /* bf16 on AMX tiles (ISA amx, from enough rows) */
    return ZZ_PEAK_AMX_BF16;
  }
  if (kind == K_BF16 && p == 0 && pk->bf16 > 0 && zz_cpu_has_bf16()) {
    *name = "bf16_dot";
    return ZZ_PEAK_BF16;
  }
  if (kind >= K_Q4I8 && p == 0 && pk->amx_int8 > 0 && zz_cpu_isa_get() == ZZ_CPU_ISA_AMX && m >= 4 && in % 64 == 0) {
    *name = "amx_int8"; /* the int8 tile on tdpbsud (ISA amx, linear_int8.c's zz_xq_tile_pick: from 4 rows) */
    return ZZ_PEAK_AMX_INT8;
  }
  if (kind >= K_Q4I8 && pk->int8 > 0) { /* integer dots: the int8 dot peak (GOP/s) */
    *name = "int8_dot";
    return ZZ_PEAK_INT8;
  }
  *name = kind == K_BF16 ? "bf16_widened_f32_fma" : "f32_fma";
  return ZZ_PEAK_F32;
}

/* Whether the comma list names `name` whole, or is "all": the one filter of
 * every kernel and the portable rows. */
static bool zz_list_has(const char *list, const char *name) {
  if (strcmp(list, "all") == 0) return true;
  size_t n = strlen(name);
  for (const char *p = list;; p++) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, name, n) == 0) return true;
    p += len;
    if (!*p) return false;
  }
}

/* Every name of the list a kernel or "portable" (or the list "all"); else says which is not. */
static bool zz_list_known(const char *list) {
  if (strcmp(list, "all") == 0) return true;
  for (const char *p = list;; p++) {
    size_t len = strcspn(p, ",");
    bool ok = len == strlen("portable") && strncmp(p, "portable", len) == 0;
    for (int k = 0; k < K_COUNT && !ok; k++)
      ok = len == strlen(zz_kind_names[k]) && strncmp(p, zz_kind_names[k], len) == 0;
    if (!ok) {
      fprintf(stderr,
              "cpu_gemm_bench: kernels: unknown name \"%.*s\" (want all, or a comma list of sgemm, f32, "
              "f32tiles, bf16, q4, q8, q4i8, q8i8, portable)\n",
              (int)len, p);
      return false;
    }
    p += len;
    if (!*p) return true;
  }
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *ms = argc > 2 ? argv[2] : "1,16,64";
  const char *shapes = argc > 3 ? argv[3] : "llama7b";
  const char *kinds = argc > 4 ? argv[4] : "all";
  if (!zz_list_known(kinds)) return 1;
  zz_pool *pool = NULL;
  if (threads < 1 || zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "cpu_gemm_bench: cannot make a pool of %d threads\n", threads);
    return 1;
  }
  zz_cpu_blas_single(); /* as the CPU device does: sgemm tiles on the pool */
  zz_peak pk;
  char model[256];
  zz_peak_cpu_model(model, sizeof model);
  zz_peak_measure(threads, 0.05, &pk);
  zz_cpu_isa best = zz_cpu_isa_get();
  fprintf(stderr,
          "cpu_gemm_bench: %s, %d threads, ISA %s; peaks: f32 %.1f GFLOP/s (%s), bf16 %.1f (%s), int8 %.1f GOP/s "
          "(%s), read %.1f GB/s\n",
          model, threads, zz_cpu_isa_name(best), pk.f32, pk.f32_isa, pk.bf16, pk.bf16_isa, pk.int8, pk.int8_isa,
          pk.read_gbs);

  static const struct {
    const char *model, *name;
    int64_t in, out;
  } ops[] = {{"llama7b", "qkv_o", 4096, 4096},    {"llama7b", "gate_up", 4096, 11008}, {"llama7b", "down", 11008, 4096},
             {"opt1.3b", "out_proj", 2048, 2048}, {"opt1.3b", "fc1", 2048, 8192},      {"opt1.3b", "fc2", 8192, 2048},
             {"opt350m", "out_proj", 1024, 1024}, {"opt350m", "fc1", 1024, 4096},      {"opt350m", "fc2", 4096, 1024}};
  int64_t mlist[16], nm = 0;
  char *list = strdup(ms);
  for (char *tok = strtok(list, ","); tok && nm < 16; tok = strtok(NULL, ","))
    if (atoll(tok) > 0) mlist[nm++] = atoll(tok);
  free(list);

  printf("cpu,op,m,in,out,kernel,isa,gflops,frac_compute_peak,ceiling,ceiling_gflops,weight_gbs,frac_read_bw,read_gbs,"
         "vs_portable\n");
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    if (strcmp(ops[k].model, shapes) != 0) continue;
    int64_t in = ops[k].in, out = ops[k].out;
    float *w = zz_bench_fill(in * out, 6), *b = zz_bench_fill(out, 7);
    uint16_t *wb = malloc((size_t)(in * out) * sizeof *wb);
    void *wq = malloc(zz_q_row_bytes(ZZ_QFMT_DEFAULT, in) * (size_t)out);
    void *wq8 = malloc(zz_q_row_bytes(zz_q8fmt, in) * (size_t)out);
    zz_convert(ZZ_DTYPE_F32, w, ZZ_DTYPE_BF16, wb, in * out);
    zz_q_quantize(ZZ_QFMT_DEFAULT, w, out, in, wq);
    zz_q_quantize(zz_q8fmt, w, out, in, wq8);
    const double b4 = (double)zz_q_row_bytes(ZZ_QFMT_DEFAULT, in) * out,
                 b8 = (double)zz_q_row_bytes(zz_q8fmt, in) * out;
    int n32, n16, nq4, nq8;
    void **c32 = zz_cold_copies(w, 4 * (size_t)(in * out), &n32),
         **c16 = zz_cold_copies(wb, 2 * (size_t)(in * out), &n16);
    void **cq4 = zz_cold_copies(wq, (size_t)b4, &nq4), **cq8 = zz_cold_copies(wq8, (size_t)b8, &nq8);
    void **const wk[K_COUNT] = {c32, c32, c32, c16, cq4, cq8, cq4, cq8};
    const int nwk[K_COUNT] = {n32, n32, n32, n16, nq4, nq8, nq4, nq8};
    const double wbytes[K_COUNT] = {4.0 * in * out, 4.0 * in * out, 4.0 * in * out, 2.0 * in * out, b4, b8, b4, b8};
    double t_exact[K_COUNT] = {0}; /* q4, q8 at this m: what q4i8, q8i8 are compared with */
    for (int64_t i = 0; i < nm; i++) {
      int64_t m = mlist[i];
      float *x = zz_bench_fill(m * in, 5), *y = zz_bench_fill(m * out, 8);
      size_t xb_f32 = zz_cpu_gemm_scratch(m, in, ZZ_DTYPE_F32), xb_bf16 = zz_cpu_gemm_scratch(m, in, ZZ_DTYPE_BF16);
      void *xb = malloc(xb_f32 > xb_bf16 ? xb_f32 : xb_bf16); /* one scratch for both dtypes' calls */
      double flop = 2.0 * (double)m * (double)in * (double)out;
      /* the best of 3 rounds, the kernels interleaved in each (A B A B …): on a
       * shared machine a neighbour's burst then hits every kernel alike */
      enum { ROUNDS = 3 };
      double tk[K_COUNT][2] = {{0}}; /* best ISA, portable */
      double frac[K_COUNT][2][ROUNDS], cpk[K_COUNT][2][ROUNDS], rfrac[K_COUNT][2][ROUNDS], rbw[K_COUNT][2][ROUNDS];
      for (int round = 0; round < ROUNDS; round++)
        for (int kind = 0; kind < K_COUNT; kind++) {
          if (!zz_list_has(kinds, zz_kind_names[kind])) continue;
          zz_gemm_call c = {pool, (zz_kind)kind, x, b, wk[kind], nwk[kind], 0, m, in, out, y, xb};
          int np = kind >= K_BF16 && kind <= K_Q4 && zz_list_has(kinds, "portable") ? 2 : 1;
          for (int p = 0; p < np; p++) {
            zz_cpu_isa_set(p ? ZZ_CPU_ISA_PORTABLE : best);
            /* the kernel and its peak timed alike, one right after the other:
             * each the best of 3 runs of the same length (a call, or calls
             * filling 0.1 s) */
            double min_s = flop > 2e10 ? 0 : 0.1, tt = zz_bench_best(zz_gemm_run, &c, 3, min_s);
            if (tk[kind][p] == 0 || tt < tk[kind][p]) tk[kind][p] = tt;
            const char *name;
            double now = zz_peak_now(zz_ceiling_of((zz_kind)kind, p, m, in, &pk, &name), threads,
                                     tt > min_s ? tt : min_s);
            cpk[kind][p][round] = now;
            frac[kind][p][round] = now > 0 ? flop / tt / 1e9 / now : 0;
            rbw[kind][p][round] = zz_peak_read(threads);
            rfrac[kind][p][round] = rbw[kind][p][round] > 0 ? wbytes[kind] / tt / 1e9 / rbw[kind][p][round] : 0;
          }
          zz_cpu_isa_set(best);
        }
      for (int kind = 0; kind < K_COUNT; kind++) {
        if (!zz_list_has(kinds, zz_kind_names[kind])) continue;
        double t[2] = {tk[kind][0], tk[kind][1]};
        t_exact[kind] = t[0];
        if (kind >= K_Q4I8 && t_exact[kind - 2] > 0) t[1] = t_exact[kind - 2]; /* the last column: exact over int8 */
        for (int p = 0; p < 2 && !(p == 1 && kind >= K_Q4I8); p++) {
          if (t[p] <= 0) continue;
          const char *ceiling;
          zz_ceiling_of((zz_kind)kind, p, m, in, &pk, &ceiling);
          double gf = flop / t[p] / 1e9, gbs = wbytes[kind] / t[p] / 1e9;
          printf("%s,%s,%lld,%lld,%lld,%s%s,%s,%.1f,%.3f,%s,%.1f,%.2f,%.3f,%.1f,", model, ops[k].name, (long long)m,
                 (long long)in, (long long)out, zz_kind_names[kind], p ? "_portable" : "",
                 p ? "portable" : zz_cpu_isa_name(best), gf, zz_bench_median(frac[kind][p], ROUNDS), ceiling,
                 zz_bench_median(cpk[kind][p], ROUNDS), gbs, zz_bench_median(rfrac[kind][p], ROUNDS),
                 zz_bench_median(rbw[kind][p], ROUNDS));
          if (p == 0 && t[1] > 0) printf("%.2f\n", t[1] / t[0]);
          else
            printf("\n");
        }
        fflush(stdout);
      }
      free(x), free(y), free(xb);
    }
    free(b);
    zz_cold_free(c32, n32), zz_cold_free(c16, n16), zz_cold_free(cq4, nq4), zz_cold_free(cq8, nq8);
  }
  zz_pool_destroy(pool);
  return 0;
}
