/*
 * arch_opt.c — OPT (Zhang et al., 2022) as Hugging Face's OPTForCausalLM computes
 * it: learned positions with offset 2, pre-LN layers (or opt-350m's post-LN with
 * project_in/project_out when word_embed_proj_dim != hidden_size), ReLU MLP, final
 * layer norm, LM head tied to the token embedding, causal mask with left padding.
 *
 * The model is cut into FlexGen's layers: input embedding, then per transformer
 * layer an attention layer and an MLP layer, then the output embedding. Each
 * forward below computes one such layer for one GPU batch, on any device.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arch_impl.h"

/* Slots of each layer's weight list; absent ones have ndim 0. */
enum { ZZ_IN_TOKENS, ZZ_IN_POSITIONS, ZZ_IN_PROJECT };
enum {
  ZZ_AT_Q_W,
  ZZ_AT_Q_B,
  ZZ_AT_K_W,
  ZZ_AT_K_B,
  ZZ_AT_V_W,
  ZZ_AT_V_B,
  ZZ_AT_O_W,
  ZZ_AT_O_B,
  ZZ_AT_LN_W,
  ZZ_AT_LN_B,
  ZZ_AT_N
};
enum { ZZ_MLP_FC1_W, ZZ_MLP_FC1_B, ZZ_MLP_FC2_W, ZZ_MLP_FC2_B, ZZ_MLP_LN_W, ZZ_MLP_LN_B, ZZ_MLP_N };
enum { ZZ_OUT_LN_W, ZZ_OUT_LN_B, ZZ_OUT_PROJECT, ZZ_OUT_HEAD, ZZ_OUT_N };

#define ZZ_OPT_POS_OFFSET 2 /* OPT's learned positions start at index 2 */

/* ---------------------------------------------------------------- config */

typedef struct zz_opt_size {
  const char *name;
  int64_t hidden, n_layers, n_heads, ffn, embed_dim;
  bool pre_ln;
} zz_opt_size;

/* Sizes from the published OPT configs (Zhang et al., 2022). */
static const zz_opt_size zz_opt_presets[] = {
    {"opt-125m", 768, 12, 12, 3072, 768, true},      {"opt-350m", 1024, 24, 16, 4096, 512, false},
    {"opt-1.3b", 2048, 24, 32, 8192, 2048, true},    {"opt-2.7b", 2560, 32, 32, 10240, 2560, true},
    {"opt-6.7b", 4096, 32, 32, 16384, 4096, true},   {"opt-13b", 5120, 40, 40, 20480, 5120, true},
    {"opt-30b", 7168, 48, 56, 28672, 7168, true},    {"opt-66b", 9216, 64, 72, 36864, 9216, true},
    {"opt-175b", 12288, 96, 96, 49152, 12288, true},
};
#define ZZ_OPT_N_PRESETS (sizeof zz_opt_presets / sizeof zz_opt_presets[0])

static const char *zz_opt_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_OPT_N_PRESETS ? zz_opt_presets[i].name : NULL;
}

static void zz_opt_defaults(zz_config *c) {
  memset(c, 0, sizeof *c);
  strcpy(c->model_type, "opt");
  c->vocab_size = 50272;
  c->max_pos = 2048;
  c->pre_ln = true;
  c->final_ln = true;
  c->enable_bias = true;
  c->bos = 2;
  c->eos_ids[0] = 2;
  c->n_eos = 1;
  c->pad = 1;
  c->ln_eps = 1e-5f;
  c->dtype = ZZ_DTYPE_F16;
  c->tied_head = true;
}

/* OPT has no grouped-query attention: every head keeps its own K and V. */
static void zz_opt_derived(zz_config *c) {
  c->n_kv_heads = c->n_heads;
  c->head_dim = c->n_heads ? c->hidden / c->n_heads : 0;
}

static bool zz_opt_preset(const char *name, zz_config *out) {
  for (size_t i = 0; i < ZZ_OPT_N_PRESETS; i++) {
    const zz_opt_size *p = &zz_opt_presets[i];
    if (strcasecmp(name, p->name) != 0 &&
        !(strncasecmp(name, "facebook/", 9) == 0 && strcasecmp(name + 9, p->name) == 0))
      continue;
    zz_opt_defaults(out);
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->hidden = p->hidden;
    out->n_layers = p->n_layers;
    out->n_heads = p->n_heads;
    out->ffn = p->ffn;
    out->embed_dim = p->embed_dim;
    out->pre_ln = p->pre_ln;
    out->final_ln = p->pre_ln;
    zz_opt_derived(out);
    return true;
  }
  return false;
}

static zz_status zz_opt_parse_config(json_t *root, const char *path, zz_config *out) {
  zz_config c;
  zz_opt_defaults(&c);
  int64_t bos = 0, pad = 0;
  /* each size in its own range (far beyond any published model: a lying config) */
  ZZ_CHECK(zz_json_int_in(root, path, "vocab_size", -1, 4, ZZ_MAX_VOCAB, &c.vocab_size));
  ZZ_CHECK(zz_json_int_in(root, path, "hidden_size", -1, 1, ZZ_MAX_HIDDEN, &c.hidden));
  ZZ_CHECK(zz_json_int_in(root, path, "ffn_dim", -1, 1, ZZ_MAX_FFN, &c.ffn));
  ZZ_CHECK(zz_json_int_in(root, path, "num_hidden_layers", -1, 1, ZZ_MAX_LAYERS, &c.n_layers));
  ZZ_CHECK(zz_json_int_in(root, path, "num_attention_heads", -1, 1, c.hidden, &c.n_heads));
  ZZ_CHECK(zz_json_int_in(root, path, "max_position_embeddings", 2048, 1, ZZ_MAX_POSITIONS, &c.max_pos));
  ZZ_CHECK(zz_json_int_in(root, path, "word_embed_proj_dim", c.hidden, 1, ZZ_MAX_HIDDEN, &c.embed_dim));
  ZZ_CHECK(zz_json_int_in(root, path, "bos_token_id", 2, 0, c.vocab_size - 1, &bos));
  ZZ_CHECK(zz_json_int_in(root, path, "pad_token_id", 1, 0, c.vocab_size - 1, &pad));
  ZZ_CHECK(zz_json_bool(root, path, "do_layer_norm_before", true, &c.pre_ln));
  bool remove_final = false, affine = true;
  ZZ_CHECK(zz_json_bool(root, path, "_remove_final_layer_norm", false, &remove_final));
  ZZ_CHECK(zz_json_bool(root, path, "enable_bias", true, &c.enable_bias));
  ZZ_CHECK(zz_json_bool(root, path, "layer_norm_elementwise_affine", true, &affine));
  if (!affine) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: layer_norm_elementwise_affine=false is not supported", path);
  c.final_ln = c.pre_ln && !remove_final;
  const char *act = json_string_value(json_object_get(root, "activation_function"));
  if (act && strcmp(act, "relu") != 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: activation_function \"%s\" is not supported", path, act);
  ZZ_CHECK(zz_json_dtype(root, path, &c.dtype));
  if (c.hidden % c.n_heads != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", path,
                    (long long)c.hidden, (long long)c.n_heads);
  ZZ_CHECK(zz_json_eos(root, path, "eos_token_id", c.vocab_size, &c));
  c.bos = (int32_t)bos;
  c.pad = (int32_t)pad;
  zz_opt_derived(&c);
  *out = c;
  return ZZ_OK;
}

/* Hugging Face's OPT positions: real tokens before this one plus the offset;
 * padding slots get the padding index (1), which no real token attends to. */
static void zz_opt_positions(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out) {
  (void)c;
  for (int64_t r = 0; r < n; r++) {
    int64_t row = from + r;
    out[r] = row < pad ? 1 : (int32_t)(row - pad + ZZ_OPT_POS_OFFSET);
  }
}

/* ---------------------------------------------------------------- layers */

/* A layer norm's gain and bias are initialised as norms, not as a bias. */
static void zz_norm(zz_weight_spec *gain, zz_weight_spec *bias) {
  gain->init = ZZ_INIT_NORM_GAIN;
  bias->init = ZZ_INIT_NORM_BIAS;
}

static zz_status zz_opt_build(zz_model *m) {
  const zz_config *c = &m->cfg;
  int n = (int)(2 * c->n_layers + 2);
  zz_layer *L = calloc((size_t)n, sizeof *L);
  if (!L) return zz_error(ZZ_ERR_NO_MEMORY, "model: out of memory");
  bool proj = c->embed_dim != c->hidden, bias = c->enable_bias;
  int64_t h = c->hidden;

  L[0].kind = ZZ_LAYER_INPUT_EMBED;
  L[0].index = -1;
  L[0].n_weights = 3;
  zz_arch_spec(&L[0].weights[ZZ_IN_TOKENS], true, 2, c->vocab_size, c->embed_dim, "model.decoder.embed_tokens.weight",
               0);
  zz_arch_spec(&L[0].weights[ZZ_IN_POSITIONS], true, 2, c->max_pos + ZZ_OPT_POS_OFFSET, h,
               "model.decoder.embed_positions.weight", 0);
  zz_arch_spec(&L[0].weights[ZZ_IN_PROJECT], proj, 2, h, c->embed_dim, "model.decoder.project_in.weight", 0);
  L[0].weights[ZZ_IN_TOKENS].gathered = L[0].weights[ZZ_IN_POSITIONS].gathered = true; /* project_in multiplies */

  for (int i = 0; i < c->n_layers; i++) {
    zz_layer *a = &L[1 + 2 * i], *f = &L[2 + 2 * i];
    a->kind = ZZ_LAYER_ATTENTION;
    a->index = i;
    a->has_cache = true;
    a->n_weights = ZZ_AT_N;
    const char *pfx = "model.decoder.layers.%d.self_attn.";
    char fmt[96];
    static const char *const proj_names[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int p = 0; p < 4; p++) {
      snprintf(fmt, sizeof fmt, "%s%s.weight", pfx, proj_names[p]);
      zz_arch_spec(&a->weights[2 * p], true, 2, h, h, fmt, i);
      a->weights[2 * p].after_kv = 2 * p == ZZ_AT_O_W; /* zz_opt_forward gathers its rows */
      snprintf(fmt, sizeof fmt, "%s%s.bias", pfx, proj_names[p]);
      zz_arch_spec(&a->weights[2 * p + 1], bias, 1, h, 0, fmt, i);
    }
    zz_arch_spec(&a->weights[ZZ_AT_LN_W], true, 1, h, 0, "model.decoder.layers.%d.self_attn_layer_norm.weight", i);
    zz_arch_spec(&a->weights[ZZ_AT_LN_B], true, 1, h, 0, "model.decoder.layers.%d.self_attn_layer_norm.bias", i);
    zz_norm(&a->weights[ZZ_AT_LN_W], &a->weights[ZZ_AT_LN_B]);
    a->cache = (zz_cache_spec){.kv_heads = c->n_kv_heads, .head_dim = c->head_dim};

    f->kind = ZZ_LAYER_MLP;
    f->index = i;
    f->n_weights = ZZ_MLP_N;
    zz_arch_spec(&f->weights[ZZ_MLP_FC1_W], true, 2, c->ffn, h, "model.decoder.layers.%d.fc1.weight", i);
    zz_arch_spec(&f->weights[ZZ_MLP_FC1_B], bias, 1, c->ffn, 0, "model.decoder.layers.%d.fc1.bias", i);
    zz_arch_spec(&f->weights[ZZ_MLP_FC2_W], true, 2, h, c->ffn, "model.decoder.layers.%d.fc2.weight", i);
    f->weights[ZZ_MLP_FC1_W].after_kv = f->weights[ZZ_MLP_FC2_W].after_kv = true;
    zz_arch_spec(&f->weights[ZZ_MLP_FC2_B], bias, 1, h, 0, "model.decoder.layers.%d.fc2.bias", i);
    zz_arch_spec(&f->weights[ZZ_MLP_LN_W], true, 1, h, 0, "model.decoder.layers.%d.final_layer_norm.weight", i);
    zz_arch_spec(&f->weights[ZZ_MLP_LN_B], true, 1, h, 0, "model.decoder.layers.%d.final_layer_norm.bias", i);
    zz_norm(&f->weights[ZZ_MLP_LN_W], &f->weights[ZZ_MLP_LN_B]);
  }

  zz_layer *o = &L[n - 1];
  o->kind = ZZ_LAYER_OUTPUT_EMBED;
  o->index = -1;
  o->n_weights = ZZ_OUT_N;
  zz_arch_spec(&o->weights[ZZ_OUT_LN_W], c->final_ln, 1, h, 0, "model.decoder.final_layer_norm.weight", 0);
  zz_arch_spec(&o->weights[ZZ_OUT_LN_B], c->final_ln, 1, h, 0, "model.decoder.final_layer_norm.bias", 0);
  zz_norm(&o->weights[ZZ_OUT_LN_W], &o->weights[ZZ_OUT_LN_B]);
  zz_arch_spec(&o->weights[ZZ_OUT_PROJECT], proj, 2, c->embed_dim, h, "model.decoder.project_out.weight", 0);
  /* the LM head is tied to the token embedding; the output layer holds its own copy
   * so that each layer's weights can live on a different tier */
  zz_arch_spec(&o->weights[ZZ_OUT_HEAD], true, 2, c->vocab_size, c->embed_dim, "model.decoder.embed_tokens.weight", 0);

  m->layers = L;
  m->n_layers = n;
  return ZZ_OK;
}

/* Workspace layout, in elements of the compute dtype:
 *   input:  [n, embed_dim]                         token rows before project_in
 *   attn:   xn, q, k, v, att: 5 × [n, h], then attention scratch
 *   mlp:    xn [n, h], f [n, ffn], o [n, h]
 *   output: x [b, h], y [b, max(h, embed_dim)]     (n = b * sq) */
static size_t zz_opt_workspace(const zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
                               bool general_attn) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(dev->compute_dtype, 1);
  int64_t n = b * sq, h = c->hidden;
  size_t in = (size_t)(n * c->embed_dim) * es;
  size_t attn = (size_t)(5 * n * h) * es + zz_device_desc_attention_scratch(dev, b, sq, t, c->n_heads, general_attn) +
                256;
  size_t mlp = (size_t)(n * (2 * h + c->ffn)) * es;
  size_t out = (size_t)(b * (h + (h > c->embed_dim ? h : c->embed_dim))) * es;
  size_t mx = in;
  if (attn > mx) mx = attn;
  if (mlp > mx) mx = mlp;
  if (out > mx) mx = out;
  return mx;
}

static zz_status zz_opt_forward(zz_device *dev, const zz_model *m, const zz_layer *layer, const zz_tensor *w,
                                const zz_step *st) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, 1);
  int64_t n = st->b * st->sq, h = c->hidden;
  char *work = st->work;
  switch (layer->kind) {
    case ZZ_LAYER_INPUT_EMBED:
      if (w[ZZ_IN_PROJECT].ndim) {
        ZZ_CHECK(zz_device_embed_rows(dev, &w[ZZ_IN_TOKENS], st->ids, n, work));
        ZZ_CHECK(zz_device_linear(dev, work, n, c->embed_dim, &w[ZZ_IN_PROJECT], NULL, h, st->hidden, 0));
      } else {
        ZZ_CHECK(zz_device_embed_rows(dev, &w[ZZ_IN_TOKENS], st->ids, n, st->hidden));
      }
      return zz_device_add_rows(dev, st->hidden, &w[ZZ_IN_POSITIONS], st->positions, n);

    case ZZ_LAYER_ATTENTION: {
      size_t m1 = (size_t)(n * h) * es;
      void *xn = work, *q = work + m1, *k = work + 2 * m1, *v = work + 3 * m1, *att = work + 4 * m1;
      void *scratch = work + ((5 * m1 + 255) & ~(size_t)255);
      const void *x = st->hidden;
      if (c->pre_ln) {
        ZZ_CHECK(zz_device_layernorm(dev, st->hidden, n, h, &w[ZZ_AT_LN_W], &w[ZZ_AT_LN_B], c->ln_eps, xn));
        x = xn;
      }
      ZZ_CHECK(zz_device_linear(dev, x, n, h, &w[ZZ_AT_Q_W], &w[ZZ_AT_Q_B], h, q, 0));
      ZZ_CHECK(zz_device_linear(dev, x, n, h, &w[ZZ_AT_K_W], &w[ZZ_AT_K_B], h, k, 0));
      ZZ_CHECK(zz_device_linear(dev, x, n, h, &w[ZZ_AT_V_W], &w[ZZ_AT_V_B], h, v, 0));
      ZZ_CHECK(zz_arch_attend(dev, c, st, q, k, v, att, scratch));
      /* the rest on r rows (zz_arch_rows): att's gathered into xn, the residual
       * res's after the projection's output in q */
      int64_t r;
      void *ain, *res;
      ZZ_CHECK(zz_arch_rows(dev, st, att, h, xn, &r, &ain));
      ZZ_CHECK(zz_arch_rows(dev, st, st->hidden, h, (char *)q + (size_t)(st->b * h) * es, &r, &res));
      ZZ_CHECK(zz_device_linear(dev, ain, r, h, &w[ZZ_AT_O_W], &w[ZZ_AT_O_B], h, q, 0));
      ZZ_CHECK(zz_device_add(dev, res, q, r * h, res));
      if (!c->pre_ln) ZZ_CHECK(zz_device_layernorm(dev, res, r, h, &w[ZZ_AT_LN_W], &w[ZZ_AT_LN_B], c->ln_eps, res));
      return zz_arch_rows_done(dev, st, res, h);
    }

    case ZZ_LAYER_MLP: {
      char *xn = work, *f = work + (size_t)(n * h) * es;
      char *o = work + (size_t)(n * (h + c->ffn)) * es;
      /* r rows of the residual res (zz_arch_rows), gathered after xn's */
      int64_t r;
      void *res;
      ZZ_CHECK(zz_arch_rows(dev, st, st->hidden, h, xn + (size_t)(st->b * h) * es, &r, &res));
      const void *x = res;
      if (c->pre_ln) {
        ZZ_CHECK(zz_device_layernorm(dev, res, r, h, &w[ZZ_MLP_LN_W], &w[ZZ_MLP_LN_B], c->ln_eps, xn));
        x = xn;
      }
      ZZ_CHECK(zz_device_linear(dev, x, r, h, &w[ZZ_MLP_FC1_W], &w[ZZ_MLP_FC1_B], c->ffn, f, 1));
      ZZ_CHECK(zz_device_linear(dev, f, r, c->ffn, &w[ZZ_MLP_FC2_W], &w[ZZ_MLP_FC2_B], h, o, 0));
      ZZ_CHECK(zz_device_add(dev, res, o, r * h, res));
      if (!c->pre_ln) ZZ_CHECK(zz_device_layernorm(dev, res, r, h, &w[ZZ_MLP_LN_W], &w[ZZ_MLP_LN_B], c->ln_eps, res));
      return zz_arch_rows_done(dev, st, res, h);
    }

    case ZZ_LAYER_OUTPUT_EMBED: {
      void *x = work, *y = work + (size_t)(st->b * h) * es;
      /* the last position of each sequence: a gather from the hidden state [n, h] */
      ZZ_CHECK(zz_device_gather_rows(dev, st->hidden, n, h, st->last, st->b, x));
      if (w[ZZ_OUT_LN_W].ndim)
        ZZ_CHECK(zz_device_layernorm(dev, x, st->b, h, &w[ZZ_OUT_LN_W], &w[ZZ_OUT_LN_B], c->ln_eps, x));
      if (w[ZZ_OUT_PROJECT].ndim) {
        ZZ_CHECK(zz_device_linear(dev, x, st->b, h, &w[ZZ_OUT_PROJECT], NULL, c->embed_dim, y, 0));
        x = y;
      }
      return zz_device_linear(dev, x, st->b, c->embed_dim, &w[ZZ_OUT_HEAD], NULL, c->vocab_size, st->logits, 0);
    }
  }
  return zz_error(ZZ_ERR_INVALID_ARG, "opt: unknown layer kind %d", (int)layer->kind);
}

const zz_arch zz_arch_opt = {
    .model_type = "opt",
    .preset_name = zz_opt_preset_name,
    .preset = zz_opt_preset,
    .parse_config = zz_opt_parse_config,
    .build = zz_opt_build,
    .positions = zz_opt_positions,
    .workspace_bytes = zz_opt_workspace,
    .forward = zz_opt_forward,
};
