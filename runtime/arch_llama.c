/*
 * arch_llama.c — LLaMA (Touvron et al., 2023; Llama 2; Llama 3) as Hugging Face's
 * LlamaForCausalLM computes it (transformers 4.46): pre-norm layers with RMSNorm
 * (rms_norm_eps), rotary position embeddings (rope_theta; rope_scaling "linear" and
 * "llama3"; or transformers 5's rope_parameters), grouped-query attention (num_key_value_heads K/V heads, the KV cache
 * sized by them), the SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, a final
 * RMSNorm and an LM head of its own unless tie_word_embeddings.
 *
 * FlexGen's layer list as for OPT: input embedding, per transformer layer an
 * attention layer and an MLP layer, the output embedding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arch_impl.h"

/* Slots of each layer's weight list. */
enum { ZZ_LL_IN_TOKENS, ZZ_LL_IN_N };
enum { ZZ_LL_AT_Q, ZZ_LL_AT_K, ZZ_LL_AT_V, ZZ_LL_AT_O, ZZ_LL_AT_NORM, ZZ_LL_AT_N };
enum { ZZ_LL_MLP_GATE, ZZ_LL_MLP_UP, ZZ_LL_MLP_DOWN, ZZ_LL_MLP_NORM, ZZ_LL_MLP_N };
enum { ZZ_LL_OUT_NORM, ZZ_LL_OUT_HEAD, ZZ_LL_OUT_N };

/* ---------------------------------------------------------------- config */

typedef struct zz_llama_size {
  const char *name;
  int64_t hidden, ffn, n_layers, n_heads, n_kv_heads, vocab, max_pos;
  float eps, theta;
  int32_t bos, eos;
} zz_llama_size;

/* Shapes of the published configs (huggyllama/llama-*, meta-llama/Llama-2-70b-hf,
 * meta-llama/Meta-Llama-3-8B and -70B). */
static const zz_llama_size zz_llama_presets[] = {
    {"llama-7b", 4096, 11008, 32, 32, 32, 32000, 2048, 1e-6f, 10000.0f, 1, 2},
    {"llama-13b", 5120, 13824, 40, 40, 40, 32000, 2048, 1e-6f, 10000.0f, 1, 2},
    {"llama-30b", 6656, 17920, 60, 52, 52, 32000, 2048, 1e-6f, 10000.0f, 1, 2},
    {"llama-65b", 8192, 22016, 80, 64, 64, 32000, 2048, 1e-5f, 10000.0f, 1, 2},
    {"llama-2-70b", 8192, 28672, 80, 64, 8, 32000, 4096, 1e-5f, 10000.0f, 1, 2},
    {"llama-3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 1e-5f, 500000.0f, 128000, 128001},
    {"llama-3-70b", 8192, 28672, 80, 64, 8, 128256, 8192, 1e-5f, 500000.0f, 128000, 128001},
};
#define ZZ_LLAMA_N_PRESETS (sizeof zz_llama_presets / sizeof zz_llama_presets[0])

static const char *zz_llama_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_LLAMA_N_PRESETS ? zz_llama_presets[i].name : NULL;
}

static void zz_llama_defaults(zz_config *c) {
  memset(c, 0, sizeof *c);
  strcpy(c->model_type, "llama");
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

static bool zz_llama_preset(const char *name, zz_config *out) {
  const char *slash = strchr(name, '/'); /* "meta-llama/...", "huggyllama/..." */
  const char *base = slash ? slash + 1 : name;
  for (size_t i = 0; i < ZZ_LLAMA_N_PRESETS; i++) {
    const zz_llama_size *p = &zz_llama_presets[i];
    if (strcasecmp(base, p->name) != 0) continue;
    zz_llama_defaults(out);
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->hidden = out->embed_dim = p->hidden;
    out->ffn = p->ffn;
    out->n_layers = p->n_layers;
    out->n_heads = p->n_heads;
    out->n_kv_heads = p->n_kv_heads;
    out->head_dim = p->hidden / p->n_heads;
    out->vocab_size = p->vocab;
    out->max_pos = p->max_pos;
    out->ln_eps = p->eps;
    out->rope.theta = p->theta;
    out->bos = p->bos;
    out->eos_ids[0] = p->eos;
    out->pad = p->eos;
    return true;
  }
  return false;
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
static zz_status zz_llama_rope_form(json_t *sc, const char *where, double theta, zz_rope *r) {
  *r = (zz_rope){.type = ZZ_ROPE_DEFAULT, .theta = (float)theta, .factor = 1.0f};
  if (!sc) return ZZ_OK;
  json_t *jt = json_object_get(sc, "rope_type");
  if (!jt || json_is_null(jt)) jt = json_object_get(sc, "type"); /* transformers < 4.42 */
  const char *type = json_string_value(jt);
  if (!type) return zz_error(ZZ_ERR_FORMAT, "%s has no \"rope_type\" string", where);
  double prf;
  ZZ_CHECK(zz_json_real(sc, where, "partial_rotary_factor", 1.0, 0.0, 1.0, &prf));
  if (prf != 1.0) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (1)", where, prf);
  if (strcmp(type, "default") == 0) return ZZ_OK;
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
  return zz_error(ZZ_ERR_UNSUPPORTED, "%s: rope_type \"%.40s\" is not supported (default, linear, llama3)", where,
                  type);
}

/* RoPE in either form transformers writes: before 5, "rope_theta" beside
 * "rope_scaling" (null or {rope_type, factor, …}); from 5 on, "rope_parameters"
 * {rope_type, rope_theta, factor, …}. Both read to the same zz_rope; a file
 * carrying both must give the same one. */
static zz_status zz_llama_rope(json_t *root, const char *path, zz_rope *out) {
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
  ZZ_CHECK(zz_llama_rope_form(scaling, where, theta, &old_r));
  double pr;
  ZZ_CHECK(zz_json_real(root, path, "partial_rotary_factor", 1.0, 0.0, 1.0, &pr));
  if (pr != 1.0) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (1)", path, pr);
  if (!params) {
    *out = old_r;
    return ZZ_OK;
  }
  snprintf(where, sizeof where, "%s: rope_parameters", path);
  ZZ_CHECK(zz_json_real(params, where, "rope_theta", 10000.0, ZZ_ROPE_THETA_MIN, ZZ_ROPE_THETA_MAX, &theta));
  ZZ_CHECK(zz_llama_rope_form(params, where, theta, &new_r));
  bool same = old_r.type == new_r.type && old_r.theta == new_r.theta && old_r.factor == new_r.factor &&
              old_r.low_freq_factor == new_r.low_freq_factor && old_r.high_freq_factor == new_r.high_freq_factor &&
              old_r.original_max_pos == new_r.original_max_pos;
  if (old_form && !same)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"rope_parameters\" and \"rope_theta\" / \"rope_scaling\" disagree", path);
  *out = new_r;
  return ZZ_OK;
}

static zz_status zz_llama_parse_config(json_t *root, const char *path, zz_config *out) {
  zz_config c;
  zz_llama_defaults(&c);
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
  ZZ_CHECK(zz_llama_rope(root, path, &c.rope));
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
  ZZ_CHECK(zz_json_int(root, path, "head_dim", c.hidden / c.n_heads, &c.head_dim));
  if (c.head_dim < 2 || c.head_dim % 2 != 0 || c.head_dim > 1024)
    return zz_error(ZZ_ERR_FORMAT, "%s: head_dim %lld must be even, in [2, 1024]", path, (long long)c.head_dim);
  c.embed_dim = c.hidden;
  c.ln_eps = (float)eps;
  c.bos = (int32_t)bos;
  c.pad = (int32_t)(pad != INT64_MAX ? pad : c.eos_ids[0]); /* no pad token: pad with EOS, as generate does */
  *out = c;
  return ZZ_OK;
}

/* Hugging Face's positions under left padding: real tokens count from 0; padding
 * slots get 1, which no real token attends to. */
static void zz_llama_positions(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out) {
  (void)c;
  for (int64_t r = 0; r < n; r++) {
    int64_t row = from + r;
    out[r] = row < pad ? 1 : (int32_t)(row - pad);
  }
}

/* ---------------------------------------------------------------- layers */

static zz_status zz_llama_build(zz_model *m) {
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
    zz_arch_spec(&a->weights[ZZ_LL_AT_Q], true, 2, qw, h, "model.layers.%d.self_attn.q_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_K], true, 2, kvw, h, "model.layers.%d.self_attn.k_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_V], true, 2, kvw, h, "model.layers.%d.self_attn.v_proj.weight", i);
    zz_arch_spec(&a->weights[ZZ_LL_AT_O], true, 2, h, qw, "model.layers.%d.self_attn.o_proj.weight", i);
    a->weights[ZZ_LL_AT_O].after_kv = true;
    zz_arch_spec(&a->weights[ZZ_LL_AT_NORM], true, 1, h, 0, "model.layers.%d.input_layernorm.weight", i);
    a->weights[ZZ_LL_AT_NORM].init = ZZ_INIT_NORM_GAIN;
    a->cache = (zz_cache_spec){.kv_heads = c->n_kv_heads, .head_dim = c->head_dim};

    f->kind = ZZ_LAYER_MLP;
    f->index = i;
    f->n_weights = ZZ_LL_MLP_N;
    zz_arch_spec(&f->weights[ZZ_LL_MLP_GATE], true, 2, c->ffn, h, "model.layers.%d.mlp.gate_proj.weight", i);
    zz_arch_spec(&f->weights[ZZ_LL_MLP_UP], true, 2, c->ffn, h, "model.layers.%d.mlp.up_proj.weight", i);
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
static size_t zz_llama_workspace(const zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
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

static zz_status zz_llama_forward(zz_device *dev, const zz_model *m, const zz_layer *layer, const zz_tensor *w,
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
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &w[ZZ_LL_AT_Q], NULL, qw, q, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &w[ZZ_LL_AT_K], NULL, kvw, k, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, n, h, &w[ZZ_LL_AT_V], NULL, kvw, v, 0));
      ZZ_CHECK(zz_device_rope(dev, q, n, c->n_heads, hd, st->positions, &c->rope));
      ZZ_CHECK(zz_device_rope(dev, k, n, c->n_kv_heads, hd, st->positions, &c->rope));
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
      ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_LL_MLP_GATE], NULL, c->ffn, g, 0));
      ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_LL_MLP_UP], NULL, c->ffn, u, 0));
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
    .build = zz_llama_build,
    .positions = zz_llama_positions,
    .workspace_bytes = zz_llama_workspace,
    .forward = zz_llama_forward,
};
