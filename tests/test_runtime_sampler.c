/*
 * test_runtime_sampler.c — greedy, temperature, top-k and top-p sampling, the
 * per-sequence generator, and the policy line.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static void test_greedy_and_seeded(void) {
  float lg[6] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f, 1.9f};
  char scratch[6 * 8];
  zz_rng r;
  zz_rng_seed(&r, 7, 0);
  zz_sampling greedy = {0};
  CU_ASSERT_EQUAL(zz_sample(lg, 6, &greedy, &r, scratch), 1); /* first maximum */
  zz_sampling s = {.temperature = 1.0f, .top_p = 1.0f, .seed = 7};
  zz_rng a, b;
  zz_rng_seed(&a, 7, 3);
  zz_rng_seed(&b, 7, 3);
  int same = 1;
  for (int i = 0; i < 50; i++) same &= zz_sample(lg, 6, &s, &a, scratch) == zz_sample(lg, 6, &s, &b, scratch);
  CU_ASSERT(same);
  zz_rng_seed(&b, 7, 4); /* another stream draws differently */
  int differ = 0;
  zz_rng_seed(&a, 7, 3);
  for (int i = 0; i < 50; i++) differ |= zz_rng_next(&a) != zz_rng_next(&b);
  CU_ASSERT(differ);
}

static void test_distribution(void) {
  /* p = softmax(log(0.5, 0.3, 0.2)) at T = 1: frequencies within 2% over 20000 draws */
  float lg[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
  char scratch[3 * 8];
  zz_rng r;
  zz_rng_seed(&r, 11, 0);
  zz_sampling s = {.temperature = 1.0f, .top_p = 1.0f};
  int cnt[3] = {0};
  for (int i = 0; i < 20000; i++) cnt[zz_sample(lg, 3, &s, &r, scratch)]++;
  CU_ASSERT(fabs(cnt[0] / 20000.0 - 0.5) < 0.02);
  CU_ASSERT(fabs(cnt[1] / 20000.0 - 0.3) < 0.02);
  CU_ASSERT(fabs(cnt[2] / 20000.0 - 0.2) < 0.02);
  /* top-k 2 never picks the third; top-p 0.6 keeps {0, 1}; top-p 0.4 keeps {0} */
  s.top_k = 2;
  int third = 0;
  for (int i = 0; i < 5000; i++) third += zz_sample(lg, 3, &s, &r, scratch) == 2;
  CU_ASSERT_EQUAL(third, 0);
  s.top_k = 0;
  s.top_p = 0.6f;
  third = 0;
  int second = 0;
  for (int i = 0; i < 5000; i++) {
    int t = zz_sample(lg, 3, &s, &r, scratch);
    third += t == 2;
    second += t == 1;
  }
  CU_ASSERT_EQUAL(third, 0);
  CU_ASSERT(second > 1000);
  s.top_p = 0.4f;
  int other = 0;
  for (int i = 0; i < 1000; i++) other += zz_sample(lg, 3, &s, &r, scratch) != 0;
  CU_ASSERT_EQUAL(other, 0);
  /* a low temperature sharpens toward the argmax */
  s.top_p = 1.0f;
  s.temperature = 0.05f;
  other = 0;
  for (int i = 0; i < 1000; i++) other += zz_sample(lg, 3, &s, &r, scratch) != 0;
  CU_ASSERT(other < 5);
}

static void test_policy_line(void) {
  zz_policy p, q;
  zz_policy_default(&p);
  p.gpu_batch_size = 32;
  p.num_gpu_batches = 3;
  p.w_gpu = 20;
  p.w_cpu = 80;
  p.c_gpu = 0;
  p.c_cpu = 100;
  p.cpu_attention = true;
  char buf[256];
  zz_policy_str(&p, buf, sizeof buf);
  CU_ASSERT_EQUAL_FATAL(zz_policy_parse(buf, &q), ZZ_OK);
  /* field by field: memcmp would compare the struct's padding, which clang
   * leaves as it finds it */
  char again[256];
  CU_ASSERT_STRING_EQUAL(zz_policy_str(&q, again, sizeof again), buf);
  CU_ASSERT(q.gpu_batch_size == 32 && q.num_gpu_batches == 3 && q.w_gpu == 20 && q.w_cpu == 80 && q.c_gpu == 0 &&
            q.c_cpu == 100 && q.cpu_attention && q.overlap && q.attn_sparsity == 1);
  CU_ASSERT_EQUAL(zz_policy_parse("gbs=0", &q), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_policy_parse("w=80,30", &q), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "weights"));
  CU_ASSERT_EQUAL(zz_policy_parse("bogus=1", &q), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_policy_parse("gbs", &q), ZZ_ERR_INVALID_ARG);
  size_t b;
  CU_ASSERT_EQUAL(zz_parse_bytes("16G", &b), ZZ_OK);
  CU_ASSERT_EQUAL(b, (size_t)16 << 30);
  CU_ASSERT_EQUAL(zz_parse_bytes("1.5GiB", &b), ZZ_OK);
  CU_ASSERT_EQUAL(b, (size_t)3 << 29);
  CU_ASSERT_EQUAL(zz_parse_bytes("12Q", &b), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_parse_bytes("-1G", &b), ZZ_ERR_INVALID_ARG);
}

void zz_test_sampler_register(void) {
  CU_pSuite s = CU_add_suite("sampler and policy", NULL, NULL);
  CU_add_test(s, "greedy, seeded streams", test_greedy_and_seeded);
  CU_add_test(s, "temperature, top-k, top-p frequencies", test_distribution);
  CU_add_test(s, "policy line round trip and errors", test_policy_line);
}
