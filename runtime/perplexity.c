/*
 * perplexity.c — held-out perplexity of a text under an engine's policy, teacher
 * forced: the text is cut into windows of the engine's gen_len tokens, each a
 * sequence that starts from BOS (the prompt, one token) and is then fed its own
 * next token at every decoding step. Every prediction after the first therefore
 * runs through the decode path — the KV cache as the policy stores it (4-bit
 * when compressed), top-k sparse attention when asked — which is what
 * compression and sparsity change.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_generate.h"

/* -log softmax(l)[y] and the argmax of l. */
static double zz_nll(const float *l, int64_t vocab, int32_t y, int32_t *arg) {
  float mx = l[0];
  int32_t am = 0;
  for (int64_t v = 1; v < vocab; v++)
    if (l[v] > mx) mx = l[v], am = (int32_t)v;
  double s = 0;
  for (int64_t v = 0; v < vocab; v++) s += exp((double)l[v] - mx);
  *arg = am;
  return log(s) + mx - (double)l[y];
}

zz_status zz_perplexity(zz_engine *e, const int32_t *ids, int64_t n, zz_ppl *out) {
  const zz_model *m = zz_engine_model(e);
  const zz_policy *p = zz_engine_policy(e);
  const zz_config *c = &m->cfg;
  int64_t w = zz_engine_shape(e)->gen_len, bls = (int64_t)p->gpu_batch_size * p->num_gpu_batches;
  if (zz_engine_shape(e)->prompt_len != 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "perplexity: the engine must be built for prompts of 1 token (BOS), not %lld",
                    (long long)zz_engine_shape(e)->prompt_len);
  if (n < 1) return zz_error(ZZ_ERR_INVALID_ARG, "perplexity: the text has no tokens");
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= c->vocab_size)
      return zz_error(ZZ_ERR_INVALID_ARG, "perplexity: token %lld is id %d, outside the vocabulary of %lld",
                      (long long)i, ids[i], (long long)c->vocab_size);
  int64_t windows = (n + w - 1) / w;
  zz_ppl r = {.windows = windows};
  int32_t *argmax = malloc((size_t)n * sizeof *argmax), *feed = malloc((size_t)bls * sizeof *feed);
  int64_t *lens = malloc((size_t)bls * sizeof *lens);
  const int32_t **prompts = malloc((size_t)bls * sizeof *prompts);
  const int32_t bos = c->bos;
  zz_status st = ZZ_OK;
  if (!argmax || !feed || !lens || !prompts) st = zz_error(ZZ_ERR_NO_MEMORY, "perplexity: out of memory");
  for (int64_t first = 0; st == ZZ_OK && first < windows; first += bls) {
    int64_t cnt = windows - first < bls ? windows - first : bls;
    for (int64_t i = 0; i < cnt; i++) lens[i] = 1, prompts[i] = &bos;
    if ((st = zz_engine_begin_block(e, 0, cnt, lens)) != ZZ_OK) break;
    for (int64_t step = 0; step < w && st == ZZ_OK; step++) {
      /* window i covers ids [(first + i) w, +w); step s predicts its token s */
      for (int64_t i = 0; i < cnt; i++) {
        int64_t at = (first + i) * w + step - 1;
        feed[i] = step > 0 && at < n ? ids[at] : c->pad;
      }
      zz_step_io io = {.prompts = prompts, .tokens = feed};
      if ((st = zz_engine_step(e, 0, (int)step, &io)) != ZZ_OK) break;
      const float *lg = zz_engine_logits(e);
      for (int64_t i = 0; i < cnt; i++) {
        int64_t at = (first + i) * w + step;
        if (at >= n || step >= w) continue;
        r.nll += zz_nll(lg + i * c->vocab_size, c->vocab_size, ids[at], &argmax[at]);
        r.tokens++;
      }
    }
  }
  free(feed);
  free(lens);
  free(prompts);
  if (st != ZZ_OK) {
    free(argmax);
    return st;
  }
  r.ppl = exp(r.nll / (double)r.tokens);
  r.argmax = argmax;
  *out = r;
  return ZZ_OK;
}

double zz_token_agreement(const int32_t *a, const int32_t *b, int64_t n) {
  int64_t same = 0;
  for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
  return n > 0 ? (double)same / (double)n : 0;
}

void zz_ppl_free(zz_ppl *r) {
  if (!r) return;
  free(r->argmax);
  r->argmax = NULL;
}
