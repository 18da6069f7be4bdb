/*
 * device.c — the device boundary: creation and destruction of every device, its
 * thread pools, the record of its allocations, and the checked wrapper of every
 * op (zz_device_*), which validates arguments before dispatching to the backend's
 * ops table. Backends (device_cpu.c, device_cuda.c) only fill that table; what all
 * devices share lives here.
 *
 * Range checks: the device records each block zz_device_alloc hands out (a handful
 * of arenas in a run), and a wrapper accepts a device pointer only when the bytes
 * the op will touch lie inside one of them: a linear scan per argument, under a
 * reader lock because I/O lanes copy while the compute thread computes.
 *
 * Pools: every device has an attention pool (CPU attention beside a cache on the
 * host runs there, whatever computes the rest); the CPU device also has a compute
 * pool for its kernels. Each has its own thread count, so a plan can give the
 * attention threads and the compute threads their own cores.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "zz_limits.h"

/* ================================================================ allocations */

struct zz_device_ranges {
  pthread_rwlock_t lock;
  struct zz_range {
    uintptr_t base;
    size_t bytes;
  } * r; /* [n], unordered */
  size_t n, cap;
};

static zz_status zz_ranges_add(zz_device_ranges *rs, void *p, size_t bytes) {
  zz_status st = ZZ_OK;
  pthread_rwlock_wrlock(&rs->lock);
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? 2 * rs->cap : 16;
    struct zz_range *nr = realloc(rs->r, cap * sizeof *nr);
    if (nr) {
      rs->r = nr;
      rs->cap = cap;
    } else {
      st = zz_error(ZZ_ERR_NO_MEMORY, "device: out of host memory recording an allocation");
    }
  }
  if (st == ZZ_OK) rs->r[rs->n++] = (struct zz_range){(uintptr_t)p, bytes};
  pthread_rwlock_unlock(&rs->lock);
  return st;
}

static bool zz_ranges_remove(zz_device_ranges *rs, void *p) {
  bool found = false;
  pthread_rwlock_wrlock(&rs->lock);
  for (size_t i = 0; i < rs->n && !found; i++)
    if (rs->r[i].base == (uintptr_t)p) {
      rs->r[i] = rs->r[--rs->n];
      found = true;
    }
  pthread_rwlock_unlock(&rs->lock);
  return found;
}

/* inside: [p, p + bytes) lies within one block; else whether it overlaps any. */
static bool zz_ranges_find(zz_device_ranges *rs, const void *p, size_t bytes, bool inside) {
  uintptr_t a = (uintptr_t)p;
  bool hit = false;
  pthread_rwlock_rdlock(&rs->lock);
  for (size_t i = 0; i < rs->n && !hit; i++) {
    const struct zz_range *r = &rs->r[i];
    if (inside) hit = a >= r->base && a - r->base <= r->bytes && bytes <= r->bytes - (a - r->base);
    else
      hit = a < r->base + r->bytes && (bytes > UINTPTR_MAX - a || a + bytes > r->base);
  }
  pthread_rwlock_unlock(&rs->lock);
  return hit;
}

static size_t zz_ranges_count(zz_device_ranges *rs) {
  pthread_rwlock_rdlock(&rs->lock);
  size_t n = rs->n;
  pthread_rwlock_unlock(&rs->lock);
  return n;
}

/* ================================================================ creation */

/* threads 0: one per CPU this process may keep busy (its cgroup's cpuset and
 * quota, zz_limits.h), not the host's: more threads than a quota allows only
 * take turns, and are throttled together at the end of each period. */
static zz_status zz_device_pool(int threads, const char *what, zz_pool **out) {
  if (threads <= 0)
    threads = zz_limits_here()->cores < ZZ_POOL_MAX_THREADS ? zz_limits_here()->cores : ZZ_POOL_MAX_THREADS;
  int rc = zz_pool_create(threads, out);
  if (rc == EINVAL)
    return zz_error(ZZ_ERR_INVALID_ARG, "device: %d %s threads asked, at most %d", threads, what, ZZ_POOL_MAX_THREADS);
  if (rc != 0) return zz_error(ZZ_ERR_NO_MEMORY, "device: cannot start %d %s threads: %s", threads, what, strerror(rc));
  return ZZ_OK;
}

/* The end of every creation: on success hands dev out; on failure destroys what
 * was built, keeping the message of the failure (destroy may record its own). */
static zz_status zz_device_finish(zz_device *dev, zz_status st, zz_device **out) {
  if (st == ZZ_OK) {
    *out = dev;
    return ZZ_OK;
  }
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", zz_error_message());
  zz_device_destroy(dev);
  return zz_error(st, "%s", msg);
}

/* A zz_device with its allocation record and attention pool; the caller adds the rest. */
static zz_status zz_device_new(int attn_threads, zz_device **out) {
  zz_device *dev = calloc(1, sizeof *dev);
  zz_device_ranges *rs = calloc(1, sizeof *rs);
  if (!dev || !rs) {
    free(dev);
    free(rs);
    return zz_error(ZZ_ERR_NO_MEMORY, "device: out of memory");
  }
  pthread_rwlock_init(&rs->lock, NULL);
  dev->ranges = rs;
  return zz_device_finish(dev, zz_device_pool(attn_threads, "CPU attention", &dev->attn_pool), out);
}

zz_status zz_device_create_cpu(size_t capacity, int threads, int attn_threads, zz_device **out) {
  zz_device *dev = NULL;
  ZZ_CHECK(zz_device_new(attn_threads, &dev));
  zz_device_desc_init(ZZ_DEVICE_CPU, 0, &dev->desc); /* the backend sets its memory */
  zz_status st = zz_device_pool(threads, "cpu compute", &dev->pool);
  if (st == ZZ_OK) st = zz_device_cpu_open(dev, capacity);
  return zz_device_finish(dev, st, out);
}

zz_status zz_device_create_cuda(int ordinal, size_t capacity, int attn_threads, zz_device **out) {
  zz_device *dev = NULL;
  ZZ_CHECK(zz_device_new(attn_threads, &dev));
  zz_device_desc_init(ZZ_DEVICE_CUDA, 0, &dev->desc); /* the backend sets its memory */
  return zz_device_finish(dev, zz_device_cuda_open(dev, ordinal, capacity), out);
}

zz_status zz_device_create_best(int ordinal, size_t capacity, int threads, int attn_threads, zz_device **out) {
  static int said;
  zz_status st = zz_device_create_cuda(ordinal, capacity, attn_threads, out);
  if (st == ZZ_OK || st == ZZ_ERR_INVALID_ARG) return st; /* a bad thread count stays an error */
  /* UNSUPPORTED: no GPU, no driver, or no CUDA in this build; a machine without a
   * GPU is the ordinary case of auto, not a failure to explain (the CUDA runtime's
   * "driver version is insufficient" is what it says when no driver is loaded).
   * Anything else is a GPU that is there and failed: say why. */
  if (!said) {
#ifdef ZZ_HAVE_CUDA
    if (st == ZZ_ERR_UNSUPPORTED) fprintf(stderr, "zigzag: no GPU found, using the CPU device\n");
#else
    if (st == ZZ_ERR_UNSUPPORTED) fprintf(stderr, "zigzag: built without CUDA, using the CPU device\n");
#endif
    else
      fprintf(stderr, "zigzag: the GPU could not be used (%s); using the CPU device\n", zz_error_message());
    said = 1;
  }
  zz_error_clear();
  return zz_device_create_cpu(capacity, threads, attn_threads, out);
}

zz_status zz_device_set_weight_dtype(zz_device *dev, zz_dtype dt) {
  if (dt != ZZ_DTYPE_F32 && dt != ZZ_DTYPE_BF16)
    return zz_error(ZZ_ERR_INVALID_ARG, "--cpu-dtype %s: want f32 or bf16", zz_dtype_name(dt));
  if (dt == ZZ_DTYPE_BF16 && dev->desc.kind != ZZ_DEVICE_CPU)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--cpu-dtype bf16: weights in bf16 are an option of the cpu device, and this run's device is %s "
                    "(--device cpu)",
                    dev->desc.name);
  dev->desc.bf16_weights = dt == ZZ_DTYPE_BF16;
  return ZZ_OK;
}

zz_status zz_device_set_cpu_act(zz_device *dev, zz_cpu_act act) {
  if (act == ZZ_CPU_ACT_INT8 && dev->desc.kind != ZZ_DEVICE_CPU)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--cpu-act int8: int8 activations are an option of the cpu device's 4/8-bit linear, and this run's "
                    "device is %s (--device cpu)",
                    dev->desc.name);
  dev->desc.cpu_act = act;
  return ZZ_OK;
}

void zz_device_destroy(zz_device *dev) {
  if (!dev) return;
  zz_device_ranges *rs = dev->ranges;
  /* blocks the caller did not free go back, so no device memory outlives dev */
  if (rs && dev->ops && dev->impl)
    for (size_t i = 0; i < rs->n; i++) dev->ops->free(dev, (void *)rs->r[i].base);
  if (dev->ops && dev->impl) zz_device_host_free(dev, dev->host_scratch);
  if (dev->ops && dev->ops->destroy) dev->ops->destroy(dev);
  zz_pool_destroy(dev->pool);
  zz_pool_destroy(dev->attn_pool);
  if (rs) {
    pthread_rwlock_destroy(&rs->lock);
    free(rs->r);
    free(rs);
  }
  free(dev);
}

zz_pool *zz_device_attn_pool(zz_device *dev) { return dev->attn_pool; }

zz_pool *zz_device_compute_pool(zz_device *dev) { return dev->pool; }

/* ================================================================ the description */

/* What each kind is. The ops each runs are its backend's kernels: every op in
 * the compute dtype; f32, f16 and bf16 converted on upload and download; 4-bit
 * weights (kernels/cpu/quant.c, kernels/cuda) for the linear and the row
 * gathers, and 4-bit caches for append and attention (top-k included); on the
 * CPU, bf16 weight matrices (kernels/cpu/linear.c). */
static const struct {
  const char *name;
  zz_dtype compute_dtype;
  bool memory_is_host;
} zz_kinds[ZZ_DEVICE_KIND_COUNT] = {
    [ZZ_DEVICE_CPU] = {"cpu", ZZ_DTYPE_F32, true},
    [ZZ_DEVICE_CUDA] = {"cuda", ZZ_DTYPE_F16, false},
};

static bool zz_kind_runs(zz_device_kind k, zz_op op, zz_dtype dt) {
  if (op == ZZ_OP_UPLOAD || op == ZZ_OP_DOWNLOAD)
    return dt == ZZ_DTYPE_F32 || dt == ZZ_DTYPE_F16 || dt == ZZ_DTYPE_BF16;
  bool rows = op == ZZ_OP_LINEAR || op == ZZ_OP_EMBED_ROWS || op == ZZ_OP_ADD_ROWS;
  if (dt == ZZ_DTYPE_BF16 && k == ZZ_DEVICE_CPU && rows) return true;
  if (dt == ZZ_DTYPE_Q4) return rows || op == ZZ_OP_KV_APPEND || op == ZZ_OP_ATTENTION || op == ZZ_OP_ATTENTION_SPARSE;
  return dt == zz_kinds[k].compute_dtype;
}

void zz_device_desc_init(zz_device_kind kind, size_t capacity, zz_device_desc *out) {
  ZZ_ASSERT((unsigned)kind < ZZ_DEVICE_KIND_COUNT);
  zz_device_desc d = {.kind = kind,
                      .name = zz_kinds[kind].name,
                      .compute_dtype = zz_kinds[kind].compute_dtype,
                      .memory_is_host = zz_kinds[kind].memory_is_host,
                      .capacity = capacity,
                      .align = ZZ_ALIGN,
                      .isa = zz_cpu_isa_get()};
  for (int op = 0; op < ZZ_OP_COUNT; op++)
    for (int dt = 0; dt < ZZ_DTYPE_COUNT; dt++)
      if (zz_kind_runs(kind, (zz_op)op, (zz_dtype)dt)) d.supports[op] |= 1u << dt;
  *out = d;
}

zz_status zz_device_kind_parse(const char *name, zz_device_kind *out) {
  for (int k = 0; k < ZZ_DEVICE_KIND_COUNT; k++)
    if (name && strcmp(name, zz_kinds[k].name) == 0) {
      *out = (zz_device_kind)k;
      return ZZ_OK;
    }
  return zz_error(ZZ_ERR_INVALID_ARG, "device '%s': want cpu or cuda", name ? name : "(none)");
}

bool zz_device_desc_supports(const zz_device_desc *d, zz_op op, zz_dtype dt) {
  return (unsigned)op < ZZ_OP_COUNT && (unsigned)dt < ZZ_DTYPE_COUNT && (d->supports[op] >> dt & 1u);
}

void zz_device_desc_drop_q4(zz_device_desc *d) {
  for (int op = 0; op < ZZ_OP_COUNT; op++) d->supports[op] &= ~(1u << ZZ_DTYPE_Q4);
}

size_t zz_device_desc_attention_scratch(const zz_device_desc *d, int64_t b, int64_t sq, int64_t t, int64_t heads,
                                        bool general) {
  /* the CPU kernel's per-thread score rows (f32) whatever the path; the GPU's
   * score matrix, and more for the general path (sizes.c) */
  if (d->kind == ZZ_DEVICE_CPU) return zz_cpu_attention_scratch(b, heads, t) * sizeof(float);
  return zz_gpu_attention_scratch_bytes(b, sq, t, heads, general);
}

size_t zz_shared_ram_bytes(size_t machine_ram, size_t cpu_cap) {
  return cpu_cap && cpu_cap < machine_ram ? cpu_cap : machine_ram;
}

size_t zz_device_desc_usable(const zz_device_desc *d) {
  return d->capacity > d->reserved ? d->capacity - d->reserved : 0;
}

const zz_device_desc *zz_device_describe(const zz_device *dev) { return &dev->desc; }

void zz_device_reserve(zz_device *dev, size_t bytes) { dev->desc.reserved += bytes; }

void zz_device_unreserve(zz_device *dev, size_t bytes) {
  dev->desc.reserved -= bytes < dev->desc.reserved ? bytes : dev->desc.reserved;
}

/* ================================================================ argument checks */

static const char *const zz_op_names[ZZ_OP_COUNT] = {
    [ZZ_OP_EMBED_ROWS] = "embed_rows",
    [ZZ_OP_ADD_ROWS] = "add_rows",
    [ZZ_OP_LAYERNORM] = "layernorm",
    [ZZ_OP_LINEAR] = "linear",
    [ZZ_OP_ADD] = "add",
    [ZZ_OP_KV_APPEND] = "kv_append",
    [ZZ_OP_ATTENTION] = "attention",
    [ZZ_OP_UPLOAD] = "upload",
    [ZZ_OP_DOWNLOAD] = "download",
    [ZZ_OP_ATTENTION_SPARSE] = "attention_sparse",
    [ZZ_OP_RMSNORM] = "rmsnorm",
    [ZZ_OP_ROPE] = "rope",
    [ZZ_OP_SILU_MUL] = "silu_mul",
    [ZZ_OP_MOE_ROUTE] = "moe_route",
    [ZZ_OP_MOE_SCATTER] = "moe_scatter",
};

const char *zz_op_name(zz_op op) { return (unsigned)op < ZZ_OP_COUNT ? zz_op_names[op] : "?"; }

bool zz_device_supports(const zz_device *dev, zz_op op, zz_dtype dt) {
  return zz_device_desc_supports(&dev->desc, op, dt);
}

static zz_status zz_bad(zz_site s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static zz_status zz_bad(zz_site s, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return zz_error(ZZ_ERR_INVALID_ARG, "%s device: %s: %s", s.dev->desc.name, s.op, what);
}

size_t zz_es(const zz_device *dev) { return zz_dtype_nbytes(dev->desc.compute_dtype, 1); }

zz_status zz_arg_pos(zz_site s, const char *arg, int64_t v) {
  return v > 0 ? ZZ_OK : zz_bad(s, "%s = %lld, must be positive", arg, (long long)v);
}

/* elems = a * b, refusing an overflow (sizes come from callers we do not trust). */
zz_status zz_arg_mul(zz_site s, const char *arg, int64_t a, int64_t b, int64_t *elems) {
  if (__builtin_mul_overflow(a, b, elems))
    return zz_bad(s, "%s: %lld x %lld elements overflow", arg, (long long)a, (long long)b);
  return ZZ_OK;
}

/* [p, p + elems * es) must lie inside one block this device allocated. */
zz_status zz_arg_dev(zz_site s, const char *arg, const void *p, int64_t elems, size_t es) {
  size_t bytes;
  if (!p) return zz_bad(s, "%s is NULL", arg);
  if (elems < 0 || __builtin_mul_overflow((size_t)elems, es, &bytes))
    return zz_bad(s, "%s: %lld elements of %zu bytes do not fit in memory", arg, (long long)elems, es);
  if (!zz_ranges_find(s.dev->ranges, p, bytes, true))
    return zz_bad(s, "%s [%p, +%zu bytes) is not inside memory this device allocated (%zu blocks)", arg, p, bytes,
                  zz_ranges_count(s.dev->ranges));
  return ZZ_OK;
}

zz_status zz_arg_mat(zz_site s, const char *arg, const void *p, int64_t rows, int64_t cols, size_t es) {
  int64_t n;
  ZZ_CHECK(zz_arg_mul(s, arg, rows, cols, &n));
  return zz_arg_dev(s, arg, p, n, es);
}

/* The host side of a copy: present, and not device memory. */
static zz_status zz_arg_host(zz_site s, const char *arg, const void *p, size_t bytes) {
  if (!p) return zz_bad(s, "%s is NULL", arg);
  if (zz_ranges_find(s.dev->ranges, p, bytes, false))
    return zz_bad(s, "%s [%p, +%zu bytes) is device memory; a host buffer is wanted", arg, p, bytes);
  return ZZ_OK;
}

static zz_status zz_arg_lane(zz_site s, zz_lane lane) {
  if ((unsigned)lane >= ZZ_LANE_COUNT)
    return zz_bad(s, "lane %d does not exist (0 to %d)", (int)lane, ZZ_LANE_COUNT - 1);
  return ZZ_OK;
}

/* The device runs this op on activations of its compute dtype (it implements it). */
zz_status zz_arg_op(zz_site s, zz_op op) {
  if (!zz_device_supports(s.dev, op, s.dev->desc.compute_dtype))
    return zz_bad(s, "not implemented by this device for %s", zz_dtype_name(s.dev->desc.compute_dtype));
  return ZZ_OK;
}

/* A weight: present, shape [d0] or [d0, d1] (a negative d means any size > 0),
 * a dtype this device supports for op, on the GPU tier, its bytes in device memory. */
static zz_status zz_arg_weight(zz_site s, zz_op op, const char *arg, const zz_tensor *t, int ndim, int64_t d0,
                               int64_t d1) {
  if (!t || t->ndim == 0) return zz_bad(s, "weight %s is absent", arg);
  const int64_t want[2] = {d0, d1};
  bool ok = t->ndim == ndim;
  for (int d = 0; ok && d < ndim; d++) ok = want[d] < 0 ? t->shape[d] > 0 : t->shape[d] == want[d];
  if (!ok) {
    char got[64], exp[64];
    zz_shape_str(t->ndim, t->shape, got, sizeof got);
    if (ndim == 1) snprintf(exp, sizeof exp, "[%lld]", (long long)d0);
    else if (d0 < 0)
      snprintf(exp, sizeof exp, "[rows, %lld]", (long long)d1);
    else
      snprintf(exp, sizeof exp, "[%lld, %lld]", (long long)d0, (long long)d1);
    return zz_bad(s, "weight %s (%s) is %s, want %s", arg, t->name, got, exp);
  }
  if ((unsigned)t->dtype >= ZZ_DTYPE_COUNT)
    return zz_bad(s, "weight %s (%s): dtype %d unknown", arg, t->name, (int)t->dtype);
  if (!zz_device_supports(s.dev, op, t->dtype))
    return zz_bad(s, "weight %s (%s) is %s, which this device does not support for %s", arg, t->name,
                  zz_dtype_name(t->dtype), zz_op_name(op));
  if (t->tier != ZZ_TIER_GPU)
    return zz_bad(s, "weight %s (%s) is on the %s tier, not in device memory", arg, t->name, zz_tier_name(t->tier));
  int64_t n = t->shape[0];
  if (ndim == 2) ZZ_CHECK(zz_arg_mul(s, arg, t->shape[0], t->shape[1], &n));
  size_t bytes = zz_dtype_nbytes(t->dtype, n);
  if (t->dtype == ZZ_DTYPE_Q4) {
    if (ndim != 2 || !zz_qfmt_valid(t->q))
      return zz_bad(s, "weight %s (%s) is q4 with format %d bits / groups of %d; want a matrix in a valid format", arg,
                    t->name, t->q.bits, t->q.group);
    const zz_weight_spec ws = {.ndim = 2, .shape = {t->shape[0], t->shape[1]}};
    bytes = zz_weight_bytes_q(&ws, ZZ_DTYPE_Q4, t->q);
  }
  if (!t->data) return zz_bad(s, "weight %s (%s) has no data", arg, t->name);
  if (!zz_ranges_find(s.dev->ranges, t->data, bytes, true))
    return zz_bad(s, "weight %s (%s) [%p, +%zu bytes) is not inside memory this device allocated", arg, t->name,
                  t->data, bytes);
  return ZZ_OK;
}

/* ================================================================ memory and copies */

zz_status zz_device_alloc(zz_device *dev, size_t bytes, void **out) {
  zz_site s = {dev, "alloc"};
  if (!out) return zz_bad(s, "out is NULL");
  if (!bytes) return zz_bad(s, "0 bytes asked");
  void *p = NULL;
  ZZ_CHECK(dev->ops->alloc(dev, bytes, &p));
  zz_status st = zz_ranges_add(dev->ranges, p, bytes);
  if (st != ZZ_OK) {
    dev->ops->free(dev, p);
    return st;
  }
  *out = p;
  return ZZ_OK;
}

void zz_device_free(zz_device *dev, void *ptr) {
  if (!ptr) return;
  bool found = zz_ranges_remove(dev->ranges, ptr);
  ZZ_ASSERT(found); /* a pointer zz_device_alloc never handed out, or freed twice */
  dev->ops->free(dev, ptr);
}

zz_status zz_device_host_alloc(zz_device *dev, size_t bytes, void **out) {
  if (!out) return zz_bad((zz_site){dev, "host_alloc"}, "out is NULL");
  return dev->ops->host_alloc(dev, bytes, out);
}

void zz_device_host_free(zz_device *dev, void *ptr) {
  if (ptr) dev->ops->host_free(dev, ptr);
}

zz_status zz_device_host_scratch(zz_device *dev, size_t bytes, void **out) {
  if (!out) return zz_bad((zz_site){dev, "host_scratch"}, "out is NULL");
  if (bytes > dev->host_scratch_bytes) {
    zz_device_host_free(dev, dev->host_scratch);
    dev->host_scratch = NULL, dev->host_scratch_bytes = 0;
    ZZ_CHECK(zz_device_host_alloc(dev, bytes, &dev->host_scratch));
    dev->host_scratch_bytes = bytes;
  }
  *out = dev->host_scratch;
  return ZZ_OK;
}

/* Shared by write and read: the lane, the device side, the host side. */
static zz_status zz_check_copy(zz_site s, zz_lane lane, const char *dev_arg, const void *dev_p, const char *host_arg,
                               const void *host_p, size_t bytes) {
  ZZ_CHECK(zz_arg_lane(s, lane));
  if (!bytes) return ZZ_OK;
  ZZ_CHECK(zz_arg_dev(s, dev_arg, dev_p, (int64_t)bytes, 1));
  return zz_arg_host(s, host_arg, host_p, bytes);
}

zz_status zz_device_write(zz_device *dev, zz_lane lane, void *dst, const void *host_src, size_t bytes) {
  ZZ_CHECK(zz_check_copy((zz_site){dev, "write"}, lane, "dst", dst, "host_src", host_src, bytes));
  __atomic_fetch_add(&dev->bytes_to_device, (uint64_t)bytes, __ATOMIC_RELAXED);
  return bytes ? dev->ops->write(dev, lane, dst, host_src, bytes) : ZZ_OK;
}

zz_status zz_device_read(zz_device *dev, zz_lane lane, void *host_dst, const void *src, size_t bytes) {
  ZZ_CHECK(zz_check_copy((zz_site){dev, "read"}, lane, "src", src, "host_dst", host_dst, bytes));
  __atomic_fetch_add(&dev->bytes_from_device, (uint64_t)bytes, __ATOMIC_RELAXED);
  return bytes ? dev->ops->read(dev, lane, host_dst, src, bytes) : ZZ_OK;
}

zz_status zz_device_copy(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes) {
  zz_site s = {dev, "copy"};
  ZZ_CHECK(zz_arg_lane(s, lane));
  if (!bytes) return ZZ_OK;
  ZZ_CHECK(zz_arg_dev(s, "dst", dst, (int64_t)bytes, 1));
  ZZ_CHECK(zz_arg_dev(s, "src", src, (int64_t)bytes, 1));
  return dev->ops->copy(dev, lane, dst, src, bytes);
}

zz_status zz_device_identity(const zz_device *dev, int *ordinal_out, char *id_out, size_t len) {
  if (!dev->ops->identity)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s device: not a GPU (no ordinal or GPU id)", dev->desc.name);
  if (!ordinal_out || !id_out || len < 2)
    return zz_error(ZZ_ERR_INVALID_ARG, "%s device: identity: no room for the answer", dev->desc.name);
  return dev->ops->identity(dev, ordinal_out, id_out, len);
}

/* Shared by upload and download: lane, count, the host dtype, both sides. */
static zz_status zz_check_convert(zz_site s, zz_op op, zz_lane lane, const void *dev_p, const void *host_p,
                                  zz_dtype host_dt, int64_t n) {
  ZZ_CHECK(zz_arg_lane(s, lane));
  if (n < 0) return zz_bad(s, "n = %lld, must not be negative", (long long)n);
  if ((unsigned)host_dt >= ZZ_DTYPE_COUNT || !zz_device_supports(s.dev, op, host_dt))
    return zz_bad(s, "host dtype %s is not supported by this device", zz_dtype_name(host_dt));
  if (n == 0) return ZZ_OK;
  ZZ_CHECK(zz_arg_dev(s, op == ZZ_OP_UPLOAD ? "dst" : "src", dev_p, n, zz_es(s.dev)));
  return zz_arg_host(s, op == ZZ_OP_UPLOAD ? "host_src" : "host_dst", host_p, zz_dtype_nbytes(host_dt, n));
}

zz_status zz_device_upload(zz_device *dev, zz_lane lane, void *dst, const void *host_src, zz_dtype src_dt, int64_t n) {
  ZZ_CHECK(zz_check_convert((zz_site){dev, "upload"}, ZZ_OP_UPLOAD, lane, dst, host_src, src_dt, n));
  __atomic_fetch_add(&dev->bytes_to_device, (uint64_t)zz_dtype_nbytes(src_dt, n), __ATOMIC_RELAXED);
  return n ? dev->ops->upload(dev, lane, dst, host_src, src_dt, n) : ZZ_OK;
}

zz_status zz_device_download(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt, const void *src,
                             int64_t n) {
  ZZ_CHECK(zz_check_convert((zz_site){dev, "download"}, ZZ_OP_DOWNLOAD, lane, src, host_dst, dst_dt, n));
  __atomic_fetch_add(&dev->bytes_from_device, (uint64_t)zz_dtype_nbytes(dst_dt, n), __ATOMIC_RELAXED);
  return n ? dev->ops->download(dev, lane, host_dst, dst_dt, src, n) : ZZ_OK;
}

zz_status zz_device_sync(zz_device *dev, zz_lane lane) {
  ZZ_CHECK(zz_arg_lane((zz_site){dev, "sync"}, lane));
  return dev->ops->sync(dev, lane);
}

/* ================================================================ compute */

/* Rows gathered from a table [rows, dim] (weight or activation) into out [n, dim]. */
static zz_status zz_check_rows(zz_site s, const int32_t *ids, int64_t n, int64_t dim, const void *out) {
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_dev(s, "ids", ids, n, sizeof(int32_t)));
  return zz_arg_mat(s, "out", out, n, dim, zz_es(s.dev));
}

zz_status zz_device_embed_rows(zz_device *dev, const zz_tensor *table, const int32_t *ids, int64_t n, void *out) {
  zz_site s = {dev, "embed_rows"};
  ZZ_CHECK(zz_arg_weight(s, ZZ_OP_EMBED_ROWS, "table", table, 2, -1, -1));
  ZZ_CHECK(zz_check_rows(s, ids, n, table->shape[1], out));
  return dev->ops->embed_rows(dev, table->data, table->dtype, table->q, table->shape[1], ids, n, out);
}

zz_status zz_device_gather_rows(zz_device *dev, const void *x, int64_t rows, int64_t dim, const int32_t *ids, int64_t n,
                                void *out) {
  zz_site s = {dev, "gather_rows"};
  ZZ_CHECK(zz_arg_op(s, ZZ_OP_EMBED_ROWS));
  ZZ_CHECK(zz_arg_pos(s, "rows", rows));
  ZZ_CHECK(zz_arg_pos(s, "dim", dim));
  ZZ_CHECK(zz_arg_mat(s, "x", x, rows, dim, zz_es(dev)));
  ZZ_CHECK(zz_check_rows(s, ids, n, dim, out));
  return dev->ops->embed_rows(dev, x, dev->desc.compute_dtype, ZZ_QFMT_DEFAULT, dim, ids, n, out);
}

zz_status zz_device_add_rows(zz_device *dev, void *x, const zz_tensor *table, const int32_t *ids, int64_t n) {
  zz_site s = {dev, "add_rows"};
  ZZ_CHECK(zz_arg_weight(s, ZZ_OP_ADD_ROWS, "table", table, 2, -1, -1));
  ZZ_CHECK(zz_check_rows(s, ids, n, table->shape[1], x));
  return dev->ops->add_rows(dev, x, table->shape[1], table->data, table->dtype, table->q, ids, n);
}

/* A norm over rows: x and y [n, dim] in device memory, gain gamma [dim], eps. */
static zz_status zz_check_norm(zz_site s, zz_op op, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma,
                               float eps, const void *y) {
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_pos(s, "dim", dim));
  ZZ_CHECK(zz_arg_mat(s, "x", x, n, dim, zz_es(s.dev)));
  ZZ_CHECK(zz_arg_mat(s, "y", y, n, dim, zz_es(s.dev)));
  ZZ_CHECK(zz_arg_weight(s, op, "gamma", gamma, 1, dim, 0));
  if (!(eps >= 0 && isfinite(eps))) return zz_bad(s, "eps = %g, must be finite and >= 0", (double)eps);
  return ZZ_OK;
}

zz_status zz_device_layernorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma,
                              const zz_tensor *beta, float eps, void *y) {
  zz_site s = {dev, "layernorm"};
  ZZ_CHECK(zz_check_norm(s, ZZ_OP_LAYERNORM, x, n, dim, gamma, eps, y));
  ZZ_CHECK(zz_arg_weight(s, ZZ_OP_LAYERNORM, "beta", beta, 1, dim, 0));
  if (gamma->dtype != beta->dtype)
    return zz_bad(s, "gamma is %s but beta %s; they must share a dtype", zz_dtype_name(gamma->dtype),
                  zz_dtype_name(beta->dtype));
  return dev->ops->layernorm(dev, x, n, dim, gamma->data, beta->data, gamma->dtype, eps, y);
}

zz_status zz_device_linear(zz_device *dev, const void *x, int64_t n, int64_t in, const zz_tensor *w, const zz_tensor *b,
                           int64_t out, void *y, int relu) {
  zz_site s = {dev, "linear"};
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_pos(s, "in", in));
  ZZ_CHECK(zz_arg_pos(s, "out", out));
  ZZ_CHECK(zz_arg_mat(s, "x", x, n, in, zz_es(dev)));
  ZZ_CHECK(zz_arg_mat(s, "y", y, n, out, zz_es(dev)));
  ZZ_CHECK(zz_arg_weight(s, ZZ_OP_LINEAR, "w", w, 2, out, in));
  bool has_b = b && b->ndim;
  if (has_b) ZZ_CHECK(zz_arg_weight(s, ZZ_OP_LINEAR, "b", b, 1, out, 0));
  return dev->ops->linear(dev, x, n, in, w->data, w->dtype, w->q, has_b ? b->data : NULL, has_b ? b->dtype : w->dtype,
                          out, y, relu);
}

/* An elementwise op of two inputs a, b and an output y of n compute-dtype elements. */
static zz_status zz_check_binary(zz_site s, zz_op op, const char *an, const void *a, const char *bn, const void *b,
                                 int64_t n, const void *y) {
  ZZ_CHECK(zz_arg_op(s, op));
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_dev(s, an, a, n, zz_es(s.dev)));
  ZZ_CHECK(zz_arg_dev(s, bn, b, n, zz_es(s.dev)));
  return zz_arg_dev(s, "y", y, n, zz_es(s.dev));
}

zz_status zz_device_add(zz_device *dev, const void *a, const void *b, int64_t n, void *y) {
  ZZ_CHECK(zz_check_binary((zz_site){dev, "add"}, ZZ_OP_ADD, "a", a, "b", b, n, y));
  return dev->ops->add(dev, a, b, n, y);
}

/* [b, sq, cols] elements of an activation, overflow-checked. */
static zz_status zz_arg_act3(zz_site s, const char *arg, const void *p, int64_t b, int64_t sq, int64_t cols) {
  int64_t rows;
  ZZ_CHECK(zz_arg_mul(s, arg, b, sq, &rows));
  return zz_arg_mat(s, arg, p, rows, cols, zz_es(s.dev));
}

/* kv_heads positive and dividing heads (grouped-query attention). */
static zz_status zz_check_kv_heads(zz_site s, int64_t heads, int64_t kv_heads) {
  ZZ_CHECK(zz_arg_pos(s, "kv_heads", kv_heads));
  if (heads % kv_heads != 0)
    return zz_bad(s, "heads = %lld is not a multiple of kv_heads = %lld", (long long)heads, (long long)kv_heads);
  return ZZ_OK;
}

bool zz_attention_general(zz_dtype dt, double keep) { return dt == ZZ_DTYPE_Q4 || keep < 1; }

size_t zz_device_attention_scratch(const zz_device *dev, int64_t b, int64_t sq, int64_t t, int64_t heads,
                                   bool general) {
  return zz_device_desc_attention_scratch(&dev->desc, b, sq, t, heads, general);
}

/* ================================================================ KV caches (any layout) and attention */

/* A cache of b sequences laid out as l, whose first `rows` rows are used: the
 * layout is one the device stores, the sequence stride holds the rows, and the
 * bytes are the device's. */
static zz_status zz_check_cache(zz_site s, zz_op op, const char *arg, const void *cache, const zz_kv_layout *l,
                                int64_t b, int64_t rows, int64_t heads, int64_t hd) {
  if (!l) return zz_bad(s, "layout is NULL");
  if ((unsigned)l->dt >= ZZ_DTYPE_COUNT || !zz_device_supports(s.dev, op, l->dt))
    return zz_bad(s, "a %s cache is not supported by this device", zz_dtype_name(l->dt));
  if (l->dt == ZZ_DTYPE_Q4 && !zz_qfmt_valid(l->q))
    return zz_bad(s, "q4 cache format %d bits / groups of %d is not valid", l->q.bits, l->q.group);
  if (l->dt != ZZ_DTYPE_Q4 && l->dt != s.dev->desc.compute_dtype)
    return zz_bad(s, "a %s cache on a device computing in %s", zz_dtype_name(l->dt),
                  zz_dtype_name(s.dev->desc.compute_dtype));
  int64_t used, span;
  size_t row = zz_kv_row_bytes(l->dt, l->q, heads, hd);
  ZZ_CHECK(zz_arg_mul(s, arg, rows, (int64_t)row, &used));
  if (l->seq_bytes < used)
    return zz_bad(s, "seq_bytes = %lld, but %lld rows of %zu bytes need %lld", (long long)l->seq_bytes, (long long)rows,
                  row, (long long)used);
  ZZ_CHECK(zz_arg_mul(s, arg, b - 1, l->seq_bytes, &span));
  if (__builtin_add_overflow(span, used, &span)) return zz_bad(s, "%s: size overflows", arg);
  return zz_arg_dev(s, arg, cache, span, 1);
}

/* b, sq, heads, hd positive; *h = heads * hd. */
static zz_status zz_check_heads(zz_site s, int64_t b, int64_t sq, int64_t heads, int64_t hd, int64_t *h) {
  ZZ_CHECK(zz_arg_pos(s, "b", b));
  ZZ_CHECK(zz_arg_pos(s, "sq", sq));
  ZZ_CHECK(zz_arg_pos(s, "heads", heads));
  ZZ_CHECK(zz_arg_pos(s, "hd", hd));
  return zz_arg_mul(s, "heads x hd", heads, hd, h);
}

zz_status zz_device_kv_append(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                              void *cache, const zz_kv_layout *l, int64_t pos) {
  zz_site s = {dev, "kv_append"};
  int64_t h;
  ZZ_CHECK(zz_check_heads(s, b, sq, heads, hd, &h));
  if (pos < 0 || pos > INT64_MAX - sq) return zz_bad(s, "pos = %lld is out of range", (long long)pos);
  ZZ_CHECK(zz_arg_act3(s, "x", x, b, sq, h));
  ZZ_CHECK(zz_check_cache(s, ZZ_OP_KV_APPEND, "cache", cache, l, b, pos + sq, heads, hd));
  return dev->ops->kv_append(dev, x, b, sq, heads, hd, cache, l, pos);
}

zz_status zz_device_attention(zz_device *dev, const zz_attn_args *a) {
  zz_site s = {dev, "attention"};
  int64_t h;
  if (!a) return zz_bad(s, "the call is NULL");
  ZZ_CHECK(zz_check_heads(s, a->b, a->sq, a->heads, a->hd, &h));
  ZZ_CHECK(zz_check_kv_heads(s, a->heads, a->kv_heads));
  ZZ_CHECK(zz_arg_pos(s, "t", a->t));
  if (a->q_start < 0) return zz_bad(s, "q_start = %lld, must not be negative", (long long)a->q_start);
  if (!(a->keep > 0 && a->keep <= 1)) return zz_bad(s, "keep = %g, must be in (0, 1]", a->keep);
  if (a->window < 0) return zz_bad(s, "window = %lld, must not be negative", (long long)a->window);
  if (a->hd > ZZ_ATTN_MAX_HEAD_DIM)
    return zz_bad(s, "hd = %lld is above the %d a head may have", (long long)a->hd, ZZ_ATTN_MAX_HEAD_DIM);
  ZZ_CHECK(zz_arg_act3(s, "q", a->q, a->b, a->sq, h));
  ZZ_CHECK(zz_arg_act3(s, "out", a->out, a->b, a->sq, h));
  ZZ_CHECK(zz_check_cache(s, ZZ_OP_ATTENTION, "k", a->k, &a->kv, a->b, a->t, a->kv_heads, a->hd));
  ZZ_CHECK(zz_check_cache(s, ZZ_OP_ATTENTION, "v", a->v, &a->kv, a->b, a->t, a->kv_heads, a->hd));
  if (a->keep < 1 && !zz_device_supports(dev, ZZ_OP_ATTENTION_SPARSE, a->kv.dt))
    return zz_bad(s, "top-k sparse attention over a %s cache is not implemented by this device",
                  zz_dtype_name(a->kv.dt));
  ZZ_CHECK(zz_arg_dev(s, "pad", a->pad, a->b, sizeof(int32_t)));
  size_t need = zz_device_desc_attention_scratch(&dev->desc, a->b, a->sq, a->t, a->heads,
                                                 zz_attention_general(a->kv.dt, a->keep));
  if (need) ZZ_CHECK(zz_arg_dev(s, "scratch", a->scratch, (int64_t)need, 1));
  return dev->ops->attention(dev, a);
}

zz_status zz_device_rmsnorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma, float eps,
                            void *y) {
  zz_site s = {dev, "rmsnorm"};
  ZZ_CHECK(zz_check_norm(s, ZZ_OP_RMSNORM, x, n, dim, gamma, eps, y));
  return dev->ops->rmsnorm(dev, x, n, dim, gamma->data, gamma->dtype, eps, y);
}

zz_status zz_device_rope(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                         const zz_rope *rope) {
  zz_site s = {dev, "rope"};
  int64_t w;
  ZZ_CHECK(zz_arg_op(s, ZZ_OP_ROPE));
  ZZ_CHECK(zz_arg_pos(s, "heads", heads));
  ZZ_CHECK(zz_arg_pos(s, "hd", hd));
  if (hd % 2) return zz_bad(s, "hd = %lld, must be even", (long long)hd);
  if (!rope) return zz_bad(s, "rope is NULL");
  if ((unsigned)rope->type > ZZ_ROPE_LONGROPE) return zz_bad(s, "rope type %d unknown", (int)rope->type);
  if (rope->rot_dims < 0 || rope->rot_dims % 2 || rope->rot_dims / 2 > ZZ_ROPE_MAX_PAIRS)
    return zz_bad(s, "rot_dims = %d, must be even, in [0, %d]", (int)rope->rot_dims, 2 * ZZ_ROPE_MAX_PAIRS);
  if (rope->type == ZZ_ROPE_LONGROPE && zz_rope_dims(rope, hd) / 2 > ZZ_ROPE_MAX_PAIRS)
    return zz_bad(s, "longrope over %lld rotary pairs: at most %d", (long long)(zz_rope_dims(rope, hd) / 2),
                  ZZ_ROPE_MAX_PAIRS);
  if (!(rope->theta > 0 && isfinite(rope->theta)))
    return zz_bad(s, "theta = %g, must be positive", (double)rope->theta);
  ZZ_CHECK(zz_arg_mul(s, "x", heads, hd, &w));
  ZZ_CHECK(zz_arg_act3(s, "x", x, n, 1, w));
  ZZ_CHECK(zz_arg_dev(s, "pos", pos, n, sizeof(int32_t)));
  return dev->ops->rope(dev, x, n, heads, hd, pos, rope);
}

zz_status zz_device_silu_mul(zz_device *dev, const void *g, const void *u, int64_t n, void *y) {
  ZZ_CHECK(zz_check_binary((zz_site){dev, "silu_mul"}, ZZ_OP_SILU_MUL, "g", g, "u", u, n, y));
  return dev->ops->silu_mul(dev, g, u, n, y);
}
