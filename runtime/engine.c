/*
 * engine.c — the offloading engine: generation for one block of prompts in the
 * zig-zag order of FlexGen (§4.2, Alg. 1): for each token, for each layer, for
 * each GPU batch. A layer's weights are loaded once per block and serve every GPU
 * batch before the next layer runs.
 *
 * Where things live comes from the memory plan (memplan.c): each layer's weights,
 * each (layer, batch) KV cache and each batch's activations have a home tier. What
 * is not on the device is brought into reused device slots before use:
 *
 *   step q = (layer j, batch k):
 *     weight lane:  load layer j+1 into weight slot (j+1) % 2   (issued at k = 0)
 *     load lane:    load cache of step q+1 into slot (q+1) % 3
 *     compute:      layer j on batch k (attention may run on the CPU beside the cache)
 *     store lane:   store the new cache rows and activations of step q from slot q % 3
 *     sync:         loads of q+1 done; stores of q-1 done (slot (q+2) % 3 is free)
 *
 * The lanes are threads (lanes.c); with overlap off they run inline, which is the
 * same work in the same order, serialised. Everything a block needs is taken from
 * arenas sized by the plan before the first block; nothing is allocated in the loop.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk_impl.h"
#include "lanes_impl.h"
#include "zz_runtime.h"

#define ZZ_MAXW ZZ_MAX_LAYER_WEIGHTS

/* I/O lanes, numbered as zz_lane minus the compute lane. */
enum { ZZ_IO_WEIGHT = 0, ZZ_IO_LOAD, ZZ_IO_STORE, ZZ_IO_N };

typedef struct zz_batch_state {
  int32_t *d_ids, *d_pos, *d_pad, *d_last; /* device [gbs*s], [gbs*s], [gbs], [gbs] */
  int32_t *ids, *pos, *pad, *last;         /* host twins */
} zz_batch_state;


struct zz_engine {
  zz_device *dev;
  const zz_model *m;
  zz_policy pol;
  zz_shape shape;
  zz_memplan plan;
  zz_dtype store_dt; /* weights on the CPU and disk tiers */
  size_t es;         /* bytes per element of the compute dtype */
  int64_t t_max;     /* prompt_len + gen_len */
  size_t row;        /* bytes of one cache row: hidden * es */
  size_t region;     /* bytes of one sequence's cache on disk (block aligned) */
  zz_arena arenas[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  void *arena_mem[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_disk disk;
  bool has_disk;
  size_t disk_base[ZZ_PURPOSE_COUNT]; /* offset of each disk arena in the offload file */

  zz_tensor *w_home;        /* [n_layers * ZZ_MAXW] each weight's home */
  char *w_slot[2];          /* device slots for offloaded layers */
  int w_slot_layer[2];      /* which layer each slot holds (-1: none) */
  char *w_stage;            /* host, block aligned: one disk layer */
  zz_tensor *k_home, *v_home; /* [n_layers_transformer * num_gb] [gbs, t_max, h] */
  char *k_slot[3], *v_slot[3];   /* device */
  char *k_stage[3], *v_stage[3]; /* host, disk cache */
  zz_tensor *a_home;        /* [num_gb] hidden [gbs, s, h] */
  char *a_slot[3];          /* device */
  char *a_stage[3];         /* host, disk activations */
  zz_batch_state *batches;  /* [num_gb] */
  void *work, *d_logits;    /* device */
  float *logits;            /* host [gbs, vocab] */
  void *sample_scratch;
  float *ca_q, *ca_k, *ca_v, *ca_o, *ca_scratch; /* host, CPU attention */
  zz_lanes *lanes;
  double compute_s, wall_s;
};

static size_t zz_al(size_t x, size_t a) { return (x + a - 1) / a * a; }
static size_t zz_floor(size_t x, size_t a) { return x / a * a; }

static int64_t zz_numel(const zz_weight_spec *w) {
  return w->ndim ? w->shape[0] * (w->ndim > 1 ? w->shape[1] : 1) : 0;
}

/* Device pointers of layer j's weights carved from a slot in order. */
static void zz_slot_ptrs(const zz_engine *e, int j, char *base, void **wp) {
  const zz_layer *l = &e->m->layers[j];
  size_t off = 0;
  for (int k = 0; k < ZZ_MAXW; k++) {
    wp[k] = NULL;
    if (k >= l->n_weights || !l->weights[k].ndim) continue;
    wp[k] = base + off;
    off += zz_al((size_t)zz_numel(&l->weights[k]) * e->es, 256);
  }
}

/* ---------------------------------------------------------------- I/O tasks */

typedef enum zz_io_kind {
  ZZ_IO_LOAD_WEIGHTS,  /* layer → weight slot */
  ZZ_IO_LOAD_CACHE,    /* home rows [0, p1) → device slot (disk via host stage) */
  ZZ_IO_LOAD_CACHE_HOST, /* disk rows [0, p1) → host stage (CPU attention) */
  ZZ_IO_STORE_CACHE,   /* device slot rows [p0, p1) → home */
  ZZ_IO_STORE_CACHE_HOST, /* host stage rows [p0, p1) → disk (CPU attention) */
  ZZ_IO_LOAD_ACT,      /* home → device slot */
  ZZ_IO_STORE_ACT,     /* device slot → home */
} zz_io_kind;

typedef struct zz_io {
  zz_io_kind kind;
  int lane;   /* zz_lane of the device copies */
  int index;  /* layer, cache index, or batch */
  int slot;
  int64_t cnt, p0, p1; /* sequences; rows (cache) or bytes (act in p1) */
} zz_io;

static zz_status zz_io_cache(zz_engine *e, const zz_io *t, const zz_tensor *home, char *slot, char *stage) {
  zz_device *dev = e->dev;
  size_t tmh = (size_t)e->t_max * e->row;
  for (int64_t i = 0; i < t->cnt; i++) {
    size_t p0 = (size_t)t->p0 * e->row, p1 = (size_t)t->p1 * e->row;
    char *dslot = slot ? slot + (size_t)i * tmh : NULL;
    char *hstage = stage ? stage + (size_t)i * e->region : NULL;
    size_t doff = (size_t)home->offset + (size_t)i * e->region;
    switch (t->kind) {
      case ZZ_IO_LOAD_CACHE:
        if (home->tier == ZZ_TIER_CPU) {
          ZZ_CHECK(dev->ops->write(dev, (zz_lane)t->lane, dslot, (char *)home->data + (size_t)i * tmh, p1));
        } else {
          ZZ_CHECK(zz_disk_read(&e->disk, hstage, zz_al(p1, ZZ_DISK_BLOCK), doff));
          ZZ_CHECK(dev->ops->write(dev, (zz_lane)t->lane, dslot, hstage, p1));
        }
        break;
      case ZZ_IO_LOAD_CACHE_HOST:
        ZZ_CHECK(zz_disk_read(&e->disk, hstage, zz_al(p1, ZZ_DISK_BLOCK), doff));
        break;
      case ZZ_IO_STORE_CACHE:
        if (home->tier == ZZ_TIER_CPU) {
          ZZ_CHECK(dev->ops->read(dev, (zz_lane)t->lane, (char *)home->data + (size_t)i * tmh + p0, dslot + p0, p1 - p0));
        } else {
          /* whole blocks around the new rows; the older rows in them are in the slot too */
          size_t a = zz_floor(p0, ZZ_DISK_BLOCK), b = zz_al(p1, ZZ_DISK_BLOCK);
          size_t dev_end = b < tmh ? b : tmh;
          ZZ_CHECK(dev->ops->read(dev, (zz_lane)t->lane, hstage + a, dslot + a, dev_end - a));
          if (b > dev_end) memset(hstage + dev_end, 0, b - dev_end); /* no stale or uninitialised padding on disk */
          ZZ_CHECK(dev->ops->sync(dev, (zz_lane)t->lane));
          ZZ_CHECK(zz_disk_write(&e->disk, hstage + a, b - a, doff + a));
        }
        break;
      case ZZ_IO_STORE_CACHE_HOST: {
        size_t a = zz_floor(p0, ZZ_DISK_BLOCK), b = zz_al(p1, ZZ_DISK_BLOCK);
        ZZ_CHECK(zz_disk_write(&e->disk, hstage + a, b - a, doff + a));
        break;
      }
      default: break;
    }
  }
  return ZZ_OK;
}

static zz_status zz_io_run(void *ctx, const void *args) {
  zz_engine *e = ctx;
  zz_io t;
  memcpy(&t, args, sizeof t);
  zz_device *dev = e->dev;
  switch (t.kind) {
    case ZZ_IO_LOAD_WEIGHTS: {
      const zz_layer *l = &e->m->layers[t.index];
      void *wp[ZZ_MAXW];
      zz_slot_ptrs(e, t.index, e->w_slot[t.slot], wp);
      for (int k = 0; k < l->n_weights; k++) {
        if (!wp[k]) continue;
        const zz_tensor *h = &e->w_home[t.index * ZZ_MAXW + k];
        int64_t n = zz_numel(&l->weights[k]);
        const char *src = h->data;
        if (h->tier == ZZ_TIER_DISK) {
          ZZ_CHECK(zz_disk_read(&e->disk, e->w_stage, zz_al(zz_dtype_nbytes(e->store_dt, n), ZZ_DISK_BLOCK), (size_t)h->offset));
          src = e->w_stage;
        }
        ZZ_CHECK(dev->ops->upload(dev, (zz_lane)t.lane, wp[k], src, e->store_dt, n));
        /* the disk stage is reused by the next weight: the copy must be done */
        if (h->tier == ZZ_TIER_DISK) ZZ_CHECK(dev->ops->sync(dev, (zz_lane)t.lane));
      }
      break;
    }
    case ZZ_IO_LOAD_CACHE:
    case ZZ_IO_STORE_CACHE:
    case ZZ_IO_LOAD_CACHE_HOST:
    case ZZ_IO_STORE_CACHE_HOST:
      ZZ_CHECK(zz_io_cache(e, &t, &e->k_home[t.index], e->k_slot[t.slot], e->k_stage[t.slot]));
      ZZ_CHECK(zz_io_cache(e, &t, &e->v_home[t.index], e->v_slot[t.slot], e->v_stage[t.slot]));
      break;
    case ZZ_IO_LOAD_ACT: {
      const zz_tensor *h = &e->a_home[t.index];
      size_t bytes = (size_t)t.p1;
      if (h->tier == ZZ_TIER_CPU) {
        ZZ_CHECK(dev->ops->write(dev, (zz_lane)t.lane, e->a_slot[t.slot], h->data, bytes));
      } else {
        ZZ_CHECK(zz_disk_read(&e->disk, e->a_stage[t.slot], zz_al(bytes, ZZ_DISK_BLOCK), (size_t)h->offset));
        ZZ_CHECK(dev->ops->write(dev, (zz_lane)t.lane, e->a_slot[t.slot], e->a_stage[t.slot], bytes));
      }
      break;
    }
    case ZZ_IO_STORE_ACT: {
      const zz_tensor *h = &e->a_home[t.index];
      size_t bytes = (size_t)t.p1;
      if (h->tier == ZZ_TIER_CPU) {
        ZZ_CHECK(dev->ops->read(dev, (zz_lane)t.lane, h->data, e->a_slot[t.slot], bytes));
      } else {
        ZZ_CHECK(dev->ops->read(dev, (zz_lane)t.lane, e->a_stage[t.slot], e->a_slot[t.slot], bytes));
        memset(e->a_stage[t.slot] + bytes, 0, zz_al(bytes, ZZ_DISK_BLOCK) - bytes); /* padding written to disk */
        ZZ_CHECK(dev->ops->sync(dev, (zz_lane)t.lane));
        ZZ_CHECK(zz_disk_write(&e->disk, e->a_stage[t.slot], zz_al(bytes, ZZ_DISK_BLOCK), (size_t)h->offset));
      }
      break;
    }
  }
  return dev->ops->sync(dev, (zz_lane)t.lane);
}

static uint64_t zz_submit(zz_engine *e, int io_lane, zz_io t) {
  t.lane = io_lane + 1; /* ZZ_LANE_LOAD_WEIGHT, LOAD_CACHE, STORE_CACHE */
  return zz_lanes_submit(e->lanes, io_lane, &t, sizeof t);
}

/* ---------------------------------------------------------------- create */

static zz_status zz_take(zz_engine *e, zz_tier t, zz_purpose p, size_t bytes, char **ptr, size_t *off) {
  void *q = NULL;
  size_t o = 0;
  ZZ_CHECK(zz_arena_take(&e->arenas[t][p], bytes, &q, &o));
  if (ptr) *ptr = q;
  if (off) *off = o + e->disk_base[p]; /* the offload file holds the disk arenas back to back */
  return ZZ_OK;
}

/* A host group of block-aligned buffers, taken in one piece as the plan counts it. */
static zz_status zz_take_blocks(zz_engine *e, size_t total, char **out) {
  char *p;
  ZZ_CHECK(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, total + ZZ_DISK_BLOCK, &p, NULL));
  *out = (char *)zz_al((size_t)(uintptr_t)p, ZZ_DISK_BLOCK);
  return ZZ_OK;
}

/* A tensor's home: its bytes on tier t (a pointer, or an offset in the offload
 * file for disk), with the dtype and shape it holds there. */
static zz_status zz_take_home(zz_engine *e, zz_tier t, zz_purpose p, size_t bytes, zz_dtype dt, int ndim,
                              const int64_t *shape, const char *name, zz_tensor *x) {
  char *ptr = NULL;
  size_t off = 0;
  ZZ_CHECK(zz_take(e, t, p, bytes, &ptr, &off));
  memset(x, 0, sizeof *x);
  snprintf(x->name, sizeof x->name, "%s", name);
  x->dtype = dt;
  x->ndim = ndim;
  for (int d = 0; d < ndim; d++) x->shape[d] = shape[d];
  x->tier = t;
  x->data = t == ZZ_TIER_DISK ? NULL : ptr;
  x->offset = (int64_t)off;
  x->nbytes = bytes;
  return ZZ_OK;
}

static zz_status zz_engine_load_weights(zz_engine *e, const zz_checkpoint *ck) {
  const zz_model *m = e->m;
  char *buf;
  ZZ_CHECK(zz_take_blocks(e, e->plan.load_buf - ZZ_DISK_BLOCK, &buf));
  for (int j = 0; j < m->n_layers; j++) {
    ZZ_CHECK(zz_check_stop()); /* Ctrl-C while a big model loads */
    zz_tier t = e->plan.weight_tier[j];
    for (int k = 0; k < m->layers[j].n_weights; k++) {
      const zz_weight_spec *w = &m->layers[j].weights[k];
      zz_tensor *h = &e->w_home[j * ZZ_MAXW + k];
      if (!w->ndim) continue;
      int64_t n = zz_numel(w);
      size_t sbytes = zz_dtype_nbytes(e->store_dt, n);
      if (ck)
        ZZ_CHECK(zz_checkpoint_read(ck, w->name, e->store_dt, buf, n));
      else
        zz_weights_dummy(w, e->store_dt, buf);
      if (t == ZZ_TIER_GPU) {
        ZZ_CHECK(zz_take_home(e, t, ZZ_PURPOSE_WEIGHTS, zz_al((size_t)n * e->es, 256), e->dev->ops->compute_dtype, w->ndim, w->shape, w->name, h));
        ZZ_CHECK(e->dev->ops->upload(e->dev, ZZ_LANE_LOAD_WEIGHT, h->data, buf, e->store_dt, n));
        ZZ_CHECK(e->dev->ops->sync(e->dev, ZZ_LANE_LOAD_WEIGHT));
      } else if (t == ZZ_TIER_CPU) {
        ZZ_CHECK(zz_take_home(e, t, ZZ_PURPOSE_WEIGHTS, zz_al(sbytes, 256), e->store_dt, w->ndim, w->shape, w->name, h));
        memcpy(h->data, buf, sbytes);
      } else {
        ZZ_CHECK(zz_take_home(e, t, ZZ_PURPOSE_WEIGHTS, zz_al(sbytes, ZZ_DISK_BLOCK), e->store_dt, w->ndim, w->shape, w->name, h));
        memset(buf + sbytes, 0, zz_al(sbytes, ZZ_DISK_BLOCK) - sbytes); /* padding written to disk */
        ZZ_CHECK(zz_disk_write(&e->disk, buf, zz_al(sbytes, ZZ_DISK_BLOCK), (size_t)h->offset));
      }
    }
  }
  return ZZ_OK;
}

zz_status zz_engine_create_tiers(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                                 const zz_policy *pol, const zz_shape *shape, const zz_tiers *tiers,
                                 zz_engine **out) {
  ZZ_CHECK(zz_policy_check(pol));
  const zz_config *c = &m->cfg;
  if (shape->prompt_len < 1 || shape->gen_len < 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "prompt length and generation length must be >= 1");
  if (shape->prompt_len + shape->gen_len > c->max_pos)
    return zz_error(ZZ_ERR_INVALID_ARG, "prompt length %lld + generation length %lld exceed the model's %lld positions",
                    (long long)shape->prompt_len, (long long)shape->gen_len, (long long)c->max_pos);
  if (pol->compress_weight || pol->compress_cache)
    return zz_error(ZZ_ERR_UNSUPPORTED, "policy: 4-bit compression of weights or cache is not built yet (roadmap: compression)");
  if (pol->attn_sparsity < 1)
    return zz_error(ZZ_ERR_UNSUPPORTED, "policy: sparse attention (--attn-sparsity < 1) is not built yet");
  if (ck) ZZ_CHECK(zz_checkpoint_check_model(ck, m));

  int64_t gbs = pol->gpu_batch_size, s = shape->prompt_len, t_max = s + shape->gen_len;
  int nb = pol->num_gpu_batches, L = (int)c->n_layers;
  size_t wp = m->arch->workspace_bytes(m, dev, gbs, s, s), wd = m->arch->workspace_bytes(m, dev, gbs, 1, t_max);
  zz_memplan plan;
  zz_dtype store_dt = c->dtype;
  ZZ_CHECK(zz_memplan_build(m, pol, shape, dev->ops->compute_dtype, store_dt, wp > wd ? wp : wd, &plan));
  const char *dir = tiers && tiers->offload_dir ? tiers->offload_dir : getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  size_t cap[ZZ_TIER_COUNT] = {dev->capacity > dev->reserved ? dev->capacity - dev->reserved : 0, zz_host_memory_bytes(), 0};
  if (tiers && tiers->cap[ZZ_TIER_GPU] && tiers->cap[ZZ_TIER_GPU] < cap[ZZ_TIER_GPU]) cap[ZZ_TIER_GPU] = tiers->cap[ZZ_TIER_GPU];
  if (tiers && tiers->cap[ZZ_TIER_CPU]) cap[ZZ_TIER_CPU] = tiers->cap[ZZ_TIER_CPU];
  size_t disk_need = zz_memplan_tier_total(&plan, ZZ_TIER_DISK);
  if (disk_need && access(dir, W_OK | X_OK) != 0) {
    zz_memplan_free(&plan);
    return zz_error(ZZ_ERR_IO, "--offload-dir %s: not a writable directory (the policy puts %zu bytes on disk)", dir,
                    disk_need);
  }
  if (tiers && tiers->cap[ZZ_TIER_DISK])
    cap[ZZ_TIER_DISK] = tiers->cap[ZZ_TIER_DISK];
  else if (disk_need)
    cap[ZZ_TIER_DISK] = zz_disk_free_bytes(dir);
  zz_status st = zz_memplan_check(&plan, cap);
  if (st == ZZ_OK && strcmp(dev->ops->name, "cpu") == 0) st = zz_memplan_check_shared(&plan, zz_host_memory_bytes());
  if (st != ZZ_OK) {
    zz_memplan_free(&plan);
    return st;
  }

  zz_engine *e = calloc(1, sizeof *e);
  if (!e) {
    zz_memplan_free(&plan);
    return zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
  }
  e->dev = dev;
  e->m = m;
  e->pol = *pol;
  e->shape = *shape;
  e->plan = plan;
  e->store_dt = store_dt;
  e->es = zz_dtype_nbytes(dev->ops->compute_dtype, 1);
  e->t_max = t_max;
  e->row = (size_t)c->hidden * e->es;
  e->region = zz_al((size_t)t_max * e->row, ZZ_DISK_BLOCK);
  e->disk.fd = -1;
  e->w_slot_layer[0] = e->w_slot_layer[1] = -1;
  e->w_home = calloc((size_t)m->n_layers * ZZ_MAXW, sizeof *e->w_home);
  e->k_home = calloc((size_t)L * (size_t)nb, sizeof *e->k_home);
  e->v_home = calloc((size_t)L * (size_t)nb, sizeof *e->v_home);
  e->a_home = calloc((size_t)nb, sizeof *e->a_home);
  e->batches = calloc((size_t)nb, sizeof *e->batches);
  if (!e->w_home || !e->k_home || !e->v_home || !e->a_home || !e->batches) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "engine: out of memory");
    goto fail;
  }
  /* the arenas, exactly as planned */
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
      zz_arena *a = &e->arenas[t][p];
      a->tier = (zz_tier)t;
      a->purpose = (zz_purpose)p;
      a->cap = plan.bytes[t][p];
      if (!a->cap || t == ZZ_TIER_DISK) continue;
      if (t == ZZ_TIER_GPU)
        ZZ_CHECK_GOTO(dev->ops->alloc(dev, a->cap, &e->arena_mem[t][p]), st, fail);
      else
        ZZ_CHECK_GOTO(dev->ops->host_alloc(dev, a->cap, &e->arena_mem[t][p]), st, fail);
      a->base = e->arena_mem[t][p];
    }
  for (int p = 1; p < ZZ_PURPOSE_COUNT; p++) e->disk_base[p] = e->disk_base[p - 1] + plan.bytes[ZZ_TIER_DISK][p - 1];
  if (disk_need) {
    ZZ_CHECK_GOTO(zz_disk_open(dir, disk_need, &e->disk), st, fail);
    e->has_disk = true;
  }

  /* staging: device slots and host buffers for the overlap */
  if (plan.any_offload[ZZ_PURPOSE_WEIGHTS])
    for (int i = 0; i < 2; i++)
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, zz_al(plan.max_layer_bytes, 256), &e->w_slot[i], NULL), st, fail);
  if (plan.any_disk[ZZ_PURPOSE_WEIGHTS]) ZZ_CHECK_GOTO(zz_take_blocks(e, zz_al(plan.max_layer_store, ZZ_DISK_BLOCK), &e->w_stage), st, fail);
  size_t kv = zz_al((size_t)gbs * t_max * e->row, 256), kv_disk = (size_t)gbs * e->region;
  if (plan.any_offload[ZZ_PURPOSE_CACHE])
    for (int i = 0; i < 3; i++) {
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, kv, &e->k_slot[i], NULL), st, fail);
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, kv, &e->v_slot[i], NULL), st, fail);
    }
  if (plan.any_disk[ZZ_PURPOSE_CACHE]) {
    char *g;
    ZZ_CHECK_GOTO(zz_take_blocks(e, 6 * kv_disk, &g), st, fail);
    for (int i = 0; i < 3; i++) {
      e->k_stage[i] = g + (size_t)(2 * i) * kv_disk;
      e->v_stage[i] = g + (size_t)(2 * i + 1) * kv_disk;
    }
  }
  size_t act = zz_al((size_t)(gbs * s) * e->row, 256);
  if (plan.any_offload[ZZ_PURPOSE_ACT])
    for (int i = 0; i < 3; i++) ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_STAGING, act, &e->a_slot[i], NULL), st, fail);
  if (plan.any_disk[ZZ_PURPOSE_ACT]) {
    char *g;
    size_t ad = zz_al(act, ZZ_DISK_BLOCK);
    ZZ_CHECK_GOTO(zz_take_blocks(e, 3 * ad, &g), st, fail);
    for (int i = 0; i < 3; i++) e->a_stage[i] = g + (size_t)i * ad;
  }
  if (pol->cpu_attention && plan.any_offload[ZZ_PURPOSE_CACHE]) {
    float **bufs[4] = {&e->ca_q, &e->ca_k, &e->ca_v, &e->ca_o};
    for (int i = 0; i < 4; i++)
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, zz_al((size_t)(gbs * c->hidden) * 4, 256), (char **)bufs[i], NULL), st, fail);
    ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_STAGING, zz_al(zz_cpu_attention_scratch(gbs, c->n_heads, t_max) * 4, 256),
                          (char **)&e->ca_scratch, NULL), st, fail);
  }

  /* homes: cache, activations, index arrays */
  const int64_t kv_shape[3] = {gbs, t_max, c->hidden}, act_shape[3] = {gbs, s, c->hidden};
  for (int i = 0; i < (int)((size_t)L * (size_t)nb); i++) { /* below 2^24: n_layers <= 4096, num_gb <= 4096 */
    zz_tier t = plan.cache_tier[i];
    size_t b = t == ZZ_TIER_DISK ? kv_disk : kv;
    char kn[64], vn[64];
    snprintf(kn, sizeof kn, "cache.%d.%d.k", i / nb, i % nb);
    snprintf(vn, sizeof vn, "cache.%d.%d.v", i / nb, i % nb);
    ZZ_CHECK_GOTO(zz_take_home(e, t, ZZ_PURPOSE_CACHE, b, dev->ops->compute_dtype, 3, kv_shape, kn, &e->k_home[i]), st, fail);
    ZZ_CHECK_GOTO(zz_take_home(e, t, ZZ_PURPOSE_CACHE, b, dev->ops->compute_dtype, 3, kv_shape, vn, &e->v_home[i]), st, fail);
  }
  for (int k = 0; k < nb; k++) {
    zz_tier t = plan.act_tier[k];
    char an[64];
    snprintf(an, sizeof an, "hidden.%d", k);
    ZZ_CHECK_GOTO(zz_take_home(e, t, ZZ_PURPOSE_ACT, t == ZZ_TIER_DISK ? zz_al(act, ZZ_DISK_BLOCK) : act,
                               dev->ops->compute_dtype, 3, act_shape, an, &e->a_home[k]), st, fail);
    zz_batch_state *b = &e->batches[k];
    int32_t **dv[4] = {&b->d_ids, &b->d_pos, &b->d_pad, &b->d_last}, **hv[4] = {&b->ids, &b->pos, &b->pad, &b->last};
    for (int q = 0; q < 4; q++) {
      size_t bytes = zz_al((size_t)(q < 2 ? gbs * s : gbs) * 4, 256);
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_ACT, bytes, (char **)dv[q], NULL), st, fail);
      ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_ACT, bytes, (char **)hv[q], NULL), st, fail);
    }
  }
  ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, zz_al((size_t)(gbs * c->vocab_size) * e->es, 256), (char **)&e->d_logits, NULL), st, fail);
  zz_arena *ws = &e->arenas[ZZ_TIER_GPU][ZZ_PURPOSE_WORKSPACE];
  ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_GPU, ZZ_PURPOSE_WORKSPACE, ws->cap - ws->used, (char **)&e->work, NULL), st, fail);
  ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_WORKSPACE, zz_al((size_t)(gbs * c->vocab_size) * 4, 256), (char **)&e->logits, NULL), st, fail);
  ZZ_CHECK_GOTO(zz_take(e, ZZ_TIER_CPU, ZZ_PURPOSE_WORKSPACE, zz_al(zz_sample_scratch_bytes(c->vocab_size), 256), (char **)&e->sample_scratch, NULL), st, fail);
  ZZ_CHECK_GOTO(zz_engine_load_weights(e, ck), st, fail);
  ZZ_CHECK_GOTO(zz_lanes_create(ZZ_IO_N, pol->overlap, e, zz_io_run, &e->lanes), st, fail);
  *out = e;
  return ZZ_OK;
fail:
  zz_engine_destroy(e);
  return st;
}

zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol,
                           const zz_shape *shape, zz_engine **out) {
  return zz_engine_create_tiers(dev, m, ck, pol, shape, NULL, out);
}

void zz_engine_destroy(zz_engine *e) {
  if (!e) return;
  zz_lanes_destroy(e->lanes);
  for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) {
    if (e->arena_mem[ZZ_TIER_GPU][p]) e->dev->ops->free(e->dev, e->arena_mem[ZZ_TIER_GPU][p]);
    if (e->arena_mem[ZZ_TIER_CPU][p]) e->dev->ops->host_free(e->dev, e->arena_mem[ZZ_TIER_CPU][p]);
  }
  if (e->has_disk) zz_disk_close(&e->disk);
  free(e->w_home);
  free(e->k_home);
  free(e->v_home);
  free(e->a_home);
  free(e->batches);
  zz_memplan_free(&e->plan);
  free(e);
}

void zz_engine_peaks(const zz_engine *e, size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]) {
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) peak[t][p] = e->arenas[t][p].peak;
}

const zz_memplan *zz_engine_plan(const zz_engine *e) { return &e->plan; }

void zz_engine_get_stats(const zz_engine *e, zz_engine_stats *out) {
  memset(out, 0, sizeof *out);
  out->busy_s[ZZ_LANE_COMPUTE] = e->compute_s;
  for (int i = 0; i < ZZ_IO_N; i++) out->busy_s[i + 1] = zz_lanes_busy(e->lanes, i);
  out->wall_s = e->wall_s;
  out->disk_read_bytes = e->disk.read_bytes;
  out->disk_write_bytes = e->disk.write_bytes;
  out->disk_read_s = (double)e->disk.read_ns * 1e-9;
}

/* ---------------------------------------------------------------- CPU attention */

/* Decode attention beside a cache on the CPU tier (or staged there from disk):
 * only q and the new k, v come down and the output goes up (FlexGen §4.2). */
typedef struct zz_attend_ctx {
  zz_engine *e;
  char *k, *v;       /* host cache of this (layer, batch), compute dtype */
  int64_t stride;    /* elements between two sequences of that cache */
  int64_t cnt, pos;
  const int32_t *pad; /* host */
} zz_attend_ctx;

static zz_status zz_cpu_attend(void *ctx, const void *q, const void *k, const void *v, void *out) {
  zz_attend_ctx *a = ctx;
  zz_engine *e = a->e;
  zz_device *dev = e->dev;
  const zz_config *c = &e->m->cfg;
  int64_t n = a->cnt * c->hidden;
  ZZ_CHECK(dev->ops->download(dev, ZZ_LANE_COMPUTE, e->ca_q, ZZ_DTYPE_F32, q, n));
  ZZ_CHECK(dev->ops->download(dev, ZZ_LANE_COMPUTE, e->ca_k, ZZ_DTYPE_F32, k, n));
  ZZ_CHECK(dev->ops->download(dev, ZZ_LANE_COMPUTE, e->ca_v, ZZ_DTYPE_F32, v, n));
  ZZ_CHECK(dev->ops->sync(dev, ZZ_LANE_COMPUTE));
  /* the cache keeps the device's dtype (f16 beside a GPU), so the new rows are
   * narrowed as they are appended and widened as attention reads them */
  zz_dtype kv_dt = dev->ops->compute_dtype;
  for (int64_t i = 0; i < a->cnt; i++) {
    size_t at = (size_t)(i * a->stride + a->pos * c->hidden) * e->es;
    zz_convert(ZZ_DTYPE_F32, e->ca_k + i * c->hidden, kv_dt, a->k + at, c->hidden);
    zz_convert(ZZ_DTYPE_F32, e->ca_v + i * c->hidden, kv_dt, a->v + at, c->hidden);
  }
  zz_cpu_attention_kv(e->ca_q, a->k, a->v, kv_dt, a->stride, a->cnt, 1, a->pos + 1, a->pos, c->n_heads,
                      c->hidden / c->n_heads, a->pad, e->ca_o, e->ca_scratch);
  return dev->ops->upload(dev, ZZ_LANE_COMPUTE, out, e->ca_o, ZZ_DTYPE_F32, n);
}

/* ---------------------------------------------------------------- generate */

/* Host index arrays of a batch for the prompt: left padded; positions are Hugging
 * Face's (real tokens before this one, plus OPT's offset 2). */
static void zz_fill_prefill(const zz_engine *e, zz_batch_state *b, const zz_request *req, int64_t first,
                            int64_t count, int64_t s) {
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

typedef struct zz_gen {
  zz_engine *e;
  const zz_request *req;
  zz_result *r;
  bool *done;
  zz_rng *rng;
  int64_t n, s, n_batches, live;
} zz_gen;

static int64_t zz_batch_count(const zz_gen *g, int64_t k) {
  int64_t gbs = g->e->pol.gpu_batch_size, first = k * gbs;
  return g->n - first < gbs ? g->n - first : gbs;
}

/* Samples the next token of every live sequence of batch k from its logits. */
static zz_status zz_sample_batch(zz_gen *g, int64_t k, int step) {
  zz_engine *e = g->e;
  const zz_config *c = &e->m->cfg;
  int64_t cnt = zz_batch_count(g, k), first = k * e->pol.gpu_batch_size;
  ZZ_CHECK(e->dev->ops->download(e->dev, ZZ_LANE_COMPUTE, e->logits, ZZ_DTYPE_F32, e->d_logits, cnt * c->vocab_size));
  ZZ_CHECK(e->dev->ops->sync(e->dev, ZZ_LANE_COMPUTE));
  for (int64_t i = 0; i < cnt; i++) {
    int64_t q = first + i;
    if (g->done[q]) continue;
    const float *lg = e->logits + i * c->vocab_size;
    if (g->req->on_logits) g->req->on_logits(g->req->ctx, q, step, lg, c->vocab_size);
    int32_t tok = zz_sample(lg, c->vocab_size, &g->req->sampling, &g->rng[q], e->sample_scratch);
    g->r->tokens[q][g->r->n_tokens[q]++] = tok;
    if (tok == c->eos && !g->req->ignore_eos) {
      g->done[q] = true;
      g->live--;
    }
  }
  return ZZ_OK;
}

static bool zz_cache_on_host_path(const zz_engine *e, int ci, int step) {
  return e->pol.cpu_attention && step > 0 && e->plan.cache_tier[ci] != ZZ_TIER_GPU;
}

/* Issues the load of what step (j, k) needs besides weights: its cache rows. */
static void zz_prefetch_cache(zz_engine *e, zz_gen *g, int j, int64_t k, int slot, int64_t pos, int step) {
  const zz_layer *l = &e->m->layers[j];
  if (!l->has_cache || pos == 0) return;
  int ci = l->index * e->pol.num_gpu_batches + (int)k;
  zz_tier t = e->plan.cache_tier[ci];
  if (t == ZZ_TIER_GPU) return;
  bool host = zz_cache_on_host_path(e, ci, step);
  if (host && t == ZZ_TIER_CPU) return; /* attention reads the home itself */
  zz_io io = {.kind = host ? ZZ_IO_LOAD_CACHE_HOST : ZZ_IO_LOAD_CACHE, .index = ci, .slot = slot,
              .cnt = zz_batch_count(g, k), .p0 = 0, .p1 = pos};
  zz_submit(e, ZZ_IO_LOAD, io);
}

static zz_status zz_run_token(zz_gen *g, int step) {
  zz_engine *e = g->e;
  const zz_model *m = e->m;
  const zz_config *c = &m->cfg;
  zz_device *dev = e->dev;
  int nl = m->n_layers;
  int64_t nbt = g->n_batches, s = g->s;
  int64_t sq = step == 0 ? s : 1, pos = step == 0 ? 0 : s + step - 1;
  int64_t nsteps = nl * nbt;
  uint64_t *store_ticket = calloc((size_t)nsteps, sizeof *store_ticket);
  if (!store_ticket) return zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
  zz_status st = ZZ_OK;

  /* inputs of every batch for this step */
  for (int64_t k = 0; k < nbt; k++) {
    zz_batch_state *b = &e->batches[k];
    int64_t first = k * e->pol.gpu_batch_size, cnt = zz_batch_count(g, k);
    if (step == 0) {
      zz_fill_prefill(e, b, g->req, first, cnt, s);
    } else {
      for (int64_t i = 0; i < cnt; i++) {
        int64_t q = first + i;
        b->ids[i] = g->done[q] ? c->pad : g->r->tokens[q][g->r->n_tokens[q] - 1];
        b->pos[i] = (int32_t)(pos - b->pad[i] + 2);
        b->last[i] = (int32_t)i;
      }
    }
    ZZ_CHECK_GOTO(dev->ops->write(dev, ZZ_LANE_COMPUTE, b->d_ids, b->ids, (size_t)(cnt * sq) * 4), st, out);
    ZZ_CHECK_GOTO(dev->ops->write(dev, ZZ_LANE_COMPUTE, b->d_pos, b->pos, (size_t)(cnt * sq) * 4), st, out);
    ZZ_CHECK_GOTO(dev->ops->write(dev, ZZ_LANE_COMPUTE, b->d_pad, b->pad, (size_t)cnt * 4), st, out);
    ZZ_CHECK_GOTO(dev->ops->write(dev, ZZ_LANE_COMPUTE, b->d_last, b->last, (size_t)cnt * 4), st, out);
  }
  /* layer 0's weights, unless the previous token prefetched them */
  if (e->plan.weight_tier[0] != ZZ_TIER_GPU && e->w_slot_layer[0] != 0) {
    zz_submit(e, ZZ_IO_WEIGHT, (zz_io){.kind = ZZ_IO_LOAD_WEIGHTS, .index = 0, .slot = 0});
    e->w_slot_layer[0] = 0;
  }
  ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_WEIGHT, 0), st, out);
  zz_prefetch_cache(e, g, 0, 0, 0, pos, step);
  ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_LOAD, 0), st, out);

  for (int64_t q = 0; q < nsteps; q++) {
    int j = (int)(q / nbt);
    int64_t k = q % nbt, cnt = zz_batch_count(g, k);
    const zz_layer *layer = &m->layers[j];
    int slot = (int)(q % 3);
    /* weight lane: the next layer (layer 0 of the next token after the last) */
    if (k == 0) {
      int nj = j + 1 < nl ? j + 1 : 0;
      bool next_token = j + 1 == nl && step + 1 < g->req->max_new_tokens && (nl % 2) == 0;
      if ((j + 1 < nl || next_token) && e->plan.weight_tier[nj] != ZZ_TIER_GPU) {
        zz_submit(e, ZZ_IO_WEIGHT, (zz_io){.kind = ZZ_IO_LOAD_WEIGHTS, .index = nj, .slot = nj % 2});
        e->w_slot_layer[nj % 2] = nj;
      }
    }
    /* load lane: the cache of the next step */
    if (q + 1 < nsteps) zz_prefetch_cache(e, g, (int)((q + 1) / nbt), (q + 1) % nbt, (int)((q + 1) % 3), pos, step);

    /* compute */
    double t0 = zz_now();
    void *wp[ZZ_MAXW];
    if (e->plan.weight_tier[j] == ZZ_TIER_GPU)
      for (int w = 0; w < ZZ_MAXW; w++) wp[w] = w < layer->n_weights ? e->w_home[j * ZZ_MAXW + w].data : NULL;
    else
      zz_slot_ptrs(e, j, e->w_slot[j % 2], wp);
    zz_batch_state *b = &e->batches[k];
    bool act_off = e->plan.act_tier[k] != ZZ_TIER_GPU;
    zz_step stp = {
        .b = cnt, .sq = sq, .pos = pos,
        .ids = b->d_ids, .positions = b->d_pos, .pad = b->d_pad, .last = b->d_last,
        .hidden = act_off ? e->a_slot[slot] : e->a_home[k].data,
        .kv_stride = e->t_max * c->hidden,
        .logits = e->d_logits,
        .work = e->work,
    };
    zz_attend_ctx actx;
    int ci = layer->has_cache ? layer->index * e->pol.num_gpu_batches + (int)k : -1;
    zz_tier ct = ci >= 0 ? e->plan.cache_tier[ci] : ZZ_TIER_GPU;
    if (ci >= 0 && ct == ZZ_TIER_GPU) {
      stp.k = e->k_home[ci].data;
      stp.v = e->v_home[ci].data;
    } else if (ci >= 0 && zz_cache_on_host_path(e, ci, step)) {
      bool on_cpu = ct == ZZ_TIER_CPU;
      actx = (zz_attend_ctx){
          .e = e,
          .k = on_cpu ? e->k_home[ci].data : e->k_stage[slot],
          .v = on_cpu ? e->v_home[ci].data : e->v_stage[slot],
          .stride = on_cpu ? e->t_max * c->hidden : (int64_t)(e->region / e->es),
          .cnt = cnt, .pos = pos, .pad = b->pad,
      };
      stp.attend = zz_cpu_attend;
      stp.attend_ctx = &actx;
    } else if (ci >= 0) {
      stp.k = e->k_slot[slot];
      stp.v = e->v_slot[slot];
    }
    ZZ_CHECK_GOTO(m->arch->forward(dev, m, layer, wp, &stp), st, out);
    if (layer->kind == ZZ_LAYER_OUTPUT_EMBED) ZZ_CHECK_GOTO(zz_sample_batch(g, k, step), st, out);
    ZZ_CHECK_GOTO(dev->ops->sync(dev, ZZ_LANE_COMPUTE), st, out);
    e->compute_s += zz_now() - t0;

    /* store lane: the new cache rows and the activations of this step */
    uint64_t ticket = 0;
    if (ci >= 0 && ct != ZZ_TIER_GPU) {
      bool host = zz_cache_on_host_path(e, ci, step);
      if (!(host && ct == ZZ_TIER_CPU))
        ticket = zz_submit(e, ZZ_IO_STORE, (zz_io){.kind = host ? ZZ_IO_STORE_CACHE_HOST : ZZ_IO_STORE_CACHE,
                                                   .index = ci, .slot = slot, .cnt = cnt, .p0 = pos, .p1 = pos + sq});
    }
    size_t act_bytes = (size_t)(cnt * sq) * e->row;
    if (act_off && layer->kind != ZZ_LAYER_OUTPUT_EMBED)
      ticket = zz_submit(e, ZZ_IO_STORE, (zz_io){.kind = ZZ_IO_STORE_ACT, .index = (int)k, .slot = slot, .p1 = (int64_t)act_bytes});
    store_ticket[q] = ticket ? ticket : (q > 0 ? store_ticket[q - 1] : 0);

    /* sync: next step's cache is in; the stores of step q-1 are out */
    ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_LOAD, 0), st, out);
    if (q > 0 && store_ticket[q - 1]) ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_STORE, store_ticket[q - 1]), st, out);
    if (q + 1 < nsteps) {
      int nj = (int)((q + 1) / nbt);
      int64_t nk = (q + 1) % nbt;
      if (nj > 0 && e->plan.act_tier[nk] != ZZ_TIER_GPU) {
        /* the batch's hidden state was stored nbt steps ago (this step when nbt = 1) */
        int64_t prev = q + 1 - nbt;
        if (store_ticket[prev]) ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_STORE, store_ticket[prev]), st, out);
        zz_submit(e, ZZ_IO_LOAD, (zz_io){.kind = ZZ_IO_LOAD_ACT, .index = (int)nk, .slot = (int)((q + 1) % 3),
                                          .p1 = (int64_t)((size_t)(zz_batch_count(g, nk) * sq) * e->row)});
        ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_LOAD, 0), st, out);
      }
    }
    if (k == nbt - 1) ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_WEIGHT, 0), st, out);
  }
  ZZ_CHECK_GOTO(zz_lanes_wait(e->lanes, ZZ_IO_STORE, 0), st, out);
out:
  if (st != ZZ_OK) {
    /* a slot whose load may have failed holds no layer a later block can trust */
    e->w_slot_layer[0] = e->w_slot_layer[1] = -1;
    /* drain every lane so no task outlives the block */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", zz_error_message());
    for (int i = 0; i < ZZ_IO_N; i++) zz_lanes_wait(e->lanes, i, 0);
    zz_error(st, "%s", msg);
  }
  free(store_ticket);
  return st;
}

zz_status zz_engine_generate(zz_engine *e, const zz_request *req, zz_result *res) {
  const zz_config *c = &e->m->cfg;
  int64_t gbs = e->pol.gpu_batch_size, nb = e->pol.num_gpu_batches;
  if (req->n < 1 || req->n > gbs * nb)
    return zz_error(ZZ_ERR_INVALID_ARG, "block of %lld prompts; this engine takes 1 to %lld", (long long)req->n,
                    (long long)(gbs * nb));
  if (req->max_new_tokens < 1 || req->max_new_tokens > e->shape.gen_len)
    return zz_error(ZZ_ERR_INVALID_ARG, "max new tokens %d outside 1..%lld", req->max_new_tokens,
                    (long long)e->shape.gen_len);
  int64_t s = 0;
  for (int64_t i = 0; i < req->n; i++) {
    if (req->lens[i] < 1 || req->lens[i] > e->shape.prompt_len)
      return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld has %lld tokens; this engine takes 1 to %lld", (long long)i,
                      (long long)req->lens[i], (long long)e->shape.prompt_len);
    for (int64_t r = 0; r < req->lens[i]; r++)
      if (req->ids[i][r] < 0 || req->ids[i][r] >= c->vocab_size)
        return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld: token id %d at %lld is outside the vocabulary (%lld)",
                        (long long)i, req->ids[i][r], (long long)r, (long long)c->vocab_size);
    if (req->lens[i] > s) s = req->lens[i];
  }
  int64_t n = req->n;
  zz_result r = {0};
  zz_gen g = {.e = e, .req = req, .r = &r, .n = n, .s = s, .n_batches = (n + gbs - 1) / gbs, .live = n};
  r.tokens = calloc((size_t)n, sizeof *r.tokens);
  r.n_tokens = calloc((size_t)n, sizeof *r.n_tokens);
  g.done = calloc((size_t)n, sizeof *g.done);
  g.rng = calloc((size_t)n, sizeof *g.rng);
  zz_status st = ZZ_OK;
  if (!r.tokens || !r.n_tokens || !g.done || !g.rng) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
    goto out;
  }
  for (int64_t i = 0; i < n; i++) {
    if (!(r.tokens[i] = malloc((size_t)req->max_new_tokens * sizeof **r.tokens))) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
      goto out;
    }
    zz_rng_seed(&g.rng[i], req->sampling.seed, req->streams ? req->streams[i] : (uint64_t)i);
  }
  double t0 = zz_now(), t_prefill = t0;
  for (int step = 0; step < req->max_new_tokens && g.live > 0; step++) {
    ZZ_CHECK_GOTO(zz_check_stop(), st, out); /* a safe point: the block is abandoned, nothing half-written */
    ZZ_CHECK_GOTO(zz_run_token(&g, step), st, out);
    if (step == 0) t_prefill = zz_now();
  }
  /* a prefetched layer 0 that no token used is still valid for the next block */
  r.prefill_s = t_prefill - t0;
  r.decode_s = zz_now() - t_prefill;
  e->wall_s += zz_now() - t0;
out:
  free(g.done);
  free(g.rng);
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
