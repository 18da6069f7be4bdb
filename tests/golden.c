/*
 * golden.c — runs a fixture model's golden prompts (golden.json, made by Hugging
 * Face transformers) through the engine on a given device and policy and
 * compares: greedy tokens step by step, and the first- and last-step logits as
 * max |a - ref| / max |ref| per row. With logit_tol > 0 (a device computing in
 * f16), a step whose recorded top-1 margin is below twice the logit error that
 * tolerance allows (2 · logit_tol · max |first-step logit|) may pick the other
 * token; it is counted apart and reported, not hidden and not counted as wrong. Shared by the CPU and GPU test programs.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

typedef struct zz_capture {
  int64_t n, steps, vocab;
  float *logits; /* [n, steps, vocab] */
} zz_capture;

static void zz_capture_cb(void *ctx, int64_t seq, int step, const float *lg, int64_t vocab) {
  zz_capture *c = ctx;
  if (seq < c->n && step < c->steps)
    memcpy(c->logits + (seq * c->steps + step) * vocab, lg, (size_t)vocab * sizeof *lg);
}

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

static double zz_row_max(json_t *ref) {
  double mx = 0;
  for (size_t j = 0; j < json_array_size(ref); j++) mx = fmax(mx, fabs(json_real_value(json_array_get(ref, j))));
  return mx;
}

zz_status zz_golden_run(const char *name, zz_device *dev, const char *policy, double logit_tol, zz_golden_report *out) {
  char dir[4096], path[4200], tmp[4096];
  snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, name);
  snprintf(path, sizeof path, "%s/golden.json", dir);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s: %s", path, jerr.text);
  json_t *jids = json_object_get(root, "input_ids"), *want = json_object_get(root, "greedy_tokens");
  json_t *margins = json_object_get(root, "margins");
  json_t *first = json_object_get(root, "first_step_logits"), *last = json_object_get(root, "last_step_logits");
  int64_t n = (int64_t)json_array_size(jids), vocab = json_integer_value(json_object_get(root, "vocab_size"));
  int max_new = (int)json_integer_value(json_object_get(root, "max_new_tokens"));
  int32_t **ids = calloc((size_t)n, sizeof *ids);
  int64_t *lens = calloc((size_t)n, sizeof *lens), s = 0;
  for (int64_t i = 0; i < n; i++) {
    json_t *row = json_array_get(jids, (size_t)i);
    lens[i] = (int64_t)json_array_size(row);
    ids[i] = malloc((size_t)lens[i] * sizeof **ids);
    for (int64_t j = 0; j < lens[i]; j++) ids[i][j] = (int32_t)json_integer_value(json_array_get(row, (size_t)j));
    if (lens[i] > s) s = lens[i];
  }
  zz_config cfg;
  zz_model m = {0};
  zz_checkpoint *ck = NULL;
  zz_engine *eng = NULL;
  zz_policy pol;
  zz_result res = {0};
  zz_capture cap = {.n = n, .steps = max_new, .vocab = vocab};
  cap.logits = calloc((size_t)(n * max_new * vocab), sizeof *cap.logits);
  snprintf(tmp, sizeof tmp, "%s", zz_test_tmpdir());
  zz_tiers tiers = {.offload_dir = tmp};
  zz_shape shape = {.prompt_len = s, .gen_len = max_new};
  zz_status st;
  if (n > ZZ_GOLDEN_MAX_PROMPTS || max_new > ZZ_GOLDEN_MAX_NEW) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: %lld prompts of %d new tokens, more than the %d x %d a report holds", path,
                  (long long)n, max_new, ZZ_GOLDEN_MAX_PROMPTS, ZZ_GOLDEN_MAX_NEW);
    goto done;
  }
  ZZ_CHECK_GOTO(zz_policy_parse(policy, &pol), st, done);
  ZZ_CHECK_GOTO(zz_config_load(dir, &cfg), st, done);
  ZZ_CHECK_GOTO(zz_model_init(&cfg, &m), st, done);
  ZZ_CHECK_GOTO(zz_checkpoint_open(dir, &ck), st, done);
  ZZ_CHECK_GOTO(zz_engine_create_tiers(dev, &m, ck, &pol, &shape, &tiers, &eng), st, done);
  zz_request req = {.n = n,
                    .ids = (const int32_t *const *)ids,
                    .lens = lens,
                    .max_new_tokens = max_new,
                    .on_logits = zz_capture_cb,
                    .ctx = &cap};
  ZZ_CHECK_GOTO(zz_generate(eng, &req, &res), st, done);
  zz_golden_report r = {.prompts = (int)n};
  int32_t hf[ZZ_GOLDEN_MAX_PROMPTS * ZZ_GOLDEN_MAX_NEW], ours[ZZ_GOLDEN_MAX_PROMPTS * ZZ_GOLDEN_MAX_NEW];
  int64_t n_hf = 0;
  for (int64_t i = 0; i < n; i++) {
    json_t *w = json_array_get(want, (size_t)i), *mg = json_array_get(margins, (size_t)i);
    int64_t nw = (int64_t)json_array_size(w), j = 0;
    r.n_tokens[i] = res.n_tokens[i] < ZZ_GOLDEN_MAX_NEW ? res.n_tokens[i] : ZZ_GOLDEN_MAX_NEW;
    memcpy(r.tokens[i], res.tokens[i], (size_t)r.n_tokens[i] * sizeof(int32_t));
    for (int64_t t = 0; t < nw && t < ZZ_GOLDEN_MAX_NEW; t++, n_hf++) { /* missing tokens count as different */
      hf[n_hf] = (int32_t)json_integer_value(json_array_get(w, (size_t)t));
      ours[n_hf] = t < r.n_tokens[i] ? r.tokens[i][t] : -1;
    }
    while (j < nw && j < res.n_tokens[i] && res.tokens[i][j] == json_integer_value(json_array_get(w, (size_t)j))) j++;
    double e0 = zz_row_err(cap.logits + (i * max_new) * vocab, json_array_get(first, (size_t)i), vocab);
    if (e0 > r.first_err) r.first_err = e0;
    if (j == nw && res.n_tokens[i] == nw) {
      r.prompts_exact++;
      double e1 = zz_row_err(cap.logits + (i * max_new + nw - 1) * vocab, json_array_get(last, (size_t)i), vocab);
      if (e1 > r.last_err) r.last_err = e1;
      r.last_checked++;
    } else if (j < nw && json_real_value(json_array_get(mg, (size_t)j)) <
                             2 * logit_tol * zz_row_max(json_array_get(first, (size_t)i))) {
      r.prompts_rounding++;
      fprintf(stderr, "golden %s '%s': prompt %lld step %lld differs within rounding (margin %.4g)\n", name, policy,
              (long long)i, (long long)j, json_real_value(json_array_get(mg, (size_t)j)));
    } else {
      r.prompts_wrong++;
      fprintf(stderr, "golden %s '%s': prompt %lld differs at step %lld\n", name, policy, (long long)i, (long long)j);
    }
  }
  r.agreement = zz_token_agreement(ours, hf, n_hf);
  *out = r;
done:
  zz_result_free(&res, n);
  zz_engine_destroy(eng);
  zz_checkpoint_close(ck);
  zz_model_free(&m);
  rmdir(tmp);
  for (int64_t i = 0; i < n; i++) free(ids[i]);
  free(ids);
  free(lens);
  free(cap.logits);
  json_decref(root);
  return st;
}
