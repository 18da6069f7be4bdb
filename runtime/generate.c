/*
 * generate.c — the token loop (llama2.c's generate, apart from the math): a
 * request's prompts are cut into the engine's micro-batch groups; each token step
 * runs every group with live sequences through the engine, then samples each live
 * sequence's next token from the logits and tracks EOS. What a sequence does with a
 * step's logits (penalties, sampling, log-probabilities, end ids, stop, length, the
 * next input) is zz_gen_take, written once: launch/ runs it through zz_generate in
 * one process, and a pipeline's last rank (stage/engine_stage.c) calls it on the
 * logits of each (step, group) item the stage hands it. With zz_request.refill a
 * request holds more prompts than slots, and a slot whose sequence has ended takes
 * the next waiting one (zz_gen_loop_refill, zz_engine_refill).
 */
#include <stdlib.h>
#include <string.h>

#include "zz_generate.h" /* and the engine's public API, zz_engine.h: nothing of its inside */
#include "zz_seq.h"

/* floor(2 log2 n) for n >= 1 (0 below): the sqrt(2) step n is in */
static int zz_half_log2(int n) {
  int s = 0;
  for (double v = 1.4142135623730951; v <= n; v *= 1.4142135623730951) s++;
  return s;
}

int zz_prompt_order(int64_t len_a, int new_a, int64_t len_b, int new_b) {
  int ba = zz_half_log2(new_a), bb = zz_half_log2(new_b);
  if (ba != bb) return ba < bb ? -1 : 1;
  if (len_a != len_b) return len_a < len_b ? -1 : 1;
  return new_a < new_b ? -1 : new_a > new_b;
}

zz_status zz_request_check(const zz_engine *e, const zz_request *req) {
  const zz_config *c = &zz_engine_model(e)->cfg;
  const zz_policy *pol = zz_engine_policy(e);
  const zz_shape *shape = zz_engine_shape(e);
  int64_t cap = (int64_t)zz_engine_groups(e) * pol->gpu_batch_size * pol->num_gpu_batches;
  if (req->n < 1 || (req->n > cap && !req->refill))
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
    if (req->params && zz_seq_params_check(&req->params[i], req->max_new_tokens) != ZZ_OK)
      return zz_error(ZZ_ERR_INVALID_ARG, "prompt %lld: %s", (long long)i, zz_error_message());
  }
  return ZZ_OK;
}

/* ================================================================ one block's sequences */

/* The per-sequence state of a block's token loop: what each sequence does with a
 * step's logits. zz_generate holds one; a pipeline's last rank holds one too. */
struct zz_gen {
  const zz_config *c;
  const zz_request *req;
  zz_result r;
  bool *done;      /* [n] */
  zz_rng *rng;     /* [n] */
  int32_t *input;  /* [n] each sequence's next step input: its newest token, the pad token once done */
  void *scratch;   /* the sampler's */
  float *pen;      /* [vocab] a sequence's logits after its penalties (params only) */
  int32_t *counts; /* [vocab] zeros between uses (zz_seq_penalize) */
  int64_t n, live;
};

/* Ends sequence q (why: ZZ_FINISH_*). */
static void zz_gen_end(zz_gen *g, int64_t q, zz_finish why) {
  g->done[q] = true;
  g->live--;
  if (g->r.out) g->r.out[q].finish = why;
}

/* The token of sequence q with its own settings: penalties on a copy of its
 * logits, its sampling, the log-probabilities of the model's own logits. */
static int32_t zz_gen_pick(zz_gen *g, int64_t q, const float *lg, bool *eos) {
  const zz_config *c = g->c;
  const zz_seq_params *sp = &g->req->params[q];
  int64_t nt = g->r.n_tokens[q];
  const float *use = lg;
  if (zz_seq_penalize(sp, lg, c->vocab_size, g->req->ids[q], g->req->lens[q], g->r.tokens[q], nt, g->counts, g->pen))
    use = g->pen;
  int32_t tok = zz_sample_sequence(c, use, &sp->sampling, g->req->ignore_eos, &g->rng[q], g->scratch, eos);
  zz_seq_out *o = &g->r.out[q];
  if (o->logprobs)
    o->logprobs[nt] = zz_logprob_of(lg, c->vocab_size, tok, o->top_k, o->top ? o->top + nt * o->top_k : NULL);
  return tok;
}

/* The most new tokens sequence q takes: its own, else the request's. */
static int zz_req_max_new(const zz_request *req, int64_t q) {
  return req->params ? req->params[q].max_new_tokens : req->max_new_tokens;
}
static int zz_gen_max_new(const zz_gen *g, int64_t q) { return zz_req_max_new(g->req, q); }

void zz_gen_take_one(zz_gen *g, int64_t q, int step, const float *lg) {
  const zz_config *c = g->c;
  const zz_request *req = g->req;
  if (g->done[q]) return;
  if (req->on_logits) req->on_logits(req->ctx, q, step, lg, c->vocab_size);
  bool ended = false;
  int32_t tok = req->params
                    ? zz_gen_pick(g, q, lg, &ended)
                    : zz_sample_sequence(c, lg, &req->sampling, req->ignore_eos, &g->rng[q], g->scratch, &ended);
  g->r.tokens[q][g->r.n_tokens[q]++] = tok;
  g->input[q] = zz_sequence_input(c, tok, ended);
  if (ended) {
    zz_gen_end(g, q, ZZ_FINISH_EOS);
  } else if (req->on_token && req->on_token(req->ctx, q, g->r.tokens[q], g->r.n_tokens[q])) {
    g->input[q] = zz_sequence_input(c, tok, true);
    zz_gen_end(g, q, ZZ_FINISH_STOP);
  } else if (g->r.n_tokens[q] >= zz_gen_max_new(g, q)) {
    zz_gen_end(g, q, ZZ_FINISH_LENGTH);
  }
}

void zz_gen_take(zz_gen *g, int64_t first, int64_t cnt, int step, const float *logits) {
  for (int64_t i = 0; i < cnt; i++) zz_gen_take_one(g, first + i, step, logits + i * g->c->vocab_size);
}

int32_t zz_sample_sequence(const zz_config *c, const float *logits, const zz_sampling *s, bool ignore_eos, zz_rng *rng,
                           void *scratch, bool *ended_out) {
  int32_t tok = zz_sample(logits, c->vocab_size, s, rng, scratch);
  *ended_out = zz_config_is_eos(c, tok) && !ignore_eos;
  return tok;
}

int32_t zz_sequence_input(const zz_config *c, int32_t token, bool ended) { return ended ? c->pad : token; }

bool zz_gen_done(const zz_gen *g, int64_t q) { return g->done[q]; }
int32_t zz_gen_newest(const zz_gen *g, int64_t q) {
  int64_t nt = g->r.n_tokens[q];
  return nt > 0 ? g->r.tokens[q][nt - 1] : g->c->pad;
}

const zz_seq_out *zz_gen_out(const zz_gen *g, int64_t q, int64_t *n_out) {
  *n_out = g->r.n_tokens[q];
  return g->r.out ? &g->r.out[q] : NULL;
}

zz_status zz_gen_create(const zz_config *c, const zz_request *req, zz_gen **out) {
  int64_t n = req->n;
  zz_gen *g = calloc(1, sizeof *g);
  if (!g) return zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
  *g = (zz_gen){.c = c, .req = req, .n = n, .live = n};
  zz_result *r = &g->r;
  r->tokens = calloc((size_t)n, sizeof *r->tokens);
  r->n_tokens = calloc((size_t)n, sizeof *r->n_tokens);
  g->done = calloc((size_t)n, sizeof *g->done);
  g->rng = calloc((size_t)n, sizeof *g->rng);
  g->input = calloc((size_t)n, sizeof *g->input);
  g->scratch = malloc(zz_sample_scratch_bytes(c->vocab_size));
  bool own = req->params || req->on_token; /* per-sequence outcomes are reported */
  if (own) r->out = calloc((size_t)n, sizeof *r->out);
  if (req->params) {
    g->pen = malloc((size_t)c->vocab_size * sizeof *g->pen);
    g->counts = calloc((size_t)c->vocab_size, sizeof *g->counts);
  }
  zz_status st = ZZ_OK;
  if (!r->tokens || !r->n_tokens || !g->done || !g->rng || !g->input || !g->scratch || (own && !r->out) ||
      (req->params && (!g->pen || !g->counts)))
    st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
  for (int64_t i = 0; st == ZZ_OK && i < n; i++) {
    int max_i = zz_gen_max_new(g, i);
    if (!(r->tokens[i] = malloc((size_t)max_i * sizeof **r->tokens)))
      st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
    const zz_sampling *smp = req->params ? &req->params[i].sampling : &req->sampling;
    zz_rng_seed(&g->rng[i], smp->seed, req->streams ? req->streams[i] : (uint64_t)i);
    int k = req->params ? req->params[i].logprobs : -1;
    if (st == ZZ_OK && k >= 0) {
      r->out[i].top_k = k;
      r->out[i].logprobs = malloc((size_t)max_i * sizeof *r->out[i].logprobs);
      if (k > 0) r->out[i].top = malloc((size_t)max_i * (size_t)k * sizeof *r->out[i].top);
      if (!r->out[i].logprobs || (k > 0 && !r->out[i].top)) st = zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory");
    }
  }
  if (st != ZZ_OK) {
    zz_gen_destroy(g);
    return st;
  }
  *out = g;
  return ZZ_OK;
}

void zz_gen_result(zz_gen *g, zz_result *out) {
  *out = g->r;
  g->r = (zz_result){0};
}

void zz_gen_destroy(zz_gen *g) {
  if (!g) return;
  zz_result_free(&g->r, g->n);
  free(g->done);
  free(g->rng);
  free(g->input);
  free(g->scratch);
  free(g->pen);
  free(g->counts);
  free(g);
}

/* ================================================================ the loop over an engine */

/* Group gr of a block cut into groups of bls sequences: its first and its count. */
static int64_t zz_group_first(int64_t bls, int gr) { return gr * bls; }
static int64_t zz_group_count(int64_t n, int64_t bls, int gr) {
  int64_t first = zz_group_first(bls, gr);
  return first >= n ? 0 : (n - first < bls ? n - first : bls);
}

static bool zz_group_live(const zz_gen *g, int64_t base, int64_t n, int64_t bls, int gr) {
  int64_t first = base + zz_group_first(bls, gr), cnt = zz_group_count(n, bls, gr);
  for (int64_t i = 0; i < cnt; i++)
    if (!g->done[first + i]) return true;
  return false;
}

/* The useful positions of one step of sequences [first, first + cnt): their
 * prompts' tokens, then the input of each that has not ended. */
static void zz_gen_count(zz_gen *g, int64_t first, int64_t cnt, int step) {
  for (int64_t i = first; i < first + cnt; i++) g->r.pos_useful += step == 0 ? g->req->lens[i] : !g->done[i];
}

/* One block: sequences [base, base + n) cut into the engine's groups, every group
 * stepped until its sequences have all ended. */
static zz_status zz_gen_loop(zz_engine *e, zz_gen *g, int64_t base, int64_t n, double *t_prefill) {
  const zz_request *req = g->req;
  const zz_policy *pol = zz_engine_policy(e);
  int64_t bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches;
  int n_groups = zz_engine_groups(e);
  for (int gr = 0; gr < n_groups && zz_group_count(n, bls, gr); gr++)
    ZZ_CHECK(zz_engine_begin_block(e, gr, zz_group_count(n, bls, gr), req->lens + base + zz_group_first(bls, gr)));
  bool live = true;
  for (int step = 0; step < req->max_new_tokens && live; step++) {
    ZZ_CHECK(zz_check_stop());
    live = false;
    for (int gr = 0; gr < n_groups && zz_group_count(n, bls, gr); gr++) {
      if (!zz_group_live(g, base, n, bls, gr)) continue;
      int64_t first = base + zz_group_first(bls, gr), cnt = zz_group_count(n, bls, gr);
      zz_gen_count(g, first, cnt, step);
      zz_step_io io = {.prompts = req->ids + first, .tokens = g->input + first, .ended = g->done + first};
      ZZ_CHECK(zz_engine_step(e, gr, step, &io));
      zz_gen_take(g, first, cnt, step, zz_engine_logits(e));
      live = live || zz_group_live(g, base, n, bls, gr);
    }
    if (step == 0 && base == 0) *t_prefill = zz_now();
  }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- refill */

/* ---------------------------------------------------------------- waiting prompts */

/* A pipeline's rank 0 (stage/engine_stage.c) hands slots out itself; it asks
 * slots.c's rule which prompt comes next, with this engine's room. */
static int64_t zz_waiting_room(void *ctx, int gr, int step, int64_t len) {
  const zz_waiting *w = ctx;
  return zz_engine_refill_room(w->e, gr, step, len);
}
static int64_t zz_waiting_max_new(void *ctx, int64_t q) { return zz_req_max_new(((const zz_waiting *)ctx)->req, q); }
static const zz_slot_ops zz_waiting_ops = {.room = zz_waiting_room, .max_new = zz_waiting_max_new};

zz_status zz_waiting_init(zz_waiting *w, const zz_engine *e, const zz_request *req) {
  const zz_policy *pol = zz_engine_policy(e);
  *w = (zz_waiting){.e = e, .req = req};
  return zz_slots_init(&w->sl, zz_engine_groups(e), (int64_t)pol->gpu_batch_size * pol->num_gpu_batches, req->n,
                       req->lens, &zz_waiting_ops, w);
}

void zz_waiting_free(zz_waiting *w) {
  zz_slots_free(&w->sl);
  *w = (zz_waiting){0};
}


/* The token loop's side of the slot schedule (zz_slots, slots.c): each turn run on
 * the engine, each sequence's tokens sampled. */
typedef struct zz_refill_ctx {
  zz_engine *e;
  zz_gen *g;
  int64_t bls;         /* slots per group */
  const int32_t **ids; /* [cap] the prompt in each slot */
  int64_t *lens;       /* [cap] */
  int32_t *input;      /* [cap] its next input (the pad token once ended) */
} zz_refill_ctx;

static int64_t zz_refill_room_of(void *ctx, int gr, int step, int64_t len) {
  return zz_engine_refill_room(((zz_refill_ctx *)ctx)->e, gr, step, len);
}
static int64_t zz_refill_max_new(void *ctx, int64_t q) { return zz_gen_max_new(((zz_refill_ctx *)ctx)->g, q); }
static bool zz_refill_done(void *ctx, int64_t q) { return ((zz_refill_ctx *)ctx)->g->done[q]; }

static zz_status zz_refill_begin(void *ctx, int gr, int64_t cnt, const int64_t *seq) {
  zz_refill_ctx *x = ctx;
  zz_gen *g = x->g;
  int64_t base = gr * x->bls;
  for (int64_t i = 0; i < cnt; i++) {
    x->ids[base + i] = g->req->ids[seq[i]];
    x->lens[base + i] = g->req->lens[seq[i]];
  }
  ZZ_CHECK(zz_engine_begin_block(x->e, gr, cnt, x->lens + base));
  zz_step_io io = {.prompts = x->ids + base};
  ZZ_CHECK(zz_engine_step(x->e, gr, 0, &io));
  for (int64_t i = 0; i < cnt; i++) {
    g->r.pos_useful += x->lens[base + i];
    zz_gen_take_one(g, seq[i], 0, zz_engine_logits(x->e) + i * g->c->vocab_size);
  }
  return ZZ_OK;
}

static zz_status zz_refill_one(void *ctx, int gr, int64_t i, int64_t q, int step) {
  zz_refill_ctx *x = ctx;
  zz_gen *g = x->g;
  int64_t s = gr * x->bls + i;
  x->ids[s] = g->req->ids[q];
  x->lens[s] = g->req->lens[q];
  zz_step_io io = {.prompts = x->ids + s};
  ZZ_CHECK(zz_engine_refill(x->e, gr, i, x->lens[s], step, &io));
  g->r.pos_useful += x->lens[s];
  g->r.refilled++;
  zz_gen_take_one(g, q, 0, zz_engine_logits(x->e) + i * g->c->vocab_size);
  return ZZ_OK;
}

static zz_status zz_refill_step(void *ctx, int gr, int step, int64_t cnt, const int64_t *seq, const bool *ended) {
  zz_refill_ctx *x = ctx;
  zz_gen *g = x->g;
  int64_t base = gr * x->bls;
  for (int64_t i = 0; i < cnt; i++) {
    x->input[base + i] = ended[i] ? g->c->pad : g->input[seq[i]];
    g->r.pos_useful += !ended[i];
  }
  zz_step_io io = {.tokens = x->input + base, .ended = ended};
  ZZ_CHECK(zz_engine_step(x->e, gr, step, &io));
  for (int64_t i = 0; i < cnt; i++)
    if (!ended[i])
      zz_gen_take_one(g, seq[i], (int)g->r.n_tokens[seq[i]], zz_engine_logits(x->e) + i * g->c->vocab_size);
  return ZZ_OK;
}

static const zz_slot_ops zz_refill_ops = {.room = zz_refill_room_of,
                                          .max_new = zz_refill_max_new,
                                          .done = zz_refill_done,
                                          .begin = zz_refill_begin,
                                          .refill = zz_refill_one,
                                          .step = zz_refill_step};

static zz_status zz_gen_loop_refill(zz_engine *e, zz_gen *g, double *t_prefill) {
  const zz_policy *pol = zz_engine_policy(e);
  int n_groups = zz_engine_groups(e);
  int64_t bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches, cap = bls * n_groups;
  zz_refill_ctx x = {.e = e, .g = g, .bls = bls};
  x.ids = calloc((size_t)cap, sizeof *x.ids);
  x.lens = calloc((size_t)cap, sizeof *x.lens);
  x.input = calloc((size_t)cap, sizeof *x.input);
  zz_slots sl = {0};
  zz_status st = !x.ids || !x.lens || !x.input ? zz_error(ZZ_ERR_NO_MEMORY, "generate: out of memory") : ZZ_OK;
  if (st == ZZ_OK) st = zz_slots_init(&sl, n_groups, bls, g->n, g->req->lens, &zz_refill_ops, &x);
  for (bool first = true; st == ZZ_OK && g->live > 0; first = false) {
    if ((st = zz_check_stop()) != ZZ_OK) break;
    for (int gr = 0; st == ZZ_OK && gr < n_groups; gr++) st = zz_slots_turn(&sl, gr);
    if (first) *t_prefill = zz_now();
  }
  zz_slots_free(&sl);
  free(x.ids);
  free(x.lens);
  free(x.input);
  return st;
}

/* The request's prompts: with refill where the engine can (every group), else in
 * consecutive blocks of the engine's slots. */
static zz_status zz_gen_run(zz_engine *e, zz_gen *g, double *t_prefill) {
  const zz_policy *pol = zz_engine_policy(e);
  int n_groups = zz_engine_groups(e);
  bool refill = g->req->refill;
  for (int gr = 0; refill && gr < n_groups; gr++) refill = zz_engine_can_refill(e, gr);
  if (refill) return zz_gen_loop_refill(e, g, t_prefill);
  int64_t cap = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches * n_groups;
  for (int64_t base = 0; base < g->n; base += cap)
    ZZ_CHECK(zz_gen_loop(e, g, base, g->n - base < cap ? g->n - base : cap, t_prefill));
  return ZZ_OK;
}

zz_status zz_generate(zz_engine *e, const zz_request *req, zz_result *res) {
  const zz_model *m = zz_engine_model(e);
  int l0, l1;
  zz_engine_slice(e, &l0, &l1);
  if (l0 != 0 || l1 != m->n_layers)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "generate: the engine holds layers [%d, %d) of %d; the token loop needs them all", l0, l1,
                    m->n_layers);
  ZZ_CHECK(zz_request_check(e, req));
  zz_gen *g = NULL;
  ZZ_CHECK(zz_gen_create(&m->cfg, req, &g));
  zz_engine_stats before, after;
  zz_engine_get_stats(e, &before);
  double t0 = zz_now(), t_prefill = t0;
  zz_status st = zz_gen_run(e, g, &t_prefill);
  zz_engine_get_stats(e, &after);
  g->r.pos_computed = after.positions - before.positions;
  g->r.pos_useful -= after.prefix_shared - before.prefix_shared; /* tokens a shared prefix needed once */
  g->r.prefill_s = t_prefill - t0;
  g->r.decode_s = zz_now() - t_prefill;
  zz_engine_add_wall(e, zz_now() - t0);
  if (st == ZZ_OK) zz_gen_result(g, res);
  zz_gen_destroy(g);
  return st;
}

void zz_result_free(zz_result *res, int64_t n) {
  if (!res) return;
  if (res->tokens)
    for (int64_t i = 0; i < n; i++) free(res->tokens[i]);
  if (res->out)
    for (int64_t i = 0; i < n; i++) {
      free(res->out[i].logprobs);
      free(res->out[i].top);
    }
  free(res->out);
  res->out = NULL;
  free(res->tokens);
  free(res->n_tokens);
  res->tokens = NULL;
  res->n_tokens = NULL;
}
