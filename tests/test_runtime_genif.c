/*
 * test_runtime_genif.c — issue #25's pieces below the command line: chat templates
 * rendered as transformers renders them (tests/fixtures/chat_templates.json, made by
 * make_chat_template_fixtures.py with transformers itself), a template outside the
 * subset refused naming the construct and its line; one sequence's penalties and
 * log-probabilities (zz_seq.h) against values worked by hand; a line's settings
 * read and refused by key (launch/lines.c); the generation_config.json rule; a
 * block's finished GPU batches left out of the token loop's steps.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lines_impl.h"
#include "zz_chat.h"
#include "zz_runtime.h"
#include "zz_seq.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- chat templates */

static void test_chat_fixtures(void) {
  json_error_t e;
  json_t *root = json_load_file(ZZ_FIXTURES_DIR "/chat_templates.json", 0, &e);
  CU_ASSERT_FATAL(root != NULL);
  json_t *cases = json_object_get(root, "cases"), *c;
  size_t i, rendered = 0, refused = 0;
  CU_ASSERT(json_array_size(cases) >= 30);
  json_array_foreach(cases, i, c) {
    json_t *vars = json_object();
    if (json_is_string(json_object_get(c, "bos_token")))
      json_object_set(vars, "bos_token", json_object_get(c, "bos_token"));
    if (json_is_string(json_object_get(c, "eos_token")))
      json_object_set(vars, "eos_token", json_object_get(c, "eos_token"));
    zz_chat_input in = {.messages = json_object_get(c, "messages"), .vars = vars, .add_generation_prompt = true};
    char *out = NULL;
    zz_status st = zz_chat_render(json_string_value(json_object_get(c, "chat_template")), &in, &out);
    json_decref(vars);
    const char *want = json_string_value(json_object_get(c, "expected"));
    if (want) {
      bool same = st == ZZ_OK && strcmp(out, want) == 0;
      if (!same)
        fprintf(stderr, "\n%s case %zu: %s\n got: [%s]\nwant: [%s]\n",
                json_string_value(json_object_get(c, "template")), i, st == ZZ_OK ? "differs" : zz_error_message(),
                out ? out : "", want);
      CU_ASSERT(same);
      rendered += same;
    } else { /* the template's raise_exception: a refusal carrying its message */
      const char *err = json_string_value(json_object_get(c, "error"));
      CU_ASSERT(st == ZZ_ERR_INVALID_ARG);
      CU_ASSERT(st != ZZ_OK && err && strstr(zz_error_message(), err) != NULL);
      refused += st == ZZ_ERR_INVALID_ARG;
    }
    free(out);
  }
  CU_ASSERT(rendered >= 20 && refused >= 5);
  json_decref(root);
}

/* ---------------------------------------------------------------- one sequence's settings */

static void test_seq_penalties(void) {
  float logits[6] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f}, out[6];
  int32_t counts[6] = {0};
  int32_t prompt[] = {0, 1}, gen[] = {3, 3, 5};
  zz_sampling s = {.temperature = 0, .top_p = 1};
  zz_seq_params p;
  zz_seq_params_default(&p, &s, 8);
  CU_ASSERT(!zz_seq_penalize(&p, logits, 6, prompt, 2, gen, 3, counts, out)); /* nothing to do */
  p.repetition_penalty = 2.0f; /* HF: positive / 2, negative * 2, each seen token once */
  CU_ASSERT(zz_seq_penalize(&p, logits, 6, prompt, 2, gen, 3, counts, out));
  float want_rep[6] = {1.0f, -2.0f, 0.5f, 1.5f, -2.0f, 0.5f};
  for (int i = 0; i < 6; i++) CU_ASSERT(out[i] == want_rep[i]);
  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.5f; /* OpenAI: output tokens only, frequency * count + presence */
  p.frequency_penalty = 0.25f;
  CU_ASSERT(zz_seq_penalize(&p, logits, 6, prompt, 2, gen, 3, counts, out));
  float want_pf[6] = {2.0f, -1.0f, 0.5f, 3.0f - 0.5f - 0.5f, -2.0f, 1.0f - 0.25f - 0.5f};
  for (int i = 0; i < 6; i++) CU_ASSERT(fabsf(out[i] - want_pf[i]) < 1e-6f);
  for (int i = 0; i < 6; i++) CU_ASSERT(counts[i] == 0); /* left zero for the next call */
  zz_seq_params bad = p;
  bad.repetition_penalty = 0;
  CU_ASSERT(zz_seq_params_check(&bad, 8) == ZZ_ERR_INVALID_ARG);
  bad = p;
  bad.max_new_tokens = 9;
  CU_ASSERT(zz_seq_params_check(&bad, 8) == ZZ_ERR_INVALID_ARG);
  CU_ASSERT(zz_seq_params_check(&p, 8) == ZZ_OK);
}

static void test_seq_params_pack(void) {
  zz_seq_params p = {.sampling = {.temperature = 0.7f, .top_k = 40, .top_p = 0.95f, .seed = 0xfedcba9876543210ull},
                     .max_new_tokens = 12,
                     .repetition_penalty = 1.25f,
                     .presence_penalty = -0.5f,
                     .frequency_penalty = 0.3f,
                     .logprobs = 3},
                q;
  uint64_t w[ZZ_SEQ_PARAMS_WORDS];
  zz_seq_params_pack(&p, w);
  CU_ASSERT_FATAL(zz_seq_params_unpack(w, 12, &q) == ZZ_OK);
  CU_ASSERT(q.sampling.temperature == 0.7f && q.sampling.top_k == 40 && q.sampling.top_p == 0.95f);
  CU_ASSERT(q.sampling.seed == 0xfedcba9876543210ull);
  CU_ASSERT(q.max_new_tokens == 12 && q.repetition_penalty == 1.25f && q.presence_penalty == -0.5f);
  CU_ASSERT(q.frequency_penalty == 0.3f && q.logprobs == 3);
  p.logprobs = -1; /* a negative int32 survives the word */
  zz_seq_params_pack(&p, w);
  CU_ASSERT(zz_seq_params_unpack(w, 12, &q) == ZZ_OK && q.logprobs == -1);
  CU_ASSERT(zz_seq_params_unpack(w, 11, &q) == ZZ_ERR_INVALID_ARG); /* beyond the request's max */
  w[4] = 1ull << 40;                                                /* no int32 */
  CU_ASSERT(zz_seq_params_unpack(w, 12, &q) == ZZ_ERR_FORMAT);
  zz_error_clear();
}

static void test_seq_logprobs(void) {
  float logits[4] = {0.0f, 1.0f, 2.0f, 1.0f};
  double lse = log(exp(0.0) + 2 * exp(1.0) + exp(2.0));
  zz_top_logprob top[3];
  float lp = zz_logprob_of(logits, 4, 1, 3, top);
  CU_ASSERT(fabs(lp - (1.0 - lse)) < 1e-6);
  CU_ASSERT(top[0].token == 2 && fabs(top[0].logprob - (2.0 - lse)) < 1e-6);
  CU_ASSERT(top[1].token == 1 && top[2].token == 3); /* a tie: the lower id first */
}

/* ---------------------------------------------------------------- a line's settings */

static void test_line_keys(void) {
  zz_opts o;
  zz_opts_defaults(&o);
  zz_line_defaults d;
  zz_line_defaults_init(&o, &d);
  static const struct {
    const char *raw;
    bool openai;
    const char *err; /* NULL: accepted */
  } cases[] = {
      {"{\"prompt\": \"a\", \"temperature\": 0.5, \"top_k\": 3, \"n\": 2, \"stop\": [\"x\", \"y\"], \"logprobs\": 2}",
       false, NULL},
      {"{\"prompt\": \"a\", \"max_tokens\": 3}", false, "\"max_tokens\" is not a key"},
      {"{\"prompt\": \"a\", \"top_p\": 0}", false, "top_p = 0 is outside (0, 1]"},
      {"{\"prompt\": \"a\", \"n\": 0}", false, "n = 0 is outside [1, 128]"},
      {"{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", false, "stop has 5 strings; at most 4"},
      {"{\"prompt\": \"a\", \"logprobs\": 21}", false, "logprobs = 21 is outside [0, 20]"},
      {"{\"custom_id\": \"x\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
       "[{\"role\": \"user\", \"content\": \"hi\"}], \"max_completion_tokens\": 4, \"logprobs\": true, \"top_logprobs\": 2}}",
       true, NULL},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
       "\"content\": \"hi\"}], \"top_logprobs\": 2}}",
       true, "body.top_logprobs needs body.logprobs true"},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
       "\"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
       "[]}, {\"role\": \"tool\", \"tool_call_id\": \"a\", \"content\": \"1\"}], \"tools\": [], \"tool_choice\": \"auto\", "
       "\"chat_template_kwargs\": {\"enable_thinking\": false}, \"add_generation_prompt\": false, "
       "\"continue_final_message\": true, \"parallel_tool_calls\": false}}",
       true, NULL},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
       "\"content\": \"hi\"}], \"chat_template_kwargs\": [1]}}",
       true, "body.chat_template_kwargs must be an object"},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
       "\"content\": 5}]}}",
       true, "body.messages[0] must be"},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"hi\", \"stream\": true}}", true,
       "body.stream other than false is not supported"},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": [\"a\", \"b\"]}}", true,
       "a list of prompts is several lines"},
      {"{\"custom_id\": 7, \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"hi\"}}", true,
       "custom_id must be a string"},
      {"{\"custom_id\": \"x\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"hi\"}, \"extra\": 1}", true,
       "\"extra\" is not a key of a batch request line"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zz_prompt p = {.id = "1", .raw = (char *)cases[i].raw, .openai = cases[i].openai, .line = 1};
    zz_line l;
    CU_ASSERT_FATAL(zz_line_parse(&p, &d, &l) == ZZ_OK);
    if (cases[i].err) {
      if (!l.err || !strstr(l.err, cases[i].err)) fprintf(stderr, "\ncase %zu: %s\n", i, l.err ? l.err : "(accepted)");
      CU_ASSERT(l.err && strstr(l.err, cases[i].err));
    } else {
      if (l.err) fprintf(stderr, "\ncase %zu: %s\n", i, l.err);
      CU_ASSERT(l.err == NULL);
    }
    zz_line_free(&l);
  }
  zz_prompt p = {.id = "1", .raw = (char *)cases[0].raw, .line = 1};
  zz_line l;
  CU_ASSERT_FATAL(zz_line_parse(&p, &d, &l) == ZZ_OK);
  CU_ASSERT(l.sp.sampling.temperature == 0.5f && l.sp.sampling.top_k == 3 && l.n == 2 && l.n_stop == 2 &&
            l.sp.logprobs == 2 && !l.own_seed && l.sp.max_new_tokens == o.max_new_tokens);
  size_t at = 0;
  CU_ASSERT(zz_line_find_stop(&l, "abyzx", 5, &at) == 1 && at == 2); /* the earliest of the two */
  zz_line_free(&l);
}

/* ---------------------------------------------------------------- finished batches */

/* Sequence i of req (greedy or sampled with its seed) run alone on eng gives the
 * tokens it got in res. */
static void zz_expect_alone(zz_engine *eng, const zz_request *req, const zz_result *res, int64_t i) {
  zz_request one = {.n = 1,
                    .ids = req->ids + i,
                    .lens = req->lens + i,
                    .streams = req->streams + i,
                    .max_new_tokens = req->max_new_tokens,
                    .ignore_eos = req->ignore_eos,
                    .params = req->params + i};
  zz_result alone;
  CU_ASSERT_FATAL(zz_generate(eng, &one, &alone) == ZZ_OK);
  CU_ASSERT_EQUAL(alone.n_tokens[0], res->n_tokens[i]);
  CU_ASSERT(memcmp(alone.tokens[0], res->tokens[i], (size_t)res->n_tokens[i] * sizeof(int32_t)) == 0);
  zz_result_free(&alone, 1);
}

/* Sequences of one block that end at their own max tokens: a GPU batch whose
 * sequences have all ended is not computed any more, and every sequence's tokens
 * (greedy, and sampled with its seed) are those it gets run alone. */
static void zz_finished_batches_run(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol) {
  enum { N = 6, LEN = 4, GEN = 6 };
  zz_shape shape = {.prompt_len = LEN, .gen_len = GEN};
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_engine_create(dev, m, ck, pol, &shape, &eng) == ZZ_OK);
  int32_t p[N][LEN] = {{2, 47, 915, 5}, {2, 36, 291, 638}, {2, 5, 6, 7}, {2, 9, 10, 11}, {2, 40, 41, 42}, {2, 8, 8, 8}};
  const int32_t *ids[N];
  int64_t lens[N];
  uint64_t streams[N];
  /* batch 0 ends after 1 and 2 tokens, batch 1 runs all 6, batch 2 ends after 3 */
  int max_new[N] = {1, 2, 6, 5, 3, 3};
  zz_seq_params sp[N];
  for (int i = 0; i < N; i++) {
    ids[i] = p[i];
    lens[i] = LEN;
    streams[i] = (uint64_t)i;
    sp[i] = (zz_seq_params){.sampling = {.temperature = i % 2 ? 0.8f : 0, .top_p = 1, .seed = 3},
                            .max_new_tokens = max_new[i],
                            .repetition_penalty = 1,
                            .logprobs = -1};
  }
  zz_request req = {
      .n = N, .ids = ids, .lens = lens, .streams = streams, .max_new_tokens = GEN, .ignore_eos = true, .params = sp};
  zz_result res;
  CU_ASSERT_FATAL(zz_generate(eng, &req, &res) == ZZ_OK);
  /* computed: the prompt step, then per step the rows of each batch with a sequence
   * running, up to its last one running: steps 1 (batches 0, 1, 2), 2 (1, 2), 3-4
   * (1), and at step 5 batch 1's first row alone (its second has ended) */
  CU_ASSERT_EQUAL(res.pos_computed, N * LEN + 6 + 4 + 2 * 2 + 1);
  int64_t useful = N * LEN;
  for (int i = 0; i < N; i++) useful += max_new[i] - 1;
  CU_ASSERT_EQUAL(res.pos_useful, useful);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(res.n_tokens[i], max_new[i]);
    zz_expect_alone(eng, &req, &res, i);
  }
  zz_result_free(&res, N);
  zz_engine_destroy(eng);
}


static void test_finished_batches_skipped(void) {
  zz_test_fixture f;
  CU_ASSERT_FATAL(zz_test_fixture_open("tiny-opt", true, &f) == ZZ_OK);
  /* on the device; cache and activations on the CPU tier (loaded and stored around
   * each batch), with CPU attention; weights, cache and activations partly on disk */
  static const char *const policies[] = {
      "gbs=2 num_gb=3 w=100,0 c=100,0 a=100,0",
      "gbs=2 num_gb=3 w=50,50 c=0,100 a=0,100 cpu_attn=1",
      "gbs=2 num_gb=3 w=0,50 c=0,50 a=0,0",
  };
  for (size_t pi = 0; pi < sizeof policies / sizeof policies[0]; pi++) {
    zz_policy pol;
    CU_ASSERT_FATAL(zz_policy_parse(policies[pi], &pol) == ZZ_OK);
    zz_finished_batches_run(f.dev, &f.m, f.ck, &pol);
  }
  zz_test_fixture_close(&f);
}
/* ---------------------------------------------------------------- refill */

/* More prompts than slots, of mixed lengths and max tokens (zz_request.refill): a
 * slot whose sequence ends takes the next waiting prompt that fits, prefilled alone
 * into its own cache rows; every prompt's tokens (greedy, and sampled with its seed)
 * are those it gets alone, and fewer positions are wasted than block by block. An
 * engine whose cache is off the device runs them block by block, the same tokens.
 * With pre > 0 every prompt starts with the same pre tokens: a newcomer copies
 * their rows from a slot that holds them (runtime/prefix.c), with sharing on; the
 * tokens are the same with it off, and the positions it took off are those counted. */
static void zz_refill_run(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const char *policy, bool refills,
                          int pre) {
  enum { N = 14, OWN = 6, PRE = 16, GEN = 8 };
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &pol) == ZZ_OK);
  CU_ASSERT_FATAL(pre == 0 || pre == PRE);
  zz_shape shape = {.prompt_len = pre + OWN, .gen_len = GEN};
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_engine_create(dev, m, ck, &pol, &shape, &eng) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_engine_can_refill(eng, 0), refills);
  int64_t cap = (int64_t)pol.gpu_batch_size * pol.num_gpu_batches;
  int32_t p[N][PRE + OWN];
  const int32_t *ids[N];
  int64_t lens[N];
  uint64_t streams[N];
  int max_new[N] = {2, 8, 1, 3, 7, 2, 5, 8, 1, 4, 6, 2, 3, 8};
  zz_seq_params sp[N];
  for (int i = 0; i < N; i++) {
    lens[i] = pre + 1 + (i * 5) % OWN; /* the prefix and 1 to 6 tokens of its own */
    for (int t = 0; t < pre; t++) p[i][t] = t ? (int32_t)(5 + (t * 29) % 400) : 2;
    for (int t = 0; t < OWN; t++) p[i][pre + t] = t || pre ? (int32_t)(5 + (i * 37 + t * 11) % 400) : 2;
    ids[i] = p[i];
    streams[i] = (uint64_t)(100 + i);
    sp[i] = (zz_seq_params){.sampling = {.temperature = i % 2 ? 0.8f : 0, .top_p = 1, .seed = 5},
                            .max_new_tokens = max_new[i],
                            .repetition_penalty = 1,
                            .logprobs = -1};
  }
  zz_request req = {.n = N,
                    .ids = ids,
                    .lens = lens,
                    .streams = streams,
                    .max_new_tokens = GEN,
                    .ignore_eos = true,
                    .params = sp,
                    .refill = true};
  int64_t useful = 0, blocks_computed = 0, blocks_useful = 0;
  for (int i = 0; i < N; i++) useful += lens[i] + max_new[i] - 1;
  /* sharing off, then on: each prompt's tokens as alone; on takes off the positions it counts */
  zz_result res[2];
  int64_t shared[2];
  for (int on = 0; on < 2; on++) {
    zz_engine_stats before, after;
    zz_engine_set_prefix_sharing(eng, on);
    zz_engine_get_stats(eng, &before);
    CU_ASSERT_FATAL(zz_generate(eng, &req, &res[on]) == ZZ_OK);
    zz_engine_get_stats(eng, &after);
    shared[on] = after.prefix_shared - before.prefix_shared;
    CU_ASSERT_EQUAL(res[on].pos_useful, useful - shared[on]);
    for (int i = 0; i < N; i++) {
      CU_ASSERT_EQUAL(res[on].n_tokens[i], max_new[i]);
      CU_ASSERT_EQUAL(res[on].out[i].finish, ZZ_FINISH_LENGTH);
      zz_expect_alone(eng, &req, &res[on], i);
    }
  }
  CU_ASSERT_EQUAL(shared[0], 0);
  CU_ASSERT_EQUAL(res[0].refilled, res[1].refilled);
  CU_ASSERT_EQUAL(res[0].pos_computed - res[1].pos_computed, shared[1]);
  if (pre && refills) {
    /* the blocks' prompt steps share pre x (their prompts - 1) together, at most
     * pre x (N - refilled - 1): more came to newcomers, pre each at most */
    CU_ASSERT(shared[1] > pre * (N - res[1].refilled - 1));
    CU_ASSERT(shared[1] <= pre * (N - 1));
  }
  /* the same prompts block by block, no refill, no sharing */
  zz_engine_set_prefix_sharing(eng, false);
  for (int64_t b = 0; b < N; b += cap) {
    zz_request blk = req;
    blk.n = N - b < cap ? N - b : cap;
    blk.ids += b;
    blk.lens += b;
    blk.streams += b;
    blk.params += b;
    blk.refill = false;
    zz_result r2;
    CU_ASSERT_FATAL(zz_generate(eng, &blk, &r2) == ZZ_OK);
    blocks_computed += r2.pos_computed;
    blocks_useful += r2.pos_useful;
    for (int64_t i = 0; i < blk.n; i++)
      CU_ASSERT(memcmp(r2.tokens[i], res[0].tokens[b + i], (size_t)max_new[b + i] * sizeof(int32_t)) == 0);
    zz_result_free(&r2, blk.n);
  }
  CU_ASSERT_EQUAL(blocks_useful, useful);
  if (refills) {
    CU_ASSERT(res[0].refilled > 0);
    CU_ASSERT(res[0].pos_computed - useful < blocks_computed - useful);
  } else {
    CU_ASSERT_EQUAL(res[0].refilled, 0);
    CU_ASSERT_EQUAL(res[0].pos_computed, blocks_computed);
  }
  zz_result_free(&res[0], N);
  zz_result_free(&res[1], N);
  zz_engine_destroy(eng);
}

static void test_refill(void) {
  zz_test_fixture f;
  CU_ASSERT_FATAL(zz_test_fixture_open("tiny-opt", true, &f) == ZZ_OK);
  /* everything on the device; one sequence per GPU batch; weights and activations
   * off the device (loaded again for a refill's prompt step); the cache on the CPU
   * tier with CPU attention (no refill: block by block); each without and with a
   * 16-token prefix every prompt starts with */
  for (int pre = 0; pre <= 16; pre += 16) {
    zz_refill_run(f.dev, &f.m, f.ck, "gbs=2 num_gb=2 w=100,0 c=100,0 a=100,0", true, pre);
    zz_refill_run(f.dev, &f.m, f.ck, "gbs=1 num_gb=3 w=100,0 c=100,0 a=100,0", true, pre);
    zz_refill_run(f.dev, &f.m, f.ck, "gbs=2 num_gb=2 w=0,50 c=100,0 a=0,100", true, pre);
    zz_refill_run(f.dev, &f.m, f.ck, "gbs=2 num_gb=2 w=100,0 c=0,100 a=100,0 cpu_attn=1", false, pre);
  }
  zz_test_fixture_close(&f);
}

/* The order blocks are gathered in: max new tokens in sqrt(2) steps, then length. */
static void test_prompt_order(void) {
  CU_ASSERT(zz_prompt_order(100, 1, 5, 2) < 0);   /* fewer max tokens first, however long */
  CU_ASSERT(zz_prompt_order(5, 11, 100, 10) < 0); /* 10 and 11 share a step: the shorter first */
  CU_ASSERT(zz_prompt_order(5, 11, 5, 10) > 0);
  CU_ASSERT(zz_prompt_order(7, 10, 7, 10) == 0);
  CU_ASSERT(zz_prompt_order(500, 22, 5, 23) < 0); /* 22 < 16 sqrt(2) <= 23 */
  CU_ASSERT(zz_prompt_order(0, 0, 1, 1) < 0);     /* a line answered with an error (0, 0) first */
}

void zz_test_genif_register(void) {
  CU_pSuite s = CU_add_suite("generation interface (issue #25)", NULL, NULL);
  CU_add_test(s, "chat templates: transformers' text for Llama-2, Llama-3, Mistral, ChatML", test_chat_fixtures);
  CU_add_test(s, "a sequence's penalties (Hugging Face's repetition, OpenAI's presence/frequency)", test_seq_penalties);
  CU_add_test(s, "log-probabilities and the most likely tokens", test_seq_logprobs);
  CU_add_test(s, "a sequence's settings packed into words and back", test_seq_params_pack);
  CU_add_test(s, "a line's settings: accepted, or refused naming the key", test_line_keys);
  CU_add_test(s, "a GPU batch whose sequences all ended is not computed; tokens as alone",
              test_finished_batches_skipped);
  CU_add_test(s, "refill: a finished sequence's slot takes the next prompt; tokens as alone", test_refill);
  CU_add_test(s, "blocks are gathered by max tokens in sqrt(2) steps, then length", test_prompt_order);
}
