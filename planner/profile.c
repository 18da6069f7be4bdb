/*
 * profile.c — `zigzag profile`: this machine measured the way the engine uses it,
 * written as a hardware file (hw.c). Every figure goes through the engine's own
 * paths: the device's upload (stored dtype → compute dtype) and read on the copy
 * lanes, the disk tier's file (zz_disk_measure: page cache bypassed), the
 * device's linear op at GEMM rows M = 1 … (decode-shaped small M up to
 * prefill-shaped large M), the device's attention op in prefill and decode shape,
 * the CPU attention kernel per thread count (its own pool each time), and the
 * same ops over 4-bit weights and caches plus the cache append that quantizes
 * (where the device has 4-bit ops; on the CPU device the 4-bit linear again with
 * int8 activations, --cpu-act int8). Each
 * measurement runs for ~budget/24 seconds in windows and keeps the median
 * window's time per call: what a long run sustains, also on a machine shared
 * with other jobs (the best time would describe the quiet moments only).
 *
 * Inside a cgroup with a CPU quota (a container, a machine of bench/cluster.sh)
 * a short burst runs at full speed until the period's quota is spent, then
 * waits: timing calls one by one described the burst, several times faster than
 * what a run sustains, and differed from one profile to the next. So each window
 * spans several quota periods and is charged at least the CPU time it used
 * divided by the quota (the kernel grants no more per second of wall time), and
 * windows repeat until three agree within 10%. The file records the cores and
 * memory the cgroup gives (zz_limits.h), not the host's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zz_limits.h"
#include "zz_planner.h"

typedef struct zz_prof {
  zz_device *dev;
  double slice_s;  /* seconds per measurement (without a quota) */
  double window_s; /* seconds per window */
  double quota;    /* CPU-seconds per second the cgroup grants (0: no quota) */
  int cores;       /* CPUs this process may keep busy (zz_limits.h) */
  bool verbose;
} zz_prof;

int zz_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* CPU seconds used by every thread of this process. */
static double zz_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The sustained seconds per call of fn: windows of window_s (at least one call
 * each), each charged max(wall, CPU / quota) over its calls, repeated until the
 * last three agree within 10% (at most ZZ_PROF_MAX_WINDOWS); their median. */
#define ZZ_PROF_MAX_REPS 1024
#define ZZ_PROF_MAX_WINDOWS 9
#define ZZ_PROF_AGREE 1.10
typedef zz_status (*zz_prof_fn)(void *arg);
static zz_status zz_median_s(const zz_prof *p, zz_prof_fn fn, void *arg, double *out) {
  ZZ_CHECK(fn(arg)); /* warm-up */
  double w[ZZ_PROF_MAX_WINDOWS];
  int nw = 0;
  for (;;) {
    double t0 = zz_now(), c0 = zz_cpu_now(), wall = 0;
    int n = 0;
    while (n < ZZ_PROF_MAX_REPS && (n < 1 || wall < p->window_s)) {
      ZZ_CHECK(fn(arg));
      n++;
      wall = zz_now() - t0;
    }
    double cpu = zz_cpu_now() - c0, charged = p->quota > 0 && cpu / p->quota > wall ? cpu / p->quota : wall;
    w[nw++] = charged / n;
    if (nw >= 3) {
      double last[3] = {w[nw - 3], w[nw - 2], w[nw - 1]};
      qsort(last, 3, sizeof *last, zz_cmp_double);
      if (last[2] <= ZZ_PROF_AGREE * last[0] || nw == ZZ_PROF_MAX_WINDOWS) {
        *out = last[1];
        if (p->verbose && last[2] > ZZ_PROF_AGREE * last[0])
          fprintf(stderr,
                  "profile: note: %d windows still spread %.0f%% (a busy machine?); kept the median of the last 3\n",
                  nw, 100 * (last[2] / last[0] - 1));
        return ZZ_OK;
      }
    }
  }
}

/* ---------------------------------------------------------------- copies */

typedef struct {
  zz_device *dev;
  void *d, *h;
  int64_t n; /* f16 elements */
  bool up;
} zz_copy_arg;

static zz_status zz_copy_once(void *a_) {
  zz_copy_arg *a = a_;
  if (a->up) {
    ZZ_CHECK(zz_device_upload(a->dev, ZZ_LANE_LOAD_WEIGHT, a->d, a->h, ZZ_DTYPE_F16, a->n));
    return zz_device_sync(a->dev, ZZ_LANE_LOAD_WEIGHT);
  }
  size_t bytes = zz_dtype_nbytes(zz_device_describe(a->dev)->compute_dtype, a->n);
  ZZ_CHECK(zz_device_read(a->dev, ZZ_LANE_STORE_CACHE, a->h, a->d, bytes));
  return zz_device_sync(a->dev, ZZ_LANE_STORE_CACHE);
}

static zz_status zz_prof_copies(const zz_prof *p, zz_hw *hw) {
  int64_t n = (int64_t)64 << 20; /* 128 MiB of f16: more than any cache holds, as a model's weights */
  size_t db = zz_dtype_nbytes(zz_device_describe(p->dev)->compute_dtype, n);
  zz_copy_arg a = {.dev = p->dev, .n = n};
  zz_status st = zz_device_alloc(p->dev, db, &a.d);
  if (st == ZZ_OK) st = zz_device_host_alloc(p->dev, db, &a.h);
  if (st == ZZ_OK) { /* weight-like halves, all different: a converter's speed can depend on the values */
    memset(a.h, 0, db);
    uint16_t *h = a.h;
    for (int64_t i = 0; i < n; i++)
      h[i] = zz_f32_to_f16(((float)((uint32_t)i * 2654435761u >> 16) / 65536.0f - 0.5f) * 0.1f);
  }
  double t = 0;
  if (st == ZZ_OK) {
    a.up = true;
    st = zz_median_s(p, zz_copy_once, &a, &t);
    hw->ctog_bw = (double)zz_dtype_nbytes(ZZ_DTYPE_F16, n) / t; /* bytes of the stored dtype */
  }
  if (st == ZZ_OK) {
    a.up = false;
    st = zz_median_s(p, zz_copy_once, &a, &t);
    hw->gtoc_bw = (double)db / t;
  }
  if (a.h) zz_device_host_free(p->dev, a.h);
  if (a.d) zz_device_free(p->dev, a.d);
  return st;
}

/* ---------------------------------------------------------------- GEMM */

/* The weights a GEMM measurement cycles through: more bytes than any cache
 * holds (the largest last-level caches, a CPU's L3 or a GPU's L2, are tens of
 * MiB), so every call reads its weight from memory as a model's layers do. One
 * 2048 x 2048 matrix fits in a cache; measured alone, a decode-shaped GEMM (small
 * M, bound by the weight's bytes) looked several times faster than the engine's
 * layers run. */
#define ZZ_PROF_RING_BYTES ((size_t)256 << 20)
#define ZZ_PROF_RING_MAX 64

typedef struct {
  zz_device *dev;
  void *x, *y;
  zz_tensor w[ZZ_PROF_RING_MAX];
  int n_w, next;
  int64_t m, k, n;
} zz_gemm_arg;

static zz_status zz_gemm_once(void *a_) {
  zz_gemm_arg *a = a_;
  const zz_tensor *w = &a->w[a->next];
  a->next = (a->next + 1) % a->n_w;
  ZZ_CHECK(zz_device_linear(a->dev, a->x, a->m, a->k, w, NULL, a->n, a->y, 0));
  return zz_device_sync(a->dev, ZZ_LANE_COMPUTE);
}

/* n small numbers in host memory (free with free()). */
static float *zz_host_fill(int64_t n) {
  float *h = malloc((size_t)n * sizeof *h);
  if (h)
    for (int64_t i = 0; i < n; i++) h[i] = (float)((i * 7919) % 17) * 0.01f - 0.08f;
  return h;
}

/* A device block of n compute-dtype values, filled with small numbers. */
static zz_status zz_dev_fill(zz_device *dev, int64_t n, void **out) {
  size_t b = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, n);
  ZZ_CHECK(zz_device_alloc(dev, b, out));
  float *h = zz_host_fill(n);
  if (!h) return zz_error(ZZ_ERR_NO_MEMORY, "profile: out of memory");
  zz_status st = zz_device_upload(dev, ZZ_LANE_COMPUTE, *out, h, ZZ_DTYPE_F32, n);
  if (st == ZZ_OK) st = zz_device_sync(dev, ZZ_LANE_COMPUTE);
  free(h);
  return st;
}

/* A device block of rows x len values stored as the engine stores them off the
 * compute dtype: quantized in format f (dt Q4, kernels/cpu/quant.c) or in bf16
 * (the CPU device's --cpu-dtype bf16 weights); *bytes_out bytes. */
static zz_status zz_dev_fill_as(zz_device *dev, zz_dtype dt, zz_qfmt f, int64_t rows, int64_t len, void **out,
                                size_t *bytes_out) {
  bool q4 = dt == ZZ_DTYPE_Q4;
  size_t bytes = q4 ? (size_t)rows * zz_q_row_bytes(f, len) : zz_dtype_nbytes(dt, rows * len);
  ZZ_CHECK(zz_device_alloc(dev, bytes, out));
  float *h = zz_host_fill(rows * len);
  void *q = malloc(bytes);
  zz_status st = h && q ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "profile: out of memory");
  if (st == ZZ_OK && q4) zz_q_quantize(f, h, rows, len, q);
  if (st == ZZ_OK && !q4) zz_convert(ZZ_DTYPE_F32, h, dt, q, rows * len);
  if (st == ZZ_OK) st = zz_device_write(dev, ZZ_LANE_COMPUTE, *out, q, bytes);
  if (st == ZZ_OK) st = zz_device_sync(dev, ZZ_LANE_COMPUTE);
  free(h), free(q);
  if (bytes_out) *bytes_out = bytes;
  return st;
}

/* The device's linear op (the engine's, whatever kernel the device runs for it)
 * on [M, 2048] x [2048, 2048] for M = 1, 2, 4, 8, ... (a kernel can change between
 * two of them: the CPU device hands M > 64 to sgemm): weights wdt in the compute
 * dtype, in 4 bits (dequantize and multiply) or in bf16 (--cpu-dtype bf16), each
 * call on the next weight of a ring larger than the caches (ZZ_PROF_RING_BYTES). */
static zz_status zz_prof_gemm(const zz_prof *p, zz_dtype wdt, zz_hw_point *pts, int *n_pts) {
  const int64_t K = 2048, N = 2048, max_m = 4096;
  zz_gemm_arg a = {.dev = p->dev, .k = K, .n = N};
  bool q4 = wdt == ZZ_DTYPE_Q4;
  zz_status st = ZZ_OK;
  size_t ring = 0;
  for (a.n_w = 0; st == ZZ_OK && a.n_w < ZZ_PROF_RING_MAX && (a.n_w < 2 || ring < ZZ_PROF_RING_BYTES); a.n_w++) {
    zz_tensor *w = &a.w[a.n_w];
    *w = (zz_tensor){.dtype = wdt, .ndim = 2, .shape = {N, K}, .tier = ZZ_TIER_GPU};
    snprintf(w->name, sizeof w->name, "profile.gemm.weight%d", a.n_w);
    if (q4) w->q = ZZ_QFMT_DEFAULT;
    if (a.n_w > 0) { /* the ring's others: copies of the first, made on the device */
      w->nbytes = a.w[0].nbytes;
      st = zz_device_alloc(p->dev, w->nbytes, &w->data);
      if (st == ZZ_OK) st = zz_device_copy(p->dev, ZZ_LANE_COMPUTE, w->data, a.w[0].data, w->nbytes);
    } else if (q4 || wdt == ZZ_DTYPE_BF16) {
      st = zz_dev_fill_as(p->dev, wdt, w->q, N, K, &w->data, &w->nbytes);
    } else {
      w->nbytes = zz_dtype_nbytes(wdt, N * K);
      st = zz_dev_fill(p->dev, N * K, &w->data);
    }
    ring += w->nbytes;
  }
  if (st == ZZ_OK) st = zz_device_sync(p->dev, ZZ_LANE_COMPUTE);
  if (st == ZZ_OK) st = zz_dev_fill(p->dev, max_m * K, &a.x);
  if (st == ZZ_OK)
    st = zz_device_alloc(p->dev, zz_dtype_nbytes(zz_device_describe(p->dev)->compute_dtype, max_m * N), &a.y);
  *n_pts = 0;
  for (int64_t m = 1; st == ZZ_OK && m <= max_m && *n_pts < ZZ_HW_MAX_POINTS; m *= 2) {
    a.m = m;
    double t;
    st = zz_median_s(p, zz_gemm_once, &a, &t);
    if (st != ZZ_OK) break;
    pts[(*n_pts)++] = (zz_hw_point){(double)m, 2.0 * (double)m * K * N / t};
    if (p->verbose)
      fprintf(stderr, "profile: GEMM%s M=%lld: %.3g GFLOP/s\n",
              q4 && zz_device_describe(p->dev)->cpu_act == ZZ_CPU_ACT_INT8 ? " (4-bit weights, int8 x)"
              : q4                                                         ? " (4-bit weights)"
              : wdt == ZZ_DTYPE_BF16                                       ? " (bf16 weights)"
                                                                           : "",
              (long long)m, pts[*n_pts - 1].y / 1e9);
    /* larger M only takes longer: stop once the calls are long and the curve
     * has flattened (a rate still climbing, as a slow kernel's at small M, would
     * be extrapolated flat from too low a point), or the calls are very long */
    bool flat = *n_pts >= 2 && pts[*n_pts - 1].y < 1.15 * pts[*n_pts - 2].y;
    if ((t > p->slice_s / 2.5 && flat) || t > 2 * p->slice_s) break;
  }
  if (a.y) zz_device_free(p->dev, a.y);
  if (a.x) zz_device_free(p->dev, a.x);
  for (int i = 0; i < a.n_w; i++)
    if (a.w[i].data) zz_device_free(p->dev, a.w[i].data);
  return st;
}

/* ---------------------------------------------------------------- attention */

/* Attention as the engine's layers call it (zz_device_attention), or the CPU
 * kernel beside a host cache (zz_cpu_attention_ex, as schedule.c's CPU attention
 * calls it), over a cache in the compute dtype or in 4 bits. */
typedef struct {
  zz_device *dev;
  zz_pool *pool; /* CPU attention: its pool; NULL: the device op */
  void *q, *k, *v, *out, *scratch;
  int32_t *pad;
  zz_kv_layout kv;
  int64_t b, sq, t, heads, hd;
} zz_attn_arg;

static zz_status zz_attn_once(void *a_) {
  zz_attn_arg *a = a_;
  zz_attn_args call = {.q = a->q,
                       .k = a->k,
                       .v = a->v,
                       .kv = a->kv,
                       .b = a->b,
                       .sq = a->sq,
                       .t = a->t,
                       .q_start = a->t - a->sq,
                       .heads = a->heads,
                       .kv_heads = a->heads,
                       .hd = a->hd,
                       .pad = a->pad,
                       .keep = 1,
                       .out = a->out,
                       .scratch = a->scratch};
  if (a->pool) {
    zz_cpu_attention_ex(a->pool, &call);
    return ZZ_OK;
  }
  ZZ_CHECK(zz_device_attention(a->dev, &call));
  return zz_device_sync(a->dev, ZZ_LANE_COMPUTE);
}

static double zz_attn_flops(const zz_attn_arg *a) { return 4.0 * a->b * a->sq * a->t * a->heads * a->hd; }

/* The cache layout: the compute dtype cdt, or FlexGen's 4-bit format. */
static zz_kv_layout zz_prof_kv(zz_dtype cdt, bool q4, int64_t t, int64_t heads, int64_t hd) {
  zz_kv_layout l = {.dt = q4 ? ZZ_DTYPE_Q4 : cdt, .q = q4 ? ZZ_QFMT_DEFAULT : (zz_qfmt){0, 0}};
  l.seq_bytes = t * (int64_t)zz_kv_row_bytes(l.dt, l.q, heads, hd);
  return l;
}

/* The device's attention op; sq = 1 is a decode step. */
static zz_status zz_prof_bmm(const zz_prof *p, bool q4, int64_t b, int64_t sq, int64_t t, double *rate) {
  zz_attn_arg a = {.dev = p->dev, .b = b, .sq = sq, .t = t, .heads = 16, .hd = 64};
  int64_t h = a.heads * a.hd;
  a.kv = zz_prof_kv(zz_device_describe(p->dev)->compute_dtype, q4, t, a.heads, a.hd);
  int32_t *pad0 = calloc((size_t)b, sizeof *pad0);
  size_t sb = zz_device_attention_scratch(p->dev, b, sq, t, a.heads, zz_attention_general(a.kv.dt, 1));
  zz_status st = pad0 ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "profile: out of memory");
  if (st == ZZ_OK) st = zz_dev_fill(p->dev, b * sq * h, &a.q);
  if (q4) {
    if (st == ZZ_OK) st = zz_dev_fill_as(p->dev, ZZ_DTYPE_Q4, a.kv.q, b * t * a.heads, a.hd, &a.k, NULL);
    if (st == ZZ_OK) st = zz_dev_fill_as(p->dev, ZZ_DTYPE_Q4, a.kv.q, b * t * a.heads, a.hd, &a.v, NULL);
  } else {
    if (st == ZZ_OK) st = zz_dev_fill(p->dev, b * t * h, &a.k);
    if (st == ZZ_OK) st = zz_dev_fill(p->dev, b * t * h, &a.v);
  }
  zz_dtype cdt = zz_device_describe(p->dev)->compute_dtype;
  if (st == ZZ_OK) st = zz_device_alloc(p->dev, zz_dtype_nbytes(cdt, b * sq * h), &a.out);
  if (st == ZZ_OK && sb) st = zz_device_alloc(p->dev, sb, &a.scratch);
  if (st == ZZ_OK) st = zz_device_alloc(p->dev, (size_t)b * sizeof(int32_t), (void **)&a.pad);
  if (st == ZZ_OK) st = zz_device_write(p->dev, ZZ_LANE_COMPUTE, a.pad, pad0, (size_t)b * sizeof(int32_t));
  double s = 0;
  if (st == ZZ_OK) st = zz_median_s(p, zz_attn_once, &a, &s);
  if (st == ZZ_OK) *rate = zz_attn_flops(&a) / s;
  void *blocks[] = {a.q, a.k, a.v, a.out, a.scratch, a.pad};
  for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++)
    if (blocks[i]) zz_device_free(p->dev, blocks[i]);
  free(pad0);
  return st;
}

/* CPU attention beside a host cache (decode shape), per thread count. */
static zz_status zz_prof_cpu_attn(const zz_prof *p, bool q4, zz_hw_point *pts, int *n_pts) {
  zz_attn_arg a = {.b = 32, .sq = 1, .t = 512, .heads = 16, .hd = 64};
  int64_t h = a.heads * a.hd;
  a.kv = zz_prof_kv(ZZ_DTYPE_F32, q4, a.t, a.heads, a.hd);
  size_t cb = (size_t)(a.b * a.kv.seq_bytes);
  float *q = malloc((size_t)(a.b * h) * 4), *o = malloc((size_t)(a.b * h) * 4);
  float *kf = zz_host_fill(a.b * a.t * h);
  void *k = malloc(cb), *v = malloc(cb);
  float *sc = malloc(zz_cpu_attention_scratch(a.b, a.heads, a.t) * 4);
  int32_t *pad = calloc((size_t)a.b, sizeof *pad);
  zz_status st = q && k && v && o && kf && sc && pad ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "profile: out of memory");
  if (st == ZZ_OK) {
    if (q4) {
      zz_q_quantize(a.kv.q, kf, a.b * a.t * a.heads, a.hd, k);
    } else {
      memcpy(k, kf, cb);
    }
    memcpy(v, k, cb);
    for (int64_t i = 0; i < a.b * h; i++) q[i] = (float)(i % 5) * 0.1f;
  }
  a.q = q, a.k = k, a.v = v, a.out = o, a.scratch = sc, a.pad = pad;
  int cores = p->cores;
  *n_pts = 0;
  for (int t = 1; st == ZZ_OK && *n_pts<ZZ_HW_MAX_POINTS; t = t * 2> cores && t < cores ? cores : t * 2) {
    if (t > cores) break;
    if (zz_pool_create(t, &a.pool) != 0) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "profile: cannot start %d threads", t);
      break;
    }
    double s = 0;
    st = zz_median_s(p, zz_attn_once, &a, &s);
    zz_pool_destroy(a.pool);
    a.pool = NULL;
    if (st != ZZ_OK) break;
    pts[(*n_pts)++] = (zz_hw_point){(double)t, zz_attn_flops(&a) / s};
    if (p->verbose)
      fprintf(stderr, "profile: CPU attention%s, %d threads: %.3g GFLOP/s\n", q4 ? " (4-bit cache)" : "", t,
              zz_attn_flops(&a) / s / 1e9);
    if (t == cores) break;
  }
  free(q), free(k), free(v), free(o), free(kf), free(sc), free(pad);
  return st;
}

/* ---------------------------------------------------------------- quantization at store */

typedef struct {
  zz_device *dev;
  void *x, *cache;
  zz_kv_layout kv;
  int64_t b, sq, heads, hd;
} zz_quant_arg;

static zz_status zz_quant_once(void *a_) {
  zz_quant_arg *a = a_;
  ZZ_CHECK(zz_device_kv_append(a->dev, a->x, a->b, a->sq, a->heads, a->hd, a->cache, &a->kv, 0));
  return zz_device_sync(a->dev, ZZ_LANE_COMPUTE);
}

/* New cache rows appended to a 4-bit cache (the device's kv_append, which
 * quantizes them): 4-bit bytes written per second. 32 sequences x 64 rows. */
static zz_status zz_prof_quant(const zz_prof *p, double *bw) {
  zz_quant_arg a = {.dev = p->dev, .b = 32, .sq = 64, .heads = 16, .hd = 64};
  a.kv = zz_prof_kv(zz_device_describe(p->dev)->compute_dtype, true, a.sq, a.heads, a.hd);
  zz_status st = zz_dev_fill(p->dev, a.b * a.sq * a.heads * a.hd, &a.x);
  if (st == ZZ_OK) st = zz_device_alloc(p->dev, (size_t)(a.b * a.kv.seq_bytes), &a.cache);
  double s = 0;
  if (st == ZZ_OK) st = zz_median_s(p, zz_quant_once, &a, &s);
  if (st == ZZ_OK) *bw = (double)(a.b * a.kv.seq_bytes) / s;
  if (a.cache) zz_device_free(p->dev, a.cache);
  if (a.x) zz_device_free(p->dev, a.x);
  return st;
}

/* 4-bit weights and caches: the rates of the kernels that read and write them,
 * where the device has them (otherwise the file has none and the planner does
 * not choose compression). */
static zz_status zz_prof_q4(const zz_prof *p, zz_hw *hw) {
  const zz_op ops[] = {ZZ_OP_LINEAR, ZZ_OP_ATTENTION, ZZ_OP_KV_APPEND};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!zz_device_supports(p->dev, ops[i], ZZ_DTYPE_Q4)) {
      if (p->verbose)
        fprintf(stderr, "profile: the %s device has no 4-bit %s: no compression rates\n",
                zz_device_describe(p->dev)->name, zz_op_name(ops[i]));
      return ZZ_OK;
    }
  ZZ_CHECK(zz_prof_gemm(p, ZZ_DTYPE_Q4, hw->gemm_q4, &hw->n_gemm_q4));
  /* the CPU device's same linear with x in int8 (--cpu-act int8): the device
   * set as a run sets it, then back to the exact path for what follows */
  if (zz_device_describe(p->dev)->kind == ZZ_DEVICE_CPU) {
    ZZ_CHECK(zz_device_set_cpu_act(p->dev, ZZ_CPU_ACT_INT8));
    zz_status st = zz_prof_gemm(p, ZZ_DTYPE_Q4, hw->gemm_q4_int8, &hw->n_gemm_q4_int8);
    ZZ_CHECK(zz_device_set_cpu_act(p->dev, ZZ_CPU_ACT_F32));
    ZZ_CHECK(st);
  }
  ZZ_CHECK(zz_prof_bmm(p, true, 4, 256, 256, &hw->bmm_prefill_q4_flops));
  ZZ_CHECK(zz_prof_bmm(p, true, 32, 1, 512, &hw->bmm_decode_q4_flops));
  ZZ_CHECK(zz_prof_cpu_attn(p, true, hw->cpu_attn_q4, &hw->n_cpu_attn_q4));
  ZZ_CHECK(zz_prof_quant(p, &hw->quant_bw));
  if (p->verbose)
    fprintf(stderr,
            "profile: 4-bit cache: device attention prefill %.3g GFLOP/s, decode %.3g GFLOP/s; quantize at "
            "store %.3g GB/s\n",
            hw->bmm_prefill_q4_flops / 1e9, hw->bmm_decode_q4_flops / 1e9, hw->quant_bw / 1e9);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- disk */

/* The disk tier's rates: 1 GiB with the default budget, at least 64 MiB (a
 * virtual disk's rate swings by tens of percent over a quarter of a second, so
 * less says little), written and read alone in 32 MiB transfers; then read
 * again at each of 1, 4 and 16 MiB a read beside the device's linear
 * op at decode shape (M = 16, on the device's own threads, as the engine's
 * compute runs beside its disk reads). The engine reads one tensor a call
 * (OPT-125M in f32: 2.25 and 9 MiB; OPT-1.3B in bf16: 8 and 32 MiB), and under a
 * CPU quota a read issued after the period's quota is spent waits for the next
 * period, the more often the smaller the reads: the cost model prices each read
 * at the rate of its size (zz_hw_disk_read_bw). */
static zz_status zz_prof_disk(const zz_prof *p, const char *dir, double budget, zz_hw *hw) {
  size_t bytes = (size_t)((double)((size_t)1 << 30) * (budget < 15 ? budget / 15 : 1));
  if (bytes < ((size_t)64 << 20)) bytes = (size_t)64 << 20;
  const size_t MiB = (size_t)1 << 20, sizes[] = {1 * MiB, 4 * MiB, 16 * MiB};
  const int n_sizes = (int)(sizeof sizes / sizeof *sizes);
  const int64_t K = 2048, N = 2048;
  zz_gemm_arg a = {.dev = p->dev, .n_w = 1, .m = 16, .k = K, .n = N};
  a.w[0] = (zz_tensor){.dtype = zz_device_describe(p->dev)->compute_dtype,
                       .ndim = 2,
                       .shape = {N, K},
                       .tier = ZZ_TIER_GPU,
                       .name = "profile.disk.busy"};
  a.w[0].nbytes = zz_dtype_nbytes(a.w[0].dtype, N * K);
  zz_status st = zz_dev_fill(p->dev, N * K, &a.w[0].data);
  if (st == ZZ_OK) st = zz_dev_fill(p->dev, a.m * K, &a.x);
  if (st == ZZ_OK) st = zz_device_alloc(p->dev, zz_dtype_nbytes(a.w[0].dtype, a.m * N), &a.y);
  zz_disk_probe probe = {.bytes = bytes,
                         .chunk = 32 * MiB,
                         .busy = zz_gemm_once,
                         .busy_arg = &a,
                         .busy_bytes = bytes,
                         .sizes = sizes,
                         .n_sizes = n_sizes};
  zz_disk_rates r;
  if (st == ZZ_OK) st = zz_disk_measure(dir, &probe, &r);
  if (st == ZZ_OK) {
    hw->disk_read_bw = r.read_bw, hw->disk_write_bw = r.write_bw;
    hw->n_disk_read_busy = n_sizes;
    for (int i = 0; i < n_sizes; i++) hw->disk_read_busy[i] = (zz_hw_point){(double)sizes[i], r.read_busy_bw[i]};
    if (p->verbose) {
      fprintf(stderr, "profile: disk (%s) read %.3g GB/s, write %.3g GB/s; read beside compute:", dir, r.read_bw / 1e9,
              r.write_bw / 1e9);
      for (int i = 0; i < n_sizes; i++)
        fprintf(stderr, " %.3g GB/s at %zu MiB%s", r.read_busy_bw[i] / 1e9, sizes[i] / MiB,
                i + 1 < n_sizes ? "," : "\n");
    }
  }
  if (a.y) zz_device_free(p->dev, a.y);
  if (a.x) zz_device_free(p->dev, a.x);
  if (a.w[0].data) zz_device_free(p->dev, a.w[0].data);
  return st;
}

/* ---------------------------------------------------------------- all */

zz_status zz_profile_run(const zz_profile_opts *o, zz_hw *out) {
  double budget = o->budget_s > 0 ? o->budget_s : 15;
  const zz_limits *lim = zz_limits_here();
  zz_prof p = {.slice_s = budget / 24, .verbose = o->verbose, .cores = lim->cores};
  p.window_s = p.slice_s / 3;
  if (lim->quota_cores > 0) { /* windows of several periods: a quota throttles at each period's end */
    p.quota = lim->quota_cores;
    if (p.window_s < 3 * lim->period_s) p.window_s = 3 * lim->period_s;
  }
  char ls[256];
  zz_limits_str(lim, ls, sizeof ls);
  if (o->verbose) fprintf(stderr, "profile: this process may use: %s\n", ls);
  zz_hw hw;
  memset(&hw, 0, sizeof hw);
  ZZ_CHECK(zz_device_create_best(0, 0, o->threads, 0, &p.dev));
  const char *dir = o->offload_dir ? o->offload_dir : getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  const zz_device_desc *d = zz_device_describe(p.dev);
  if (lim->cores < lim->host_cpus || lim->mem < lim->host_mem || lim->quota_cores > 0) /* the machine it describes */
    snprintf(hw.name, sizeof hw.name, "%s (zigzag profile, %s device, cgroup: %.2g CPU, %d core%s, %.3g GiB)", host,
             d->name, lim->cpu, lim->cores, lim->cores == 1 ? "" : "s", (double)lim->mem / (1 << 30));
  else
    snprintf(hw.name, sizeof hw.name, "%s (measured by zigzag profile, %s device)", host, d->name);
  snprintf(hw.device, sizeof hw.device, "%s", d->name);
  hw.gpu_mem = d->capacity - d->reserved;
  hw.gpu_reserved = d->reserved;
  hw.cpu_mem = zz_host_memory_bytes();
  hw.disk_mem = zz_disk_free_bytes(dir);
  hw.cpu_cores = lim->cores; /* the cgroup's cpuset and quota, not the host's */
  hw.machines = 1;
  zz_status st = zz_prof_copies(&p, &hw);
  if (st == ZZ_OK && o->verbose)
    fprintf(stderr, "profile: host to device %.3g GB/s, device to host %.3g GB/s\n", hw.ctog_bw / 1e9,
            hw.gtoc_bw / 1e9);
  if (st == ZZ_OK) st = zz_prof_disk(&p, dir, budget, &hw);
  if (st == ZZ_OK) st = zz_prof_gemm(&p, zz_device_describe(p.dev)->compute_dtype, hw.gemm, &hw.n_gemm);
  /* bf16 weight matrices (--cpu-dtype bf16): the CPU device's linear over them */
  if (st == ZZ_OK && zz_device_describe(p.dev)->kind == ZZ_DEVICE_CPU &&
      zz_device_supports(p.dev, ZZ_OP_LINEAR, ZZ_DTYPE_BF16))
    st = zz_prof_gemm(&p, ZZ_DTYPE_BF16, hw.gemm_bf16, &hw.n_gemm_bf16);
  if (st == ZZ_OK) st = zz_prof_bmm(&p, false, 4, 256, 256, &hw.bmm_prefill_flops);
  if (st == ZZ_OK) st = zz_prof_bmm(&p, false, 32, 1, 512, &hw.bmm_decode_flops);
  if (st == ZZ_OK && o->verbose)
    fprintf(stderr, "profile: device attention prefill %.3g GFLOP/s, decode %.3g GFLOP/s\n", hw.bmm_prefill_flops / 1e9,
            hw.bmm_decode_flops / 1e9);
  if (st == ZZ_OK) st = zz_prof_cpu_attn(&p, false, hw.cpu_attn, &hw.n_cpu_attn);
  if (st == ZZ_OK) st = zz_prof_q4(&p, &hw);
  if (st == ZZ_OK) {
    hw.cpu_flops = 0;
    if (strcmp(hw.device, "cpu") == 0)
      for (int i = 0; i < hw.n_gemm; i++) hw.cpu_flops = hw.gemm[i].y > hw.cpu_flops ? hw.gemm[i].y : hw.cpu_flops;
    else
      for (int i = 0; i < hw.n_cpu_attn; i++)
        hw.cpu_flops = hw.cpu_attn[i].y > hw.cpu_flops ? hw.cpu_attn[i].y : hw.cpu_flops;
    st = zz_hw_check(&hw, "the profile");
  }
  zz_device_destroy(p.dev);
  if (st == ZZ_OK) *out = hw;
  return st;
}
