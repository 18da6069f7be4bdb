/*
 * zz_moe_topk.h — the order a router's top-k keeps its experts in, the one rule
 * the CPU kernel (kernels/cpu/moe.c) and the CUDA kernel (kernels/cuda/moe.cu)
 * both apply, on the host and on the device: larger probabilities first, NaN the
 * largest (as torch.topk orders it), of equal values the lower expert first.
 */
#ifndef ZZ_MOE_TOPK_H
#define ZZ_MOE_TOPK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "zz_attn.h" /* ZZ_HOST_DEVICE */

#ifdef __cplusplus
extern "C" {
#endif

/* Whether value a at expert ia ranks before b at ib. */
static inline ZZ_HOST_DEVICE bool zz_moe_before(float a, int32_t ia, float b, int32_t ib) {
  if (isnan(a) != isnan(b)) return isnan(a);
  if (a != b && !isnan(a)) return a > b;
  return ia < ib;
}

/* Offers value p of expert e to the *have (at most k) kept in ir, wr, ranked by
 * zz_moe_before: inserted at its rank, the last kept dropped when k are kept
 * already, nothing done when it ranks after all k (insertion: k is small, 1 to a
 * few dozen). */
static inline ZZ_HOST_DEVICE void zz_moe_topk_offer(float p, int32_t e, int64_t k, int64_t *have, int32_t *ir,
                                                    float *wr) {
  int64_t at = *have;
  while (at > 0 && zz_moe_before(p, e, wr[at - 1], ir[at - 1])) at--;
  if (at >= k) return;
  for (int64_t i = *have < k ? *have : k - 1; i > at; i--) {
    ir[i] = ir[i - 1];
    wr[i] = wr[i - 1];
  }
  ir[at] = e;
  wr[at] = p;
  if (*have < k) ++*have;
}

#ifdef __cplusplus
}
#endif
#endif /* ZZ_MOE_TOPK_H */
