/*
 * zz_rope.h — rotary embedding parameters and their inverse frequencies, one
 * formula for host and device code.
 */
#ifndef ZZ_ROPE_H
#define ZZ_ROPE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- rotary embeddings */

/* Host and device code share the inverse frequencies below (one formula). */
#ifdef __CUDACC__
#define ZZ_HOST_DEVICE __host__ __device__
#else
#define ZZ_HOST_DEVICE
#endif

/* Rotary position embeddings as Hugging Face computes them (modeling_rope_utils):
 * rope_type "default", "linear" (positions interpolated by factor), "llama3"
 * (low frequencies divided by factor, a smooth ramp between the two wavelengths)
 * and "longrope" (Phi-3's: each pair's frequency divided by its short or long
 * factor, cos and sin scaled by attn_factor). */
typedef enum zz_rope_type { ZZ_ROPE_DEFAULT = 0, ZZ_ROPE_LINEAR, ZZ_ROPE_LLAMA3, ZZ_ROPE_LONGROPE } zz_rope_type;

#define ZZ_ROPE_MAX_PAIRS 256 /* longrope's factors: one per rotary pair (head_dim 512) */

typedef struct zz_rope {
  zz_rope_type type;
  float theta;                             /* rope_theta */
  float factor;                            /* linear, llama3 */
  float low_freq_factor, high_freq_factor; /* llama3 */
  float original_max_pos;                  /* llama3, longrope: original_max_position_embeddings */
  int32_t rot_dims;                        /* partial_rotary_factor: the first rot_dims of a head turn (0: all) */
  /* longrope: a sequence whose last position in a forward + 1 exceeds
   * original_max_pos takes long_factor in that forward, else short_factor (what
   * transformers' longrope_frequency_update does for one sequence); seq_rows:
   * rows of one sequence in a call (the forward's sq; 0 or 1: each row alone) */
  float attn_factor; /* cos and sin scaled by it */
  int32_t seq_rows;
  float short_factor[ZZ_ROPE_MAX_PAIRS], long_factor[ZZ_ROPE_MAX_PAIRS]; /* [rot_dims / 2] */
} zz_rope;

/* The dimensions of a head of hd that turn (partial_rotary_factor). */
ZZ_HOST_DEVICE static inline int64_t zz_rope_dims(const zz_rope *r, int64_t hd) {
  return r->rot_dims > 0 && r->rot_dims < hd ? r->rot_dims : hd;
}

/* Whether row i (positions pos) takes longrope's long factors: its sequence's
 * last row's position + 1 exceeds original_max_pos. */
ZZ_HOST_DEVICE static inline bool zz_rope_long(const zz_rope *r, const int32_t *pos, int64_t i) {
  if (r->type != ZZ_ROPE_LONGROPE) return false;
  int64_t sr = r->seq_rows > 1 ? r->seq_rows : 1;
  return (float)pos[i / sr * sr + sr - 1] + 1.0f > r->original_max_pos;
}

/* cos and sin's scale: longrope's attention factor, else 1. */
ZZ_HOST_DEVICE static inline float zz_rope_scale(const zz_rope *r) {
  return r->type == ZZ_ROPE_LONGROPE ? r->attn_factor : 1.0f;
}

/* The inverse frequency of rotary pair i (i < dim / 2) of dim turning elements
 * (zz_rope_dims), long: longrope's long factors, in float32 step by step as
 * transformers does: theta^-(2i/dim), then the scaling (longrope: 1 / (ext *
 * theta^(2i/dim))). */
ZZ_HOST_DEVICE static inline float zz_rope_inv_freq_at(const zz_rope *r, int64_t i, int64_t hd, bool lng) {
  if (r->type == ZZ_ROPE_LONGROPE)
    return 1.0f / ((lng ? r->long_factor[i] : r->short_factor[i]) * powf(r->theta, (float)(2 * i) / (float)hd));
  float inv = 1.0f / powf(r->theta, (float)(2 * i) / (float)hd);
  if (r->type == ZZ_ROPE_LINEAR) return inv / r->factor;
  if (r->type != ZZ_ROPE_LLAMA3) return inv;
  const float low_wavelen = r->original_max_pos / r->low_freq_factor;
  const float high_wavelen = r->original_max_pos / r->high_freq_factor;
  const float wavelen = 6.283185307179586f / inv;
  float scaled = wavelen > low_wavelen ? inv / r->factor : inv;
  if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) { /* medium: the ramp */
    float smooth = (r->original_max_pos / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    scaled = (1.0f - smooth) * scaled / r->factor + smooth * scaled;
  }
  return scaled;
}

/* zz_rope_inv_freq_at of the short (only) set. */
ZZ_HOST_DEVICE static inline float zz_rope_inv_freq(const zz_rope *r, int64_t i, int64_t hd) {
  return zz_rope_inv_freq_at(r, i, hd, false);
}

#ifdef __cplusplus
}
#endif
#endif /* ZZ_ROPE_H */
