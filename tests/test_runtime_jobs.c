/*
 * test_runtime_jobs.c — the JSON Lines prompt reader: both prompt forms, ids,
 * blank lines, and malformed lines named by file:line.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static void test_reader(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/p.jsonl", dir);
  const char *text = "{\"id\": \"a\", \"prompt\": \"Hello\"}\n\n{\"input_ids\": [2, 5, 9], \"id\": 7}\n{\"prompt\": \"x\"}\n";
  zz_test_write_file(path, text, strlen(text));
  zz_prompt_reader *r;
  CU_ASSERT_FATAL(zz_prompt_reader_open(path, &r) == ZZ_OK);
  zz_prompt p;
  bool got;
  CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
  CU_ASSERT(got);
  CU_ASSERT_STRING_EQUAL(p.id, "\"a\"");
  CU_ASSERT_STRING_EQUAL(p.text, "Hello");
  zz_prompt_free(&p);
  CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
  CU_ASSERT_STRING_EQUAL(p.id, "7");
  CU_ASSERT_EQUAL(p.n_ids, 3);
  CU_ASSERT_EQUAL(p.ids[2], 9);
  CU_ASSERT_EQUAL(p.line, 3);
  zz_prompt_free(&p);
  CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
  CU_ASSERT_STRING_EQUAL(p.id, "4"); /* no id: the line number */
  zz_prompt_free(&p);
  CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
  CU_ASSERT_FALSE(got);
  zz_prompt_reader_close(r);

  const struct {
    const char *line, *needle;
  } bad[] = {
      {"{\"prompt\": 5}\n", ":1: \"prompt\""},
      {"{\"prompt\": \"a\", \"input_ids\": [1]}\n", "exactly one"},
      {"{\"input_ids\": [1, -3]}\n", "input_ids[1]"},
      {"{\"input_ids\": []}\n", "non-empty"},
      {"not json\n", ":1:"},
      {"[1, 2]\n", "object"},
      {"{\"id\": [1], \"prompt\": \"a\"}\n", "\"id\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zz_test_write_file(path, bad[i].line, strlen(bad[i].line));
    CU_ASSERT_FATAL(zz_prompt_reader_open(path, &r) == ZZ_OK);
    CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), bad[i].needle));
    if (!strstr(zz_error_message(), bad[i].needle)) fprintf(stderr, "\n'%s' lacks '%s'\n", zz_error_message(), bad[i].needle);
    zz_prompt_reader_close(r);
  }
  unlink(path);
  CU_ASSERT_EQUAL(zz_prompt_reader_open(path, &r), ZZ_ERR_IO);
  rmdir(dir);
}

void zz_test_jobs_register(void) {
  CU_pSuite s = CU_add_suite("jobs", NULL, NULL);
  CU_add_test(s, "prompt reader", test_reader);
}
