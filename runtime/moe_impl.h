/*
 * moe_impl.h — the mixture-of-experts feed-forward as an architecture's MLP layer
 * uses it (internal to runtime/; runtime/moe.c). The arch owns the norm and the
 * residual; this piece owns the router, the experts and their weight specs.
 */
#ifndef ZZ_MOE_IMPL_H
#define ZZ_MOE_IMPL_H

#include "arch_impl.h"
#include "zz_moe.h"

/* Bound on a config's expert count: far beyond any published model (DeepSeek-V3
 * routes among 256). */
#define ZZ_MAX_EXPERTS 4096

/* The MoE weights, consecutive in the layer's list from some slot on: the router
 * [experts, hidden], then the experts' gate and up [experts * expert_ffn, hidden]
 * and down [experts * hidden, expert_ffn] stacked (zz_weight_spec.experts); with
 * a shared expert (zz_config.shared_ffn > 0, Qwen2-MoE), its gate and up
 * [shared_ffn, hidden], down [hidden, shared_ffn] and its scale's linear
 * shared_expert_gate [1, hidden] (absent otherwise). */
enum {
  ZZ_MOE_ROUTER,
  ZZ_MOE_GATE,
  ZZ_MOE_UP,
  ZZ_MOE_DOWN,
  ZZ_MOE_SHARED_GATE,
  ZZ_MOE_SHARED_UP,
  ZZ_MOE_SHARED_DOWN,
  ZZ_MOE_SHARED_SCALE,
  ZZ_MOE_N
};

/* Specs of transformer layer `layer`'s MoE weights into w[ZZ_MOE_N], names from
 * fmt[ZZ_MOE_N] (a %d for the layer; the experts' with a '*' for the expert; the
 * shared expert's unused without one). */
void zz_moe_specs(zz_weight_spec *w, const zz_config *c, int layer, const char *const fmt[ZZ_MOE_N]);

/* Whether transformer layer `layer` has experts (zz_config.sparse_step,
 * dense_layers) or a dense MLP; false without experts. */
bool zz_moe_layer_sparse(const zz_config *c, int layer);
/* Qwen-MoE's decoder_sparse_step (default 1) and mlp_only_layers (absent or null:
 * none; each in [0, num_hidden_layers), at most ZZ_MOE_MAX_DENSE, else refused by
 * name) into c (n_layers read already). */
zz_status zz_moe_parse_layers(json_t *root, const char *path, zz_config *c);

/* Device workspace bytes of zz_moe_forward on r rows (es: compute dtype bytes). */
size_t zz_moe_workspace(const zz_config *c, size_t es, int64_t r);

/* out [r, hidden] = the MoE of xn [r, hidden] (compute dtype): the router's top-k
 * per row, then each chosen expert on its rows alone (gather, gate/up, SiLU, down,
 * weighted scatter-add), experts in ascending order into a zeroed sum, as
 * transformers adds them; then a shared expert's SwiGLU of every row scaled by
 * sigmoid(shared_expert_gate · x), added last (Qwen2-MoE's order). w: the ZZ_MOE_N tensors; work: zz_moe_workspace bytes.
 * Waits for the compute lane once, to read the routing. st: its need_expert
 * (when set) asked for each chosen expert first; st may be NULL. */
zz_status zz_moe_forward(zz_device *dev, const zz_config *c, const zz_tensor *w, const void *xn, int64_t r, void *out,
                         void *work, const zz_step *st);

#endif
