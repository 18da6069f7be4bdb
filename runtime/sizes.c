/*
 * sizes.c — every byte count of the runtime in one place: weights, layer layouts,
 * KV cache rows and regions, hidden states, alignment. Plain functions of
 * dimensions and dtypes (no device needed): the memory plan, the engine and the
 * planner all call these, so a size is never computed twice.
 */
#include <string.h>

#include "zz_runtime.h"

size_t zz_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
size_t zz_align_down(size_t x, size_t a) { return x / a * a; }

int64_t zz_weight_numel(const zz_weight_spec *w) {
  if (!w->ndim) return 0;
  int64_t n = 1;
  for (int d = 0; d < w->ndim; d++) n *= w->shape[d];
  return n;
}

size_t zz_weight_bytes(const zz_weight_spec *w, zz_dtype dt) { return zz_dtype_nbytes(dt, zz_weight_numel(w)); }

size_t zz_layer_weight_layout(const zz_layer *l, zz_dtype dt, size_t align, size_t off_out[ZZ_MAX_LAYER_WEIGHTS]) {
  size_t off = 0;
  for (int k = 0; k < ZZ_MAX_LAYER_WEIGHTS; k++) {
    bool present = k < l->n_weights && l->weights[k].ndim;
    if (off_out) off_out[k] = present ? off : SIZE_MAX;
    if (present) off += zz_align_up(zz_weight_bytes(&l->weights[k], dt), align);
  }
  return off;
}

size_t zz_cache_row_bytes(const zz_cache_spec *c) {
  return zz_dtype_nbytes(c->dtype, c->kv_heads * c->head_dim);
}

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

size_t zz_index_layout(int64_t gbs, int64_t s, size_t off_out[4]) {
  const size_t n[4] = {(size_t)(gbs * s), (size_t)(gbs * s), (size_t)gbs, (size_t)gbs};
  size_t off = 0;
  for (int q = 0; q < 4; q++) {
    if (off_out) off_out[q] = off;
    off += zz_align_up(n[q] * sizeof(int32_t), ZZ_ALIGN);
  }
  return off;
}

zz_status zz_mul_size(size_t a, size_t b, const char *what, size_t *out) {
  if (a && b > SIZE_MAX / a) return zz_error(ZZ_ERR_INVALID_ARG, "%s: %zu × %zu bytes overflow", what, a, b);
  *out = a * b;
  return ZZ_OK;
}
