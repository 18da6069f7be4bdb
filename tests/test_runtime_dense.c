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
#include <jansson.h>
#include <math.h>
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


/* Weight counts of the presets equal what transformers 5.25 reports for the
 * published shapes (sum of p.numel() on the meta device; no head is tied), and
 * each preset carries its family's flags and window. */
static void test_dense_presets(void) {
  static const struct {
    const char *name, *type;
    int64_t params, head_dim, window;
  } want[] = {
      {"mistral-7b", "mistral", 7241732096, 128, 4096}, {"Qwen/Qwen2.5-7B", "qwen2", 7615616512, 128, 0},
      {"qwen2.5-72b", "qwen2", 72706203648, 128, 0},    {"qwen3-32b", "qwen3", 32762123264, 128, 0},
      {"phi-3-mini", "phi3", 3821079552, 96, 2047},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    zz_config c;
    zz_model m;
    CU_ASSERT_FATAL(zz_config_preset(want[i].name, &c) == ZZ_OK);
    CU_ASSERT_STRING_EQUAL(c.model_type, want[i].type);
    CU_ASSERT_EQUAL(c.head_dim, want[i].head_dim);
    CU_ASSERT_EQUAL(c.window, want[i].window);
    CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
    int64_t n = zz_model_numel(&m);
    if (n != want[i].params)
      fprintf(stderr, "\n%s: %lld weights, transformers %lld\n", want[i].name, (long long)n, (long long)want[i].params);
    CU_ASSERT_EQUAL(n, want[i].params);
    CU_ASSERT_EQUAL(m.layers[1].cache.window, want[i].window);
    zz_model_free(&m);
  }
}

#define ZZ_DN_BASE(type)                                                                                               \
  "{\"model_type\": \"" type "\", \"vocab_size\": 256, \"hidden_size\": 64, \"intermediate_size\": 96, "               \
  "\"num_hidden_layers\": 2, \"num_attention_heads\": 4"

/* What a family's config.json may ask for that is not implemented is refused by
 * name when the file is read, before any weight is. */
static void test_dense_refusals(void) {
  static const char *const good[] = {
      ZZ_DN_BASE("qwen2") ", \"use_sliding_window\": false, \"sliding_window\": 4096, \"max_window_layers\": 1}",
      ZZ_DN_BASE("qwen2") ", \"layer_types\": [\"full_attention\", \"full_attention\"], \"sliding_window\": null}",
      ZZ_DN_BASE("mistral") ", \"sliding_window\": null}",
      ZZ_DN_BASE("qwen3") "}",
      ZZ_DN_BASE("phi3") ", \"rope_scaling\": null, \"rope_theta\": 10000.0, \"sliding_window\": 2047}",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CU_ASSERT(zz_test_config_gives(good[i], ZZ_OK, NULL));
  }
  static const struct {
    const char *json;
    zz_status st;
    const char *needle;
  } bad[] = {
      {ZZ_DN_BASE("qwen2") ", \"use_sliding_window\": true, \"sliding_window\": 8, "
                           "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
       ZZ_ERR_UNSUPPORTED, "full_attention layer 1 after sliding layer 0 is not supported"},
      {ZZ_DN_BASE("qwen2") ", \"layer_types\": [\"full_attention\", \"chunked_attention\"]}", ZZ_ERR_UNSUPPORTED,
       "layer_types[1] \"chunked_attention\" is not supported"},
      {ZZ_DN_BASE("qwen2") ", \"layer_types\": [\"full_attention\"]}", ZZ_ERR_FORMAT,
       "\"layer_types\" must list num_hidden_layers (2) types"},
      {ZZ_DN_BASE("qwen3") ", \"layer_types\": [\"full_attention\", \"sliding_attention\"]}", ZZ_ERR_FORMAT,
       "layer_types lists sliding_attention layers but the sliding window is off"},
      {ZZ_DN_BASE("qwen2") ", \"use_sliding_window\": true, \"sliding_window\": 0}", ZZ_ERR_FORMAT,
       "\"sliding_window\" = 0 must be an integer"},
      {ZZ_DN_BASE("qwen3") ", \"attention_bias\": true}", ZZ_ERR_UNSUPPORTED, "attention_bias"},
      {ZZ_DN_BASE("mistral") ", \"hidden_act\": \"gelu\"}", ZZ_ERR_UNSUPPORTED, "hidden_act \"gelu\""},
      /* Phi-3's longrope needs one short and one long factor per rotary pair (16 / 2) */
      {ZZ_DN_BASE("phi3") ", \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [1], \"short_factor\": [1]}}",
       ZZ_ERR_FORMAT, "longrope's \"short_factor\" must list 8 numbers"},
      {ZZ_DN_BASE("phi3") ", \"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 10000.0}}",
       ZZ_ERR_FORMAT, "longrope's \"short_factor\" must list 8 numbers"},
      {ZZ_DN_BASE("phi3") ", \"rope_scaling\": {\"type\": \"su\", \"long_factor\": [1], \"short_factor\": [1]}}",
       ZZ_ERR_FORMAT, "longrope's \"short_factor\" must list 8 numbers"},
      {ZZ_DN_BASE("phi3") ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0, "
                          "\"partial_rotary_factor\": 0.1}}",
       ZZ_ERR_UNSUPPORTED, "partial_rotary_factor 0.1 turns 1 of head_dim 16 dims: want an even number >= 2"},
      /* the other families: transformers' apply_rotary_pos_emb turns whole heads only */
      {ZZ_DN_BASE("mistral") ", \"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 10000.0}}",
       ZZ_ERR_UNSUPPORTED, "rope_type \"longrope\" is not supported (default, linear, llama3)"},
      {ZZ_DN_BASE("qwen2") ", \"partial_rotary_factor\": 0.5}", ZZ_ERR_UNSUPPORTED,
       "partial_rotary_factor 0.5 is not supported"},
      {ZZ_DN_BASE("phi3") ", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 2.0}}", ZZ_ERR_UNSUPPORTED,
       "rope_type \"yarn\" is not supported (default, linear, llama3, longrope)"},
      {ZZ_DN_BASE("llama") ", \"sliding_window\": 4096}", ZZ_ERR_UNSUPPORTED,
       "sliding_window is not supported by model_type \"llama\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT(zz_test_config_gives(bad[i].json, bad[i].st, bad[i].needle));
  }
}


/* zz_model_locate's search order, each variable over the next: HF_HUB_CACHE,
 * HF_HOME/hub, ~/.cache/huggingface/hub; refs/main names the snapshot; a preset
 * spelled as on the hub needs no cache; anything missing is named. */
static void test_hub_cache(void) {
  static const char *const vars[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"};
  char *saved[5];
  for (int i = 0; i < 5; i++) {
    const char *v = getenv(vars[i]);
    saved[i] = v ? strdup(v) : NULL;
    unsetenv(vars[i]);
  }
  char root[1024], path[4600], dir[8192], want[4700];
  snprintf(root, sizeof root, "%s", zz_test_tmpdir());
  /* the same snapshot under three homes: <root>/a (a hub cache itself), <root>/b/hub, <root>/c/.cache/huggingface/hub */
  const char *const hubs[] = {"a", "b/hub", "c/.cache/huggingface/hub"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "mkdir -p %s/%s/models--Org--m/refs %s/%s/models--Org--m/snapshots/c%d", root, hubs[i],
             root, hubs[i], i);
    CU_ASSERT_FATAL(system(path) == 0);
    snprintf(path, sizeof path, "%s/%s/models--Org--m/refs/main", root, hubs[i]);
    char commit[8];
    snprintf(commit, sizeof commit, "c%d\n", i);
    CU_ASSERT_FATAL(zz_test_write_file(path, commit, strlen(commit)) == 0);
  }
  snprintf(path, sizeof path, "%s/c", root);
  setenv("HOME", path, 1);
  CU_ASSERT_EQUAL(zz_model_locate("Org/m", dir, sizeof dir), ZZ_OK);
  snprintf(want, sizeof want, "%s/c/.cache/huggingface/hub/models--Org--m/snapshots/c2", root);
  CU_ASSERT_STRING_EQUAL(dir, want);
  snprintf(path, sizeof path, "%s/b", root);
  setenv("HF_HOME", path, 1);
  CU_ASSERT_EQUAL(zz_model_locate("Org/m", dir, sizeof dir), ZZ_OK);
  snprintf(want, sizeof want, "%s/b/hub/models--Org--m/snapshots/c1", root);
  CU_ASSERT_STRING_EQUAL(dir, want);
  snprintf(path, sizeof path, "%s/a", root);
  setenv("HF_HUB_CACHE", path, 1);
  CU_ASSERT_EQUAL(zz_model_locate("Org/m", dir, sizeof dir), ZZ_OK);
  snprintf(want, sizeof want, "%s/a/models--Org--m/snapshots/c0", root);
  CU_ASSERT_STRING_EQUAL(dir, want);
  /* not cached: a preset as it is; else refused naming where it looked */
  CU_ASSERT_EQUAL(zz_model_locate("Qwen/Qwen2.5-72B", dir, sizeof dir), ZZ_OK);
  CU_ASSERT_STRING_EQUAL(dir, "Qwen/Qwen2.5-72B");
  CU_ASSERT_EQUAL(zz_model_locate("opt-125m", dir, sizeof dir), ZZ_OK);
  CU_ASSERT_EQUAL(zz_model_locate("Org/absent", dir, sizeof dir), ZZ_ERR_IO);
  snprintf(want, sizeof want, "%s/a/models--Org--absent/refs/main", root);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), want));
  snprintf(path, sizeof path, "%s/a/models--Org--m/refs/main", root);
  CU_ASSERT_FATAL(zz_test_write_file(path, "gone", 4) == 0);
  CU_ASSERT_EQUAL(zz_model_locate("Org/m", dir, sizeof dir), ZZ_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "names commit \"gone\""));
  /* a directory is read as it is, even if it looks like org/name */
  CU_ASSERT_EQUAL(zz_model_locate(root, dir, sizeof dir), ZZ_OK);
  CU_ASSERT_STRING_EQUAL(dir, root);
  snprintf(path, sizeof path, "rm -rf %s", root);
  CU_ASSERT(system(path) == 0);
  for (int i = 0; i < 5; i++) {
    if (saved[i]) setenv(vars[i], saved[i], 1);
    else
      unsetenv(vars[i]);
    free(saved[i]);
  }
}


void zz_check_perplexity_hf(const char *fixture) {
  char dir[4096], path[4200], tmp[4096];
  snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, fixture);
  snprintf(path, sizeof path, "%s/perplexity.json", dir);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  CU_ASSERT_FATAL(root != NULL);
  json_t *jids = json_object_get(root, "ids");
  int64_t n = (int64_t)json_array_size(jids), w = json_integer_value(json_object_get(root, "window"));
  double want = json_real_value(json_object_get(root, "perplexity"));
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck = NULL;
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
  CU_ASSERT_FATAL(zz_config_load(dir, &cfg) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&cfg, &m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck) == ZZ_OK);
  static const char *const pols[] = {"gbs=4 num_gb=1", "gbs=2 num_gb=2 w=0,100 c=0,100 a=100,0 cpu_attn=1",
                                     "gbs=1 num_gb=4 w=25,50 c=0,0 a=0,100"};
  for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
    zz_policy pol;
    zz_engine *eng = NULL;
    zz_ppl r = {0};
    snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
    zz_tiers tiers = {.offload_dir = tmp};
    zz_shape shape = {.prompt_len = 1, .gen_len = w};
    CU_ASSERT_FATAL(zz_policy_parse(pols[p], &pol) == ZZ_OK);
    CU_ASSERT_FATAL(zz_engine_create_tiers(dev, &m, ck, &pol, &shape, &tiers, &eng) == ZZ_OK);
    CU_ASSERT_FATAL(zz_perplexity(eng, ids, n, &r) == ZZ_OK);
    fprintf(stderr, "\n  %s [%s]: perplexity %.6f, transformers %.6f", fixture, pols[p], r.ppl, want);
    CU_ASSERT_EQUAL(r.tokens, n);
    CU_ASSERT(fabs(r.ppl - want) <= 1e-5 * want);
    zz_ppl_free(&r);
    zz_engine_destroy(eng);
    rmdir(tmp);
  }
  zz_checkpoint_close(ck);
  zz_model_free(&m);
  zz_device_destroy(dev);
  free(ids);
  json_decref(root);
}

/* Phi-3's longrope over 12 of a head's 16 dims (make_dense_fixtures.py):
 * tiny-phi3-longrope keeps every sequence below its original 64 positions (short
 * factors, cos and sin scaled by sqrt(1 + ln 2 / ln 64)), tiny-phi3-longrope-long
 * has an original of 2 (long factors in every forward, sqrt(1 + ln 32 / ln 2)),
 * greedy tokens exact under the cuttings and offloading, and perplexity equal to
 * transformers'. tiny-phi3-longrope-cross has an original of 12, which its
 * 10-token prompt crosses while generating: transformers (goldens of each prompt
 * alone) then drops its cache and recomputes the whole sequence with the long
 * set (Phi3's prepare_inputs_for_generation), which zigzag refuses by name. */
static void test_golden_longrope(void) {
  static const char *const fx[] = {"tiny-phi3-longrope", "tiny-phi3-longrope-long", "tiny-phi3-longrope-cross"};
  static const float af[] = {1.0801234f, 2.4494897f, 1.2936992f}, orig[] = {64, 2, 12};
  static const char *const pols[] = {"gbs=4 num_gb=1", "gbs=1 num_gb=4", "gbs=3 num_gb=2",
                                     "gbs=2 num_gb=2 w=0,100 c=0,100 a=100,0 cpu_attn=1",
                                     "gbs=2 num_gb=2 w=30,30 c=30,30 a=30,30 overlap=0"};
  for (int f = 0; f < 3; f++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, fx[f]);
    zz_config c;
    CU_ASSERT_FATAL(zz_config_load(dir, &c) == ZZ_OK);
    CU_ASSERT(c.rope.type == ZZ_ROPE_LONGROPE && c.rope.rot_dims == 12);
    CU_ASSERT(fabsf(c.rope.attn_factor - af[f]) < 1e-6f);
    CU_ASSERT(c.rope.original_max_pos == orig[f]);
    for (size_t p = 0; f < 2 && p < sizeof pols / sizeof pols[0]; p++) zz_check_golden(fx[f], pols[p]);
  }
  /* the crossing: transformers (its golden each prompt alone) drops the cache at
   * position 12 and recomputes the sequence with the long set; refused by name */
  zz_device *dev = NULL;
  zz_golden_report r;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 1, 1, &dev) == ZZ_OK);
  CU_ASSERT(zz_golden_run("tiny-phi3-longrope-cross", dev, "gbs=4 num_gb=1", 1e-4, &r) == ZZ_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "prompt 1: 10 tokens + 8 new would cross longrope's "
                                                    "original_max_position_embeddings 12"));
  zz_device_destroy(dev);
  zz_check_perplexity_hf("tiny-phi3-longrope");
}

/* zigzag's perplexity of tiny-mistral (make_dense_fixtures.py's perplexity.json:
 * the golden prompts' 72 tokens in windows of 20 after BOS, each window longer
 * than the sliding window of 5) equals transformers', on the device and with CPU
 * attention beside a cache on the CPU tier. */
static void test_perplexity_hf(void) { zz_check_perplexity_hf("tiny-mistral"); }

void zz_test_dense_register(void) {
  CU_pSuite s = CU_add_suite("dense", NULL, NULL);
  CU_add_test(s, "golden qwen2 (both forms), mistral, qwen3, phi3, three cuttings", test_golden_dense);
  CU_add_test(s, "mistral's window changes the tokens", test_window_matters);
  CU_add_test(s, "phi3 longrope and partial rotary (golden, perplexity)", test_golden_longrope);
  CU_add_test(s, "config.json of each family read to its flags", test_dense_configs);
  CU_add_test(s, "presets: transformers' parameter counts, flags, windows", test_dense_presets);
  CU_add_test(s, "what is not implemented is refused by name", test_dense_refusals);
  CU_add_test(s, "--model org/name found in the Hugging Face cache", test_hub_cache);
  CU_add_test(s, "perplexity = transformers' (tiny-mistral, windows longer than its sliding window)",
              test_perplexity_hf);
}
