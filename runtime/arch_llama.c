/*
 * arch_llama.c — LLaMA (Touvron et al., 2023; Llama 2; Llama 3) as Hugging Face's
 * LlamaForCausalLM computes it (transformers 4.46): pre-norm layers with RMSNorm
 * (rms_norm_eps), rotary position embeddings (rope_theta; rope_scaling "linear" and
 * "llama3", Phi-3's "longrope" and partial rotary; or transformers 5's rope_parameters), grouped-query attention (num_key_value_heads K/V heads, the KV cache
 * sized by them), the SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, a final
 * RMSNorm and an LM head of its own unless tie_word_embeddings.
 *
 * FlexGen's layer list as for OPT: input embedding, per transformer layer an
 * attention layer and an MLP layer, the output embedding.
 *
 * The LLaMA-like families (arch_dense.c: Qwen2, Mistral, Qwen3, Phi-3) share the
 * layers, the config reader and the forward here; zz_config's flags vary them:
 * q/k/v biases (qkv_bias), per-head q/k RMSNorm before RoPE (qk_norm), fused
 * qkv_proj / gate_up_proj read as row views (fused_proj), and a sliding window
 * per attention layer (window, window_from → zz_cache_spec.window).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arch_impl.h"

/* Slots of each layer's weight list. */
enum { ZZ_LL_IN_TOKENS, ZZ_LL_IN_N };
/* Q alone is Phi-3's fused qkv_proj and GATE its gate_up_proj (K, V, UP then
 * absent); the biases are Qwen2's, the head norms Qwen3's (absent elsewhere). */
enum {
  ZZ_LL_AT_Q,
  ZZ_LL_AT_K,
  ZZ_LL_AT_V,
  ZZ_LL_AT_O,
  ZZ_LL_AT_NORM,
  ZZ_LL_AT_QB,
  ZZ_LL_AT_KB,
  ZZ_LL_AT_VB,
  ZZ_LL_AT_QN,
  ZZ_LL_AT_KN,
  ZZ_LL_AT_N
};
enum { ZZ_LL_MLP_GATE, ZZ_LL_MLP_UP, ZZ_LL_MLP_DOWN, ZZ_LL_MLP_NORM, ZZ_LL_MLP_N };
enum { ZZ_LL_OUT_NORM, ZZ_LL_OUT_HEAD, ZZ_LL_OUT_N };

/* ---------------------------------------------------------------- config */

/* Shapes of the published configs (huggyllama/llama-*, meta-llama/Llama-2-70b-hf,
 * meta-llama/Meta-Llama-3-8B and -70B). */
static const zz_llama_size zz_llama_presets[] = {
    {"llama-7b", 4096, 11008, 32, 32, 32, 0, 32000, 2048, 1e-6f, 10000.0f, 1, 2, 0},
    {"llama-13b", 5120, 13824, 40, 40, 40, 0, 32000, 2048, 1e-6f, 10000.0f, 1, 2, 0},
    {"llama-30b", 6656, 17920, 60, 52, 52, 0, 32000, 2048, 1e-6f, 10000.0f, 1, 2, 0},
    {"llama-65b", 8192, 22016, 80, 64, 64, 0, 32000, 2048, 1e-5f, 10000.0f, 1, 2, 0},
    {"llama-2-70b", 8192, 28672, 80, 64, 8, 0, 32000, 4096, 1e-5f, 10000.0f, 1, 2, 0},
    {"llama-3-8b", 4096, 14336, 32, 32, 8, 0, 128256, 8192, 1e-5f, 500000.0f, 128000, 128001, 0},
    {"llama-3-70b", 8192, 28672, 80, 64, 8, 0, 128256, 8192, 1e-5f, 500000.0f, 128000, 128001, 0},
};
#define ZZ_LLAMA_N_PRESETS (sizeof zz_llama_presets / sizeof zz_llama_presets[0])

static const char *zz_llama_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_LLAMA_N_PRESETS ? zz_llama_presets[i].name : NULL;
}

static void zz_llama_defaults(zz_config *c, const char *model_type) {
  memset(c, 0, sizeof *c);
  snprintf(c->model_type, sizeof c->model_type, "%s", model_type);
  c->max_pos = 2048;
  c->pre_ln = true;
  c->final_ln = true;
  c->bos = 1;
  c->eos_ids[0] = 2;
  c->n_eos = 1;
  c->ln_eps = 1e-6f;
  c->dtype = ZZ_DTYPE_F16;
  c->rope = (zz_rope){.type = ZZ_ROPE_DEFAULT, .theta = 10000.0f, .factor = 1.0f};
}

bool zz_llama_preset_in(const zz_llama_size *table, size_t n, const char *model_type, const char *name,
                        zz_config *out) {
  const char *slash = strchr(name, '/'); /* "meta-llama/...", "Qwen/..." */
  const char *base = slash ? slash + 1 : name;
  for (size_t i = 0; i < n; i++) {
    const zz_llama_size *p = &table[i];
    if (strcasecmp(base, p->name) != 0) continue;
    zz_llama_defaults(out, model_type);
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->hidden = out->embed_dim = p->hidden;
    out->ffn = p->ffn;
    out->n_layers = p->n_layers;
    out->n_heads = p->n_heads;
    out->n_kv_heads = p->n_kv_heads;
    out->head_dim = p->head_dim ? p->head_dim : p->hidden / p->n_heads;
    out->vocab_size = p->vocab;
    out->max_pos = p->max_pos;
    out->ln_eps = p->eps;
    out->rope.theta = p->theta;
    out->bos = p->bos;
    out->eos_ids[0] = p->eos;
    out->pad = p->eos;
    out->window = p->window;
    return true;
  }
  return false;
}

static bool zz_llama_preset(const char *name, zz_config *out) {
  return zz_llama_preset_in(zz_llama_presets, ZZ_LLAMA_N_PRESETS, "llama", name, out);
}

/* Ranges of the RoPE numbers: past them a config is lying (theta 1e-300 or a
 * factor of 1e-40 turn every frequency into inf or NaN). transformers requires a
 * factor >= 1. */
#define ZZ_ROPE_THETA_MIN 1.0
#define ZZ_ROPE_THETA_MAX 1e12
#define ZZ_ROPE_FACTOR_MAX 65536.0

/* One form's RoPE: theta, and sc, the object naming rope_type with that type's
 * numbers (rope_scaling, or rope_parameters itself); where names sc in messages.
 * Only the types arch_llama computes are accepted; any other is refused by name,
 * never computed as the default. */
static zz_status zz_llama_rope_form(json_t *sc, const char *where, double theta, bool phi3, zz_rope *r, double *prf) {
  *r = (zz_rope){.type = ZZ_ROPE_DEFAULT, .theta = (float)theta, .factor = 1.0f};
  if (!sc) return ZZ_OK;
  json_t *jt = json_object_get(sc, "rope_type");
  if (!jt || json_is_null(jt)) jt = json_object_get(sc, "type"); /* transformers < 4.42 */
  const char *type = json_string_value(jt);
  if (!type) return zz_error(ZZ_ERR_FORMAT, "%s has no \"rope_type\" string", where);
  ZZ_CHECK(zz_json_real(sc, where, "partial_rotary_factor", *prf, 1e-9, 1.0, prf));
  if (!phi3 && *prf != 1.0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (1)", where, *prf);
  if (strcmp(type, "default") == 0) return ZZ_OK;
  /* Phi3Config reads "su" (its first name) as longrope */
  if (phi3 && (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0)) {
    double factor, af;
    ZZ_CHECK(zz_json_real(sc, where, "factor", 0.0, 0.0, ZZ_ROPE_FACTOR_MAX, &factor));
    ZZ_CHECK(zz_json_real(sc, where, "attention_factor", 0.0, 0.0, ZZ_ROPE_FACTOR_MAX, &af));
    /* 0: absent, computed once the positions are known (zz_phi3_longrope) */
    *r = (zz_rope){.type = ZZ_ROPE_LONGROPE, .theta = (float)theta, .factor = (float)factor, .attn_factor = (float)af};
    return ZZ_OK;
  }
  double factor, low, high;
  int64_t orig;
  if (strcmp(type, "linear") == 0) {
    ZZ_CHECK(zz_json_real(sc, where, "factor", NAN, 1.0, ZZ_ROPE_FACTOR_MAX, &factor));
    r->type = ZZ_ROPE_LINEAR;
    r->factor = (float)factor;
    return ZZ_OK;
  }
  if (strcmp(type, "llama3") == 0) {
    ZZ_CHECK(zz_json_real(sc, where, "factor", NAN, 1.0, ZZ_ROPE_FACTOR_MAX, &factor));
    ZZ_CHECK(zz_json_real(sc, where, "low_freq_factor", NAN, 1e-3, ZZ_ROPE_FACTOR_MAX, &low));
    ZZ_CHECK(zz_json_real(sc, where, "high_freq_factor", NAN, 1e-3, ZZ_ROPE_FACTOR_MAX, &high));
    ZZ_CHECK(zz_json_int_in(sc, where, "original_max_position_embeddings", -1, 1, ZZ_MAX_POSITIONS, &orig));
    if (!(high > low))
      return zz_error(ZZ_ERR_FORMAT, "%s: high_freq_factor %g must exceed low_freq_factor %g", where, high, low);
    *r = (zz_rope){.type = ZZ_ROPE_LLAMA3,
                   .theta = (float)theta,
                   .factor = (float)factor,
                   .low_freq_factor = (float)low,
                   .high_freq_factor = (float)high,
                   .original_max_pos = (float)orig};
    return ZZ_OK;
  }
  return zz_error(ZZ_ERR_UNSUPPORTED, "%s: rope_type \"%.40s\" is not supported (default, linear, llama3%s)", where,
                  type, phi3 ? ", longrope" : "");
}

/* RoPE in either form transformers writes: before 5, "rope_theta" beside
 * "rope_scaling" (null or {rope_type, factor, …}); from 5 on, "rope_parameters"
 * {rope_type, rope_theta, factor, …}. Both read to the same zz_rope; a file
 * carrying both must give the same one. */
static zz_status zz_llama_rope(json_t *root, const char *path, bool phi3, zz_rope *out, double *prf, json_t **sc_out) {
  char where[4200];
  json_t *params = json_object_get(root, "rope_parameters");
  json_t *scaling = json_object_get(root, "rope_scaling");
  if (params && json_is_null(params)) params = NULL;
  if (scaling && json_is_null(scaling)) scaling = NULL;
  if (params && !json_is_object(params))
    return zz_error(ZZ_ERR_FORMAT, "%s: \"rope_parameters\" must be an object or null", path);
  if (scaling && !json_is_object(scaling))
    return zz_error(ZZ_ERR_FORMAT, "%s: \"rope_scaling\" must be an object or null", path);
  bool old_form = scaling || json_object_get(root, "rope_theta");
  zz_rope old_r, new_r;
  double theta;
  ZZ_CHECK(zz_json_real(root, path, "rope_theta", 10000.0, ZZ_ROPE_THETA_MIN, ZZ_ROPE_THETA_MAX, &theta));
  snprintf(where, sizeof where, "%s: rope_scaling", path);
  ZZ_CHECK(zz_json_real(root, path, "partial_rotary_factor", 1.0, 1e-9, 1.0, prf));
  if (!phi3 && *prf != 1.0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (1)", path, *prf);
  ZZ_CHECK(zz_llama_rope_form(scaling, where, theta, phi3, &old_r, prf));
  if (!params) {
    *out = old_r;
    *sc_out = scaling;
    return ZZ_OK;
  }
  snprintf(where, sizeof where, "%s: rope_parameters", path);
  ZZ_CHECK(zz_json_real(params, where, "rope_theta", 10000.0, ZZ_ROPE_THETA_MIN, ZZ_ROPE_THETA_MAX, &theta));
  ZZ_CHECK(zz_llama_rope_form(params, where, theta, phi3, &new_r, prf));
  bool same = old_r.type == new_r.type && old_r.theta == new_r.theta && old_r.factor == new_r.factor &&
              old_r.low_freq_factor == new_r.low_freq_factor && old_r.high_freq_factor == new_r.high_freq_factor &&
              old_r.original_max_pos == new_r.original_max_pos && old_r.attn_factor == new_r.attn_factor;
  if (old_form && !same)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"rope_parameters\" and \"rope_theta\" / \"rope_scaling\" disagree", path);
  *out = new_r;
  *sc_out = params;
  return ZZ_OK;
}

/* Phi-3's partial rotary and longrope, once head_dim and the positions are known
 * (transformers 5's Phi3Config and _compute_longrope_parameters): the first
 * int(head_dim x partial_rotary_factor) dims of a head turn; longrope reads
 * short_factor and long_factor of one number per rotary pair from sc, takes
 * original_max_position_embeddings from the config's top level (4096 when absent:
 * Phi3Config's field, which wins over one in the RoPE object), factor absent as
 * max_position_embeddings / that, and attention_factor absent as
 * sqrt(1 + ln factor / ln original) (1 when factor <= 1). */
static zz_status zz_phi3_rope(json_t *root, const char *path, json_t *sc, double prf, zz_config *c) {
  int64_t rot = (int64_t)((double)c->head_dim * prf);
  if (rot < 2 || rot % 2)
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: partial_rotary_factor %g turns %lld of head_dim %lld dims: want an even number >= 2", path,
                    prf, (long long)rot, (long long)c->head_dim);
  zz_rope *r = &c->rope;
  r->rot_dims = rot == c->head_dim ? 0 : (int32_t)rot;
  if (r->type != ZZ_ROPE_LONGROPE) return ZZ_OK;
  int64_t pairs = rot / 2, orig;
  if (pairs > ZZ_ROPE_MAX_PAIRS)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: longrope over %lld rotary pairs (at most %d)", path, (long long)pairs,
                    ZZ_ROPE_MAX_PAIRS);
  static const char *const keys[2] = {"short_factor", "long_factor"};
  float *dst[2] = {r->short_factor, r->long_factor};
  for (int k = 0; k < 2; k++) {
    json_t *a = json_object_get(sc, keys[k]);
    if (!json_is_array(a) || (int64_t)json_array_size(a) != pairs)
      return zz_error(ZZ_ERR_FORMAT, "%s: longrope's \"%s\" must list %lld numbers (one per rotary pair)", path,
                      keys[k], (long long)pairs);
    for (int64_t i = 0; i < pairs; i++) {
      double v = json_number_value(json_array_get(a, (size_t)i));
      if (!json_is_number(json_array_get(a, (size_t)i)) || !(v > 0 && v <= ZZ_ROPE_FACTOR_MAX))
        return zz_error(ZZ_ERR_FORMAT, "%s: longrope's %s[%lld] must be a number in (0, %g]", path, keys[k],
                        (long long)i, ZZ_ROPE_FACTOR_MAX);
      dst[k][i] = (float)v;
    }
  }
  ZZ_CHECK(zz_json_int_in(root, path, "original_max_position_embeddings", 4096, 2, ZZ_MAX_POSITIONS, &orig));
  r->original_max_pos = (float)orig;
  double factor = r->factor > 0 ? r->factor : (double)c->max_pos / (double)orig;
  if (!(r->attn_factor > 0)) r->attn_factor = factor <= 1.0 ? 1.0f : (float)sqrt(1 + log(factor) / log((double)orig));
  return ZZ_OK;
}

zz_status zz_llama_config(json_t *root, const char *path, const char *model_type, int64_t head_dim_def,
                          zz_config *out) {
  zz_config c;
  zz_llama_defaults(&c, model_type);
  int64_t bos = 0, pad = -1;
  double eps;
  /* each size in its own range, before anything is sized by it */
  ZZ_CHECK(zz_json_int_in(root, path, "vocab_size", -1, 4, ZZ_MAX_VOCAB, &c.vocab_size));
  ZZ_CHECK(zz_json_int_in(root, path, "hidden_size", -1, 1, ZZ_MAX_HIDDEN, &c.hidden));
  ZZ_CHECK(zz_json_int_in(root, path, "intermediate_size", -1, 1, ZZ_MAX_FFN, &c.ffn));
  ZZ_CHECK(zz_json_int_in(root, path, "num_hidden_layers", -1, 1, ZZ_MAX_LAYERS, &c.n_layers));
  ZZ_CHECK(zz_json_int_in(root, path, "num_attention_heads", -1, 1, c.hidden, &c.n_heads));
  ZZ_CHECK(zz_json_int_in(root, path, "num_key_value_heads", c.n_heads, 1, c.n_heads, &c.n_kv_heads));
  ZZ_CHECK(zz_json_int_in(root, path, "max_position_embeddings", 2048, 1, ZZ_MAX_POSITIONS, &c.max_pos));
  ZZ_CHECK(zz_json_int_in(root, path, "bos_token_id", 1, 0, c.vocab_size - 1, &bos));
  c.n_eos = 1;
  c.eos_ids[0] = 2;
  ZZ_CHECK(zz_json_eos(root, path, "eos_token_id", c.vocab_size, &c));
  ZZ_CHECK(zz_json_int_in(root, path, "pad_token_id", INT64_MAX, 0, c.vocab_size - 1, &pad));
  ZZ_CHECK(zz_json_real(root, path, "rms_norm_eps", 1e-6, 1e-12, 1.0, &eps));
  bool phi3 = strcmp(model_type, "phi3") == 0;
  double prf = 1.0;
  json_t *rope_obj = NULL;
  ZZ_CHECK(zz_llama_rope(root, path, phi3, &c.rope, &prf, &rope_obj));
  ZZ_CHECK(zz_json_bool(root, path, "tie_word_embeddings", false, &c.tied_head));
  bool attn_bias = false, mlp_bias = false;
  ZZ_CHECK(zz_json_bool(root, path, "attention_bias", false, &attn_bias));
  ZZ_CHECK(zz_json_bool(root, path, "mlp_bias", false, &mlp_bias));
  if (attn_bias || mlp_bias)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: attention_bias / mlp_bias = true is not supported", path);
  json_t *jact = json_object_get(root, "hidden_act");
  const char *act = json_string_value(jact);
  if (jact && !json_is_null(jact) && !act) return zz_error(ZZ_ERR_FORMAT, "%s: \"hidden_act\" must be a string", path);
  if (act && strcmp(act, "silu") != 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: hidden_act \"%.40s\" is not supported (silu)", path, act);
  ZZ_CHECK(zz_json_dtype(root, path, &c.dtype));
  if (c.n_heads % c.n_kv_heads != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", path,
                    (long long)c.n_heads, (long long)c.n_kv_heads);
  ZZ_CHECK(zz_json_int(root, path, "head_dim", head_dim_def ? head_dim_def : c.hidden / c.n_heads, &c.head_dim));
  if (c.head_dim < 2 || c.head_dim % 2 != 0 || c.head_dim > 1024)
    return zz_error(ZZ_ERR_FORMAT, "%s: head_dim %lld must be even, in [2, 1024]", path, (long long)c.head_dim);
  if (phi3) ZZ_CHECK(zz_phi3_rope(root, path, rope_obj, prf, &c));
  c.embed_dim = c.hidden;
  c.ln_eps = (float)eps;
  c.bos = (int32_t)bos;
  c.pad = (int32_t)(pad != INT64_MAX ? pad : c.eos_ids[0]); /* no pad token: pad with EOS, as generate does */
  *out = c;
  return ZZ_OK;
}

static zz_status zz_llama_parse_config(json_t *root, const char *path, zz_config *out) {
  ZZ_CHECK(zz_llama_config(root, path, "llama", 0, out));
  return zz_llama_no_window(root, path, out);
}

zz_status zz_llama_no_window(json_t *root, const char *path, const zz_config *c) {
  json_t *w = json_object_get(root, "sliding_window");
  if (w && !json_is_null(w))
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: sliding_window is not supported by model_type \"%s\"", path,
                    c->model_type);
  return ZZ_OK;
}

/* Hugging Face's positions under left padding: real tokens count from 0; padding
 * slots get 1, which no real token attends to. */
void zz_llama_positions(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out) {
  (void)c;
  for (int64_t r = 0; r < n; r++) {
    int64_t row = from + r;
    out[r] = row < pad ? 1 : (int32_t)(row - pad);
  }
}

/* ---------------------------------------------------------------- layers */

zz_status zz_llama_build(zz_model *m) {
  const zz_config *c = &m->cfg;
  int n = (int)(2 * c->n_layers + 2);
  zz_layer *L = calloc((size_t)n, sizeof *L);
  if (!L) return zz_error(ZZ_ERR_NO_MEMORY, "model: out of memory");
  int64_t h = c->hidden, qw = c->n_heads * c->head_dim, kvw = c->n_kv_heads * c->head_dim;

  L[0].kind = ZZ_LAYER_INPUT_EMBED;
  L[0].index = -1;
  L[0].n_weights = ZZ_LL_IN_N;
  zz_arch_spec(&L[0].weights[ZZ_LL_IN_TOKENS], true, 2, c->vocab_size, h, "model.embed_tokens.weight", 0);
  L[0].weights[ZZ_LL_IN_TOKENS].gathered = true;

  for (int i = 0; i < c->n_layers; i++) {
    zz_layer *a = &L[1 + 2 * i], *f = &L[2 + 2 * i];
    a->kind = ZZ_LAYER_ATTENTION;
    a->index = i;
    a->has_cache = true;
    a->n_weights = ZZ_LL_AT_N;
    if (c->fused_proj)
      zz_arch_spec(&a->weights[ZZ_LL_AT_Q], true, 2, qw + 2 * kvw, h, "model.layers.%d.self_attn.qkv_proj.weight", i);
    else
      zz_arch_spec(&a->weights[ZZ_LL_AT_Q], true, 2, qw, h, "model.layers.%d.self_attn.q_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_K], !c->fused_proj, 2, kvw, h, "model.layers.%d.self_attn.k_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_V], !c->fused_proj, 2, kvw, h, "model.layers.%d.self_attn.v_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_QB], c->qkv_bias, 1, qw, 0, "model.layers.%d.self_attn.q_proj.bias", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_KB], c->qkv_bias, 1, kvw, 0, "model.layers.%d.self_attn.k_proj.bias", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_VB], c->qkv_bias, 1, kvw, 0, "model.layers.%d.self_attn.v_proj.bias", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_QN], c->qk_norm, 1, c->head_dim, 0, "model.layers.%d.self_attn.q_norm.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_KN], c->qk_norm, 1, c->head_dim, 0, "model.layers.%d.self_attn.k_norm.weight", i);
    a->weights[ZZ_LL_AT_QN].init = a->weights[ZZ_LL_AT_KN].init = ZZ_INIT_NORM_GAIN;
    zz_arch_spec(&a->weights[ZZ_LL_AT_O], true, 2, h, qw, "model.layers.%d.self_attn.o_proj.weight", i);
    a->weights[ZZ_LL_AT_O].after_kv = true;
    zz_arch_spec(&a->weights[ZZ_LL_AT_NORM], true, 1, h, 0, "model.layers.%d.input_layernorm.weight", i);
    a->weights[ZZ_LL_AT_NORM].init = ZZ_INIT_NORM_GAIN;
    bool windowed = i >= c->window_from && (c->window_to <= 0 || i < c->window_to) && (!c->window_even || i % 2 == 0);
    a->cache = (zz_cache_spec){.kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .window = windowed ? c->window : 0};

    f->kind = ZZ_LAYER_MLP;
    f->index = i;
    f->n_weights = ZZ_LL_MLP_N;
    if (c->fused_proj)
      zz_arch_spec(&f->weights[ZZ_LL_MLP_GATE], true, 2, 2 * c->ffn, h, "model.layers.%d.mlp.gate_up_proj.weight", i);
    else
      zz_arch_spec(&f->weights[ZZ_LL_MLP_GATE], true, 2, c->ffn, h, "model.layers.%d.mlp.gate_proj.weight", i);
    zz_arch_spec(&f->weights[ZZ_LL_MLP_UP], !c->fused_proj, 2, c->ffn, h, "model.layers.%d.mlp.up_proj.weight", i);
    zz_arch_spec(&f->weights[ZZ_LL_MLP_DOWN], true, 2, h, c->ffn, "model.layers.%d.mlp.down_proj.weight", i);
    f->weights[ZZ_LL_MLP_GATE].after_kv = f->weights[ZZ_LL_MLP_UP].after_kv = f->weights[ZZ_LL_MLP_DOWN].after_kv =
        true;
    zz_arch_spec(&f->weights[ZZ_LL_MLP_NORM], true, 1, h, 0, "model.layers.%d.post_attention_layernorm.weight", i);
    f->weights[ZZ_LL_MLP_NORM].init = ZZ_INIT_NORM_GAIN;
  }

  zz_layer *o = &L[n - 1];
  o->kind = ZZ_LAYER_OUTPUT_EMBED;
  o->index = -1;
  o->n_weights = ZZ_LL_OUT_N;
  zz_arch_spec(&o->weights[ZZ_LL_OUT_NORM], true, 1, h, 0, "model.norm.weight", 0);
  o->weights[ZZ_LL_OUT_NORM].init = ZZ_INIT_NORM_GAIN;
  /* tied: the output layer holds its own copy of the embedding (as for OPT), so
   * that each layer's weights can live on a different tier */
  zz_arch_spec(&o->weights[ZZ_LL_OUT_HEAD], true, 2, c->vocab_size, h,
               c->tied_head ? "model.embed_tokens.weight" : "lm_head.weight", 0);

  m->layers = L;
  m->n_layers = n;
  return ZZ_OK;
}

/* Workspace layout, in elements of the compute dtype (n = b * sq, qw = heads *
 * head_dim, kvw = kv_heads * head_dim):
 *   attn:   xn [n, h], q [n, qw], k, v [n, kvw], att [n, qw], then attention scratch
 *   mlp:    xn [n, h], gate [n, ffn], up [n, ffn]
 *   output: x [b, h] */
size_t zz_llama_workspace(const zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
                          bool general_attn) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(dev->compute_dtype, 1);
  int64_t n = b * sq, h = c->hidden, qw = c->n_heads * c->head_dim, kvw = c->n_kv_heads * c->head_dim;
  size_t attn = zz_align_up((size_t)(n * (h + 2 * qw + 2 * kvw)) * es, 256) +
                zz_device_desc_attention_scratch(dev, b, sq, t, c->n_heads, general_attn);
  size_t mlp = (size_t)(n * (h + 2 * c->ffn)) * es;
  size_t out = (size_t)(b * h) * es;
  size_t mx = attn;
  if (mlp > mx) mx = mlp;
  if (out > mx) mx = out;
  return mx;
}

/* Rows [row0, row0 + rows) of a weight [out, in]: contiguous in every dtype (a Q4
 * row is its own groups), so a view into the same device memory. */
static zz_tensor zz_llama_rows(const zz_tensor *w, int64_t row0, int64_t rows) {
  zz_tensor v = *w;
  size_t row = w->dtype == ZZ_DTYPE_Q4 ? zz_q_row_bytes(w->q, w->shape[1]) : zz_dtype_nbytes(w->dtype, w->shape[1]);
  v.data = (char *)w->data + (size_t)row0 * row;
  v.shape[0] = rows;
  v.nbytes = (size_t)rows * row;
  return v;
}

/* An optional weight: NULL where the configuration has none. */
static const zz_tensor *zz_llama_opt(const zz_tensor *w) { return w->ndim ? w : NULL; }

zz_status zz_llama_forward(zz_device *dev, const zz_model *m, const zz_layer *layer, const zz_tensor *w,
                           const zz_step *st) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, 1);
  int64_t n = st->b * st->sq, h = c->hidden, hd = c->head_dim;
  int64_t qw = c->n_heads * hd, kvw = c->n_kv_heads * hd;
  char *work = st->work;
  switch (layer->kind) {
    case ZZ_LAYER_INPUT_EMBED: return zz_device_embed_rows(dev, &w[ZZ_LL_IN_TOKENS], st->ids, n, st->hidden);

    case ZZ_LAYER_ATTENTION: {
      char *xn = work, *q = xn + (size_t)(n * h) * es, *k = q + (size_t)(n * qw) * es;
      char *v = k + (size_t)(n * kvw) * es, *att = v + (size_t)(n * kvw) * es;
      void *scratch = work + zz_align_up((size_t)(n * (h + 2 * qw + 2 * kvw)) * es, 256);
      ZZ_CHECK(zz_device_rmsnorm(dev, st->hidden, n, h, &w[ZZ_LL_AT_NORM], c->ln_eps, xn));
      /* Phi-3's qkv_proj: its q, k and v rows are three matrices one after another */
      zz_tensor wq = w[ZZ_LL_AT_Q], wk = w[ZZ_LL_AT_K], wv = w[ZZ_LL_AT_V];
      if (c->fused_proj) {
        wq = zz_llama_rows(&w[ZZ_LL_AT_Q], 0, qw);
        wk = zz_llama_rows(&w[ZZ_LL_AT_Q], qw, kvw);
        wv = zz_llama_rows(&w[ZZ_LL_AT_Q], qw + kvw, kvw);
      }
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &wq, zz_llama_opt(&w[ZZ_LL_AT_QB]), qw, q, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &wk, zz_llama_opt(&w[ZZ_LL_AT_KB]), kvw, k, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &wv, zz_llama_opt(&w[ZZ_LL_AT_VB]), kvw, v, 0));
      if (c->qk_norm) { /* Qwen3: each head's q and k normalised over its head_dim */
        ZZ_CHECK(zz_device_rmsnorm(dev, q, n * c->n_heads, hd, &w[ZZ_LL_AT_QN], c->ln_eps, q));
        ZZ_CHECK(zz_device_rmsnorm(dev, k, n * c->n_kv_heads, hd, &w[ZZ_LL_AT_KN], c->ln_eps, k));
      }
      zz_rope rope = c->rope; /* longrope picks each sequence's factors by its last row (sq rows a sequence) */
      rope.seq_rows = (int32_t)st->sq;
      ZZ_CHECK(zz_device_rope(dev, q, n, c->n_heads, hd, st->positions, &rope));
      ZZ_CHECK(zz_device_rope(dev, k, n, c->n_kv_heads, hd, st->positions, &rope));
      ZZ_CHECK(zz_arch_attend(dev, c, st, q, k, v, att, scratch));
      /* the rest on r rows (zz_arch_rows): att's gathered into q, the residual's
       * after the projection's output in xn */
      int64_t r;
      void *ain, *x;
      ZZ_CHECK(zz_arch_rows(dev, st, att, qw, q, &r, &ain));
      ZZ_CHECK(zz_arch_rows(dev, st, st->hidden, h, xn + (size_t)(st->b * h) * es, &r, &x));
      ZZ_CHECK(zz_device_linear(dev, ain, r, qw, &w[ZZ_LL_AT_O], NULL, h, xn, 0));
      ZZ_CHECK(zz_device_add(dev, x, xn, r * h, x));
      return zz_arch_rows_done(dev, st, x, h);
    }

    case ZZ_LAYER_MLP: {
      char *xn = work, *g = xn + (size_t)(n * h) * es, *u = g + (size_t)(n * c->ffn) * es;
      /* r rows of the residual x (zz_arch_rows), gathered after xn's */
      int64_t r;
      void *x;
      ZZ_CHECK(zz_arch_rows(dev, st, st->hidden, h, xn + (size_t)(st->b * h) * es, &r, &x));
      ZZ_CHECK(zz_device_rmsnorm(dev, x, r, h, &w[ZZ_LL_MLP_NORM], c->ln_eps, xn));
      zz_tensor wg = w[ZZ_LL_MLP_GATE], wu = w[ZZ_LL_MLP_UP]; /* Phi-3's gate_up_proj: gate rows, then up rows */
      if (c->fused_proj) {
        wg = zz_llama_rows(&w[ZZ_LL_MLP_GATE], 0, c->ffn);
        wu = zz_llama_rows(&w[ZZ_LL_MLP_GATE], c->ffn, c->ffn);
      }
      ZZ_CHECK(zz_device_linear(dev, xn, r, h, &wg, NULL, c->ffn, g, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, r, h, &wu, NULL, c->ffn, u, 0));
      ZZ_CHECK(zz_device_silu_mul(dev, g, u, r * c->ffn, g));
      ZZ_CHECK(zz_device_linear(dev, g, r, c->ffn, &w[ZZ_LL_MLP_DOWN], NULL, h, xn, 0));
      ZZ_CHECK(zz_device_add(dev, x, xn, r * h, x));
      return zz_arch_rows_done(dev, st, x, h);
    }

    case ZZ_LAYER_OUTPUT_EMBED: {
      void *x = work;
      ZZ_CHECK(zz_device_gather_rows(dev, st->hidden, n, h, st->last, st->b, x));
      ZZ_CHECK(zz_device_rmsnorm(dev, x, st->b, h, &w[ZZ_LL_OUT_NORM], c->ln_eps, x));
      return zz_device_linear(dev, x, st->b, h, &w[ZZ_LL_OUT_HEAD], NULL, c->vocab_size, st->logits, 0);
    }
  }
  return zz_error(ZZ_ERR_INVALID_ARG, "llama: unknown layer kind %d", (int)layer->kind);
}

const zz_arch zz_arch_llama = {
    .model_type = "llama",
    .preset_name = zz_llama_preset_name,
    .preset = zz_llama_preset,
    .parse_config = zz_llama_parse_config,
    ZZ_LLAMA_LAYERS,
};
