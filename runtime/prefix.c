/*
 * prefix.c — a shared prompt prefix computed once (issue #47, item 3). Prompts of
 * a group that start with the same tokens (a chat template's system prompt,
 * few-shot examples) have the same K and V on those tokens: positions start at
 * each sequence's first real token, so the prefix sits at the same positions in
 * every sequence, only at a different cache row (left padding). The prompt step
 * then runs in two parts (schedule.c, zz_schedule_step):
 *
 *   prefix run   the group's first sequence alone, its rows [pad0, pad0 + P)
 *   spread       those P rows of every cache layer's K and V copied to rows
 *                [pad_i, pad_i + P) of every other sequence, in whatever tier its
 *                cache home lives (device, host, disk)
 *   suffix run   every sequence, rows [P, s): the rest of each prompt
 *
 * so the prefix's compute is paid once per group instead of once per sequence;
 * each sequence still keeps its own copy of the prefix's rows (decode reads them
 * as before: no kernel, cache layout or memory plan changes). Rows [P, pad_i + P)
 * of a padded sequence are prefix rows computed again by the suffix run, like
 * the padding rows the prompt step computes anyway.
 *
 * The tokens are those of the run without sharing: a row's result does not depend
 * on which other rows a step computes (tests/test_runtime_prefix.c compares them).
 */
#include <string.h>

#include "engine_impl.h"

int64_t zz_prefix_common(const int32_t *const *ids, int64_t n, int64_t most) {
  if (n < 2) return 0;
  int64_t p = most > 0 ? most : 0;
  for (int64_t i = 1; i < n && p > 0; i++) {
    int64_t j = 0;
    while (j < p && ids[i][j] == ids[0][j]) j++;
    p = j;
  }
  return p;
}

int64_t zz_prefix_shared(const int32_t *const *ids, int64_t n, int64_t shortest) {
  int64_t p = zz_prefix_common(ids, n, shortest - 1);
  return p >= ZZ_PREFIX_MIN ? p : 0;
}

/* The one rule for where sharing is off: a slice of a pipeline (its hidden states
 * are handed between ranks row for row, and a later slice has no token ids) and a
 * reader of every row's output (the prefix rows of all but one sequence are not
 * computed). */
static bool zz_prefix_on(const zz_engine *e) {
  return e->prefix_sharing && e->l0 == 0 && e->l1 == e->m->n_layers && !e->all_rows;
}

int64_t zz_prefix_len(const zz_engine *e, int group, const zz_step_io *io) {
  if (!zz_prefix_on(e) || !io->prompts) return 0;
  const zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, most_pad = 0;
  for (int64_t i = 0; i < g->n; i++)
    if (g->idx[i / gbs].pad[i % gbs] > most_pad) most_pad = g->idx[i / gbs].pad[i % gbs];
  return zz_prefix_shared(io->prompts, g->n, g->s - most_pad);
}

/* A cache home's rows as this file moves them: sequence i's bytes [off, off + n). */
typedef struct zz_prefix_at {
  const zz_tensor *h;
  int64_t i;
  size_t tmh, region, off, n;
} zz_prefix_at;

/* The disk blocks around rows a: read into blk (host, block aligned), then,
 * with src, changed and written back; *rows_out: the rows inside blk. */
static zz_status zz_prefix_disk(zz_engine *e, const zz_prefix_at *a, char *blk, const char *src, char **rows_out) {
  size_t doff = (size_t)a->h->offset + (size_t)a->i * a->region;
  size_t lo = zz_align_down(a->off, ZZ_DISK_ALIGN), hi = zz_align_up(a->off + a->n, ZZ_DISK_ALIGN);
  ZZ_CHECK(zz_disk_read(&e->disk, blk, hi - lo, doff + lo));
  *rows_out = blk + (a->off - lo);
  if (!src) return ZZ_OK;
  memcpy(*rows_out, src, a->n);
  return zz_disk_write(&e->disk, blk, hi - lo, doff + lo);
}

/* Rows a from src, which is device memory (src_dev) or host memory. */
static zz_status zz_prefix_put(zz_engine *e, const zz_prefix_at *a, const char *src, bool src_dev) {
  zz_device *dev = e->dev;
  if (a->h->tier == ZZ_TIER_DISK) { /* src is on the host then (zz_prefix_spread) */
    char *rows;
    return zz_prefix_disk(e, a, e->kv_stage[0][1], src, &rows);
  }
  char *at = (char *)a->h->data + (size_t)a->i * a->tmh + a->off;
  if (a->h->tier == ZZ_TIER_CPU && !src_dev) {
    memcpy(at, src, a->n);
    return ZZ_OK;
  }
  if (a->h->tier == ZZ_TIER_CPU) ZZ_CHECK(zz_device_read(dev, ZZ_LANE_COMPUTE, at, src, a->n));
  else if (src_dev)
    ZZ_CHECK(zz_device_copy(dev, ZZ_LANE_COMPUTE, at, src, a->n));
  else
    ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, at, src, a->n));
  return zz_device_sync(dev, ZZ_LANE_COMPUTE);
}

/* Cache layer jl's rows: bytes of one, of a sequence's t_max on the device or CPU
 * tier, of a sequence's region on disk. */
static void zz_prefix_rows(const zz_engine *e, int jl, size_t *row, size_t *tmh, size_t *region) {
  zz_cache_spec spec = zz_engine_cache_spec(e, jl);
  *row = zz_cache_row_bytes(&spec);
  *tmh = (size_t)e->t_max * *row;
  *region = zz_cache_region_bytes(&spec, e->t_max);
}

/* No buffer of its own: rows go home to home; where a cache home is on disk, the
 * plan has the host disk stages (cache.stage, idle between runs), which hold the
 * prefix's rows (slot 0, K) and a home's disk blocks around them (slot 0, V). */
zz_status zz_prefix_spread(zz_engine *e, int group, int64_t p) {
  zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, nb = e->pol.num_gpu_batches, nl = e->l1 - e->l0;
  bool staged = e->kv_stage[0][0] != NULL; /* some cache home is on disk */
  size_t pad0 = (size_t)g->idx[0].pad[0];
  for (int jl = 0; jl < nl; jl++) {
    int l = e->cache_of[jl];
    if (l < 0) continue;
    size_t row, tmh, region;
    zz_prefix_rows(e, jl, &row, &tmh, &region);
    size_t n = (size_t)p * row;
    for (int kv = 0; kv < 2; kv++) {
      const zz_tensor *homes = kv ? g->v_home : g->k_home;
      zz_prefix_at a = {.h = &homes[l * nb], .i = 0, .tmh = tmh, .region = region, .off = pad0 * row, .n = n};
      /* the source: the prefix run's rows, on the host when a target is on disk */
      const char *src;
      bool src_dev = false;
      if (a.h->tier == ZZ_TIER_DISK) {
        char *rows;
        ZZ_CHECK(zz_prefix_disk(e, &a, e->kv_stage[0][1], NULL, &rows));
        memcpy(e->kv_stage[0][0], rows, n);
        src = e->kv_stage[0][0];
      } else if (a.h->tier == ZZ_TIER_CPU) {
        src = (const char *)a.h->data + a.off;
      } else if (staged) {
        ZZ_CHECK(zz_device_read(e->dev, ZZ_LANE_COMPUTE, e->kv_stage[0][0], (const char *)a.h->data + a.off, n));
        ZZ_CHECK(zz_device_sync(e->dev, ZZ_LANE_COMPUTE));
        src = e->kv_stage[0][0];
      } else {
        src = (const char *)a.h->data + a.off;
        src_dev = true;
      }
      for (int64_t k = 0; k * gbs < g->n; k++)
        for (int64_t i = k == 0; i < zz_group_batch_count(e, g, k); i++) {
          zz_prefix_at t = {.h = &homes[l * nb + k],
                            .i = i,
                            .tmh = tmh,
                            .region = region,
                            .off = (size_t)g->idx[k].pad[i] * row,
                            .n = n};
          ZZ_CHECK(zz_prefix_put(e, &t, src, src_dev));
        }
    }
  }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- refill */

/* A refill's newcomer (zz_schedule_refill) joins a block whose other slots hold
 * their prompts' rows: where one of them starts with the same P tokens, those P rows
 * of every cache layer are the newcomer's own rows of its first P positions
 * (positions count from each sequence's padding), so they are copied from that slot,
 * the donor, and only the rest of the prompt is computed. The group remembers each
 * slot's prompt while its rows stay whole (zz_group.prompt): written by the prompt
 * step and by a refill, forgotten when a block begins or the slot is refilled. */

void zz_prefix_note(zz_engine *e, int group, int64_t seq, const int32_t *ids, int64_t len) {
  zz_group *g = &e->groups[group];
  if (!g->prompt) return;
  g->prompt_n[seq] = ids ? len : 0;
  if (ids) memcpy(g->prompt + seq * e->shape.prompt_len, ids, (size_t)len * sizeof *ids);
}

int64_t zz_prefix_donor(const zz_engine *e, int group, int64_t seq, const int32_t *ids, int64_t len,
                        int64_t *donor_out) {
  const zz_group *g = &e->groups[group];
  int64_t best = 0;
  *donor_out = -1;
  if (!g->prompt || !zz_prefix_on(e)) return 0;
  for (int64_t d = 0; d < g->n; d++) {
    if (d == seq || !g->prompt_n[d]) continue;
    const int32_t *two[2] = {ids, g->prompt + d * e->shape.prompt_len};
    /* below len: the newcomer's last row gives its logits */
    int64_t most = len - 1 < g->prompt_n[d] ? len - 1 : g->prompt_n[d];
    int64_t p = zz_prefix_common(two, 2, most);
    if (p > best) {
      best = p;
      *donor_out = d;
    }
  }
  if (best < ZZ_PREFIX_MIN) {
    *donor_out = -1;
    return 0;
  }
  return best;
}

/* The group's cache is on the device (zz_engine_can_refill): a device copy per
 * cache layer, K and V, through the spread's copier. */
zz_status zz_prefix_lend(zz_engine *e, int group, int64_t from, int64_t to, int64_t p) {
  zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, nb = e->pol.num_gpu_batches, nl = e->l1 - e->l0;
  int64_t kf = from / gbs, kt = to / gbs, i_from = from % gbs;
  for (int jl = 0; jl < nl; jl++) {
    int l = e->cache_of[jl];
    if (l < 0) continue;
    size_t row, tmh, region;
    zz_prefix_rows(e, jl, &row, &tmh, &region);
    for (int kv = 0; kv < 2; kv++) {
      const zz_tensor *homes = kv ? g->v_home : g->k_home;
      const zz_tensor *src = &homes[l * nb + kf];
      ZZ_ASSERT(src->tier == ZZ_TIER_GPU && homes[l * nb + kt].tier == ZZ_TIER_GPU);
      zz_prefix_at t = {.h = &homes[l * nb + kt],
                        .i = to % gbs,
                        .tmh = tmh,
                        .region = region,
                        .off = (size_t)g->idx[kt].pad[to % gbs] * row,
                        .n = (size_t)p * row};
      const char *rows = (const char *)src->data + (size_t)i_from * tmh + (size_t)g->idx[kf].pad[i_from] * row;
      ZZ_CHECK(zz_prefix_put(e, &t, rows, true));
    }
  }
  return ZZ_OK;
}
