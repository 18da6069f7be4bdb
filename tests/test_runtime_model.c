/*
 * test_runtime_model.c — the OPT model against golden outputs of Hugging Face
 * transformers (golden.json in each tests/fixtures model): greedy tokens exactly, first- and
 * last-step logits within 1e-4 relative to the row's largest magnitude, for the
 * pre-LN model (one safetensors file) and the post-LN model with project_in/out
 * (sharded, names without the "model." prefix), under several batch cuttings.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

/* the first, second, 65537th and last f32 of the counter test's weight (bit patterns) */
#define ZZ_DUMMY_PIN0 0xbc09cbc9u
#define ZZ_DUMMY_PIN1 0xbc5dc3b9u
#define ZZ_DUMMY_PIN2 0x3c60d6b2u
#define ZZ_DUMMY_PIN3 0x3c30f6a0u

void zz_check_golden(const char *name, const char *policy) {
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
  zz_golden_report r;
  zz_status st = zz_golden_run(name, dev, policy, 0, &r);
  if (st != ZZ_OK) fprintf(stderr, "\n%s '%s': %s\n", name, policy, zz_error_message());
  CU_ASSERT_EQUAL_FATAL(st, ZZ_OK);
  CU_ASSERT_EQUAL(r.prompts_exact, r.prompts);
  CU_ASSERT_EQUAL(r.prompts_wrong, 0);
  CU_ASSERT(r.first_err <= 1e-4);
  CU_ASSERT_EQUAL(r.last_checked, r.prompts);
  CU_ASSERT(r.last_err <= 1e-4);
  if (r.prompts_exact != r.prompts || r.first_err > 1e-4 || r.last_err > 1e-4)
    fprintf(stderr, "\n%s '%s': %d/%d prompts exact, logits rel err first %.3g last %.3g\n", name, policy,
            r.prompts_exact, r.prompts, r.first_err, r.last_err);
  zz_device_destroy(dev);
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
  zz_weights_dummy(&w, ZZ_DTYPE_F32, a, NULL);
  zz_weights_dummy(&w, ZZ_DTYPE_F32, b, NULL);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  double m = 0, v = 0;
  for (int i = 0; i < 6400; i++) m += a[i];
  m /= 6400;
  for (int i = 0; i < 6400; i++) v += (a[i] - m) * (a[i] - m);
  v = sqrt(v / 6400);
  CU_ASSERT(fabs(m) < 0.002);
  CU_ASSERT(v > 0.015 && v < 0.025);
  zz_weight_spec ln = {
      .name = "model.decoder.layers.0.final_layer_norm.weight", .ndim = 1, .shape = {64}, .init = ZZ_INIT_NORM_GAIN};
  zz_weights_dummy(&ln, ZZ_DTYPE_F32, a, NULL);
  CU_ASSERT(a[0] > 0.8f && a[0] < 1.2f && a[0] != a[1]);
}

/* Dummy weights are a function of (name, index) alone: any pool gives the same
 * bytes (ranges cross several tasks and end mid-task), f16 is the f32 values
 * rounded, a weight is not a shifted copy of another, and the stream is pinned:
 * the values the FlexGen-style comparisons and any run on another device use. */
static void test_dummy_weights_counter(void) {
  enum { N = 3 * 65536 + 123 };
  zz_weight_spec w = {.name = "model.decoder.layers.7.self_attn.q_proj.weight", .ndim = 2, .shape = {3, 65536 + 41}};
  zz_weight_spec w2 = w;
  snprintf(w2.name, sizeof w2.name, "model.decoder.layers.7.self_attn.k_proj.weight");
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
  uint16_t *h = malloc(N * sizeof *h), *h3 = malloc(N * sizeof *h3);
  CU_ASSERT_FATAL(a && b && c && h && h3);
  zz_pool *p2 = NULL, *p3 = NULL;
  CU_ASSERT_FATAL(zz_pool_create(2, &p2) == 0 && zz_pool_create(3, &p3) == 0);
  zz_weights_dummy(&w, ZZ_DTYPE_F32, a, NULL);
  zz_weights_dummy(&w, ZZ_DTYPE_F32, b, p2);
  zz_weights_dummy(&w, ZZ_DTYPE_F32, c, p3);
  CU_ASSERT_EQUAL(memcmp(a, b, N * sizeof *a), 0);
  CU_ASSERT_EQUAL(memcmp(a, c, N * sizeof *a), 0);
  zz_weights_dummy(&w, ZZ_DTYPE_F16, h, NULL);
  zz_weights_dummy(&w, ZZ_DTYPE_F16, h3, p3);
  CU_ASSERT_EQUAL(memcmp(h, h3, N * sizeof *h), 0);
  zz_convert(ZZ_DTYPE_F32, a, ZZ_DTYPE_F16, h3, N);
  CU_ASSERT_EQUAL(memcmp(h, h3, N * sizeof *h), 0);
  /* another name: no run of 64 equal values anywhere within the first 2^16 offsets */
  zz_weights_dummy(&w2, ZZ_DTYPE_F32, b, p2);
  int shifted = 0;
  for (int off = -65536; off <= 65536 && !shifted; off++) {
    int i = off < 0 ? -off : 0, j = off < 0 ? 0 : off;
    shifted = i + 64 <= N && j + 64 <= N && memcmp(a + i, b + j, 64 * sizeof *a) == 0;
  }
  CU_ASSERT_FALSE(shifted);
  /* pinned: a change of the stream changes every --dummy result; say so when it does */
  static const uint32_t pinned[4] = {ZZ_DUMMY_PIN0, ZZ_DUMMY_PIN1, ZZ_DUMMY_PIN2, ZZ_DUMMY_PIN3};
  const int64_t at[4] = {0, 1, 65536, N - 1};
  for (int k = 0; k < 4; k++) {
    uint32_t bits;
    memcpy(&bits, &a[at[k]], sizeof bits);
    if (bits != pinned[k]) printf("\ndummy element %lld: 0x%08xu, pinned 0x%08xu\n", (long long)at[k], bits, pinned[k]);
    CU_ASSERT_EQUAL(bits, pinned[k]);
  }
  zz_pool_destroy(p2);
  zz_pool_destroy(p3);
  free(a), free(b), free(c), free(h), free(h3);
}

/* An impossible device capacity is refused before anything is allocated. */
static void test_capacity_refused(void) {
  zz_config c;
  zz_model m;
  zz_device *dev;
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_config_preset("opt-125m", &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_create_cpu(64 << 20, 2, 2, &dev) == ZZ_OK);
  zz_policy pol;
  zz_policy_default(&pol);
  zz_shape shape = {.prompt_len = 128, .gen_len = 8};
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
  CU_add_test(s, "dummy weights: counter-based, any pool, pinned", test_dummy_weights_counter);
  CU_add_test(s, "golden pre-LN, one batch of 4", test_golden_preln_one_batch);
  CU_add_test(s, "golden pre-LN, 4 batches of 1 (zig-zag)", test_golden_preln_zigzag);
  CU_add_test(s, "golden pre-LN, batches of 3 + 1", test_golden_preln_uneven);
  CU_add_test(s, "golden post-LN + project_in/out, sharded", test_golden_postln_one_batch);
  CU_add_test(s, "golden post-LN, 2 batches of 2", test_golden_postln_zigzag);
  CU_add_test(s, "golden post-LN, offloaded over three tiers", test_golden_postln_offloaded);
  CU_add_test(s, "golden pre-LN, offloaded, serial", test_golden_preln_offloaded);
  CU_add_test(s, "over-capacity policy refused", test_capacity_refused);
}
