/*
 * test_runtime.c — the CUnit runner of the runtime suites (kernels, loader,
 * model against the Hugging Face golden outputs, tokenizer, sampler, policy, jobs).
 * Returns non-zero when any assertion failed.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>

#include "zz_tests.h"

/* test_runtime [SUITE [TEST]]: every suite, or the one named (e.g. "int8", to check one
 * kernel under an emulated CPU: scripts/isa_emu.sh, docs/cpu.md), or one test of
 * it by its full name (to rerun a rare failure alone, or under a sanitizer). */
int main(int argc, char **argv) {
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  zz_test_kernels_register();
  zz_test_loader_register();
  zz_test_model_register();
  zz_test_tokenizer_register();
  zz_test_sampler_register();
  zz_test_jobs_register();
  zz_test_offload_register();
  zz_test_slices_register();
  zz_test_fuzz_register();
  zz_test_harden_register();
  zz_test_quant_register();
  zz_test_llama_register();
  zz_test_dense_register();
  zz_test_tokjson_register();
  zz_test_gemm_register();
  zz_test_attn_register();
  zz_test_cli_register();
  zz_test_limits_register();
  zz_test_genif_register();
  zz_test_chat_register();
  zz_test_int8_register();
  zz_test_moe_register();
  zz_test_prefix_register();
  CU_basic_set_mode(CU_BRM_VERBOSE);
  if (argc > 1) {
    CU_pSuite only = CU_get_suite(argv[1]);
    if (!only) {
      fprintf(stderr, "test_runtime: no suite named '%s'\n", argv[1]);
      CU_cleanup_registry();
      return 2;
    }
    CU_pTest one = argc > 2 ? CU_get_test(only, argv[2]) : NULL;
    if (argc > 2 && !one) {
      fprintf(stderr, "test_runtime: suite '%s' has no test named '%s'\n", argv[1], argv[2]);
      CU_cleanup_registry();
      return 2;
    }
    if (one) CU_basic_run_test(only, one);
    else
      CU_basic_run_suite(only);
  } else {
    CU_basic_run_tests();
  }
  unsigned failures = CU_get_number_of_failures();
  unsigned asserts = CU_get_number_of_asserts();
  unsigned tests = CU_get_number_of_tests_run(), failed_tests = CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  printf("\n%u passed, %u failed (%u assertions)\n", tests - failed_tests, failed_tests, asserts);
  return failures != 0;
}
