/*
 * isa_emu_cufilter.c — an LD_PRELOAD shim for scripts/isa_emu.sh (--cu-suite,
 * --cu-test): a CUnit program's CU_basic_run_tests runs only the suite named by
 * ZZ_CU_SUITE, or only the test ZZ_CU_TEST of it. zigzag's test programs run
 * every suite and read the failure counts after, so one suite or test in its
 * place keeps their exit status meaningful while an emulated CPU runs them at
 * a few million instructions a second. Without ZZ_CU_SUITE it runs them all.
 */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
CU_ErrorCode CU_basic_run_tests(void) {
  const char *suite = getenv("ZZ_CU_SUITE"), *test = getenv("ZZ_CU_TEST");
  if (!suite || !*suite) {
    CU_ErrorCode (*real)(void) = (CU_ErrorCode(*)(void))dlsym(RTLD_NEXT, "CU_basic_run_tests");
    return real();
  }
  CU_pSuite s = CU_get_suite(suite);
  if (!s) {
    fprintf(stderr, "isa_emu: no CUnit suite named '%s'\n", suite);
    exit(2);
  }
  if (!test || !*test) return CU_basic_run_suite(s);
  CU_pTest t = CU_get_test(s, test);
  if (!t) {
    fprintf(stderr, "isa_emu: no test named '%s' in CUnit suite '%s'\n", test, suite);
    exit(2);
  }
  return CU_basic_run_test(s, t);
}
