/*
 * gemm_pool.c — the CPU device's f32 linear on its own thread pool, so one set of
 * threads does all of a step's work.
 *
 * With OpenBLAS threaded, its workers spin (sched_yield) for a while after every
 * GEMM, just when the pool's workers start layernorm or attention, and the pool's
 * workers sleep while OpenBLAS's run: two sets of threads fighting over the same
 * cores (on a 2-core machine ~6% of a decode step went to __schedule/sched_yield).
 * zz_cpu_blas_single() makes OpenBLAS run every call on its caller's thread, and
 * zz_cpu_linear_pool() cuts a GEMM into tiles over the pool's threads, each tile
 * one single-threaded sgemm:
 *  - few rows (decoding: n = the GPU batch): tiles of output columns, so every
 *    column of w is packed once in all, as OpenBLAS's own threading does;
 *  - many rows (prefill): tiles of rows, each zz_cpu_linear (the reference), w
 *    packed once per tile, which is small beside the rows' work.
 * The results are those of zz_cpu_linear up to the summation order of sgemm's
 * k-blocking, which is the same per element (tiles cut n or out, never in).
 */
#include <cblas.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* Column tiles of about this many outputs: a 2048-wide w tile is 8 MiB, so the
 * copy of x each tile packs stays a few percent of its work. */
#define ZZ_GEMM_COL_TILE 1024
/* Row tiles of at least this many rows (each packs all of w once). */
#define ZZ_GEMM_ROW_TILE 256

typedef struct zz_gemm_job {
  const float *x, *w, *b; /* x [n, in], w [out, in], b [out] or NULL */
  float *y;               /* [n, out] */
  int64_t n, in, out, tile;
  int relu, by_rows;
} zz_gemm_job;

static void zz_gemm_tile(void *arg, int64_t t) {
  const zz_gemm_job *j = arg;
  int64_t lim = j->by_rows ? j->n : j->out, a = t * j->tile, m = lim - a < j->tile ? lim - a : j->tile;
  if (j->by_rows) {
    zz_cpu_linear(j->x + a * j->in, m, j->in, j->w, j->b, j->out, j->y + a * j->out, j->relu);
    return;
  }
  /* y[:, a .. a+m) = x · w[a .. a+m, :]ᵀ */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)m, (blasint)j->in, 1.0f, j->x,
              (blasint)j->in, j->w + a * j->in, (blasint)j->in, 0.0f, j->y + a, (blasint)j->out);
  zz_bias_relu_cols(j->y, j->n, j->out, a, m, j->b, j->relu);
}

void zz_cpu_blas_single(void) { openblas_set_num_threads(1); }

void zz_cpu_linear_pool(zz_pool *pool, const float *x, int64_t n, int64_t in, const float *w, const float *b,
                        int64_t out, float *y, int relu) {
  int64_t threads = zz_pool_threads(pool);
  zz_gemm_job j = {x, w, b, y, n, in, out, 0, relu, 0};
  if (threads <= 1 || n * out < 2 * ZZ_GEMM_COL_TILE) {
    zz_cpu_linear(x, n, in, w, b, out, y, relu);
    return;
  }
  j.by_rows = n >= threads * ZZ_GEMM_ROW_TILE;
  if (j.by_rows) {
    j.tile = (n + threads - 1) / threads;
    if (j.tile > 4 * ZZ_GEMM_ROW_TILE) j.tile = 4 * ZZ_GEMM_ROW_TILE;
  } else {
    int64_t tiles = (out + ZZ_GEMM_COL_TILE - 1) / ZZ_GEMM_COL_TILE;
    if (tiles < threads) tiles = threads;
    j.tile = (out + tiles - 1) / tiles;
    j.tile = (j.tile + 15) / 16 * 16; /* whole vectors per tile */
  }
  int64_t lim = j.by_rows ? n : out;
  zz_pool_run(pool, zz_gemm_tile, &j, (lim + j.tile - 1) / j.tile);
}
