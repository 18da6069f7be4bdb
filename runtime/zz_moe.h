/*
 * zz_moe.h — mixture of experts: the device ops of its feed-forward (routing,
 * weighted scatter-add; runtime/device_moe.c over the backends' ops tables), the
 * layer that composes them (runtime/moe.c) and the one formula of how many experts
 * a block touches (the cost model's and the engine's).
 */
#ifndef ZZ_MOE_H
#define ZZ_MOE_H

#include "zz_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Mixture of experts (runtime/device_moe.c; kernels/cpu/moe.c's contracts).
 * The router's choice of k experts for each of n rows of logits [n, experts]
 * (compute dtype): softmax in f32, the k largest probabilities, largest first, into
 * w [n, k] (device f32) and their experts into idx [n, k] (device int32); of equal
 * probabilities the lower expert first (torch.topk leaves that order to its sort:
 * docs/moe.md); w's rows divided by their sums when renorm. 1 <= k <= experts, k at
 * most ZZ_MOE_MAX_TOPK. */
#define ZZ_MOE_MAX_TOPK 32
zz_status zz_device_moe_route(zz_device *dev, const void *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                              int32_t *idx, float *w);
/* out[rows[i], :] += w[i] * y[i, :] for i < m, with y [m, dim] and out [out_rows,
 * dim] in the compute dtype, rows (device int32 [m], each below out_rows and
 * distinct) and w (device f32 [m]): one expert's outputs added, weighted, into the
 * rows that chose it. */
zz_status zz_device_moe_scatter(zz_device *dev, const void *y, const int32_t *rows, const float *w, int64_t m,
                                int64_t dim, void *out, int64_t out_rows);
/* n compute-dtype elements at p set to 0 (on the compute lane). */
zz_status zz_device_zero(zz_device *dev, void *p, int64_t n);

/* The experts a block touches: of `experts`, each of `rows` routed rows choosing
 * k, uniformly and independently, the expected number chosen by at least one row,
 * experts · (1 − (1 − k/experts)^rows); `experts` when k >= experts, 0 without
 * rows. The cost model's bytes loaded per MoE layer (planner/cost.c) and `plan`'s
 * report use it. */
double zz_moe_experts_touched(int64_t experts, int64_t k, double rows);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_MOE_H */
