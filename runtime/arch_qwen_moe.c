/*
 * arch_qwen_moe.c — Qwen's mixtures of experts as transformers computes them:
 *   qwen2_moe  Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention
 *              (biases on q, k, v: qkv_bias), a shared expert of
 *              shared_expert_intermediate_size on every row scaled by
 *              sigmoid(shared_expert_gate · x), norm_topk_prob (false by default).
 *   qwen3_moe  Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention
 *              (per-head RMSNorm of q and k, head_dim its own), no shared expert.
 * Both: LLaMA's layers (arch_llama.c) with the MLP of each layer that
 * decoder_sparse_step and mlp_only_layers make sparse a mixture of num_experts
 * experts of moe_intermediate_size (runtime/moe.c), the others a dense SwiGLU of
 * intermediate_size. Sliding windows (use_sliding_window) as transformers 5 has
 * them (zz_qmoe_window): Qwen2-MoE's on the even layers below max_window_layers,
 * Qwen3-MoE's on every layer.
 *
 * Checkpoints: transformers 4 and 5 both save one tensor per expert matrix,
 * model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight, the router as
 * .mlp.gate.weight; transformers 5's Qwen3-MoE writes num_local_experts where 4
 * wrote num_experts (both read).
 */
#include <string.h>

#include "moe_impl.h"

/* ---------------------------------------------------------------- config */

/* The window, as transformers 5 computes it. Qwen2-MoE: with use_sliding_window,
 * sliding_window on the even layers below max_window_layers (layer_types, written
 * by transformers 5, must say the same). Qwen3-MoE: with use_sliding_window,
 * sliding_window on every layer (its attention and mask take the config's window
 * whatever layer_types says; a layer_types naming anything but full_attention is
 * refused). Keys older than the window are not attended (zz_attn_first_key). */
static zz_status zz_qmoe_window(json_t *root, const char *path, zz_config *c) {
  bool use, qwen2 = strcmp(c->model_type, "qwen2_moe") == 0;
  int64_t w, to;
  ZZ_CHECK(zz_json_bool(root, path, "use_sliding_window", false, &use));
  json_t *jw = json_object_get(root, "sliding_window");
  if (jw && json_is_null(jw)) use = false; /* transformers: a window of None is none */
  ZZ_CHECK(zz_json_int_in(root, path, "sliding_window", use ? 4096 : 0, use ? 1 : 0, ZZ_MAX_POSITIONS, &w));
  ZZ_CHECK(zz_json_int_in(root, path, "max_window_layers", 28, 0, ZZ_MAX_LAYERS, &to));
  c->window = use ? w : 0;
  c->window_from = 0;
  c->window_to = qwen2 ? (to > 0 ? to : -1) : 0; /* -1: no layer below it, so none */
  c->window_even = qwen2;
  if (qwen2 && to == 0) c->window = 0;
  json_t *types = json_object_get(root, "layer_types");
  if (!types || json_is_null(types)) return ZZ_OK;
  if (!json_is_array(types) || (int64_t)json_array_size(types) != c->n_layers)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"layer_types\" must list num_hidden_layers (%lld) types", path,
                    (long long)c->n_layers);
  for (int64_t i = 0; i < c->n_layers; i++) {
    const char *s = json_string_value(json_array_get(types, (size_t)i));
    bool sliding = s && strcmp(s, "sliding_attention") == 0;
    if (!sliding && !(s && strcmp(s, "full_attention") == 0))
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: layer_types[%lld] \"%.40s\" is not supported for %s", path, (long long)i,
                      s ? s : "(not a string)", c->model_type);
    bool want = qwen2 && c->window > 0 && i < to && i % 2 == 0;
    if (qwen2 ? sliding != want : sliding)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: layer_types[%lld] \"%s\" is not supported for %s (%s)", path,
                      (long long)i, s, c->model_type,
                      qwen2 ? "sliding_attention exactly on the even layers below max_window_layers when "
                              "use_sliding_window"
                            : "full_attention; the window is use_sliding_window's, on every layer");
  }
  return ZZ_OK;
}

/* The keys both share after zz_llama_config: the experts, their layers, the window. */
static zz_status zz_qmoe_config(json_t *root, const char *path, zz_config *c) {
  const char *ne_key = json_object_get(root, "num_experts") ? "num_experts" : "num_local_experts";
  int64_t ne_def = strcmp(c->model_type, "qwen2_moe") == 0 ? 60 : 128; /* the configs' defaults */
  ZZ_CHECK(zz_json_int_in(root, path, ne_key, ne_def, 1, ZZ_MAX_EXPERTS, &c->n_experts));
  int64_t used_max = c->n_experts < ZZ_MOE_MAX_TOPK ? c->n_experts : ZZ_MOE_MAX_TOPK;
  ZZ_CHECK(zz_json_int_in(root, path, "num_experts_per_tok", ne_def == 60 ? 4 : 8, 1, used_max, &c->n_experts_used));
  ZZ_CHECK(
      zz_json_int_in(root, path, "moe_intermediate_size", ne_def == 60 ? 1408 : 768, 1, ZZ_MAX_FFN, &c->expert_ffn));
  ZZ_CHECK(zz_json_bool(root, path, "norm_topk_prob", false, &c->norm_topk));
  ZZ_CHECK(zz_moe_parse_layers(root, path, c));
  return zz_qmoe_window(root, path, c);
}

static zz_status zz_qwen2_moe_parse(json_t *root, const char *path, zz_config *out) {
  zz_config c;
  ZZ_CHECK(zz_llama_config(root, path, "qwen2_moe", 0, &c));
  ZZ_CHECK(zz_json_bool(root, path, "qkv_bias", true, &c.qkv_bias)); /* transformers 5 writes it */
  ZZ_CHECK(zz_json_int_in(root, path, "shared_expert_intermediate_size", 5632, 1, ZZ_MAX_FFN, &c.shared_ffn));
  ZZ_CHECK(zz_qmoe_config(root, path, &c));
  *out = c;
  return ZZ_OK;
}

static zz_status zz_qwen3_moe_parse(json_t *root, const char *path, zz_config *out) {
  zz_config c;
  ZZ_CHECK(zz_llama_config(root, path, "qwen3_moe", 0, &c));
  c.qk_norm = true;
  ZZ_CHECK(zz_qmoe_config(root, path, &c));
  *out = c;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- presets */

typedef struct zz_qmoe_size {
  zz_llama_size base;
  int64_t experts, used, expert_ffn;
} zz_qmoe_size;

/* The published config.json of Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B:
 * head_dim 128, 40960 positions, rope_theta 1e6, rms 1e-6, bos 151643, eos 151645,
 * 128 experts top 8 with norm_topk_prob true, decoder_sparse_step 1, no
 * mlp_only_layers, use_sliding_window false. */
static const zz_qmoe_size zz_qwen3_moe_presets[] = {
    {{"qwen3-30b-a3b", 2048, 6144, 48, 32, 4, 128, 151936, 40960, 1e-6f, 1000000.0f, 151643, 151645, 0}, 128, 8, 768},
    {{"qwen3-235b-a22b", 4096, 12288, 94, 64, 4, 128, 151936, 40960, 1e-6f, 1000000.0f, 151643, 151645, 0},
     128,
     8,
     1536},
};
#define ZZ_QWEN3_MOE_N (sizeof zz_qwen3_moe_presets / sizeof zz_qwen3_moe_presets[0])

static const char *zz_qwen3_moe_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_QWEN3_MOE_N ? zz_qwen3_moe_presets[i].base.name : NULL;
}

static bool zz_qwen3_moe_preset(const char *name, zz_config *out) {
  for (size_t i = 0; i < ZZ_QWEN3_MOE_N; i++) {
    const zz_qmoe_size *p = &zz_qwen3_moe_presets[i];
    if (!zz_llama_preset_in(&p->base, 1, "qwen3_moe", name, out)) continue;
    out->qk_norm = true;
    out->n_experts = p->experts;
    out->n_experts_used = p->used;
    out->expert_ffn = p->expert_ffn;
    out->norm_topk = true;
    return true;
  }
  return false;
}

/* qwen2_moe: no preset (the presets are Qwen3's) */
static const char *zz_qwen2_moe_preset_name(int i) {
  (void)i;
  return NULL;
}
static bool zz_qwen2_moe_preset(const char *name, zz_config *out) {
  (void)name;
  (void)out;
  return false;
}

/* ---------------------------------------------------------------- layers */

static const char *const zz_qwen_moe_names[ZZ_MOE_N] = {
    [ZZ_MOE_ROUTER] = "model.layers.%d.mlp.gate.weight",
    [ZZ_MOE_GATE] = "model.layers.%d.mlp.experts.*.gate_proj.weight",
    [ZZ_MOE_UP] = "model.layers.%d.mlp.experts.*.up_proj.weight",
    [ZZ_MOE_DOWN] = "model.layers.%d.mlp.experts.*.down_proj.weight",
    [ZZ_MOE_SHARED_GATE] = "model.layers.%d.mlp.shared_expert.gate_proj.weight",
    [ZZ_MOE_SHARED_UP] = "model.layers.%d.mlp.shared_expert.up_proj.weight",
    [ZZ_MOE_SHARED_DOWN] = "model.layers.%d.mlp.shared_expert.down_proj.weight",
    [ZZ_MOE_SHARED_SCALE] = "model.layers.%d.mlp.shared_expert_gate.weight",
};

static zz_status zz_qwen_moe_build(zz_model *m) { return zz_moe_llama_build(m, zz_qwen_moe_names); }

const zz_arch zz_arch_qwen2_moe = {
    .model_type = "qwen2_moe",
    .preset_name = zz_qwen2_moe_preset_name,
    .preset = zz_qwen2_moe_preset,
    .parse_config = zz_qwen2_moe_parse,
    .build = zz_qwen_moe_build,
    ZZ_MOE_LLAMA_LAYERS,
};
const zz_arch zz_arch_qwen3_moe = {
    .model_type = "qwen3_moe",
    .preset_name = zz_qwen3_moe_preset_name,
    .preset = zz_qwen3_moe_preset,
    .parse_config = zz_qwen3_moe_parse,
    .build = zz_qwen_moe_build,
    ZZ_MOE_LLAMA_LAYERS,
};
