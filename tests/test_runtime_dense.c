/*
 * test_runtime_dense.c — the dense LLaMA-like families (runtime/arch_dense.c on
 * arch_llama.c's layers) against golden outputs of Hugging Face transformers 5.25
 * (tests/fixtures/tiny-qwen2, tiny-qwen2-v4, tiny-mistral, tiny-qwen3, tiny-phi3,
 * made by make_dense_fixtures.py): q/k/v biases and a window on the last layer
 * (Qwen2, both config.json forms), a sliding window of 5 on every layer (Mistral),
 * per-head q/k norms and head_dim 24 beside hidden 64 / 4 heads (Qwen3), fused
 * qkv_proj and gate_up_proj with a window of 7 (Phi-3). Greedy tokens exactly,
 * logits within 1e-4 relative, prompts of 3 to 37 tokens in one block; the
 * policy matrix and 4-bit runs join the LLaMA tests' loops (test_runtime_llama.c).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static const char *const zz_dense_fixtures[] = {"tiny-qwen2", "tiny-qwen2-v4", "tiny-mistral", "tiny-qwen3",
                                                "tiny-phi3"};

static void test_golden_dense(void) {
  for (size_t i = 0; i < sizeof zz_dense_fixtures / sizeof zz_dense_fixtures[0]; i++) {
    zz_check_golden(zz_dense_fixtures[i], "gbs=4 num_gb=1");
    zz_check_golden(zz_dense_fixtures[i], "gbs=1 num_gb=4");
    zz_check_golden(zz_dense_fixtures[i], "gbs=3 num_gb=2");
  }
}

/* The window matters on these prompts: tiny-mistral's weights with the window
 * off (tests/fixtures/tiny-mistral-nowindow: sliding_window null) do not give
 * transformers' tokens. */
static void test_window_matters(void) {
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
  zz_golden_report r;
  CU_ASSERT_FATAL(zz_golden_run("tiny-mistral-nowindow", dev, "gbs=4 num_gb=1", 0, &r) == ZZ_OK);
  fprintf(stderr, "\n  tiny-mistral without its window: greedy agreement %.3f", r.agreement);
  CU_ASSERT(r.agreement < 0.9);
  zz_device_destroy(dev);
}

/* Each fixture's config.json reads to its family's flags; the two Qwen2 forms alike. */
static void test_dense_configs(void) {
  static const struct {
    const char *name, *type;
    bool bias, qk_norm, fused;
    int64_t head_dim, window, window_from;
  } want[] = {
      {"tiny-qwen2", "qwen2", true, false, false, 16, 6, 1},
      {"tiny-qwen2-v4", "qwen2", true, false, false, 16, 6, 1},
      {"tiny-mistral", "mistral", false, false, false, 16, 5, 0},
      {"tiny-qwen3", "qwen3", false, true, false, 24, 0, 2},
      {"tiny-phi3", "phi3", false, false, true, 16, 7, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char dir[4096];
    zz_config c;
    snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, want[i].name);
    CU_ASSERT_FATAL(zz_config_load(dir, &c) == ZZ_OK);
    CU_ASSERT_STRING_EQUAL(c.model_type, want[i].type);
    CU_ASSERT_EQUAL(c.qkv_bias, want[i].bias);
    CU_ASSERT_EQUAL(c.qk_norm, want[i].qk_norm);
    CU_ASSERT_EQUAL(c.fused_proj, want[i].fused);
    CU_ASSERT_EQUAL(c.head_dim, want[i].head_dim);
    CU_ASSERT_EQUAL(c.window, want[i].window);
    if (c.window) CU_ASSERT_EQUAL(c.window_from, want[i].window_from);
  }
}

void zz_test_dense_register(void) {
  CU_pSuite s = CU_add_suite("dense", NULL, NULL);
  CU_add_test(s, "golden qwen2 (both forms), mistral, qwen3, phi3, three cuttings", test_golden_dense);
  CU_add_test(s, "mistral's window changes the tokens", test_window_matters);
  CU_add_test(s, "config.json of each family read to its flags", test_dense_configs);
}
