/*
 * device_cuda.c — the CUDA device: zz_device on one GPU, f16 compute dtype.
 *
 * Memory: device arenas come from cudaMalloc (never managed memory, whose page
 * migration would hide the very transfers the zig-zag schedule plans), counted
 * against dev->desc.capacity; host memory for the CPU tier is pinned (cudaHostAlloc) so
 * the copy lanes run as DMA, concurrently with compute.
 *
 * Lanes: one non-blocking cudaStream_t per zz_lane. write/read/upload/download are
 * asynchronous on their lane's stream; compute ops run on the compute lane's
 * stream, with the cuBLAS handle bound to it. sync(lane) waits for one stream.
 * Non-blocking streams do not synchronise with the legacy default stream, so
 * nothing here ever uses stream 0.
 *
 * Conversions (upload/download with a dtype other than f16) run on the GPU: the
 * raw bytes cross PCIe into a per-lane device staging buffer and zz_cuda_convert
 * writes the f16 result (downloads: the reverse). Done this way the calls stay
 * asynchronous and stream-ordered, and the host threads stay free for disk I/O and
 * CPU attention, which is what an offloading run needs them for; the cost is that
 * an f32 upload moves twice the bytes of an f16 one, which only matters for data
 * the engine did not already store as f16 (weights and cache are stored as f16).
 * Staging is ZZ_CUDA_STAGING_MAX bytes per lane, allocated at creation (larger
 * transfers go in chunks) and counted against the capacity.
 *
 * Accounting: dev->desc.capacity (0 at creation: the GPU's free memory then) bounds the
 * sum of alloc() blocks, staging buffers and the cuBLAS workspace; dev->desc.reserved
 * says how much of it the device keeps for itself (workspace: 4 MiB, 32 MiB on
 * sm_90+; set explicitly so that it is counted). cuBLAS's handle and the CUDA
 * context themselves live outside that sum.
 *
 * Threads: any host thread may call in (each call makes the device current);
 * alloc/free are serialised by a mutex; a lane's staging buffer assumes one thread
 * drives that lane at a time, which is how the engine uses lanes.
 *
 * Errors: the zz_cuda_* kernels return 0, a cudaError_t (> 0) or minus a
 * cublasStatus_t (< 0); zz_cuda_fail turns either into ZZ_ERR_DEVICE with the op, its
 * sizes and the CUDA/cuBLAS text. A failed cudaMalloc is ZZ_ERR_NO_MEMORY.
 *
 * Note for zz_device_destroy: ops->destroy frees dev->impl and everything in it
 * (streams, handle, staging, blocks still allocated), not dev itself; it copes with
 * an impl that zz_cuda_setup left half built.
 */
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"

#ifdef ZZ_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdarg.h>

/* Largest staging buffer per lane: a chunk this size crosses PCIe in well under a
 * millisecond, so the per-chunk launch costs nothing noticeable. (Overridable so a
 * test can exercise the chunking with small transfers.) */
#ifndef ZZ_CUDA_STAGING_MAX
#define ZZ_CUDA_STAGING_MAX ((size_t)8 << 20)
#endif

/* One cudaMalloc block handed out by alloc(), remembered so free() can give its
 * bytes back to the capacity (cudaFree does not tell the size). */
typedef struct zz_cuda_block {
  void *ptr;
  size_t bytes;
} zz_cuda_block;

typedef struct zz_cuda_dev {
  int ordinal;
  char gpu[256];                    /* device name (cudaDeviceProp.name), for messages */
  cudaStream_t lane[ZZ_LANE_COUNT]; /* non-blocking, one per zz_lane */
  cublasHandle_t blas;              /* bound to lane[ZZ_LANE_COMPUTE] */
  void *blas_ws;                    /* cuBLAS workspace, blas_ws_bytes */
  size_t blas_ws_bytes;
  void *staging[ZZ_LANE_COUNT]; /* conversion buffer of each lane */
  size_t staging_bytes[ZZ_LANE_COUNT];
  pthread_mutex_t mu;    /* guards used, blocks */
  size_t used;           /* bytes counted against dev->desc.capacity */
  zz_cuda_block *blocks; /* live alloc() blocks [n_blocks] */
  size_t n_blocks, cap_blocks;
} zz_cuda_dev;

/* ================================================================ errors */

/* rc: a cudaError_t (> 0) or minus a cublasStatus_t (< 0). what: printf format
 * naming the op and its sizes. Clears CUDA's last-error slot, so that a failed
 * runtime call is not reported again by the next launch check. */
static zz_status zz_cuda_fail(const zz_cuda_dev *d, int rc, const char *what, ...)
    __attribute__((format(printf, 3, 4)));
static zz_status zz_cuda_fail(const zz_cuda_dev *d, int rc, const char *what, ...) {
  char op[256];
  va_list ap;
  va_start(ap, what);
  vsnprintf(op, sizeof op, what, ap);
  va_end(ap);
  (void)cudaGetLastError();
  if (rc < 0) {
    cublasStatus_t st = (cublasStatus_t)(-rc);
    return zz_error(ZZ_ERR_DEVICE, "cuda device %d (%s): %s: cuBLAS %s: %s", d->ordinal, d->gpu, op,
                    cublasGetStatusName(st), cublasGetStatusString(st));
  }
  cudaError_t e = (cudaError_t)rc;
  return zz_error(ZZ_ERR_DEVICE, "cuda device %d (%s): %s: %s: %s", d->ordinal, d->gpu, op, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

#define ZZ_CUDA_OK(d, call, ...)                                                                                       \
  do {                                                                                                                 \
    int zz_rc_ = (int)(call);                                                                                          \
    if (zz_rc_ != 0) return zz_cuda_fail((d), zz_rc_, __VA_ARGS__);                                                    \
  } while (0)

static zz_cuda_dev *zz_cuda_impl(zz_device *dev) { return (zz_cuda_dev *)dev->impl; }

/* Makes this device current for the calling thread: streams and allocations belong
 * to one device, and each host thread has its own current device. */
static zz_status zz_cuda_enter(zz_cuda_dev *d) {
  ZZ_CUDA_OK(d, cudaSetDevice(d->ordinal), "cudaSetDevice(%d)", d->ordinal);
  return ZZ_OK;
}

static zz_status zz_cuda_lane(zz_cuda_dev *d, zz_lane lane, cudaStream_t *out) {
  if ((int)lane < 0 || lane >= ZZ_LANE_COUNT)
    return zz_error(ZZ_ERR_INVALID_ARG, "cuda device %d: lane %d does not exist", d->ordinal, (int)lane);
  ZZ_CHECK(zz_cuda_enter(d));
  *out = d->lane[lane];
  return ZZ_OK;
}

/* ================================================================ memory */

/* Counts `bytes` against the capacity, or says how much was asked and is left. */
static zz_status zz_cuda_reserve(zz_device *dev, size_t bytes, const char *what) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  pthread_mutex_lock(&d->mu);
  const size_t left = dev->desc.capacity > d->used ? dev->desc.capacity - d->used : 0;
  if (bytes > left) {
    pthread_mutex_unlock(&d->mu);
    char a[32], b[32], c[32];
    return zz_error(ZZ_ERR_NO_MEMORY,
                    "cuda device %d (%s): %s: %s (%zu bytes) asked, %s (%zu bytes) of the "
                    "capacity %s left",
                    d->ordinal, d->gpu, what, zz_format_bytes(bytes, a, sizeof a), bytes,
                    zz_format_bytes(left, b, sizeof b), left, zz_format_bytes(dev->desc.capacity, c, sizeof c));
  }
  d->used += bytes;
  pthread_mutex_unlock(&d->mu);
  return ZZ_OK;
}

static void zz_cuda_unreserve(zz_device *dev, size_t bytes) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  pthread_mutex_lock(&d->mu);
  d->used -= bytes <= d->used ? bytes : d->used;
  pthread_mutex_unlock(&d->mu);
}

/* cudaMalloc of `bytes` already reserved; on failure the reservation is undone. */
static zz_status zz_cuda_malloc_reserved(zz_device *dev, size_t bytes, const char *what, void **out) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    zz_cuda_unreserve(dev, bytes);
    char a[32];
    return zz_error(e == cudaErrorMemoryAllocation ? ZZ_ERR_NO_MEMORY : ZZ_ERR_DEVICE,
                    "cuda device %d (%s): %s: cudaMalloc(%s) failed: %s", d->ordinal, d->gpu, what,
                    zz_format_bytes(bytes, a, sizeof a), cudaGetErrorString(e));
  }
  *out = p;
  return ZZ_OK;
}

static zz_status zz_cuda_alloc(zz_device *dev, size_t bytes, void **out) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  if (bytes == 0) {
    *out = NULL;
    return ZZ_OK;
  }
  ZZ_CHECK(zz_cuda_enter(d));
  ZZ_CHECK(zz_cuda_reserve(dev, bytes, "alloc"));
  void *p = NULL;
  ZZ_CHECK(zz_cuda_malloc_reserved(dev, bytes, "alloc", &p));
  pthread_mutex_lock(&d->mu);
  if (d->n_blocks == d->cap_blocks) {
    size_t cap = d->cap_blocks ? 2 * d->cap_blocks : 64;
    zz_cuda_block *nb = realloc(d->blocks, cap * sizeof *nb);
    if (!nb) {
      pthread_mutex_unlock(&d->mu);
      (void)cudaFree(p);
      zz_cuda_unreserve(dev, bytes);
      return zz_error(ZZ_ERR_NO_MEMORY, "cuda device %d: out of host memory for bookkeeping", d->ordinal);
    }
    d->blocks = nb;
    d->cap_blocks = cap;
  }
  d->blocks[d->n_blocks++] = (zz_cuda_block){p, bytes};
  pthread_mutex_unlock(&d->mu);
  *out = p;
  return ZZ_OK;
}

static void zz_cuda_free(zz_device *dev, void *ptr) {
  if (!ptr) return;
  zz_cuda_dev *d = zz_cuda_impl(dev);
  size_t bytes = 0;
  int found = 0;
  pthread_mutex_lock(&d->mu);
  /* From the end: arenas are freed in reverse order of creation, so the block is
   * usually the last one. */
  for (size_t i = d->n_blocks; i-- > 0;) {
    if (d->blocks[i].ptr == ptr) {
      bytes = d->blocks[i].bytes;
      d->blocks[i] = d->blocks[--d->n_blocks];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&d->mu);
  ZZ_ASSERT(found); /* a pointer this device never handed out */
  (void)cudaSetDevice(d->ordinal);
  (void)cudaFree(ptr); /* waits for work using it; a failure here is a dead context */
  (void)cudaGetLastError();
  zz_cuda_unreserve(dev, bytes);
}

/* Host arenas must start on a disk block (ZZ_DISK_ALIGN: the disk tier's O_DIRECT
 * transfers read into them), which cudaHostAlloc does not promise: on an H100 with
 * CUDA 13 small requests came back on smaller boundaries. So one block more is
 * asked, the arena starts at the first block boundary past a pointer's room, and
 * the pointer cudaHostAlloc gave sits just below it for the free. */
static zz_status zz_cuda_host_alloc(zz_device *dev, size_t bytes, void **out) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  ZZ_CHECK(zz_cuda_enter(d));
  void *p = NULL;
  /* Portable: pinned for every CUDA context in the process, not only this one. */
  cudaError_t e = cudaHostAlloc(&p, bytes + ZZ_DISK_ALIGN, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    char a[32];
    return zz_error(ZZ_ERR_NO_MEMORY, "cuda device %d: pinned host memory: cudaHostAlloc(%s): %s", d->ordinal,
                    zz_format_bytes(bytes, a, sizeof a), cudaGetErrorString(e));
  }
  char *start = (char *)zz_align_up((size_t)((uintptr_t)p + sizeof p), ZZ_DISK_ALIGN);
  memcpy(start - sizeof p, &p, sizeof p);
  *out = start;
  return ZZ_OK;
}

static void zz_cuda_host_free(zz_device *dev, void *ptr) {
  (void)dev;
  if (!ptr) return;
  void *p;
  memcpy(&p, (char *)ptr - sizeof p, sizeof p);
  (void)cudaFreeHost(p);
  (void)cudaGetLastError();
}

/* The lane's conversion buffer: ZZ_CUDA_STAGING_MAX bytes allocated at creation,
 * so it is counted in dev->desc.reserved before any memory plan is checked and never
 * freed (a cudaFree would synchronise the whole device) while a run goes on.
 * Callers cut larger transfers into chunks of at most that size. */
static zz_status zz_cuda_staging(zz_device *dev, zz_lane lane, size_t bytes, void **out) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  if (bytes > d->staging_bytes[lane])
    return zz_error(ZZ_ERR_INVALID_ARG, "cuda: %zu bytes of conversion staging asked on lane %d, %zu exist", bytes,
                    (int)lane, d->staging_bytes[lane]);
  *out = d->staging[lane];
  return ZZ_OK;
}

/* ================================================================ copies */

/* A raw copy of `kind` on the lane's stream; `what` names it in errors. */
static zz_status zz_cuda_bytes(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes,
                               enum cudaMemcpyKind kind, const char *what) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_lane(d, lane, &s));
  if (bytes == 0) return ZZ_OK;
  ZZ_CUDA_OK(d, cudaMemcpyAsync(dst, src, bytes, kind, s), "%s %zu bytes on lane %d", what, bytes, (int)lane);
  return ZZ_OK;
}

static zz_status zz_cuda_write(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes) {
  return zz_cuda_bytes(dev, lane, dst, src, bytes, cudaMemcpyHostToDevice, "write");
}

static zz_status zz_cuda_read(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes) {
  return zz_cuda_bytes(dev, lane, dst, src, bytes, cudaMemcpyDeviceToHost, "read");
}

static zz_status zz_cuda_copy(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes) {
  return zz_cuda_bytes(dev, lane, dst, src, bytes, cudaMemcpyDeviceToDevice, "copy on the device");
}

/* "GPU-<uuid> at PCI <bus id>": the UUID names the physical GPU whatever
 * CUDA_VISIBLE_DEVICES renumbered, the bus id is what an operator sees. */
static zz_status zz_cuda_identity(const zz_device *dev, int *ordinal_out, char *id_out, size_t len) {
  const zz_cuda_dev *d = (const zz_cuda_dev *)dev->impl;
  struct cudaDeviceProp prop;
  ZZ_CUDA_OK(d, cudaGetDeviceProperties(&prop, d->ordinal), "cudaGetDeviceProperties");
  char bus[32] = "?";
  ZZ_CUDA_OK(d, cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d->ordinal), "cudaDeviceGetPCIBusId");
  const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
  snprintf(id_out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x at PCI %s", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15], bus);
  *ordinal_out = d->ordinal;
  return ZZ_OK;
}

static size_t zz_cuda_elem_bytes(zz_dtype dt) { return dt == ZZ_DTYPE_F32 ? 4 : 2; }

static int zz_cuda_plain_dtype(zz_dtype dt) { return dt == ZZ_DTYPE_F32 || dt == ZZ_DTYPE_F16 || dt == ZZ_DTYPE_BF16; }

/* n elements between the host, in host_dt, and the device's f16 (up: to the
 * device): f16 is copied as is; f32 and bf16 pass through the lane's staging
 * buffer in chunks and are converted on the device. */
static zz_status zz_cuda_transfer(zz_device *dev, zz_lane lane, bool up, void *dst, const void *src, zz_dtype host_dt,
                                  int64_t n) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  const char *what = up ? "upload" : "download";
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_lane(d, lane, &s));
  if (!zz_cuda_plain_dtype(host_dt))
    return zz_error(ZZ_ERR_UNSUPPORTED, "cuda device: %s %s %s is not implemented", what, up ? "from" : "to",
                    zz_dtype_name(host_dt));
  if (n <= 0) return n == 0 ? ZZ_OK : zz_error(ZZ_ERR_INVALID_ARG, "%s of %lld elements", what, (long long)n);
  if (host_dt == ZZ_DTYPE_F16)
    return up ? zz_cuda_write(dev, lane, dst, src, (size_t)n * 2) : zz_cuda_read(dev, lane, dst, src, (size_t)n * 2);
  const size_t esz = zz_cuda_elem_bytes(host_dt);
  const int64_t chunk = (int64_t)(ZZ_CUDA_STAGING_MAX / esz);
  void *stage = NULL;
  ZZ_CHECK(zz_cuda_staging(dev, lane, (size_t)(n < chunk ? n : chunk) * esz, &stage));
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t c = n - off < chunk ? n - off : chunk;
    if (up) {
      ZZ_CUDA_OK(d, cudaMemcpyAsync(stage, (const char *)src + off * esz, (size_t)c * esz, cudaMemcpyHostToDevice, s),
                 "upload %s: copying %lld elements on lane %d", zz_dtype_name(host_dt), (long long)c, (int)lane);
      ZZ_CUDA_OK(d, zz_cuda_convert(host_dt, stage, ZZ_DTYPE_F16, (uint16_t *)dst + off, c, s),
                 "upload %s: converting %lld elements to f16", zz_dtype_name(host_dt), (long long)c);
    } else {
      ZZ_CUDA_OK(d, zz_cuda_convert(ZZ_DTYPE_F16, (const uint16_t *)src + off, host_dt, stage, c, s),
                 "download %s: converting %lld elements from f16", zz_dtype_name(host_dt), (long long)c);
      ZZ_CUDA_OK(d, cudaMemcpyAsync((char *)dst + off * esz, stage, (size_t)c * esz, cudaMemcpyDeviceToHost, s),
                 "download %s: copying %lld elements on lane %d", zz_dtype_name(host_dt), (long long)c, (int)lane);
    }
  }
  return ZZ_OK;
}

static zz_status zz_cuda_upload(zz_device *dev, zz_lane lane, void *dst, const void *src, zz_dtype src_dt, int64_t n) {
  return zz_cuda_transfer(dev, lane, true, dst, src, src_dt, n);
}

static zz_status zz_cuda_download(zz_device *dev, zz_lane lane, void *dst, zz_dtype dst_dt, const void *src,
                                  int64_t n) {
  return zz_cuda_transfer(dev, lane, false, dst, src, dst_dt, n);
}

static zz_status zz_cuda_sync(zz_device *dev, zz_lane lane) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_lane(d, lane, &s));
  ZZ_CUDA_OK(d, cudaStreamSynchronize(s), "sync lane %d", (int)lane);
  return ZZ_OK;
}

/* ================================================================ compute */

/* Every op runs on the compute lane; the kernels check their own launches. */
static zz_status zz_cuda_compute(zz_cuda_dev *d, cudaStream_t *s) { return zz_cuda_lane(d, ZZ_LANE_COMPUTE, s); }

/* device.c checked supports(): every weight reaching an op here is f16. */
#define ZZ_CUDA_F16(dt) ZZ_ASSERT((dt) == ZZ_DTYPE_F16)

/* A Q4 table's rows (kernels/cuda/quant.cu): gathered (add = 0) or added (add = 1). */
static zz_status zz_cuda_rows_qv(zz_device *dev, const void *table, zz_qfmt q, int64_t dim, const int32_t *ids,
                                 int64_t n, void *out, int add) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_rows_q(table, q, dim, ids, n, out, add, s), "%s q%d/%d [%lld, %lld]",
             add ? "add_rows" : "embed_rows", q.bits, q.group, (long long)n, (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_embed(zz_device *dev, const void *table, zz_dtype table_dt, zz_qfmt table_q, int64_t dim,
                               const int32_t *ids, int64_t n, void *out) {
  if (table_dt == ZZ_DTYPE_Q4) return zz_cuda_rows_qv(dev, table, table_q, dim, ids, n, out, 0);
  zz_cuda_dev *d = zz_cuda_impl(dev);
  ZZ_CUDA_F16(table_dt);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_embed_rows(table, dim, ids, n, out, s), "embed_rows [%lld, %lld]", (long long)n,
             (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_addrows(zz_device *dev, void *x, int64_t dim, const void *table, zz_dtype table_dt,
                                 zz_qfmt table_q, const int32_t *ids, int64_t n) {
  if (table_dt == ZZ_DTYPE_Q4) return zz_cuda_rows_qv(dev, table, table_q, dim, ids, n, x, 1);
  zz_cuda_dev *d = zz_cuda_impl(dev);
  ZZ_CUDA_F16(table_dt);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_add_rows(x, dim, table, ids, n, s), "add_rows [%lld, %lld]", (long long)n, (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_ln(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, const void *beta,
                            zz_dtype w_dt, float eps, void *y) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  ZZ_CUDA_F16(w_dt);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_layernorm(x, n, dim, gamma, beta, eps, y, s), "layernorm [%lld, %lld]", (long long)n,
             (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_lin(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt,
                             zz_qfmt w_q, const void *b, zz_dtype b_dt, int64_t out, void *y, int relu) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  if (b) ZZ_CUDA_F16(b_dt);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  if (w_dt == ZZ_DTYPE_Q4) { /* kernels/cuda/quant.cu */
    ZZ_CUDA_OK(d, zz_cuda_linear_q(x, n, in, w, w_q, b, out, y, relu, s), "linear q%d/%d [%lld, %lld] x [%lld, %lld]^T",
               w_q.bits, w_q.group, (long long)n, (long long)in, (long long)out, (long long)in);
    return ZZ_OK;
  }
  ZZ_CUDA_F16(w_dt);
  ZZ_CUDA_OK(d, zz_cuda_linear(d->blas, x, n, in, w, b, out, y, relu, s), "linear [%lld, %lld] x [%lld, %lld]^T%s%s",
             (long long)n, (long long)in, (long long)out, (long long)in, b ? " + bias" : "", relu ? ", relu" : "");
  return ZZ_OK;
}

static zz_status zz_cuda_addv(zz_device *dev, const void *a, const void *b, int64_t n, void *y) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_add(a, b, n, y, s), "add [%lld]", (long long)n);
  return ZZ_OK;
}

static zz_status zz_cuda_rms(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, zz_dtype w_dt,
                             float eps, void *y) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  ZZ_CUDA_F16(w_dt);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_rmsnorm(x, n, dim, gamma, eps, y, s), "rmsnorm [%lld, %lld]", (long long)n, (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_rot(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                             const zz_rope *rope) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_rope(x, n, heads, hd, pos, rope, s), "rope [%lld, %lld x %lld]", (long long)n, (long long)heads,
             (long long)hd);
  return ZZ_OK;
}

static zz_status zz_cuda_silu(zz_device *dev, const void *g, const void *u, int64_t n, void *y) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_silu_mul(g, u, n, y, s), "silu_mul [%lld]", (long long)n);
  return ZZ_OK;
}

static zz_status zz_cuda_route(zz_device *dev, const void *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                               int32_t *idx, float *w) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_moe_route(logits, n, experts, k, renorm, idx, w, s), "moe_route [%lld, %lld] top %lld",
             (long long)n, (long long)experts, (long long)k);
  return ZZ_OK;
}

static zz_status zz_cuda_scatter(zz_device *dev, const void *y, const int32_t *rows, const float *w, int64_t m,
                                 int64_t dim, void *out) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, zz_cuda_moe_scatter(y, rows, w, m, dim, out, s), "moe_scatter [%lld, %lld]", (long long)m,
             (long long)dim);
  return ZZ_OK;
}

static zz_status zz_cuda_zero(zz_device *dev, void *p, size_t bytes) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  ZZ_CUDA_OK(d, cudaMemsetAsync(p, 0, bytes, s), "zero %zu bytes", bytes);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- KV caches of any layout (Q4: kernels/cuda/quant.cu) */

static zz_status zz_cuda_append(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                                void *cache, const zz_kv_layout *l, int64_t pos) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  if (l->dt == ZZ_DTYPE_Q4)
    ZZ_CUDA_OK(d, zz_cuda_kv_append_q(x, b, sq, heads, hd, cache, l->q, l->seq_bytes, pos, s),
               "kv_append q%d/%d [%lld, %lld, %lld x %lld] at %lld", l->q.bits, l->q.group, (long long)b, (long long)sq,
               (long long)heads, (long long)hd, (long long)pos);
  else /* f16: device.c checked the stride holds whole rows */
    ZZ_CUDA_OK(d, zz_cuda_kv_append(x, b, sq, heads * hd, cache, l->seq_bytes / 2, pos, s),
               "kv_append [%lld, %lld, %lld] at %lld", (long long)b, (long long)sq, (long long)(heads * hd),
               (long long)pos);
  return ZZ_OK;
}

static zz_status zz_cuda_attn(zz_device *dev, const zz_attn_args *a) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  cudaStream_t s = NULL;
  ZZ_CHECK(zz_cuda_compute(d, &s));
  /* a dense f16 cache keeps the cuBLAS path; Q4 and top-k take quant.cu's kernel */
  if (!zz_attention_general(a->kv.dt, a->keep)) {
    ZZ_CUDA_OK(d, zz_cuda_attention(d->blas, a, s),
               "attention b=%lld sq=%lld t=%lld q_start=%lld heads=%lld kv_heads=%lld hd=%lld window=%lld",
               (long long)a->b, (long long)a->sq, (long long)a->t, (long long)a->q_start, (long long)a->heads,
               (long long)a->kv_heads, (long long)a->hd, (long long)a->window);
    return ZZ_OK;
  }
  ZZ_CUDA_OK(d, zz_cuda_attention_ex(a, s),
             "attention (%s cache, keep %g) b=%lld sq=%lld t=%lld heads=%lld kv_heads=%lld hd=%lld window=%lld",
             zz_dtype_name(a->kv.dt), a->keep, (long long)a->b, (long long)a->sq, (long long)a->t, (long long)a->heads,
             (long long)a->kv_heads, (long long)a->hd, (long long)a->window);
  return ZZ_OK;
}

/* ================================================================ create / destroy */

static void zz_cuda_destroy(zz_device *dev) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  if (!d) return;
  (void)cudaSetDevice(d->ordinal);
  for (int l = 0; l < ZZ_LANE_COUNT; l++)
    if (d->lane[l]) (void)cudaStreamSynchronize(d->lane[l]);
  /* Blocks the engine did not free: give them back rather than leak a GPU's worth. */
  for (size_t i = 0; i < d->n_blocks; i++) (void)cudaFree(d->blocks[i].ptr);
  for (int l = 0; l < ZZ_LANE_COUNT; l++)
    if (d->staging[l]) (void)cudaFree(d->staging[l]);
  if (d->blas) (void)cublasDestroy(d->blas);
  if (d->blas_ws) (void)cudaFree(d->blas_ws);
  for (int l = 0; l < ZZ_LANE_COUNT; l++) {
    if (d->lane[l]) (void)cudaStreamDestroy(d->lane[l]);
  }
  (void)cudaGetLastError();
  pthread_mutex_destroy(&d->mu);
  free(d->blocks);
  free(d);
  dev->impl = NULL;
}

static const zz_device_ops zz_cuda_ops = {
    .kind = ZZ_DEVICE_CUDA, /* f16; what it runs: device.c's zz_kinds */
    .destroy = zz_cuda_destroy,
    .alloc = zz_cuda_alloc,
    .free = zz_cuda_free,
    .host_alloc = zz_cuda_host_alloc,
    .host_free = zz_cuda_host_free,
    .write = zz_cuda_write,
    .read = zz_cuda_read,
    .copy = zz_cuda_copy,
    .identity = zz_cuda_identity,
    .upload = zz_cuda_upload,
    .download = zz_cuda_download,
    .sync = zz_cuda_sync,
    .embed_rows = zz_cuda_embed,
    .add_rows = zz_cuda_addrows,
    .layernorm = zz_cuda_ln,
    .linear = zz_cuda_lin,
    .add = zz_cuda_addv,
    .kv_append = zz_cuda_append,
    .attention = zz_cuda_attn,
    .rmsnorm = zz_cuda_rms,
    .rope = zz_cuda_rot,
    .silu_mul = zz_cuda_silu,
    .moe_route = zz_cuda_route,
    .moe_scatter = zz_cuda_scatter,
    .zero = zz_cuda_zero,
};

/* Everything after the zz_device exists; on failure the caller destroys it. */
static zz_status zz_cuda_setup(zz_device *dev, size_t capacity) {
  zz_cuda_dev *d = zz_cuda_impl(dev);
  struct cudaDeviceProp prop;
  ZZ_CUDA_OK(d, cudaGetDeviceProperties(&prop, d->ordinal), "cudaGetDeviceProperties");
  snprintf(d->gpu, sizeof d->gpu, "%s", prop.name);
  size_t free_b = 0, total_b = 0;
  ZZ_CUDA_OK(d, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  dev->desc.capacity = capacity ? capacity : free_b;

  for (int l = 0; l < ZZ_LANE_COUNT; l++) {
    ZZ_CUDA_OK(d, cudaStreamCreateWithFlags(&d->lane[l], cudaStreamNonBlocking), "creating the stream of lane %d", l);
  }
  ZZ_CUDA_OK(d, -(int)cublasCreate(&d->blas), "cublasCreate");
  ZZ_CUDA_OK(d, -(int)cublasSetStream(d->blas, d->lane[ZZ_LANE_COMPUTE]), "cublasSetStream");
  /* Our own workspace, so it is counted against the capacity; set after
   * cublasSetStream, which resets the handle to cuBLAS's default pool. Sizes are
   * NVIDIA's recommendation (32 MiB on Hopper, 4 MiB before). */
  d->blas_ws_bytes = (size_t)(prop.major >= 9 ? 32 : 4) << 20;
  ZZ_CHECK(zz_cuda_reserve(dev, d->blas_ws_bytes, "cuBLAS workspace"));
  ZZ_CHECK(zz_cuda_malloc_reserved(dev, d->blas_ws_bytes, "cuBLAS workspace", &d->blas_ws));
  ZZ_CUDA_OK(d, -(int)cublasSetWorkspace(d->blas, d->blas_ws, d->blas_ws_bytes), "cublasSetWorkspace");
  for (int l = 0; l < ZZ_LANE_COUNT; l++) {
    ZZ_CHECK(zz_cuda_reserve(dev, ZZ_CUDA_STAGING_MAX, "conversion staging"));
    ZZ_CHECK(zz_cuda_malloc_reserved(dev, ZZ_CUDA_STAGING_MAX, "conversion staging", &d->staging[l]));
    d->staging_bytes[l] = ZZ_CUDA_STAGING_MAX;
  }
  /* what the device keeps for itself; memory plans get the rest */
  dev->desc.reserved = d->used;
  return ZZ_OK;
}

/* The visible GPU count, asked of the driver once per process: it does not
 * change while the process runs, and asking initialises the CUDA runtime,
 * which each call would otherwise pay again; 0 when the runtime has none. */
static int zz_cuda_visible;
static pthread_once_t zz_cuda_visible_once = PTHREAD_ONCE_INIT;

static void zz_cuda_count_visible(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  zz_cuda_visible = count;
}

int zz_device_cuda_ordinal_of(int local_rank) {
  pthread_once(&zz_cuda_visible_once, zz_cuda_count_visible);
  int count = zz_cuda_visible;
  return count > 0 && local_rank > 0 ? local_rank % count : 0;
}

zz_status zz_device_cuda_open(zz_device *dev, int ordinal, size_t capacity) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    /* the runtime says "driver version is insufficient" also when no driver is
     * loaded at all (a machine without a GPU): tell the two apart */
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    if (e == cudaErrorInsufficientDriver && driver > 0)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "cuda device: the NVIDIA driver supports CUDA %d.%d, older than this "
                      "build's CUDA runtime %d.%d (update the driver, or --device cpu)",
                      driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    if (e == cudaErrorInsufficientDriver)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "cuda device: no GPU found: no NVIDIA driver is loaded (the CUDA runtime "
                      "says: %s); --device cpu computes on the CPU",
                      cudaGetErrorString(e));
    if (e == cudaErrorNoDevice)
      return zz_error(ZZ_ERR_UNSUPPORTED, "cuda device: no GPU found: the NVIDIA driver sees no device; --device "
                                          "cpu computes on the CPU");
    return zz_error(ZZ_ERR_UNSUPPORTED, "cuda device: no usable GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
  }
  if (count == 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "cuda device: no GPU found (none is visible); --device cpu "
                                        "computes on the CPU");
  if (ordinal < 0 || ordinal >= count)
    return zz_error(ZZ_ERR_INVALID_ARG, "cuda device: ordinal %d, but %d GPU%s visible", ordinal, count,
                    count == 1 ? " is" : "s are");
  e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return zz_error(ZZ_ERR_DEVICE, "cuda device %d: cudaSetDevice: %s", ordinal, cudaGetErrorString(e));
  }
  zz_cuda_dev *d = calloc(1, sizeof *d);
  if (!d) return zz_error(ZZ_ERR_NO_MEMORY, "cuda device %d: out of host memory", ordinal);
  d->ordinal = ordinal;
  snprintf(d->gpu, sizeof d->gpu, "?");
  pthread_mutex_init(&d->mu, NULL);
  dev->ops = &zz_cuda_ops;
  dev->impl = d;
  /* on failure device.c destroys dev, and zz_cuda_destroy frees what setup made */
  return zz_cuda_setup(dev, capacity);
}

#else /* !ZZ_HAVE_CUDA */

int zz_device_cuda_ordinal_of(int local_rank) {
  (void)local_rank;
  return 0;
}

zz_status zz_device_cuda_open(zz_device *dev, int ordinal, size_t capacity) {
  (void)dev, (void)ordinal, (void)capacity;
  return zz_error(ZZ_ERR_UNSUPPORTED, "built without CUDA: no cuda device (reconfigure with nvcc on the PATH or at "
                                      "/usr/local/cuda and -DZZ_CUDA=ON)");
}

#endif /* ZZ_HAVE_CUDA */
