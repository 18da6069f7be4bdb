/*
 * device.c — the device boundary: creation and destruction of every device, and
 * its thread pools. Backends (device_cpu.c, device_cuda.c) only fill the ops
 * table; what all devices share lives here.
 *
 * Pools: every device has an attention pool (CPU attention beside a cache on the
 * host runs there, whatever computes the rest); the CPU device also has a compute
 * pool for its kernels. Each has its own thread count, so a plan can give the
 * attention threads and the compute threads their own cores.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"

/* ================================================================ creation */

static zz_status zz_device_pool(int threads, const char *what, zz_pool **out) {
  int rc = zz_pool_create(threads, out);
  if (rc == EINVAL)
    return zz_error(ZZ_ERR_INVALID_ARG, "device: %d %s threads asked, at most %d", threads, what,
                    ZZ_POOL_MAX_THREADS);
  if (rc != 0)
    return zz_error(ZZ_ERR_NO_MEMORY, "device: cannot start %d %s threads: %s", threads, what,
                    strerror(rc));
  return ZZ_OK;
}

/* A zz_device with its attention pool; the caller adds the rest. */
static zz_status zz_device_new(int attn_threads, zz_device **out) {
  zz_device *dev = calloc(1, sizeof *dev);
  if (!dev) return zz_error(ZZ_ERR_NO_MEMORY, "device: out of memory");
  zz_status st = zz_device_pool(attn_threads, "CPU attention", &dev->attn_pool);
  if (st != ZZ_OK) {
    free(dev);
    return st;
  }
  *out = dev;
  return ZZ_OK;
}

zz_status zz_device_create_cpu(size_t capacity, int threads, int attn_threads, zz_device **out) {
  zz_device *dev = NULL;
  ZZ_CHECK(zz_device_new(attn_threads, &dev));
  zz_status st = zz_device_pool(threads, "cpu compute", &dev->pool);
  if (st == ZZ_OK) st = zz_device_cpu_open(dev, capacity);
  if (st != ZZ_OK) {
    zz_device_destroy(dev);
    return st;
  }
  *out = dev;
  return ZZ_OK;
}

zz_status zz_device_create_cuda(int ordinal, size_t capacity, int attn_threads, zz_device **out) {
  zz_device *dev = NULL;
  ZZ_CHECK(zz_device_new(attn_threads, &dev));
  zz_status st = zz_device_cuda_open(dev, ordinal, capacity);
  if (st != ZZ_OK) {
    char msg[1024]; /* destroy may record errors of its own; keep the cause */
    snprintf(msg, sizeof msg, "%s", zz_error_message());
    zz_device_destroy(dev);
    return zz_error(st, "%s", msg);
  }
  *out = dev;
  return ZZ_OK;
}

zz_status zz_device_create_best(size_t capacity, int threads, int attn_threads, zz_device **out) {
  static int said;
  zz_status st = zz_device_create_cuda(0, capacity, attn_threads, out);
  if (st == ZZ_OK || st == ZZ_ERR_INVALID_ARG) return st; /* a bad thread count stays an error */
  if (!said) {
    fprintf(stderr, "zigzag: no usable GPU (%s); computing on the CPU\n", zz_error_message());
    said = 1;
  }
  return zz_device_create_cpu(capacity, threads, attn_threads, out);
}

void zz_device_destroy(zz_device *dev) {
  if (!dev) return;
  if (dev->ops && dev->ops->destroy) dev->ops->destroy(dev);
  zz_pool_destroy(dev->pool);
  zz_pool_destroy(dev->attn_pool);
  free(dev);
}

zz_pool *zz_device_attn_pool(zz_device *dev) { return dev->attn_pool; }
