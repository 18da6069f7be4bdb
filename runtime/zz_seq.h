/*
 * zz_seq.h — one sequence's own generation settings and what the token loop
 * reports about it (runtime/generate.c, runtime/seq.c): a request may give every
 * sequence its own sampling, length, penalties and log-probabilities, so prompts
 * with different settings share one block (one pass over the weights). Without
 * them (zz_request.params NULL) every sequence takes the request's settings and
 * the tokens are those of the plain loop.
 *
 * Usage:
 *     zz_seq_params sp[n];
 *     for (i...) { zz_seq_params_default(&sp[i], &req.sampling, req.max_new_tokens); sp[i].logprobs = 5; }
 *     req.params = sp;  zz_generate(eng, &req, &res);   // res.out[i].finish, .logprobs, .top
 */
#ifndef ZZ_SEQ_H
#define ZZ_SEQ_H

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most alternatives a sequence may ask per token (OpenAI's top_logprobs cap). */
#define ZZ_MAX_TOP_LOGPROBS 20

typedef struct zz_seq_params {
  zz_sampling sampling;     /* temperature (0: greedy), top-k, top-p, seed */
  int max_new_tokens;       /* 1 .. the request's max_new_tokens */
  float repetition_penalty; /* Hugging Face's, over prompt and output tokens; 1: off */
  float presence_penalty;   /* OpenAI's, over output tokens: minus this once a token appeared; 0: off */
  float frequency_penalty;  /* OpenAI's: minus this times the token's count in the output; 0: off */
  int logprobs;             /* -1: none; k in [0, ZZ_MAX_TOP_LOGPROBS]: each chosen token's and the k most likely */
} zz_seq_params;

/* Why a sequence ended. */
typedef enum zz_finish {
  ZZ_FINISH_LENGTH, /* its max_new_tokens */
  ZZ_FINISH_EOS,    /* an end id of the model */
  ZZ_FINISH_STOP,   /* zz_request.on_token said so (a stop string) */
} zz_finish;

typedef struct zz_top_logprob {
  int32_t token;
  float logprob;
} zz_top_logprob;

typedef struct zz_seq_out {
  zz_finish finish;
  float *logprobs;     /* [n_tokens] log p of each chosen token under the model (before penalties and
                          temperature), or NULL when not asked */
  zz_top_logprob *top; /* [n_tokens * top_k] the most likely tokens at each step, best first, or NULL */
  int top_k;
} zz_seq_out;

/* Settings equal to a request's: sampling s, max_new tokens, no penalty, no log-probabilities. */
void zz_seq_params_default(zz_seq_params *p, const zz_sampling *s, int max_new);
/* Whether the settings are in range (max_new_tokens in 1..request_max, temperature >= 0,
 * top_p in (0, 1], penalties finite, repetition_penalty > 0, logprobs in -1..20). */
zz_status zz_seq_params_check(const zz_seq_params *p, int request_max);
/* logits[vocab] with the penalties of p applied, into out[vocab]: repetition over
 * prompt[0..np) and gen[0..ng), presence and frequency over gen. counts: vocab int32
 * of scratch, left zero. Returns whether any penalty applied (out untouched if not). */
bool zz_seq_penalize(const zz_seq_params *p, const float *logits, int64_t vocab, const int32_t *prompt, int64_t np,
                     const int32_t *gen, int64_t ng, int32_t *counts, float *out);
/* The settings as ZZ_SEQ_PARAMS_WORDS 64-bit words (floats by their bits), for a
 * message between processes (stage/comm.c's block message), and back: unpack
 * refuses words that are no int32 or no float and then checks the range
 * (zz_seq_params_check against request_max). */
#define ZZ_SEQ_PARAMS_WORDS 9
void zz_seq_params_pack(const zz_seq_params *p, uint64_t *w);
zz_status zz_seq_params_unpack(const uint64_t *w, int request_max, zz_seq_params *p);
/* log p(token) under logits[vocab] (a log-softmax), and the k most likely tokens with
 * theirs into top[k] (best first, ties by lower id). */
float zz_logprob_of(const float *logits, int64_t vocab, int32_t token, int k, zz_top_logprob *top);

/* generation_config.json's sampling settings, as Hugging Face's GenerationConfig
 * applies them: do_sample false (its default) is greedy (top_k, top_p: zigzag's
 * 0 and 1); do_sample true takes temperature, top_k, top_p with Hugging Face's
 * defaults 1.0, 50, 1.0 where the file has none. The end ids are read with config.json (zz_config.eos_ids). */
typedef struct zz_gen_config {
  bool present; /* the directory has the file */
  bool do_sample;
  float temperature, top_p; /* as zigzag takes them: temperature 0 when not sampling */
  int top_k;
  float repetition_penalty; /* 1 when absent */
  int max_new_tokens;       /* 0 when absent */
} zz_gen_config;
/* dir/generation_config.json (absent: present false, zigzag's own defaults); a key of
 * the wrong type or out of range is an error naming it and the file. */
zz_status zz_gen_config_load(const char *dir, zz_gen_config *out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_SEQ_H */
