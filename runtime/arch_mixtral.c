/*
 * arch_mixtral.c — Mixtral (Jiang et al., 2024) as transformers' MixtralForCausalLM
 * computes it: LLaMA's layers (arch_llama.c, used through its table) with each MLP
 * a sparse mixture of experts, block_sparse_moe: a router linear, softmax over the
 * num_local_experts experts, the num_experts_per_tok largest renormalised to sum
 * to 1, the weighted sum of those experts' SwiGLU (w2(silu(w1 x) * w3 x))
 * (runtime/moe.c). router_jitter_noise is a training-time perturbation: not
 * applied at inference, as transformers does not apply it in eval.
 *
 * Checkpoints: transformers 4 and 5 both save the experts one tensor per matrix,
 * model.layers.N.block_sparse_moe.experts.E.w1/w2/w3.weight, and the router as
 * .block_sparse_moe.gate.weight (transformers 5 fuses them into 3-D tensors in
 * memory only, and writes them back apart).
 */
#include <string.h>
#include <strings.h>

#include "moe_impl.h"

/* The MLP layer's weight slots: its norm, then the MoE's (moe_impl.h). */
enum { ZZ_MX_NORM, ZZ_MX_MOE, ZZ_MX_N = ZZ_MX_MOE + ZZ_MOE_N };

typedef struct zz_mixtral_size {
  const char *name;
  int64_t hidden, ffn, n_layers, n_heads, n_kv_heads, vocab, max_pos, experts, used;
} zz_mixtral_size;

/* Shapes of the published configs: mistralai/Mixtral-8x7B-v0.1 (hidden_size 4096,
 * intermediate_size 14336, 32 layers, 32 heads, 8 KV heads, vocab 32000,
 * max_position_embeddings 32768) and mistralai/Mixtral-8x22B-v0.1 (6144, 16384, 56
 * layers, 48 heads, 8 KV heads, vocab 32000, 65536); both num_local_experts 8,
 * num_experts_per_tok 2, rms_norm_eps 1e-5, rope_theta 1e6, sliding_window null,
 * bos 1, eos 2. */
static const zz_mixtral_size zz_mixtral_presets[] = {
    {"mixtral-8x7b", 4096, 14336, 32, 32, 8, 32000, 32768, 8, 2},
    {"mixtral-8x22b", 6144, 16384, 56, 48, 8, 32000, 65536, 8, 2},
};
#define ZZ_MIXTRAL_N_PRESETS (sizeof zz_mixtral_presets / sizeof zz_mixtral_presets[0])

static const char *zz_mixtral_preset_name(int i) {
  return i >= 0 && (size_t)i < ZZ_MIXTRAL_N_PRESETS ? zz_mixtral_presets[i].name : NULL;
}

static bool zz_mixtral_preset(const char *name, zz_config *out) {
  const char *slash = strchr(name, '/'); /* "mistralai/Mixtral-8x7B-v0.1" */
  const char *base = slash ? slash + 1 : name;
  for (size_t i = 0; i < ZZ_MIXTRAL_N_PRESETS; i++) {
    const zz_mixtral_size *p = &zz_mixtral_presets[i];
    size_t len = strlen(p->name);
    /* the preset's name, or the Hub's with a version after it ("-v0.1") */
    if (strncasecmp(base, p->name, len) != 0 || (base[len] && strncasecmp(base + len, "-v0.", 4) != 0)) continue;
    /* LLaMA's defaults and derived sizes, then Mixtral's */
    ZZ_ASSERT(zz_arch_llama.preset("llama-7b", out));
    strcpy(out->model_type, "mixtral");
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->hidden = out->embed_dim = p->hidden;
    out->ffn = out->expert_ffn = p->ffn;
    out->n_layers = p->n_layers;
    out->n_heads = p->n_heads;
    out->n_kv_heads = p->n_kv_heads;
    out->head_dim = p->hidden / p->n_heads;
    out->vocab_size = p->vocab;
    out->max_pos = p->max_pos;
    out->ln_eps = 1e-5f;
    out->rope.theta = 1e6f;
    out->n_experts = p->experts;
    out->n_experts_used = p->used;
    out->norm_topk = true;
    return true;
  }
  return false;
}

/* A key this reader does not compute, refused by name unless absent, null or
 * equal to what it computes (ok). */
static zz_status zz_mixtral_refuse(json_t *root, const char *path, const char *key, bool ok, const char *want) {
  json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v) || ok) return ZZ_OK;
  return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s is not supported (%s)", path, key, want);
}

static zz_status zz_mixtral_parse_config(json_t *root, const char *path, zz_config *out) {
  zz_config c;
  ZZ_CHECK(zz_arch_llama.parse_config(root, path, &c));
  strcpy(c.model_type, "mixtral");
  /* MixtralConfig's defaults where LLaMA's differ (the keys absent) */
  if (!json_object_get(root, "rope_theta") && !json_object_get(root, "rope_parameters")) c.rope.theta = 1e6f;
  if (!json_object_get(root, "rms_norm_eps")) c.ln_eps = 1e-5f;
  ZZ_CHECK(zz_json_int_in(root, path, "num_local_experts", 8, 1, ZZ_MAX_EXPERTS, &c.n_experts));
  int64_t used_max = c.n_experts < ZZ_MOE_MAX_TOPK ? c.n_experts : ZZ_MOE_MAX_TOPK;
  ZZ_CHECK(zz_json_int_in(root, path, "num_experts_per_tok", 2, 1, used_max, &c.n_experts_used));
  c.expert_ffn = c.ffn;
  c.norm_topk = true;
  /* sliding_window: a window on attention this reader does not apply */
  ZZ_CHECK(zz_mixtral_refuse(root, path, "sliding_window", false, "null: attention over every key"));
  double jitter;
  ZZ_CHECK(zz_json_real(root, path, "router_jitter_noise", 0.0, 0.0, 1.0, &jitter)); /* training only */
  *out = c;
  return ZZ_OK;
}

static const char *const zz_mixtral_moe_names[ZZ_MOE_N] = {
    [ZZ_MOE_ROUTER] = "model.layers.%d.block_sparse_moe.gate.weight",
    [ZZ_MOE_GATE] = "model.layers.%d.block_sparse_moe.experts.*.w1.weight",
    [ZZ_MOE_UP] = "model.layers.%d.block_sparse_moe.experts.*.w3.weight",
    [ZZ_MOE_DOWN] = "model.layers.%d.block_sparse_moe.experts.*.w2.weight",
};

/* LLaMA's layer list, each MLP layer's weights replaced by the norm and the MoE's. */
static zz_status zz_mixtral_build(zz_model *m) {
  ZZ_CHECK(zz_arch_llama.build(m));
  for (int i = 0; i < m->n_layers; i++) {
    zz_layer *f = &m->layers[i];
    if (f->kind != ZZ_LAYER_MLP || !zz_moe_layer_sparse(&m->cfg, f->index)) continue; /* Mixtral: every one */
    memset(f->weights, 0, sizeof f->weights);
    f->n_weights = ZZ_MX_N;
    zz_arch_spec(&f->weights[ZZ_MX_NORM], true, 1, m->cfg.hidden, 0, "model.layers.%d.post_attention_layernorm.weight",
                 f->index);
    f->weights[ZZ_MX_NORM].init = ZZ_INIT_NORM_GAIN;
    zz_moe_specs(&f->weights[ZZ_MX_MOE], &m->cfg, f->index, zz_mixtral_moe_names);
  }
  return ZZ_OK;
}

/* LLaMA's workspace, or the MoE MLP's: xn [n, h], the MoE's sum [n, h], then
 * zz_moe_workspace; whichever is larger. */
static size_t zz_mixtral_workspace(const zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
                                   bool general_attn) {
  size_t es = zz_dtype_nbytes(dev->compute_dtype, 1), n = (size_t)(b * sq);
  size_t moe = 2 * zz_align_up(n * (size_t)m->cfg.hidden * es, 256) + zz_moe_workspace(&m->cfg, es, b * sq);
  size_t llama = zz_arch_llama.workspace_bytes(m, dev, b, sq, t, general_attn);
  return moe > llama ? moe : llama;
}

static zz_status zz_mixtral_forward(zz_device *dev, const zz_model *m, const zz_layer *layer, const zz_tensor *w,
                                    const zz_step *st) {
  if (layer->kind != ZZ_LAYER_MLP || !zz_moe_layer_sparse(&m->cfg, layer->index))
    return zz_arch_llama.forward(dev, m, layer, w, st);
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, 1);
  int64_t n = st->b * st->sq, h = c->hidden;
  size_t part = zz_align_up((size_t)(n * h) * es, 256);
  char *xn = st->work, *sum = xn + part, *moe_work = sum + part;
  /* r rows of the residual x (zz_arch_rows), gathered after xn's */
  int64_t r;
  void *x;
  ZZ_CHECK(zz_arch_rows(dev, st, st->hidden, h, xn + (size_t)(st->b * h) * es, &r, &x));
  ZZ_CHECK(zz_device_rmsnorm(dev, x, r, h, &w[ZZ_MX_NORM], c->ln_eps, xn));
  ZZ_CHECK(zz_moe_forward(dev, c, &w[ZZ_MX_MOE], xn, r, sum, moe_work, st));
  ZZ_CHECK(zz_device_add(dev, x, sum, r * h, x));
  return zz_arch_rows_done(dev, st, x, h);
}

static void zz_mixtral_positions(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out) {
  zz_arch_llama.positions(c, pad, from, n, out);
}

const zz_arch zz_arch_mixtral = {
    .model_type = "mixtral",
    .preset_name = zz_mixtral_preset_name,
    .preset = zz_mixtral_preset,
    .parse_config = zz_mixtral_parse_config,
    .build = zz_mixtral_build,
    .positions = zz_mixtral_positions,
    .workspace_bytes = zz_mixtral_workspace,
    .forward = zz_mixtral_forward,
};
