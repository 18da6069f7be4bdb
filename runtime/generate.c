/*
 * generate.c — the token loop (llama2.c's generate, apart from the math): a
 * request's prompts are cut into the engine's micro-batch groups; each token step
 * runs every group with live sequences through the engine, then samples each live
 * sequence's next token from the logits and tracks EOS. launch/ calls this for one
 * process; stage/ runs the same loop spread over ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_generate.h" /* and the engine's public API, zz_engine.h: nothing of its inside */

zz_status zz_request_check(const zz_engine *e, const zz_request *req) {
  const zz_config *c = &zz_engine_model(e)->cfg;
  const zz_policy *pol = zz_engine_policy(e);
  const zz_shape *shape = zz_engine_shape(e);
  int64_t cap = (int64_t)zz_engine_groups(e) * pol->gpu_batch_size * pol->num_gpu_batches;
  if (req->n < 1 || req->n > cap)
    return zz_error(ZZ_ERR_INVALID_ARG, "block of %lld prompts; this engine takes 1 to %lld", (long long)req->n,
                    (long long)cap);
  if (req->max_new_tokens < 1 || req->max_new_tokens > shape->gen_len)
    return zz_error(ZZ_ERR_INVALID_ARG, "max new tokens %d outside 1..%lld", req->max_new_tokens,
                    (long long)shape->gen_len);
  for (int64_t i = 0; i < req->n; i++) {
    if (req->lens[i] < 1 || req->lens[i] > shape->prompt_len)
      return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld has %lld tokens; this engine takes 1 to %lld", (long long)i,
                      (long long)req->lens[i], (long long)shape->prompt_len);
    for (int64_t r = 0; r < req->lens[i]; r++)
      if (req->ids[i][r] < 0 || req->ids[i][r] >= c->vocab_size)
        return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld: token id %d at %lld is outside the vocabulary (%lld)",
                        (long long)i, req->ids[i][r], (long long)r, (long long)c->vocab_size);
  }
  return ZZ_OK;
}

/* The state of one generate call. */
typedef struct zz_gen {
  zz_engine *e;
  const zz_request *req;
  zz_result *r;
  bool *done;      /* [n] */
  zz_rng *rng;     /* [n] */
  int32_t *newest; /* [n] each sequence's newest token (the pad token once done) */
  void *scratch;   /* the sampler's */
  int64_t n, bls, live;
} zz_gen;

static int64_t zz_gen_first(const zz_gen *g, int group) { return group * g->bls; }
static int64_t zz_gen_count(const zz_gen *g, int group) {
  int64_t first = zz_gen_first(g, group);
  return first >= g->n ? 0 : (g->n - first < g->bls ? g->n - first : g->bls);
}

/* Samples the next token of every live sequence of a group from its logits. */
static void zz_gen_sample(zz_gen *g, int group, int step) {
  const zz_config *c = &zz_engine_model(g->e)->cfg;
  const float *logits = zz_engine_logits(g->e);
  int64_t first = zz_gen_first(g, group), cnt = zz_gen_count(g, group);
  for (int64_t i = 0; i < cnt; i++) {
    int64_t q = first + i;
    if (g->done[q]) continue;
    const float *lg = logits + i * c->vocab_size;
    if (g->req->on_logits) g->req->on_logits(g->req->ctx, q, step, lg, c->vocab_size);
    bool ended = false;
    int32_t tok = zz_sample_sequence(c, lg, &g->req->sampling, g->req->ignore_eos, &g->rng[q], g->scratch, &ended);
    g->r->tokens[q][g->r->n_tokens[q]++] = tok;
    g->newest[q] = zz_sequence_input(c, tok, ended);
    if (ended) {
      g->done[q] = true;
      g->live--;
    }
  }
}

int32_t zz_sample_sequence(const zz_config *c, const float *logits, const zz_sampling *s, bool ignore_eos,
                           zz_rng *rng, void *scratch, bool *ended_out) {
  int32_t tok = zz_sample(logits, c->vocab_size, s, rng, scratch);
  *ended_out = zz_config_is_eos(c, tok) && !ignore_eos;
  return tok;
}

int32_t zz_sequence_input(const zz_config *c, int32_t token, bool ended) { return ended ? c->pad : token; }

static bool zz_gen_group_live(const zz_gen *g, int group) {
  int64_t first = zz_gen_first(g, group), cnt = zz_gen_count(g, group);
  for (int64_t i = 0; i < cnt; i++)
    if (!g->done[first + i]) return true;
  return false;
}

static zz_status zz_gen_loop(zz_gen *g, double *t_prefill) {
  zz_engine *e = g->e;
  const zz_request *req = g->req;
  int n_groups = zz_engine_groups(e);
  for (int gr = 0; gr < n_groups && zz_gen_count(g, gr); gr++)
    ZZ_CHECK(zz_engine_begin_block(e, gr, zz_gen_count(g, gr), req->lens + zz_gen_first(g, gr)));
  for (int step = 0; step < req->max_new_tokens && g->live > 0; step++) {
    ZZ_CHECK(zz_check_stop());
    for (int gr = 0; gr < n_groups && zz_gen_count(g, gr); gr++) {
      if (!zz_gen_group_live(g, gr)) continue;
      int64_t first = zz_gen_first(g, gr);
      zz_step_io io = {.prompts = req->ids + first, .tokens = g->newest + first};
      ZZ_CHECK(zz_engine_step(e, gr, step, &io));
      zz_gen_sample(g, gr, step);
    }
    if (step == 0) *t_prefill = zz_now();
  }
  return ZZ_OK;
}

zz_status zz_generate(zz_engine *e, const zz_request *req, zz_result *res) {
  const zz_model *m = zz_engine_model(e);
  const zz_policy *pol = zz_engine_policy(e);
  int l0, l1;
  zz_engine_slice(e, &l0, &l1);
  if (l0 != 0 || l1 != m->n_layers)
    return zz_error(ZZ_ERR_INVALID_ARG, "generate: the engine holds layers [%d, %d) of %d; the token loop needs them all",
                    l0, l1, m->n_layers);
  ZZ_CHECK(zz_request_check(e, req));
  int64_t n = req->n;
  zz_result r = {0};
  zz_gen g = {.e = e, .req = req, .r = &r, .n = n, .bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches,
              .live = n};
  r.tokens = calloc((size_t)n, sizeof *r.tokens);
  r.n_tokens = calloc((size_t)n, sizeof *r.n_tokens);
  g.done = calloc((size_t)n, sizeof *g.done);
  g.rng = calloc((size_t)n, sizeof *g.rng);
  g.newest = calloc((size_t)n, sizeof *g.newest);
  g.scratch = malloc(zz_sample_scratch_bytes(m->cfg.vocab_size));
  zz_status st = ZZ_OK;
  if (!r.tokens || !r.n_tokens || !g.done || !g.rng || !g.newest || !g.scratch)
    st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
  for (int64_t i = 0; st == ZZ_OK && i < n; i++) {
    if (!(r.tokens[i] = malloc((size_t)req->max_new_tokens * sizeof **r.tokens)))
      st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
    zz_rng_seed(&g.rng[i], req->sampling.seed, req->streams ? req->streams[i] : (uint64_t)i);
  }
  double t0 = zz_now(), t_prefill = t0;
  if (st == ZZ_OK) st = zz_gen_loop(&g, &t_prefill);
  r.prefill_s = t_prefill - t0;
  r.decode_s = zz_now() - t_prefill;
  zz_engine_add_wall(e, zz_now() - t0);
  free(g.done);
  free(g.rng);
  free(g.newest);
  free(g.scratch);
  if (st != ZZ_OK) {
    zz_result_free(&r, n);
    return st;
  }
  *res = r;
  return ZZ_OK;
}

void zz_result_free(zz_result *res, int64_t n) {
  if (!res) return;
  if (res->tokens)
    for (int64_t i = 0; i < n; i++) free(res->tokens[i]);
  free(res->tokens);
  free(res->n_tokens);
  res->tokens = NULL;
  res->n_tokens = NULL;
}
