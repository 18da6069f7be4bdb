/*
 * schedule.c — one token step of one micro-batch group over the engine's slice of
 * layers, in the zig-zag order of FlexGen (§4.2, Alg. 1): for each layer, for each
 * GPU batch. A layer's weights are loaded once per step and serve every GPU batch
 * of the group before the next layer runs. Each unit of work is one of FlexGen's
 * named steps, each its own function below:
 *
 *   step q = (slice layer j, batch k), slot = q % 3:
 *     load weight   weight lane: layer j+1 into weight slot (j+1) % 2 (issued at k = 0)
 *     load cache    load lane: the cache rows of step q+1 into slot (q+1) % 3
 *     load hidden   the hidden state of step q: embedded (first slice), handed in by
 *                   the caller (first layer of a later slice), or from its home
 *     compute       layer j on batch k (attention may run on the CPU beside the cache)
 *     store cache   store lane: the new cache rows of step q from slot q % 3
 *     store hidden  store lane: the hidden state to its home, or out to the caller
 *                   (last layer of a slice that does not end the model)
 *     sync          loads of q+1 done; stores of q-1 done (slot (q+2) % 3 is free)
 *
 * The lanes are threads (lanes.c); with overlap off they run inline, which is the
 * same work in the same order, serialised. Nothing is allocated here.
 */
#include <string.h>

#include "engine_impl.h"

/* ---------------------------------------------------------------- I/O tasks */

typedef enum zz_io_kind {
  ZZ_IO_LOAD_WEIGHTS,     /* slice layer → weight slot */
  ZZ_IO_LOAD_CACHE,       /* home rows [0, p1) → device slot (disk via host stage) */
  ZZ_IO_LOAD_CACHE_HOST,  /* disk rows [0, p1) → host stage (CPU attention) */
  ZZ_IO_STORE_CACHE,      /* device slot rows [p0, p1) → home */
  ZZ_IO_STORE_CACHE_HOST, /* host stage rows [p0, p1) → disk (CPU attention) */
  ZZ_IO_LOAD_ACT,         /* home → device slot */
  ZZ_IO_STORE_ACT,        /* device slot → home */
} zz_io_kind;

typedef struct zz_io {
  zz_io_kind kind;
  int lane; /* zz_lane of the device copies */
  int group;
  int jl;    /* slice layer (weights, cache) */
  int index; /* cache home index l * num_gb + k, or batch k */
  int slot;
  int64_t cnt, p0, p1; /* sequences; rows (cache) or bytes (act in p1) */
} zz_io;

/* Cache rows of one home, sequence by sequence. */
static zz_status zz_io_cache(zz_engine *e, const zz_io *t, const zz_tensor *home, char *slot, char *stage) {
  zz_device *dev = e->dev;
  zz_cache_spec spec = zz_engine_cache_spec(e, t->jl);
  size_t row = zz_cache_row_bytes(&spec), tmh = (size_t)e->t_max * row, region = zz_cache_region_bytes(&spec, e->t_max);
  size_t p0 = (size_t)t->p0 * row, p1 = (size_t)t->p1 * row;
  /* whole disk blocks around rows [p0, p1); past p1 the block is zeroed, never left stale */
  size_t a = zz_align_down(p0, ZZ_DISK_ALIGN), b = zz_align_up(p1, ZZ_DISK_ALIGN);
  for (int64_t i = 0; i < t->cnt; i++) {
    char *dslot = slot ? slot + (size_t)i * tmh : NULL;
    char *hstage = stage ? stage + (size_t)i * region : NULL;
    size_t doff = (size_t)home->offset + (size_t)i * region;
    switch (t->kind) {
      case ZZ_IO_LOAD_CACHE:
        if (home->tier == ZZ_TIER_CPU) {
          ZZ_CHECK(zz_device_write(dev, (zz_lane)t->lane, dslot, (char *)home->data + (size_t)i * tmh, p1));
        } else {
          ZZ_CHECK(zz_disk_read(&e->disk, hstage, zz_align_up(p1, ZZ_DISK_ALIGN), doff));
          ZZ_CHECK(zz_device_write(dev, (zz_lane)t->lane, dslot, hstage, p1));
        }
        break;
      case ZZ_IO_LOAD_CACHE_HOST: ZZ_CHECK(zz_disk_read(&e->disk, hstage, zz_align_up(p1, ZZ_DISK_ALIGN), doff)); break;
      case ZZ_IO_STORE_CACHE:
        if (home->tier == ZZ_TIER_CPU) {
          ZZ_CHECK(
              zz_device_read(dev, (zz_lane)t->lane, (char *)home->data + (size_t)i * tmh + p0, dslot + p0, p1 - p0));
        } else {
          /* the older rows of the first block are in the slot too */
          ZZ_CHECK(zz_device_read(dev, (zz_lane)t->lane, hstage + a, dslot + a, p1 - a));
          ZZ_CHECK(zz_device_sync(dev, (zz_lane)t->lane));
          memset(hstage + p1, 0, b - p1);
          ZZ_CHECK(zz_disk_write(&e->disk, hstage + a, b - a, doff + a));
        }
        break;
      case ZZ_IO_STORE_CACHE_HOST:
        memset(hstage + p1, 0, b - p1);
        ZZ_CHECK(zz_disk_write(&e->disk, hstage + a, b - a, doff + a));
        break;
      default: break;
    }
  }
  return ZZ_OK;
}

static zz_status zz_io_act(zz_engine *e, const zz_io *t) {
  zz_device *dev = e->dev;
  const zz_tensor *h = &e->groups[t->group].a_home[t->index];
  size_t bytes = (size_t)t->p1, padded = zz_align_up(bytes, ZZ_DISK_ALIGN);
  char *slot = e->a_slot[t->slot], *stage = e->a_stage[t->slot];
  zz_lane lane = (zz_lane)t->lane;
  if (t->kind == ZZ_IO_LOAD_ACT) {
    if (h->tier == ZZ_TIER_CPU) return zz_device_write(dev, lane, slot, h->data, bytes);
    ZZ_CHECK(zz_disk_read(&e->disk, stage, padded, (size_t)h->offset));
    return zz_device_write(dev, lane, slot, stage, bytes);
  }
  if (h->tier == ZZ_TIER_CPU) return zz_device_read(dev, lane, h->data, slot, bytes);
  ZZ_CHECK(zz_device_read(dev, lane, stage, slot, bytes));
  ZZ_CHECK(zz_device_sync(dev, lane));
  memset(stage + bytes, 0, padded - bytes);
  return zz_disk_write(&e->disk, stage, padded, (size_t)h->offset);
}

zz_status zz_io_run(void *ctx, const void *args) {
  zz_engine *e = ctx;
  zz_io t;
  memcpy(&t, args, sizeof t);
  zz_group *g = &e->groups[t.group];
  switch (t.kind) {
    case ZZ_IO_LOAD_WEIGHTS: ZZ_CHECK(zz_weights_load_slot(e, t.jl, (zz_lane)t.lane)); break;
    case ZZ_IO_LOAD_CACHE:
    case ZZ_IO_STORE_CACHE:
    case ZZ_IO_LOAD_CACHE_HOST:
    case ZZ_IO_STORE_CACHE_HOST:
      ZZ_CHECK(zz_io_cache(e, &t, &g->k_home[t.index], e->kv_slot[t.slot][0], e->kv_stage[t.slot][0]));
      ZZ_CHECK(zz_io_cache(e, &t, &g->v_home[t.index], e->kv_slot[t.slot][1], e->kv_stage[t.slot][1]));
      break;
    case ZZ_IO_LOAD_ACT:
    case ZZ_IO_STORE_ACT: ZZ_CHECK(zz_io_act(e, &t)); break;
  }
  return zz_device_sync(e->dev, (zz_lane)t.lane);
}

static uint64_t zz_submit(zz_engine *e, int io_lane, zz_io t) {
  t.lane = io_lane + 1; /* ZZ_LANE_LOAD_WEIGHT, LOAD_CACHE, STORE_CACHE */
  return zz_lanes_submit(e->lanes, io_lane, &t, sizeof t);
}

/* ---------------------------------------------------------------- one step */

/* What the steps of one token step of one group share. */
typedef struct zz_run {
  zz_engine *e;
  zz_group *g;
  int group, step, nl;
  int64_t nbt, sq, pos; /* batches computed; new tokens per sequence; key position of the first */
  const int64_t *ks;    /* [nbt] the group's batch each of them is */
  const zz_step_io *io;
  uint64_t *store_ticket; /* [nl * nbt] last store ticket at or before each step */
  /* -1: every sequence of each batch; else the one sequence (its index in the batch)
   * a refill prefills alone (zz_schedule_refill: one batch, its cache on the device) */
  int64_t slot;
} zz_run;

/* The group's batch that step q = (slice layer, batch) computes. */
static int64_t zz_run_batch(const zz_run *r, int64_t q) { return r->ks[q % r->nbt]; }

int64_t zz_step_rows(const bool *ended, int64_t cnt) {
  while (cnt > 0 && ended[cnt - 1]) cnt--;
  return cnt;
}

/* Sequences of batch k a step computes: at the prompt step all, then zz_step_rows. */
static int64_t zz_step_count(const zz_engine *e, const zz_group *g, int step, const bool *ended, int64_t k) {
  int64_t cnt = zz_group_batch_count(e, g, k), first = k * e->pol.gpu_batch_size;
  return step > 0 && ended ? zz_step_rows(ended + first, cnt) : cnt;
}

/* Sequences of batch k the run computes (zz_schedule_step counted them once). */
static int64_t zz_run_count(const zz_run *r, int64_t k) { return r->slot >= 0 ? 1 : r->g->run_cnt[k]; }

static bool zz_act_off(const zz_run *r, int64_t k) {
  return r->e->plan.act_tier[r->group * r->e->pol.num_gpu_batches + k] != ZZ_TIER_GPU;
}

/* Device hidden state of batch k while step q computes. */
static char *zz_hidden_ptr(const zz_run *r, int64_t k, int slot) {
  return zz_act_off(r, k) ? r->e->a_slot[slot] : r->g->a_home[k].data;
}

static int zz_cache_index(const zz_run *r, int jl, int64_t k) {
  int l = r->e->cache_of[jl];
  return l < 0 ? -1 : l * r->e->pol.num_gpu_batches + (int)k;
}

static zz_tier zz_cache_tier(const zz_run *r, int ci) {
  const zz_engine *e = r->e;
  return e->plan.cache_tier[(size_t)r->group * (size_t)e->lc * (size_t)e->pol.num_gpu_batches + (size_t)ci];
}

static bool zz_on_host_path(const zz_run *r, zz_tier t) {
  return r->e->pol.cpu_attention && r->step > 0 && t != ZZ_TIER_GPU;
}

/* Index arrays of every batch the step computes, written to the device. */
static zz_status zz_step_inputs(zz_run *r) {
  zz_engine *e = r->e;
  const zz_model *m = e->m;
  zz_device *dev = e->dev;
  int64_t gbs = e->pol.gpu_batch_size, sq = r->sq;
  for (int64_t x = 0; x < r->nbt; x++) {
    int64_t k = r->ks[x];
    zz_batch_idx *b = &r->g->idx[k];
    int64_t first = k * gbs, cnt = zz_run_count(r, k);
    const int32_t *pads = r->slot >= 0 ? b->pad + r->slot : b->pad; /* each sequence's left padding */
    for (int64_t i = 0; i < cnt; i++) {
      int64_t pad = pads[i];
      m->arch->positions(&m->cfg, pad, r->pos, sq, b->pos + i * sq);
      b->last[i] = (int32_t)zz_step_last_row(sq, i);
      if (e->l0 != 0) continue; /* only the first slice embeds token ids */
      if (r->step == 0) {       /* key positions pos.. of the prompt, left padded to pad */
        const int32_t *p = r->io->prompts[r->slot >= 0 ? 0 : first + i];
        for (int64_t t = 0, row = r->pos; t < sq; t++, row++)
          b->ids[i * sq + t] = row < pad ? m->cfg.pad : p[row - pad];
      } else {
        b->ids[i] = r->io->tokens[first + i];
      }
    }
    size_t n = (size_t)(cnt * sq) * sizeof(int32_t);
    ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, b->d_ids, b->ids, n));
    ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, b->d_pos, b->pos, n));
    ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, b->d_pad, pads, (size_t)cnt * sizeof(int32_t)));
    ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, b->d_last, b->last, (size_t)cnt * sizeof(int32_t)));
  }
  return ZZ_OK;
}

/* A MoE layer's expert, as its router first asks for it (zz_step.need_expert). */
typedef struct zz_expert_ctx {
  zz_engine *e;
  int jl;
} zz_expert_ctx;

static zz_status zz_need_expert(void *ctx, int64_t x) {
  const zz_expert_ctx *c = ctx;
  return zz_weights_load_expert(c->e, c->jl, x);
}

/* load weight: slice layer jl into slot jl % 2 unless it lives on the device or is there. */
static void zz_load_weight(zz_run *r, int jl) {
  zz_engine *e = r->e;
  int slot = jl % 2;
  if (zz_memplan_layer_resident(&e->plan, jl) || e->w.slot_layer[slot] == jl) return;
  zz_submit(e, ZZ_IO_WEIGHT, (zz_io){.kind = ZZ_IO_LOAD_WEIGHTS, .group = r->group, .jl = jl});
  e->w.slot_layer[slot] = jl;
  if (e->w.expert_have[slot]) /* the slot's experts: none yet (its previous layer's compute has ended) */
    memset(e->w.expert_have[slot], 0, (size_t)(e->m->cfg.n_experts + 63) / 64 * sizeof(uint64_t));
}

/* load cache: the rows step q needs, into slot q % 3 (or a host stage for CPU attention). */
static void zz_load_cache(zz_run *r, int64_t q) {
  int jl = (int)(q / r->nbt);
  int64_t k = zz_run_batch(r, q);
  int ci = zz_cache_index(r, jl, k);
  if (ci < 0 || r->pos == 0) return;
  zz_tier t = zz_cache_tier(r, ci);
  if (t == ZZ_TIER_GPU) return;
  bool host = zz_on_host_path(r, t);
  if (host && t == ZZ_TIER_CPU) return; /* attention reads the home itself */
  zz_submit(r->e, ZZ_IO_LOAD,
            (zz_io){.kind = host ? ZZ_IO_LOAD_CACHE_HOST : ZZ_IO_LOAD_CACHE,
                    .group = r->group,
                    .jl = jl,
                    .index = ci,
                    .slot = (int)(q % 3),
                    .cnt = zz_run_count(r, k),
                    .p0 = 0,
                    .p1 = r->pos});
}

/* load hidden (from its home): batch k's state for step q, stored nbt steps ago. */
static zz_status zz_load_hidden(zz_run *r, int64_t q) {
  int jl = (int)(q / r->nbt);
  int64_t k = zz_run_batch(r, q);
  if (jl == 0 || !zz_act_off(r, k)) return ZZ_OK;
  uint64_t stored = r->store_ticket[q - r->nbt];
  if (stored) ZZ_CHECK(zz_lanes_wait(r->e->lanes, ZZ_IO_STORE, stored));
  size_t bytes = zz_hidden_bytes(r->e->m->cfg.hidden, zz_device_describe(r->e->dev)->compute_dtype, zz_run_count(r, k),
                                 r->sq);
  zz_submit(
      r->e, ZZ_IO_LOAD,
      (zz_io){.kind = ZZ_IO_LOAD_ACT, .group = r->group, .index = (int)k, .slot = (int)(q % 3), .p1 = (int64_t)bytes});
  return zz_lanes_wait(r->e->lanes, ZZ_IO_LOAD, 0);
}

/* Byte offset and size of batch k's rows in the caller's [n, sq, hidden] buffer
 * (a refill's buffer holds its one sequence: [1, sq, hidden]). */
static void zz_caller_rows(const zz_run *r, int64_t k, size_t *off, size_t *bytes) {
  const zz_engine *e = r->e;
  int64_t h = e->m->cfg.hidden;
  *off = zz_hidden_bytes(h, zz_device_describe(e->dev)->compute_dtype, r->slot >= 0 ? 0 : k * e->pol.gpu_batch_size,
                         r->sq);
  *bytes = zz_hidden_bytes(h, zz_device_describe(e->dev)->compute_dtype, zz_run_count(r, k), r->sq);
}

/* compute: layer jl on batch k; the hidden state comes in from the caller at the
 * first layer of a later slice. */
static zz_status zz_compute(zz_run *r, int64_t q) {
  zz_engine *e = r->e;
  zz_device *dev = e->dev;
  const zz_model *m = e->m;
  int jl = (int)(q / r->nbt), slot = (int)(q % 3);
  int64_t k = zz_run_batch(r, q), cnt = zz_run_count(r, k);
  const zz_layer *layer = &m->layers[e->l0 + jl];
  char *hidden = zz_hidden_ptr(r, k, slot);
  if (jl == 0 && e->l0 > 0) {
    size_t off, bytes;
    zz_caller_rows(r, k, &off, &bytes);
    const char *src = (const char *)r->io->hidden_in + off;
    if (r->io->hidden_on_device) ZZ_CHECK(zz_device_copy(dev, ZZ_LANE_COMPUTE, hidden, src, bytes));
    else
      ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, hidden, src, bytes));
  }
  const zz_tensor *wt = &e->w.dev[jl * ZZ_MAXW];
  zz_batch_idx *b = &r->g->idx[k];
  zz_cache_spec spec = layer->has_cache ? zz_engine_cache_spec(e, jl) : (zz_cache_spec){0};
  /* top-k sparsity is for decoding; the prompt attends densely */
  zz_step st = {.b = cnt,
                .sq = r->sq,
                .pos = r->pos,
                .ids = b->d_ids,
                .positions = b->d_pos,
                .pad = b->d_pad,
                .last = b->d_last,
                .hidden = hidden,
                .last_rows = !zz_layer_wants_all_rows(m, layer, r->sq, e->all_rows),
                .logits = e->d_logits,
                .work = e->work,
                .keep = r->step > 0 ? e->pol.attn_sparsity : 1.0,
                .window = spec.window,
                .kv = {.dt = spec.dtype, .q = spec.q, .seq_bytes = e->t_max * (int64_t)zz_cache_row_bytes(&spec)}};
  zz_attend_ctx actx;
  int ci = zz_cache_index(r, jl, k);
  zz_tier ct = ci >= 0 ? zz_cache_tier(r, ci) : ZZ_TIER_GPU;
  if (ci >= 0 && ct == ZZ_TIER_GPU) {
    size_t at = r->slot >= 0 ? (size_t)r->slot * (size_t)st.kv.seq_bytes : 0; /* a refill's own rows */
    st.k = (char *)r->g->k_home[ci].data + at;
    st.v = (char *)r->g->v_home[ci].data + at;
  } else if (ci >= 0 && zz_on_host_path(r, ct)) {
    bool on_cpu = ct == ZZ_TIER_CPU;
    actx = (zz_attend_ctx){
        .e = e,
        .k = on_cpu ? r->g->k_home[ci].data : e->kv_stage[slot][0],
        .v = on_cpu ? r->g->v_home[ci].data : e->kv_stage[slot][1],
        .kv = {.dt = spec.dtype,
               .q = spec.q,
               .seq_bytes = on_cpu ? st.kv.seq_bytes : (int64_t)zz_cache_region_bytes(&spec, e->t_max)},
        .keep = st.keep,
        .window = st.window,
        .cnt = cnt,
        .pos = r->pos,
        .pad = b->pad};
    st.attend = zz_cpu_attend;
    st.attend_ctx = &actx;
  } else if (ci >= 0) {
    st.k = e->kv_slot[slot][0];
    st.v = e->kv_slot[slot][1];
  }
  zz_expert_ctx xctx = {.e = e, .jl = jl};
  if (e->w.expert_have[0] && !zz_memplan_layer_resident(&e->plan, jl)) { /* experts loaded as routed */
    st.need_expert = zz_need_expert;
    st.expert_ctx = &xctx;
  }
  ZZ_CHECK(m->arch->forward(dev, m, layer, wt, &st));
  if (layer->kind == ZZ_LAYER_OUTPUT_EMBED)
    ZZ_CHECK(zz_device_download(
        dev, ZZ_LANE_COMPUTE, e->logits + (k * e->pol.gpu_batch_size + (r->slot > 0 ? r->slot : 0)) * m->cfg.vocab_size,
        ZZ_DTYPE_F32, e->d_logits, cnt * m->cfg.vocab_size));
  return zz_device_sync(dev, ZZ_LANE_COMPUTE);
}

/* store cache: the new rows of step q from slot q % 3 to their home; 0 when none. */
static uint64_t zz_store_cache(zz_run *r, int64_t q) {
  int jl = (int)(q / r->nbt);
  int64_t k = zz_run_batch(r, q);
  int ci = zz_cache_index(r, jl, k);
  if (ci < 0) return 0;
  zz_tier t = zz_cache_tier(r, ci);
  bool host = zz_on_host_path(r, t);
  if (t == ZZ_TIER_GPU || (host && t == ZZ_TIER_CPU)) return 0;
  return zz_submit(r->e, ZZ_IO_STORE,
                   (zz_io){.kind = host ? ZZ_IO_STORE_CACHE_HOST : ZZ_IO_STORE_CACHE,
                           .group = r->group,
                           .jl = jl,
                           .index = ci,
                           .slot = (int)(q % 3),
                           .cnt = zz_run_count(r, k),
                           .p0 = r->pos,
                           .p1 = r->pos + r->sq});
}

/* store hidden: to the caller after the slice's last layer (unless it ends the
 * model), else to its home when that is not the device; 0 when nothing queued. */
static zz_status zz_store_hidden(zz_run *r, int64_t q, uint64_t *ticket) {
  zz_engine *e = r->e;
  int jl = (int)(q / r->nbt), slot = (int)(q % 3);
  int64_t k = zz_run_batch(r, q);
  *ticket = 0;
  if (jl + 1 < r->nl) {
    if (!zz_act_off(r, k)) return ZZ_OK;
    size_t bytes = zz_hidden_bytes(e->m->cfg.hidden, zz_device_describe(e->dev)->compute_dtype, zz_run_count(r, k),
                                   r->sq);
    *ticket = zz_submit(
        e, ZZ_IO_STORE,
        (zz_io){.kind = ZZ_IO_STORE_ACT, .group = r->group, .index = (int)k, .slot = slot, .p1 = (int64_t)bytes});
    return ZZ_OK;
  }
  if (e->l1 == e->m->n_layers) return ZZ_OK; /* logits, not a hidden state */
  size_t off, bytes;
  zz_caller_rows(r, k, &off, &bytes);
  char *dst = (char *)r->io->hidden_out + off;
  if (r->io->hidden_on_device) ZZ_CHECK(zz_device_copy(e->dev, ZZ_LANE_COMPUTE, dst, zz_hidden_ptr(r, k, slot), bytes));
  else
    ZZ_CHECK(zz_device_read(e->dev, ZZ_LANE_COMPUTE, dst, zz_hidden_ptr(r, k, slot), bytes));
  return zz_device_sync(e->dev, ZZ_LANE_COMPUTE);
}

/* sync: step q+1's cache is in, the stores of step q-1 are out (its slot is free
 * again), q+1's hidden state is in, and after a layer's last batch the next
 * layer's weights are in. */
static zz_status zz_sync(zz_run *r, int64_t q) {
  zz_lanes *l = r->e->lanes;
  ZZ_CHECK(zz_lanes_wait(l, ZZ_IO_LOAD, 0));
  if (q > 0 && r->store_ticket[q - 1]) ZZ_CHECK(zz_lanes_wait(l, ZZ_IO_STORE, r->store_ticket[q - 1]));
  if (q + 1 < r->nl * r->nbt) ZZ_CHECK(zz_load_hidden(r, q + 1));
  if (q % r->nbt == r->nbt - 1) ZZ_CHECK(zz_lanes_wait(l, ZZ_IO_WEIGHT, 0));
  return ZZ_OK;
}

static zz_status zz_run_steps(zz_run *r) {
  zz_engine *e = r->e;
  int64_t nsteps = r->nl * r->nbt;
  ZZ_CHECK(zz_step_inputs(r));
  zz_load_weight(r, 0); /* unless the previous step prefetched it */
  ZZ_CHECK(zz_lanes_wait(e->lanes, ZZ_IO_WEIGHT, 0));
  zz_load_cache(r, 0);
  ZZ_CHECK(zz_lanes_wait(e->lanes, ZZ_IO_LOAD, 0));
  for (int64_t q = 0; q < nsteps; q++) {
    int jl = (int)(q / r->nbt);
    /* the next layer; after the last, the slice's first for the next step when
     * the slot parity allows (a prefetch no step uses stays valid) */
    if (q % r->nbt == 0 && (jl + 1 < r->nl || r->nl % 2 == 0)) zz_load_weight(r, (jl + 1) % r->nl);
    if (q + 1 < nsteps) zz_load_cache(r, q + 1);
    double t0 = zz_now();
    ZZ_CHECK(zz_compute(r, q));
    e->compute_s += zz_now() - t0;
    uint64_t tc = zz_store_cache(r, q), th = 0;
    ZZ_CHECK(zz_store_hidden(r, q, &th));
    uint64_t ticket = th ? th : tc;
    r->store_ticket[q] = ticket ? ticket : (q > 0 ? r->store_ticket[q - 1] : 0);
    ZZ_CHECK(zz_sync(r, q));
  }
  return zz_lanes_wait(e->lanes, ZZ_IO_STORE, 0);
}

/* A run, its rows counted in zz_engine_stats.positions; on failure every lane is
 * drained so no task outlives the step. */
static zz_status zz_run_counted(zz_run *r) {
  zz_engine *e = r->e;
  for (int64_t i = 0; i < r->nbt; i++) e->positions += zz_run_count(r, r->ks[i]) * r->sq;
  zz_status st = zz_run_steps(r);
  if (st != ZZ_OK) {
    /* a slot whose load may have failed holds no layer a later step can trust */
    e->w.slot_layer[0] = e->w.slot_layer[1] = -1;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", zz_error_message());
    for (int i = 0; i < ZZ_IO_N; i++) zz_lanes_wait(e->lanes, i, 0);
    zz_error(st, "%s", msg);
  }
  return st;
}

zz_status zz_schedule_step(zz_engine *e, int group, int step, const zz_step_io *io) {
  zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, nbt = 0;
  /* the batches with a sequence still running (at the prompt step, every one) */
  for (int64_t k = 0; k * gbs < g->n; k++)
    if ((g->run_cnt[k] = zz_step_count(e, g, step, io->ended, k)) > 0) g->run_k[nbt++] = k;
  if (nbt == 0) return ZZ_OK;
  zz_run r = {.e = e,
              .g = g,
              .group = group,
              .step = step,
              .nl = e->l1 - e->l0,
              .nbt = nbt,
              .ks = g->run_k,
              .sq = step == 0 ? g->s : 1,
              .pos = step == 0 ? 0 : g->s + step - 1,
              .io = io,
              .store_ticket = e->tickets,
              .slot = -1};
  zz_status st = ZZ_OK;
  int64_t p = step == 0 ? zz_prefix_len(e, group, io) : 0;
  if (p > 0) {
    /* the prompts' shared prefix once: the first sequence alone, then copied to
     * the others' cache rows; the prompt step goes on from row p (prefix.c) */
    zz_run pr = r;
    pr.nbt = 1; /* batch 0: every batch runs at the prompt step */
    pr.slot = 0;
    pr.sq = p;
    pr.pos = g->idx[0].pad[0];
    st = zz_run_counted(&pr);
    if (st == ZZ_OK) st = zz_prefix_spread(e, group, p);
    e->prefix_shared += (g->n - 1) * p;
    r.sq = g->s - p;
    r.pos = p;
  }
  if (st == ZZ_OK) st = zz_run_counted(&r);
  /* the prompts the cache rows now hold: a refill's donors */
  for (int64_t i = 0; st == ZZ_OK && step == 0 && g->prompt && io->prompts && i < g->n; i++)
    zz_prefix_note(e, group, i, io->prompts[i], g->s - g->idx[i / gbs].pad[i % gbs]);
  return st;
}

/* A prompt step of one sequence alone (zz_engine_refill): its rows of batch k's
 * cache, key positions [pos, pos + len), left padded to pos. The engine checked
 * that the group's caches are on the device, so no cache row moves. Where another
 * slot's prompt starts with the same p tokens, its rows of them are copied in and
 * the run computes the rest, keys [pos + p, pos + len) (prefix.c; the whole model
 * in this engine, so io->prompts holds the prompt). */
zz_status zz_schedule_refill(zz_engine *e, int group, int64_t seq, int64_t len, int64_t pos, const zz_step_io *io) {
  zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, k = seq / gbs, donor;
  zz_prefix_note(e, group, seq, NULL, 0);                   /* its rows are written afresh */
  g->idx[k].pad[seq % gbs] = (int32_t)pos;                  /* its padding from now on, for the group's steps too */
  const int32_t *ids = io->prompts ? io->prompts[0] : NULL; /* a later slice has none */
  int64_t p = ids ? zz_prefix_donor(e, group, seq, ids, len, &donor) : 0;
  if (p > 0) {
    ZZ_CHECK(zz_prefix_lend(e, group, donor, seq, p));
    e->prefix_shared += p;
  }
  g->run_k[0] = k;
  zz_run r = {.e = e,
              .g = g,
              .group = group,
              .step = 0,
              .nl = e->l1 - e->l0,
              .nbt = 1,
              .ks = g->run_k,
              .sq = len - p,
              .pos = pos + p,
              .io = io,
              .store_ticket = e->tickets,
              .slot = seq % gbs};
  ZZ_CHECK(zz_run_counted(&r));
  zz_prefix_note(e, group, seq, ids, len);
  return ZZ_OK;
}
