/*
 * test_rowdrop.c — the prompt step's last-layer row drop (zz_step.last_rows, the
 * rule zz_layer_wants_all_rows, runtime/model.c): in a prompt step the last transformer
 * layer computes its output projection and MLP on each sequence's last row
 * alone, as llama.cpp's inp_out_ids does.
 *
 *   saving   a CPU device whose linear op counts multiply-adds (n · in · out):
 *            the prompt step of the golden prompts does exactly (prompts ·
 *            (s - 1)) rows' worth of the last layer's output projection and MLP
 *            less than the same engine built with zz_engine_opts.all_rows
 *   tokens   greedy tokens of the golden prompts equal the all-rows run, the
 *            first step's logits within 1e-5 relative, under several policies
 *   ppl      perplexity (prompts of one token: no row to drop) equal bit for
 *            bit, with the same multiply-adds
 * on tiny-llama (GQA), tiny-opt and tiny-opt-postln (post-LN: the layer norm
 * after the residual runs on the kept rows too).
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- counting device */

static zz_device_ops zz_counting_ops;
static zz_status (*zz_real_linear)(zz_device *, const void *, int64_t, int64_t, const void *, zz_dtype, zz_qfmt,
                                   const void *, zz_dtype, int64_t, void *, int);
static uint64_t zz_macs; /* multiply-adds through the device's linear op */

static zz_status zz_count_linear(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt,
                                 zz_qfmt w_q, const void *b, zz_dtype b_dt, int64_t out, void *y, int relu) {
  __atomic_fetch_add(&zz_macs, (uint64_t)(n * in * out), __ATOMIC_RELAXED);
  return zz_real_linear(dev, x, n, in, w, w_dt, w_q, b, b_dt, out, y, relu);
}

/* A CPU device whose linear op counts into zz_macs. */
static zz_device *zz_counting_device(void) {
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
  zz_counting_ops = *dev->ops;
  zz_real_linear = zz_counting_ops.linear;
  zz_counting_ops.linear = zz_count_linear;
  dev->ops = &zz_counting_ops;
  return dev;
}

/* ---------------------------------------------------------------- a fixture */

typedef struct zz_fix {
  char dir[4096];
  int64_t n, s, vocab; /* prompts, the longest, vocabulary */
  int max_new;
  int32_t *ids[8];
  int64_t lens[8];
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck;
} zz_fix;

static void zz_fix_open(const char *name, zz_fix *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "%s/%s", ZZ_FIXTURES_DIR, name);
  char path[4200];
  snprintf(path, sizeof path, "%s/golden.json", f->dir);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *jids = json_object_get(root, "input_ids");
  f->n = (int64_t)json_array_size(jids);
  CU_ASSERT_FATAL(f->n >= 1 && f->n <= 8);
  f->max_new = (int)json_integer_value(json_object_get(root, "max_new_tokens"));
  for (int64_t i = 0; i < f->n; i++) {
    json_t *row = json_array_get(jids, (size_t)i);
    f->lens[i] = (int64_t)json_array_size(row);
    f->ids[i] = malloc((size_t)f->lens[i] * sizeof(int32_t));
    for (int64_t j = 0; j < f->lens[i]; j++) f->ids[i][j] = (int32_t)json_integer_value(json_array_get(row, (size_t)j));
    if (f->lens[i] > f->s) f->s = f->lens[i];
  }
  json_decref(root);
  CU_ASSERT_FATAL(zz_config_load(f->dir, &f->cfg) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&f->cfg, &f->m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_checkpoint_open(f->dir, &f->ck) == ZZ_OK);
  f->vocab = f->cfg.vocab_size;
}

static void zz_fix_close(zz_fix *f) {
  for (int64_t i = 0; i < f->n; i++) free(f->ids[i]);
  zz_checkpoint_close(f->ck);
  zz_model_free(&f->m);
}

static zz_engine *zz_fix_engine(zz_fix *f, zz_device *dev, const char *policy, int64_t prompt_len, int64_t gen_len,
                                bool all_rows, const char *tmp) {
  zz_engine_opts o = {.shape = {.prompt_len = prompt_len, .gen_len = gen_len},
                      .tiers = {.offload_dir = tmp},
                      .n_groups = 1,
                      .all_rows = all_rows};
  CU_ASSERT_FATAL(zz_policy_parse(policy, &o.policy) == ZZ_OK);
  zz_engine *e = NULL;
  zz_status st = zz_engine_create_opts(dev, &f->m, f->ck, &o, &e);
  if (st != ZZ_OK) fprintf(stderr, "\n%s '%s': %s\n", f->dir, policy, zz_error_message());
  CU_ASSERT_FATAL(st == ZZ_OK);
  return e;
}

/* Multiply-adds one kept row of the last transformer layer spends after its K and
 * V: the output projection and the MLP, as arch_llama.c and arch_opt.c compute. */
static uint64_t zz_row_macs(const zz_config *c) {
  int64_t h = c->hidden, qw = c->n_heads * c->head_dim;
  bool llama = strcmp(c->model_type, "llama") == 0;
  return (uint64_t)(qw * h + (llama ? 3 : 2) * h * c->ffn);
}

/* ---------------------------------------------------------------- saving */

/* Multiply-adds of the prompt step alone (step 0) of the golden prompts. */
static uint64_t zz_prompt_macs(zz_fix *f, zz_device *dev, const char *policy, bool all_rows, const char *tmp) {
  zz_engine *e = zz_fix_engine(f, dev, policy, f->s, 2, all_rows, tmp);
  CU_ASSERT_FATAL(zz_engine_begin_block(e, 0, f->n, f->lens) == ZZ_OK);
  zz_step_io io = {.prompts = (const int32_t *const *)f->ids};
  __atomic_store_n(&zz_macs, 0, __ATOMIC_RELAXED);
  CU_ASSERT_FATAL(zz_engine_step(e, 0, 0, &io) == ZZ_OK);
  uint64_t got = __atomic_load_n(&zz_macs, __ATOMIC_RELAXED);
  zz_engine_destroy(e);
  return got;
}

static void zz_check_saving(const char *name) {
  static const char *const pols[] = {"gbs=4 num_gb=1", "gbs=3 num_gb=2 w=0,50 c=0,50 a=0,50"};
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
  zz_device *dev = zz_counting_device();
  zz_fix f;
  zz_fix_open(name, &f);
  /* the matrices the architecture marks after_kv (what the planner's cost model
   * charges at one row a sequence there) are the ones the layer saves on */
  uint64_t marked = 0;
  for (int l = 0; l < f.m.n_layers; l++) {
    const zz_layer *L = &f.m.layers[l];
    for (int k = 0; k < L->n_weights; k++)
      if (L->weights[k].ndim == 2 && L->weights[k].after_kv && !zz_layer_wants_all_rows(&f.m, L, f.s, false))
        marked += (uint64_t)zz_weight_numel(&L->weights[k]);
  }
  CU_ASSERT_EQUAL(marked, zz_row_macs(&f.cfg));
  for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
    uint64_t full = zz_prompt_macs(&f, dev, pols[p], true, tmp);
    uint64_t drop = zz_prompt_macs(&f, dev, pols[p], false, tmp);
    uint64_t want = (uint64_t)(f.n * (f.s - 1)) * zz_row_macs(&f.cfg);
    if (full - drop != want)
      fprintf(stderr, "\n%s '%s': prompt step %llu multiply-adds, all rows %llu: saved %llu, want %llu\n", name,
              pols[p], (unsigned long long)drop, (unsigned long long)full, (unsigned long long)(full - drop),
              (unsigned long long)want);
    CU_ASSERT(full > drop);
    CU_ASSERT_EQUAL(full - drop, want);
  }
  zz_fix_close(&f);
  zz_device_destroy(dev);
  rmdir(tmp);
}

static void test_saving(void) {
  zz_check_saving("tiny-llama");
  zz_check_saving("tiny-opt");
  zz_check_saving("tiny-opt-postln");
}

/* ---------------------------------------------------------------- tokens */

typedef struct zz_first {
  int64_t n, vocab;
  float *logits; /* [n, vocab] of step 0 */
} zz_first;

static void zz_first_cb(void *ctx, int64_t seq, int step, const float *lg, int64_t vocab) {
  zz_first *c = ctx;
  if (step == 0 && seq < c->n) memcpy(c->logits + seq * vocab, lg, (size_t)vocab * sizeof *lg);
}

static void zz_generate_run(zz_fix *f, zz_device *dev, const char *policy, bool all_rows, const char *tmp,
                            zz_result *res, float *first) {
  zz_engine *e = zz_fix_engine(f, dev, policy, f->s, f->max_new, all_rows, tmp);
  zz_first cap = {.n = f->n, .vocab = f->vocab, .logits = first};
  zz_request req = {.n = f->n,
                    .ids = (const int32_t *const *)f->ids,
                    .lens = f->lens,
                    .max_new_tokens = f->max_new,
                    .on_logits = zz_first_cb,
                    .ctx = &cap};
  memset(res, 0, sizeof *res);
  CU_ASSERT_FATAL(zz_generate(e, &req, res) == ZZ_OK);
  zz_engine_destroy(e);
}

static void zz_check_tokens(const char *name) {
  static const char *const pols[] = {
      "gbs=4 num_gb=1",
      "gbs=1 num_gb=4",
      "gbs=2 num_gb=2 w=0,0 c=0,0 a=0,0 cpu_attn=1",
      "gbs=2 num_gb=2 w=30,30 c=30,30 a=30,30 cpu_attn=1 overlap=0",
      "gbs=4 num_gb=1 cw=1 cc=1",
  };
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
  zz_device *dev = zz_counting_device();
  zz_fix f;
  zz_fix_open(name, &f);
  float *a = calloc((size_t)(f.n * f.vocab), sizeof *a), *b = calloc((size_t)(f.n * f.vocab), sizeof *b);
  CU_ASSERT_FATAL(a && b);
  for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
    zz_result full, drop;
    zz_generate_run(&f, dev, pols[p], true, tmp, &full, a);
    zz_generate_run(&f, dev, pols[p], false, tmp, &drop, b);
    double err = 0, mx = 1e-6;
    for (int64_t i = 0; i < f.n * f.vocab; i++) {
      mx = fmax(mx, fabs(a[i]));
      err = fmax(err, fabs((double)a[i] - b[i]));
    }
    int same = 1;
    for (int64_t i = 0; i < f.n; i++)
      same &= full.n_tokens[i] == drop.n_tokens[i] &&
              memcmp(full.tokens[i], drop.tokens[i], (size_t)full.n_tokens[i] * sizeof(int32_t)) == 0;
    if (!same || err / mx > 1e-5)
      fprintf(stderr, "\n%s '%s': tokens %s the all-rows run's, first-step logits %.3g relative\n", name, pols[p],
              same ? "equal" : "differ from", err / mx);
    CU_ASSERT(same);
    CU_ASSERT(err / mx <= 1e-5);
    zz_result_free(&full, f.n);
    zz_result_free(&drop, f.n);
  }
  free(a);
  free(b);
  zz_fix_close(&f);
  zz_device_destroy(dev);
  rmdir(tmp);
}

static void test_tokens(void) {
  zz_check_tokens("tiny-llama");
  zz_check_tokens("tiny-opt");
  zz_check_tokens("tiny-opt-postln");
}

/* ---------------------------------------------------------------- perplexity */

static void zz_check_ppl(const char *name) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
  zz_device *dev = zz_counting_device();
  zz_fix f;
  zz_fix_open(name, &f);
  int32_t text[256];
  int64_t n = 0;
  for (int64_t i = 0; i < f.n; i++)
    for (int64_t j = 0; j < f.lens[i] && n < 256; j++) text[n++] = f.ids[i][j];
  zz_ppl r[2];
  uint64_t macs[2];
  for (int k = 0; k < 2; k++) {
    zz_engine *e = zz_fix_engine(&f, dev, "gbs=2 num_gb=2", 1, 8, k == 0, tmp);
    __atomic_store_n(&zz_macs, 0, __ATOMIC_RELAXED);
    CU_ASSERT_FATAL(zz_perplexity(e, text, n, &r[k]) == ZZ_OK);
    macs[k] = __atomic_load_n(&zz_macs, __ATOMIC_RELAXED);
    zz_engine_destroy(e);
  }
  CU_ASSERT_EQUAL(macs[0], macs[1]);
  CU_ASSERT_EQUAL(r[0].tokens, r[1].tokens);
  CU_ASSERT(memcmp(&r[0].nll, &r[1].nll, sizeof r[0].nll) == 0);
  CU_ASSERT(memcmp(r[0].argmax, r[1].argmax, (size_t)n * sizeof(int32_t)) == 0);
  for (int k = 0; k < 2; k++) zz_ppl_free(&r[k]);
  zz_fix_close(&f);
  zz_device_destroy(dev);
  rmdir(tmp);
}

static void test_ppl(void) {
  zz_check_ppl("tiny-llama");
  zz_check_ppl("tiny-opt");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("rowdrop", NULL, NULL);
  CU_add_test(s, "prompt step: the last layer's projection and MLP on the last rows only", test_saving);
  CU_add_test(s, "greedy tokens = the all-rows run (policies, compressed)", test_tokens);
  CU_add_test(s, "perplexity = the all-rows run, bit for bit", test_ppl);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  CU_cleanup_registry();
  return fails ? 1 : 0;
}
