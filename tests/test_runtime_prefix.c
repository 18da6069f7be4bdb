/*
 * test_runtime_prefix.c — a shared prompt prefix computed once (runtime/prefix.c,
 * issue #47 item 3): prompts behind a common prefix give exactly the tokens of
 * the run that computes every prompt whole, on OPT, LLaMA and a sliding-window
 * Mistral fixture, under policies that put the cache on every tier (device, CPU,
 * disk, split), 4-bit cache, CPU attention with top-k sparsity, and blocks cut
 * into several GPU batches; the prompt step computes the prefix's rows once; a
 * block with no common prefix and a prefix that is a whole prompt.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

#define ZZ_PX_NP 7   /* prompts in the block */
#define ZZ_PX_NEW 6  /* new tokens each */
#define ZZ_PX_PRE 20 /* shared prefix */

typedef struct zz_px_model {
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck;
} zz_px_model;

static zz_device *D;
static char DIR_[4096];

static int zz_px_setup(void) {
  snprintf(DIR_, sizeof DIR_, "%s", zz_test_tmpdir());
  return zz_device_create_cpu(0, 2, 2, &D) == ZZ_OK ? 0 : -1;
}

static int zz_px_teardown(void) {
  zz_device_destroy(D);
  rmdir(DIR_);
  return 0;
}

static zz_status zz_px_open(const char *name, zz_px_model *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", ZZ_FIXTURES_DIR, name);
  memset(out, 0, sizeof *out);
  ZZ_CHECK(zz_config_load(path, &out->cfg));
  ZZ_CHECK(zz_model_init(&out->cfg, &out->m));
  return zz_checkpoint_open(path, &out->ck);
}

static void zz_px_close(zz_px_model *x) {
  zz_checkpoint_close(x->ck);
  zz_model_free(&x->m);
}

/* One block of n prompts through eng with sharing on or off: tokens and the
 * positions the engine computed. */
static zz_status zz_px_block(zz_engine *eng, bool share, int32_t *const *ids, const int64_t *lens, int64_t n,
                             int32_t toks[ZZ_PX_NP][ZZ_PX_NEW], int64_t *computed) {
  zz_engine_set_prefix_sharing(eng, share);
  uint64_t streams[ZZ_PX_NP];
  for (int64_t i = 0; i < n; i++) streams[i] = (uint64_t)i;
  zz_request req = {.n = n,
                    .ids = (const int32_t *const *)ids,
                    .lens = lens,
                    .streams = streams,
                    .max_new_tokens = ZZ_PX_NEW,
                    .ignore_eos = true};
  zz_result res;
  ZZ_CHECK(zz_generate(eng, &req, &res));
  for (int64_t i = 0; i < n; i++) memcpy(toks[i], res.tokens[i], ZZ_PX_NEW * sizeof(int32_t));
  *computed = res.pos_computed;
  CU_ASSERT(res.pos_useful > 0 && res.pos_useful <= res.pos_computed); /* a shared prefix counted once */
  zz_result_free(&res, n);
  return ZZ_OK;
}

/* Prompts: the first `pre` tokens the same in all (ids drawn from seed), then
 * each its own tokens, suffix lengths from sfx. */
static void zz_px_prompts(const zz_config *c, uint64_t seed, int64_t pre, const int64_t *sfx, int32_t **ids,
                          int64_t *lens) {
  zz_rng r;
  zz_rng_seed(&r, seed, 0);
  int32_t common[64];
  for (int64_t j = 0; j < pre; j++) common[j] = 4 + (int32_t)(zz_rng_next(&r) % (uint64_t)(c->vocab_size - 4));
  for (int i = 0; i < ZZ_PX_NP; i++) {
    lens[i] = pre + sfx[i];
    ids[i] = malloc((size_t)lens[i] * sizeof(int32_t));
    memcpy(ids[i], common, (size_t)pre * sizeof(int32_t));
    for (int64_t j = pre; j < lens[i]; j++) ids[i][j] = 4 + (int32_t)(zz_rng_next(&r) % (uint64_t)(c->vocab_size - 4));
  }
}

/* Sharing on and off on one engine under policy: the same tokens; on computes
 * the prefix's `shared` rows once (positions: shared + n * (s - shared) against
 * n * s). */
static void zz_px_check(zz_px_model *x, const char *policy, int32_t **ids, const int64_t *lens, int64_t shared) {
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &pol) == ZZ_OK);
  int64_t s = 0;
  for (int i = 0; i < ZZ_PX_NP; i++) s = lens[i] > s ? lens[i] : s;
  zz_shape shape = {.prompt_len = s, .gen_len = ZZ_PX_NEW};
  zz_tiers tiers = {.offload_dir = DIR_};
  zz_engine *eng = NULL;
  zz_status st = zz_engine_create_tiers(D, &x->m, x->ck, &pol, &shape, &tiers, &eng);
  if (st != ZZ_OK) fprintf(stderr, "\n%s: %s\n", policy, zz_error_message());
  CU_ASSERT_FATAL(st == ZZ_OK);
  int32_t off[ZZ_PX_NP][ZZ_PX_NEW], on[ZZ_PX_NP][ZZ_PX_NEW];
  int64_t c_off = 0, c_on = 0;
  /* on first, so the shared run cannot lean on rows the whole run left in the cache */
  CU_ASSERT_FATAL(zz_px_block(eng, true, ids, lens, ZZ_PX_NP, on, &c_on) == ZZ_OK);
  CU_ASSERT_FATAL(zz_px_block(eng, false, ids, lens, ZZ_PX_NP, off, &c_off) == ZZ_OK);
  int same = !memcmp(on, off, sizeof on);
  if (!same) fprintf(stderr, "\n%s, policy '%s': tokens differ with the shared prefix\n", x->cfg.model_type, policy);
  CU_ASSERT(same);
  int64_t bls = (int64_t)pol.gpu_batch_size * pol.num_gpu_batches, steps = ZZ_PX_NP * (ZZ_PX_NEW - 1);
  CU_ASSERT_FATAL(bls >= ZZ_PX_NP); /* one group: the positions below are the block's */
  CU_ASSERT_EQUAL(c_off, ZZ_PX_NP * s + steps);
  CU_ASSERT_EQUAL(c_on, shared + ZZ_PX_NP * (s - shared) + steps);
  zz_engine_destroy(eng);
}

static void zz_px_free(int32_t **ids) {
  for (int i = 0; i < ZZ_PX_NP; i++) free(ids[i]);
}

static const char *const zz_px_policies[] = {
    "gbs=7 num_gb=1 w=100,0 c=100,0 a=100,0",                  /* all in memory */
    "gbs=2 num_gb=4 w=100,0 c=0,100 a=100,0",                  /* cache on the CPU tier, 4 batches */
    "gbs=4 num_gb=2 w=0,100 c=0,0 a=0,100",                    /* cache on disk */
    "gbs=3 num_gb=3 w=30,30 c=30,30 a=30,30 overlap=0",        /* everything split, serial */
    "gbs=4 num_gb=2 w=100,0 c=0,100 a=100,0 cpu_attn=1",       /* CPU attention beside a host cache */
    "gbs=4 num_gb=2 w=0,0 c=0,0 a=100,0 cpu_attn=1",           /* CPU attention beside a disk cache */
    "gbs=7 num_gb=1 w=100,0 c=100,0 a=100,0 cc=1",             /* 4-bit cache */
    "gbs=4 num_gb=2 w=0,100 c=50,0 a=100,0 cc=1 sparsity=0.5", /* 4-bit, split, top-k */
};

/* Mixed suffix lengths (the first prompt not the longest: the source of the
 * prefix is padded), every policy. */
static void zz_px_fixture(const char *name, const int64_t sfx[ZZ_PX_NP]) {
  zz_px_model x;
  CU_ASSERT_FATAL(zz_px_open(name, &x) == ZZ_OK);
  int32_t *ids[ZZ_PX_NP];
  int64_t lens[ZZ_PX_NP];
  zz_px_prompts(&x.cfg, 7, ZZ_PX_PRE, sfx, ids, lens);
  for (size_t p = 0; p < sizeof zz_px_policies / sizeof zz_px_policies[0]; p++)
    zz_px_check(&x, zz_px_policies[p], ids, lens, ZZ_PX_PRE);
  zz_px_free(ids);
  zz_px_close(&x);
}

static const int64_t zz_px_mixed[ZZ_PX_NP] = {3, 1, 12, 7, 14, 2, 9};
static void test_opt(void) { zz_px_fixture("tiny-opt", zz_px_mixed); }
static void test_llama(void) { zz_px_fixture("tiny-llama", zz_px_mixed); }
/* suffixes short enough that the last rows still see the prefix through 2 layers
 * of a 5-key window (else a prefix left out would not show in the tokens) */
static void test_mistral_window(void) {
  static const int64_t sfx[ZZ_PX_NP] = {3, 1, 4, 2, 4, 1, 2};
  zz_px_fixture("tiny-mistral", sfx);
}

/* A block with no common prefix runs whole; a prompt that is the prefix itself
 * keeps its last token to the suffix run (the prefix shared is one shorter). */
static void test_edges(void) {
  zz_px_model x;
  CU_ASSERT_FATAL(zz_px_open("tiny-opt", &x) == ZZ_OK);
  static const int64_t sfx[ZZ_PX_NP] = {4, 1, 6, 2, 5, 3, 7};
  int32_t *ids[ZZ_PX_NP];
  int64_t lens[ZZ_PX_NP];
  zz_px_prompts(&x.cfg, 11, 0, sfx, ids, lens);
  ids[3][0] = ids[0][0] == 4 ? 5 : 4; /* never all the same first token */
  CU_ASSERT_EQUAL(zz_prefix_common((const int32_t *const *)ids, ZZ_PX_NP, 1), 0);
  zz_px_check(&x, zz_px_policies[0], ids, lens, 0);
  zz_px_free(ids);
  static const int64_t whole[ZZ_PX_NP] = {0, 5, 3, 8, 1, 6, 2};
  zz_px_prompts(&x.cfg, 13, ZZ_PX_PRE, whole, ids, lens);
  CU_ASSERT_EQUAL(zz_prefix_common((const int32_t *const *)ids, ZZ_PX_NP, ZZ_PX_PRE - 1), ZZ_PX_PRE - 1);
  zz_px_check(&x, zz_px_policies[0], ids, lens, ZZ_PX_PRE - 1);
  zz_px_check(&x, zz_px_policies[2], ids, lens, ZZ_PX_PRE - 1);
  zz_px_free(ids);
  zz_px_close(&x);
}

/* A refill's newcomer (zz_engine_refill) into sequence 1 of a block of three
 * whose prompts start with the same ZZ_PX_PRE tokens, sequence 2's with two more
 * of the newcomer's: its prompt step copies the longest prefix's rows from the slot
 * that holds them (sequence 2) and computes the rest; with sharing off, all of it.
 * The logits of that step and of the decode step after it give the same tokens
 * either way. */
static void zz_px_refill(const char *name, const char *policy) {
  zz_px_model x;
  CU_ASSERT_FATAL(zz_px_open(name, &x) == ZZ_OK);
  static const int64_t sfx[ZZ_PX_NP] = {3, 4, 6, 5, 1, 2, 3};
  int32_t *ids[ZZ_PX_NP];
  int64_t lens[ZZ_PX_NP];
  zz_px_prompts(&x.cfg, 17, ZZ_PX_PRE, sfx, ids, lens);
  const int64_t more = 2, newcomer = 3;
  memcpy(ids[2] + ZZ_PX_PRE, ids[newcomer] + ZZ_PX_PRE, more * sizeof(int32_t));
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &pol) == ZZ_OK);
  zz_shape shape = {.prompt_len = ZZ_PX_PRE + 6, .gen_len = ZZ_PX_NEW};
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_engine_create(D, &x.m, x.ck, &pol, &shape, &eng) == ZZ_OK);
  CU_ASSERT_FATAL(zz_engine_can_refill(eng, 0));
  int64_t vocab = x.cfg.vocab_size;
  int32_t top[2][2];
  for (int on = 1; on >= 0; on--) {
    zz_engine_set_prefix_sharing(eng, on);
    CU_ASSERT_FATAL(zz_engine_begin_block(eng, 0, 3, lens) == ZZ_OK);
    zz_step_io io0 = {.prompts = (const int32_t *const *)ids};
    CU_ASSERT_FATAL(zz_engine_step(eng, 0, 0, &io0) == ZZ_OK);
    int32_t tok[3] = {7, 8, 9};
    zz_step_io io1 = {.tokens = tok};
    CU_ASSERT_FATAL(zz_engine_step(eng, 0, 1, &io1) == ZZ_OK);
    zz_engine_stats a, b;
    zz_engine_get_stats(eng, &a);
    const int32_t *one[1] = {ids[newcomer]};
    zz_step_io ion = {.prompts = one};
    CU_ASSERT_FATAL(zz_engine_refill(eng, 0, 1, lens[newcomer], 2, &ion) == ZZ_OK);
    zz_engine_get_stats(eng, &b);
    int64_t p = on ? ZZ_PX_PRE + more : 0;
    CU_ASSERT_EQUAL(b.prefix_shared - a.prefix_shared, p);
    CU_ASSERT_EQUAL(b.positions - a.positions, lens[newcomer] - p);
    top[on][0] = zz_argmax(zz_engine_logits(eng) + vocab, vocab);
    CU_ASSERT_FATAL(zz_engine_step(eng, 0, 2, &io1) == ZZ_OK);
    top[on][1] = zz_argmax(zz_engine_logits(eng) + vocab, vocab);
  }
  CU_ASSERT(!memcmp(top[0], top[1], sizeof top[0]));
  zz_engine_destroy(eng);
  zz_px_free(ids);
  zz_px_close(&x);
}

static void test_refill(void) {
  zz_px_refill("tiny-opt", "gbs=4 num_gb=1 w=100,0 c=100,0 a=100,0");
  zz_px_refill("tiny-llama", "gbs=1 num_gb=3 w=0,50 c=100,0 a=0,100");         /* donor in another batch; offloaded */
  zz_px_refill("tiny-mistral", "gbs=2 num_gb=2 w=100,0 c=100,0 a=100,0 cc=1"); /* sliding window, 4-bit cache */
}

/* zz_prefix_common: the longest run of equal first tokens, capped. */
static void test_common(void) {
  const int32_t a[] = {5, 6, 7, 8}, b[] = {5, 6, 7, 9}, c[] = {5, 6};
  const int32_t *abc[] = {a, b, c}, *ab[] = {a, b}, *one[] = {a};
  CU_ASSERT_EQUAL(zz_prefix_common(ab, 2, 4), 3);
  CU_ASSERT_EQUAL(zz_prefix_common(ab, 2, 2), 2);
  CU_ASSERT_EQUAL(zz_prefix_common(abc, 3, 1), 1);
  CU_ASSERT_EQUAL(zz_prefix_common(one, 1, 4), 0);
  CU_ASSERT_EQUAL(zz_prefix_common(ab, 2, 0), 0);
  /* the rule: less the shortest's last token, nothing below ZZ_PREFIX_MIN */
  int32_t x[40] = {0}, y[40] = {0};
  y[30] = 1;
  const int32_t *xy[] = {x, y};
  CU_ASSERT_EQUAL(zz_prefix_shared(xy, 2, 40), 30);
  CU_ASSERT_EQUAL(zz_prefix_shared(xy, 2, 20), 19);
  CU_ASSERT_EQUAL(zz_prefix_shared(xy, 2, ZZ_PREFIX_MIN + 1), ZZ_PREFIX_MIN);
  CU_ASSERT_EQUAL(zz_prefix_shared(xy, 2, ZZ_PREFIX_MIN), 0);
  CU_ASSERT_EQUAL(zz_prefix_shared(xy, 1, 40), 0);
}

void zz_test_prefix_register(void) {
  CU_pSuite s = CU_add_suite("prefix", zz_px_setup, zz_px_teardown);
  CU_add_test(s, "common prefix of token lists", test_common);
  CU_add_test(s, "OPT: shared prefix gives the whole run's tokens under 8 policies", test_opt);
  CU_add_test(s, "LLaMA: shared prefix gives the whole run's tokens under 8 policies", test_llama);
  CU_add_test(s, "Mistral, sliding window: shared prefix gives the whole run's tokens", test_mistral_window);
  CU_add_test(s, "no common prefix; a prefix that is a whole prompt", test_edges);
  CU_add_test(s, "refill: a newcomer's prefix rows copied from the slot with the longest", test_refill);
}
