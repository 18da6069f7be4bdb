/* zz_tests.h — suite registration functions and helpers shared by the test files. */
#ifndef ZZ_TESTS_H
#define ZZ_TESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void zz_test_kernels_register(void);
void zz_test_loader_register(void);
void zz_test_model_register(void);
void zz_test_tokenizer_register(void);
void zz_test_sampler_register(void);
void zz_test_jobs_register(void);
void zz_test_offload_register(void);
void zz_test_fuzz_register(void);
void zz_test_slices_register(void);
void zz_test_harden_register(void);
void zz_test_quant_register(void);
void zz_test_llama_register(void);
void zz_test_dense_register(void);
void zz_test_tokjson_register(void);
void zz_test_gemm_register(void);
void zz_test_genif_register(void); /* test_runtime_genif.c: issue #25 */
void zz_test_chat_register(void);  /* test_runtime_chat.c: issue 46 */
void zz_test_attn_register(void);
void zz_test_cli_register(void);
void zz_test_limits_register(void);
void zz_test_int8_register(void);   /* test_runtime_int8.c: --cpu-act int8 */
void zz_test_moe_register(void);    /* test_runtime_moe.c: mixture of experts, Mixtral */
void zz_test_prefix_register(void); /* test_runtime_prefix.c: a shared prompt prefix computed once */
/* A fixture's golden prompts on a CPU device under `policy`: tokens exact, logits
 * within 1e-4 relative (test_runtime_model.c). */
void zz_check_golden(const char *name, const char *policy);
/* A fixture's perplexity.json (ids, window, transformers' perplexity): zigzag's
 * perplexity of the ids in those windows within 1e-5 relative, all in memory and
 * offloaded with CPU attention (test_runtime_dense.c). */
void zz_check_perplexity_hf(const char *fixture);

/* Reads a whole file into a malloc'd NUL-terminated buffer (NULL on failure). */
char *zz_test_read_file(const char *path, size_t *len);
/* Whether ids[0..n) are the integers of the JSON array want (a json_t *). */
bool zz_test_ids_equal(const int32_t *ids, int64_t n, const void *want);
/* Writes bytes to path; 0 on success. */
int zz_test_write_file(const char *path, const void *data, size_t len);
/* A fresh empty directory under $TMPDIR (static buffer per call site: copy it). */
const char *zz_test_tmpdir(void);
/* One output of x · wᵀ (+ b) (then ReLU) in f64, the reference the linear tests bound
 * against: *acc the value, *mag the sum of the terms' magnitudes (b may be NULL). */
void zz_test_dot_f64(const float *x, const float *w, const float *b, int64_t in, int relu, double *acc, double *mag);

#include "zz_runtime.h"

/* Writes a fresh directory's config.json with `text` and loads it (zz_config_load). */
zz_status zz_test_load_config(const char *text);
/* zz_test_load_config(text) gives want, with needle in the message (NULL: any);
 * false after printing what it gave instead. */
bool zz_test_config_gives(const char *text, zz_status want, const char *needle);

/* A fixture opened as most engine tests need it: tests/fixtures/NAME's model, its
 * checkpoint (NULL unless `checkpoint`) and a CPU device of one thread. */
typedef struct zz_test_fixture {
  zz_model m;
  zz_checkpoint *ck;
  zz_device *dev;
} zz_test_fixture;
/* Opens it; on failure nothing is left open. */
zz_status zz_test_fixture_open(const char *name, bool checkpoint, zz_test_fixture *out);
/* Closes what zz_test_fixture_open opened. */
void zz_test_fixture_close(zz_test_fixture *f);

/* What zz_golden_run found for a fixture's golden prompts. */
#define ZZ_GOLDEN_MAX_PROMPTS 8
#define ZZ_GOLDEN_MAX_NEW 32
typedef struct zz_golden_report {
  int prompts;
  int prompts_exact;    /* every greedy token equal */
  int prompts_rounding; /* first difference at a step whose margin is within logit_tol */
  int prompts_wrong;    /* first difference at a step with a clear margin */
  double first_err;     /* max over prompts of the first step's logits error (relative) */
  double last_err;      /* same for the last step, over the exact prompts */
  int last_checked;
  /* the greedy tokens generated (a fixture has at most ZZ_GOLDEN_MAX_PROMPTS prompts
   * of at most ZZ_GOLDEN_MAX_NEW new tokens), and the share of Hugging Face's that
   * they equal position by position (zz_token_agreement) */
  int64_t n_tokens[ZZ_GOLDEN_MAX_PROMPTS];
  int32_t tokens[ZZ_GOLDEN_MAX_PROMPTS][ZZ_GOLDEN_MAX_NEW];
  double agreement;
} zz_golden_report;

/* Runs tests/fixtures/NAME's golden prompts on dev under policy (a policy line);
 * logit_tol: the relative logits error the device is held to (0: exact tokens). */
zz_status zz_golden_run(const char *name, zz_device *dev, const char *policy, double logit_tol, zz_golden_report *out);
/* zz_golden_run on a CPU device (2 threads), any tokens accepted, the run itself
 * asserted to succeed (test_runtime_llama.c) */
void zz_golden_tokens(const char *name, const char *policy, zz_golden_report *r);

#endif
