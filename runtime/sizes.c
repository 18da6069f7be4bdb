/*
 * sizes.c — every byte count of the runtime in one place: weights, layer layouts,
 * KV cache rows and regions, hidden states, alignment. Plain functions of
 * dimensions and dtypes (no device needed): the memory plan, the engine and the
 * planner all call these, so a size is never computed twice.
 */
#include <string.h>

#include "zz_policy.h"

size_t zz_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
size_t zz_align_down(size_t x, size_t a) { return x / a * a; }

int64_t zz_weight_numel(const zz_weight_spec *w) {
  if (!w->ndim) return 0;
  int64_t n = 1;
  for (int d = 0; d < w->ndim; d++) n *= w->shape[d];
  return n;
}

size_t zz_weight_bytes_q(const zz_weight_spec *w, zz_dtype dt, zz_qfmt q) {
  if (dt != ZZ_DTYPE_Q4 || !w->ndim) return zz_dtype_nbytes(dt, zz_weight_numel(w));
  int64_t len = w->shape[w->ndim - 1];
  return (size_t)(zz_weight_numel(w) / len) * zz_q_row_bytes(q, len);
}

size_t zz_weight_bytes(const zz_weight_spec *w, zz_dtype dt) { return zz_weight_bytes_q(w, dt, ZZ_QFMT_DEFAULT); }

zz_dtype zz_weight_dtype_b(const zz_weight_spec *w, zz_dtype dt, const zz_qfmt *q, bool bf16) {
  if (w->ndim != 2 || w->precise) return dt;
  return q ? ZZ_DTYPE_Q4 : bf16 ? ZZ_DTYPE_BF16 : dt;
}

zz_dtype zz_weight_dtype(const zz_weight_spec *w, zz_dtype dt, const zz_qfmt *q) {
  return zz_weight_dtype_b(w, dt, q, false);
}

size_t zz_layer_weight_layout_b(const zz_layer *l, zz_dtype dt, const zz_qfmt *q, bool bf16, size_t align,
                                size_t off_out[ZZ_MAX_LAYER_WEIGHTS]) {
  size_t off = 0;
  for (int k = 0; k < ZZ_MAX_LAYER_WEIGHTS; k++) {
    const zz_weight_spec *w = &l->weights[k];
    bool present = k < l->n_weights && w->ndim;
    if (off_out) off_out[k] = present ? off : SIZE_MAX;
    if (present)
      off += zz_align_up(zz_weight_bytes_q(w, zz_weight_dtype_b(w, dt, q, bf16), q ? *q : ZZ_QFMT_DEFAULT), align);
  }
  return off;
}

zz_cache_spec zz_cache_spec_for(const zz_layer *l, const zz_policy *p, zz_dtype compute_dt) {
  zz_cache_spec c = l->cache;
  zz_qfmt buf;
  const zz_qfmt *q = zz_policy_cfmt(p, &buf);
  c.dtype = q ? ZZ_DTYPE_Q4 : compute_dt;
  c.q = q ? *q : (zz_qfmt){0, 0};
  return c;
}

size_t zz_cache_row_bytes(const zz_cache_spec *c) { return zz_kv_row_bytes(c->dtype, c->q, c->kv_heads, c->head_dim); }

size_t zz_cache_bytes(const zz_cache_spec *c, int64_t gbs, int64_t t_max) {
  return zz_align_up((size_t)(gbs * t_max) * zz_cache_row_bytes(c), ZZ_ALIGN);
}

size_t zz_cache_region_bytes(const zz_cache_spec *c, int64_t t_max) {
  return zz_align_up((size_t)t_max * zz_cache_row_bytes(c), ZZ_DISK_ALIGN);
}

size_t zz_hidden_bytes(int64_t hidden, zz_dtype dt, int64_t n, int64_t sq) {
  return zz_dtype_nbytes(dt, n * sq * hidden);
}

size_t zz_attention_scores_bytes(int64_t b, int64_t sq, int64_t t, int64_t heads) {
  if (sq <= 1 || b <= 0 || t <= 0 || heads <= 0) return 0;
  return (size_t)b * (size_t)heads * (size_t)sq * (size_t)t * sizeof(float);
}

size_t zz_gpu_attention_scratch_bytes(int64_t b, int64_t sq, int64_t t, int64_t heads, bool general) {
  if (!general) return zz_attention_scores_bytes(b, sq, t, heads);
  if (b <= 0 || sq <= 0 || t <= 0 || heads <= 0) return 0;
  /* the Q4 / top-k kernel: f32 scores and kept flags, t each, per (sequence, head, query) */
  size_t ex = 2 * (size_t)b * (size_t)heads * (size_t)sq * (size_t)t * sizeof(float);
  size_t dense = zz_attention_scores_bytes(b, sq, t, heads);
  return ex > dense ? ex : dense;
}

size_t zz_index_layout(int64_t gbs, int64_t s, size_t off_out[4]) {
  const size_t n[4] = {(size_t)(gbs * s), (size_t)(gbs * s), (size_t)gbs, (size_t)gbs};
  size_t off = 0;
  for (int q = 0; q < 4; q++) {
    if (off_out) off_out[q] = off;
    off += zz_align_up(n[q] * sizeof(int32_t), ZZ_ALIGN);
  }
  return off;
}
