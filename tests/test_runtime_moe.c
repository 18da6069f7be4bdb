/*
 * test_runtime_moe.c — the mixture of experts (runtime/moe.c, arch_mixtral.c):
 * the router's top-k and tie rule on known logits, the MoE feed-forward against a
 * dense reference in f64, the experts-touched formula, then Mixtral against the
 * golden outputs of transformers 5 (tests/fixtures/tiny-mixtral*, made by
 * make_moe_fixtures.py) under batch cuttings, the policy matrix and 4-bit, the
 * presets' sizes, and config.json refusals.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../runtime/moe_impl.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- the router */

static void test_route_order_ties(void) {
  /* row 0: a clear order; row 1: three equal logits (the lower experts win);
   * row 2: a NaN logit makes every probability NaN, all equal: the lower first */
  const float logits[3 * 5] = {0.1f, 2.0f, -1.0f, 3.0f, 0.5f, 1.0f, 2.0f, 2.0f,
                               0.0f, 2.0f, 0.0f,  1.0f, NAN,  3.0f, 2.0f};
  int32_t idx[3 * 2];
  float w[3 * 2];
  zz_cpu_moe_route(NULL, logits, 3, 5, 2, false, idx, w);
  CU_ASSERT(idx[0] == 3 && idx[1] == 1);
  CU_ASSERT(idx[2] == 1 && idx[3] == 2);
  CU_ASSERT(idx[4] == 0 && idx[5] == 1);
  /* the softmax's values: e^3 / sum and e^2 / sum */
  double s = exp(0.1) + exp(2.0) + exp(-1.0) + exp(3.0) + exp(0.5);
  CU_ASSERT(fabs(w[0] - exp(3.0) / s) < 1e-6 && fabs(w[1] - exp(2.0) / s) < 1e-6);
  zz_cpu_moe_route(NULL, logits, 1, 5, 2, true, idx, w); /* renormalised */
  CU_ASSERT(fabs(w[0] + w[1] - 1.0) < 1e-6);
  CU_ASSERT(fabs(w[0] / w[1] - exp(1.0)) < 1e-5);
  zz_cpu_moe_route(NULL, logits, 1, 5, 5, false, idx, w); /* k = experts: all, in order */
  const int32_t all[5] = {3, 1, 4, 0, 2};
  CU_ASSERT(memcmp(idx, all, sizeof all) == 0);
}

static void test_experts_touched(void) {
  CU_ASSERT_DOUBLE_EQUAL(zz_moe_experts_touched(8, 2, 1), 2.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(zz_moe_experts_touched(8, 2, 0), 0.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(zz_moe_experts_touched(8, 2, 2), 8.0 * (1 - 0.75 * 0.75), 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(zz_moe_experts_touched(128, 8, 64), 128.0 * (1 - pow(120.0 / 128.0, 64)), 1e-9);
  CU_ASSERT(zz_moe_experts_touched(128, 8, 4096) > 127.999);
  CU_ASSERT_DOUBLE_EQUAL(zz_moe_experts_touched(4, 4, 3), 4.0, 1e-12);
  /* more rows never touch fewer experts */
  for (int t = 1; t < 100; t++) CU_ASSERT(zz_moe_experts_touched(60, 4, t + 1) >= zz_moe_experts_touched(60, 4, t));
}

/* Qwen-MoE's layer choice: decoder_sparse_step and mlp_only_layers, as
 * Qwen2MoeDecoderLayer decides (not in mlp_only_layers, (i + 1) % step == 0). */
static void test_sparse_layers(void) {
  static const struct {
    const char *json;
    zz_status st;
    const char *sparse; /* layer i: '1' experts, '0' dense */
  } rows[] = {
      {"{}", ZZ_OK, "111111"},
      {"{\"decoder_sparse_step\": 2, \"mlp_only_layers\": null}", ZZ_OK, "010101"},
      {"{\"decoder_sparse_step\": 3, \"mlp_only_layers\": [5]}", ZZ_OK, "001000"},
      {"{\"mlp_only_layers\": [0, 3]}", ZZ_OK, "011011"},
      {"{\"mlp_only_layers\": [6]}", ZZ_ERR_FORMAT, NULL},
      {"{\"mlp_only_layers\": 2}", ZZ_ERR_FORMAT, NULL},
      {"{\"mlp_only_layers\": [1.5]}", ZZ_ERR_FORMAT, NULL},
      {"{\"mlp_only_layers\": [1e300]}", ZZ_ERR_FORMAT, NULL},
      {"{\"decoder_sparse_step\": 0}", ZZ_ERR_FORMAT, NULL},
      {"{\"mlp_only_layers\": [0,1,2,3,4,5,0,1,2,3,4,5,0,1,2,3,4,5,0,1,2,3,4,5,0,1,2,3,4,5,0,1,2]}", ZZ_ERR_UNSUPPORTED,
       NULL},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    json_error_t je;
    json_t *root = json_loads(rows[i].json, JSON_DECODE_INT_AS_REAL, &je); /* as zz_json_load_hf */
    CU_ASSERT_FATAL(root != NULL);
    zz_config c = {.n_layers = 6, .n_experts = 4};
    CU_ASSERT_EQUAL(zz_moe_parse_layers(root, "config.json", &c), rows[i].st);
    for (int l = 0; rows[i].sparse && l < 6; l++) CU_ASSERT_EQUAL(zz_moe_layer_sparse(&c, l), rows[i].sparse[l] == '1');
    json_decref(root);
  }
  zz_config none = {.n_layers = 6};
  CU_ASSERT_FALSE(zz_moe_layer_sparse(&none, 0)); /* no experts: every MLP dense */
}

/* ---------------------------------------------------------------- the feed-forward */

static float moe_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) / (double)(1ull << 24)) - 0.5f;
}

static void *moe_up(zz_device *dev, const float *h, int64_t n) {
  void *d = NULL;
  CU_ASSERT_FATAL(zz_device_alloc(dev, (size_t)n * sizeof(float), &d) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_upload(dev, ZZ_LANE_COMPUTE, d, h, ZZ_DTYPE_F32, n) == ZZ_OK);
  return d;
}

/* zz_moe_forward on the CPU device against each row's chosen experts computed
 * densely in f64 (the routing from the reference kernel on the same logits); the
 * experts' matrices in f32, or quantized as q (bits 0: not), the reference then
 * on their dequantized values. */
static void moe_forward_dense(zz_qfmt q, bool renorm, bool shared) {
  enum { E = 6, K = 2, H = 40, F = 36, R = 9, SF = 44 };
  zz_config c = {.hidden = H,
                 .n_experts = E,
                 .n_experts_used = K,
                 .expert_ffn = F,
                 .norm_topk = renorm,
                 .shared_ffn = shared ? SF : 0};
  static float x[R * H], wr[E * H], wg[E * F * H], wu[E * F * H], wd[E * H * F], out[R * H];
  static float sg[SF * H], su[SF * H], sd[H * SF], ss[H];
  uint64_t s = 7;
  for (int i = 0; i < R * H; i++) x[i] = 2 * moe_rand(&s);
  for (int i = 0; i < E * H; i++) wr[i] = 2 * moe_rand(&s);
  for (int i = 0; i < E * F * H; i++) wg[i] = moe_rand(&s), wu[i] = moe_rand(&s), wd[i] = moe_rand(&s);
  for (int i = 0; i < SF * H; i++) sg[i] = moe_rand(&s), su[i] = moe_rand(&s), sd[i] = moe_rand(&s);
  for (int i = 0; i < H; i++) ss[i] = moe_rand(&s);
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 1, &dev) == ZZ_OK);
  const char *const fmt[ZZ_MOE_N] = {"r%d", "g%d.*", "u%d.*", "d%d.*", "sg%d", "su%d", "sd%d", "ss%d"};
  zz_weight_spec ws[ZZ_MOE_N];
  zz_moe_specs(ws, &c, 0, fmt);
  CU_ASSERT_EQUAL(ws[ZZ_MOE_GATE].experts, E);
  CU_ASSERT_EQUAL(ws[ZZ_MOE_DOWN].shape[0], E * H);
  float *host[ZZ_MOE_N] = {wr, wg, wu, wd, sg, su, sd, ss};
  zz_tensor w[ZZ_MOE_N];
  for (int i = 0; i < ZZ_MOE_N; i++) {
    w[i] = (zz_tensor){0};
    if (!ws[i].ndim) continue;
    int64_t rows = ws[i].shape[0], len = ws[i].shape[1], n = rows * len;
    w[i] = (zz_tensor){.dtype = ZZ_DTYPE_F32,
                       .ndim = 2,
                       .shape = {rows, len},
                       .tier = ZZ_TIER_GPU,
                       .data = moe_up(dev, host[i], n),
                       .nbytes = (size_t)n * sizeof(float)};
    if (!q.bits || ws[i].precise) continue;
    size_t nb = (size_t)rows * zz_q_row_bytes(q, len);
    void *qb = malloc(nb), *d = NULL;
    zz_q_quantize(q, host[i], rows, len, qb);
    zz_q_dequantize(q, qb, rows, len, host[i]); /* the reference's values */
    CU_ASSERT_FATAL(zz_device_alloc(dev, nb, &d) == ZZ_OK);
    CU_ASSERT_FATAL(zz_device_write(dev, ZZ_LANE_COMPUTE, d, qb, nb) == ZZ_OK);
    free(qb);
    w[i].dtype = ZZ_DTYPE_Q4, w[i].q = q, w[i].data = d, w[i].nbytes = nb;
  }
  void *dx = moe_up(dev, x, R * H), *dout = moe_up(dev, x, R * H), *work = NULL;
  CU_ASSERT_FATAL(zz_device_alloc(dev, zz_moe_workspace(&c, sizeof(float), R), &work) == ZZ_OK);
  zz_status st = zz_moe_forward(dev, &c, w, dx, R, dout, work, NULL);
  if (st != ZZ_OK) fprintf(stderr, "\nmoe forward: %s\n", zz_error_message());
  CU_ASSERT_FATAL(st == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_download(dev, ZZ_LANE_COMPUTE, out, ZZ_DTYPE_F32, dout, R * H) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_sync(dev, ZZ_LANE_COMPUTE) == ZZ_OK);
  double worst = 0;
  int touched[E] = {0};
  for (int r = 0; r < R; r++) {
    float logit[E];
    for (int e = 0; e < E; e++) {
      double a = 0;
      for (int j = 0; j < H; j++) a += (double)x[r * H + j] * wr[e * H + j];
      logit[e] = (float)a;
    }
    int32_t idx[K];
    float wt[K];
    zz_cpu_moe_route(NULL, logit, 1, E, K, renorm, idx, wt);
    for (int d = 0; d < H; d++) {
      double y = 0;
      for (int j = 0; j < K; j++) {
        int e = idx[j];
        touched[e] = 1;
        double acc = 0;
        for (int f = 0; f < F; f++) {
          double g = 0, u = 0;
          for (int i = 0; i < H; i++) {
            g += (double)x[r * H + i] * wg[((size_t)e * F + f) * H + i];
            u += (double)x[r * H + i] * wu[((size_t)e * F + f) * H + i];
          }
          acc += g / (1 + exp(-g)) * u * wd[((size_t)e * H + d) * F + f];
        }
        y += wt[j] * acc;
      }
      if (shared) {
        double gate = 0, acc = 0;
        for (int i = 0; i < H; i++) gate += (double)x[r * H + i] * ss[i];
        for (int f = 0; f < SF; f++) {
          double g = 0, u = 0;
          for (int i = 0; i < H; i++)
            g += (double)x[r * H + i] * sg[f * H + i], u += (double)x[r * H + i] * su[f * H + i];
          acc += g / (1 + exp(-g)) * u * sd[d * SF + f];
        }
        y += acc / (1 + exp(-gate));
      }
      double err = fabs(y - out[r * H + d]);
      if (err > worst) worst = err;
    }
  }
  int n_touched = 0;
  for (int e = 0; e < E; e++) n_touched += touched[e];
  CU_ASSERT(n_touched >= 3); /* the case routes to several experts */
  CU_ASSERT(worst < 1e-4);
  if (worst >= 1e-4) fprintf(stderr, "\nmoe forward (%d bits): max error %.3g\n", q.bits, worst);
  zz_device_destroy(dev);
}

static void test_moe_forward_dense(void) {
  const zz_qfmt none = {0, 0}, q8 = {.bits = 8, .group = 32}, q4 = {.bits = 4, .group = 32};
  moe_forward_dense(none, true, false);
  moe_forward_dense(q8, true, false);
  moe_forward_dense(q4, true, false);
  /* Qwen2-MoE's: the k weights as the softmax gave them, a shared expert */
  moe_forward_dense(none, false, true);
  moe_forward_dense(q4, false, true);
}

/* ---------------------------------------------------------------- Mixtral */

static void test_golden_mixtral(void) {
  zz_check_golden("tiny-mixtral", "gbs=4 num_gb=1");
  zz_check_golden("tiny-mixtral", "gbs=1 num_gb=4");
  zz_check_golden("tiny-mixtral", "gbs=3 num_gb=2");
  zz_check_golden("tiny-mixtral-k3", "gbs=4 num_gb=1");
  zz_check_golden("tiny-mixtral-k3", "gbs=2 num_gb=2");
  zz_check_golden("tiny-qwen3-moe", "gbs=4 num_gb=1");
  zz_check_golden("tiny-qwen3-moe", "gbs=3 num_gb=2");
  zz_check_golden("tiny-qwen2-moe", "gbs=4 num_gb=1");
  zz_check_golden("tiny-qwen2-moe", "gbs=1 num_gb=4");
}

/* Qwen2-MoE's sliding window (make_moe_fixtures.py's tiny-qwen2-moe-window: 6 on
 * layers 0 and 2, transformers 5's even layers below max_window_layers 3) under
 * the cuttings and offloading; and the Qwen fixtures' perplexity equal to
 * transformers' (windows of 20 after BOS; offloaded experts load as routed). */
static void test_golden_qwen_moe_window_ppl(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tiny-qwen2-moe-window", ZZ_FIXTURES_DIR);
  zz_config c;
  CU_ASSERT_FATAL(zz_config_load(dir, &c) == ZZ_OK);
  CU_ASSERT(c.window == 6 && c.window_from == 0 && c.window_to == 3 && c.window_even);
  zz_model m;
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  int64_t want[3] = {6, 0, 6}, seen = 0;
  for (int l = 0; l < m.n_layers; l++)
    if (m.layers[l].has_cache) CU_ASSERT(m.layers[l].cache.window == want[seen++]);
  CU_ASSERT(seen == 3);
  zz_model_free(&m);
  static const char *const pols[] = {"gbs=4 num_gb=1", "gbs=1 num_gb=4", "gbs=3 num_gb=2",
                                     "gbs=2 num_gb=2 w=25,50 c=0,100 a=100,0 cpu_attn=1",
                                     "gbs=2 num_gb=2 w=0,0 c=30,30 a=30,30 overlap=0"};
  for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) zz_check_golden("tiny-qwen2-moe-window", pols[p]);
  /* the window matters: the same weights without it (tiny-qwen2-moe-nowindow, use_sliding_window false) */
  zz_device *dev = NULL;
  zz_golden_report r;
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 1, 1, &dev) == ZZ_OK);
  CU_ASSERT_FATAL(zz_golden_run("tiny-qwen2-moe-nowindow", dev, "gbs=4 num_gb=1", 0, &r) == ZZ_OK);
  fprintf(stderr, "\n  tiny-qwen2-moe-window without its window: greedy agreement %.3f", r.agreement);
  CU_ASSERT(r.agreement < 0.9);
  zz_device_destroy(dev);
  zz_check_perplexity_hf("tiny-qwen2-moe");
  zz_check_perplexity_hf("tiny-qwen3-moe");
}

/* The LLaMA fixtures' policy matrix: every tier for weights (the experts' stacked
 * matrices), cache and activations, CPU attention, no overlap. */
static void test_golden_mixtral_policies(void) {
  static const char *const pols[] = {
      "gbs=2 num_gb=2 w=30,30 c=30,30 a=30,30 cpu_attn=1",
      "gbs=1 num_gb=4 w=0,40 c=0,50 a=50,0 cpu_attn=1 overlap=0",
      "gbs=2 num_gb=2 w=0,0 c=0,0 a=0,0",
      "gbs=4 num_gb=1 w=100,0 c=0,100 a=100,0 cpu_attn=1",
  };
  for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) zz_check_golden("tiny-mixtral", pols[i]);
  zz_check_golden("tiny-mixtral-k3", pols[1]);
  zz_check_golden("tiny-qwen3-moe", pols[0]);
  zz_check_golden("tiny-qwen3-moe", pols[3]);
  zz_check_golden("tiny-qwen2-moe", pols[1]);
  zz_check_golden("tiny-qwen2-moe", pols[2]);
}

/* 4-bit experts and cache (docs/compression.md): the all-in-memory compressed run
 * is the reference every offloading policy must give exactly, on each MoE family
 * (Qwen2-MoE's shared expert and its gate compressed too). 8-bit weights move
 * these random models' routing more than LLaMA's attention (router logits from
 * weights of std 0.3, gaps down to 4e-4 in probability; the router itself stays
 * f32): agreement with transformers measured for cw=8/32 cc=8/32 0.438 on
 * tiny-mixtral (1.000 for the cache alone, cc=8/32), held to 0.4; 0.844 on
 * tiny-qwen3-moe, held to 0.8; 0.312 on tiny-qwen2-moe (its shared expert's
 * sigmoid gate compressed too), held to 0.25. 4-bit has no bound against
 * transformers on random models (docs/compression.md): exactness across the
 * policies is the check. */
static void test_golden_moe_compressed(void) {
  static const struct {
    const char *fixture, *extra;
    double agree_min;
  } rows[] = {{"tiny-mixtral", "cw=1 cc=1", 0},   {"tiny-mixtral", "cw=8/32 cc=8/32", 0.4},
              {"tiny-qwen3-moe", "cw=1 cc=1", 0}, {"tiny-qwen3-moe", "cw=8/32 cc=8/32", 0.8},
              {"tiny-qwen2-moe", "cw=1 cc=1", 0}, {"tiny-qwen2-moe", "cw=8/32 cc=8/32", 0.25}};
  static const char *const pols[] = {
      "gbs=2 num_gb=2 w=0,100 c=0,100 a=100,0 cpu_attn=1",
      "gbs=1 num_gb=4 w=30,30 c=0,0 a=0,100",
  };
  for (size_t x = 0; x < sizeof rows / sizeof rows[0]; x++) {
    char line[256];
    zz_golden_report base, got;
    snprintf(line, sizeof line, "gbs=4 num_gb=1 w=100,0 c=100,0 a=100,0 %s", rows[x].extra);
    zz_golden_tokens(rows[x].fixture, line, &base);
    fprintf(stderr, "\n  %s [%s]: greedy agreement with transformers %.3f", rows[x].fixture, rows[x].extra,
            base.agreement);
    CU_ASSERT(base.agreement >= rows[x].agree_min);
    for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
      snprintf(line, sizeof line, "%s %s", pols[p], rows[x].extra);
      zz_golden_tokens(rows[x].fixture, line, &got);
      int same = got.prompts == base.prompts;
      for (int i = 0; same && i < base.prompts; i++)
        same = got.n_tokens[i] == base.n_tokens[i] &&
               memcmp(got.tokens[i], base.tokens[i], (size_t)base.n_tokens[i] * sizeof(int32_t)) == 0;
      CU_ASSERT(same);
    }
  }
}

/* bf16 weight matrices (--cpu-dtype bf16) with the experts resident and offloaded
 * (bf16 bytes cross as they are): the same tokens either way, and agreement with
 * transformers' f32 tokens held as LLaMA's (test_runtime_gemm.c: 0.75). */
static void test_mixtral_bf16(void) {
  zz_golden_report r[2];
  const char *pols[2] = {"gbs=4 num_gb=1", "gbs=2 num_gb=2 w=0,50 c=100,0 a=100,0"};
  for (int i = 0; i < 2; i++) {
    zz_device *dev = NULL;
    CU_ASSERT_FATAL(zz_device_create_cpu(0, 2, 2, &dev) == ZZ_OK);
    CU_ASSERT_FATAL(zz_device_set_weight_dtype(dev, ZZ_DTYPE_BF16) == ZZ_OK);
    CU_ASSERT_FATAL(zz_golden_run("tiny-mixtral", dev, pols[i], 0.08, &r[i]) == ZZ_OK);
    zz_device_destroy(dev);
  }
  fprintf(stderr, "\n  tiny-mixtral bf16: token agreement %.3f", r[0].agreement);
  CU_ASSERT(r[0].agreement >= 0.75);
  for (int i = 0; i < r[0].prompts; i++)
    CU_ASSERT(r[0].n_tokens[i] == r[1].n_tokens[i] &&
              memcmp(r[0].tokens[i], r[1].tokens[i], (size_t)r[0].n_tokens[i] * sizeof(int32_t)) == 0);
}

/* Offloaded experts load as routed (zz_weights_load_expert): a decode step of one
 * sequence moves each offloaded layer's other weights whole but only the k experts
 * its row chose of each MoE layer's E, and of those only the ones not homed on the
 * GPU (--percent splits a layer's experts by count: zz_policy_expert_split). With
 * every weight on the CPU tier the bytes to the device are the non-expert weights
 * plus k/E of the experts' (plus the step's few index bytes); with w=25,50 (2 of 8
 * experts on the GPU, 4 on the CPU, 2 on disk) at most the offloaded plain weights
 * plus k of the experts. Tokens stay exact (the golden policies above). */
static void experts_loaded_as_routed(const char *policy) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tiny-mixtral", ZZ_FIXTURES_DIR);
  zz_config c;
  zz_model m;
  zz_checkpoint *ck = NULL;
  zz_device *dev = NULL;
  CU_ASSERT_FATAL(zz_config_load(dir, &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck) == ZZ_OK);
  CU_ASSERT_FATAL(zz_device_create_cpu(0, 1, 1, &dev) == ZZ_OK);
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &pol) == ZZ_OK);
  zz_shape shape = {.prompt_len = 5, .gen_len = 4};
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_engine_create(dev, &m, ck, &pol, &shape, &eng) == ZZ_OK);
  const zz_memplan *plan = zz_engine_plan(eng);
  double plain = 0, experts = 0, on_gpu = 0; /* offloaded plain weights, all experts, experts homed on the GPU */
  for (int l = 0; l < m.n_layers; l++)
    for (int k = 0; k < m.layers[l].n_weights; k++) {
      const zz_weight_spec *w = &m.layers[l].weights[k];
      double b = (double)zz_weight_bytes(w, ZZ_DTYPE_F32);
      if (w->experts) {
        experts += b;
        on_gpu += b * (double)plan->expert_split[l].n[ZZ_TIER_GPU] / 8;
      } else if (!zz_memplan_layer_resident(plan, l) && plan->weight_tier[l] != ZZ_TIER_GPU)
        plain += b;
    }
  const int32_t p0[] = {1, 40, 41, 90, 7};
  const int32_t *prompts[] = {p0};
  int64_t lens[] = {5};
  CU_ASSERT_FATAL(zz_engine_begin_block(eng, 0, 1, lens) == ZZ_OK);
  CU_ASSERT_FATAL(zz_engine_step(eng, 0, 0, &(zz_step_io){.prompts = prompts}) == ZZ_OK);
  int32_t tok = 9;
  CU_ASSERT_FATAL(zz_engine_step(eng, 0, 1, &(zz_step_io){.tokens = &tok}) == ZZ_OK);
  uint64_t before = dev->bytes_to_device;
  CU_ASSERT_FATAL(zz_engine_step(eng, 0, 2, &(zz_step_io){.tokens = &tok}) == ZZ_OK);
  double moved = (double)(dev->bytes_to_device - before), routed = experts * 2 / 8;
  fprintf(stderr, "\n  decode step, %s: %.0f bytes moved, %.0f offloaded plain + %.0f routed experts", policy, moved,
          plain, routed);
  /* the routed experts homed on the GPU are read where they are */
  CU_ASSERT(moved >= plain + (on_gpu == 0 ? routed : 0) && moved <= plain + routed + 4096);
  zz_engine_destroy(eng);
  zz_device_destroy(dev);
  zz_checkpoint_close(ck);
  zz_model_free(&m);
}

static void test_experts_loaded_as_routed(void) {
  experts_loaded_as_routed("gbs=1 num_gb=1 w=0,100 c=100,0 a=100,0");
  experts_loaded_as_routed("gbs=1 num_gb=1 w=25,50 c=100,0 a=100,0");
}

/* --percent splits each MoE layer's experts by count across the three tiers:
 * the tokens stay transformers' (experts homed on the GPU copied into the slot,
 * the others loaded as routed from the CPU and from disk). */
static void test_golden_expert_split(void) {
  zz_check_golden("tiny-mixtral", "gbs=2 num_gb=2 w=25,50 c=100,0 a=100,0");
  zz_check_golden("tiny-mixtral", "gbs=4 num_gb=1 w=60,0 c=0,100 a=100,0 cpu_attn=1");
  zz_check_golden("tiny-qwen2-moe", "gbs=1 num_gb=4 w=40,30 c=100,0 a=100,0");
  zz_check_golden("tiny-qwen3-moe", "gbs=2 num_gb=2 w=10,80 c=50,50 a=100,0");
}

/* Weight counts of the presets equal what transformers 5.25 reports for
 * MixtralForCausalLM and Qwen3MoeForCausalLM of these shapes (parameters' numel
 * summed on the meta device). */
static void test_moe_presets(void) {
  static const struct {
    const char *name, *type;
    int64_t experts, used, params;
  } want[] = {{"mixtral-8x7b", "mixtral", 8, 2, 46702792704},
              {"mistralai/Mixtral-8x22B-v0.1", "mixtral", 8, 2, 140620634112},
              {"Qwen/Qwen3-30B-A3B", "qwen3_moe", 128, 8, 30532122624},
              {"qwen3-235b-a22b", "qwen3_moe", 128, 8, 235093634560}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    zz_config c;
    zz_model m;
    CU_ASSERT_FATAL(zz_config_preset(want[i].name, &c) == ZZ_OK);
    CU_ASSERT_STRING_EQUAL(c.model_type, want[i].type);
    CU_ASSERT_EQUAL(c.n_experts, want[i].experts);
    CU_ASSERT_EQUAL(c.n_experts_used, want[i].used);
    CU_ASSERT(c.norm_topk);
    CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
    CU_ASSERT_EQUAL(zz_model_numel(&m), want[i].params);
    if (zz_model_numel(&m) != want[i].params)
      fprintf(stderr, "\n%s: %lld\n", want[i].name, (long long)zz_model_numel(&m));
    zz_model_free(&m);
  }
}

/* fixture's config.json with `edit` applied (a key set to a JSON value, or
 * removed when value is NULL), loaded from a temporary directory. */
static zz_status moe_config_of(const char *fixture, const char *key, const char *value, zz_config *out) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s/config.json", ZZ_FIXTURES_DIR, fixture);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  CU_ASSERT_FATAL(root != NULL);
  if (value) json_object_set_new(root, key, json_loads(value, JSON_DECODE_ANY, &je));
  else
    json_object_del(root, key);
  const char *dir = zz_test_tmpdir();
  char dirc[512];
  snprintf(dirc, sizeof dirc, "%s", dir);
  snprintf(path, sizeof path, "%s/config.json", dirc);
  CU_ASSERT_FATAL(json_dump_file(root, path, 0) == 0);
  json_decref(root);
  return zz_config_load(dirc, out);
}

static zz_status moe_config_with(const char *key, const char *value, zz_config *out) {
  return moe_config_of("tiny-mixtral", key, value, out);
}

static void test_mixtral_config(void) {
  zz_config c, v4;
  CU_ASSERT_FATAL(moe_config_with("router_jitter_noise", "0.1", &c) == ZZ_OK); /* training only */
  CU_ASSERT_EQUAL(c.n_experts, 8);
  CU_ASSERT_EQUAL(c.n_experts_used, 2);
  CU_ASSERT_EQUAL(c.expert_ffn, 48);
  CU_ASSERT(c.norm_topk);
  CU_ASSERT_EQUAL(c.rope.theta, 1e6f);
  /* transformers 4's form: rope_theta beside no rope_parameters */
  CU_ASSERT_FATAL(moe_config_with("rope_parameters", NULL, &v4) == ZZ_OK);
  CU_ASSERT_EQUAL(v4.rope.theta, 1e6f); /* MixtralConfig's default, not LLaMA's */
  static const struct {
    const char *key, *value, *needle;
  } bad[] = {
      {"sliding_window", "4096", "sliding_window is not supported"},
      {"num_experts_per_tok", "9", "num_experts_per_tok"},
      {"num_local_experts", "0", "num_local_experts"},
      {"hidden_act", "\"gelu\"", "hidden_act \"gelu\" is not supported"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zz_status st = moe_config_with(bad[i].key, bad[i].value, &c);
    CU_ASSERT(st == ZZ_ERR_UNSUPPORTED || st == ZZ_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), bad[i].needle));
    if (!strstr(zz_error_message(), bad[i].needle)) fprintf(stderr, "\n%s: %s\n", bad[i].key, zz_error_message());
  }
}

/* Qwen's MoE configs as transformers 5 writes them and 4's forms; what they ask
 * for that is not implemented refused by name, before any weight is read. */
static void test_qwen_moe_config(void) {
  zz_config c;
  CU_ASSERT_FATAL(moe_config_of("tiny-qwen3-moe", "router_aux_loss_coef", "0.01", &c) == ZZ_OK);
  CU_ASSERT_STRING_EQUAL(c.model_type, "qwen3_moe");
  CU_ASSERT_EQUAL(c.n_experts, 8); /* transformers 5: num_local_experts */
  CU_ASSERT_EQUAL(c.n_experts_used, 3);
  CU_ASSERT_EQUAL(c.expert_ffn, 24);
  CU_ASSERT_EQUAL(c.ffn, 48);
  CU_ASSERT_EQUAL(c.head_dim, 12);
  CU_ASSERT(c.qk_norm && c.norm_topk && !c.qkv_bias);
  CU_ASSERT_EQUAL(c.shared_ffn, 0);
  CU_ASSERT(zz_moe_layer_sparse(&c, 0) && !zz_moe_layer_sparse(&c, 1) && zz_moe_layer_sparse(&c, 2));
  /* transformers 4's key */
  CU_ASSERT_FATAL(moe_config_of("tiny-qwen3-moe", "num_local_experts", NULL, &c) == ZZ_OK);
  CU_ASSERT_EQUAL(c.n_experts, 128); /* Qwen3MoeConfig's default */
  CU_ASSERT_FATAL(moe_config_of("tiny-qwen3-moe", "num_experts", "16", &c) == ZZ_OK);
  CU_ASSERT_EQUAL(c.n_experts, 16);
  CU_ASSERT_FATAL(moe_config_of("tiny-qwen2-moe", "layer_types", NULL, &c) == ZZ_OK);
  CU_ASSERT_STRING_EQUAL(c.model_type, "qwen2_moe");
  CU_ASSERT_EQUAL(c.n_experts, 6);
  CU_ASSERT_EQUAL(c.n_experts_used, 2);
  CU_ASSERT_EQUAL(c.expert_ffn, 20);
  CU_ASSERT_EQUAL(c.shared_ffn, 40);
  CU_ASSERT(c.qkv_bias && !c.norm_topk && !c.qk_norm);
  CU_ASSERT_EQUAL(c.window, 0);
  CU_ASSERT(!zz_moe_layer_sparse(&c, 2) && zz_moe_layer_sparse(&c, 1));
  /* Qwen3-MoE: use_sliding_window with sliding_window null is no window (transformers: None) */
  CU_ASSERT_FATAL(moe_config_of("tiny-qwen3-moe", "use_sliding_window", "true", &c) == ZZ_OK);
  CU_ASSERT_EQUAL(c.window, 0);
  static const struct {
    const char *fixture, *key, *value, *needle;
  } bad[] = {
      /* transformers 5 writes sliding_window 0 when use_sliding_window is false: no window to turn on */
      {"tiny-qwen2-moe", "use_sliding_window", "true", "\"sliding_window\" = 0 must be an integer in [1, "},
      /* layer_types must be the pattern transformers computes from use_sliding_window, max_window_layers */
      {"tiny-qwen2-moe", "layer_types", "[\"full_attention\", \"sliding_attention\", \"full_attention\"]",
       "layer_types[1] \"sliding_attention\" is not supported for qwen2_moe (sliding_attention exactly on the even"},
      {"tiny-qwen3-moe", "layer_types", "[\"full_attention\", \"sliding_attention\", \"full_attention\"]",
       "layer_types[1] \"sliding_attention\" is not supported for qwen3_moe"},
      {"tiny-qwen2-moe", "layer_types", "\"full_attention\"", "\"layer_types\" must list num_hidden_layers (3)"},
      {"tiny-qwen3-moe", "attention_bias", "true", "attention_bias"},
      {"tiny-qwen3-moe", "num_experts_per_tok", "9", "num_experts_per_tok"},
      {"tiny-qwen3-moe", "mlp_only_layers", "[3]", "mlp_only_layers[0] is not a layer"},
      {"tiny-qwen2-moe", "shared_expert_intermediate_size", "0", "shared_expert_intermediate_size"},
      {"tiny-qwen2-moe", "decoder_sparse_step", "0", "decoder_sparse_step"},
      {"tiny-qwen2-moe", "hidden_act", "\"gelu\"", "hidden_act \"gelu\" is not supported"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zz_status st = moe_config_of(bad[i].fixture, bad[i].key, bad[i].value, &c);
    CU_ASSERT(st == ZZ_ERR_UNSUPPORTED || st == ZZ_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), bad[i].needle));
    if (!strstr(zz_error_message(), bad[i].needle)) fprintf(stderr, "\n%s: %s\n", bad[i].key, zz_error_message());
  }
}

void zz_test_moe_register(void) {
  CU_pSuite s = CU_add_suite("moe", NULL, NULL);
  CU_add_test(s, "router: order, ties, NaN, renormalised", test_route_order_ties);
  CU_add_test(s, "experts touched per block", test_experts_touched);
  CU_add_test(s, "which layers have experts (qwen)", test_sparse_layers);
  CU_add_test(s, "feed-forward vs dense f64 (4/8-bit, shared expert)", test_moe_forward_dense);
  CU_add_test(s, "mixtral golden", test_golden_mixtral);
  CU_add_test(s, "mixtral golden, offloaded", test_golden_mixtral_policies);
  CU_add_test(s, "qwen2_moe sliding window golden; qwen moe perplexity", test_golden_qwen_moe_window_ppl);
  CU_add_test(s, "mixtral, qwen3_moe, qwen2_moe 4- and 8-bit", test_golden_moe_compressed);
  CU_add_test(s, "mixtral bf16 weights", test_mixtral_bf16);
  CU_add_test(s, "mixtral: offloaded experts load as routed", test_experts_loaded_as_routed);
  CU_add_test(s, "experts split by count across the tiers (golden)", test_golden_expert_split);
  CU_add_test(s, "mixtral and qwen3_moe presets", test_moe_presets);
  CU_add_test(s, "mixtral config.json", test_mixtral_config);
  CU_add_test(s, "qwen2_moe and qwen3_moe config.json", test_qwen_moe_config);
}
