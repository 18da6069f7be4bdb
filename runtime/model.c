/*
 * model.c — the layer list of a model, built by its architecture's table. The
 * engine, the planner and the pipeline see only layers, weight specs and sizes.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_model.h"
#include "arch_impl.h"

/* The registry: one line per architecture. */
static const zz_arch *const zz_archs[] = {&zz_arch_opt,   &zz_arch_llama, &zz_arch_qwen2,   &zz_arch_mistral,
                                          &zz_arch_qwen3, &zz_arch_phi3,  &zz_arch_mixtral, NULL};

const zz_arch *const *zz_arch_all(void) { return zz_archs; }

zz_status zz_arch_attend(zz_device *dev, const zz_config *c, const zz_step *st, const void *q, const void *k,
                         const void *v, void *att, void *scratch) {
  if (st->attend) return st->attend(st->attend_ctx, q, k, v, att);
  ZZ_CHECK(zz_device_kv_append(dev, k, st->b, st->sq, c->n_kv_heads, c->head_dim, st->k, &st->kv, st->pos));
  ZZ_CHECK(zz_device_kv_append(dev, v, st->b, st->sq, c->n_kv_heads, c->head_dim, st->v, &st->kv, st->pos));
  zz_attn_args a = {.q = q,
                    .k = st->k,
                    .v = st->v,
                    .kv = st->kv,
                    .b = st->b,
                    .sq = st->sq,
                    .t = st->pos + st->sq,
                    .q_start = st->pos,
                    .heads = c->n_heads,
                    .kv_heads = c->n_kv_heads,
                    .hd = c->head_dim,
                    .pad = st->pad,
                    .keep = st->keep,
                    .window = st->window,
                    .out = att,
                    .scratch = scratch};
  return zz_device_attention(dev, &a);
}

/* A slice that ends before the output embedding hands the rows it did not
 * compute on stale: the next rank's output embedding reads only the last ones. */
bool zz_layer_wants_all_rows(const zz_model *m, const zz_layer *layer, int64_t sq, bool all_rows) {
  bool last_block = (layer->kind == ZZ_LAYER_ATTENTION || layer->kind == ZZ_LAYER_MLP) &&
                    layer->index == m->cfg.n_layers - 1;
  return all_rows || sq <= 1 || !last_block;
}

zz_status zz_arch_rows(zz_device *dev, const zz_step *st, void *x, int64_t dim, void *spare, int64_t *rows, void **at) {
  *rows = st->last_rows ? st->b : st->b * st->sq;
  *at = st->last_rows ? spare : x;
  return st->last_rows ? zz_device_gather_rows(dev, x, st->b * st->sq, dim, st->last, st->b, spare) : ZZ_OK;
}

/* b row copies on the compute lane: no device op scatters rows, and b rows of a
 * prompt step are nothing beside its linears */
zz_status zz_arch_rows_done(zz_device *dev, const zz_step *st, const void *res, int64_t dim) {
  if (!st->last_rows) return ZZ_OK;
  size_t row = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, dim);
  for (int64_t i = 0; i < st->b; i++)
    ZZ_CHECK(zz_device_copy(dev, ZZ_LANE_COMPUTE, (char *)st->hidden + (size_t)zz_step_last_row(st->sq, i) * row,
                            (const char *)res + (size_t)i * row, row));
  return ZZ_OK;
}

void zz_arch_spec(zz_weight_spec *w, bool present, int ndim, int64_t d0, int64_t d1, const char *fmt, int index) {
  memset(w, 0, sizeof *w);
  if (!present) return;
  snprintf(w->name, sizeof w->name, fmt, index);
  w->ndim = ndim;
  w->init = ndim == 2 ? ZZ_INIT_MATRIX : ZZ_INIT_BIAS;
  w->shape[0] = d0;
  w->shape[1] = d1;
}

zz_status zz_model_init(const zz_config *cfg, zz_model *out) {
  const zz_arch *arch = NULL;
  for (const zz_arch *const *a = zz_archs; *a; a++)
    if (strcmp((*a)->model_type, cfg->model_type) == 0) arch = *a;
  if (!arch) return zz_error(ZZ_ERR_UNSUPPORTED, "model type \"%s\" has no architecture", cfg->model_type);
  zz_model m = {.cfg = *cfg, .arch = arch};
  ZZ_CHECK(arch->build(&m));
  for (int i = 0; i < m.n_layers; i++) {
    zz_layer *l = &m.layers[i];
    l->weight_numel = 0;
    for (int k = 0; k < l->n_weights; k++) l->weight_numel += zz_weight_numel(&l->weights[k]);
  }
  *out = m;
  return ZZ_OK;
}

void zz_model_free(zz_model *m) {
  if (!m) return;
  free(m->layers);
  m->layers = NULL;
  m->n_layers = 0;
}

int64_t zz_model_numel(const zz_model *m) {
  int64_t n = 0;
  for (int i = 0; i < m->n_layers; i++) n += m->layers[i].weight_numel;
  return n;
}
