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

#endif
