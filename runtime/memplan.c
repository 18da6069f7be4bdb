/*
 * memplan.c — the memory plan: where every tensor lives and the exact bytes of
 * each tier and purpose (one function, two users: the engine sizes its arenas
 * from it, the planner uses it as its memory constraints).
 *
 * Rounding (FlexGen's rule): items are taken in order (weights by layer, cache by
 * (layer, batch), activations by batch); an item goes to the GPU when the midpoint
 * of its cumulative share of the total size is below the GPU percentage, else to
 * the CPU when below GPU + CPU, else to disk. So 50/50 over two equal layers puts
 * one on each tier, and a layer is never split.
 *
 * Purposes:
 *   home      — weights / cache / activations on their tier (WEIGHTS, CACHE, ACT);
 *   staging   — device slots the overlap needs (two weight slots; three cache and
 *               activation slots: batch k-1 storing, k computing, k+1 loading)
 *               and host buffers for disk I/O and CPU attention;
 *   workspace — the largest layer's scratch, logits, the sampler's buffers.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

#define ZZ_ALIGN 256
#define ZZ_DISK_ALIGN 4096

static size_t zz_al(size_t x, size_t a) { return (x + a - 1) / a * a; }

static zz_tier zz_place(double mid_pct, double gpu, double cpu) {
  if (mid_pct < gpu) return ZZ_TIER_GPU;
  if (mid_pct < gpu + cpu) return ZZ_TIER_CPU;
  return ZZ_TIER_DISK;
}

/* Bytes of a layer's weights in dtype dt, each weight aligned to `a`. */
static size_t zz_layer_bytes(const zz_layer *l, zz_dtype dt, size_t a) {
  size_t b = 0;
  for (int k = 0; k < l->n_weights; k++) {
    const zz_weight_spec *w = &l->weights[k];
    if (w->ndim) b += zz_al(zz_dtype_nbytes(dt, w->shape[0] * (w->ndim > 1 ? w->shape[1] : 1)), a);
  }
  return b;
}

/* An upper bound, in floating point, of every byte count the plan adds up: each
 * term is the largest it can be (4-byte elements, every item on its biggest
 * tier, alignment rounded up generously). When it is below 2^60 no size_t sum
 * below can wrap. */
static double zz_memplan_bound(const zz_model *m, const zz_policy *pol, const zz_shape *shape, size_t workspace) {
  const zz_config *c = &m->cfg;
  double gbs = pol->gpu_batch_size, nb = pol->num_gpu_batches, L = (double)c->n_layers;
  double t_max = (double)shape->prompt_len + (double)shape->gen_len, h = (double)c->hidden;
  double weights = 4.0 * (double)zz_model_numel(m) + ZZ_DISK_ALIGN * 16.0 * m->n_layers * ZZ_MAX_LAYER_WEIGHTS;
  double kv = 4.0 * gbs * (t_max * h + ZZ_DISK_ALIGN) + ZZ_DISK_ALIGN; /* one K or V, any tier */
  double cache = 2.0 * kv * (L * nb + 6);
  double act = 4.0 * (4.0 * gbs * t_max * h + ZZ_DISK_ALIGN) * (nb + 6) + 16.0 * gbs * t_max * nb;
  double other = 8.0 * gbs * (double)c->vocab_size + 4.0 * (double)zz_sample_scratch_bytes(c->vocab_size) +
                 8.0 * gbs * h + 4.0 * gbs * (double)c->n_heads * t_max + (double)workspace;
  return 2.0 * (weights + cache + act + other) + 1e9;
}

zz_status zz_memplan_build(const zz_model *m, const zz_policy *pol, const zz_shape *shape,
                           zz_dtype cdt, zz_dtype sdt, size_t workspace, zz_memplan *out) {
  ZZ_CHECK(zz_policy_check(pol));
  const zz_config *c = &m->cfg;
  int nb = pol->num_gpu_batches, L = (int)c->n_layers;
  int64_t gbs = pol->gpu_batch_size, s = shape->prompt_len, t_max = s + shape->gen_len;
  if (s < 0 || shape->gen_len < 0 || zz_memplan_bound(m, pol, shape, workspace) > 0x1p60)
    return zz_error(ZZ_ERR_INFEASIBLE, "policy gbs=%lld num_gb=%d with %lld + %lld tokens needs more than an "
                    "exbibyte of memory: refused", (long long)gbs, nb, (long long)s, (long long)shape->gen_len);
  size_t n_cache = (size_t)L * (size_t)nb; /* (layer, batch) pairs; below 2^24 by the policy's ranges */
  zz_memplan p;
  memset(&p, 0, sizeof p);
  p.weight_tier = calloc((size_t)m->n_layers, sizeof *p.weight_tier);
  p.cache_tier = calloc(n_cache, sizeof *p.cache_tier);
  p.act_tier = calloc((size_t)nb, sizeof *p.act_tier);
  if (!p.weight_tier || !p.cache_tier || !p.act_tier) {
    zz_memplan_free(&p);
    return zz_error(ZZ_ERR_NO_MEMORY, "memory plan: out of memory");
  }
  size_t es = zz_dtype_nbytes(cdt, 1);
  size_t (*B)[ZZ_PURPOSE_COUNT] = p.bytes;

  /* weights: per layer by cumulative size */
  double total = 0, before = 0;
  for (int i = 0; i < m->n_layers; i++) total += (double)m->layers[i].weight_numel;
  for (int i = 0; i < m->n_layers; i++) {
    double n = (double)m->layers[i].weight_numel;
    zz_tier t = zz_place(100.0 * (before + n / 2) / total, pol->w_gpu, pol->w_cpu);
    before += n;
    p.weight_tier[i] = t;
    if (t == ZZ_TIER_GPU) {
      B[t][ZZ_PURPOSE_WEIGHTS] += zz_layer_bytes(&m->layers[i], cdt, ZZ_ALIGN);
    } else {
      size_t dev = zz_layer_bytes(&m->layers[i], cdt, ZZ_ALIGN);
      size_t st = zz_layer_bytes(&m->layers[i], sdt, t == ZZ_TIER_DISK ? ZZ_DISK_ALIGN : ZZ_ALIGN);
      B[t][ZZ_PURPOSE_WEIGHTS] += st;
      if (dev > p.max_layer_bytes) p.max_layer_bytes = dev;
      size_t rounded = zz_layer_bytes(&m->layers[i], sdt, ZZ_DISK_ALIGN);
      if (rounded > p.max_layer_store) p.max_layer_store = rounded;
      p.any_offload[ZZ_PURPOSE_WEIGHTS] = true;
      if (t == ZZ_TIER_DISK) p.any_disk[ZZ_PURPOSE_WEIGHTS] = true;
    }
  }
  /* one tensor's host buffer while weights are loaded from the checkpoint */
  size_t max_w = 0;
  for (int i = 0; i < m->n_layers; i++)
    for (int k = 0; k < m->layers[i].n_weights; k++) {
      const zz_weight_spec *w = &m->layers[i].weights[k];
      size_t b = w->ndim ? zz_dtype_nbytes(sdt, w->shape[0] * (w->ndim > 1 ? w->shape[1] : 1)) : 0;
      if (b > max_w) max_w = b;
    }
  p.load_buf = zz_al(max_w, ZZ_DISK_ALIGN) + ZZ_DISK_ALIGN;
  B[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING] += p.load_buf;
  if (p.any_offload[ZZ_PURPOSE_WEIGHTS]) B[ZZ_TIER_GPU][ZZ_PURPOSE_STAGING] += 2 * zz_al(p.max_layer_bytes, ZZ_ALIGN);
  if (p.any_disk[ZZ_PURPOSE_WEIGHTS]) B[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING] += zz_al(p.max_layer_store, ZZ_DISK_ALIGN) + ZZ_DISK_ALIGN;

  /* KV cache: K and V of one (layer, batch) are [gbs, t_max, h]; on disk each
   * sequence's rows start on a block boundary so reads and writes can bypass the
   * page cache */
  size_t kv = zz_al((size_t)(gbs * t_max * c->hidden) * es, ZZ_ALIGN);
  size_t region = zz_al((size_t)(t_max * c->hidden) * es, ZZ_DISK_ALIGN);
  size_t kv_disk = (size_t)gbs * region;
  for (size_t i = 0; i < n_cache; i++) {
    zz_tier t = zz_place(100.0 * ((double)i + 0.5) / (double)n_cache, pol->c_gpu, pol->c_cpu);
    p.cache_tier[i] = t;
    B[t][ZZ_PURPOSE_CACHE] += 2 * (t == ZZ_TIER_DISK ? kv_disk : kv);
    if (t != ZZ_TIER_GPU) p.any_offload[ZZ_PURPOSE_CACHE] = true;
    if (t == ZZ_TIER_DISK) p.any_disk[ZZ_PURPOSE_CACHE] = true;
  }
  if (p.any_offload[ZZ_PURPOSE_CACHE]) B[ZZ_TIER_GPU][ZZ_PURPOSE_STAGING] += 3 * 2 * kv;
  if (p.any_disk[ZZ_PURPOSE_CACHE]) B[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING] += 3 * 2 * kv_disk + ZZ_DISK_ALIGN;

  /* activations: the hidden state of each batch, [gbs, s, h] */
  size_t act = zz_al((size_t)(gbs * s * c->hidden) * es, ZZ_ALIGN);
  size_t act_disk = zz_al(act, ZZ_DISK_ALIGN);
  for (int k = 0; k < nb; k++) {
    zz_tier t = zz_place(100.0 * (k + 0.5) / nb, pol->a_gpu, pol->a_cpu);
    p.act_tier[k] = t;
    B[t][ZZ_PURPOSE_ACT] += t == ZZ_TIER_DISK ? act_disk : act;
    if (t != ZZ_TIER_GPU) p.any_offload[ZZ_PURPOSE_ACT] = true;
    if (t == ZZ_TIER_DISK) p.any_disk[ZZ_PURPOSE_ACT] = true;
  }
  if (p.any_offload[ZZ_PURPOSE_ACT]) B[ZZ_TIER_GPU][ZZ_PURPOSE_STAGING] += 3 * act;
  if (p.any_disk[ZZ_PURPOSE_ACT]) B[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING] += 3 * act_disk + ZZ_DISK_ALIGN;
  /* token ids, positions, padding and last-row indices of every batch, both sides */
  size_t idx = 2 * zz_al((size_t)(gbs * s) * 4, ZZ_ALIGN) + 2 * zz_al((size_t)gbs * 4, ZZ_ALIGN);
  B[ZZ_TIER_GPU][ZZ_PURPOSE_ACT] += (size_t)nb * idx;
  B[ZZ_TIER_CPU][ZZ_PURPOSE_ACT] += (size_t)nb * idx;

  /* CPU attention: q, k, v, out of one batch's decode step in f32 on the host, the
   * kernel's scratch */
  if (pol->cpu_attention && p.any_offload[ZZ_PURPOSE_CACHE])
    B[ZZ_TIER_CPU][ZZ_PURPOSE_STAGING] += 4 * zz_al((size_t)(gbs * c->hidden) * 4, ZZ_ALIGN) +
                                          zz_al(zz_cpu_attention_scratch(gbs, c->n_heads, t_max) * 4, ZZ_ALIGN);

  /* workspace */
  B[ZZ_TIER_GPU][ZZ_PURPOSE_WORKSPACE] = zz_al(workspace, ZZ_ALIGN) + zz_al((size_t)(gbs * c->vocab_size) * es, ZZ_ALIGN);
  B[ZZ_TIER_CPU][ZZ_PURPOSE_WORKSPACE] = zz_al((size_t)(gbs * c->vocab_size) * 4, ZZ_ALIGN) +
                                         zz_al(zz_sample_scratch_bytes(c->vocab_size), ZZ_ALIGN);
  *out = p;
  return ZZ_OK;
}

void zz_memplan_free(zz_memplan *p) {
  if (!p) return;
  free(p->weight_tier);
  free(p->cache_tier);
  free(p->act_tier);
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
    char a[32], b[32], w[32], kv[32], ac[32], sg[32], ws[32];
    const size_t *x = p->bytes[t];
    return zz_error(ZZ_ERR_INFEASIBLE,
                    "policy does not fit the %s tier: it needs %s (weights %s, cache %s, activations %s, "
                    "staging %s, workspace %s) and the capacity is %s",
                    zz_tier_name((zz_tier)t), zz_format_bytes(need, a, sizeof a),
                    zz_format_bytes(x[ZZ_PURPOSE_WEIGHTS], w, sizeof w), zz_format_bytes(x[ZZ_PURPOSE_CACHE], kv, sizeof kv),
                    zz_format_bytes(x[ZZ_PURPOSE_ACT], ac, sizeof ac), zz_format_bytes(x[ZZ_PURPOSE_STAGING], sg, sizeof sg),
                    zz_format_bytes(x[ZZ_PURPOSE_WORKSPACE], ws, sizeof ws), zz_format_bytes(cap[t], b, sizeof b));
  }
  return ZZ_OK;
}

zz_status zz_memplan_check_shared(const zz_memplan *p, size_t host_ram) {
  size_t dev = zz_memplan_tier_total(p, ZZ_TIER_GPU), cpu = zz_memplan_tier_total(p, ZZ_TIER_CPU);
  if (dev <= host_ram && cpu <= host_ram - dev) return ZZ_OK;
  char a[32], b[32], s[32], r[32];
  return zz_error(ZZ_ERR_INFEASIBLE,
                  "policy does not fit this machine's RAM: the cpu device's arena (gpu tier, %s) and the cpu tier "
                  "(%s) are both host memory, together %s, and the machine has %s; move weights or cache to disk",
                  zz_format_bytes(dev, a, sizeof a), zz_format_bytes(cpu, b, sizeof b),
                  zz_format_bytes(dev + cpu < dev ? SIZE_MAX : dev + cpu, s, sizeof s),
                  zz_format_bytes(host_ram, r, sizeof r));
}
