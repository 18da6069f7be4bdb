/*
 * memplan.c — the memory plan as a layout: one entry per buffer the engine will
 * bind (role, tier, purpose, dtype, shape, bytes, offset in its arena), and the
 * totals per tier and purpose. One function, two users: the engine allocates one
 * arena per tier and purpose of exactly these totals and binds pointers from the
 * entries; the planner uses the totals as its memory constraints. Every size comes
 * from sizes.c.
 *
 * Placement (FlexGen's rule): items are taken in order (weights by layer of the
 * slice, cache by (group, layer, batch), activations by (group, batch)); an item
 * goes to the GPU when the midpoint of its cumulative share of the total size is
 * below the GPU percentage, else to the CPU when below GPU + CPU, else to disk. So
 * 50/50 over two equal layers puts one on each tier, and a layer is never split,
 * but for an MoE layer's experts: those are split by count, every MoE layer
 * alike (zz_policy_expert_split), the rest of the layer placed as a layer.
 *
 * Purposes:
 *   home      — weights / cache / activations on their tier (WEIGHTS, CACHE, ACT),
 *               and each batch's index arrays (ACT);
 *   staging   — device slots the overlap needs (two weight slots; three cache and
 *               activation slots: batch k-1 storing, k computing, k+1 loading),
 *               host buffers for disk I/O and for CPU attention;
 *   workspace — the largest layer's scratch, logits.
 * Groups run one after another on a rank, so they share staging and workspace.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_policy.h"

static zz_tier zz_place(double mid_pct, double gpu, double cpu) {
  if (mid_pct < gpu) return ZZ_TIER_GPU;
  if (mid_pct < gpu + cpu) return ZZ_TIER_CPU;
  return ZZ_TIER_DISK;
}

/* ---------------------------------------------------------------- the builder */

/* No tier holds an exbibyte: a plan past it is refused before any sum can wrap
 * (each buffer's own size stays below 2^62 by the policy's and config's ranges). */
#define ZZ_PLAN_MAX_BYTES ((size_t)1 << 60)

typedef struct zz_builder {
  zz_memplan *p;
  zz_arena arena[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]; /* no memory: offsets only */
  int cap_buf;
} zz_builder;

static zz_status zz_add(zz_builder *b, zz_buf_role role, int i, int j, int k, zz_tier tier, zz_purpose purpose,
                        zz_dtype dt, int ndim, const int64_t *shape, size_t bytes, size_t align) {
  zz_memplan *p = b->p;
  if (p->n_buf == b->cap_buf) {
    int cap = b->cap_buf ? 2 * b->cap_buf : 256;
    zz_buffer *nb = realloc(p->buf, (size_t)cap * sizeof *nb);
    if (!nb) return zz_error(ZZ_ERR_NO_MEMORY, "memory plan: out of memory");
    p->buf = nb;
    b->cap_buf = cap;
  }
  if (tier == ZZ_TIER_DISK) align = ZZ_DISK_ALIGN;
  zz_buffer *x = &p->buf[p->n_buf];
  *x = (zz_buffer){.role = role,
                   .a = i,
                   .b = j,
                   .c = k,
                   .tier = tier,
                   .purpose = purpose,
                   .dtype = dt,
                   .ndim = ndim,
                   .bytes = zz_align_up(bytes, align),
                   .align = align};
  for (int d = 0; d < ndim; d++) x->shape[d] = shape[d];
  if (zz_arena_take(&b->arena[tier][purpose], x->bytes, align, NULL, &x->offset) != ZZ_OK) {
    char w[32];
    return zz_error(ZZ_ERR_INFEASIBLE,
                    "policy gbs=%d num_gb=%d with %lld + %lld tokens needs more than an exbibyte "
                    "of %s memory for %s: refused",
                    p->spec.policy.gpu_batch_size, p->spec.policy.num_gpu_batches, (long long)p->spec.shape.prompt_len,
                    (long long)p->spec.shape.gen_len, zz_tier_name(tier), zz_format_bytes(x->bytes, w, sizeof w));
  }
  p->n_buf++;
  return ZZ_OK;
}

/* A buffer with a flat shape of `bytes` (staging and scratch). */
static zz_status zz_add_raw(zz_builder *b, zz_buf_role role, int i, int j, int k, zz_tier tier, zz_purpose purpose,
                            size_t bytes, size_t align) {
  const int64_t shape[1] = {(int64_t)bytes};
  return zz_add(b, role, i, j, k, tier, purpose, ZZ_DTYPE_COUNT, 1, shape, bytes, align);
}

/* ---------------------------------------------------------------- the parts */

static int zz_slice_len(const zz_plan_spec *s) { return s->layer_end - s->layer_begin; }

zz_expert_split zz_policy_expert_split(const zz_policy *p, int64_t experts) {
  zz_expert_split x = {{0}};
  for (int64_t i = 0; i < experts; i++)
    x.n[zz_place(100.0 * ((double)i + 0.5) / (double)experts, p->w_gpu, p->w_cpu)]++;
  return x;
}

bool zz_memplan_layer_resident(const zz_memplan *p, int i) {
  const zz_expert_split *x = &p->expert_split[i];
  return p->weight_tier[i] == ZZ_TIER_GPU && x->n[ZZ_TIER_CPU] == 0 && x->n[ZZ_TIER_DISK] == 0;
}

bool zz_memplan_cache_on_device(const zz_memplan *p, const zz_model *m, int group) {
  size_t per = 0; /* the group's cache homes: its slice's cache layers x num_gb */
  for (int j = p->spec.layer_begin; j < p->spec.layer_end; j++) per += m->layers[j].has_cache;
  per *= (size_t)p->spec.policy.num_gpu_batches;
  for (size_t i = 0; i < per; i++)
    if (p->cache_tier[(size_t)group * per + i] != ZZ_TIER_GPU) return false;
  return true;
}

/* A layer's weights apart from its expert-stacked matrices (all of a dense layer's). */
static double zz_layer_plain_numel(const zz_layer *l) {
  double n = (double)l->weight_numel;
  for (int k = 0; k < l->n_weights; k++)
    if (l->weights[k].ndim && l->weights[k].experts) n -= (double)zz_weight_numel(&l->weights[k]);
  return n;
}

/* Weights: a layer's plain weights by FlexGen's rule over the slice, its experts
 * by count within the layer (zz_policy_expert_split), so that every MoE layer
 * loads the same share of what its block touches, as the LP's fractions say. */
static zz_status zz_plan_weights(zz_builder *b, const zz_model *m) {
  zz_memplan *p = b->p;
  const zz_plan_spec *s = &p->spec;
  int n = zz_slice_len(s);
  double total = 0, before = 0;
  for (int i = 0; i < n; i++) total += zz_layer_plain_numel(&m->layers[s->layer_begin + i]);
  size_t slot = 0, stage = 0, load = 0;
  zz_qfmt qbuf;
  const zz_qfmt *q = zz_policy_wfmt(&s->policy, &qbuf); /* compressed: matrices in Q4 on every tier */
  for (int i = 0; i < n; i++) {
    const zz_layer *l = &m->layers[s->layer_begin + i];
    double w = zz_layer_plain_numel(l);
    zz_tier t = total > 0 ? zz_place(100.0 * (before + w / 2) / total, s->policy.w_gpu, s->policy.w_cpu) : ZZ_TIER_GPU;
    before += w;
    p->weight_tier[i] = t;
    for (int k = 0; k < l->n_weights; k++) {
      const zz_weight_spec *ws = &l->weights[k];
      if (!ws->ndim) continue;
      /* what the checkpoint read gives (quantized in place when compressed) */
      size_t sb = zz_weight_bytes(ws, s->store_dtype);
      if (zz_align_up(sb, ZZ_DISK_ALIGN) > load) load = zz_align_up(sb, ZZ_DISK_ALIGN);
      if (!ws->experts) {
        zz_dtype hdt = zz_weight_dtype_b(ws, t == ZZ_TIER_GPU ? s->compute_dtype : s->store_dtype, q, s->bf16_weights);
        size_t hb = zz_weight_bytes_q(ws, hdt, q ? *q : ZZ_QFMT_DEFAULT);
        ZZ_CHECK(zz_add(b, ZZ_BUF_WEIGHT, i, k, 0, t, ZZ_PURPOSE_WEIGHTS, hdt, ws->ndim, ws->shape, hb, ZZ_ALIGN));
        if (t == ZZ_TIER_DISK && zz_align_up(hb, ZZ_DISK_ALIGN) > stage) stage = zz_align_up(hb, ZZ_DISK_ALIGN);
        continue;
      }
      /* the experts of each tier, one home each, in expert order */
      zz_expert_split x = zz_policy_expert_split(&s->policy, ws->experts);
      p->expert_split[i] = x;
      for (int xt = 0; xt < ZZ_TIER_COUNT; xt++) {
        if (!x.n[xt]) continue;
        zz_dtype hdt = zz_weight_dtype_b(ws, xt == ZZ_TIER_GPU ? s->compute_dtype : s->store_dtype, q, s->bf16_weights);
        size_t xb = zz_weight_bytes_q(ws, hdt, q ? *q : ZZ_QFMT_DEFAULT) / (size_t)ws->experts;
        const int64_t shape[2] = {ws->shape[0] / ws->experts * x.n[xt], ws->shape[1]};
        ZZ_CHECK(zz_add(b, ZZ_BUF_WEIGHT, i, k, 1 + xt, (zz_tier)xt, ZZ_PURPOSE_WEIGHTS, hdt, 2, shape,
                        xb * (size_t)x.n[xt], ZZ_ALIGN));
        if (xt == ZZ_TIER_GPU) continue;
        p->any_offload[ZZ_PURPOSE_WEIGHTS] = true;
        if (xt != ZZ_TIER_DISK) continue;
        p->any_disk[ZZ_PURPOSE_WEIGHTS] = true;
        /* one expert read from disk on the compute lane, its range widened to the disk's blocks, goes through
         * the load buffer (idle once the weights are loaded: zz_weights_load_expert) */
        if (zz_align_up(xb, ZZ_DISK_ALIGN) + ZZ_DISK_ALIGN > load)
          load = zz_align_up(xb, ZZ_DISK_ALIGN) + ZZ_DISK_ALIGN;
      }
    }
    if (t != ZZ_TIER_GPU) {
      p->any_offload[ZZ_PURPOSE_WEIGHTS] = true;
      if (t == ZZ_TIER_DISK) p->any_disk[ZZ_PURPOSE_WEIGHTS] = true;
    }
    if (!zz_memplan_layer_resident(p, i)) {
      size_t lb = zz_layer_weight_layout_b(l, s->compute_dtype, q, s->bf16_weights, ZZ_ALIGN, NULL);
      if (lb > slot) slot = lb;
    }
  }
  /* one tensor's host buffer while weights are read from the checkpoint */
  ZZ_CHECK(zz_add_raw(b, ZZ_BUF_LOAD, 0, 0, 0, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, load, ZZ_DISK_ALIGN));
  for (int i = 0; slot && i < 2; i++)
    ZZ_CHECK(zz_add_raw(b, ZZ_BUF_W_SLOT, i, 0, 0, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, slot, ZZ_ALIGN));
  if (stage) ZZ_CHECK(zz_add_raw(b, ZZ_BUF_W_STAGE, 0, 0, 0, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, stage, ZZ_DISK_ALIGN));
  return ZZ_OK;
}

static zz_status zz_plan_cache(zz_builder *b, const zz_model *m) {
  zz_memplan *p = b->p;
  const zz_plan_spec *s = &p->spec;
  int64_t gbs = s->policy.gpu_batch_size, t_max = s->shape.prompt_len + s->shape.gen_len;
  int nb = s->policy.num_gpu_batches, lc = 0;
  for (int j = s->layer_begin; j < s->layer_end; j++) lc += m->layers[j].has_cache;
  size_t items = (size_t)s->n_groups * (size_t)lc * (size_t)nb, i = 0;
  size_t kv_max = 0, region_max = 0;
  for (int g = 0; g < s->n_groups; g++) {
    int l = 0;
    for (int j = s->layer_begin; j < s->layer_end; j++) {
      if (!m->layers[j].has_cache) continue;
      zz_cache_spec c = zz_cache_spec_for(&m->layers[j], &s->policy, s->compute_dtype);
      size_t kv = zz_cache_bytes(&c, gbs, t_max), region = zz_cache_region_bytes(&c, t_max);
      if (kv > kv_max) kv_max = kv;
      if (region > region_max) region_max = region;
      const int64_t shape[3] = {gbs, t_max, c.kv_heads * c.head_dim};
      for (int k = 0; k < nb; k++, i++) {
        zz_tier t = zz_place(100.0 * ((double)i + 0.5) / (double)items, s->policy.c_gpu, s->policy.c_cpu);
        p->cache_tier[i] = t;
        /* on disk each sequence's rows start on a block so transfers bypass the page cache */
        size_t bytes = t == ZZ_TIER_DISK ? (size_t)gbs * region : kv;
        ZZ_CHECK(zz_add(b, ZZ_BUF_CACHE_K, g, l, k, t, ZZ_PURPOSE_CACHE, c.dtype, 3, shape, bytes, ZZ_ALIGN));
        ZZ_CHECK(zz_add(b, ZZ_BUF_CACHE_V, g, l, k, t, ZZ_PURPOSE_CACHE, c.dtype, 3, shape, bytes, ZZ_ALIGN));
        if (t != ZZ_TIER_GPU) p->any_offload[ZZ_PURPOSE_CACHE] = true;
        if (t == ZZ_TIER_DISK) p->any_disk[ZZ_PURPOSE_CACHE] = true;
      }
      l++;
    }
  }
  for (int i3 = 0; p->any_offload[ZZ_PURPOSE_CACHE] && i3 < 3; i3++)
    for (int kv = 0; kv < 2; kv++)
      ZZ_CHECK(zz_add_raw(b, ZZ_BUF_KV_SLOT, i3, kv, 0, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, kv_max, ZZ_ALIGN));
  for (int i3 = 0; p->any_disk[ZZ_PURPOSE_CACHE] && i3 < 3; i3++)
    for (int kv = 0; kv < 2; kv++)
      ZZ_CHECK(zz_add_raw(b, ZZ_BUF_KV_STAGE, i3, kv, 0, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, (size_t)gbs * region_max,
                          ZZ_DISK_ALIGN));
  /* CPU attention: q, k, v, out of one batch's decode step in f32 on the host, and
   * the kernel's scratch */
  if (s->policy.cpu_attention && p->any_offload[ZZ_PURPOSE_CACHE]) {
    const zz_config *c = &m->cfg;
    size_t q = (size_t)(gbs * c->n_heads * c->head_dim) * 4, kv = (size_t)(gbs * c->n_kv_heads * c->head_dim) * 4;
    const size_t bytes[5] = {q, kv, kv, q, zz_cpu_attention_scratch(gbs, c->n_heads, t_max) * 4};
    for (int a = 0; a < 5; a++)
      ZZ_CHECK(zz_add_raw(b, ZZ_BUF_CPU_ATTN, a, 0, 0, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, bytes[a], ZZ_ALIGN));
  }
  return ZZ_OK;
}

static zz_status zz_plan_act(zz_builder *b, const zz_model *m) {
  zz_memplan *p = b->p;
  const zz_plan_spec *s = &p->spec;
  int64_t gbs = s->policy.gpu_batch_size, sl = s->shape.prompt_len, h = m->cfg.hidden;
  int nb = s->policy.num_gpu_batches, items = s->n_groups * nb;
  size_t act = zz_hidden_bytes(h, s->compute_dtype, gbs, sl), idx = zz_index_layout(gbs, sl, NULL);
  const int64_t shape[3] = {gbs, sl, h};
  for (int g = 0; g < s->n_groups; g++)
    for (int k = 0; k < nb; k++) {
      int i = g * nb + k;
      zz_tier t = zz_place(100.0 * (i + 0.5) / items, s->policy.a_gpu, s->policy.a_cpu);
      p->act_tier[i] = t;
      ZZ_CHECK(zz_add(b, ZZ_BUF_ACT, g, 0, k, t, ZZ_PURPOSE_ACT, s->compute_dtype, 3, shape, act, ZZ_ALIGN));
      if (t != ZZ_TIER_GPU) p->any_offload[ZZ_PURPOSE_ACT] = true;
      if (t == ZZ_TIER_DISK) p->any_disk[ZZ_PURPOSE_ACT] = true;
      /* token ids, positions, padding and last-row indices, both sides */
      ZZ_CHECK(zz_add_raw(b, ZZ_BUF_INDEX, g, 0, k, ZZ_TIER_GPU, ZZ_PURPOSE_ACT, idx, ZZ_ALIGN));
      ZZ_CHECK(zz_add_raw(b, ZZ_BUF_INDEX, g, 1, k, ZZ_TIER_CPU, ZZ_PURPOSE_ACT, idx, ZZ_ALIGN));
    }
  for (int i = 0; p->any_offload[ZZ_PURPOSE_ACT] && i < 3; i++)
    ZZ_CHECK(zz_add_raw(b, ZZ_BUF_ACT_SLOT, i, 0, 0, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, act, ZZ_ALIGN));
  for (int i = 0; p->any_disk[ZZ_PURPOSE_ACT] && i < 3; i++)
    ZZ_CHECK(zz_add_raw(b, ZZ_BUF_ACT_STAGE, i, 0, 0, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, act, ZZ_DISK_ALIGN));
  return ZZ_OK;
}

static zz_status zz_plan_workspace(zz_builder *b, const zz_model *m) {
  const zz_plan_spec *s = &b->p->spec;
  int64_t gbs = s->policy.gpu_batch_size, vocab = m->cfg.vocab_size;
  ZZ_CHECK(zz_add_raw(b, ZZ_BUF_WORK, 0, 0, 0, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, s->workspace, ZZ_ALIGN));
  if (s->layer_end == m->n_layers) {
    const int64_t dshape[2] = {gbs, vocab}, hshape[2] = {gbs * s->policy.num_gpu_batches, vocab};
    ZZ_CHECK(zz_add(b, ZZ_BUF_DEV_LOGITS, 0, 0, 0, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, s->compute_dtype, 2, dshape,
                    zz_dtype_nbytes(s->compute_dtype, gbs * vocab), ZZ_ALIGN));
    ZZ_CHECK(zz_add(b, ZZ_BUF_LOGITS, 0, 0, 0, ZZ_TIER_CPU, ZZ_PURPOSE_WORKSPACE, ZZ_DTYPE_F32, 2, hshape,
                    zz_dtype_nbytes(ZZ_DTYPE_F32, hshape[0] * vocab), ZZ_ALIGN));
  }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- build */

zz_status zz_memplan_build_spec(const zz_model *m, const zz_plan_spec *spec, zz_memplan *out) {
  ZZ_CHECK(zz_policy_check(&spec->policy));
  zz_plan_spec s = *spec;
  if (s.layer_begin == 0 && s.layer_end == 0) s.layer_end = m->n_layers;
  if (s.n_groups < 1) s.n_groups = 1;
  if (s.layer_begin < 0 || s.layer_end > m->n_layers || s.layer_begin >= s.layer_end)
    return zz_error(ZZ_ERR_INVALID_ARG, "memory plan: layer slice [%d, %d) is not inside the model's %d layers",
                    s.layer_begin, s.layer_end, m->n_layers);
  if (s.shape.prompt_len < 1 || s.shape.gen_len < 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "memory plan: prompt length and generation length must be >= 1");
  int lc = 0;
  for (int j = s.layer_begin; j < s.layer_end; j++) lc += m->layers[j].has_cache;
  size_t nb = (size_t)s.policy.num_gpu_batches;
  zz_memplan p;
  memset(&p, 0, sizeof p);
  p.spec = s;
  p.weight_tier = calloc((size_t)zz_slice_len(&s), sizeof *p.weight_tier);
  p.expert_split = calloc((size_t)zz_slice_len(&s), sizeof *p.expert_split);
  p.cache_tier = calloc((size_t)s.n_groups * (size_t)lc * nb + 1, sizeof *p.cache_tier);
  p.act_tier = calloc((size_t)s.n_groups * nb, sizeof *p.act_tier);
  zz_builder b = {.p = &p};
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int q = 0; q < ZZ_PURPOSE_COUNT; q++)
      b.arena[t][q] = (zz_arena){.tier = (zz_tier)t, .purpose = (zz_purpose)q, .cap = ZZ_PLAN_MAX_BYTES};
  zz_status st = ZZ_OK;
  if (!p.weight_tier || !p.expert_split || !p.cache_tier || !p.act_tier)
    st = zz_error(ZZ_ERR_NO_MEMORY, "memory plan: out of memory");
  if (st == ZZ_OK) st = zz_plan_weights(&b, m);
  if (st == ZZ_OK) st = zz_plan_cache(&b, m);
  if (st == ZZ_OK) st = zz_plan_act(&b, m);
  if (st == ZZ_OK) st = zz_plan_workspace(&b, m);
  if (st != ZZ_OK) {
    zz_memplan_free(&p);
    return st;
  }
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int q = 0; q < ZZ_PURPOSE_COUNT; q++) p.bytes[t][q] = b.arena[t][q].used;
  *out = p;
  return ZZ_OK;
}

zz_status zz_memplan_build(const zz_model *m, const zz_policy *pol, const zz_shape *shape, zz_dtype cdt, zz_dtype sdt,
                           size_t workspace, zz_memplan *out) {
  zz_plan_spec s = {
      .policy = *pol, .shape = *shape, .n_groups = 1, .compute_dtype = cdt, .store_dtype = sdt, .workspace = workspace};
  return zz_memplan_build_spec(m, &s, out);
}

void zz_memplan_free(zz_memplan *p) {
  if (!p) return;
  free(p->buf);
  free(p->weight_tier);
  free(p->expert_split);
  p->expert_split = NULL;
  free(p->cache_tier);
  free(p->act_tier);
  p->buf = NULL;
  p->n_buf = 0;
  p->weight_tier = p->cache_tier = p->act_tier = NULL;
}

size_t zz_memplan_tier_total(const zz_memplan *p, zz_tier t) {
  size_t s = 0;
  for (int k = 0; k < ZZ_PURPOSE_COUNT; k++) s += p->bytes[t][k];
  return s;
}

zz_status zz_memplan_check(const zz_memplan *p, const size_t cap[ZZ_TIER_COUNT]) {
  for (int t = 0; t < ZZ_TIER_COUNT; t++) {
    size_t need = zz_memplan_tier_total(p, (zz_tier)t);
    if (need <= cap[t]) continue;
    char a[32], b[32], w[32], kv[32], ac[32], sg[32], ws[32], sh[32];
    const size_t *x = p->bytes[t];
    return zz_error(
        ZZ_ERR_INFEASIBLE,
        "policy does not fit the %s tier, short by %s: it needs %s (weights %s, cache %s, activations %s, "
        "staging %s, workspace %s) and the capacity is %s",
        zz_tier_name((zz_tier)t), zz_format_bytes(need - cap[t], sh, sizeof sh), zz_format_bytes(need, a, sizeof a),
        zz_format_bytes(x[ZZ_PURPOSE_WEIGHTS], w, sizeof w), zz_format_bytes(x[ZZ_PURPOSE_CACHE], kv, sizeof kv),
        zz_format_bytes(x[ZZ_PURPOSE_ACT], ac, sizeof ac), zz_format_bytes(x[ZZ_PURPOSE_STAGING], sg, sizeof sg),
        zz_format_bytes(x[ZZ_PURPOSE_WORKSPACE], ws, sizeof ws), zz_format_bytes(cap[t], b, sizeof b));
  }
  return ZZ_OK;
}

const char *zz_buffer_str(const zz_buffer *x, char *buf, size_t len) {
  static const char *const role[ZZ_BUF_ROLE_COUNT] = {[ZZ_BUF_WEIGHT] = "weight",
                                                      [ZZ_BUF_CACHE_K] = "cache.k",
                                                      [ZZ_BUF_CACHE_V] = "cache.v",
                                                      [ZZ_BUF_ACT] = "hidden",
                                                      [ZZ_BUF_INDEX] = "index",
                                                      [ZZ_BUF_W_SLOT] = "weight.slot",
                                                      [ZZ_BUF_W_STAGE] = "weight.stage",
                                                      [ZZ_BUF_LOAD] = "load",
                                                      [ZZ_BUF_KV_SLOT] = "cache.slot",
                                                      [ZZ_BUF_KV_STAGE] = "cache.stage",
                                                      [ZZ_BUF_ACT_SLOT] = "hidden.slot",
                                                      [ZZ_BUF_ACT_STAGE] = "hidden.stage",
                                                      [ZZ_BUF_CPU_ATTN] = "cpu_attn",
                                                      [ZZ_BUF_WORK] = "work",
                                                      [ZZ_BUF_DEV_LOGITS] = "logits.device",
                                                      [ZZ_BUF_LOGITS] = "logits"};
  char shape[96], bytes[32];
  snprintf(buf, len, "%s.%d.%d.%d %s %s %s %s %s @ %zu", role[x->role], x->a, x->b, x->c, zz_tier_name(x->tier),
           zz_purpose_name(x->purpose), x->dtype < ZZ_DTYPE_COUNT ? zz_dtype_name(x->dtype) : "bytes",
           zz_shape_str(x->ndim, x->shape, shape, sizeof shape), zz_format_bytes(x->bytes, bytes, sizeof bytes),
           x->offset);
  return buf;
}

zz_status zz_memplan_check_shared(const zz_memplan *p, size_t host_ram) {
  size_t dev = zz_memplan_tier_total(p, ZZ_TIER_GPU), cpu = zz_memplan_tier_total(p, ZZ_TIER_CPU);
  if (dev <= host_ram && cpu <= host_ram - dev) return ZZ_OK;
  char a[32], b[32], s[32], r[32], sh[32];
  size_t both = dev + cpu < dev ? SIZE_MAX : dev + cpu;
  return zz_error(ZZ_ERR_INFEASIBLE,
                  "policy does not fit this machine's RAM, short by %s: the cpu device's arena (gpu tier, %s) and the "
                  "cpu tier (%s) are both host memory, together %s, and the machine has %s; move weights or cache to "
                  "disk",
                  zz_format_bytes(both - host_ram, sh, sizeof sh), zz_format_bytes(dev, a, sizeof a),
                  zz_format_bytes(cpu, b, sizeof b), zz_format_bytes(both, s, sizeof s),
                  zz_format_bytes(host_ram, r, sizeof r));
}
