/*
 * arch_dense.c — the dense LLaMA-like families of Hugging Face (transformers 5,
 * and the config.json transformers 4 writes): LLaMA's layers and math
 * (arch_llama.c) with the flags each family sets in zz_config:
 *   qwen2    Qwen2, Qwen2.5: biases on q, k, v; a sliding window on the layers
 *            from max_window_layers on when use_sliding_window (or as layer_types
 *            lists them); small ones tie the embeddings.
 *   mistral  sliding_window on every layer (4096 in v0.1, null from v0.2 on).
 *   qwen3    RMSNorm of each q and k head before RoPE (q_norm, k_norm); head_dim
 *            its own (128), not hidden / heads; Qwen2's window keys.
 *   phi3     Phi-3: q, k, v fused in qkv_proj, gate and up in gate_up_proj;
 *            sliding_window on every layer (2047 in Phi-3-mini); longrope (Phi-3-
 *            mini-128k, Phi-3.5) and partial_rotary_factor, read by zz_llama_config
 *            (zz_phi3_rope); a sequence crossing original_max_position_embeddings
 *            while decoding is refused (zz_engine_begin_block).
 */
#include <string.h>

#include "arch_impl.h"

/* ---------------------------------------------------------------- windows */

/* Mistral's and Phi-3's sliding_window: every layer, null or absent for none. */
static zz_status zz_dense_window_all(json_t *root, const char *path, zz_config *c) {
  ZZ_CHECK(zz_json_int_in(root, path, "sliding_window", 0, 1, ZZ_MAX_POSITIONS, &c->window));
  c->window_from = 0;
  return ZZ_OK;
}

zz_status zz_dense_window_layers(json_t *root, const char *path, zz_config *c) {
  bool use;
  int64_t w, from;
  ZZ_CHECK(zz_json_bool(root, path, "use_sliding_window", false, &use));
  ZZ_CHECK(zz_json_int_in(root, path, "sliding_window", 0, 1, ZZ_MAX_POSITIONS, &w));
  ZZ_CHECK(zz_json_int_in(root, path, "max_window_layers", 28, 0, ZZ_MAX_LAYERS, &from));
  /* transformers' config drops the window unless use_sliding_window */
  c->window = use ? w : 0;
  c->window_from = from;
  json_t *lt = json_object_get(root, "layer_types");
  if (!lt || json_is_null(lt)) return ZZ_OK;
  if (!json_is_array(lt) || (int64_t)json_array_size(lt) != c->n_layers)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"layer_types\" must list num_hidden_layers (%lld) types", path,
                    (long long)c->n_layers);
  int64_t first = c->n_layers; /* the first sliding layer */
  for (int64_t i = 0; i < c->n_layers; i++) {
    const char *t = json_string_value(json_array_get(lt, (size_t)i));
    bool sliding = t && strcmp(t, "sliding_attention") == 0;
    if (!sliding && !(t && strcmp(t, "full_attention") == 0))
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: layer_types[%lld] \"%.40s\" is not supported (full_attention, "
                      "sliding_attention)",
                      path, (long long)i, t ? t : "(not a string)");
    if (sliding && first == c->n_layers) first = i;
    if (!sliding && first < c->n_layers)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: layer_types: full_attention layer %lld after sliding layer %lld is "
                      "not supported (the sliding layers must be the last ones)",
                      path, (long long)i, (long long)first);
  }
  if (first < c->n_layers && c->window == 0)
    return zz_error(ZZ_ERR_FORMAT,
                    "%s: layer_types lists sliding_attention layers but the sliding window is off "
                    "(use_sliding_window, sliding_window)",
                    path);
  c->window_from = first;
  if (first == c->n_layers) c->window = 0;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- families */

static zz_status zz_qwen2_parse(json_t *root, const char *path, zz_config *out) {
  ZZ_CHECK(zz_llama_config(root, path, "qwen2", 0, out));
  out->qkv_bias = true;
  return zz_dense_window_layers(root, path, out);
}

static zz_status zz_mistral_parse(json_t *root, const char *path, zz_config *out) {
  ZZ_CHECK(zz_llama_config(root, path, "mistral", 0, out));
  return zz_dense_window_all(root, path, out);
}

static zz_status zz_qwen3_parse(json_t *root, const char *path, zz_config *out) {
  ZZ_CHECK(zz_llama_config(root, path, "qwen3", 128, out)); /* Qwen3Config's head_dim */
  out->qk_norm = true;
  return zz_dense_window_layers(root, path, out);
}

static zz_status zz_phi3_parse(json_t *root, const char *path, zz_config *out) {
  ZZ_CHECK(zz_llama_config(root, path, "phi3", 0, out));
  out->fused_proj = true;
  return zz_dense_window_all(root, path, out);
}

/* ---------------------------------------------------------------- presets */

/* The published config.json of each (Hugging Face hub, read for these values):
 * mistralai/Mistral-7B-v0.1 (sliding_window 4096, rope_theta 1e4, rms 1e-5),
 * Qwen/Qwen2.5-7B and Qwen/Qwen2.5-72B (use_sliding_window false, rope_theta 1e6,
 * rms 1e-6 and 1e-5, 131072 positions, bos = eos 151643), Qwen/Qwen3-32B (head_dim
 * 128 beside hidden 5120 / 64 heads, 40960 positions, eos 151645),
 * microsoft/Phi-3-mini-4k-instruct (sliding_window 2047, 32064 ids, eos 32000). */
static const zz_llama_size zz_mistral_presets[] = {
    {"mistral-7b", 4096, 14336, 32, 32, 8, 0, 32000, 32768, 1e-5f, 10000.0f, 1, 2, 4096},
};
static const zz_llama_size zz_qwen2_presets[] = {
    {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 0, 152064, 131072, 1e-6f, 1000000.0f, 151643, 151643, 0},
    {"qwen2.5-72b", 8192, 29568, 80, 64, 8, 0, 152064, 131072, 1e-5f, 1000000.0f, 151643, 151643, 0},
};
static const zz_llama_size zz_qwen3_presets[] = {
    {"qwen3-32b", 5120, 25600, 64, 64, 8, 128, 151936, 40960, 1e-6f, 1000000.0f, 151643, 151645, 0},
};
static const zz_llama_size zz_phi3_presets[] = {
    {"phi-3-mini", 3072, 8192, 32, 32, 32, 0, 32064, 4096, 1e-5f, 10000.0f, 1, 32000, 2047},
};
#define ZZ_N(t) (sizeof t / sizeof t[0])

static const char *zz_qwen2_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_N(zz_qwen2_presets) ? zz_qwen2_presets[i].name : NULL;
}
static const char *zz_mistral_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_N(zz_mistral_presets) ? zz_mistral_presets[i].name : NULL;
}
static const char *zz_qwen3_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_N(zz_qwen3_presets) ? zz_qwen3_presets[i].name : NULL;
}
static const char *zz_phi3_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_N(zz_phi3_presets) ? zz_phi3_presets[i].name : NULL;
}

static bool zz_qwen2_preset(const char *name, zz_config *out) {
  if (!zz_llama_preset_in(zz_qwen2_presets, ZZ_N(zz_qwen2_presets), "qwen2", name, out)) return false;
  out->qkv_bias = true;
  return true;
}
static bool zz_mistral_preset(const char *name, zz_config *out) {
  return zz_llama_preset_in(zz_mistral_presets, ZZ_N(zz_mistral_presets), "mistral", name, out);
}
static bool zz_qwen3_preset(const char *name, zz_config *out) {
  if (!zz_llama_preset_in(zz_qwen3_presets, ZZ_N(zz_qwen3_presets), "qwen3", name, out)) return false;
  out->qk_norm = true;
  return true;
}
static bool zz_phi3_preset(const char *name, zz_config *out) {
  if (!zz_llama_preset_in(zz_phi3_presets, ZZ_N(zz_phi3_presets), "phi3", name, out)) return false;
  out->fused_proj = true;
  return true;
}

const zz_arch zz_arch_qwen2 = {.model_type = "qwen2",
                               .preset_name = zz_qwen2_preset_name,
                               .preset = zz_qwen2_preset,
                               .parse_config = zz_qwen2_parse,
                               ZZ_LLAMA_LAYERS};
const zz_arch zz_arch_mistral = {.model_type = "mistral",
                                 .preset_name = zz_mistral_preset_name,
                                 .preset = zz_mistral_preset,
                                 .parse_config = zz_mistral_parse,
                                 ZZ_LLAMA_LAYERS};
const zz_arch zz_arch_qwen3 = {.model_type = "qwen3",
                               .preset_name = zz_qwen3_preset_name,
                               .preset = zz_qwen3_preset,
                               .parse_config = zz_qwen3_parse,
                               ZZ_LLAMA_LAYERS};
const zz_arch zz_arch_phi3 = {.model_type = "phi3",
                              .preset_name = zz_phi3_preset_name,
                              .preset = zz_phi3_preset,
                              .parse_config = zz_phi3_parse,
                              ZZ_LLAMA_LAYERS};
