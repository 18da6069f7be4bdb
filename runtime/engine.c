/*
 * engine.c — generation for one block of prompts on one device, in the zig-zag
 * order: for each token, for each layer, for each GPU batch. A layer's weights
 * are used by every GPU batch of the block before the next layer runs, which is
 * what lets the offloading schedule load each layer once per block.
 *
 * Memory: everything the block needs is sized before it starts and taken from
 * one arena per (tier, purpose); nothing is allocated inside the token loop.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

typedef struct zz_batch_state {
  void *hidden;     /* device [gbs, s, hidden] */
  void **k, **v;    /* per transformer layer: device [gbs, t_max, hidden] */
  int32_t *d_ids, *d_pos, *d_pad, *d_last; /* device [gbs*s], [gbs*s], [gbs], [gbs] */
  int32_t *ids, *pos, *pad, *last;         /* host twins */
} zz_batch_state;

struct zz_engine {
  zz_device *dev;
  const zz_model *m;
  zz_policy pol;
  zz_shape shape;
  zz_dtype store_dt;      /* weights on host/disk tiers */
  int64_t t_max;          /* prompt_len + gen_len */
  void **w;               /* [n_layers * ZZ_MAX_LAYER_WEIGHTS] device copies */
  zz_batch_state *batches; /* [num_gb] */
  void *work;             /* device workspace */
  void *d_logits;         /* device [gbs, vocab] */
  float *logits;          /* host [gbs, vocab] */
  void *sample_scratch;
  zz_arena arenas[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  void *arena_mem[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
};

/* ---------------------------------------------------------------- memory plan */

typedef struct zz_plan_bytes {
  size_t b[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
} zz_plan_bytes;

static size_t zz_align(size_t x) { return (x + 255) & ~(size_t)255; }

/* Bytes of every arena for this model, policy and shape; each term is a sum of
 * aligned pieces, exactly as the engine takes them. */
static void zz_engine_plan(const zz_device *dev, const zz_model *m, const zz_policy *pol,
                           const zz_shape *shape, zz_plan_bytes *out) {
  memset(out, 0, sizeof *out);
  const zz_config *c = &m->cfg;
  size_t es = zz_dtype_nbytes(dev->ops->compute_dtype, 1);
  int64_t gbs = pol->gpu_batch_size, s = shape->prompt_len, t_max = s + shape->gen_len;
  size_t *gpu = out->b[ZZ_TIER_GPU];
  int64_t max_w = 0;
  for (int i = 0; i < m->n_layers; i++)
    for (int k = 0; k < m->layers[i].n_weights; k++) {
      const zz_weight_spec *w = &m->layers[i].weights[k];
      if (!w->ndim) continue;
      int64_t n = w->shape[0] * (w->ndim > 1 ? w->shape[1] : 1);
      gpu[ZZ_PURPOSE_WEIGHTS] += zz_align((size_t)n * es);
      if (n > max_w) max_w = n;
    }
  for (int k = 0; k < pol->num_gpu_batches; k++) {
    gpu[ZZ_PURPOSE_ACT] += zz_align((size_t)(gbs * s * c->hidden) * es);
    gpu[ZZ_PURPOSE_ACT] += 2 * zz_align((size_t)(gbs * s) * 4) + 2 * zz_align((size_t)gbs * 4);
    gpu[ZZ_PURPOSE_CACHE] += (size_t)(2 * c->n_layers) * zz_align((size_t)(gbs * t_max * c->hidden) * es);
  }
  size_t wp = m->arch->workspace_bytes(m, dev, gbs, s, s);
  size_t wd = m->arch->workspace_bytes(m, dev, gbs, 1, t_max);
  gpu[ZZ_PURPOSE_WORKSPACE] = zz_align(wp > wd ? wp : wd) + zz_align((size_t)(gbs * c->vocab_size) * es);
  size_t *cpu = out->b[ZZ_TIER_CPU];
  cpu[ZZ_PURPOSE_STAGING] = zz_align(zz_dtype_nbytes(ZZ_DTYPE_F32, max_w));
  cpu[ZZ_PURPOSE_WORKSPACE] = zz_align((size_t)(gbs * c->vocab_size) * 4) +
                              zz_align(zz_sample_scratch_bytes(c->vocab_size));
  for (int k = 0; k < pol->num_gpu_batches; k++)
    cpu[ZZ_PURPOSE_ACT] += 2 * zz_align((size_t)(gbs * s) * 4) + 2 * zz_align((size_t)gbs * 4);
}

static zz_status zz_engine_take(zz_engine *e, zz_tier t, zz_purpose p, size_t bytes, void **out) {
  return zz_arena_take(&e->arenas[t][p], bytes, out, NULL);
}

/* ---------------------------------------------------------------- create */

static zz_status zz_engine_load_weights(zz_engine *e, const zz_checkpoint *ck) {
  const zz_model *m = e->m;
  void *host = NULL;
  size_t es = zz_dtype_nbytes(e->dev->ops->compute_dtype, 1);
  zz_arena *stage = &e->arenas[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING];
  ZZ_CHECK(zz_arena_take(stage, stage->cap, &host, NULL));
  for (int i = 0; i < m->n_layers; i++)
    for (int k = 0; k < m->layers[i].n_weights; k++) {
      const zz_weight_spec *w = &m->layers[i].weights[k];
      void **slot = &e->w[i * ZZ_MAX_LAYER_WEIGHTS + k];
      if (!w->ndim) continue;
      int64_t n = w->shape[0] * (w->ndim > 1 ? w->shape[1] : 1);
      if (ck)
        ZZ_CHECK(zz_checkpoint_read(ck, w->name, e->store_dt, host, n));
      else
        zz_weights_dummy(w, e->store_dt, host);
      ZZ_CHECK(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_WEIGHTS, (size_t)n * es, slot));
      ZZ_CHECK(e->dev->ops->upload(e->dev, ZZ_LANE_LOAD_WEIGHT, *slot, host, e->store_dt, n));
      ZZ_CHECK(e->dev->ops->sync(e->dev, ZZ_LANE_LOAD_WEIGHT));
    }
  zz_arena_reset(stage);
  return ZZ_OK;
}

zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                           const zz_policy *pol, const zz_shape *shape, zz_engine **out) {
  ZZ_CHECK(zz_policy_check(pol));
  const zz_config *c = &m->cfg;
  if (shape->prompt_len < 1 || shape->gen_len < 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "prompt length and generation length must be >= 1");
  if (shape->prompt_len + shape->gen_len > c->max_pos)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "prompt length %lld + generation length %lld exceed the model's %lld positions",
                    (long long)shape->prompt_len, (long long)shape->gen_len, (long long)c->max_pos);
  if (pol->w_gpu < 100 || pol->c_gpu < 100 || pol->a_gpu < 100 || pol->compress_weight ||
      pol->compress_cache || pol->attn_sparsity < 1)
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "this engine keeps weights, cache and activations on the device, uncompressed and dense");
  if (ck) ZZ_CHECK(zz_checkpoint_check_model(ck, m));

  zz_plan_bytes plan;
  zz_engine_plan(dev, m, pol, shape, &plan);
  size_t gpu_total = 0;
  for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) gpu_total += plan.b[ZZ_TIER_GPU][p];
  if (gpu_total > dev->capacity) {
    char a[32], b[32], w[32], kv[32];
    return zz_error(ZZ_ERR_INFEASIBLE,
                    "policy needs %s on the %s device (weights %s, cache %s, ...), capacity is %s",
                    zz_format_bytes(gpu_total, a, sizeof a), dev->ops->name,
                    zz_format_bytes(plan.b[ZZ_TIER_GPU][ZZ_PURPOSE_WEIGHTS], w, sizeof w),
                    zz_format_bytes(plan.b[ZZ_TIER_GPU][ZZ_PURPOSE_CACHE], kv, sizeof kv),
                    zz_format_bytes(dev->capacity, b, sizeof b));
  }

  zz_engine *e = calloc(1, sizeof *e);
  if (!e) return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
  e->dev = dev;
  e->m = m;
  e->pol = *pol;
  e->shape = *shape;
  e->t_max = shape->prompt_len + shape->gen_len;
  e->store_dt = c->dtype;
  zz_status st = ZZ_OK;
  int nb = pol->num_gpu_batches;
  e->w = calloc((size_t)m->n_layers * ZZ_MAX_LAYER_WEIGHTS, sizeof *e->w);
  e->batches = calloc((size_t)nb, sizeof *e->batches);
  if (!e->w || !e->batches) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
    goto fail;
  }
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
      zz_arena *a = &e->arenas[t][p];
      a->tier = (zz_tier)t;
      a->purpose = (zz_purpose)p;
      a->cap = plan.b[t][p];
      if (!a->cap) continue;
      if (t == ZZ_TIER_GPU)
        ZZ_CHECK_GOTO(dev->ops->alloc(dev, a->cap, &e->arena_mem[t][p]), st, fail);
      else if (t == ZZ_TIER_CPU)
        ZZ_CHECK_GOTO(dev->ops->host_alloc(dev, a->cap, &e->arena_mem[t][p]), st, fail);
      a->base = e->arena_mem[t][p];
    }

  int64_t gbs = pol->gpu_batch_size, s = shape->prompt_len;
  size_t es = zz_dtype_nbytes(dev->ops->compute_dtype, 1);
  for (int k = 0; k < nb; k++) {
    zz_batch_state *b = &e->batches[k];
    b->k = calloc((size_t)c->n_layers, sizeof *b->k);
    b->v = calloc((size_t)c->n_layers, sizeof *b->v);
    if (!b->k || !b->v) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
      goto fail;
    }
    ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_ACT, (size_t)(gbs * s * c->hidden) * es, &b->hidden), st, fail);
    void **dev_idx[4] = {(void **)&b->d_ids, (void **)&b->d_pos, (void **)&b->d_pad, (void **)&b->d_last};
    void **host_idx[4] = {(void **)&b->ids, (void **)&b->pos, (void **)&b->pad, (void **)&b->last};
    for (int q = 0; q < 4; q++) {
      size_t bytes = (size_t)(q < 2 ? gbs * s : gbs) * 4;
      ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_ACT, bytes, dev_idx[q]), st, fail);
      ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_ACT, bytes, host_idx[q]), st, fail);
    }
    for (int64_t l = 0; l < c->n_layers; l++) {
      size_t bytes = (size_t)(gbs * e->t_max * c->hidden) * es;
      ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_CACHE, bytes, &b->k[l]), st, fail);
      ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_CACHE, bytes, &b->v[l]), st, fail);
    }
  }
  zz_arena *ws = &e->arenas[ZZ_TIER_GPU][ZZ_PURPOSE_WORKSPACE];
  size_t logits_bytes = zz_align((size_t)(gbs * c->vocab_size) * es);
  ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, logits_bytes, &e->d_logits), st, fail);
  ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, ws->cap - ws->used, &e->work), st, fail);
  ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_WORKSPACE, (size_t)(gbs * c->vocab_size) * 4, (void **)&e->logits), st, fail);
  ZZ_CHECK_GOTO(zz_engine_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_WORKSPACE, zz_sample_scratch_bytes(c->vocab_size), &e->sample_scratch), st, fail);
  ZZ_CHECK_GOTO(zz_engine_load_weights(e, ck), st, fail);
  *out = e;
  return ZZ_OK;
fail:
  zz_engine_destroy(e);
  return st;
}

void zz_engine_destroy(zz_engine *e) {
  if (!e) return;
  if (e->batches)
    for (int k = 0; k < e->pol.num_gpu_batches; k++) {
      free(e->batches[k].k);
      free(e->batches[k].v);
    }
  free(e->batches);
  free(e->w);
  for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
    if (e->arena_mem[ZZ_TIER_GPU][p]) e->dev->ops->free(e->dev, e->arena_mem[ZZ_TIER_GPU][p]);
    if (e->arena_mem[ZZ_TIER_CPU][p]) e->dev->ops->host_free(e->dev, e->arena_mem[ZZ_TIER_CPU][p]);
  }
  free(e);
}

void zz_engine_peaks(const zz_engine *e, size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]) {
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) peak[t][p] = e->arenas[t][p].peak;
}

/* ---------------------------------------------------------------- generate */

/* Host index arrays of batch b for a step: prefill (sq = s) lays out the left
 * padded prompts; decode (sq = 1) feeds each sequence's last token. Positions are
 * Hugging Face's: the number of real tokens before this one, plus OPT's offset 2. */
static void zz_fill_prefill(const zz_engine *e, zz_batch_state *b, const zz_request *req,
                            int64_t first, int64_t count, int64_t s) {
  const int32_t pad_id = e->m->cfg.pad;
  for (int64_t i = 0; i < count; i++) {
    int64_t len = req->lens[first + i], pad = s - len;
    b->pad[i] = (int32_t)pad;
    b->last[i] = (int32_t)(i * s + s - 1);
    for (int64_t r = 0; r < s; r++) {
      b->ids[i * s + r] = r < pad ? pad_id : req->ids[first + i][r - pad];
      b->pos[i * s + r] = r < pad ? 1 : (int32_t)(r - pad + 2);
    }
  }
}

zz_status zz_engine_generate(zz_engine *e, const zz_request *req, zz_result *res) {
  const zz_model *m = e->m;
  const zz_config *c = &m->cfg;
  zz_device *dev = e->dev;
  const zz_device_ops *op = dev->ops;
  int64_t gbs = e->pol.gpu_batch_size, nb = e->pol.num_gpu_batches;
  if (req->n < 1 || req->n > gbs * nb)
    return zz_error(ZZ_ERR_INVALID_ARG, "block of %lld prompts; this engine takes 1 to %lld",
                    (long long)req->n, (long long)(gbs * nb));
  if (req->max_new_tokens < 1 || req->max_new_tokens > e->shape.gen_len)
    return zz_error(ZZ_ERR_INVALID_ARG, "max new tokens %d outside 1..%lld", req->max_new_tokens,
                    (long long)e->shape.gen_len);
  int64_t s = 0;
  for (int64_t i = 0; i < req->n; i++) {
    if (req->lens[i] < 1 || req->lens[i] > e->shape.prompt_len)
      return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld has %lld tokens; this engine takes 1 to %lld",
                      (long long)i, (long long)req->lens[i], (long long)e->shape.prompt_len);
    for (int64_t r = 0; r < req->lens[i]; r++)
      if (req->ids[i][r] < 0 || req->ids[i][r] >= c->vocab_size)
        return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld: token id %d at %lld is outside the vocabulary (%lld)",
                        (long long)i, req->ids[i][r], (long long)r, (long long)c->vocab_size);
    if (req->lens[i] > s) s = req->lens[i];
  }

  int64_t n = req->n;
  zz_result r = {0};
  r.tokens = calloc((size_t)n, sizeof *r.tokens);
  r.n_tokens = calloc((size_t)n, sizeof *r.n_tokens);
  bool *done = calloc((size_t)n, sizeof *done);
  zz_rng *rng = calloc((size_t)n, sizeof *rng);
  zz_status st = ZZ_OK;
  if (!r.tokens || !r.n_tokens || !done || !rng) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
    goto out;
  }
  for (int64_t i = 0; i < n; i++) {
    r.tokens[i] = malloc((size_t)req->max_new_tokens * sizeof **r.tokens);
    if (!r.tokens[i]) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
      goto out;
    }
    zz_rng_seed(&rng[i], req->sampling.seed, req->streams ? req->streams[i] : (uint64_t)i);
  }

  double t0 = zz_now(), t_prefill = t0;
  int64_t n_batches = (n + gbs - 1) / gbs, live = n;
  for (int step = 0; step < req->max_new_tokens && live > 0; step++) {
    int64_t sq = step == 0 ? s : 1, pos = step == 0 ? 0 : s + step - 1;
    /* inputs of every batch for this step */
    for (int64_t k = 0; k < n_batches; k++) {
      zz_batch_state *b = &e->batches[k];
      int64_t first = k * gbs, cnt = n - first < gbs ? n - first : gbs;
      if (step == 0) {
        zz_fill_prefill(e, b, req, first, cnt, s);
      } else {
        for (int64_t i = 0; i < cnt; i++) {
          int64_t q = first + i;
          b->ids[i] = done[q] ? c->pad : r.tokens[q][r.n_tokens[q] - 1];
          b->pos[i] = (int32_t)(pos - b->pad[i] + 2);
          b->last[i] = (int32_t)i;
        }
      }
      ZZ_CHECK_GOTO(op->write(dev, ZZ_LANE_COMPUTE, b->d_ids, b->ids, (size_t)(cnt * sq) * 4), st, out);
      ZZ_CHECK_GOTO(op->write(dev, ZZ_LANE_COMPUTE, b->d_pos, b->pos, (size_t)(cnt * sq) * 4), st, out);
      ZZ_CHECK_GOTO(op->write(dev, ZZ_LANE_COMPUTE, b->d_pad, b->pad, (size_t)cnt * 4), st, out);
      ZZ_CHECK_GOTO(op->write(dev, ZZ_LANE_COMPUTE, b->d_last, b->last, (size_t)cnt * 4), st, out);
    }
    /* the zig-zag: each layer serves every batch of the block before the next */
    for (int j = 0; j < m->n_layers; j++) {
      const zz_layer *layer = &m->layers[j];
      for (int64_t k = 0; k < n_batches; k++) {
        zz_batch_state *b = &e->batches[k];
        int64_t first = k * gbs, cnt = n - first < gbs ? n - first : gbs;
        zz_step stp = {
            .b = cnt, .sq = sq, .pos = pos,
            .ids = b->d_ids, .positions = b->d_pos, .pad = b->d_pad, .last = b->d_last,
            .hidden = b->hidden,
            .k = layer->has_cache ? b->k[layer->index] : NULL,
            .v = layer->has_cache ? b->v[layer->index] : NULL,
            .kv_stride = e->t_max * c->hidden,
            .logits = e->d_logits,
            .work = e->work,
        };
        ZZ_CHECK_GOTO(m->arch->forward(dev, m, layer, &e->w[j * ZZ_MAX_LAYER_WEIGHTS], &stp), st, out);
        if (layer->kind != ZZ_LAYER_OUTPUT_EMBED) continue;
        ZZ_CHECK_GOTO(op->download(dev, ZZ_LANE_COMPUTE, e->logits, ZZ_DTYPE_F32, e->d_logits,
                                   cnt * c->vocab_size), st, out);
        ZZ_CHECK_GOTO(op->sync(dev, ZZ_LANE_COMPUTE), st, out);
        for (int64_t i = 0; i < cnt; i++) {
          int64_t q = first + i;
          if (done[q]) continue;
          const float *lg = e->logits + i * c->vocab_size;
          if (req->on_logits) req->on_logits(req->ctx, q, step, lg, c->vocab_size);
          int32_t tok = zz_sample(lg, c->vocab_size, &req->sampling, &rng[q], e->sample_scratch);
          r.tokens[q][r.n_tokens[q]++] = tok;
          if (tok == c->eos && !req->ignore_eos) {
            done[q] = true;
            live--;
          }
        }
      }
    }
    if (step == 0) t_prefill = zz_now();
  }
  r.prefill_s = t_prefill - t0;
  r.decode_s = zz_now() - t_prefill;
out:
  free(done);
  free(rng);
  if (st != ZZ_OK) {
    zz_result_free(&r, n);
    return st;
  }
  *res = r;
  return ZZ_OK;
}

void zz_result_free(zz_result *res, int64_t n) {
  if (!res) return;
  if (res->tokens)
    for (int64_t i = 0; i < n; i++) free(res->tokens[i]);
  free(res->tokens);
  free(res->n_tokens);
  res->tokens = NULL;
  res->n_tokens = NULL;
}
