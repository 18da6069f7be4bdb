/* device_impl.h — what device.c and the device backends share (internal).
 *
 * device.c allocates the zz_device, its thread pools and its bookkeeping, then
 * describes it (zz_device_desc_init: kind, dtype, what it runs), then calls a
 * backend's open function to fill ops, impl, desc.capacity and desc.reserved. On
 * failure the backend leaves what it set in place and device.c destroys the
 * device (ops->destroy must cope with a half-built impl). */
#ifndef ZZ_DEVICE_IMPL_H
#define ZZ_DEVICE_IMPL_H
#include "zz_device.h"
#include "zz_policy.h" /* sizes */

zz_status zz_device_cpu_open(zz_device *dev, size_t capacity);
/* ZZ_ERR_UNSUPPORTED when built without CUDA or no GPU is visible. */
zz_status zz_device_cuda_open(zz_device *dev, int ordinal, size_t capacity);

/* The argument checks of the zz_device_* wrappers (device.c), for the wrappers
 * kept beside their concern (device_moe.c): each is ZZ_OK or ZZ_ERR_INVALID_ARG
 * with a message naming the device, the op and the argument. */
typedef struct zz_site { /* where a check happens: the device and the op (or copy) being called */
  const zz_device *dev;
  const char *op;
} zz_site;
size_t zz_es(const zz_device *dev); /* bytes of one compute-dtype element */
zz_status zz_arg_pos(zz_site s, const char *arg, int64_t v);
/* elems = a * b, refusing an overflow */
zz_status zz_arg_mul(zz_site s, const char *arg, int64_t a, int64_t b, int64_t *elems);
/* [p, p + elems * es) inside one block this device allocated */
zz_status zz_arg_dev(zz_site s, const char *arg, const void *p, int64_t elems, size_t es);
/* a [rows, cols] array of es-byte elements at p: zz_arg_mul then zz_arg_dev */
zz_status zz_arg_mat(zz_site s, const char *arg, const void *p, int64_t rows, int64_t cols, size_t es);
/* the device runs op on activations of its compute dtype */
zz_status zz_arg_op(zz_site s, zz_op op);

#endif
