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
#include <stdlib.h>
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

int64_t zz_prefix_len(const zz_engine *e, int group, const zz_step_io *io) {
  /* one rule for where sharing is off: a slice of a pipeline (its hidden states
   * are handed between ranks row for row, and a later slice has no token ids) and
   * a reader of every row's output (the prefix rows of all but one sequence are
   * not computed) */
  if (!e->prefix_sharing || e->l0 != 0 || e->l1 != e->m->n_layers || e->all_rows || !io->prompts) return 0;
  const zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, most_pad = 0;
  for (int64_t i = 0; i < g->n; i++)
    if (g->idx[i / gbs].pad[i % gbs] > most_pad) most_pad = g->idx[i / gbs].pad[i % gbs];
  return zz_prefix_shared(io->prompts, g->n, g->s - most_pad);
}

/* Rows at byte off, n bytes, of sequence i of a cache home, to or from buf. */
static zz_status zz_prefix_rows(zz_engine *e, const zz_tensor *h, int64_t i, size_t tmh, size_t region, size_t off,
                                char *buf, size_t n, bool write, char *blk) {
  if (h->tier == ZZ_TIER_DISK) {
    /* whole disk blocks around the rows: read, change, write back */
    size_t doff = (size_t)h->offset + (size_t)i * region;
    size_t a = zz_align_down(off, ZZ_DISK_ALIGN), b = zz_align_up(off + n, ZZ_DISK_ALIGN);
    ZZ_CHECK(zz_disk_read(&e->disk, blk, b - a, doff + a));
    if (!write) {
      memcpy(buf, blk + (off - a), n);
      return ZZ_OK;
    }
    memcpy(blk + (off - a), buf, n);
    return zz_disk_write(&e->disk, blk, b - a, doff + a);
  }
  char *at = (char *)h->data + (size_t)i * tmh + off;
  if (h->tier == ZZ_TIER_CPU) {
    if (write) memcpy(at, buf, n);
    else
      memcpy(buf, at, n);
    return ZZ_OK;
  }
  if (write) ZZ_CHECK(zz_device_write(e->dev, ZZ_LANE_COMPUTE, at, buf, n));
  else
    ZZ_CHECK(zz_device_read(e->dev, ZZ_LANE_COMPUTE, buf, at, n));
  return zz_device_sync(e->dev, ZZ_LANE_COMPUTE);
}

zz_status zz_prefix_spread(zz_engine *e, int group, int64_t p) {
  zz_group *g = &e->groups[group];
  int64_t gbs = e->pol.gpu_batch_size, nb = e->pol.num_gpu_batches, nl = e->l1 - e->l0;
  size_t most = 0, most_region = 0;
  for (int jl = 0; jl < nl; jl++) {
    if (e->cache_of[jl] < 0) continue;
    zz_cache_spec spec = zz_engine_cache_spec(e, jl);
    size_t row = zz_cache_row_bytes(&spec), region = zz_cache_region_bytes(&spec, e->t_max);
    if ((size_t)p * row > most) most = (size_t)p * row;
    if (region > most_region) most_region = region;
  }
  /* once per block, beside the step's buffers: the prefix's rows of one layer and
   * a disk home's blocks around them */
  char *buf = malloc(most ? most : 1), *blk = NULL;
  if (!buf || (e->has_disk && posix_memalign((void **)&blk, ZZ_DISK_ALIGN, most_region + ZZ_DISK_ALIGN) != 0)) {
    free(buf);
    return zz_error(ZZ_ERR_NO_MEMORY, "shared prefix: out of memory (%zu bytes)", most + most_region);
  }
  size_t pad0 = (size_t)g->idx[0].pad[0];
  zz_status st = ZZ_OK;
  for (int jl = 0; jl < nl && st == ZZ_OK; jl++) {
    int l = e->cache_of[jl];
    if (l < 0) continue;
    zz_cache_spec spec = zz_engine_cache_spec(e, jl);
    size_t row = zz_cache_row_bytes(&spec), tmh = (size_t)e->t_max * row;
    size_t region = zz_cache_region_bytes(&spec, e->t_max), n = (size_t)p * row;
    for (int kv = 0; kv < 2 && st == ZZ_OK; kv++) {
      const zz_tensor *homes = kv ? g->v_home : g->k_home;
      st = zz_prefix_rows(e, &homes[l * nb], 0, tmh, region, pad0 * row, buf, n, false, blk);
      for (int64_t k = 0; k * gbs < g->n && st == ZZ_OK; k++)
        for (int64_t i = k == 0; i < zz_group_batch_count(e, g, k) && st == ZZ_OK; i++)
          st = zz_prefix_rows(e, &homes[l * nb + k], i, tmh, region, (size_t)g->idx[k].pad[i] * row, buf, n, true, blk);
    }
  }
  free(buf);
  free(blk);
  return st;
}
