/*
 * sampler.c — choosing the next token: greedy, or temperature / top-k / top-p
 * sampling with a per-sequence generator (xoshiro256**), seeded from (seed,
 * stream) so a sequence draws the same numbers whatever block it runs in.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_generate.h"

static uint64_t zz_splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void zz_rng_seed(zz_rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
  for (int i = 0; i < 4; i++) r->s[i] = zz_splitmix(&x);
}

static inline uint64_t zz_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t zz_rng_next(zz_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = zz_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = zz_rotl(s[3], 45);
  return result;
}

uint64_t zz_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

double zz_rng_uniform(zz_rng *r) { return (double)(zz_rng_next(r) >> 11) * 0x1.0p-53; }

int32_t zz_argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

size_t zz_sample_scratch_bytes(int64_t vocab) { return (size_t)vocab * (sizeof(float) + sizeof(int32_t)); }

/* descending by probability, ties by index so the order is deterministic */
static const float *zz_sort_keys;
static int zz_prob_desc(const void *a, const void *b) {
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  float pi = zz_sort_keys[i], pj = zz_sort_keys[j];
  if (pi != pj) return pi > pj ? -1 : 1;
  return (i > j) - (i < j);
}

int32_t zz_sample(const float *logits, int64_t vocab, const zz_sampling *s, zz_rng *rng, void *scratch) {
  if (s->temperature <= 0 || s->top_k == 1) return zz_argmax(logits, vocab);
  float *p = scratch;
  int32_t *idx = (int32_t *)(p + vocab);
  float mx = -INFINITY;
  for (int64_t i = 0; i < vocab; i++)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0;
  for (int64_t i = 0; i < vocab; i++) {
    p[i] = expf((logits[i] - mx) / s->temperature);
    sum += p[i];
    idx[i] = (int32_t)i;
  }
  for (int64_t i = 0; i < vocab; i++) p[i] = (float)(p[i] / sum);
  int64_t keep = vocab;
  bool filter_p = s->top_p > 0 && s->top_p < 1;
  if ((s->top_k > 0 && s->top_k < vocab) || filter_p) {
    /* qsort with a file-static key is not re-entrant; samplers run on one thread */
    zz_sort_keys = p;
    qsort(idx, (size_t)vocab, sizeof *idx, zz_prob_desc);
    if (s->top_k > 0 && s->top_k < keep) keep = s->top_k;
    if (filter_p) {
      /* the smallest prefix whose mass reaches top_p (at least one token) */
      double mass = 0;
      int64_t k = 0;
      while (k < keep) {
        mass += p[idx[k++]];
        if (mass >= s->top_p) break;
      }
      keep = k;
    }
  }
  double total = 0;
  for (int64_t k = 0; k < keep; k++) total += p[idx[k]];
  double u = zz_rng_uniform(rng) * total, acc = 0;
  for (int64_t k = 0; k < keep; k++) {
    acc += p[idx[k]];
    if (u < acc) return idx[k];
  }
  return idx[keep - 1];
}
