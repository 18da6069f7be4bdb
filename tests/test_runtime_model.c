/*
 * test_runtime_model.c — the OPT model against golden outputs of Hugging Face
 * transformers (golden.json in each tests/fixtures model): greedy tokens exactly, first- and
 * last-step logits within 1e-4 relative to the row's largest magnitude, for the
 * pre-LN model (one safetensors file) and the post-LN model with project_in/out
 * (sharded, names without the "model." prefix), under several batch cuttings.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

typedef struct zz_golden {
  json_t *root;
  int64_t n, vocab;
  int32_t **ids;
  int64_t *lens;
} zz_golden;

static int zz_golden_load(const char *model, zz_golden *g) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/golden.json", ZZ_FIXTURES_DIR, model);
  memset(g, 0, sizeof *g);
  g->root = json_load_file(path, 0, NULL);
  if (!g->root) return -1;
  json_t *ids = json_object_get(g->root, "input_ids");
  g->n = (int64_t)json_array_size(ids);
  g->vocab = json_integer_value(json_object_get(g->root, "vocab_size"));
  g->ids = calloc((size_t)g->n, sizeof *g->ids);
  g->lens = calloc((size_t)g->n, sizeof *g->lens);
  for (int64_t i = 0; i < g->n; i++) {
    json_t *row = json_array_get(ids, (size_t)i);
    g->lens[i] = (int64_t)json_array_size(row);
    g->ids[i] = malloc((size_t)g->lens[i] * sizeof **g->ids);
    for (int64_t j = 0; j < g->lens[i]; j++) g->ids[i][j] = (int32_t)json_integer_value(json_array_get(row, (size_t)j));
  }
  return 0;
}

static void zz_golden_free(zz_golden *g) {
  for (int64_t i = 0; i < g->n; i++) free(g->ids[i]);
  free(g->ids);
  free(g->lens);
  json_decref(g->root);
}

/* Captures the logits of every (sequence, step). */
typedef struct zz_capture {
  int64_t n, steps, vocab;
  float *logits; /* [n, steps, vocab] */
} zz_capture;

static void zz_capture_cb(void *ctx, int64_t seq, int step, const float *lg, int64_t vocab) {
  zz_capture *c = ctx;
  if (seq < c->n && step < c->steps) memcpy(c->logits + (seq * c->steps + step) * vocab, lg, (size_t)vocab * sizeof *lg);
}

/* Largest |a - ref| over max|ref| of a row. */
static double zz_row_err(const float *a, json_t *ref, int64_t vocab) {
  double mx = 1e-6, err = 0;
  for (int64_t j = 0; j < vocab; j++) {
    double r = json_real_value(json_array_get(ref, (size_t)j));
    if (fabs(r) > mx) mx = fabs(r);
    if (isnan(a[j])) return INFINITY;
    if (fabs(a[j] - r) > err) err = fabs(a[j] - r);
  }
  return err / mx;
}

static void zz_check_golden(const char *name, const char *policy) {
  zz_golden g;
  CU_ASSERT_FATAL(zz_golden_load(name, &g) == 0);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, name);
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck = NULL;
  zz_device *dev = NULL;
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_config_load(dir, &cfg) == ZZ_OK);
  CU_ASSERT_EQUAL(cfg.vocab_size, g.vocab);
  CU_ASSERT_FATAL(zz_model_init(&cfg, &m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, &dev) == ZZ_OK);
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &pol) == ZZ_OK);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
  zz_tiers tiers = {.offload_dir = tmp};
  int max_new = (int)json_integer_value(json_object_get(g.root, "max_new_tokens"));
  int64_t s = 0;
  for (int64_t i = 0; i < g.n; i++) s = g.lens[i] > s ? g.lens[i] : s;
  zz_shape shape = {.prompt_len = s, .gen_len = max_new};
  zz_status st = zz_engine_create_tiers(dev, &m, ck, &pol, &shape, &tiers, &eng);
  if (st != ZZ_OK) fprintf(stderr, "%s\n", zz_error_message());
  CU_ASSERT_FATAL(st == ZZ_OK);
  zz_capture cap = {.n = g.n, .steps = max_new, .vocab = g.vocab};
  cap.logits = calloc((size_t)(g.n * max_new * g.vocab), sizeof *cap.logits);
  zz_request req = {.n = g.n, .ids = (const int32_t *const *)g.ids, .lens = g.lens, .max_new_tokens = max_new,
                    .on_logits = zz_capture_cb, .ctx = &cap};
  zz_result res;
  CU_ASSERT_FATAL(zz_engine_generate(eng, &req, &res) == ZZ_OK);
  json_t *want = json_object_get(g.root, "greedy_tokens");
  json_t *first = json_object_get(g.root, "first_step_logits"), *last = json_object_get(g.root, "last_step_logits");
  for (int64_t i = 0; i < g.n; i++) {
    json_t *w = json_array_get(want, (size_t)i);
    int64_t nw = (int64_t)json_array_size(w);
    CU_ASSERT_EQUAL(res.n_tokens[i], nw);
    int same = res.n_tokens[i] == nw;
    for (int64_t j = 0; same && j < nw; j++) same = res.tokens[i][j] == json_integer_value(json_array_get(w, (size_t)j));
    CU_ASSERT(same);
    if (!same) fprintf(stderr, "\n%s '%s': prompt %lld tokens differ\n", name, policy, (long long)i);
    double e0 = zz_row_err(cap.logits + (i * max_new) * g.vocab, json_array_get(first, (size_t)i), g.vocab);
    double e1 = zz_row_err(cap.logits + (i * max_new + nw - 1) * g.vocab, json_array_get(last, (size_t)i), g.vocab);
    CU_ASSERT(e0 <= 1e-4);
    CU_ASSERT(e1 <= 1e-4);
    if (e0 > 1e-4 || e1 > 1e-4)
      fprintf(stderr, "\n%s prompt %lld: logits rel err first %.3g last %.3g\n", name, (long long)i, e0, e1);
  }
  zz_result_free(&res, g.n);
  free(cap.logits);
  zz_engine_destroy(eng);
  zz_device_destroy(dev);
  zz_checkpoint_close(ck);
  zz_model_free(&m);
  zz_golden_free(&g);
  rmdir(tmp);
}

static void test_golden_preln_one_batch(void) { zz_check_golden("tiny-opt", "gbs=4 num_gb=1"); }
static void test_golden_preln_zigzag(void) { zz_check_golden("tiny-opt", "gbs=1 num_gb=4"); }
static void test_golden_preln_uneven(void) { zz_check_golden("tiny-opt", "gbs=3 num_gb=2"); }
static void test_golden_postln_one_batch(void) { zz_check_golden("tiny-opt-postln", "gbs=4 num_gb=1"); }
static void test_golden_postln_zigzag(void) { zz_check_golden("tiny-opt-postln", "gbs=2 num_gb=2"); }
/* logits too stay within 1e-4 when every tensor kind is spread over the tiers */
static void test_golden_postln_offloaded(void) {
  zz_check_golden("tiny-opt-postln", "gbs=2 num_gb=2 w=30,30 c=30,30 a=30,30 cpu_attn=1");
}
static void test_golden_preln_offloaded(void) {
  zz_check_golden("tiny-opt", "gbs=1 num_gb=4 w=0,40 c=0,50 a=50,0 cpu_attn=1 overlap=0");
}

static void test_presets(void) {
  zz_config c;
  CU_ASSERT_EQUAL(zz_config_preset("opt-175b", &c), ZZ_OK);
  CU_ASSERT_EQUAL(c.hidden, 12288);
  CU_ASSERT_EQUAL(c.n_layers, 96);
  zz_model m;
  CU_ASSERT_EQUAL(zz_config_preset("opt-125m", &c), ZZ_OK);
  CU_ASSERT_EQUAL(zz_model_init(&c, &m), ZZ_OK);
  CU_ASSERT_EQUAL(m.n_layers, 26);
  /* 125M parameters plus the LM head's own copy of the token embedding */
  int64_t n = zz_model_numel(&m);
  CU_ASSERT(n > 125000000 + 38000000 && n < 126000000 + 39000000);
  zz_model_free(&m);
  CU_ASSERT_EQUAL(zz_config_preset("opt-350m", &c), ZZ_OK);
  CU_ASSERT_FALSE(c.pre_ln);
  CU_ASSERT_EQUAL(c.embed_dim, 512);
  CU_ASSERT_EQUAL(zz_config_preset("gpt-9", &c), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "opt-175b"));
}

/* Dummy weights: deterministic, not constant, scaled like a checkpoint. */
static void test_dummy_weights(void) {
  zz_weight_spec w = {.name = "model.decoder.layers.3.fc1.weight", .ndim = 2, .shape = {64, 100}};
  float a[6400], b[6400];
  zz_weights_dummy(&w, ZZ_DTYPE_F32, a);
  zz_weights_dummy(&w, ZZ_DTYPE_F32, b);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  double m = 0, v = 0;
  for (int i = 0; i < 6400; i++) m += a[i];
  m /= 6400;
  for (int i = 0; i < 6400; i++) v += (a[i] - m) * (a[i] - m);
  v = sqrt(v / 6400);
  CU_ASSERT(fabs(m) < 0.002);
  CU_ASSERT(v > 0.015 && v < 0.025);
  zz_weight_spec ln = {.name = "model.decoder.layers.0.final_layer_norm.weight", .ndim = 1, .shape = {64}};
  zz_weights_dummy(&ln, ZZ_DTYPE_F32, a);
  CU_ASSERT(a[0] > 0.8f && a[0] < 1.2f && a[0] != a[1]);
}

/* An impossible device capacity is refused before anything is allocated. */
static void test_capacity_refused(void) {
  zz_config c;
  zz_model m;
  zz_device *dev;
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_config_preset("opt-125m", &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_create_cpu(64 << 20, 2, &dev) == ZZ_OK);
  zz_policy pol;
  zz_policy_default(&pol);
  zz_shape shape = {128, 8};
  CU_ASSERT_EQUAL(zz_engine_create(dev, &m, NULL, &pol, &shape, &eng), ZZ_ERR_INFEASIBLE);
  CU_ASSERT_PTR_NULL(eng);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "capacity"));
  zz_device_destroy(dev);
  zz_model_free(&m);
}

void zz_test_model_register(void) {
  CU_pSuite s = CU_add_suite("model", NULL, NULL);
  CU_add_test(s, "presets and layer list", test_presets);
  CU_add_test(s, "dummy weights", test_dummy_weights);
  CU_add_test(s, "golden pre-LN, one batch of 4", test_golden_preln_one_batch);
  CU_add_test(s, "golden pre-LN, 4 batches of 1 (zig-zag)", test_golden_preln_zigzag);
  CU_add_test(s, "golden pre-LN, batches of 3 + 1", test_golden_preln_uneven);
  CU_add_test(s, "golden post-LN + project_in/out, sharded", test_golden_postln_one_batch);
  CU_add_test(s, "golden post-LN, 2 batches of 2", test_golden_postln_zigzag);
  CU_add_test(s, "golden post-LN, offloaded over three tiers", test_golden_postln_offloaded);
  CU_add_test(s, "golden pre-LN, offloaded, serial", test_golden_preln_offloaded);
  CU_add_test(s, "over-capacity policy refused", test_capacity_refused);
}
