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
 * The tiles are a function of the shape alone, never of the thread count: the
 * rounding of an sgemm element depends on the call's whole (M, N, K) — on an AVX2
 * Zen 3 the same element differed between one 37 x 3072 call and its 1024-column
 * tiles, and between one 600-row call and its 64-row tiles — so tiles that followed
 * the thread count gave other bits with other --threads (and an mpirun rank, which
 * gets fewer threads, other tokens than one process). The results equal
 * zz_cpu_linear's up to that rounding.
 */
#include <cblas.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* Column tiles of this many outputs (whole vectors), for fewer than
 * ZZ_GEMM_BY_ROWS rows: a 512-wide w tile of a 2048-wide layer is 4 MiB, so the
 * copy of x each tile packs stays a few percent of its work, and a layer of 2048
 * outputs still gives 4 tiles to share. */
#define ZZ_GEMM_COL_TILE 512
/* From this many rows on, tiles of ZZ_GEMM_ROW_TILE rows (each packs all of w). */
#define ZZ_GEMM_BY_ROWS 1024
#define ZZ_GEMM_ROW_TILE 512

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
  zz_gemm_job j = {x, w, b, y, n, in, out, ZZ_GEMM_COL_TILE, relu, n >= ZZ_GEMM_BY_ROWS};
  if (n * out < 2 * ZZ_GEMM_COL_TILE) {
    zz_cpu_linear(x, n, in, w, b, out, y, relu);
    return;
  }
  if (j.by_rows) j.tile = ZZ_GEMM_ROW_TILE;
  int64_t lim = j.by_rows ? n : out;
  zz_pool_run(pool, zz_gemm_tile, &j, (lim + j.tile - 1) / j.tile);
}
