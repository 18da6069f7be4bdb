/*
 * zz_attn.h — which keys a query sees: the one rule every attention kernel (the
 * CPU's reference and fast kernels, CUDA's) applies, for host and device code.
 */
#ifndef ZZ_ATTN_H
#define ZZ_ATTN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ZZ_HOST_DEVICE
#ifdef __CUDACC__
#define ZZ_HOST_DEVICE __host__ __device__
#else
#define ZZ_HOST_DEVICE
#endif
#endif

/* The first key the query at key position p of a sequence sees: none of its pad
 * left padding slots, and with a sliding window w > 0 only keys j > p - w (the
 * query and the w - 1 keys before it), as transformers' sliding_window_overlay
 * masks them (masking_utils.py). The last key it sees is p (causal). */
static inline ZZ_HOST_DEVICE int64_t zz_attn_first_key(int64_t pad, int64_t p, int64_t window) {
  int64_t lo = pad > 0 ? pad : 0;
  if (window > 0 && p - window + 1 > lo) lo = p - window + 1;
  return lo;
}

#ifdef __cplusplus
}
#endif
#endif /* ZZ_ATTN_H */
