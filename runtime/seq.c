/*
 * seq.c — one sequence's own settings in the token loop (zz_seq.h): the range
 * check, the penalties applied to a copy of its logits before sampling, and the
 * log-probabilities of the model's distribution.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "zz_seq.h"

void zz_seq_params_default(zz_seq_params *p, const zz_sampling *s, int max_new) {
  *p = (zz_seq_params){.sampling = *s, .max_new_tokens = max_new, .repetition_penalty = 1.0f, .logprobs = -1};
}

zz_status zz_seq_params_check(const zz_seq_params *p, int request_max) {
  const zz_sampling *s = &p->sampling;
  if (p->max_new_tokens < 1 || p->max_new_tokens > request_max)
    return zz_error(ZZ_ERR_INVALID_ARG, "max new tokens %d outside 1..%d", p->max_new_tokens, request_max);
  if (!isfinite(s->temperature) || s->temperature < 0)
    return zz_error(ZZ_ERR_INVALID_ARG, "temperature %g is not a number >= 0", (double)s->temperature);
  if (!(s->top_p > 0 && s->top_p <= 1))
    return zz_error(ZZ_ERR_INVALID_ARG, "top_p %g outside (0, 1]", (double)s->top_p);
  if (s->top_k < 0) return zz_error(ZZ_ERR_INVALID_ARG, "top_k %d is negative", s->top_k);
  if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
    return zz_error(ZZ_ERR_INVALID_ARG, "repetition_penalty %g is not a number > 0", (double)p->repetition_penalty);
  if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
    return zz_error(ZZ_ERR_INVALID_ARG, "presence / frequency penalty is not a finite number");
  if (p->logprobs < -1 || p->logprobs > ZZ_MAX_TOP_LOGPROBS)
    return zz_error(ZZ_ERR_INVALID_ARG, "logprobs %d outside 0..%d", p->logprobs, ZZ_MAX_TOP_LOGPROBS);
  return ZZ_OK;
}

static uint64_t seq_fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

void zz_seq_params_pack(const zz_seq_params *p, uint64_t *w) {
  const zz_sampling *s = &p->sampling;
  uint64_t v[ZZ_SEQ_PARAMS_WORDS] = {seq_fbits(s->temperature),
                                     (uint64_t)(uint32_t)s->top_k,
                                     seq_fbits(s->top_p),
                                     s->seed,
                                     (uint32_t)p->max_new_tokens,
                                     seq_fbits(p->repetition_penalty),
                                     seq_fbits(p->presence_penalty),
                                     seq_fbits(p->frequency_penalty),
                                     (uint64_t)(uint32_t)p->logprobs};
  memcpy(w, v, sizeof v);
}

zz_status zz_seq_params_unpack(const uint64_t *w, int request_max, zz_seq_params *p) {
  for (int k = 0; k < ZZ_SEQ_PARAMS_WORDS; k++)
    if (k != 3 && w[k] > UINT32_MAX)
      return zz_error(ZZ_ERR_FORMAT, "sequence settings: word %d is %llu, beyond 32 bits", k, (unsigned long long)w[k]);
  float f[ZZ_SEQ_PARAMS_WORDS];
  for (int k = 0; k < ZZ_SEQ_PARAMS_WORDS; k++) {
    uint32_t u = (uint32_t)w[k];
    memcpy(&f[k], &u, sizeof u);
  }
  *p = (zz_seq_params){.sampling = {.temperature = f[0], .top_k = (int32_t)(uint32_t)w[1], .top_p = f[2], .seed = w[3]},
                       .max_new_tokens = (int32_t)(uint32_t)w[4],
                       .repetition_penalty = f[5],
                       .presence_penalty = f[6],
                       .frequency_penalty = f[7],
                       .logprobs = (int32_t)(uint32_t)w[8]};
  return zz_seq_params_check(p, request_max);
}

bool zz_seq_penalize(const zz_seq_params *p, const float *logits, int64_t vocab, const int32_t *prompt, int64_t np,
                     const int32_t *gen, int64_t ng, int32_t *counts, float *out) {
  bool rep = p->repetition_penalty != 1.0f, pres = p->presence_penalty != 0.0f, freq = p->frequency_penalty != 0.0f;
  if (!rep && !pres && !freq) return false;
  memcpy(out, logits, (size_t)vocab * sizeof *out);
  /* Hugging Face's RepetitionPenaltyLogitsProcessor: each token seen once in the
   * prompt or the output, a positive logit divided, a negative one multiplied */
  if (rep) {
    for (int pass = 0; pass < 2; pass++) {
      const int32_t *t = pass ? gen : prompt;
      int64_t n = pass ? ng : np;
      for (int64_t i = 0; i < n; i++) {
        int32_t k = t[i];
        if (k < 0 || k >= vocab || counts[k]) continue;
        counts[k] = 1;
        out[k] = out[k] > 0 ? out[k] / p->repetition_penalty : out[k] * p->repetition_penalty;
      }
    }
    for (int pass = 0; pass < 2; pass++) { /* counts back to zero, touching only what was set */
      const int32_t *t = pass ? gen : prompt;
      int64_t n = pass ? ng : np;
      for (int64_t i = 0; i < n; i++)
        if (t[i] >= 0 && t[i] < vocab) counts[t[i]] = 0;
    }
  }
  /* OpenAI's: over the output only, count times frequency plus presence once */
  if (pres || freq) {
    for (int64_t i = 0; i < ng; i++)
      if (gen[i] >= 0 && gen[i] < vocab) counts[gen[i]]++;
    for (int64_t i = 0; i < ng; i++) {
      int32_t k = gen[i];
      if (k < 0 || k >= vocab || counts[k] == 0) continue;
      out[k] -= p->frequency_penalty * (float)counts[k] + p->presence_penalty;
      counts[k] = 0; /* once per token */
    }
  }
  return true;
}

float zz_logprob_of(const float *logits, int64_t vocab, int32_t token, int k, zz_top_logprob *top) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < vocab; i++)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0;
  for (int64_t i = 0; i < vocab; i++) sum += exp((double)(logits[i] - mx));
  double lse = (double)mx + log(sum);
  /* the k largest by insertion (k <= 20): O(vocab * k) at worst, once per token asked */
  int have = 0;
  for (int64_t i = 0; i < vocab && k > 0; i++) {
    float v = logits[i];
    if (have == k && !(v > logits[top[have - 1].token])) continue;
    int pos = have < k ? have++ : k - 1;
    while (pos > 0 && v > logits[top[pos - 1].token]) {
      top[pos] = top[pos - 1];
      pos--;
    }
    top[pos].token = (int32_t)i;
  }
  for (int i = 0; i < have; i++) top[i].logprob = (float)((double)logits[top[i].token] - lse);
  return (float)((double)logits[token] - lse);
}
