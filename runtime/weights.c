/*
 * weights.c — the weights of a slice: loaded once per process from the checkpoint
 * (or made by --dummy) to the homes the memory plan gave them, and, for layers
 * not resident on the device, brought into one of two device slots by the weight
 * lane while the previous layer computes (FlexGen's "load weight").
 */
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

/* Quantizes the weight just read into the load buffer (in dt) in place: row r's
 * groups land at r * row bytes, never past the start of row r + 1's source. */
static zz_status zz_weights_quantize_load(zz_engine *e, const zz_weight_spec *w, zz_dtype dt, zz_qfmt q) {
  int64_t len = w->shape[w->ndim - 1], rows = zz_weight_numel(w) / len;
  size_t rb = zz_q_row_bytes(q, len), sb = zz_dtype_nbytes(dt, len);
  float *row = malloc((size_t)len * sizeof *row);
  if (!row) return zz_error(ZZ_ERR_NO_MEMORY, "weights: out of memory quantizing %s", w->name);
  for (int64_t r = 0; r < rows; r++) {
    zz_convert(dt, e->w.load + (size_t)r * sb, ZZ_DTYPE_F32, row, len);
    zz_q_quantize(q, row, 1, len, e->w.load + (size_t)r * rb);
  }
  free(row);
  return ZZ_OK;
}

/* Rounds the n elements (in dt) just read into the load buffer to bf16 in place,
 * once, here: a chunk at a time through a buffer, each written where no unread
 * source element lies (bf16 elements are never wider than the source's). */
static void zz_weights_round_load(zz_engine *e, zz_dtype dt, int64_t n) {
  uint16_t chunk[1024];
  size_t sb = zz_dtype_nbytes(dt, 1);
  for (int64_t i = 0; i < n; i += 1024) {
    int64_t m = n - i < 1024 ? n - i : 1024;
    zz_convert(dt, e->w.load + (size_t)i * sb, ZZ_DTYPE_BF16, chunk, m);
    memcpy(e->w.load + (size_t)i * sizeof *chunk, chunk, (size_t)m * sizeof *chunk);
  }
}

/* A home whose bytes are already the device's (Q4, or bf16 weights: the CPU
 * device computes on them as stored), moved without conversion. */
static bool zz_weights_as_is(const zz_tensor *h) { return h->dtype == ZZ_DTYPE_Q4 || h->dtype == ZZ_DTYPE_BF16; }

/* The home of expert x of weight k (expert-stacked) of slice layer jl, and x's
 * index within it (local_out, may be NULL): experts lie on the tiers in order. */
static const zz_tensor *zz_weights_expert_home(const zz_engine *e, int jl, int k, int64_t x, int64_t *local_out) {
  const zz_expert_split *sp = &e->plan.expert_split[jl];
  int t = 0;
  while (t < ZZ_TIER_COUNT - 1 && x >= sp->n[t]) x -= sp->n[t++];
  if (local_out) *local_out = x;
  return &e->w.xhome[(jl * ZZ_MAXW + k) * ZZ_TIER_COUNT + t];
}

/* The weight just read into the load buffer (n elements in sdt), to one home:
 * `bytes` of it from `src` (elements of the buffer's dtype after any quantizing or
 * rounding). A disk home's bytes are moved to the buffer's start first: the disk
 * takes block-aligned memory, and its tail is zeroed so that no uninitialised byte
 * reaches the file (a disk home is the last of a weight's homes: nothing read later). */
static zz_status zz_weights_to_home(zz_engine *e, const zz_tensor *h, const char *src, size_t bytes, zz_dtype sdt,
                                    int64_t n) {
  zz_device *dev = e->dev;
  if (h->tier == ZZ_TIER_GPU) {
    if (zz_weights_as_is(h)) ZZ_CHECK(zz_device_write(dev, ZZ_LANE_LOAD_WEIGHT, h->data, src, bytes));
    else
      ZZ_CHECK(zz_device_upload(dev, ZZ_LANE_LOAD_WEIGHT, h->data, src, sdt, n));
    return zz_device_sync(dev, ZZ_LANE_LOAD_WEIGHT);
  }
  if (h->tier == ZZ_TIER_CPU) {
    memcpy(h->data, src, bytes);
    return ZZ_OK;
  }
  memmove(e->w.load, src, bytes);
  memset(e->w.load + bytes, 0, h->nbytes - bytes);
  return zz_disk_write(&e->disk, e->w.load, h->nbytes, (size_t)h->offset);
}

zz_status zz_weights_load_all(zz_engine *e, const zz_checkpoint *ck) {
  zz_dtype sdt = e->plan.spec.store_dtype;
  /* --dummy values are made by every thread the device has on the host */
  zz_pool *pool = zz_device_compute_pool(e->dev) ? zz_device_compute_pool(e->dev) : zz_device_attn_pool(e->dev);
  for (int jl = 0; jl < e->l1 - e->l0; jl++) {
    ZZ_CHECK(zz_check_stop()); /* Ctrl-C while a large model loads */
    const zz_layer *l = &e->m->layers[e->l0 + jl];
    for (int k = 0; k < l->n_weights; k++) {
      const zz_weight_spec *w = &l->weights[k];
      if (!w->ndim) continue;
      /* an expert-stacked weight: its experts' homes on each tier, in expert order */
      const zz_tensor *xh = &e->w.xhome[(jl * ZZ_MAXW + k) * ZZ_TIER_COUNT];
      const zz_tensor *h = w->experts ? zz_weights_expert_home(e, jl, k, 0, NULL) : &e->w.home[jl * ZZ_MAXW + k];
      int64_t n = zz_weight_numel(w);
      size_t sbytes = zz_weight_bytes(w, sdt);
      if (!ck && !w->experts && h->tier == ZZ_TIER_CPU && h->dtype == sdt) {
        zz_weights_dummy(w, sdt, h->data, pool); /* straight into its home: no copy */
        continue;
      }
      if (ck) ZZ_CHECK(zz_checkpoint_read_weight(ck, w, sdt, e->w.load));
      else
        zz_weights_dummy(w, sdt, e->w.load, pool);
      /* every home of a weight has one format: Q4, bf16 or its tier's float */
      if (h->dtype == ZZ_DTYPE_Q4) {
        /* quantized once, here, into the home tier; every later transfer moves these bytes */
        ZZ_CHECK(zz_weights_quantize_load(e, w, sdt, h->q));
        sbytes = zz_weight_bytes_q(w, ZZ_DTYPE_Q4, h->q);
      } else if (h->dtype == ZZ_DTYPE_BF16 && sdt != ZZ_DTYPE_BF16) {
        zz_weights_round_load(e, sdt, n);
        sbytes = zz_weight_bytes(w, ZZ_DTYPE_BF16);
      }
      if (!w->experts) {
        ZZ_CHECK(zz_weights_to_home(e, h, e->w.load, sbytes, sdt, n));
        continue;
      }
      size_t xb = sbytes / (size_t)w->experts; /* one expert's bytes in the buffer */
      int64_t first = 0, xn = n / w->experts;
      for (int t = 0; t < ZZ_TIER_COUNT; t++) {
        int64_t cnt = e->plan.expert_split[jl].n[t];
        if (!cnt) continue;
        ZZ_CHECK(zz_weights_to_home(e, &xh[t], e->w.load + (size_t)first * xb, (size_t)cnt * xb, sdt, cnt * xn));
        first += cnt;
      }
    }
  }
  return ZZ_OK;
}

void zz_weights_bind_device(zz_engine *e) {
  zz_dtype cdt = zz_device_describe(e->dev)->compute_dtype;
  for (int jl = 0; jl < e->l1 - e->l0; jl++) {
    const zz_layer *l = &e->m->layers[e->l0 + jl];
    /* an offloaded layer is always loaded into slot jl % 2 (zz_load_weight) */
    const char *slot = zz_memplan_layer_resident(&e->plan, jl) ? NULL : e->w.slot[jl % 2];
    size_t off[ZZ_MAXW];
    zz_qfmt qbuf;
    const zz_qfmt *q = zz_policy_wfmt(&e->pol, &qbuf);
    bool bf16 = e->plan.spec.bf16_weights;
    if (slot) zz_layer_weight_layout_b(l, cdt, q, bf16, ZZ_ALIGN, off);
    for (int k = 0; k < ZZ_MAXW; k++) {
      zz_tensor *t = &e->w.dev[jl * ZZ_MAXW + k];
      memset(t, 0, sizeof *t);
      if (k >= l->n_weights || !l->weights[k].ndim) continue;
      const zz_weight_spec *ws = &l->weights[k];
      /* on the GPU: read from its home (a resident layer's experts: all in their GPU home) */
      const zz_tensor *h = ws->experts ? zz_weights_expert_home(e, jl, k, 0, NULL) : &e->w.home[jl * ZZ_MAXW + k];
      if (!slot || (!ws->experts && h->tier == ZZ_TIER_GPU)) {
        *t = *h;
        continue;
      }
      snprintf(t->name, sizeof t->name, "%s", ws->name);
      t->dtype = zz_weight_dtype_b(ws, cdt, q, bf16); /* Q4 and bf16 stay so in the slot */
      if (t->dtype == ZZ_DTYPE_Q4) t->q = *q;
      t->ndim = ws->ndim;
      t->shape[0] = ws->shape[0];
      t->shape[1] = ws->shape[1];
      t->tier = ZZ_TIER_GPU;
      t->data = (char *)slot + off[k];
      t->nbytes = zz_weight_bytes_q(ws, t->dtype, q ? *q : ZZ_QFMT_DEFAULT);
    }
  }
}

zz_status zz_weights_load_slot(zz_engine *e, int jl, zz_lane lane) {
  zz_device *dev = e->dev;
  const zz_layer *l = &e->m->layers[e->l0 + jl];
  const zz_tensor *dst = &e->w.dev[jl * ZZ_MAXW];
  for (int k = 0; k < l->n_weights; k++) {
    if (!dst[k].ndim || l->weights[k].experts) continue; /* experts: as the router asks (zz_weights_load_expert) */
    const zz_tensor *h = &e->w.home[jl * ZZ_MAXW + k];
    if (h->tier == ZZ_TIER_GPU) continue; /* read from its home (zz_weights_bind_device) */
    int64_t n = zz_weight_numel(&l->weights[k]);
    const char *src = h->data;
    if (h->tier == ZZ_TIER_DISK) {
      ZZ_CHECK(zz_disk_read(&e->disk, e->w.stage, h->nbytes, (size_t)h->offset));
      src = e->w.stage;
    }
    if (zz_weights_as_is(h)) /* compressed (bf16) bytes cross as they are */
      ZZ_CHECK(zz_device_write(dev, lane, dst[k].data, src, dst[k].nbytes));
    else
      ZZ_CHECK(zz_device_upload(dev, lane, dst[k].data, src, h->dtype, n));
    /* the disk stage is reused by the next weight: the copy must be done */
    if (h->tier == ZZ_TIER_DISK) ZZ_CHECK(zz_device_sync(dev, lane));
  }
  return ZZ_OK;
}

zz_status zz_weights_load_expert(zz_engine *e, int jl, int64_t x) {
  uint64_t *have = e->w.expert_have[jl % 2];
  if (have[x / 64] >> (x % 64) & 1) return ZZ_OK;
  zz_device *dev = e->dev;
  const zz_layer *l = &e->m->layers[e->l0 + jl];
  for (int k = 0; k < l->n_weights; k++) {
    const zz_weight_spec *ws = &l->weights[k];
    if (!ws->ndim || !ws->experts) continue;
    int64_t at_x; /* x's index among its home's experts */
    const zz_tensor *h = zz_weights_expert_home(e, jl, k, x, &at_x), *d = &e->w.dev[jl * ZZ_MAXW + k];
    /* expert x's rows: the same share of the home's bytes and of the slot's */
    size_t hb = zz_weight_bytes_q(ws, h->dtype, h->q) / (size_t)ws->experts, db = d->nbytes / (size_t)ws->experts;
    char *dst = (char *)d->data + (size_t)x * db;
    if (h->tier == ZZ_TIER_GPU) { /* already on the device, in the slot's format */
      ZZ_CHECK(zz_device_copy(dev, ZZ_LANE_COMPUTE, dst, (const char *)h->data + (size_t)at_x * hb, db));
      continue;
    }
    const char *src;
    if (h->tier == ZZ_TIER_DISK) { /* its range widened to whole disk blocks, through the idle load buffer */
      size_t at = (size_t)h->offset + (size_t)at_x * hb, a0 = zz_align_down(at, ZZ_DISK_ALIGN);
      ZZ_CHECK(zz_disk_read(&e->disk, e->w.load, zz_align_up(at + hb, ZZ_DISK_ALIGN) - a0, a0));
      src = e->w.load + (at - a0);
    } else { /* a disk home has no host pointer to offset */
      src = (const char *)h->data + (size_t)at_x * hb;
    }
    if (zz_weights_as_is(h)) ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, dst, src, db));
    else
      ZZ_CHECK(zz_device_upload(dev, ZZ_LANE_COMPUTE, dst, src, h->dtype, zz_weight_numel(ws) / ws->experts));
    if (h->tier == ZZ_TIER_DISK) ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_COMPUTE)); /* before the buffer is reused */
  }
  have[x / 64] |= 1ull << (x % 64);
  return ZZ_OK;
}
