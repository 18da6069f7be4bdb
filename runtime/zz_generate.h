/*
 * zz_generate.h — generation over an engine: sampling (runtime/sampler.c), the
 * token loop with EOS (runtime/generate.c; a pipeline's last rank runs the same
 * per-sequence step, zz_gen_take), and held-out perplexity (runtime/perplexity.c).
 *
 * Usage:
 *     zz_request req = {.n = n, .ids = ids, .lens = lens, .max_new_tokens = 16,
 *                       .sampling = {.temperature = 0, .top_p = 1}};
 *     zz_result res;
 *     ZZ_CHECK(zz_generate(eng, &req, &res));
 *     use(res.tokens[0], res.n_tokens[0]);
 *     zz_result_free(&res, n);
 */
#ifndef ZZ_GENERATE_H
#define ZZ_GENERATE_H

#include "zz_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ sampling */

typedef struct zz_sampling {
  float temperature; /* 0: greedy */
  int top_k;         /* 0: off */
  float top_p;       /* 1: off */
  uint64_t seed;
} zz_sampling;

typedef struct zz_rng {
  uint64_t s[4];
} zz_rng;

/* Seeds a generator for one sequence: the same (seed, stream) gives the same
 * draws whatever batch the sequence runs in. */
void zz_rng_seed(zz_rng *r, uint64_t seed, uint64_t stream);
uint64_t zz_rng_next(zz_rng *r);
double zz_rng_uniform(zz_rng *r); /* [0, 1) */


/* Picks a token from logits[vocab]. scratch: 2 * vocab floats + vocab int32. */
int32_t zz_sample(const float *logits, int64_t vocab, const zz_sampling *s, zz_rng *rng, void *scratch);
size_t zz_sample_scratch_bytes(int64_t vocab);
int32_t zz_argmax(const float *x, int64_t n);

/* ================================================================ generate */
/*
 * The token loop (runtime/generate.c): prompts of up to n_groups × gbs × num_gb
 * sequences are cut into the engine's groups; each token step runs every group
 * through the engine, samples each live sequence's next token and tracks EOS. With
 * refill, any number of prompts: an ended sequence's slot takes the next one.
 */

/* One block of prompts to generate for. */
struct zz_seq_params; /* runtime/zz_seq.h: one sequence's own settings */
struct zz_seq_out;

typedef struct zz_request {
  int64_t n;                 /* prompts, at most n_groups * gbs * num_gb (any with refill) */
  const int32_t *const *ids; /* ids[i]: prompt i (BOS included by the caller) */
  const int64_t *lens;       /* lens[i] >= 1, <= shape.prompt_len */
  const uint64_t *streams;   /* rng stream per prompt (NULL: its index) */
  int max_new_tokens;        /* <= shape.gen_len */
  bool ignore_eos;           /* benchmarks: always generate max_new_tokens */
  zz_sampling sampling;
  /* optional: called with each step's logits of each sequence (f32, vocab) */
  void (*on_logits)(void *ctx, int64_t seq, int step, const float *logits, int64_t vocab);
  void *ctx;
  /* optional: [n] each sequence's own settings (zz_seq.h); NULL: the ones above */
  const struct zz_seq_params *params;
  /* optional: after each token of a live sequence (tokens[0..n) so far); true ends
   * it there (a stop string); called with ctx */
  bool (*on_token)(void *ctx, int64_t seq, const int32_t *tokens, int64_t n);
  /* Continuous batching: n may be more than the engine's slots. The prompts wait in
   * their order; a slot whose sequence has ended takes the first waiting prompt that
   * fits (zz_engine_refill: prefilled alone, then decoded beside the others), and a
   * group whose sequences have all ended begins a fresh block of the next ones. An
   * engine that cannot refill (zz_engine_can_refill) runs them in consecutive blocks.
   * Each prompt's tokens are those it gets alone, wherever it runs. */
  bool refill;
} zz_request;

typedef struct zz_result {
  int32_t **tokens; /* tokens[i]: new tokens of prompt i (ends at EOS, included) */
  int64_t *n_tokens;
  double prefill_s, decode_s; /* wall time of the two phases */
  /* positions the engine computed (zz_engine_stats.positions: each prompt step
   * padded to its group's longest, then every sequence of a GPU batch that still has
   * one running) and those of them that were useful (prompt tokens, a prefix the
   * prompts share counted once, then the input of each sequence still running) */
  int64_t pos_computed, pos_useful;
  int64_t refilled;       /* sequences that took a slot from an ended one (zz_request.refill) */
  struct zz_seq_out *out; /* [n] why each ended, its log-probabilities (zz_seq.h); NULL unless
                                 the request had params or on_token */
} zz_result;

/* The per-sequence state of one block's token loop (runtime/generate.c): each
 * sequence's generator seeded (seed, stream), its tokens, its settings (params:
 * penalties, sampling, length, log-probabilities), its end. zz_generate runs one
 * over an engine; a pipeline's last rank runs one over the logits it computes, so
 * both take the same tokens. req (and what it points to) must outlive it. */
typedef struct zz_gen zz_gen;
zz_status zz_gen_create(const zz_config *c, const zz_request *req, zz_gen **out);
/* One step's logits [cnt][vocab] of sequences [first, first + cnt): each live one
 * takes its next token (kept in its output, EOS included), then ends on an end id
 * (unless ignore_eos), on on_token's word (a stop string) or at its own
 * max_new_tokens (params, else the request's). */
void zz_gen_take(zz_gen *g, int64_t first, int64_t cnt, int step, const float *logits);
/* The same for sequence q alone, from its logits [vocab]. */
void zz_gen_take_one(zz_gen *g, int64_t q, int step, const float *logits);
bool zz_gen_done(const zz_gen *g, int64_t q);
/* Sequence q's newest token (the pad token before its first). */
int32_t zz_gen_newest(const zz_gen *g, int64_t q);
/* Sequence q's outcome so far (why it ended once done, its log-probabilities of
 * *n_out tokens), or NULL when the request reports none (no params, no on_token). */
const struct zz_seq_out *zz_gen_out(const zz_gen *g, int64_t q, int64_t *n_out);
/* Hands the result over (tokens, n_tokens, out; the times are the caller's). */
void zz_gen_result(zz_gen *g, zz_result *out);
void zz_gen_destroy(zz_gen *g);

/* One sequence's next token: zz_sample from its logits [vocab] with its own
 * generator, then the EOS rule: *ended_out is true when the token is EOS and
 * ignore_eos is off (zz_gen_take's plain case). */
int32_t zz_sample_sequence(const zz_config *c, const float *logits, const zz_sampling *s, bool ignore_eos, zz_rng *rng,
                           void *scratch, bool *ended_out);
/* The next step's input of a sequence whose newest token is `token`: the token
 * itself, or the pad token once the sequence has ended. */
int32_t zz_sequence_input(const zz_config *c, int32_t token, bool ended);

/* The order prompts are gathered into blocks so that a block's sequences end near
 * each other and pad little: by max new tokens in steps of sqrt(2) (a block runs
 * until its last sequence ends, and every step reads all the weights), then by
 * prompt length, then by max new tokens; <0, 0, >0 as strcmp (0: the caller's own
 * order, the file's, decides). */
int zz_prompt_order(int64_t len_a, int new_a, int64_t len_b, int new_b);

/* Checks a request against an engine's shape and vocabulary. */
zz_status zz_request_check(const zz_engine *eng, const zz_request *req);
/* Generates for req on an engine holding the whole model. */
zz_status zz_generate(zz_engine *eng, const zz_request *req, zz_result *res);
void zz_result_free(zz_result *res, int64_t n);

/* ================================================================ refill's slots */
/*
 * The slot schedule of a request with refill (runtime/slots.c): which prompt is in
 * which of the engine's n_groups x bls slots at each step, when a newcomer enters,
 * when a group begins a fresh block. The rule lives there once; what each turn does
 * is the caller's: the token loop runs an engine and samples (generate.c), the
 * planner prices the same turns with its cost model (planner/workload.c).
 */
typedef struct zz_slot_ops {
  /* the most new tokens a prompt of len tokens makes joining group gr before step (zz_engine_refill_room) */
  int64_t (*room)(void *ctx, int gr, int step, int64_t len);
  int64_t (*max_new)(void *ctx, int64_t q); /* the new tokens prompt q asks */
  bool (*done)(void *ctx, int64_t q);       /* whether prompt q has ended */
  /* group gr begins a block of prompts seq[0..cnt) in its slots [0, cnt) and runs their prompt step */
  zz_status (*begin)(void *ctx, int gr, int64_t cnt, const int64_t *seq);
  /* prompt q takes slot i of group gr before step `step`, prefilled alone */
  zz_status (*refill)(void *ctx, int gr, int64_t i, int64_t q, int step);
  /* group gr's decode step `step` over its slots [0, cnt): seq[i] in each, ended[i] for the free ones (fed pad) */
  zz_status (*step)(void *ctx, int gr, int step, int64_t cnt, const int64_t *seq, const bool *ended);
} zz_slot_ops;

typedef struct zz_slots {
  int n_groups;
  int64_t bls, cap, n; /* slots per group; all slots; prompts */
  const int64_t *lens; /* [n] the prompts' lengths */
  const zz_slot_ops *ops;
  void *ctx;
  int64_t *seq;          /* [cap] the prompt in each slot (-1: none yet) */
  bool *ended;           /* [cap] a step's free slots */
  int64_t *n_in, *step;  /* [n_groups] the group's block size; its next step */
  bool *taken;           /* [n] */
  int64_t next, waiting; /* the first prompt not taken; how many are not */
} zz_slots;

zz_status zz_slots_init(zz_slots *sl, int n_groups, int64_t bls, int64_t n, const int64_t *lens, const zz_slot_ops *ops,
                        void *ctx);
void zz_slots_free(zz_slots *sl);
/* One turn of group gr: a fresh block when its sequences have all ended and
 * prompts wait, else its free slots refilled and its next decode step. */
zz_status zz_slots_turn(zz_slots *sl, int gr);
/* Whether a prompt waits or a slot's sequence runs. */
bool zz_slots_busy(const zz_slots *sl);
/* For a caller that hands slots out itself (a pipeline's rank 0): the first
 * waiting prompt (-1: none), a fresh block's next; the first waiting prompt that can
 * join group gr before `step` and make all its new tokens there (-1: none; the
 * rule zz_slots_turn refills by); prompt q taken. */
int64_t zz_slots_first(const zz_slots *sl);
int64_t zz_slots_fit(const zz_slots *sl, int gr, int step);
void zz_slots_claim(zz_slots *sl, int64_t q);

/* The prompts of a refill request that wait for a slot, for a pipeline's rank 0
 * (stage/engine_stage.c): slots.c's rule with engine e's room and each prompt's
 * own max new tokens, as one process's token loop turns it. */
typedef struct zz_waiting {
  const zz_engine *e;
  const zz_request *req; /* both outlive it */
  zz_slots sl;           /* sl.waiting: how many prompts no slot has taken */
} zz_waiting;
zz_status zz_waiting_init(zz_waiting *w, const zz_engine *e, const zz_request *req);
void zz_waiting_free(zz_waiting *w);

/* Held-out perplexity (runtime/perplexity.c), teacher forced: ids[0..n) (no BOS)
 * are cut into windows of the engine's gen_len tokens, each a sequence that starts
 * at BOS (the engine is built with prompt_len 1) and is fed its own next token at
 * every decoding step, so every prediction after a window's first reads the KV
 * cache as the policy stores it. */
typedef struct zz_ppl {
  double nll;     /* sum over predicted tokens of -log p(token) */
  int64_t tokens; /* predictions made (n) */
  int64_t windows;
  double ppl;      /* exp(nll / tokens) */
  int32_t *argmax; /* [n] the top-1 prediction for each token (agreement between policies) */
} zz_ppl;
zz_status zz_perplexity(zz_engine *eng, const int32_t *ids, int64_t n, zz_ppl *out);
void zz_ppl_free(zz_ppl *r);
/* The share of positions i < n where a[i] == b[i] (0 when n is 0): top-1 or greedy
 * agreement between two runs. */
double zz_token_agreement(const int32_t *a, const int32_t *b, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_GENERATE_H */
