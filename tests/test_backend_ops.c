/*
 * test_backend_ops.c — every op of every available device against the CPU
 * device, through the checked zz_device_* wrappers (ggml's test-backend-ops as
 * the model).
 *
 * One table, one row per op: the op, a function that builds random inputs of the
 * sizes given, calls the wrapper and fetches the output, the shapes to run, and a
 * tolerance per compute dtype. A new op costs one row. Each case runs twice with
 * the same seed: on the reference (a CPU device with one thread) and on the device
 * under test. Inputs are rounded to f16 first so that an f16 device sees the very
 * numbers the reference sees; outputs are poisoned with 0xFF bytes (NaN in f32,
 * f16 and bf16) before each call, so a slot an op forgets to write fails. The
 * error is max |got - ref| / max(1e-6, max |ref|) and a NaN never passes.
 *
 * Devices: the CPU device always, built with three compute threads against the
 * reference's one, with an f32 tolerance of 0. That run checks that every op
 * writes all of its output (poison), that the wrappers accept every valid shape,
 * and that results do not depend on the thread count. It cannot see a plumbing bug
 * both sides share (a wrapper that drops `relu` computes the same wrong answer
 * twice); the golden model tests in test_runtime catch those end to end. The CUDA
 * device's suites register only when a GPU is present.
 *
 * A second table checks that each wrapper refuses bad arguments (a weight of the
 * wrong shape, an unsupported dtype, a pointer outside the device's allocations,
 * ...) with ZZ_ERR_INVALID_ARG and a message naming what was wrong.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

#define ZZ_BO_MAX_DIMS 16
#define ZZ_BO_MAX_SHAPES 20
#define ZZ_BO_MAX_BLOCKS 16

static zz_device *g_ref;  /* the reference: CPU device, one thread */
static zz_device *g_cpu;  /* CPU device under test: three threads */
static zz_device *g_cuda; /* NULL without a GPU */

/* ================================================================ helpers */

/* One case on one device: its rng (seeded per case, so every device draws the
 * same inputs) and the device blocks it allocated. */
typedef struct zz_bo {
  zz_device *dev;
  zz_rng rng;
  void *blocks[ZZ_BO_MAX_BLOCKS];
  int n_blocks;
  zz_status helper_st; /* first failure of a helper (alloc, copy): the case fails */
  char why[512];
} zz_bo;

/* An op's output, fetched to the host as f32. */
typedef struct zz_bo_out {
  float *v;
  int64_t n;
} zz_bo_out;

static size_t bo_es(const zz_bo *r) { return zz_dtype_nbytes(zz_device_describe(r->dev)->compute_dtype, 1); }

static void bo_note(zz_bo *r, zz_status st, const char *what) {
  if (st == ZZ_OK || r->helper_st != ZZ_OK) return;
  r->helper_st = st;
  snprintf(r->why, sizeof r->why, "%s: %s: %s", what, zz_status_str(st), zz_error_message());
}

static void *bo_host(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_backend_ops: out of host memory\n");
    exit(1);
  }
  return p;
}

static void *bo_block(zz_bo *r, size_t bytes) {
  void *p = NULL;
  if (r->n_blocks == ZZ_BO_MAX_BLOCKS) {
    bo_note(r, ZZ_ERR_NO_MEMORY, "test: too many blocks in one case");
    return NULL;
  }
  zz_status st = zz_device_alloc(r->dev, bytes, &p);
  bo_note(r, st, "alloc");
  if (st == ZZ_OK) r->blocks[r->n_blocks++] = p;
  return p;
}

static float bo_uniform(zz_bo *r, float lo, float hi) { return lo + (hi - lo) * (float)zz_rng_uniform(&r->rng); }

/* n random values in [lo, hi), rounded to f16, as host f32. */
static float *bo_values(zz_bo *r, int64_t n, float lo, float hi) {
  float *h = bo_host((size_t)n * sizeof *h);
  for (int64_t i = 0; i < n; i++) h[i] = zz_f16_to_f32(zz_f32_to_f16(bo_uniform(r, lo, hi)));
  return h;
}

/* A device block of n random compute-dtype values. */
static void *bo_rand(zz_bo *r, int64_t n, float lo, float hi) {
  float *h = bo_values(r, n, lo, hi);
  void *d = bo_block(r, (size_t)n * bo_es(r));
  if (d) {
    bo_note(r, zz_device_upload(r->dev, ZZ_LANE_COMPUTE, d, h, ZZ_DTYPE_F32, n), "upload");
    bo_note(r, zz_device_sync(r->dev, ZZ_LANE_COMPUTE), "sync");
  }
  free(h);
  return d;
}

/* A device block of `bytes` bytes, all 0xFF. */
static void *bo_poison(zz_bo *r, size_t bytes) {
  void *d = bo_block(r, bytes);
  if (!d) return NULL;
  char *h = bo_host(bytes);
  memset(h, 0xff, bytes);
  bo_note(r, zz_device_write(r->dev, ZZ_LANE_COMPUTE, d, h, bytes), "write");
  bo_note(r, zz_device_sync(r->dev, ZZ_LANE_COMPUTE), "sync");
  free(h);
  return d;
}

static void *bo_poisoned(zz_bo *r, int64_t n) { return bo_poison(r, (size_t)n * bo_es(r)); }

static int32_t *bo_i32(zz_bo *r, const int32_t *vals, int64_t n) {
  int32_t *d = bo_block(r, (size_t)n * sizeof *d);
  if (d) {
    bo_note(r, zz_device_write(r->dev, ZZ_LANE_COMPUTE, d, vals, (size_t)n * sizeof *d), "write");
    bo_note(r, zz_device_sync(r->dev, ZZ_LANE_COMPUTE), "sync");
  }
  return d;
}

static int32_t *bo_ids(zz_bo *r, int64_t n, int64_t below) {
  int32_t *h = bo_host((size_t)n * sizeof *h);
  for (int64_t i = 0; i < n; i++) h[i] = (int32_t)(zz_rng_next(&r->rng) % (uint64_t)below);
  int32_t *d = bo_i32(r, h, n);
  free(h);
  return d;
}

/* A device-resident weight [d0] or [d0, d1] of random values. */
static zz_tensor bo_weight(zz_bo *r, const char *name, int ndim, int64_t d0, int64_t d1, float lo, float hi) {
  zz_tensor t = {.dtype = zz_device_describe(r->dev)->compute_dtype,
                 .ndim = ndim,
                 .shape = {d0, ndim > 1 ? d1 : 0},
                 .tier = ZZ_TIER_GPU};
  snprintf(t.name, sizeof t.name, "%s", name);
  int64_t n = d0 * (ndim > 1 ? d1 : 1);
  t.data = bo_rand(r, n, lo, hi);
  t.nbytes = (size_t)n * bo_es(r);
  return t;
}

/* After the op: its status, or the output fetched as f32. */
static zz_status bo_result(zz_bo *r, zz_status st, const void *d, int64_t n, zz_bo_out *out) {
  if (st != ZZ_OK) return st;
  out->v = bo_host((size_t)n * sizeof *out->v);
  out->n = n;
  st = zz_device_download(r->dev, ZZ_LANE_COMPUTE, out->v, ZZ_DTYPE_F32, d, n);
  return st == ZZ_OK ? zz_device_sync(r->dev, ZZ_LANE_COMPUTE) : st;
}

/* max|got - ref| / max(1e-6, max|ref|): +inf when got is not finite where ref is,
 * NaN when ref itself is not (so a broken reference never passes either). */
static double bo_err(const float *got, const float *ref, int64_t n) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(ref[i])) return NAN;
    if (!isfinite(got[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff) max_diff = d;
    if (fabs((double)ref[i]) > max_ref) max_ref = fabs((double)ref[i]);
  }
  return max_diff / (max_ref > 1e-6 ? max_ref : 1e-6);
}

/* ================================================================ the ops, one function each */
/* z: the sizes of one shape, named in the row's dims. */

static zz_status op_embed_rows(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], n = z[2];
  zz_tensor table = bo_weight(r, "table", 2, rows, dim, -1, 1);
  int32_t *ids = bo_ids(r, n, rows);
  void *o = bo_poisoned(r, n * dim);
  return bo_result(r, zz_device_embed_rows(r->dev, &table, ids, n, o), o, n * dim, out);
}

static zz_status op_gather_rows(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], n = z[2];
  void *x = bo_rand(r, rows * dim, -1, 1);
  int32_t *ids = bo_ids(r, n, rows);
  void *o = bo_poisoned(r, n * dim);
  return bo_result(r, zz_device_gather_rows(r->dev, x, rows, dim, ids, n, o), o, n * dim, out);
}

static zz_status op_add_rows(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], n = z[2];
  zz_tensor table = bo_weight(r, "table", 2, rows, dim, -1, 1);
  void *x = bo_rand(r, n * dim, -1, 1); /* in and out: not poisoned */
  int32_t *ids = bo_ids(r, n, rows);
  return bo_result(r, zz_device_add_rows(r->dev, x, &table, ids, n), x, n * dim, out);
}

static zz_status op_layernorm(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], dim = z[1];
  /* an offset mean, as in OPT's residual stream, catches one-pass variances */
  void *x = bo_rand(r, n * dim, 2, 4);
  zz_tensor g = bo_weight(r, "gamma", 1, dim, 0, 0.5f, 1.5f), b = bo_weight(r, "beta", 1, dim, 0, -0.1f, 0.1f);
  void *y = z[2] ? x : bo_poisoned(r, n * dim);
  return bo_result(r, zz_device_layernorm(r->dev, x, n, dim, &g, &b, 1e-5f, y), y, n * dim, out);
}

/* The linear's weight scale for in inputs: outputs O(1), like trained weights. */
static float bo_linear_scale(int64_t in) { return 1.0f / sqrtf((float)in); }

/* A linear row {n, in, out, bias, relu, ...} once x and w are drawn (w in any
 * dtype): the bias (0: NULL; 1: a tensor; 2: an absent tensor, ndim 0), a
 * poisoned y, the op. */
static zz_status bo_linear_run(zz_bo *r, const int64_t *z, void *x, const zz_tensor *w, zz_bo_out *out) {
  int64_t n = z[0], in = z[1], o = z[2], bias = z[3], relu = z[4];
  zz_tensor b = {0};
  if (bias == 1) b = bo_weight(r, "b", 1, o, 0, -0.5f, 0.5f);
  void *y = bo_poisoned(r, n * o);
  zz_status st = zz_device_linear(r->dev, x, n, in, w, bias ? &b : NULL, o, y, (int)relu);
  return bo_result(r, st, y, n * o, out);
}

static zz_status op_linear(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], in = z[1], o = z[2];
  const float ws = bo_linear_scale(in);
  void *x = bo_rand(r, n * in, -1, 1);
  zz_tensor w = bo_weight(r, "w", 2, o, in, -ws, ws);
  return bo_linear_run(r, z, x, &w, out);
}

static zz_status op_add(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0];
  void *a = bo_rand(r, n, -1, 1), *b = bo_rand(r, n, -1, 1);
  void *y = z[1] ? a : bo_poisoned(r, n);
  return bo_result(r, zz_device_add(r->dev, a, b, n, y), y, n, out);
}

static zz_status op_kv_append(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t b = z[0], sq = z[1], h = z[2], t_max = z[3], pos = z[4], stride = t_max * h;
  /* the whole cache starts random and is compared whole: rows the append must not
   * touch have to survive it */
  void *cache = bo_rand(r, b * stride, -1, 1);
  void *x = bo_rand(r, b * sq * h, -1, 1);
  zz_kv_layout l = {.dt = zz_device_describe(r->dev)->compute_dtype, .seq_bytes = stride * (int64_t)bo_es(r)};
  zz_status st = zz_device_kv_append(r->dev, x, b, sq, 1, h, cache, &l, pos); /* rows of one head of h */
  return bo_result(r, st, cache, b * stride, out);
}

/* z as op_attention's; kv_heads K/V heads; the pads from z[pad0]. */
static zz_status bo_attention(zz_bo *r, const int64_t *z, int64_t kv_heads, int pad0, zz_bo_out *out) {
  int64_t b = z[0], sq = z[1], t = z[2], q0 = z[3], heads = z[4], hd = z[5], t_max = z[6];
  int64_t h = heads * hd, stride = t_max * kv_heads * hd;
  int32_t pad[8];
  for (int64_t i = 0; i < b; i++) pad[i] = (int32_t)z[pad0 + i];
  void *q = bo_rand(r, b * sq * h, -3, 3); /* peaked enough to test the softmax */
  void *k = bo_rand(r, b * stride, -1, 1), *v = bo_rand(r, b * stride, -1, 1);
  int32_t *d_pad = bo_i32(r, pad, b);
  void *o = bo_poisoned(r, b * sq * h);
  size_t sb = zz_device_attention_scratch(r->dev, b, sq, t, heads, false);
  void *scratch = sb ? bo_poison(r, sb) : NULL; /* masked scores must never be read */
  zz_attn_args a = {.q = q,
                    .k = k,
                    .v = v,
                    .kv = {.dt = zz_device_describe(r->dev)->compute_dtype, .seq_bytes = stride * (int64_t)bo_es(r)},
                    .b = b,
                    .sq = sq,
                    .t = t,
                    .q_start = q0,
                    .heads = heads,
                    .kv_heads = kv_heads,
                    .hd = hd,
                    .pad = d_pad,
                    .keep = 1,
                    .out = o,
                    .scratch = scratch};
  zz_status st = zz_device_attention(r->dev, &a);
  return bo_result(r, st, o, b * sq * h, out);
}

/* ---------------------------------------------------------------- compressed weights and caches */

/* t's bytes h (made from the values v) into a new device block; frees v and h. */
static void bo_put(zz_bo *r, zz_tensor *t, float *v, void *h) {
  t->data = bo_block(r, t->nbytes);
  if (t->data) {
    bo_note(r, zz_device_write(r->dev, ZZ_LANE_COMPUTE, t->data, h, t->nbytes), "write");
    bo_note(r, zz_device_sync(r->dev, ZZ_LANE_COMPUTE), "sync");
  }
  free(v);
  free(h);
}

/* A device-resident Q4 matrix [d0, d1] of random values in format f. */
static zz_tensor bo_qweight(zz_bo *r, const char *name, int64_t d0, int64_t d1, zz_qfmt f, float lo, float hi) {
  zz_tensor t = {.dtype = ZZ_DTYPE_Q4, .q = f, .ndim = 2, .shape = {d0, d1}, .tier = ZZ_TIER_GPU};
  snprintf(t.name, sizeof t.name, "%s", name);
  float *v = bo_values(r, d0 * d1, lo, hi);
  t.nbytes = (size_t)d0 * zz_q_row_bytes(f, d1);
  void *h = bo_host(t.nbytes);
  zz_q_quantize(f, v, d0, d1, h);
  bo_put(r, &t, v, h);
  return t;
}

static zz_qfmt bo_fmt(int64_t bits, int64_t group) { return (zz_qfmt){(int)bits, (int)group}; }

static zz_status op_linear_q(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], in = z[1], o = z[2];
  const float ws = bo_linear_scale(in);
  void *x = bo_rand(r, n * in, -1, 1);
  zz_tensor w = bo_qweight(r, "w", o, in, bo_fmt(z[5], z[6]), -ws, ws);
  return bo_linear_run(r, z, x, &w, out);
}

static zz_status op_rows_q(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], n = z[2], add = z[5];
  zz_tensor table = bo_qweight(r, "table", rows, dim, bo_fmt(z[3], z[4]), -1, 1);
  int32_t *ids = bo_ids(r, n, rows);
  void *o = add ? bo_rand(r, n * dim, -1, 1) : bo_poisoned(r, n * dim);
  zz_status st = add ? zz_device_add_rows(r->dev, o, &table, ids, n) : zz_device_embed_rows(r->dev, &table, ids, n, o);
  return bo_result(r, st, o, n * dim, out);
}

/* ---------------------------------------------------------------- bf16 weights (--cpu-dtype bf16) */

/* A device-resident bf16 matrix [d0, d1] of random values. */
static zz_tensor bo_bf16weight(zz_bo *r, const char *name, int64_t d0, int64_t d1, float lo, float hi) {
  zz_tensor t = {.dtype = ZZ_DTYPE_BF16, .ndim = 2, .shape = {d0, d1}, .tier = ZZ_TIER_GPU};
  snprintf(t.name, sizeof t.name, "%s", name);
  float *v = bo_values(r, d0 * d1, lo, hi);
  t.nbytes = zz_dtype_nbytes(ZZ_DTYPE_BF16, d0 * d1);
  void *h = bo_host(t.nbytes);
  zz_convert(ZZ_DTYPE_F32, v, ZZ_DTYPE_BF16, h, d0 * d1);
  bo_put(r, &t, v, h);
  return t;
}

static zz_status op_linear_bf16(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], in = z[1], o = z[2];
  const float ws = bo_linear_scale(in);
  void *x = bo_rand(r, n * in, -1, 1);
  zz_tensor w = bo_bf16weight(r, "w", o, in, -ws, ws);
  return bo_linear_run(r, z, x, &w, out);
}

static zz_status op_rows_bf16(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], n = z[2], add = z[3];
  zz_tensor table = bo_bf16weight(r, "table", rows, dim, -1, 1);
  int32_t *ids = bo_ids(r, n, rows);
  void *o = add ? bo_rand(r, n * dim, -1, 1) : bo_poisoned(r, n * dim);
  zz_status st = add ? zz_device_add_rows(r->dev, o, &table, ids, n) : zz_device_embed_rows(r->dev, &table, ids, n, o);
  return bo_result(r, st, o, n * dim, out);
}

/* A Q4 cache [b, t_max, heads * hd] of random rows on the device, and its layout. */
static void *bo_qcache(zz_bo *r, int64_t b, int64_t t_max, int64_t heads, int64_t hd, zz_kv_layout *l) {
  size_t row = zz_kv_row_bytes(ZZ_DTYPE_Q4, l->q, heads, hd), bytes = (size_t)(b * t_max) * row;
  l->dt = ZZ_DTYPE_Q4;
  l->seq_bytes = t_max * (int64_t)row;
  float *v = bo_values(r, b * t_max * heads * hd, -1, 1);
  void *h = bo_host(bytes);
  zz_q_quantize(l->q, v, b * t_max * heads, hd, h);
  void *d = bo_block(r, bytes);
  if (d) {
    bo_note(r, zz_device_write(r->dev, ZZ_LANE_COMPUTE, d, h, bytes), "write");
    bo_note(r, zz_device_sync(r->dev, ZZ_LANE_COMPUTE), "sync");
  }
  free(v);
  free(h);
  return d;
}

/* Appends to a Q4 cache; the whole cache is read back and dequantized here. */
static zz_status op_kv_append_q(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t b = z[0], sq = z[1], heads = z[2], hd = z[3], t_max = z[4], pos = z[5];
  zz_kv_layout l = {.q = bo_fmt(z[6], z[7])};
  void *cache = bo_qcache(r, b, t_max, heads, hd, &l);
  void *x = bo_rand(r, b * sq * heads * hd, -1, 1);
  zz_status st = zz_device_kv_append(r->dev, x, b, sq, heads, hd, cache, &l, pos);
  size_t bytes = (size_t)(b * l.seq_bytes);
  if (st == ZZ_OK) {
    void *h = bo_host(bytes);
    st = zz_device_read(r->dev, ZZ_LANE_COMPUTE, h, cache, bytes);
    if (st == ZZ_OK) st = zz_device_sync(r->dev, ZZ_LANE_COMPUTE);
    if (st == ZZ_OK) {
      out->n = b * t_max * heads * hd;
      out->v = bo_host((size_t)out->n * sizeof *out->v);
      zz_q_dequantize(l.q, h, b * t_max * heads, hd, out->v);
    }
    free(h);
  }
  return st;
}

/* Attention of z[4] query heads over a cache of z[7] K/V heads (grouped-query
 * when fewer) stored as z[8] (0: the compute dtype, else Q4 of z[8] bits, groups
 * of z[9]), keeping z[10] per mille of the keys (1000: dense); pads from z[11]
 * (b <= 4), a sliding window of z[15] (0: none). */
static zz_status op_attention_any(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t b = z[0], sq = z[1], t = z[2], q0 = z[3], heads = z[4], hd = z[5], t_max = z[6], h = heads * hd;
  int64_t kv_heads = z[7], kvw = kv_heads * hd;
  double keep = (double)z[10] / 1000.0;
  int32_t pad[4];
  for (int64_t i = 0; i < b; i++) pad[i] = (int32_t)z[11 + i];
  void *q = bo_rand(r, b * sq * h, -3, 3);
  zz_kv_layout l = {.dt = zz_device_describe(r->dev)->compute_dtype,
                    .q = bo_fmt(z[8], z[9]),
                    .seq_bytes = t_max * kvw * (int64_t)bo_es(r)};
  void *k, *v;
  if (z[8]) {
    k = bo_qcache(r, b, t_max, kv_heads, hd, &l);
    v = bo_qcache(r, b, t_max, kv_heads, hd, &l);
  } else {
    k = bo_rand(r, b * t_max * kvw, -1, 1);
    v = bo_rand(r, b * t_max * kvw, -1, 1);
  }
  int32_t *d_pad = bo_i32(r, pad, b);
  void *o = bo_poisoned(r, b * sq * h);
  size_t sb = zz_device_attention_scratch(r->dev, b, sq, t, heads, zz_attention_general(l.dt, keep));
  void *scratch = sb ? bo_poison(r, sb) : NULL;
  zz_attn_args a = {.q = q,
                    .k = k,
                    .v = v,
                    .kv = l,
                    .b = b,
                    .sq = sq,
                    .t = t,
                    .q_start = q0,
                    .heads = heads,
                    .kv_heads = kv_heads,
                    .hd = hd,
                    .pad = d_pad,
                    .keep = keep,
                    .window = z[15],
                    .out = o,
                    .scratch = scratch};
  zz_status st = zz_device_attention(r->dev, &a);
  return bo_result(r, st, o, b * sq * h, out);
}

static zz_status op_attention(zz_bo *r, const int64_t *z, zz_bo_out *out) { return bo_attention(r, z, z[4], 7, out); }

/* grouped-query attention: z[7] K/V heads, pads from z[8] */
static zz_status op_attention_gqa(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  return bo_attention(r, z, z[7], 8, out);
}

static zz_status op_rmsnorm(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], dim = z[1];
  void *x = bo_rand(r, n * dim, -2, 2);
  zz_tensor g = bo_weight(r, "gamma", 1, dim, 0, 0.5f, 1.5f);
  void *y = z[2] ? x : bo_poisoned(r, n * dim);
  return bo_result(r, zz_device_rmsnorm(r->dev, x, n, dim, &g, 1e-6f, y), y, n * dim, out);
}

static zz_status op_rope(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], heads = z[1], hd = z[2];
  static zz_rope ropes[4] = {
      {.type = ZZ_ROPE_DEFAULT, .theta = 10000, .factor = 1},
      {.type = ZZ_ROPE_LINEAR, .theta = 10000, .factor = 4},
      {.type = ZZ_ROPE_LLAMA3,
       .theta = 500000,
       .factor = 8,
       .low_freq_factor = 1,
       .high_freq_factor = 4,
       .original_max_pos = 8192},
      /* type 3: Phi-3's longrope over 3/4 of the head, sequences of 4 rows, some past
                             * the original positions (long factors), some not */
      {.type = ZZ_ROPE_LONGROPE, .theta = 10000, .original_max_pos = 1024, .attn_factor = 1.19f, .seq_rows = 4}};
  ropes[3].rot_dims = (int32_t)(hd * 3 / 4 / 2 * 2);
  for (int d = 0; d < ZZ_ROPE_MAX_PAIRS; d++)
    ropes[3].short_factor[d] = 1 + 0.01f * d, ropes[3].long_factor[d] = 1 + 0.5f * d;
  void *x = bo_rand(r, n * heads * hd, -1, 1); /* in and out: not poisoned */
  int32_t *pos = bo_ids(r, n, z[4]);
  return bo_result(r, zz_device_rope(r->dev, x, n, heads, hd, pos, &ropes[z[3]]), x, n * heads * hd, out);
}

/* Routing {n, experts, k, renorm, ties}: logits a shuffle of distinct values (or,
 * with ties, of values drawn twice each), so both devices see one order; the
 * output is w spread over a dense [n, experts] (0 where not chosen), so a wrong
 * expert shows as a weight in the wrong place. */
static zz_status op_moe_route(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0], experts = z[1], k = z[2], ne = n * experts;
  float *h = bo_host((size_t)ne * sizeof *h);
  for (int64_t i = 0; i < n; i++) {
    float *row = h + i * experts;
    for (int64_t e = 0; e < experts; e++) row[e] = (float)(z[4] ? e / 2 : e) * 0.0625f - 2.0f;
    for (int64_t e = experts - 1; e > 0; e--) { /* Fisher-Yates */
      int64_t j = (int64_t)(zz_rng_next(&r->rng) % (uint64_t)(e + 1));
      float t = row[e];
      row[e] = row[j], row[j] = t;
    }
  }
  void *logits = bo_block(r, (size_t)ne * bo_es(r));
  int32_t *idx = bo_block(r, (size_t)(n * k) * sizeof *idx);
  float *w = bo_block(r, (size_t)(n * k) * sizeof *w);
  if (logits) bo_note(r, zz_device_upload(r->dev, ZZ_LANE_COMPUTE, logits, h, ZZ_DTYPE_F32, ne), "upload");
  free(h);
  if (r->helper_st != ZZ_OK) return r->helper_st;
  zz_status st = zz_device_moe_route(r->dev, logits, n, experts, k, z[3] != 0, idx, w);
  if (st != ZZ_OK) return st;
  int32_t *hi = bo_host((size_t)(n * k) * sizeof *hi);
  float *hw = bo_host((size_t)(n * k) * sizeof *hw);
  st = zz_device_read(r->dev, ZZ_LANE_COMPUTE, hi, idx, (size_t)(n * k) * sizeof *hi);
  if (st == ZZ_OK) st = zz_device_read(r->dev, ZZ_LANE_COMPUTE, hw, w, (size_t)(n * k) * sizeof *hw);
  if (st == ZZ_OK) st = zz_device_sync(r->dev, ZZ_LANE_COMPUTE);
  out->n = ne;
  out->v = bo_host((size_t)ne * sizeof *out->v);
  memset(out->v, 0, (size_t)ne * sizeof *out->v);
  for (int64_t i = 0; st == ZZ_OK && i < n * k; i++) {
    bool ok = hi[i] >= 0 && hi[i] < experts && out->v[i / k * experts + hi[i]] == 0.0f;
    if (ok) out->v[i / k * experts + hi[i]] = hw[i];
    else /* an expert out of range or chosen twice */
      out->v[0] = NAN;
  }
  free(hi);
  free(hw);
  return st;
}

/* One expert's scatter {out_rows, dim, m}: m distinct rows of a random out. */
static zz_status op_moe_scatter(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t rows = z[0], dim = z[1], m = z[2];
  int32_t *perm = bo_host((size_t)rows * sizeof *perm);
  float *hw = bo_host((size_t)m * sizeof *hw);
  for (int64_t i = 0; i < rows; i++) perm[i] = (int32_t)i;
  for (int64_t i = rows - 1; i > 0; i--) {
    int64_t j = (int64_t)(zz_rng_next(&r->rng) % (uint64_t)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (int64_t i = 0; i < m; i++) hw[i] = bo_uniform(r, 0.0f, 1.0f);
  int32_t *ids = bo_i32(r, perm, m);
  float *w = bo_block(r, (size_t)m * sizeof *w);
  if (w) bo_note(r, zz_device_write(r->dev, ZZ_LANE_COMPUTE, w, hw, (size_t)m * sizeof *w), "write");
  free(perm);
  free(hw);
  void *y = bo_rand(r, m * dim, -1, 1), *o = bo_rand(r, rows * dim, -1, 1);
  if (r->helper_st != ZZ_OK) return r->helper_st;
  return bo_result(r, zz_device_moe_scatter(r->dev, y, ids, w, m, dim, o, rows), o, rows * dim, out);
}

/* The zero fill {n}: of a poisoned block. */
static zz_status op_zero(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  void *p = bo_poisoned(r, z[0]);
  return bo_result(r, zz_device_zero(r->dev, p, z[0]), p, z[0], out);
}

static zz_status op_silu_mul(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0];
  void *g = bo_rand(r, n, -6, 6), *u = bo_rand(r, n, -1, 1);
  void *y = z[1] ? g : bo_poisoned(r, n);
  return bo_result(r, zz_device_silu_mul(r->dev, g, u, n, y), y, n, out);
}

/* Host values in dtype z[1] → device → host f32. */
static zz_status op_upload(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0];
  zz_dtype dt = (zz_dtype)z[1];
  float *f = bo_values(r, n, -2, 2);
  void *h = bo_host(zz_dtype_nbytes(dt, n));
  zz_convert(ZZ_DTYPE_F32, f, dt, h, n);
  void *d = bo_block(r, (size_t)n * bo_es(r));
  zz_status st = zz_device_upload(r->dev, ZZ_LANE_LOAD_WEIGHT, d, h, dt, n);
  if (st == ZZ_OK) st = zz_device_sync(r->dev, ZZ_LANE_LOAD_WEIGHT);
  free(f);
  free(h);
  return bo_result(r, st, d, n, out);
}

/* Device → host values in dtype z[1], widened to f32 here. */
static zz_status op_download(zz_bo *r, const int64_t *z, zz_bo_out *out) {
  int64_t n = z[0];
  zz_dtype dt = (zz_dtype)z[1];
  void *d = bo_rand(r, n, -2, 2);
  void *h = bo_host(zz_dtype_nbytes(dt, n));
  memset(h, 0xff, zz_dtype_nbytes(dt, n));
  zz_status st = zz_device_download(r->dev, ZZ_LANE_STORE_CACHE, h, dt, d, n);
  if (st == ZZ_OK) st = zz_device_sync(r->dev, ZZ_LANE_STORE_CACHE);
  if (st == ZZ_OK) {
    out->v = bo_host((size_t)n * sizeof *out->v);
    out->n = n;
    zz_convert(dt, h, ZZ_DTYPE_F32, out->v, n);
  }
  free(h);
  return st;
}

/* ================================================================ the table */

typedef struct zz_bo_op {
  zz_op op;
  const char *name;
  zz_status (*run)(zz_bo *r, const int64_t *z, zz_bo_out *out);
  const char *dims[ZZ_BO_MAX_DIMS];                 /* names of z[i], for the report */
  double tol[ZZ_DTYPE_COUNT];                       /* by the tested device's compute dtype */
  int64_t shapes[ZZ_BO_MAX_SHAPES][ZZ_BO_MAX_DIMS]; /* ends at a row of zeros */
} zz_bo_op;

/* The weights' dtype of a row whose weights are not in the device's compute dtype
 * (Q4, bf16), known by the function that builds them; ZZ_DTYPE_COUNT for the
 * others. A device whose supports() refuses it skips the row, saying so, as
 * ggml's test-backend-ops does. */
static zz_dtype bo_weights_of(const zz_bo_op *row) {
  if (row->run == op_linear_q || row->run == op_rows_q) return ZZ_DTYPE_Q4;
  if (row->run == op_linear_bf16 || row->run == op_rows_bf16) return ZZ_DTYPE_BF16;
  return ZZ_DTYPE_COUNT;
}

/* f32: the same kernels on the same numbers must agree exactly; f16 keeps 11 bits
 * and accumulates in f32; bf16 keeps 8. */
#define ZZ_BO_TOL                                                                                                      \
  { [ZZ_DTYPE_F32] = 0, [ZZ_DTYPE_F16] = 1e-2, [ZZ_DTYPE_BF16] = 5e-2 }

static const zz_bo_op zz_bo_ops[] = {
    {ZZ_OP_EMBED_ROWS,
     "embed_rows",
     op_embed_rows,
     {"rows", "dim", "n"},
     ZZ_BO_TOL,
     {{50, 33, 7}, {1000, 768, 1}, {64, 64, 130}, {10, 1, 3}, {2050, 768, 259}}},
    {ZZ_OP_EMBED_ROWS,
     "gather_rows",
     op_gather_rows,
     {"rows", "dim", "n"},
     ZZ_BO_TOL,
     {{21, 33, 3}, {8, 768, 8}, {1, 5, 1}, {259, 64, 2}}},
    {ZZ_OP_ADD_ROWS,
     "add_rows",
     op_add_rows,
     {"rows", "dim", "n"},
     ZZ_BO_TOL,
     {{50, 33, 7}, {2050, 768, 1}, {64, 64, 130}, {10, 1, 3}}},
    {ZZ_OP_LAYERNORM,
     "layernorm",
     op_layernorm,
     {"n", "dim", "in_place"},
     ZZ_BO_TOL,
     {{1, 7, 0}, {5, 768, 0}, {5, 768, 1}, {3, 12288, 0}, {2, 1001, 0}, {130, 2560, 0}}},
    {ZZ_OP_LINEAR,
     "linear",
     op_linear,
     {"n", "in", "out", "bias", "relu"},
     ZZ_BO_TOL,
     {{1, 7, 5, 0, 0},
      {13, 64, 33, 1, 1},
      {37, 768, 3072, 1, 0},
      {37, 3072, 768, 1, 1},
      {5, 1000, 1, 1, 1},
      {64, 129, 257, 2, 1},
      {3, 256, 50272, 0, 0}}}, /* LM head shaped */
    {ZZ_OP_ADD, "add", op_add, {"n", "y_is_a"}, ZZ_BO_TOL, {{1, 0}, {7, 0}, {100003, 0}, {1 << 20, 1}}},
    {ZZ_OP_KV_APPEND,
     "kv_append",
     op_kv_append,
     {"b", "sq", "h", "t_max", "pos"},
     ZZ_BO_TOL,
     {{1, 1, 768, 16, 5}, {3, 7, 64, 20, 0}, {2, 5, 13, 11, 6}, {4, 1, 96, 33, 32}}},
    {ZZ_OP_ATTENTION,
     "attention",
     op_attention,
     {"b", "sq", "t", "q0", "heads", "hd", "t_max", "pad0", "pad1", "pad2", "pad3", "pad4", "pad5", "pad6", "pad7"},
     ZZ_BO_TOL,
     {/* decode (sq = 1): pads that hide all keys but one, or all of them */
      {1, 1, 1, 0, 2, 64, 1, 0},
      {3, 1, 37, 36, 4, 80, 40, 0, 5, 36},
      {2, 1, 300, 299, 12, 64, 301, 0, 300},
      {4, 1, 1000, 999, 2, 128, 1003, 0, 17, 500, 999},
      {2, 1, 19, 18, 3, 13, 23, 0, 4},
      {1, 1, 50, 49, 1, 256, 50, 3},
      {1, 1, 20, 10, 2, 64, 20, 0}, /* the query before the last key */
      {8, 1, 129, 128, 32, 128, 160, 0, 1, 2, 3, 60, 61, 62, 128},
      /* prefill (sq > 1) with left padding */
      {2, 7, 7, 0, 3, 16, 7, 0, 3},
      {1, 2, 2, 0, 1, 64, 2, 0},
      {1, 5, 16, 11, 2, 64, 16, 2},
      {3, 33, 33, 0, 12, 64, 40, 0, 10, 32},
      {2, 17, 17, 0, 4, 80, 17, 1, 0},
      {2, 9, 9, 0, 3, 13, 12, 0, 8},
      {2, 128, 128, 0, 32, 128, 128, 0, 77},
      {1, 600, 600, 0, 2, 64, 601, 5}}}, /* t > 2 * a CUDA block */
    /* compression: Q4 weights (bits, group), Q4 caches, top-k sparse attention */
    {ZZ_OP_LINEAR,
     "linear_q4",
     op_linear_q,
     {"n", "in", "out", "bias", "relu", "bits", "group"},
     ZZ_BO_TOL,
     {{1, 768, 768, 1, 0, 4, 64},
      {13, 64, 33, 1, 1, 4, 64},
      {37, 100, 65, 0, 0, 4, 32},
      {5, 3072, 768, 1, 1, 8, 128},
      {2, 256, 1003, 0, 0, 4, 256},
      {64, 130, 129, 1, 0, 2, 64}}},
    {ZZ_OP_EMBED_ROWS,
     "embed_rows_q4",
     op_rows_q,
     {"rows", "dim", "n", "bits", "group", "add"},
     ZZ_BO_TOL,
     {{50, 33, 7, 4, 64, 0}, {1000, 768, 3, 4, 64, 0}, {64, 100, 130, 8, 32, 0}}},
    {ZZ_OP_ADD_ROWS,
     "add_rows_q4",
     op_rows_q,
     {"rows", "dim", "n", "bits", "group", "add"},
     ZZ_BO_TOL,
     {{50, 33, 7, 4, 64, 1}, {2050, 768, 2, 4, 64, 1}, {64, 100, 130, 2, 32, 1}}},
    {ZZ_OP_KV_APPEND,
     "kv_append_q4",
     op_kv_append_q,
     {"b", "sq", "heads", "hd", "t_max", "pos", "bits", "group"},
     ZZ_BO_TOL,
     {{1, 1, 12, 64, 16, 5, 4, 64},
      {3, 7, 4, 16, 20, 0, 4, 64},
      {2, 5, 2, 100, 11, 6, 8, 32},
      {4, 1, 2, 128, 33, 32, 4, 64}}},
    {ZZ_OP_ATTENTION,
     "attention_q4",
     op_attention_any,
     {"b", "sq", "t", "q0", "heads", "hd", "t_max", "kv_heads", "bits", "group", "keep_pm", "pad0", "pad1", "pad2",
      "pad3"},
     ZZ_BO_TOL,
     {{1, 1, 1, 0, 2, 64, 1, 2, 4, 64, 1000, 0},
      {3, 1, 37, 36, 4, 80, 40, 4, 4, 64, 1000, 0, 5, 36},
      {2, 1, 300, 299, 12, 64, 301, 12, 4, 64, 1000, 0, 300},
      {2, 7, 7, 0, 3, 16, 7, 3, 4, 64, 1000, 0, 3},
      {2, 17, 17, 0, 4, 80, 17, 4, 8, 32, 1000, 1, 0},
      {1, 600, 600, 0, 2, 64, 601, 2, 4, 64, 1000, 5},
      /* grouped-query attention over a Q4 cache (LLaMA under --compress-cache) */
      {3, 1, 37, 36, 8, 64, 40, 2, 4, 64, 1000, 0, 5, 36},
      {2, 1, 300, 299, 32, 128, 301, 8, 4, 64, 1000, 0, 9},
      {2, 1, 19, 18, 6, 16, 23, 1, 4, 64, 1000, 0, 4},
      {2, 7, 7, 0, 4, 16, 7, 2, 4, 64, 1000, 0, 3}}},
    {ZZ_OP_ATTENTION_SPARSE,
     "attention_topk",
     op_attention_any,
     {"b", "sq", "t", "q0", "heads", "hd", "t_max", "kv_heads", "bits", "group", "keep_pm", "pad0", "pad1", "pad2",
      "pad3"},
     ZZ_BO_TOL,
     {{1, 1, 1, 0, 2, 64, 1, 2, 0, 64, 100, 0},
      {3, 1, 37, 36, 4, 80, 40, 4, 0, 64, 100, 0, 5, 36},
      {2, 1, 300, 299, 12, 64, 301, 12, 0, 64, 500, 0, 299},
      {4, 1, 1000, 999, 2, 128, 1003, 2, 4, 64, 100, 0, 17, 500, 999},
      {2, 1, 64, 63, 4, 64, 70, 4, 4, 64, 10, 0, 3},
      /* grouped-query, dense and Q4 caches */
      {3, 1, 37, 36, 8, 64, 40, 2, 0, 64, 200, 0, 5, 36},
      {2, 1, 64, 63, 8, 64, 70, 4, 4, 64, 100, 0, 3}}},
    {ZZ_OP_ATTENTION,
     "attention_window",
     op_attention_any,
     {"b", "sq", "t", "q0", "heads", "hd", "t_max", "kv_heads", "bits", "group", "keep_pm", "pad0", "pad1", "pad2",
      "pad3", "window"},
     ZZ_BO_TOL,
     {/* Mistral's and Qwen2's sliding windows: decode and prefill, dense, Q4, top-k */
      {3, 1, 37, 36, 8, 64, 40, 2, 0, 64, 1000, 0, 5, 36, 0, 5},
      {2, 1, 300, 299, 32, 128, 301, 8, 0, 64, 1000, 0, 9, 0, 0, 64},
      {2, 17, 17, 0, 4, 80, 17, 2, 0, 64, 1000, 1, 0, 0, 0, 6},
      {1, 600, 600, 0, 8, 64, 601, 2, 0, 64, 1000, 5, 0, 0, 0, 100},
      {2, 7, 7, 0, 4, 16, 7, 2, 4, 64, 1000, 0, 3, 0, 0, 3},
      {2, 1, 64, 63, 8, 64, 70, 4, 4, 64, 100, 0, 3, 0, 0, 20}}},
    {ZZ_OP_ATTENTION,
     "attention_gqa",
     op_attention_gqa,
     {"b", "sq", "t", "q0", "heads", "hd", "t_max", "kv_heads", "pad0", "pad1", "pad2", "pad3"},
     ZZ_BO_TOL,
     {{3, 1, 37, 36, 8, 64, 40, 2, 0, 5, 36},  /* decode, 4 query heads per K/V head */
      {2, 1, 300, 299, 32, 128, 301, 8, 0, 9}, /* llama-2-70b-like grouping */
      {2, 1, 19, 18, 6, 16, 23, 1, 0, 4},      /* one K/V head (MQA) */
      {2, 7, 7, 0, 4, 16, 7, 2, 0, 3},         /* prefill */
      {2, 33, 33, 0, 12, 64, 40, 3, 10, 0},
      {1, 600, 600, 0, 8, 64, 601, 1, 5}}},
    {ZZ_OP_RMSNORM,
     "rmsnorm",
     op_rmsnorm,
     {"n", "dim", "in_place"},
     ZZ_BO_TOL,
     {{1, 7, 0}, {5, 4096, 0}, {5, 4096, 1}, {130, 8192, 0}, {2, 1001, 0}}},
    {ZZ_OP_ROPE,
     "rope",
     op_rope,
     {"n", "heads", "hd", "type", "max_pos"},
     ZZ_BO_TOL,
     {{1, 1, 2, 0, 1},
      {7, 4, 16, 0, 64},
      {37, 32, 128, 0, 2048},
      {13, 8, 128, 1, 4096},
      {9, 3, 64, 2, 8192},
      {129, 8, 128, 2, 131072},
      {16, 4, 96, 3, 2048},
      {36, 8, 128, 3, 2048}}},
    {ZZ_OP_SILU_MUL, "silu_mul", op_silu_mul, {"n", "y_is_g"}, ZZ_BO_TOL, {{1, 0}, {1001, 0}, {1 << 20, 1}}},
    {ZZ_OP_MOE_ROUTE,
     "moe_route",
     op_moe_route,
     {"n", "experts", "k", "renorm", "ties"},
     ZZ_BO_TOL,
     {{1, 1, 1, 1, 0}, {7, 8, 2, 1, 0}, {33, 8, 2, 1, 1}, {130, 128, 8, 1, 0}, {64, 60, 4, 0, 1}, {5, 64, 32, 0, 0}}},
    {ZZ_OP_MOE_SCATTER,
     "moe_scatter",
     op_moe_scatter,
     {"out_rows", "dim", "m"},
     ZZ_BO_TOL,
     {{1, 7, 1}, {37, 64, 20}, {512, 4096, 130}, {64, 1001, 64}}},
    {ZZ_OP_MOE_SCATTER, "zero", op_zero, {"n"}, ZZ_BO_TOL, {{1}, {1001}, {1 << 20}}},
    {ZZ_OP_UPLOAD,
     "upload",
     op_upload,
     {"n", "dtype"},
     ZZ_BO_TOL,
     {{1, ZZ_DTYPE_F32},
      {100003, ZZ_DTYPE_F32},
      {7, ZZ_DTYPE_F16},
      {100003, ZZ_DTYPE_F16},
      {13, ZZ_DTYPE_BF16},
      {100003, ZZ_DTYPE_BF16}}},
    /* bf16 weight matrices (the CPU device's --cpu-dtype bf16) */
    {ZZ_OP_LINEAR,
     "linear_bf16",
     op_linear_bf16,
     {"n", "in", "out", "bias", "relu"},
     ZZ_BO_TOL,
     {{1, 7, 5, 0, 0}, {13, 64, 33, 1, 1}, {64, 2049, 257, 1, 0}, {130, 129, 67, 0, 1}, {3, 256, 50272, 0, 0}}},
    {ZZ_OP_EMBED_ROWS,
     "embed_rows_bf16",
     op_rows_bf16,
     {"rows", "dim", "n", "add"},
     ZZ_BO_TOL,
     {{50, 33, 7, 0}, {1000, 768, 3, 0}}},
    {ZZ_OP_ADD_ROWS,
     "add_rows_bf16",
     op_rows_bf16,
     {"rows", "dim", "n", "add"},
     ZZ_BO_TOL,
     {{50, 33, 7, 1}, {2050, 768, 2, 1}}},
    {ZZ_OP_DOWNLOAD,
     "download",
     op_download,
     {"n", "dtype"},
     ZZ_BO_TOL,
     {{1, ZZ_DTYPE_F32},
      {100003, ZZ_DTYPE_F32},
      {7, ZZ_DTYPE_F16},
      {100003, ZZ_DTYPE_F16},
      {13, ZZ_DTYPE_BF16},
      {100003, ZZ_DTYPE_BF16}}},
};
#define ZZ_BO_N_OPS (sizeof zz_bo_ops / sizeof zz_bo_ops[0])

/* ================================================================ the runner */

static void bo_begin(zz_bo *r, zz_device *dev, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->dev = dev;
  zz_rng_seed(&r->rng, seed, 0);
}

static void bo_end(zz_bo *r) {
  for (int i = 0; i < r->n_blocks; i++) zz_device_free(r->dev, r->blocks[i]);
  r->n_blocks = 0;
}

/* Runs one case; the status of the op, or of the first helper that failed. */
static zz_status bo_case(zz_device *dev, const zz_bo_op *row, const int64_t *z, uint64_t seed, zz_bo_out *out,
                         char *why, size_t why_len) {
  zz_bo r;
  bo_begin(&r, dev, seed);
  zz_status st = row->run(&r, z, out);
  if (r.helper_st != ZZ_OK) {
    st = r.helper_st;
    snprintf(why, why_len, "%s", r.why);
  } else if (st != ZZ_OK) {
    snprintf(why, why_len, "%s: %s", zz_status_str(st), zz_error_message());
  }
  bo_end(&r);
  return st;
}

static void bo_shape_str(const zz_bo_op *row, const int64_t *z, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int d = 0; d < ZZ_BO_MAX_DIMS && row->dims[d] && o < len; d++) {
    if (strncmp(row->dims[d], "pad", 3) == 0 && row->dims[d][3] - '0' >= z[0]) break; /* pads of b sequences */
    if (strcmp(row->dims[d], "dtype") == 0)
      o += (size_t)snprintf(buf + o, len - o, "%sdtype=%s", d ? " " : "", zz_dtype_name((zz_dtype)z[d]));
    else
      o += (size_t)snprintf(buf + o, len - o, "%s%s=%lld", d ? " " : "", row->dims[d], (long long)z[d]);
  }
}

/* Every row and shape on dev against the reference; one line per case. */
static void bo_compare(zz_device *dev) {
  const double *tol_of = NULL;
  int pass = 0, fail = 0, skipped = 0;
  for (size_t i = 0; i < ZZ_BO_N_OPS; i++) {
    const zz_bo_op *row = &zz_bo_ops[i];
    tol_of = row->tol;
    zz_dtype wdt = bo_weights_of(row);
    if (wdt != ZZ_DTYPE_COUNT && !zz_device_supports(dev, row->op, wdt)) {
      printf("    %s-%-11s %s weights: not supported by this device, skipped\n", zz_device_describe(dev)->name,
             row->name, zz_dtype_name(wdt));
      skipped++;
      continue;
    }
    for (int s = 0; s < ZZ_BO_MAX_SHAPES && row->shapes[s][0]; s++) {
      const int64_t *z = row->shapes[s];
      uint64_t seed = (uint64_t)i << 32 | (uint64_t)s;
      zz_bo_out ref = {0}, got = {0};
      char why_ref[512] = "", why_got[512] = "", shape[160], line[1200];
      zz_status sr = bo_case(g_ref, row, z, seed, &ref, why_ref, sizeof why_ref);
      zz_status sg = bo_case(dev, row, z, seed, &got, why_got, sizeof why_got);
      bo_shape_str(row, z, shape, sizeof shape);
      double tol = tol_of[zz_device_describe(dev)->compute_dtype];
      double err = sr == ZZ_OK && sg == ZZ_OK && ref.n == got.n ? bo_err(got.v, ref.v, ref.n) : NAN;
      bool ok = err <= tol; /* false for NaN */
      if (sr != ZZ_OK)
        snprintf(line, sizeof line, "%s-%-11s %-60s reference failed: %s", zz_device_describe(dev)->name, row->name,
                 shape, why_ref);
      else if (sg != ZZ_OK)
        snprintf(line, sizeof line, "%s-%-11s %-60s failed: %s", zz_device_describe(dev)->name, row->name, shape,
                 why_got);
      else
        snprintf(line, sizeof line, "%s-%-11s %-60s err=%.3e tol=%.0e %s", zz_device_describe(dev)->name, row->name,
                 shape, err, tol, ok ? "PASS" : "FAIL");
      printf("    %s\n", line);
      CU_assertImplementation(ok, __LINE__, line, __FILE__, "", CU_FALSE);
      ok ? pass++ : fail++;
      free(ref.v);
      free(got.v);
    }
  }
  printf("    %s vs cpu: %d passed, %d failed, %d rows skipped\n", zz_device_describe(dev)->name, pass, fail, skipped);
}

static void test_cpu_vs_cpu(void) { bo_compare(g_cpu); }
static void test_cuda_vs_cpu(void) { bo_compare(g_cuda); }

/* A new zz_op without a row here fails this. */
static void test_every_op_has_a_row(void) {
  for (int op = 0; op < ZZ_OP_COUNT; op++) {
    bool found = false;
    for (size_t i = 0; i < ZZ_BO_N_OPS; i++) found |= zz_bo_ops[i].op == (zz_op)op;
    if (!found) printf("    no row for op %s\n", zz_op_name((zz_op)op));
    CU_ASSERT(found);
  }
}

/* ================================================================ refusals */
/* Each builds valid arguments, spoils one, and returns the wrapper's status. */

typedef struct zz_bo_lin {
  void *x, *y;
  zz_tensor w, b;
} zz_bo_lin;

enum { BO_N = 3, BO_IN = 8, BO_OUT = 5 };

static zz_bo_lin bo_lin(zz_bo *r) {
  zz_bo_lin l = {.x = bo_rand(r, BO_N * BO_IN, -1, 1), .y = bo_poisoned(r, BO_N * BO_OUT)};
  l.w = bo_weight(r, "w", 2, BO_OUT, BO_IN, -1, 1);
  l.b = bo_weight(r, "b", 1, BO_OUT, 0, -1, 1);
  return l;
}

static zz_status bo_call_lin(zz_bo *r, const zz_bo_lin *l) {
  return zz_device_linear(r->dev, l->x, BO_N, BO_IN, &l->w, &l->b, BO_OUT, l->y, 0);
}

static zz_status bad_linear_w_shape(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.shape[1] = BO_IN + 1;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_w_transposed(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.shape[0] = BO_IN, l.w.shape[1] = BO_OUT;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_bias_shape(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.b.shape[0] = BO_OUT + 2;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_q4(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.dtype = ZZ_DTYPE_Q4; /* fewer bytes than f32: the range would fit, the dtype must not */
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_w_absent(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.ndim = 0;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_w_tier(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.tier = ZZ_TIER_CPU;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_x_host(zz_bo *r) {
  static float host[BO_N * BO_IN]; /* host memory, not the device's */
  zz_bo_lin l = bo_lin(r);
  l.x = host;
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_y_past_end(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.y = (char *)l.y + 4; /* the last 4 bytes of y run past its block */
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_w_past_end(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  l.w.data = (char *)l.w.data + bo_es(r);
  return bo_call_lin(r, &l);
}

static zz_status bad_linear_n_zero(zz_bo *r) {
  zz_bo_lin l = bo_lin(r);
  return zz_device_linear(r->dev, l.x, 0, BO_IN, &l.w, &l.b, BO_OUT, l.y, 0);
}

/* layernorm of 2 rows of 6 with a gamma of gamma_len, beta in beta_dt */
static zz_status bo_layernorm(zz_bo *r, int64_t gamma_len, zz_dtype beta_dt, float eps) {
  void *x = bo_rand(r, 2 * 6, -1, 1);
  zz_tensor g = bo_weight(r, "gamma", 1, gamma_len, 0, 0, 1), b = bo_weight(r, "beta", 1, 6, 0, 0, 1);
  if (beta_dt == ZZ_DTYPE_Q4) b.dtype = beta_dt;
  return zz_device_layernorm(r->dev, x, 2, 6, &g, &b, eps, x);
}

static zz_status bad_layernorm_gamma(zz_bo *r) { return bo_layernorm(r, 5, ZZ_DTYPE_F32, 1e-5f); }
static zz_status bad_layernorm_beta_q4(zz_bo *r) { return bo_layernorm(r, 6, ZZ_DTYPE_Q4, 1e-5f); }
static zz_status bad_layernorm_eps(zz_bo *r) { return bo_layernorm(r, 6, ZZ_DTYPE_F32, NAN); }

static zz_status bad_embed_q4(zz_bo *r) {
  zz_tensor t = bo_weight(r, "table", 2, 10, 4, -1, 1);
  t.dtype = ZZ_DTYPE_Q4;
  return zz_device_embed_rows(r->dev, &t, bo_ids(r, 3, 10), 3, bo_poisoned(r, 3 * 4));
}

static zz_status bad_embed_out_short(zz_bo *r) {
  zz_tensor t = bo_weight(r, "table", 2, 10, 4, -1, 1);
  return zz_device_embed_rows(r->dev, &t, bo_ids(r, 3, 10), 3, bo_poisoned(r, 2 * 4)); /* room for 2 rows */
}

static zz_status bad_embed_ids_host(zz_bo *r) {
  static const int32_t ids[3] = {0, 1, 2};
  zz_tensor t = bo_weight(r, "table", 2, 10, 4, -1, 1);
  return zz_device_embed_rows(r->dev, &t, ids, 3, bo_poisoned(r, 3 * 4));
}

static zz_status bad_gather_x_short(zz_bo *r) {
  void *x = bo_rand(r, 5 * 4, -1, 1);
  return zz_device_gather_rows(r->dev, x, 6, 4, bo_ids(r, 2, 5), 2, bo_poisoned(r, 2 * 4));
}

static zz_status bad_add_rows_x_short(zz_bo *r) {
  zz_tensor t = bo_weight(r, "table", 2, 10, 4, -1, 1);
  return zz_device_add_rows(r->dev, bo_rand(r, 3 * 3, -1, 1), &t, bo_ids(r, 3, 10), 3);
}

static zz_status bad_add_b_host(zz_bo *r) {
  static float host[9];
  void *a = bo_rand(r, 9, -1, 1);
  return zz_device_add(r->dev, a, host, 9, a);
}

/* A dense cache in the compute dtype whose sequences lie kv_stride elements apart. */
static zz_kv_layout bo_dense(zz_bo *r, int64_t kv_stride) {
  return (zz_kv_layout){.dt = zz_device_describe(r->dev)->compute_dtype, .seq_bytes = kv_stride * (int64_t)bo_es(r)};
}

/* kv_append of b 2, sq 2 rows of h 4 at pos 3 into a cache of cache_elems
 * elements whose sequences lie kv_stride apart (20 is what those rows need) */
static zz_status bo_kv_append(zz_bo *r, int64_t cache_elems, int64_t kv_stride) {
  void *cache = bo_rand(r, cache_elems, -1, 1), *x = bo_rand(r, 2 * 2 * 4, -1, 1);
  zz_kv_layout l = bo_dense(r, kv_stride);
  return zz_device_kv_append(r->dev, x, 2, 2, 1, 4, cache, &l, 3);
}

static zz_status bad_kv_append_stride(zz_bo *r) { return bo_kv_append(r, 2 * 16, 16); }
static zz_status bad_kv_append_cache_short(zz_bo *r) { return bo_kv_append(r, 2 * 20 - 1, 20); }

/* attention of b 2, sq 1, t 4, kv_heads 2, heads × hd 6 over a cache of t_max 5 */
static zz_status bo_attn_heads(zz_bo *r, int64_t heads, int64_t hd, int64_t kv_stride, bool scratch, bool pad_on_device,
                               int64_t window) {
  static const int32_t host_pad[2] = {0, 1};
  void *q = bo_rand(r, 2 * 6, -1, 1), *k = bo_rand(r, 2 * 30, -1, 1), *v = bo_rand(r, 2 * 30, -1, 1);
  const int32_t *pad = pad_on_device ? bo_i32(r, host_pad, 2) : host_pad;
  size_t sb = zz_device_attention_scratch(r->dev, 2, 1, 4, heads, false);
  zz_attn_args a = {.q = q,
                    .k = k,
                    .v = v,
                    .kv = bo_dense(r, kv_stride),
                    .b = 2,
                    .sq = 1,
                    .t = 4,
                    .q_start = 3,
                    .heads = heads,
                    .kv_heads = 2,
                    .hd = hd,
                    .pad = pad,
                    .keep = 1,
                    .window = window,
                    .out = bo_poisoned(r, 2 * 6),
                    .scratch = scratch && sb ? bo_poison(r, sb) : NULL};
  return zz_device_attention(r->dev, &a);
}

/* heads 2, hd 3 */
static zz_status bo_attn(zz_bo *r, int64_t kv_stride, bool scratch, bool pad_on_device) {
  return bo_attn_heads(r, 2, 3, kv_stride, scratch, pad_on_device, 0);
}

static zz_status bad_attention_stride(zz_bo *r) { return bo_attn(r, 20, true, true); }
static zz_status bad_attention_null(zz_bo *r) { return zz_device_attention(r->dev, NULL); }
static zz_status bad_attention_pad_host(zz_bo *r) { return bo_attn(r, 30, true, false); }

static zz_status bad_attention_no_scratch(zz_bo *r) {
  if (!zz_device_attention_scratch(r->dev, 2, 1, 4, 2, false)) /* this device needs none: spoil the stride instead */
    return bo_attn(r, 20, false, true);
  return bo_attn(r, 30, false, true);
}

static zz_status bad_attention_kv_heads(zz_bo *r) { return bo_attn_heads(r, 3, 2, 30, true, true, 0); }
static zz_status bad_attention_window(zz_bo *r) { return bo_attn_heads(r, 2, 3, 30, true, true, -1); }

static zz_status bad_rmsnorm_gamma(zz_bo *r) {
  zz_tensor g = bo_weight(r, "gamma", 1, 5, 0, 0.5f, 1.5f);
  void *x = bo_rand(r, 2 * 6, -1, 1);
  return zz_device_rmsnorm(r->dev, x, 2, 6, &g, 1e-6f, x);
}

static zz_status bad_rope_odd(zz_bo *r) {
  zz_rope rope = {.theta = 10000, .factor = 1};
  return zz_device_rope(r->dev, bo_rand(r, 2 * 7, -1, 1), 2, 1, 7, bo_ids(r, 2, 5), &rope);
}

static zz_status bad_rope_pos_host(zz_bo *r) {
  static const int32_t pos[2] = {0, 1};
  zz_rope rope = {.theta = 10000, .factor = 1};
  return zz_device_rope(r->dev, bo_rand(r, 2 * 8, -1, 1), 2, 1, 8, pos, &rope);
}

static zz_status bad_silu_y_short(zz_bo *r) {
  return zz_device_silu_mul(r->dev, bo_rand(r, 9, -1, 1), bo_rand(r, 9, -1, 1), 9, bo_poisoned(r, 8));
}

static zz_status bad_moe_route_k(zz_bo *r) {
  void *l = bo_rand(r, 3 * 4, -1, 1);
  int32_t *idx = bo_block(r, 3 * 5 * sizeof *idx);
  float *w = bo_block(r, 3 * 5 * sizeof *w);
  return zz_device_moe_route(r->dev, l, 3, 4, 5, true, idx, w);
}

static zz_status bad_moe_route_w_short(zz_bo *r) {
  void *l = bo_rand(r, 3 * 8, -1, 1);
  int32_t *idx = bo_block(r, 3 * 2 * sizeof *idx);
  float *w = bo_block(r, 5 * sizeof *w);
  return zz_device_moe_route(r->dev, l, 3, 8, 2, true, idx, w);
}

static zz_status bad_moe_scatter_out_short(zz_bo *r) {
  static const int32_t rows[2] = {0, 3};
  int32_t *ids = bo_i32(r, rows, 2);
  float *w = bo_block(r, 2 * sizeof *w);
  return zz_device_moe_scatter(r->dev, bo_rand(r, 2 * 6, -1, 1), ids, w, 2, 6, bo_rand(r, 3 * 6, -1, 1), 4);
}

static zz_status bad_moe_scatter_rows_host(zz_bo *r) {
  static const int32_t rows[2] = {0, 1};
  float *w = bo_block(r, 2 * sizeof *w);
  return zz_device_moe_scatter(r->dev, bo_rand(r, 2 * 6, -1, 1), rows, w, 2, 6, bo_rand(r, 4 * 6, -1, 1), 4);
}

static zz_status bad_write_dst_host(zz_bo *r) {
  static char a[16], b[16];
  return zz_device_write(r->dev, ZZ_LANE_COMPUTE, a, b, sizeof a);
}

static zz_status bad_write_src_device(zz_bo *r) {
  void *d = bo_poison(r, 64), *e = bo_poison(r, 64);
  return zz_device_write(r->dev, ZZ_LANE_COMPUTE, d, e, 64);
}

static zz_status bad_read_lane(zz_bo *r) {
  static char h[64];
  return zz_device_read(r->dev, (zz_lane)ZZ_LANE_COUNT, h, bo_poison(r, 64), 64);
}

static zz_status bad_copy_src_host(zz_bo *r) {
  static char h[64];
  return zz_device_copy(r->dev, ZZ_LANE_COMPUTE, bo_poison(r, 64), h, sizeof h);
}

static zz_status bad_copy_dst_past_end(zz_bo *r) {
  return zz_device_copy(r->dev, ZZ_LANE_COMPUTE, bo_poison(r, 64), bo_poison(r, 65), 65);
}

static zz_status bad_upload_q4(zz_bo *r) {
  static char h[64];
  return zz_device_upload(r->dev, ZZ_LANE_COMPUTE, bo_poisoned(r, 64), h, ZZ_DTYPE_Q4, 64);
}

static zz_status bad_download_past_end(zz_bo *r) {
  static float h[65];
  return zz_device_download(r->dev, ZZ_LANE_COMPUTE, h, ZZ_DTYPE_F32, bo_poisoned(r, 64), 65);
}

static zz_status bad_sync_lane(zz_bo *r) { return zz_device_sync(r->dev, (zz_lane)-1); }

static zz_status bad_alloc_zero(zz_bo *r) {
  void *p = NULL;
  return zz_device_alloc(r->dev, 0, &p);
}

typedef struct zz_bo_bad {
  const char *name;
  zz_status (*run)(zz_bo *r);
  const char *needle; /* must appear in the error message */
} zz_bo_bad;

static const zz_bo_bad zz_bo_bads[] = {
    {"linear: w [out, in+1]", bad_linear_w_shape, "linear: weight w (w) is [5, 9], want [5, 8]"},
    {"linear: w transposed", bad_linear_w_transposed, "weight w (w) is [8, 5], want [5, 8]"},
    {"linear: bias [out+2]", bad_linear_bias_shape, "weight b (b) is [7], want [5]"},
    {"linear: w in q4", bad_linear_q4, "is q4 with format 0 bits / groups of 0; want a matrix in a valid format"},
    {"linear: w absent", bad_linear_w_absent, "weight w is absent"},
    {"linear: w on the cpu tier", bad_linear_w_tier, "on the cpu tier"},
    {"linear: x in host memory", bad_linear_x_host, "linear: x ["},
    {"linear: y runs past its block", bad_linear_y_past_end, "linear: y ["},
    {"linear: w runs past its block", bad_linear_w_past_end, "is not inside memory this device allocated"},
    {"linear: n = 0", bad_linear_n_zero, "n = 0, must be positive"},
    {"layernorm: gamma [dim-1]", bad_layernorm_gamma, "weight gamma (gamma) is [5], want [6]"},
    {"layernorm: beta in q4", bad_layernorm_beta_q4, "beta (beta) is q4"},
    {"layernorm: eps NaN", bad_layernorm_eps, "eps = nan"},
    {"embed_rows: table in q4", bad_embed_q4, "embed_rows: weight table (table) is q4"},
    {"embed_rows: out too short", bad_embed_out_short, "embed_rows: out ["},
    {"embed_rows: ids in host memory", bad_embed_ids_host, "embed_rows: ids ["},
    {"gather_rows: x shorter than rows", bad_gather_x_short, "gather_rows: x ["},
    {"add_rows: x shorter than n rows", bad_add_rows_x_short, "add_rows: out ["},
    {"add: b in host memory", bad_add_b_host, "add: b ["},
    {"kv_append: stride too small", bad_kv_append_stride, "kv_append: seq_bytes = "},
    {"kv_append: cache block short", bad_kv_append_cache_short, "kv_append: cache ["},
    {"attention: stride too small", bad_attention_stride, "attention: seq_bytes = "},
    {"attention: pad in host memory", bad_attention_pad_host, "attention: pad ["},
    {"attention: no call", bad_attention_null, "attention: the call is NULL"},
    {"attention: scratch missing", bad_attention_no_scratch, "attention: "},
    {"attention: heads 3, kv_heads 2", bad_attention_kv_heads, "heads = 3 is not a multiple of kv_heads = 2"},
    {"attention: window -1", bad_attention_window, "window = -1, must not be negative"},
    {"rmsnorm: gamma [dim-1]", bad_rmsnorm_gamma, "rmsnorm: weight gamma (gamma) is [5], want [6]"},
    {"rope: odd head size", bad_rope_odd, "rope: hd = 7, must be even"},
    {"rope: pos in host memory", bad_rope_pos_host, "rope: pos ["},
    {"silu_mul: y runs past its block", bad_silu_y_short, "silu_mul: y ["},
    {"moe_route: k > experts", bad_moe_route_k, "moe_route: k = 5, want at most experts (4)"},
    {"moe_route: w shorter than n x k", bad_moe_route_w_short, "moe_route: w ["},
    {"moe_scatter: out shorter than out_rows", bad_moe_scatter_out_short, "moe_scatter: out ["},
    {"moe_scatter: rows in host memory", bad_moe_scatter_rows_host, "moe_scatter: rows ["},
    {"write: dst in host memory", bad_write_dst_host, "write: dst ["},
    {"write: host_src in device memory", bad_write_src_device, "host_src ["},
    {"read: lane out of range", bad_read_lane, "read: lane 4 does not exist"},
    {"copy: src in host memory", bad_copy_src_host, "copy: src ["},
    {"copy: dst runs past its block", bad_copy_dst_past_end, "copy: dst ["},
    {"upload: from q4", bad_upload_q4, "upload: host dtype q4 is not supported"},
    {"download: src runs past its block", bad_download_past_end, "download: src ["},
    {"sync: lane -1", bad_sync_lane, "sync: lane -1 does not exist"},
    {"alloc: 0 bytes", bad_alloc_zero, "alloc: 0 bytes asked"},
};
#define ZZ_BO_N_BADS (sizeof zz_bo_bads / sizeof zz_bo_bads[0])

static void bo_refusals(zz_device *dev) {
  for (size_t i = 0; i < ZZ_BO_N_BADS; i++) {
    const zz_bo_bad *b = &zz_bo_bads[i];
    zz_bo r;
    bo_begin(&r, dev, 1000 + i);
    zz_error_clear();
    zz_status st = b->run(&r);
    char line[1200];
    const char *msg = zz_error_message();
    bool ok = r.helper_st == ZZ_OK && st == ZZ_ERR_INVALID_ARG && strstr(msg, b->needle) != NULL;
    if (r.helper_st != ZZ_OK)
      snprintf(line, sizeof line, "%s refuses %-36s setup failed: %s", zz_device_describe(dev)->name, b->name, r.why);
    else
      snprintf(line, sizeof line, "%s refuses %-36s %s (%s: %s)", zz_device_describe(dev)->name, b->name,
               ok ? "PASS" : "FAIL", zz_status_str(st), msg);
    printf("    %s\n", line);
    CU_assertImplementation(ok, __LINE__, line, __FILE__, "", CU_FALSE);
    bo_end(&r);
  }
}

/* copy (device -> device), between two blocks and inside one, gives the bytes back
 * exactly; the CPU device's identity says it is not a GPU, a GPU's names it. */
static void bo_copy(zz_device *dev) {
  zz_bo r;
  bo_begin(&r, dev, 77);
  enum { N = 4099 };
  unsigned char *h = bo_host(N), *back = bo_host(N);
  for (int i = 0; i < N; i++) h[i] = (unsigned char)zz_rng_next(&r.rng);
  char *a = bo_block(&r, N), *b = bo_poison(&r, N + 8);
  if (a) bo_note(&r, zz_device_write(dev, ZZ_LANE_LOAD_CACHE, a, h, N), "write");
  if (a) bo_note(&r, zz_device_sync(dev, ZZ_LANE_LOAD_CACHE), "sync");
  if (a && b) bo_note(&r, zz_device_copy(dev, ZZ_LANE_COMPUTE, b + 8, a, N), "copy");
  if (b) bo_note(&r, zz_device_copy(dev, ZZ_LANE_COMPUTE, b, b + 8, 8), "copy inside a block");
  if (b) bo_note(&r, zz_device_read(dev, ZZ_LANE_COMPUTE, back, b + 8, N), "read");
  bo_note(&r, zz_device_sync(dev, ZZ_LANE_COMPUTE), "sync");
  if (r.helper_st != ZZ_OK) fprintf(stderr, "\n%s copy: %s\n", zz_device_describe(dev)->name, r.why);
  CU_ASSERT_EQUAL(r.helper_st, ZZ_OK);
  CU_ASSERT(r.helper_st == ZZ_OK && memcmp(back, h, N) == 0);
  if (b) bo_note(&r, zz_device_read(dev, ZZ_LANE_COMPUTE, back, b, 8), "read");
  bo_note(&r, zz_device_sync(dev, ZZ_LANE_COMPUTE), "sync");
  CU_ASSERT(r.helper_st == ZZ_OK && memcmp(back, h, 8) == 0);
  /* host arenas start on a disk block whatever their size (the disk tier reads
   * into them with O_DIRECT); cudaHostAlloc alone gave smaller boundaries */
  const size_t sizes[] = {1, 100, 4095, 5000, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *hp = NULL;
    CU_ASSERT_FATAL(zz_device_host_alloc(dev, sizes[i], &hp) == ZZ_OK);
    CU_ASSERT((uintptr_t)hp % ZZ_DISK_ALIGN == 0);
    memset(hp, 0x5a, sizes[i]); /* the whole asked size is usable */
    zz_device_host_free(dev, hp);
  }
  int ordinal = -7;
  char id[160] = "";
  zz_status st = zz_device_identity(dev, &ordinal, id, sizeof id);
  if (zz_device_describe(dev)->memory_is_host) {
    CU_ASSERT(st == ZZ_ERR_UNSUPPORTED && strstr(zz_error_message(), "not a GPU") != NULL);
  } else {
    CU_ASSERT(st == ZZ_OK && ordinal >= 0 && strncmp(id, "GPU-", 4) == 0 && strstr(id, " at PCI ") != NULL);
  }
  free(h);
  free(back);
  bo_end(&r);
}

static void test_cpu_copy(void) { bo_copy(g_cpu); }

/* The compute lane's host scratch: kept while a call asks no more, grown once
 * when one asks more, the bytes written before a smaller ask still there. */
static void test_host_scratch(void) {
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(1 << 20, 1, 1, &dev) == ZZ_OK);
  void *a = NULL, *b = NULL, *c = NULL;
  CU_ASSERT_FATAL(zz_device_host_scratch(dev, 64, &a) == ZZ_OK);
  memset(a, 7, 64);
  CU_ASSERT_FATAL(zz_device_host_scratch(dev, 16, &b) == ZZ_OK);
  CU_ASSERT(a == b && ((unsigned char *)b)[63] == 7);
  CU_ASSERT_FATAL(zz_device_host_scratch(dev, 1 << 16, &c) == ZZ_OK);
  memset(c, 1, 1 << 16);
  CU_ASSERT(dev->host_scratch == c && dev->host_scratch_bytes == 1 << 16);
  CU_ASSERT_EQUAL(zz_device_host_scratch(dev, 8, NULL), ZZ_ERR_INVALID_ARG);
  zz_device_destroy(dev);
}
static void test_cuda_copy(void) { bo_copy(g_cuda); }

static void test_cpu_refusals(void) { bo_refusals(g_cpu); }
static void test_cuda_refusals(void) { bo_refusals(g_cuda); }

/* ================================================================ supports, pools */

static void test_supports(void) {
  const zz_op compute[] = {ZZ_OP_EMBED_ROWS, ZZ_OP_ADD_ROWS,  ZZ_OP_LAYERNORM, ZZ_OP_LINEAR,
                           ZZ_OP_ADD,        ZZ_OP_KV_APPEND, ZZ_OP_ATTENTION};
  zz_device *devs[2] = {g_cpu, g_cuda};
  for (int d = 0; d < 2 && devs[d]; d++) {
    zz_dtype cdt = zz_device_describe(devs[d])->compute_dtype;
    for (size_t i = 0; i < sizeof compute / sizeof compute[0]; i++) {
      CU_ASSERT(zz_device_supports(devs[d], compute[i], cdt));
      /* 4-bit weights and caches: the ops that read them (kernels/cpu/quant.c and its CUDA twin) */
      bool q4 = compute[i] != ZZ_OP_LAYERNORM && compute[i] != ZZ_OP_ADD;
      CU_ASSERT(zz_device_supports(devs[d], compute[i], ZZ_DTYPE_Q4) == q4);
      CU_ASSERT(!zz_device_supports(devs[d], compute[i], cdt == ZZ_DTYPE_F32 ? ZZ_DTYPE_F16 : ZZ_DTYPE_F32));
      /* bf16 weight matrices: the CPU device's linear and embedding tables */
      bool bf16 = d == 0 &&
                  (compute[i] == ZZ_OP_LINEAR || compute[i] == ZZ_OP_EMBED_ROWS || compute[i] == ZZ_OP_ADD_ROWS);
      if (d == 0) CU_ASSERT(zz_device_supports(devs[d], compute[i], ZZ_DTYPE_BF16) == bf16);
    }
    for (zz_op op = ZZ_OP_UPLOAD; op <= ZZ_OP_DOWNLOAD; op++) {
      CU_ASSERT(zz_device_supports(devs[d], op, ZZ_DTYPE_F32));
      CU_ASSERT(zz_device_supports(devs[d], op, ZZ_DTYPE_F16));
      CU_ASSERT(zz_device_supports(devs[d], op, ZZ_DTYPE_BF16));
      CU_ASSERT(!zz_device_supports(devs[d], op, ZZ_DTYPE_Q4));
    }
    CU_ASSERT(!zz_device_supports(devs[d], ZZ_OP_COUNT, cdt));
    CU_ASSERT(!zz_device_supports(devs[d], ZZ_OP_LINEAR, ZZ_DTYPE_COUNT));
  }
  CU_ASSERT_STRING_EQUAL(zz_op_name(ZZ_OP_ATTENTION), "attention");
  CU_ASSERT_STRING_EQUAL(zz_op_name(ZZ_OP_COUNT), "?");
}

static void test_pools(void) {
  /* each pool keeps its own thread count; the attention pool exists on every device */
  CU_ASSERT_EQUAL(zz_pool_threads(g_cpu->pool), 3);
  CU_ASSERT_EQUAL(zz_pool_threads(zz_device_attn_pool(g_cpu)), 2);
  CU_ASSERT_EQUAL(zz_pool_threads(g_ref->pool), 1);
  if (g_cuda) {
    CU_ASSERT_PTR_NULL(g_cuda->pool);
    CU_ASSERT_EQUAL(zz_pool_threads(zz_device_attn_pool(g_cuda)), 2);
  }
  zz_device *dev = NULL;
  CU_ASSERT_EQUAL(zz_device_create_cpu(1 << 20, 1, ZZ_POOL_MAX_THREADS + 1, &dev), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "CPU attention threads asked"));
  CU_ASSERT_EQUAL(zz_device_create_cpu(1 << 20, ZZ_POOL_MAX_THREADS + 1, 1, &dev), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(dev);
  /* 0: all cores, for both pools */
  CU_ASSERT_FATAL(zz_device_create_cpu(1 << 20, 0, 0, &dev) == ZZ_OK);
  CU_ASSERT(zz_pool_threads(zz_device_compute_pool(dev)) >= 1);
  CU_ASSERT_EQUAL(zz_pool_threads(dev->pool), zz_pool_threads(zz_device_attn_pool(dev)));
  /* a block left allocated is given back by destroy (no leak under ASan) */
  void *p = NULL;
  CU_ASSERT(zz_device_alloc(dev, 4096, &p) == ZZ_OK);
  zz_device_destroy(dev);
}

/* ================================================================ main */

int main(void) {
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  if (zz_device_create_cpu(0, 1, 1, &g_ref) != ZZ_OK || zz_device_create_cpu(0, 3, 2, &g_cpu) != ZZ_OK) {
    fprintf(stderr, "test_backend_ops: cpu device: %s\n", zz_error_message());
    return 1;
  }
  if (zz_device_create_cuda(0, 0, 2, &g_cuda) != ZZ_OK) {
    printf("no CUDA device: the cuda suites are not registered (%s)\n", zz_error_message());
    g_cuda = NULL;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("device boundary", NULL, NULL);
  CU_add_test(s, "every op has a table row", test_every_op_has_a_row);
  CU_add_test(s, "supports()", test_supports);
  CU_add_test(s, "pools per device", test_pools);
  CU_add_test(s, "cpu refuses bad arguments", test_cpu_refusals);
  CU_add_test(s, "cpu copies on the device, block-aligned host memory; no GPU identity", test_cpu_copy);
  CU_add_test(s, "host scratch grows only when asked for more", test_host_scratch);
  s = CU_add_suite("backend ops: cpu (3 threads) vs cpu (1 thread)", NULL, NULL);
  CU_add_test(s, "every op, every shape", test_cpu_vs_cpu);
  if (g_cuda) {
    s = CU_add_suite("backend ops: cuda vs cpu", NULL, NULL);
    CU_add_test(s, "every op, every shape", test_cuda_vs_cpu);
    CU_add_test(s, "cuda refuses bad arguments", test_cuda_refusals);
    CU_add_test(s, "cuda copies on the device, block-aligned host memory; its GPU identity", test_cuda_copy);
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  zz_device_destroy(g_cuda);
  zz_device_destroy(g_cpu);
  zz_device_destroy(g_ref);
  return failures != 0;
}
