/*
 * engine_stage.c — the engine behind the stage's callbacks: one rank's zz_engine runs
 * its slice of layers on the wavefront's (step, group) items.
 *
 *   rank 0      next_block: a request from the caller's feed, cut into groups of
 *               bls = gbs x num_gb sequences (group g of block B is what one process
 *               runs as its block B*T + g, so the tokens are the same); compute: the
 *               group's prompts at step 0, each sequence's newest token after (the pad
 *               token once it ended, as zz_generate feeds); tokens: collects them
 *               with why each ended and its log-probabilities, and asks the request's
 *               on_token (a stop string: rank 0 holds the tokenizer) where the
 *               sampler did not end it, as zz_gen_take does; end_block: hands the
 *               result to the caller.
 *   rank r      compute: hidden state in, hidden state out (not on the last rank);
 *               every rank skips a GPU batch whose sequences have all ended (rank
 *               0's done flags travel behind the hidden state), as in one process.
 *   last rank   sample: the token loop's per-sequence step (zz_gen_take, the one
 *               zz_generate runs) on the group's logits; its ids, done flags (1 +
 *               why it ended) and log-probabilities go back to rank 0. No sampling
 *               rule is written here.
 *   refill      (refill_blocks > 1) a request holds more prompts than the block's
 *               slots: rank 0 gives a slot whose sequence ended the next waiting
 *               prompt (es_refill: zz_waiting, one process's rule); every rank runs
 *               its prompt step through its slice after the item's step (es_joins);
 *               the last rank samples its first token; prompts that found no slot
 *               go on in a continuation block, and the request is handed back once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zz_stage.h"

struct zz_engine_stage {
  zz_engine_stage_config cfg;
  const zz_config *mc;
  bool first, last; /* the slice starts at layer 0 / ends at the LM head */
  int64_t bls;      /* sequences per group */
  int64_t cap;      /* slots of a block: groups x bls */
  int64_t max_seqs; /* sequences of a request: cap, refill_blocks x cap with refill */
  int64_t *lens;    /* [max_seqs] the block's prompt lengths (the last rank's request) */
  int64_t *slens;   /* [cap] each slot's prompt length, for begin_block */
  int32_t *slot;    /* [cap] the sequence in each slot (a block without refill: the slot's own) */
  /* rank 0 */
  zz_request req;          /* the request being run */
  int32_t *ids;            /* its prompts one after another (malloc'd per block) */
  int32_t *plen;           /* [max_seqs] */
  uint64_t *streams;       /* [max_seqs] */
  int32_t *group_first;    /* [groups + 1] */
  const int32_t **prompts; /* [bls] the computed group's prompt pointers (step 0) */
  int32_t *inputs;         /* [bls] the computed group's newest tokens (step > 0) */
  int32_t *tok;            /* [max_seqs * max_new_tokens] tokens of the request */
  int32_t **tokens;        /* [max_seqs] rows of tok */
  int64_t *n_tokens;       /* [max_seqs] */
  uint8_t *ended;          /* [max_seqs] as rank 0 has heard (or decided: a stop string) */
  zz_seq_out *out;         /* [max_seqs] why each ended, its log-probabilities (the block has params) */
  zz_waiting w;            /* refill: the request's sequences still waiting for a slot */
  int32_t *slot_seq;       /* [cap] the next block's first sequence of each slot */
  int64_t refilled;        /* sequences of the request that took an ended one's slot */
  bool *endb;              /* [bls] the computed group's ended flags, for zz_step_io.ended */
  double t0, t_prefill;
  int prefilled;      /* groups whose first token is back */
  int64_t pos0;       /* the engine's positions computed when the block began */
  int64_t pos_useful; /* of the block's: prompt tokens, inputs of sequences not ended */
  /* last rank */
  zz_request sreq;      /* the block as the token loop sees it (streams, lengths, settings) */
  zz_gen *gen;          /* the block's per-sequence state */
  const int32_t **sids; /* [max_seqs] each sequence's prompt (a repetition penalty reads it) */
};

static zz_status es_alloc(zz_engine_stage *es) {
  size_t slots = (size_t)es->cap, cap = (size_t)es->max_seqs, groups = (size_t)zz_engine_groups(es->cfg.engine);
  es->lens = calloc(cap, sizeof *es->lens);
  es->slens = calloc(slots, sizeof *es->slens);
  es->slot = calloc(slots, sizeof *es->slot);
  es->slot_seq = calloc(slots, sizeof *es->slot_seq);
  es->plen = calloc(cap, sizeof *es->plen);
  es->streams = calloc(cap, sizeof *es->streams);
  es->group_first = calloc(groups + 1, sizeof *es->group_first);
  es->prompts = calloc((size_t)es->bls, sizeof *es->prompts);
  es->inputs = calloc((size_t)es->bls, sizeof *es->inputs);
  es->tok = calloc(cap * (size_t)es->cfg.max_new_tokens, sizeof *es->tok);
  es->tokens = calloc(cap, sizeof *es->tokens);
  es->n_tokens = calloc(cap, sizeof *es->n_tokens);
  es->ended = calloc(cap, sizeof *es->ended);
  es->sids = calloc(cap, sizeof *es->sids);
  es->out = calloc(cap, sizeof *es->out);
  es->endb = calloc((size_t)es->bls, sizeof *es->endb);
  if (!es->sids || !es->out || !es->endb || !es->lens || !es->slens || !es->slot || !es->slot_seq || !es->plen ||
      !es->streams || !es->group_first || !es->prompts || !es->inputs || !es->tok || !es->tokens || !es->n_tokens ||
      !es->ended)
    return zz_error(ZZ_ERR_NO_MEMORY, "engine stage: out of memory for blocks of %lld sequences", (long long)es->cap);
  for (size_t i = 0; i < cap; i++) es->tokens[i] = es->tok + i * (size_t)es->cfg.max_new_tokens;
  return ZZ_OK;
}

/* Rank 0: the block's log-probability rows, freed. */
static void es_out_free(zz_engine_stage *es) {
  for (int64_t i = 0; es->out && i < es->max_seqs; i++) {
    free(es->out[i].logprobs);
    free(es->out[i].top);
    es->out[i] = (zz_seq_out){0};
  }
}

/* Rank 0: each sequence's outcome for the block (params: its own log-probabilities). */
static zz_status es_out_alloc(zz_engine_stage *es, const zz_stage_block *b) {
  es_out_free(es);
  for (int32_t i = 0; b->params && i < b->nseq; i++) {
    const zz_seq_params *sp = &b->params[i];
    zz_seq_out *o = &es->out[i];
    if (sp->logprobs < 0) continue;
    o->top_k = sp->logprobs;
    o->logprobs = malloc((size_t)sp->max_new_tokens * sizeof *o->logprobs);
    if (o->top_k > 0) o->top = malloc((size_t)sp->max_new_tokens * (size_t)o->top_k * sizeof *o->top);
    if (!o->logprobs || (o->top_k > 0 && !o->top))
      return zz_error(ZZ_ERR_NO_MEMORY, "engine stage: out of memory for log-probabilities");
  }
  return ZZ_OK;
}

zz_status zz_engine_stage_create(const zz_engine_stage_config *cfg, zz_engine_stage **out) {
  if (!cfg || !cfg->engine) return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: no engine");
  const zz_shape *shape = zz_engine_shape(cfg->engine);
  if (cfg->max_new_tokens < 1 || cfg->max_new_tokens > shape->gen_len)
    return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: max new tokens %d outside 1..%lld", cfg->max_new_tokens,
                    (long long)shape->gen_len);
  zz_engine_stage *es = calloc(1, sizeof *es);
  if (!es) return zz_error(ZZ_ERR_NO_MEMORY, "engine stage: out of memory");
  es->cfg = *cfg;
  const zz_model *m = zz_engine_model(cfg->engine);
  const zz_policy *pol = zz_engine_policy(cfg->engine);
  const zz_plan_spec *spec = &zz_engine_plan(cfg->engine)->spec;
  es->mc = &m->cfg;
  es->first = spec->layer_begin == 0;
  es->last = spec->layer_end == m->n_layers;
  es->bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches;
  es->cap = es->bls * zz_engine_groups(cfg->engine);
  es->max_seqs = es->cap * (cfg->refill_blocks > 1 ? cfg->refill_blocks : 1);
  zz_status st = es_alloc(es);
  if (st != ZZ_OK) {
    zz_engine_stage_destroy(es);
    return st;
  }
  *out = es;
  return ZZ_OK;
}

void zz_engine_stage_destroy(zz_engine_stage *es) {
  if (!es) return;
  free(es->lens);
  free(es->slens);
  free(es->slot);
  free(es->slot_seq);
  zz_waiting_free(&es->w);
  free(es->ids);
  free(es->plen);
  free(es->streams);
  free(es->group_first);
  free(es->prompts);
  free(es->inputs);
  free(es->tok);
  free(es->tokens);
  free(es->n_tokens);
  free(es->ended);
  free(es->sids);
  es_out_free(es);
  free(es->out);
  free(es->endb);
  zz_gen_destroy(es->gen);
  free(es);
}

/* ================================================================ the callbacks */

static int32_t es_gsize(const zz_stage_block *b, int g) { return b->group_first[g + 1] - b->group_first[g]; }

static zz_status es_next_block(void *ctx, zz_stage_block *out, int *more_out) {
  zz_engine_stage *es = ctx;
  zz_request r = {0};
  bool cont = es->w.sl.waiting > 0; /* the request's sequences that found no slot yet: another block */
  if (!cont) {
    if (!es->cfg.next) return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: rank 0 has no feed (next)");
    ZZ_CHECK(es->cfg.next(es->cfg.ctx, es->max_seqs, &r));
    if (r.n <= 0) {
      *more_out = 0;
      return ZZ_OK;
    }
    r.max_new_tokens = es->cfg.max_new_tokens;
    r.ignore_eos = es->cfg.ignore_eos;
    r.sampling = es->cfg.sampling;
    r.refill = r.n > es->cap; /* more sequences than slots: only where every rank can refill (max_seqs) */
    ZZ_CHECK(zz_request_check(es->cfg.engine, &r));
    /* the block carries 32-bit counts: refuse, never cut, a larger one */
    if (r.n > es->max_seqs || r.n > INT32_MAX)
      return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: a request of %lld sequences, more than a block's %lld",
                      (long long)r.n, (long long)es->max_seqs);
    int64_t total = 0;
    for (int64_t i = 0; i < r.n; i++) {
      if (r.lens[i] > INT32_MAX)
        return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: prompt %lld has %lld tokens, beyond 2^31 - 1", (long long)i,
                        (long long)r.lens[i]);
      total += r.lens[i];
    }
    free(es->ids);
    if (!(es->ids = malloc((size_t)total * sizeof *es->ids)))
      return zz_error(ZZ_ERR_NO_MEMORY, "engine stage: out of memory for %lld prompt ids", (long long)total);
    int64_t off = 0;
    for (int64_t i = 0; i < r.n; i++) {
      memcpy(es->ids + off, r.ids[i], (size_t)r.lens[i] * sizeof *es->ids);
      off += r.lens[i];
      es->plen[i] = (int32_t)r.lens[i];
      es->streams[i] = r.streams ? r.streams[i] : (uint64_t)i;
    }
    es->req = r;
    zz_waiting_free(&es->w);
    if (r.refill) ZZ_CHECK(zz_waiting_init(&es->w, es->cfg.engine, &es->req));
  }
  /* with refill the slots take the waiting sequences in order; else the sequences are the slots */
  int64_t units = es->req.refill ? (es->w.sl.waiting < es->cap ? es->w.sl.waiting : es->cap) : es->req.n;
  for (int64_t i = 0; es->req.refill && i < units; i++) {
    es->slot_seq[i] = (int32_t)zz_slots_first(&es->w.sl);
    zz_slots_claim(&es->w.sl, es->slot_seq[i]);
  }
  int ngroups = (int)((units + es->bls - 1) / es->bls);
  for (int g = 0; g <= ngroups; g++) es->group_first[g] = (int32_t)(g < ngroups ? g * es->bls : units);
  *out = (zz_stage_block){.nseq = (int32_t)es->req.n,
                          .ngroups = ngroups,
                          .max_new_tokens = es->req.max_new_tokens,
                          .group_first = es->group_first,
                          .prompt_len = es->plen,
                          .rng = es->streams,
                          .prompt_ids = es->ids,
                          .params = es->req.params,
                          .nslots = es->req.refill ? (int32_t)units : 0,
                          .cont = cont,
                          .slot_seq = es->req.refill ? es->slot_seq : NULL};
  *more_out = 1;
  return ZZ_OK;
}

static zz_status es_begin_block(void *ctx, const zz_stage_block *b) {
  zz_engine_stage *es = ctx;
  int32_t units = b->nslots ? b->nslots : b->nseq;
  if (b->nseq > es->max_seqs || units > es->cap || b->ngroups > zz_engine_groups(es->cfg.engine) ||
      b->max_new_tokens > es->cfg.max_new_tokens)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "engine stage: block of %d sequences in %d slots, %d groups, %d new tokens; this "
                    "rank takes %lld sequences in %lld slots, %d groups, %d new tokens",
                    b->nseq, units, b->ngroups, b->max_new_tokens, (long long)es->max_seqs, (long long)es->cap,
                    zz_engine_groups(es->cfg.engine), es->cfg.max_new_tokens);
  for (int32_t i = 0; i < b->nseq; i++) es->lens[i] = b->prompt_len[i];
  for (int32_t i = 0; i < units; i++) {
    es->slot[i] = b->nslots ? b->slot_seq[i] : i;
    es->slens[i] = b->prompt_len[es->slot[i]];
  }
  for (int g = 0; g < b->ngroups; g++)
    ZZ_CHECK(zz_engine_begin_block(es->cfg.engine, g, es_gsize(b, g), es->slens + b->group_first[g]));
  if (es->last) {
    /* the block's arrays (a continuation's too: the previous block's are gone) */
    es->sreq = (zz_request){.n = b->nseq,
                            .lens = es->lens,
                            .streams = b->rng,
                            .max_new_tokens = b->max_new_tokens,
                            .ignore_eos = es->cfg.ignore_eos,
                            .sampling = es->cfg.sampling,
                            .params = b->params};
    if (b->params) { /* each sequence's own settings, its prompt for the repetition penalty */
      const int32_t *p = b->prompt_ids;
      for (int32_t i = 0; i < b->nseq; i++) {
        es->sids[i] = p;
        p += b->prompt_len[i];
      }
      es->sreq.ids = es->sids;
    }
  }
  if (b->cont) return ZZ_OK; /* the request's sequences go on: their state stays */
  if (es->last) {
    zz_gen_destroy(es->gen);
    es->gen = NULL;
    ZZ_CHECK(zz_gen_create(es->mc, &es->sreq, &es->gen));
  }
  if (es->first) {
    memset(es->n_tokens, 0, (size_t)b->nseq * sizeof *es->n_tokens);
    memset(es->ended, 0, (size_t)b->nseq);
    ZZ_CHECK(es_out_alloc(es, b));
    zz_engine_stats now;
    zz_engine_get_stats(es->cfg.engine, &now);
    es->pos0 = now.positions;
    es->pos_useful = 0;
    es->refilled = 0;
    es->prefilled = 0;
    es->t0 = es->t_prefill = zz_now();
  }
  return ZZ_OK;
}

/* Every rank sends (and the next receives) the hidden state of its slice's end, the
 * same [n, sq, hidden] at every cut. The last rank sends no hidden state, but the
 * stage also sizes and checks what it receives with this, so it is the same number. */
static size_t es_hidden_bytes(void *ctx, const zz_stage_block *b, int32_t step, int32_t group) {
  (void)b;
  zz_engine_stage *es = ctx;
  return zz_engine_hidden_bytes(es->cfg.engine, group, step);
}

/* A join's prompt step, what it adds to an item's hidden state. */
static size_t es_join_bytes(void *ctx, const zz_stage_block *b, int32_t seq) {
  zz_engine_stage *es = ctx;
  return zz_engine_refill_bytes(es->cfg.engine, b->prompt_len[seq]);
}

/* The sequences joining the item's slots: each one's prompt step alone into its
 * slot, after the step, for the next step (zz_engine_refill); its hidden state in
 * and out after the step's, in slot order; on the last rank its first token's
 * logits land at its slot's row. */
static zz_status es_joins(zz_engine_stage *es, const zz_stage_item *it) {
  size_t off = zz_engine_hidden_bytes(es->cfg.engine, it->group, it->step);
  for (int32_t i = 0; i < it->nseq; i++) {
    int32_t q = it->joins[i];
    if (q < 0) continue;
    es->slot[it->first + i] = q;
    int64_t len = it->block->prompt_len[q];
    zz_step_io io = {.prompts = es->first ? es->req.ids + q : NULL,
                     .hidden_in = es->first ? NULL : (const char *)it->hidden_in + off,
                     .hidden_out = es->last ? NULL : (char *)it->hidden_out + off,
                     .hidden_on_device = it->hidden_on_device};
    ZZ_CHECK(zz_engine_refill(es->cfg.engine, it->group, i, len, it->step + 1, &io));
    off += zz_engine_refill_bytes(es->cfg.engine, len);
    if (es->first) es->pos_useful += len, es->refilled++;
  }
  return ZZ_OK;
}

static zz_status es_compute(void *ctx, const zz_stage_item *it) {
  zz_engine_stage *es = ctx;
  if (es->cfg.step_hook) ZZ_CHECK(es->cfg.step_hook(es->cfg.ctx, it->block->index, it->step, it->group));
  zz_step_io io = {0};
  if (es->first) {
    if (it->step == 0) {
      const int32_t *p = it->ids; /* a block without refill: the prompts one after another */
      for (int32_t i = 0; i < it->nseq; i++) {
        int32_t q = es->slot[it->first + i];
        es->prompts[i] = it->block->nslots ? es->req.ids[q] : p;
        if (!it->block->nslots) p += it->block->prompt_len[q];
        es->pos_useful += it->block->prompt_len[q];
      }
      io.prompts = es->prompts;
    } else {
      for (int32_t i = 0; i < it->nseq; i++) {
        es->inputs[i] = zz_sequence_input(es->mc, it->ids[i], it->done[i]);
        es->pos_useful += !it->done[i];
      }
      io.tokens = es->inputs;
    }
  } else {
    io.hidden_in = it->hidden_in;
  }
  /* the GPU batches whose sequences have all ended are skipped, as in one process:
   * by rank 0's flags (on rank 0, and on every rank when they travel behind the
   * hidden state), else on the last rank by its sampler's. The rows a skipped batch
   * would write stay zeros, not an earlier message's bytes; no rank computes them */
  if (it->step > 0) {
    bool any = false;
    for (int32_t i = 0; i < it->nseq; i++) {
      es->endb[i] = it->done ? it->done[i] != 0 : es->last && zz_gen_done(es->gen, es->slot[it->first + i]);
      any |= es->endb[i];
    }
    if (any && (es->last || !it->hidden_on_device)) {
      if (!es->last) memset(it->hidden_out, 0, it->hidden_out_bytes);
      io.ended = es->endb;
    }
  }
  if (!es->last) io.hidden_out = it->hidden_out;
  io.hidden_on_device = it->hidden_on_device;
  ZZ_CHECK(zz_engine_step(es->cfg.engine, it->group, it->step, &io));
  return it->joins ? es_joins(es, it) : ZZ_OK;
}

/* A float in a 32-bit word of the token message, and back. */
static int32_t es_fword(float f) {
  int32_t w;
  memcpy(&w, &f, sizeof w);
  return w;
}
static float es_wfloat(int32_t w) {
  float f;
  memcpy(&f, &w, sizeof f);
  return f;
}

static zz_status es_sample(void *ctx, const zz_stage_item *it, int32_t *ids_out, uint8_t *done_out,
                           int32_t *extra_out) {
  zz_engine_stage *es = ctx;
  int tw = zz_block_token_words(it->block);
  const float *logits = zz_engine_logits(es->cfg.engine);
  for (int32_t i = 0; i < it->nseq; i++) {
    int64_t q = es->slot[it->first + i], nt = 0;
    bool joined = it->joins && it->joins[i] >= 0; /* its first token, from its own prompt step */
    bool was = done_out[i] && !joined;
    zz_gen_take_one(es->gen, q, joined ? 0 : it->step, logits + (size_t)i * es->mc->vocab_size);
    /* ended earlier: computed, not sampled (as zz_generate) */
    ids_out[i] = was ? es->mc->pad : zz_gen_newest(es->gen, q);
    const zz_seq_out *o = zz_gen_out(es->gen, q, &nt);
    /* done: 1 + why (zz_finish), so rank 0 writes the reason one process writes */
    done_out[i] = zz_gen_done(es->gen, q) ? (uint8_t)(1 + (o ? (int)o->finish : 0)) : 0;
    if (!extra_out) continue;
    int32_t *x = extra_out + (size_t)i * tw;
    memset(x, 0, (size_t)tw * sizeof *x);
    if (was || !o || !o->logprobs || nt < 1) continue;
    x[0] = es_fword(o->logprobs[nt - 1]);
    for (int k = 0; k < o->top_k && 1 + 2 * k + 1 < tw; k++) {
      x[1 + 2 * k] = o->top[(nt - 1) * o->top_k + k].token;
      x[2 + 2 * k] = es_fword(o->top[(nt - 1) * o->top_k + k].logprob);
    }
  }
  return ZZ_OK;
}

/* Rank 0: sequence q's token of this step, with its log-probabilities (x: its
 * extra words) and the sampler's done flag (1 + why); then, as zz_gen_take orders
 * it, an end id ends it, else the request's on_token (a stop string), else its length. */
static void es_take(zz_engine_stage *es, int32_t q, int32_t id, uint8_t done, const int32_t *x) {
  int64_t nt = es->n_tokens[q];
  es->tokens[q][es->n_tokens[q]++] = id;
  zz_seq_out *o = &es->out[q];
  if (x && o->logprobs) {
    o->logprobs[nt] = es_wfloat(x[0]);
    for (int k = 0; k < o->top_k; k++)
      o->top[nt * o->top_k + k] = (zz_top_logprob){.token = x[1 + 2 * k], .logprob = es_wfloat(x[2 + 2 * k])};
  }
  const zz_request *r = &es->req;
  if (done == 1 + ZZ_FINISH_EOS) {
    o->finish = ZZ_FINISH_EOS;
  } else if (r->on_token && r->on_token(r->ctx, q, es->tokens[q], es->n_tokens[q])) {
    o->finish = ZZ_FINISH_STOP;
    done = 1 + ZZ_FINISH_STOP;
  } else {
    o->finish = ZZ_FINISH_LENGTH;
  }
  es->ended[q] = done != 0;
}

static zz_status es_tokens(void *ctx, const zz_stage_block *b, int32_t step, int32_t group, const int32_t *ids,
                           uint8_t *done, const int32_t *extra) {
  zz_engine_stage *es = ctx;
  int32_t first = b->group_first[group];
  int tw = zz_block_token_words(b);
  for (int32_t i = 0; i < es_gsize(b, group); i++) {
    int32_t q = es->slot[first + i];
    if (es->ended[q]) {
      done[i] = 1; /* ended here: the pad token goes in, whatever the sampler thinks */
      continue;
    }
    if (es->n_tokens[q] >= es->cfg.max_new_tokens)
      return zz_error(ZZ_ERR_MPI, "engine stage: sequence %d of block %lld got more than %d tokens", q,
                      (long long)b->index, es->cfg.max_new_tokens);
    es_take(es, q, ids[i], done[i], extra ? extra + (size_t)i * tw : NULL);
    done[i] = es->ended[q];
  }
  if (step == 0 && ++es->prefilled == b->ngroups) es->t_prefill = zz_now();
  return ZZ_OK;
}

/* Rank 0, refill blocks: each slot whose sequence has ended takes the first waiting
 * sequence that fits before the next step, by the token loop's own rule
 * (zz_slots_fit), until one finds none. */
static zz_status es_refill(void *ctx, const zz_stage_block *b, int32_t step, int32_t group, const uint8_t *done,
                           int32_t *joins_out) {
  zz_engine_stage *es = ctx;
  bool fits = true;
  for (int32_t i = 0; i < es_gsize(b, group); i++) {
    joins_out[i] = -1;
    if (!done[i] || !fits || !es->w.sl.waiting) continue;
    int64_t q = zz_slots_fit(&es->w.sl, group, step + 1);
    if (!(fits = q >= 0)) continue;
    zz_slots_claim(&es->w.sl, q);
    joins_out[i] = (int32_t)q;
  }
  return ZZ_OK;
}

static zz_status es_end_block(void *ctx, const zz_stage_block *b) {
  zz_engine_stage *es = ctx;
  if (!es->first || es->w.sl.waiting > 0) return ZZ_OK; /* the request goes on in another block */
  /* rank 0 skips what one process skips: its positions are one process's count */
  zz_engine_stats now;
  zz_engine_get_stats(es->cfg.engine, &now);
  zz_result res = {.tokens = es->tokens,
                   .pos_computed = now.positions - es->pos0,
                   .pos_useful = es->pos_useful,
                   .refilled = es->refilled,
                   .n_tokens = es->n_tokens,
                   .out = b->params ? es->out : NULL,
                   .prefill_s = es->t_prefill - es->t0,
                   .decode_s = zz_now() - es->t_prefill};
  return es->cfg.finished ? es->cfg.finished(es->cfg.ctx, &es->req, &res) : ZZ_OK;
}

static const zz_stage_callbacks es_callbacks = {
    .next_block = es_next_block,
    .begin_block = es_begin_block,
    .hidden_bytes = es_hidden_bytes,
    .compute = es_compute,
    .sample = es_sample,
    .tokens = es_tokens,
    .refill = es_refill,
    .join_bytes = es_join_bytes,
    .end_block = es_end_block,
};

zz_status zz_engine_stage_run(zz_engine_stage *es, zz_stage *st) {
  int rank = zz_stage_rank(st), size = zz_stage_size(st);
  const zz_plan_spec *spec = &zz_engine_plan(es->cfg.engine)->spec;
  if (es->first != (rank == 0) || es->last != (rank == size - 1))
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "engine stage: rank %d of %d holds layers [%d, %d) of %d: rank 0 must "
                    "start at layer 0 and only the last rank may end at the LM head",
                    rank, size, spec->layer_begin, spec->layer_end, zz_engine_model(es->cfg.engine)->n_layers);
  if (zz_stage_groups(st) > zz_engine_groups(es->cfg.engine))
    return zz_error(ZZ_ERR_INVALID_ARG, "engine stage: the stage runs %d groups, the engine holds %d",
                    zz_stage_groups(st), zz_engine_groups(es->cfg.engine));
  if (es->cfg.device) ZZ_CHECK(zz_stage_use_device(st, es->cfg.device));
  return zz_stage_run(st, &es_callbacks, es);
}
