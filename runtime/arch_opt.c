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

#include "arch_impl.h"

/* Slots of each layer's weight list; absent ones have ndim 0. */
enum { ZZ_IN_TOKENS, ZZ_IN_POSITIONS, ZZ_IN_PROJECT };
enum { ZZ_AT_Q_W, ZZ_AT_Q_B, ZZ_AT_K_W, ZZ_AT_K_B, ZZ_AT_V_W, ZZ_AT_V_B, ZZ_AT_O_W, ZZ_AT_O_B,
       ZZ_AT_LN_W, ZZ_AT_LN_B, ZZ_AT_N };
enum { ZZ_MLP_FC1_W, ZZ_MLP_FC1_B, ZZ_MLP_FC2_W, ZZ_MLP_FC2_B, ZZ_MLP_LN_W, ZZ_MLP_LN_B, ZZ_MLP_N };
enum { ZZ_OUT_LN_W, ZZ_OUT_LN_B, ZZ_OUT_PROJECT, ZZ_OUT_HEAD, ZZ_OUT_N };

#define ZZ_OPT_POS_OFFSET 2 /* OPT's learned positions start at index 2 */

static void zz_spec(zz_weight_spec *w, bool present, int ndim, int64_t d0, int64_t d1,
                    const char *fmt, int index) {
  memset(w, 0, sizeof *w);
  if (!present) return;
  snprintf(w->name, sizeof w->name, fmt, index);
  w->ndim = ndim;
  w->shape[0] = d0;
  w->shape[1] = d1;
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
  zz_spec(&L[0].weights[ZZ_IN_TOKENS], true, 2, c->vocab_size, c->embed_dim,
          "model.decoder.embed_tokens.weight", 0);
  zz_spec(&L[0].weights[ZZ_IN_POSITIONS], true, 2, c->max_pos + ZZ_OPT_POS_OFFSET, h,
          "model.decoder.embed_positions.weight", 0);
  zz_spec(&L[0].weights[ZZ_IN_PROJECT], proj, 2, h, c->embed_dim, "model.decoder.project_in.weight", 0);

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
      zz_spec(&a->weights[2 * p], true, 2, h, h, fmt, i);
      snprintf(fmt, sizeof fmt, "%s%s.bias", pfx, proj_names[p]);
      zz_spec(&a->weights[2 * p + 1], bias, 1, h, 0, fmt, i);
    }
    zz_spec(&a->weights[ZZ_AT_LN_W], true, 1, h, 0, "model.decoder.layers.%d.self_attn_layer_norm.weight", i);
    zz_spec(&a->weights[ZZ_AT_LN_B], true, 1, h, 0, "model.decoder.layers.%d.self_attn_layer_norm.bias", i);

    f->kind = ZZ_LAYER_MLP;
    f->index = i;
    f->n_weights = ZZ_MLP_N;
    zz_spec(&f->weights[ZZ_MLP_FC1_W], true, 2, c->ffn, h, "model.decoder.layers.%d.fc1.weight", i);
    zz_spec(&f->weights[ZZ_MLP_FC1_B], bias, 1, c->ffn, 0, "model.decoder.layers.%d.fc1.bias", i);
    zz_spec(&f->weights[ZZ_MLP_FC2_W], true, 2, h, c->ffn, "model.decoder.layers.%d.fc2.weight", i);
    zz_spec(&f->weights[ZZ_MLP_FC2_B], bias, 1, h, 0, "model.decoder.layers.%d.fc2.bias", i);
    zz_spec(&f->weights[ZZ_MLP_LN_W], true, 1, h, 0, "model.decoder.layers.%d.final_layer_norm.weight", i);
    zz_spec(&f->weights[ZZ_MLP_LN_B], true, 1, h, 0, "model.decoder.layers.%d.final_layer_norm.bias", i);
  }

  zz_layer *o = &L[n - 1];
  o->kind = ZZ_LAYER_OUTPUT_EMBED;
  o->index = -1;
  o->n_weights = ZZ_OUT_N;
  zz_spec(&o->weights[ZZ_OUT_LN_W], c->final_ln, 1, h, 0, "model.decoder.final_layer_norm.weight", 0);
  zz_spec(&o->weights[ZZ_OUT_LN_B], c->final_ln, 1, h, 0, "model.decoder.final_layer_norm.bias", 0);
  zz_spec(&o->weights[ZZ_OUT_PROJECT], proj, 2, c->embed_dim, h, "model.decoder.project_out.weight", 0);
  /* the LM head is tied to the token embedding; the output layer holds its own copy
   * so that each layer's weights can live on a different tier */
  zz_spec(&o->weights[ZZ_OUT_HEAD], true, 2, c->vocab_size, c->embed_dim,
          "model.decoder.embed_tokens.weight", 0);

  m->layers = L;
  m->n_layers = n;
  return ZZ_OK;
}

/* Workspace layout, in elements of the compute dtype:
 *   input:  [n, embed_dim]                         token rows before project_in
 *   attn:   xn, q, k, v, att: 5 × [n, h], then attention scratch
 *   mlp:    xn [n, h], f [n, ffn], o [n, h]
 *   output: x [b, h], y [b, max(h, embed_dim)]     (n = b * sq) */
static size_t zz_opt_workspace(const zz_model *m, const zz_device *dev, int64_t b, int64_t sq,
                               int64_t t) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(dev->ops->compute_dtype, 1);
  int64_t n = b * sq, h = c->hidden;
  size_t in = (size_t)(n * c->embed_dim) * es;
  size_t attn = (size_t)(5 * n * h) * es +
                zz_device_attention_scratch(dev, b, sq, t, c->n_heads) + 256;
  size_t mlp = (size_t)(n * (2 * h + c->ffn)) * es;
  size_t out = (size_t)(b * (h + (h > c->embed_dim ? h : c->embed_dim))) * es;
  size_t mx = in;
  if (attn > mx) mx = attn;
  if (mlp > mx) mx = mlp;
  if (out > mx) mx = out;
  return mx;
}

static zz_status zz_opt_forward(zz_device *dev, const zz_model *m, const zz_layer *layer,
                                const zz_tensor *w, const zz_step *st) {
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(dev->ops->compute_dtype, 1);
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
      if (st->attend) {
        ZZ_CHECK(st->attend(st->attend_ctx, q, k, v, att));
      } else {
        ZZ_CHECK(zz_device_kv_append(dev, k, st->b, st->sq, h, st->k, st->kv_stride, st->pos));
        ZZ_CHECK(zz_device_kv_append(dev, v, st->b, st->sq, h, st->v, st->kv_stride, st->pos));
        ZZ_CHECK(zz_device_attention(dev, q, st->k, st->v, st->kv_stride, st->b, st->sq, st->pos + st->sq,
                                     st->pos, c->n_heads, h / c->n_heads, st->pad, att, scratch));
      }
      ZZ_CHECK(zz_device_linear(dev, att, n, h, &w[ZZ_AT_O_W], &w[ZZ_AT_O_B], h, q, 0));
      ZZ_CHECK(zz_device_add(dev, st->hidden, q, n * h, st->hidden));
      if (!c->pre_ln)
        ZZ_CHECK(zz_device_layernorm(dev, st->hidden, n, h, &w[ZZ_AT_LN_W], &w[ZZ_AT_LN_B], c->ln_eps, st->hidden));
      return ZZ_OK;
    }

    case ZZ_LAYER_MLP: {
      void *xn = work, *f = work + (size_t)(n * h) * es;
      void *o = work + (size_t)(n * (h + c->ffn)) * es;
      const void *x = st->hidden;
      if (c->pre_ln) {
        ZZ_CHECK(zz_device_layernorm(dev, st->hidden, n, h, &w[ZZ_MLP_LN_W], &w[ZZ_MLP_LN_B], c->ln_eps, xn));
        x = xn;
      }
      ZZ_CHECK(zz_device_linear(dev, x, n, h, &w[ZZ_MLP_FC1_W], &w[ZZ_MLP_FC1_B], c->ffn, f, 1));
      ZZ_CHECK(zz_device_linear(dev, f, n, c->ffn, &w[ZZ_MLP_FC2_W], &w[ZZ_MLP_FC2_B], h, o, 0));
      ZZ_CHECK(zz_device_add(dev, st->hidden, o, n * h, st->hidden));
      if (!c->pre_ln)
        ZZ_CHECK(zz_device_layernorm(dev, st->hidden, n, h, &w[ZZ_MLP_LN_W], &w[ZZ_MLP_LN_B], c->ln_eps, st->hidden));
      return ZZ_OK;
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
    .build = zz_opt_build,
    .workspace_bytes = zz_opt_workspace,
    .forward = zz_opt_forward,
};
