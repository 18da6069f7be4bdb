/*
 * zz_attn.h — one attention call, from the engine to every backend: the struct
 * the architectures fill (runtime/model.c zz_arch_attend), the device wrapper
 * checks (zz_device_attention) and the CPU and CUDA kernels read as it is; and
 * which keys a query sees, the one rule every kernel applies (host and device).
 */
#ifndef ZZ_ATTN_H
#define ZZ_ATTN_H

#include <stdint.h>

#include "zz_dtype.h"

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

/* How a KV cache is stored: rows of kv_heads × hd elements in dt (the compute
 * dtype, or Q4 grouped along hd in format q), sequence i starting at byte
 * i * seq_bytes. */
typedef struct zz_kv_layout {
  zz_dtype dt;
  zz_qfmt q;
  int64_t seq_bytes;
} zz_kv_layout;

/* Multi-head attention of sq queries per sequence against t keys, with
 * grouped-query attention (kv_heads divides heads: query head hh reads K/V head
 * hh / (heads / kv_heads)). Query r of sequence i sits at key position q_start + r
 * and sees the keys zz_attn_first_key(pad[i], q_start + r, window) ..
 * min(q_start + r, t - 1); one that sees no key gets zeros. q, out and scratch are
 * in the backend's compute dtype and memory (f32 on the CPU, f16 on CUDA; pad a
 * device array there); q is scaled inside by 1/sqrt(hd). With keep < 1, top-k
 * sparse attention: each query keeps the ceil(keep * visible) keys of highest
 * score and reads only their V rows, weighted by their probabilities under the
 * softmax over every visible key (FlexGen's, no renormalisation). */
typedef struct zz_attn_args {
  const void *q;     /* [b, sq, heads * hd] */
  const void *k, *v; /* caches laid out as kv: row j of sequence i at byte i * seq_bytes + j * row bytes */
  zz_kv_layout kv;   /* f32, f16 or Q4 */
  int64_t b, sq, t, q_start;
  int64_t heads, kv_heads, hd;
  const int32_t *pad; /* [b] left padding slots of each sequence */
  double keep;        /* fraction of the visible keys kept, (0, 1]; 1: dense */
  int64_t window;     /* sliding window (zz_attn_first_key); 0: none */
  void *out;          /* [b, sq, heads * hd] */
  void *scratch;      /* the backend's attention scratch (zz_cpu_attention_scratch floats on the CPU) */
  int q4_unfused;     /* CPU, 4-bit cache: 1 dequantizes each row onto the stack first (the path before
                         the fused one, kept for benches); 0 (default) fused */
} zz_attn_args;

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
