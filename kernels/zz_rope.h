/*
 * zz_rope.h — rotary embedding parameters and their inverse frequencies, one
 * formula for host and device code.
 */
#ifndef ZZ_ROPE_H
#define ZZ_ROPE_H

#include <math.h>
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
 * rope_type "default", "linear" (positions interpolated by factor) and "llama3"
 * (low frequencies divided by factor, a smooth ramp between the two wavelengths). */
typedef enum zz_rope_type { ZZ_ROPE_DEFAULT = 0, ZZ_ROPE_LINEAR, ZZ_ROPE_LLAMA3 } zz_rope_type;

typedef struct zz_rope {
  zz_rope_type type;
  float theta;                             /* rope_theta */
  float factor;                            /* linear, llama3 */
  float low_freq_factor, high_freq_factor; /* llama3 */
  float original_max_pos;                  /* llama3: original_max_position_embeddings */
} zz_rope;

/* The inverse frequency of rotary pair i (i < hd / 2) of a head of hd elements, in
 * float32 step by step as transformers 4.46 does: theta^-(2i/hd), then the scaling. */
ZZ_HOST_DEVICE static inline float zz_rope_inv_freq(const zz_rope *r, int64_t i, int64_t hd) {
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

#ifdef __cplusplus
}
#endif
#endif /* ZZ_ROPE_H */
