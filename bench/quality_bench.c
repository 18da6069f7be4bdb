/*
 * quality_bench.c — what compression and top-k sparsity cost in quality, on a
 * trained model (FlexGen §5 / Table 6 style), every row measured in one run:
 *   - perplexity of a held-out text and of a second text (teacher forced, windows
 *     of W tokens from BOS: zz_perplexity), and the share of tokens whose top-1
 *     prediction equals the uncompressed run's;
 *   - greedy agreement: from 8 tokens of the held-out text every 32 tokens, 64
 *     greedy tokens; the share of (prompt, step) pairs equal to the
 *     uncompressed run's tokens.
 * A suffix word act=int8 runs that row with the CPU device's 4/8-bit linears on
 * int8 activations (--cpu-act int8: where zz_cpu_act_int8_applies, 4-bit at every n);
 * a suffix word dtype=bf16 keeps that row's weight matrices in bf16 (--cpu-dtype bf16).
 * Output: a Markdown table on stdout. Never part of ctest.
 *
 *   quality_bench MODEL_DIR HELDOUT.txt OTHER.txt [POLICY_SUFFIX ...]
 *   e.g. quality_bench tests/fixtures/trained-opt tests/fixtures/trained-opt/heldout.txt \
 *            tests/fixtures/training_text.txt "cw=1" "cc=1" "cw=1 cc=1" "cw=1 cc=1 sparsity=0.1"
 *        quality_bench ... "cw=1" "cw=1 act=int8" "cw=8/64" "cw=8/64 act=int8" "dtype=bf16"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

#define ZZ_QB_PROMPT 8
#define ZZ_QB_GEN 64
#define ZZ_QB_STRIDE 32 /* greedy prompts start every 32 tokens of the held-out text */

typedef struct zz_qb_row {
  double ppl[2];
  int32_t *argmax[2];
  int32_t *greedy; /* [prompts * ZZ_QB_GEN] */
} zz_qb_row;

static zz_status zz_qb_run(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const char *policy,
                           int32_t *const ids[2], const int64_t n[2], int64_t w, zz_qb_row *row) {
  zz_policy pol;
  ZZ_CHECK(zz_policy_parse(policy, &pol));
  zz_engine *e = NULL;
  zz_shape shape = {.prompt_len = 1, .gen_len = w};
  ZZ_CHECK(zz_engine_create(dev, m, ck, &pol, &shape, &e));
  zz_status st = ZZ_OK;
  for (int t = 0; t < 2 && st == ZZ_OK; t++) {
    zz_ppl r;
    if ((st = zz_perplexity(e, ids[t], n[t], &r)) != ZZ_OK) break;
    row->ppl[t] = r.ppl;
    row->argmax[t] = r.argmax;
  }
  zz_engine_destroy(e);
  if (st != ZZ_OK) return st;
  /* greedy: prompts are BOS + 8 tokens of the held-out text, every 32 tokens */
  int64_t np = (n[0] - ZZ_QB_PROMPT) / ZZ_QB_STRIDE, bls = (int64_t)pol.gpu_batch_size * pol.num_gpu_batches;
  shape = (zz_shape){.prompt_len = ZZ_QB_PROMPT + 1, .gen_len = ZZ_QB_GEN};
  ZZ_CHECK(zz_engine_create(dev, m, ck, &pol, &shape, &e));
  row->greedy = calloc((size_t)(np * ZZ_QB_GEN), sizeof(int32_t));
  int32_t *prompts = malloc((size_t)np * (ZZ_QB_PROMPT + 1) * sizeof(int32_t));
  const int32_t **pp = malloc((size_t)np * sizeof *pp);
  int64_t *lens = malloc((size_t)np * sizeof *lens);
  for (int64_t i = 0; i < np; i++) {
    prompts[i * (ZZ_QB_PROMPT + 1)] = m->cfg.bos;
    memcpy(prompts + i * (ZZ_QB_PROMPT + 1) + 1, ids[0] + i * ZZ_QB_STRIDE, ZZ_QB_PROMPT * sizeof(int32_t));
    pp[i] = prompts + i * (ZZ_QB_PROMPT + 1);
    lens[i] = ZZ_QB_PROMPT + 1;
  }
  for (int64_t first = 0; first < np && st == ZZ_OK; first += bls) {
    int64_t cnt = np - first < bls ? np - first : bls;
    zz_request req = {
        .n = cnt, .ids = pp + first, .lens = lens + first, .max_new_tokens = ZZ_QB_GEN, .ignore_eos = true};
    zz_result res;
    if ((st = zz_generate(e, &req, &res)) != ZZ_OK) break;
    for (int64_t i = 0; i < cnt; i++)
      memcpy(row->greedy + (first + i) * ZZ_QB_GEN, res.tokens[i], (size_t)res.n_tokens[i] * sizeof(int32_t));
    zz_result_free(&res, cnt);
  }
  free(prompts);
  free(pp);
  free(lens);
  zz_engine_destroy(e);
  return st;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: quality_bench MODEL_DIR HELDOUT.txt OTHER.txt [POLICY_SUFFIX ...]\n");
    return 2;
  }
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck = NULL;
  zz_tokenizer *tok = NULL;
  zz_device *dev = NULL;
  if (zz_config_load(argv[1], &cfg) || zz_model_init(&cfg, &m) || zz_checkpoint_open(argv[1], &ck) ||
      zz_tokenizer_load(argv[1], &tok) || zz_device_create_cpu(0, 0, 0, &dev)) {
    fprintf(stderr, "quality_bench: %s\n", zz_error_message());
    return 1;
  }
  int32_t *ids[2];
  int64_t n[2];
  for (int t = 0; t < 2; t++)
    if (zz_tokenizer_encode_file(tok, argv[2 + t], &ids[t], &n[t]) != ZZ_OK) {
      fprintf(stderr, "quality_bench: %s\n", zz_error_message());
      return 1;
    }
  int64_t w = cfg.max_pos - 1, np = (n[0] - ZZ_QB_PROMPT) / ZZ_QB_STRIDE;
  const char *base_policy = "gbs=8 num_gb=1 w=100,0 c=100,0 a=100,0";
  int rows = argc - 3; /* the uncompressed run, then each suffix */
  zz_qb_row *r = calloc((size_t)rows, sizeof *r);
  printf(
      "| policy | held-out ppl | other ppl | top-1 = uncompressed (held-out, teacher forced) | greedy 64 steps = uncompressed |\n");
  printf("|---|---|---|---|---|\n");
  for (int i = 0; i < rows; i++) {
    char policy[512];
    snprintf(policy, sizeof policy, "%s %s", base_policy, i ? argv[3 + i] : "");
    char *act = strstr(policy, "act=int8"); /* not a policy word: the device's option */
    if (act) memset(act, ' ', strlen("act=int8"));
    char *bf16 = strstr(policy, "dtype=bf16"); /* likewise */
    if (bf16) memset(bf16, ' ', strlen("dtype=bf16"));
    zz_status st = zz_device_set_cpu_act(dev, act ? ZZ_CPU_ACT_INT8 : ZZ_CPU_ACT_F32);
    if (st == ZZ_OK) st = zz_device_set_weight_dtype(dev, bf16 ? ZZ_DTYPE_BF16 : ZZ_DTYPE_F32);
    if (st == ZZ_OK) st = zz_qb_run(dev, &m, ck, policy, ids, n, w, &r[i]);
    if (st != ZZ_OK) {
      fprintf(stderr, "quality_bench: %s: %s\n", policy, zz_error_message());
      return 1;
    }
    printf("| %s | %.2f | %.2f | %.4f | %.4f |\n", i ? argv[3 + i] : "none", r[i].ppl[0], r[i].ppl[1],
           zz_token_agreement(r[i].argmax[0], r[0].argmax[0], n[0]),
           zz_token_agreement(r[i].greedy, r[0].greedy, np * ZZ_QB_GEN));
    fflush(stdout);
  }
  fprintf(stderr, "held-out %s: %lld tokens, windows of %lld; other %s: %lld tokens; %lld greedy prompts\n", argv[2],
          (long long)n[0], (long long)w, argv[3], (long long)n[1], (long long)np);
  return 0;
}
