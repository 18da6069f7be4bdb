/*
 * test_runtime_jobs.c — the JSON Lines prompt reader: both prompt forms, ids,
 * blank lines, and malformed lines named by file:line; reading it again from the
 * start; a generate job's --out (never lost, never written through a link) and
 * files replaced by rename.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_runtime.h"
#include "zz_tests.h"

static void test_reader(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/p.jsonl", dir);
  const char *text =
      "{\"id\": \"a\", \"prompt\": \"Hello\"}\n\n{\"input_ids\": [2, 5, 9], \"id\": 7}\n{\"prompt\": \"x\"}\n";
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
    if (!strstr(zz_error_message(), bad[i].needle))
      fprintf(stderr, "\n'%s' lacks '%s'\n", zz_error_message(), bad[i].needle);
    zz_prompt_reader_close(r);
  }
  unlink(path);
  CU_ASSERT_EQUAL(zz_prompt_reader_open(path, &r), ZZ_ERR_IO);
  rmdir(dir);
}

/* Entries of dir other than . and .. */
static int zz_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  if (d) closedir(d);
  return n;
}

static void test_reader_rewind(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/p.jsonl", dir);
  const char *text = "{\"id\": \"a\", \"prompt\": \"Hello\"}\n{\"input_ids\": [2, 5]}\n";
  zz_test_write_file(path, text, strlen(text));
  zz_prompt_reader *r;
  zz_prompt p;
  bool got = false;
  CU_ASSERT_FATAL(zz_prompt_reader_open(path, &r) == ZZ_OK);
  for (int pass = 0; pass < 2; pass++) {
    CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
    CU_ASSERT(got && p.line == 1 && strcmp(p.id, "\"a\"") == 0);
    zz_prompt_free(&p);
    CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
    CU_ASSERT(got && p.line == 2 && p.n_ids == 2);
    zz_prompt_free(&p);
    CU_ASSERT_EQUAL(zz_prompt_reader_next(r, &p, &got), ZZ_OK);
    CU_ASSERT_FALSE(got);
    CU_ASSERT_EQUAL(zz_prompt_reader_rewind(r), ZZ_OK);
  }
  zz_prompt_reader_close(r);
  unlink(path);
  rmdir(dir);
}

static void test_file_replace(void) {
  char dir[4096], target[4200], link[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(target, sizeof target, "%s/target", dir);
  snprintf(link, sizeof link, "%s/link.json", dir);
  zz_test_write_file(target, "target\n", 7);
  CU_ASSERT_FATAL(symlink("target", link) == 0);
  CU_ASSERT_EQUAL(zz_file_replace(link, "new\n", 4), ZZ_OK);
  struct stat sb;
  CU_ASSERT(lstat(link, &sb) == 0 && S_ISREG(sb.st_mode)); /* the link itself was replaced */
  size_t len = 0;
  char *t = zz_test_read_file(target, &len);
  CU_ASSERT(t && len == 7 && memcmp(t, "target\n", 7) == 0); /* its target never written */
  free(t);
  t = zz_test_read_file(link, &len);
  CU_ASSERT(t && len == 4 && memcmp(t, "new\n", 4) == 0);
  free(t);
  CU_ASSERT_EQUAL(zz_dir_entries(dir), 2); /* no temporary left */
  unlink(link);
  unlink(target);
  rmdir(dir);
}

static void test_output_never_lost(void) {
  char dir[4096], path[4200], link[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/out.jsonl", dir);
  snprintf(link, sizeof link, "%s/link.jsonl", dir);
  zz_test_write_file(path, "old\n", 4);
  zz_output o;
  zz_resume_set *done = NULL;
  /* a link is refused, with or without --resume */
  CU_ASSERT_FATAL(symlink("out.jsonl", link) == 0);
  for (int resume = 0; resume < 2; resume++) {
    CU_ASSERT_EQUAL(zz_output_open(&o, link, resume, &done), ZZ_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "symbolic link"));
  }
  unlink(link);
  /* a new job that writes but never commits (an error, a kill) leaves the old file */
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o, path, false, &done), ZZ_OK);
  CU_ASSERT_EQUAL_FATAL(zz_output_begin(&o, "{\"zigzag_job\": 1}"), ZZ_OK);
  fputs("{\"id\": 1, \"output_ids\": [5]}\n", o.f);
  fflush(o.f);
  zz_output_close(&o);
  zz_resume_free(done);
  size_t len = 0;
  char *t = zz_test_read_file(path, &len);
  CU_ASSERT(t && len == 4 && memcmp(t, "old\n", 4) == 0);
  free(t);
  CU_ASSERT_EQUAL(zz_dir_entries(dir), 1);
  /* at its first commit the new file and its record take the old one's place */
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o, path, false, &done), ZZ_OK);
  CU_ASSERT_EQUAL_FATAL(zz_output_begin(&o, "{\"zigzag_job\": 1}"), ZZ_OK);
  fputs("{\"id\": 1, \"output_ids\": [5]}\n", o.f);
  CU_ASSERT_EQUAL(zz_output_commit(&o), ZZ_OK);
  zz_output_close(&o);
  zz_resume_free(done);
  t = zz_test_read_file(path, &len);
  CU_ASSERT(t && len == strlen("{\"id\": 1, \"output_ids\": [5]}\n"));
  free(t);
  char rec[4300];
  zz_output_record_path(path, rec, sizeof rec);
  t = zz_test_read_file(rec, &len);
  CU_ASSERT(t && strstr(t, "zigzag_job"));
  free(t);
  CU_ASSERT_EQUAL(zz_dir_entries(dir), 2);
  /* --resume reads its ids; a job refused before it began leaves a file it created no trace */
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o, path, true, &done), ZZ_OK);
  CU_ASSERT_EQUAL(zz_resume_count(done), 1);
  CU_ASSERT(zz_resume_has(done, "1"));
  zz_output_close(&o);
  zz_resume_free(done);
  unlink(rec);
  unlink(path);
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o, path, false, &done), ZZ_OK);
  CU_ASSERT_EQUAL(access(path, F_OK), 0);
  zz_output_close(&o);
  zz_resume_free(done);
  CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
  rmdir(dir);
}

static void test_resume_set_values(void) {
  zz_resume_set *s = zz_resume_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  char id[32];
  bool fresh = false;
  for (int i = 0; i < 3000; i++) { /* past the first growth */
    snprintf(id, sizeof id, "%d", i);
    CU_ASSERT_EQUAL(zz_resume_put(s, id, (uint64_t)i * 7, &fresh), ZZ_OK);
    CU_ASSERT(fresh);
  }
  CU_ASSERT_EQUAL(zz_resume_put(s, "5", 1, &fresh), ZZ_OK);
  CU_ASSERT_FALSE(fresh);
  uint64_t v = 0;
  CU_ASSERT(zz_resume_get(s, "5", &v) && v == 35); /* the first value stays */
  CU_ASSERT(zz_resume_get(s, "2999", &v) && v == 2999 * 7);
  CU_ASSERT_FALSE(zz_resume_get(s, "3000", &v));
  size_t pos = 0, n = 0;
  while (zz_resume_next(s, &pos)) n++;
  CU_ASSERT_EQUAL(n, 3000);
  zz_resume_free(s);
}

/* The time left from synthetic rates (no clock read): each phase at its own rate. */
static void test_eta(void) {
  /* 1000 prompt tokens in 1 s, 100 new tokens in 10 s: 0.001 s and 0.1 s a token */
  zz_eta_in in = {.prompt_left = 5000,
                  .gen_left = 200,
                  .prompt_done = 1000,
                  .gen_done = 100,
                  .gen_asked_done = 100,
                  .prefill_s = 1,
                  .decode_s = 10,
                  .elapsed_s = 11};
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 5 + 20, 1e-9);
  /* long prompts left and short answers: the prefill rate carries it, not lines x time a line */
  in.prompt_left = 50000, in.gen_left = 10;
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 50 + 1, 1e-9);
  /* answers took half the tokens they asked (EOS): the tokens left count half */
  in.prompt_left = 0, in.gen_left = 200, in.gen_asked_done = 200;
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 10, 1e-9);
  /* a tenth of the time went outside the two phases: the estimate grows by it */
  in.gen_asked_done = 100, in.elapsed_s = 11 * 1.1;
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 20 * 1.1, 1e-9);
  /* no phase times (a pipeline): every token at the job's rate so far */
  in = (zz_eta_in){
      .prompt_left = 300, .gen_left = 100, .prompt_done = 300, .gen_done = 100, .gen_asked_done = 100, .elapsed_s = 8};
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 8, 1e-9);
  /* nothing done yet: unknown; nothing left: none */
  in.prompt_done = in.gen_done = 0;
  CU_ASSERT_EQUAL(zz_eta_seconds(&in), -1);
  in.prompt_left = in.gen_left = 0;
  CU_ASSERT_EQUAL(zz_eta_seconds(&in), 0);
  /* only prompts seen (answers of one token, no decode time): new tokens at the prefill rate */
  in = (zz_eta_in){
      .prompt_left = 10, .gen_left = 10, .prompt_done = 100, .gen_done = 0, .prefill_s = 2, .elapsed_s = 2};
  CU_ASSERT_DOUBLE_EQUAL(zz_eta_seconds(&in), 0.4, 1e-9);
}

void zz_test_jobs_register(void) {
  CU_pSuite s = CU_add_suite("jobs", NULL, NULL);
  CU_add_test(s, "prompt reader", test_reader);
  CU_add_test(s, "prompt reader: read again from the start", test_reader_rewind);
  CU_add_test(s, "a file replaced by rename: a link at its path replaced, never written through", test_file_replace);
  CU_add_test(s, "--out: a link refused, an old file whole until the new job's first commit", test_output_never_lost);
  CU_add_test(s, "ids with values (the prompts' hashes)", test_resume_set_values);
  CU_add_test(s, "the time left: prompt and new tokens each at their own rate", test_eta);
}
