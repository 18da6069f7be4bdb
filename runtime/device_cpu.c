/*
 * device_cpu.c — the CPU device: the reference implementation of zz_device.
 *
 * Its "device memory" is host memory counted against its own capacity, separate
 * from the CPU tier, so the GPU ⇄ CPU ⇄ disk paths of the schedule all run on a
 * machine without a GPU. Compute dtype is f32; upload/download convert to and
 * from the storage dtype. Copies complete before returning, so sync has nothing
 * to wait for. Layernorm and attention run on dev->pool (device.c creates it
 * with the device's thread count); so do linears on decode-sized inputs and on
 * bf16 weights (kernels/cpu/linear.c); larger f32 ones run as single-threaded
 * OpenBLAS tiles on the same pool (kernels/cpu/linear.c), so no second set of
 * threads competes. With --cpu-dtype bf16 weight matrices arrive in bf16 and are
 * computed on as they are (zz_device_desc.bf16_weights); everything else stays f32.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_impl.h"

typedef struct zz_cpu_dev {
  size_t used;           /* bytes allocated through alloc() */
  pthread_mutex_t xb_mu; /* guards xb while a linear uses it */
  void *xb;              /* x rounded to bf16 for a bf16 linear; grows, never shrinks */
  size_t xb_bytes;
} zz_cpu_dev;

/* Each allocation carries its size in front so free() can give the bytes back. */
#define ZZ_CPU_HDR 64

static zz_status zz_cpu_alloc(zz_device *dev, size_t bytes, void **out) {
  zz_cpu_dev *c = dev->impl;
  if (bytes > dev->desc.capacity - c->used) {
    char a[32], b[32];
    return zz_error(ZZ_ERR_NO_MEMORY, "cpu device: %s wanted, %s of its capacity left",
                    zz_format_bytes(bytes, a, sizeof a), zz_format_bytes(dev->desc.capacity - c->used, b, sizeof b));
  }
  char *p = NULL;
  if (posix_memalign((void **)&p, ZZ_CPU_HDR, bytes + ZZ_CPU_HDR) != 0) {
    char a[32];
    return zz_error(ZZ_ERR_NO_MEMORY, "cpu device: allocating %s failed", zz_format_bytes(bytes, a, sizeof a));
  }
  memcpy(p, &bytes, sizeof bytes);
  c->used += bytes;
  *out = p + ZZ_CPU_HDR;
  return ZZ_OK;
}

static void zz_cpu_free(zz_device *dev, void *ptr) {
  if (!ptr) return;
  zz_cpu_dev *c = dev->impl;
  char *p = (char *)ptr - ZZ_CPU_HDR;
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  c->used -= bytes;
  free(p);
}

static zz_status zz_cpu_host_alloc(zz_device *dev, size_t bytes, void **out) {
  (void)dev;
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    char a[32];
    return zz_error(ZZ_ERR_NO_MEMORY, "host memory: allocating %s failed", zz_format_bytes(bytes, a, sizeof a));
  }
  *out = p;
  return ZZ_OK;
}

static void zz_cpu_host_free(zz_device *dev, void *ptr) {
  (void)dev;
  free(ptr);
}

static zz_status zz_cpu_write(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes) {
  (void)dev, (void)lane;
  memcpy(dst, src, bytes);
  return ZZ_OK;
}

static zz_status zz_cpu_upload(zz_device *dev, zz_lane lane, void *dst, const void *src, zz_dtype src_dt, int64_t n) {
  (void)dev, (void)lane;
  zz_convert(src_dt, src, ZZ_DTYPE_F32, dst, n);
  return ZZ_OK;
}

static zz_status zz_cpu_download(zz_device *dev, zz_lane lane, void *dst, zz_dtype dst_dt, const void *src, int64_t n) {
  (void)dev, (void)lane;
  zz_convert(ZZ_DTYPE_F32, src, dst_dt, dst, n);
  return ZZ_OK;
}

static zz_status zz_cpu_sync(zz_device *dev, zz_lane lane) {
  (void)dev, (void)lane;
  return ZZ_OK;
}

/* device.c checked supports(): every weight reaching an op here is f32. */
#define ZZ_CPU_F32(dt) ZZ_ASSERT((dt) == ZZ_DTYPE_F32)

/* Rows ids[n] of table [rows, dim] in any weight dtype, written to out [n, dim] or
 * (add) added to it: the embedding and the position table share it. */
static void zz_cpu_table_rows(const void *table, zz_dtype table_dt, zz_qfmt table_q, int64_t dim, const int32_t *ids,
                              int64_t n, float *out, int add) {
  if (table_dt == ZZ_DTYPE_Q4) {
    zz_cpu_embed_rows_q(table, table_q, dim, ids, n, out, add);
  } else if (table_dt == ZZ_DTYPE_BF16) {
    zz_cpu_rows_bf16(table, dim, ids, n, out, add);
  } else {
    ZZ_CPU_F32(table_dt);
    if (add) zz_cpu_add_rows(out, dim, table, ids, n);
    else
      zz_cpu_embed_rows(table, dim, ids, n, out);
  }
}

static zz_status zz_cpu_embed(zz_device *dev, const void *table, zz_dtype table_dt, zz_qfmt table_q, int64_t dim,
                              const int32_t *ids, int64_t n, void *out) {
  (void)dev;
  zz_cpu_table_rows(table, table_dt, table_q, dim, ids, n, out, 0);
  return ZZ_OK;
}

static zz_status zz_cpu_addrows(zz_device *dev, void *x, int64_t dim, const void *table, zz_dtype table_dt,
                                zz_qfmt table_q, const int32_t *ids, int64_t n) {
  (void)dev;
  zz_cpu_table_rows(table, table_dt, table_q, dim, ids, n, x, 1);
  return ZZ_OK;
}

static zz_status zz_cpu_ln(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, const void *beta,
                           zz_dtype w_dt, float eps, void *y) {
  ZZ_CPU_F32(w_dt);
  zz_cpu_layernorm(dev->pool, x, n, dim, gamma, beta, eps, y);
  return ZZ_OK;
}

static zz_status zz_cpu_lin(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt,
                            zz_qfmt w_q, const void *b, zz_dtype b_dt, int64_t out, void *y, int relu) {
  zz_cpu_dev *c = dev->impl;
  if (b) ZZ_CPU_F32(b_dt);
  if (w_dt == ZZ_DTYPE_Q4) { /* kernels/cpu/linear.c zz_cpu_linear_q: fused, int8 x (--cpu-act) or widened panels */
    zz_cpu_linear_q(dev->pool, x, n, in, w, w_q, dev->desc.cpu_act, b, out, y, relu);
    return ZZ_OK;
  }
  ZZ_ASSERT(w_dt == ZZ_DTYPE_F32 || w_dt == ZZ_DTYPE_BF16);
  size_t need = zz_cpu_gemm_scratch(n, in, w_dt);
  pthread_mutex_lock(&c->xb_mu);
  if (need > c->xb_bytes) {
    void *p = realloc(c->xb, need);
    if (!p) {
      pthread_mutex_unlock(&c->xb_mu);
      char a[32];
      return zz_error(ZZ_ERR_NO_MEMORY, "cpu device: linear: %s for x in bf16", zz_format_bytes(need, a, sizeof a));
    }
    c->xb = p, c->xb_bytes = need;
  }
  zz_cpu_linear_w(dev->pool, x, n, in, w, w_dt, b, out, y, relu, c->xb);
  pthread_mutex_unlock(&c->xb_mu);
  return ZZ_OK;
}

static zz_status zz_cpu_addv(zz_device *dev, const void *a, const void *b, int64_t n, void *y) {
  (void)dev;
  zz_cpu_add(a, b, n, y);
  return ZZ_OK;
}

static zz_status zz_cpu_rms(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, zz_dtype w_dt,
                            float eps, void *y) {
  ZZ_CPU_F32(w_dt);
  zz_cpu_rmsnorm(dev->pool, x, n, dim, gamma, eps, y);
  return ZZ_OK;
}

static zz_status zz_cpu_rot(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                            const zz_rope *rope) {
  (void)dev;
  zz_cpu_rope(x, n, heads, hd, pos, rope);
  return ZZ_OK;
}

static zz_status zz_cpu_silu(zz_device *dev, const void *g, const void *u, int64_t n, void *y) {
  (void)dev;
  zz_cpu_silu_mul(g, u, n, y);
  return ZZ_OK;
}

static zz_status zz_cpu_route(zz_device *dev, const void *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                              int32_t *idx, float *w) {
  zz_cpu_moe_route(dev->pool, logits, n, experts, k, renorm, idx, w);
  return ZZ_OK;
}

static zz_status zz_cpu_scatter(zz_device *dev, const void *y, const int32_t *rows, const float *w, int64_t m,
                                int64_t dim, void *out) {
  (void)dev;
  zz_cpu_moe_scatter(y, rows, w, m, dim, out);
  return ZZ_OK;
}

static zz_status zz_cpu_zero(zz_device *dev, void *p, size_t bytes) {
  (void)dev;
  memset(p, 0, bytes);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- caches of any layout */

static zz_status zz_cpu_append(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                               void *cache, const zz_kv_layout *l, int64_t pos) {
  (void)dev;
  if (l->dt == ZZ_DTYPE_Q4) zz_cpu_kv_append_q(x, b, sq, heads, hd, cache, l->q, l->seq_bytes, pos);
  else /* f32: device.c checked the stride holds whole rows */
    zz_cpu_kv_append(x, b, sq, heads * hd, cache, l->seq_bytes / (int64_t)sizeof(float), pos);
  return ZZ_OK;
}

static zz_status zz_cpu_attn(zz_device *dev, const zz_attn_args *a) {
  zz_cpu_attention_ex(dev->pool, a);
  return ZZ_OK;
}

static void zz_cpu_destroy(zz_device *dev) {
  zz_cpu_dev *c = dev->impl;
  pthread_mutex_destroy(&c->xb_mu);
  free(c->xb);
  free(dev->impl);
  dev->impl = NULL;
}

static const zz_device_ops zz_cpu_ops = {
    .kind = ZZ_DEVICE_CPU, /* f32, memory in host RAM; what it runs: device.c's zz_kinds */
    .destroy = zz_cpu_destroy,
    .alloc = zz_cpu_alloc,
    .free = zz_cpu_free,
    .host_alloc = zz_cpu_host_alloc,
    .host_free = zz_cpu_host_free,
    .write = zz_cpu_write,
    .read = zz_cpu_write, /* both directions are a memcpy */
    .copy = zz_cpu_write, /* and within the device's arena too */
    .upload = zz_cpu_upload,
    .download = zz_cpu_download,
    .sync = zz_cpu_sync,
    .embed_rows = zz_cpu_embed,
    .add_rows = zz_cpu_addrows,
    .layernorm = zz_cpu_ln,
    .linear = zz_cpu_lin,
    .add = zz_cpu_addv,
    .kv_append = zz_cpu_append,
    .attention = zz_cpu_attn,
    .rmsnorm = zz_cpu_rms,
    .rope = zz_cpu_rot,
    .silu_mul = zz_cpu_silu,
    .moe_route = zz_cpu_route,
    .moe_scatter = zz_cpu_scatter,
    .zero = zz_cpu_zero,
};

zz_status zz_device_cpu_open(zz_device *dev, size_t capacity) {
  zz_cpu_dev *c = calloc(1, sizeof *c);
  if (!c) return zz_error(ZZ_ERR_NO_MEMORY, "cpu device: out of memory");
  pthread_mutex_init(&c->xb_mu, NULL);
  dev->ops = &zz_cpu_ops;
  dev->impl = c;
  dev->desc.capacity = capacity ? capacity : zz_host_memory_bytes();
  zz_cpu_blas_single(); /* GEMMs run on dev->pool's threads (kernels/cpu/linear.c) */
  return ZZ_OK;
}
