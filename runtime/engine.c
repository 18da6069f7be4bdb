/*
 * engine.c — building an engine: the memory plan's layout → one arena per tier
 * and purpose → every buffer bound by the layout's entries → the slice's weights
 * loaded to their homes. Also the groups (begin_block fills a block's padding and
 * index arrays) and the getters. The step itself is schedule.c; the token loop
 * and sampling are generate.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_impl.h"

/* ---------------------------------------------------------------- plan */

static zz_status zz_engine_spec(const zz_device_desc *dev, const zz_model *m, const zz_engine_opts *o,
                                zz_plan_spec *out) {
  const zz_config *c = &m->cfg;
  ZZ_CHECK(zz_policy_check(&o->policy));
  /* lengths below 1 are the memory plan's to refuse */
  if (o->shape.prompt_len > c->max_pos || o->shape.gen_len > c->max_pos - o->shape.prompt_len)
    return zz_error(ZZ_ERR_INVALID_ARG, "prompt length %lld + generation length %lld exceed the model's %lld positions",
                    (long long)o->shape.prompt_len, (long long)o->shape.gen_len, (long long)c->max_pos);
  /* compression and sparsity need the device's kernels for them */
  zz_dtype cdt = dev->compute_dtype, kdt = o->policy.compress_cache ? ZZ_DTYPE_Q4 : cdt;
  if (o->policy.compress_weight && !(zz_device_desc_supports(dev, ZZ_OP_LINEAR, ZZ_DTYPE_Q4) &&
                                     zz_device_desc_supports(dev, ZZ_OP_EMBED_ROWS, ZZ_DTYPE_Q4) &&
                                     zz_device_desc_supports(dev, ZZ_OP_ADD_ROWS, ZZ_DTYPE_Q4)))
    return zz_error(ZZ_ERR_UNSUPPORTED, "policy: --compress-weight: the %s device has no kernels for 4-bit weights",
                    dev->name);
  if (o->policy.compress_weight && dev->bf16_weights)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--cpu-dtype bf16 with --compress-weight: weights are either 4-bit or bf16; give one of them");
  /* refused rather than ignored: a user asking for int8 activations expects them */
  if (dev->cpu_act == ZZ_CPU_ACT_INT8 && !o->policy.compress_weight)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--cpu-act int8: int8 activations apply only to 4- or 8-bit group weights (--compress-weight), and "
                    "this run's weights are not compressed");
  if (o->policy.compress_cache && !(zz_device_desc_supports(dev, ZZ_OP_KV_APPEND, ZZ_DTYPE_Q4) &&
                                    zz_device_desc_supports(dev, ZZ_OP_ATTENTION, ZZ_DTYPE_Q4)))
    return zz_error(ZZ_ERR_UNSUPPORTED, "policy: --compress-cache: the %s device has no kernels for a 4-bit cache",
                    dev->name);
  if (o->policy.attn_sparsity < 1 && !zz_device_desc_supports(dev, ZZ_OP_ATTENTION_SPARSE, kdt))
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "policy: --attn-sparsity %g: the %s device has no top-k attention over a %s cache",
                    o->policy.attn_sparsity, dev->name, zz_dtype_name(kdt));
  int64_t gbs = o->policy.gpu_batch_size, s = o->shape.prompt_len, t_max = s + o->shape.gen_len;
  bool general = zz_attention_general(kdt, o->policy.attn_sparsity);
  size_t wp = m->arch->workspace_bytes(m, dev, gbs, s, s, general),
         wd = m->arch->workspace_bytes(m, dev, gbs, 1, t_max, general);
  *out = (zz_plan_spec){.policy = o->policy,
                        .shape = o->shape,
                        .layer_begin = o->layer_begin,
                        .layer_end = o->layer_end,
                        .n_groups = o->n_groups < 1 ? 1 : o->n_groups,
                        .compute_dtype = dev->compute_dtype,
                        .store_dtype = c->dtype,
                        .bf16_weights = dev->bf16_weights,
                        .workspace = wp > wd ? wp : wd};
  if (out->layer_begin == 0 && out->layer_end == 0) out->layer_end = m->n_layers;
  return ZZ_OK;
}

static const char *zz_offload_dir(const zz_engine_opts *o) {
  const char *dir = o->tiers.offload_dir ? o->tiers.offload_dir : getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

zz_status zz_engine_plan_check(const zz_device_desc *dev, const zz_model *m, const zz_engine_opts *o, zz_memplan *out) {
  zz_plan_spec spec;
  ZZ_CHECK(zz_engine_spec(dev, m, o, &spec));
  zz_memplan plan;
  ZZ_CHECK(zz_memplan_build_spec(m, &spec, &plan));
  const char *dir = zz_offload_dir(o);
  size_t cap[ZZ_TIER_COUNT] = {zz_device_desc_usable(dev), zz_host_memory_bytes(), 0};
  if (o->tiers.cap[ZZ_TIER_GPU] && o->tiers.cap[ZZ_TIER_GPU] < cap[ZZ_TIER_GPU])
    cap[ZZ_TIER_GPU] = o->tiers.cap[ZZ_TIER_GPU];
  if (o->tiers.cap[ZZ_TIER_CPU]) cap[ZZ_TIER_CPU] = o->tiers.cap[ZZ_TIER_CPU];
  size_t disk_need = zz_memplan_tier_total(&plan, ZZ_TIER_DISK);
  zz_status st = ZZ_OK;
  if (disk_need && access(dir, W_OK | X_OK) != 0)
    st = zz_error(ZZ_ERR_IO, "--offload-dir %s: not a writable directory (the policy puts %zu bytes on disk)", dir,
                  disk_need);
  if (o->tiers.cap[ZZ_TIER_DISK]) cap[ZZ_TIER_DISK] = o->tiers.cap[ZZ_TIER_DISK];
  else if (disk_need)
    cap[ZZ_TIER_DISK] = zz_disk_free_bytes(dir);
  if (st == ZZ_OK) st = zz_memplan_check(&plan, cap);
  /* a device whose memory is host RAM shares it with the CPU tier: the RAM
   * there is (the description's, else this machine's), or --cpu-mem's when lower
   * (the planner's bound, search.c) */
  size_t ram = zz_shared_ram_bytes(dev->host_memory ? dev->host_memory : zz_host_memory_bytes(),
                                   o->tiers.cap[ZZ_TIER_CPU]);
  if (st == ZZ_OK && dev->memory_is_host) st = zz_memplan_check_shared(&plan, ram);
  if (st != ZZ_OK) {
    zz_memplan_free(&plan);
    return st;
  }
  *out = plan;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- bind */

/* Points the engine's field for buffer x at p (NULL on disk; off: file offset). */
static void zz_bind_one(zz_engine *e, const zz_buffer *x, char *p, size_t off) {
  zz_tensor *t = NULL;
  int nb = e->pol.num_gpu_batches;
  switch (x->role) {
    case ZZ_BUF_WEIGHT:
      t = x->c ? &e->w.xhome[(x->a * ZZ_MAXW + x->b) * ZZ_TIER_COUNT + x->c - 1] : &e->w.home[x->a * ZZ_MAXW + x->b];
      break;
    case ZZ_BUF_CACHE_K: t = &e->groups[x->a].k_home[x->b * nb + x->c]; break;
    case ZZ_BUF_CACHE_V: t = &e->groups[x->a].v_home[x->b * nb + x->c]; break;
    case ZZ_BUF_ACT: t = &e->groups[x->a].a_home[x->c]; break;
    case ZZ_BUF_INDEX: {
      zz_batch_idx *b = &e->groups[x->a].idx[x->c];
      size_t o[4];
      zz_index_layout(e->pol.gpu_batch_size, e->shape.prompt_len, o);
      int32_t **dst[2][4] = {{&b->d_ids, &b->d_pos, &b->d_pad, &b->d_last}, {&b->ids, &b->pos, &b->pad, &b->last}};
      for (int q = 0; q < 4; q++) *dst[x->b][q] = (int32_t *)(p + o[q]);
      return;
    }
    case ZZ_BUF_W_SLOT: e->w.slot[x->a] = p; return;
    case ZZ_BUF_W_STAGE: e->w.stage = p; return;
    case ZZ_BUF_LOAD: e->w.load = p; return;
    case ZZ_BUF_KV_SLOT: e->kv_slot[x->a][x->b] = p; return;
    case ZZ_BUF_KV_STAGE: e->kv_stage[x->a][x->b] = p; return;
    case ZZ_BUF_ACT_SLOT: e->a_slot[x->a] = p; return;
    case ZZ_BUF_ACT_STAGE: e->a_stage[x->a] = p; return;
    case ZZ_BUF_CPU_ATTN: e->ca[x->a] = (float *)p; return;
    case ZZ_BUF_WORK: e->work = p; return;
    case ZZ_BUF_DEV_LOGITS: e->d_logits = p; return;
    case ZZ_BUF_LOGITS: e->logits = (float *)p; return;
    case ZZ_BUF_ROLE_COUNT: break;
  }
  ZZ_ASSERT(t != NULL);
  /* a home: the typed tensor its users see */
  memset(t, 0, sizeof *t);
  if (x->role == ZZ_BUF_WEIGHT) {
    const zz_weight_spec *ws = &e->m->layers[e->l0 + x->a].weights[x->b];
    snprintf(t->name, sizeof t->name, "%s", ws->name);
  } else {
    zz_buffer_str(x, t->name, sizeof t->name);
  }
  t->dtype = x->dtype;
  if (x->dtype == ZZ_DTYPE_Q4) { /* weights and cache are Q4 only when the policy compresses them */
    zz_qfmt q;
    t->q = *(x->role == ZZ_BUF_WEIGHT ? zz_policy_wfmt(&e->pol, &q) : zz_policy_cfmt(&e->pol, &q));
  }
  t->ndim = x->ndim;
  memcpy(t->shape, x->shape, sizeof t->shape);
  t->tier = x->tier;
  t->data = p;
  t->offset = (int64_t)off;
  t->nbytes = x->bytes;
}

/* Allocates the arenas of the plan and binds every buffer, taking each from its
 * arena exactly as the plan laid it out. */
static zz_status zz_engine_bind(zz_engine *e) {
  const zz_memplan *plan = &e->plan;
  zz_device *dev = e->dev;
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
      zz_arena *a = &e->arenas[t][p];
      *a = (zz_arena){.tier = (zz_tier)t, .purpose = (zz_purpose)p, .cap = plan->bytes[t][p]};
      if (!a->cap || t == ZZ_TIER_DISK) continue;
      if (t == ZZ_TIER_GPU) ZZ_CHECK(zz_device_alloc(dev, a->cap, &e->arena_mem[t][p]));
      else
        ZZ_CHECK(zz_device_host_alloc(dev, a->cap, &e->arena_mem[t][p]));
      a->base = e->arena_mem[t][p];
    }
  for (int p = 1; p < ZZ_PURPOSE_COUNT; p++) e->disk_base[p] = e->disk_base[p - 1] + plan->bytes[ZZ_TIER_DISK][p - 1];
  for (int i = 0; i < plan->n_buf; i++) {
    const zz_buffer *x = &plan->buf[i];
    void *p = NULL;
    size_t off = 0;
    ZZ_CHECK(zz_arena_take(&e->arenas[x->tier][x->purpose], x->bytes, x->align, &p, &off));
    ZZ_ASSERT(off == x->offset);
    /* host buffers for disk transfers must sit on a block: host arenas are block aligned */
    ZZ_ASSERT(x->align != ZZ_DISK_ALIGN || x->tier == ZZ_TIER_DISK || (uintptr_t)p % ZZ_DISK_ALIGN == 0);
    e->bound[i] = p;
    zz_bind_one(e, x, p, x->tier == ZZ_TIER_DISK ? off + e->disk_base[x->purpose] : off);
  }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- create */

static zz_status zz_engine_alloc_parts(zz_engine *e) {
  const zz_memplan *p = &e->plan;
  int nl = e->l1 - e->l0, nb = e->pol.num_gpu_batches, lc = 0;
  e->cache_of = calloc((size_t)nl, sizeof *e->cache_of);
  e->w.home = calloc((size_t)nl * ZZ_MAXW, sizeof *e->w.home);
  e->w.dev = calloc((size_t)nl * ZZ_MAXW, sizeof *e->w.dev);
  e->w.xhome = calloc((size_t)nl * ZZ_MAXW * ZZ_TIER_COUNT, sizeof *e->w.xhome);
  e->groups = calloc((size_t)e->n_groups, sizeof *e->groups);
  e->bound = calloc((size_t)p->n_buf + 1, sizeof *e->bound);
  e->tickets = calloc((size_t)nl * (size_t)nb, sizeof *e->tickets);
  if (!e->cache_of || !e->w.home || !e->w.dev || !e->w.xhome || !e->groups || !e->bound || !e->tickets)
    return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
  for (int j = 0; j < nl; j++) e->cache_of[j] = e->m->layers[e->l0 + j].has_cache ? lc++ : -1;
  e->lc = lc;
  for (int g = 0; g < e->n_groups; g++) {
    zz_group *gr = &e->groups[g];
    gr->k_home = calloc((size_t)(lc * nb) + 1, sizeof *gr->k_home);
    gr->v_home = calloc((size_t)(lc * nb) + 1, sizeof *gr->v_home);
    gr->a_home = calloc((size_t)nb, sizeof *gr->a_home);
    gr->idx = calloc((size_t)nb, sizeof *gr->idx);
    gr->run_k = calloc((size_t)nb, sizeof *gr->run_k);
    gr->run_cnt = calloc((size_t)nb, sizeof *gr->run_cnt);
    if (!gr->k_home || !gr->v_home || !gr->a_home || !gr->idx || !gr->run_k || !gr->run_cnt)
      return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
    if (!zz_engine_can_refill(e, g)) continue;
    size_t bls = (size_t)e->pol.gpu_batch_size * (size_t)nb;
    gr->prompt = calloc(bls * (size_t)e->shape.prompt_len, sizeof *gr->prompt);
    gr->prompt_n = calloc(bls, sizeof *gr->prompt_n);
    if (!gr->prompt || !gr->prompt_n) return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
  }
  return ZZ_OK;
}

/* A run allocates what its capacities allow, so none may exceed the machine's
 * RAM (MemTotal, zz_host_memory_bytes): the cpu tier on any device, and the cpu
 * device's own arena, which is host memory too. Refused rather than warned: a
 * plan sized for memory that is not there swaps or is killed mid-run. The
 * planner's zz_engine_plan_check may describe another machine; this is for runs. */
static zz_status zz_engine_caps_check(const zz_device_desc *dev, const zz_engine_opts *o) {
  size_t ram = zz_host_memory_bytes();
  char a[32], b[32];
  if (o->tiers.cap[ZZ_TIER_CPU] > ram)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "--cpu-mem %s is more than this machine's %s of RAM (MemTotal, or its cgroup's memory limit less room for the program): give at most "
        "that, or 0 for all of it",
        zz_format_bytes(o->tiers.cap[ZZ_TIER_CPU], a, sizeof a), zz_format_bytes(ram, b, sizeof b));
  if (dev->memory_is_host && dev->capacity > ram)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "--gpu-mem %s: the %s device's memory is host RAM, and this machine has %s "
        "(MemTotal, or its cgroup's memory limit less room for the program): give at most that, or 0 for all of it",
        zz_format_bytes(dev->capacity, a, sizeof a), dev->name, zz_format_bytes(ram, b, sizeof b));
  return ZZ_OK;
}

zz_status zz_engine_create_opts(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_engine_opts *o,
                                zz_engine **out) {
  if (ck) ZZ_CHECK(zz_checkpoint_check_model(ck, m));
  ZZ_CHECK(zz_engine_caps_check(zz_device_describe(dev), o));
  zz_memplan plan;
  ZZ_CHECK(zz_engine_plan_check(zz_device_describe(dev), m, o, &plan));
  zz_engine *e = calloc(1, sizeof *e);
  if (!e) {
    zz_memplan_free(&plan);
    return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
  }
  e->dev = dev;
  e->m = m;
  e->pol = plan.spec.policy;
  e->shape = plan.spec.shape;
  e->l0 = plan.spec.layer_begin;
  e->l1 = plan.spec.layer_end;
  e->n_groups = plan.spec.n_groups;
  e->all_rows = o->all_rows;
  e->prefix_sharing = !o->no_prefix_sharing;
  e->t_max = e->shape.prompt_len + e->shape.gen_len;
  e->plan = plan;
  e->disk.fd = -1;
  e->w.slot_layer[0] = e->w.slot_layer[1] = -1;
  zz_status st;
  ZZ_CHECK_GOTO(zz_engine_alloc_parts(e), st, fail);
  for (int i = 0; i < 2 && m->cfg.n_experts; i++) /* a bit per expert and slot */
    if (!(e->w.expert_have[i] = calloc((size_t)(m->cfg.n_experts + 63) / 64, sizeof(uint64_t))))
      ZZ_CHECK_GOTO(zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory"), st, fail);
  ZZ_CHECK_GOTO(zz_engine_bind(e), st, fail);
  zz_weights_bind_device(e);
  size_t disk_need = zz_memplan_tier_total(&plan, ZZ_TIER_DISK);
  if (disk_need) {
    ZZ_CHECK_GOTO(zz_disk_open(zz_offload_dir(o), disk_need, &e->disk), st, fail);
    e->has_disk = true;
  }
  ZZ_CHECK_GOTO(zz_weights_load_all(e, ck), st, fail);
  ZZ_CHECK_GOTO(zz_lanes_create(ZZ_IO_N, e->pol.overlap, e, zz_io_run, &e->lanes), st, fail);
  *out = e;
  return ZZ_OK;
fail:
  zz_engine_destroy(e);
  return st;
}

zz_status zz_engine_create_tiers(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol,
                                 const zz_shape *shape, const zz_tiers *tiers, zz_engine **out) {
  zz_engine_opts o = {.policy = *pol, .shape = *shape, .n_groups = 1};
  if (tiers) o.tiers = *tiers;
  return zz_engine_create_opts(dev, m, ck, &o, out);
}

zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol,
                           const zz_shape *shape, zz_engine **out) {
  return zz_engine_create_tiers(dev, m, ck, pol, shape, NULL, out);
}

void zz_engine_destroy(zz_engine *e) {
  if (!e) return;
  zz_lanes_destroy(e->lanes);
  for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
    if (e->arena_mem[ZZ_TIER_GPU][p]) zz_device_free(e->dev, e->arena_mem[ZZ_TIER_GPU][p]);
    if (e->arena_mem[ZZ_TIER_CPU][p]) zz_device_host_free(e->dev, e->arena_mem[ZZ_TIER_CPU][p]);
  }
  if (e->has_disk) zz_disk_close(&e->disk);
  for (int g = 0; e->groups && g < e->n_groups; g++) {
    free(e->groups[g].k_home);
    free(e->groups[g].v_home);
    free(e->groups[g].a_home);
    free(e->groups[g].idx);
    free(e->groups[g].run_k);
    free(e->groups[g].run_cnt);
    free(e->groups[g].prompt);
    free(e->groups[g].prompt_n);
  }
  free(e->groups);
  free(e->w.home);
  free(e->w.dev);
  free(e->w.xhome);
  free(e->w.expert_have[0]);
  free(e->w.expert_have[1]);
  free(e->cache_of);
  free(e->bound);
  free(e->tickets);
  zz_memplan_free(&e->plan);
  free(e);
}

/* ---------------------------------------------------------------- groups */

int64_t zz_group_batch_count(const zz_engine *e, const zz_group *g, int64_t k) {
  int64_t gbs = e->pol.gpu_batch_size, first = k * gbs;
  return g->n - first < gbs ? g->n - first : gbs;
}

zz_cache_spec zz_engine_cache_spec(const zz_engine *e, int jl) {
  return zz_cache_spec_for(&e->m->layers[e->l0 + jl], &e->pol, zz_device_describe(e->dev)->compute_dtype);
}

void zz_engine_set_prefix_sharing(zz_engine *e, bool on) { e->prefix_sharing = on; }

zz_status zz_engine_begin_block(zz_engine *e, int group, int64_t n, const int64_t *lens) {
  int64_t gbs = e->pol.gpu_batch_size, bls = gbs * e->pol.num_gpu_batches, s = 0;
  if (group < 0 || group >= e->n_groups)
    return zz_error(ZZ_ERR_INVALID_ARG, "engine: group %d of %d", group, e->n_groups);
  if (n < 1 || n > bls)
    return zz_error(ZZ_ERR_INVALID_ARG, "block of %lld prompts; this engine takes 1 to %lld", (long long)n,
                    (long long)bls);
  for (int64_t i = 0; i < n; i++) {
    if (lens[i] < 1 || lens[i] > e->shape.prompt_len)
      return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld has %lld tokens; this engine takes 1 to %lld", (long long)i,
                      (long long)lens[i], (long long)e->shape.prompt_len);
    if (lens[i] > s) s = lens[i];
    /* longrope: a sequence whose prompt takes the short factors and whose decoding
     * reaches past original_max_position_embeddings. transformers (Phi3's
     * prepare_inputs_for_generation) drops the cache there and recomputes the whole
     * sequence with the long factors; a cache of keys already turned cannot do that */
    const zz_rope *rp = &e->m->cfg.rope;
    int64_t orig = (int64_t)rp->original_max_pos;
    if (rp->type == ZZ_ROPE_LONGROPE && lens[i] <= orig && lens[i] + e->shape.gen_len - 1 > orig)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "prompt %lld: %lld tokens + %lld new would cross longrope's original_max_position_embeddings "
                      "%lld while decoding, where transformers recomputes the whole sequence with the long factors "
                      "(a cache of turned keys cannot): keep prompt + new tokens within %lld + 1, or prompts longer "
                      "than %lld",
                      (long long)i, (long long)lens[i], (long long)e->shape.gen_len, (long long)orig, (long long)orig,
                      (long long)orig);
  }
  zz_group *g = &e->groups[group];
  g->n = n;
  g->s = s;
  /* left padding of each sequence; it never changes during the block */
  for (int64_t i = 0; i < n; i++) g->idx[i / gbs].pad[i % gbs] = (int32_t)(s - lens[i]);
  for (int64_t i = 0; i < bls; i++) zz_prefix_note(e, group, i, NULL, 0); /* until the prompt step */
  return ZZ_OK;
}

/* The last step whose key position (s + step - 1) fits the cache's t_max rows. */
static int64_t zz_engine_last_step(const zz_engine *e, int group) { return e->t_max - e->groups[group].s; }

bool zz_engine_can_refill(const zz_engine *e, int group) {
  if (group < 0 || group >= e->n_groups) return false; /* a slice too: a pipeline refills on every rank */
  return zz_memplan_cache_on_device(&e->plan, e->m, group);
}

int64_t zz_refill_room(const zz_shape *shape, int64_t s, int step, int64_t len) {
  if (step < 1) return 0;
  int64_t at = s + step - 1; /* the key position step writes */
  if (len < 1 || len > at || len > shape->prompt_len) return 0;
  /* its first token from the prompt, then one per step while the cache's rows last */
  return shape->prompt_len + shape->gen_len - at + 1;
}

int64_t zz_engine_refill_room(const zz_engine *e, int group, int step, int64_t len) {
  if (!zz_engine_can_refill(e, group) || !e->groups[group].n) return 0;
  return zz_refill_room(&e->shape, e->groups[group].s, step, len);
}

zz_status zz_engine_refill(zz_engine *e, int group, int64_t seq, int64_t len, int step, const zz_step_io *io) {
  if (zz_engine_refill_room(e, group, step, len) < 1 || seq < 0 || seq >= e->groups[group].n)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "engine: sequence %lld of group %d cannot take a prompt of %lld tokens before step %d "
                    "(its cache must be on the device, the prompt no longer than the key position)",
                    (long long)seq, group, (long long)len, step);
  bool first = e->l0 == 0, last = e->l1 == e->m->n_layers;
  if ((first && !(io->prompts && io->prompts[0])) || (!first && !io->hidden_in) || (!last && !io->hidden_out))
    return zz_error(ZZ_ERR_INVALID_ARG, "engine: a refill of slice [%d, %d) of %d layers needs %s and %s", e->l0, e->l1,
                    e->m->n_layers, first ? "the prompt" : "hidden_in", last ? "gives logits" : "hidden_out");
  for (int64_t r = 0; first && r < len; r++)
    if (io->prompts[0][r] < 0 || io->prompts[0][r] >= e->m->cfg.vocab_size)
      return zz_error(ZZ_ERR_INVALID_ARG, "engine: refill token id %d at %lld is outside the vocabulary (%lld)",
                      io->prompts[0][r], (long long)r, (long long)e->m->cfg.vocab_size);
  int64_t at = e->groups[group].s + step - 1;
  return zz_schedule_refill(e, group, seq, len, at - len, io);
}

size_t zz_engine_refill_bytes(const zz_engine *e, int64_t len) {
  return zz_hidden_bytes(e->m->cfg.hidden, zz_device_describe(e->dev)->compute_dtype, 1, len);
}

zz_status zz_engine_step(zz_engine *e, int group, int step, const zz_step_io *io) {
  if (group < 0 || group >= e->n_groups || !e->groups[group].n)
    return zz_error(ZZ_ERR_INVALID_ARG, "engine: step of group %d, which has no block begun", group);
  /* a block runs gen_len steps; one whose slots were refilled (zz_engine_refill)
   * runs on while its key positions fit the cache */
  int64_t last_step = e->shape.gen_len - 1 > zz_engine_last_step(e, group) ? e->shape.gen_len - 1
                                                                           : zz_engine_last_step(e, group);
  if (step < 0 || step > last_step)
    return zz_error(ZZ_ERR_INVALID_ARG, "engine: step %d outside 0..%lld", step, (long long)last_step);
  bool first = e->l0 == 0, last = e->l1 == e->m->n_layers;
  if ((first && !(step ? io->tokens != NULL : io->prompts != NULL)) || (!first && !io->hidden_in) ||
      (!last && !io->hidden_out))
    return zz_error(ZZ_ERR_INVALID_ARG, "engine: slice [%d, %d) of %d layers needs %s and %s", e->l0, e->l1,
                    e->m->n_layers, first ? (step ? "tokens" : "prompts") : "hidden_in",
                    last ? "gives logits" : "hidden_out");
  return zz_schedule_step(e, group, step, io);
}

/* ---------------------------------------------------------------- getters */

const float *zz_engine_logits(const zz_engine *e) { return e->logits; }

size_t zz_engine_hidden_bytes(const zz_engine *e, int group, int step) {
  const zz_group *g = &e->groups[group];
  return zz_hidden_bytes(e->m->cfg.hidden, zz_device_describe(e->dev)->compute_dtype, g->n, step ? 1 : g->s);
}

const zz_model *zz_engine_model(const zz_engine *e) { return e->m; }
const zz_policy *zz_engine_policy(const zz_engine *e) { return &e->pol; }
const zz_shape *zz_engine_shape(const zz_engine *e) { return &e->shape; }
int zz_engine_groups(const zz_engine *e) { return e->n_groups; }
void zz_engine_slice(const zz_engine *e, int *begin_out, int *end_out) {
  *begin_out = e->l0;
  *end_out = e->l1;
}
void zz_engine_add_wall(zz_engine *e, double seconds) { e->wall_s += seconds; }

void zz_engine_peaks(const zz_engine *e, size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]) {
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) peak[t][p] = e->arenas[t][p].peak;
}

const zz_memplan *zz_engine_plan(const zz_engine *e) { return &e->plan; }

void zz_engine_binding(const zz_engine *e, int i, void **ptr_out, size_t *offset_out, size_t *bytes_out) {
  const zz_buffer *x = &e->plan.buf[i];
  const zz_arena *a = &e->arenas[x->tier][x->purpose];
  char *p = e->bound[i];
  *ptr_out = p;
  /* measured from the arena actually allocated, not copied from the plan */
  *offset_out = p && a->base ? (size_t)(p - a->base) : x->offset;
  *bytes_out = x->bytes;
}

void zz_engine_get_stats(const zz_engine *e, zz_engine_stats *out) {
  memset(out, 0, sizeof *out);
  out->busy_s[ZZ_LANE_COMPUTE] = e->compute_s;
  for (int i = 0; i < ZZ_IO_N; i++) out->busy_s[i + 1] = zz_lanes_busy(e->lanes, i);
  out->wall_s = e->wall_s;
  out->positions = e->positions;
  out->prefix_shared = e->prefix_shared;
  out->disk_read_bytes = e->disk.read_bytes;
  out->disk_write_bytes = e->disk.write_bytes;
  out->disk_read_s = (double)e->disk.read_ns * 1e-9;
  out->attn_wait_s = e->attn_wait_s;
  out->attn_cpu_s = e->attn_cpu_s;
  out->bytes_to_device = __atomic_load_n(&e->dev->bytes_to_device, __ATOMIC_RELAXED);
  out->bytes_from_device = __atomic_load_n(&e->dev->bytes_from_device, __ATOMIC_RELAXED);
}
