/*
 * test_runtime_cli.c — the command line of issue #21: top-k sparsity read and
 * printed exactly (the kept count of the policy line equals the run's), --layers
 * read without stepping past its text, options that do not apply to the command
 * and bad ZZ_* environment values refused naming them.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- sparsity */

static void test_keep_count_exact(void) {
  static const struct {
    double keep;
    int64_t visible, want;
  } c[] = {
      {0.1, 10, 1},
      {0.1, 11, 2},
      {0.1, 17, 2},
      {0.1, 20, 2},
      {0.3, 10, 3},
      {0.7, 10, 7},
      {0.001, 10, 1},
      {1, 10, 10},
      {0.5, 1, 1},
      {0.999999999, 1000000000, 999999999},
      {0.123456789, 1000000000000LL, 123456789000LL},
      {0.000000001, 3, 1},
      {0.6, 5, 3},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int64_t got = zz_attn_keep_count(c[i].keep, c[i].visible);
    if (got != c[i].want)
      fprintf(stderr, "keep %.9g of %lld: %lld, want %lld\n", c[i].keep, (long long)c[i].visible, (long long)got,
              (long long)c[i].want);
    CU_ASSERT_EQUAL(got, c[i].want);
  }
  CU_ASSERT_EQUAL(zz_attn_keep_units(0.1), 100000000);
  CU_ASSERT_EQUAL(zz_attn_keep_units(1), ZZ_KEEP_UNITS);
}

/* --attn-sparsity 0.1 as the run sees it: one key of 10, as the printed line says */
static void test_sparsity_option_exact(void) {
  const char *args[] = {"zigzag", "bench", "--attn-sparsity", "0.1"};
  zz_opts o;
  zz_opts_defaults(&o);
  CU_ASSERT_EQUAL_FATAL(zz_opts_parse(4, (char **)args, &o), 0);
  zz_policy p = o.pol, q; /* the policy the parse read */
  CU_ASSERT_EQUAL(zz_attn_keep_count(p.attn_sparsity, 10), 1);
  char line[256];
  zz_policy_str(&p, line, sizeof line);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "sparsity=0.1"));
  CU_ASSERT_EQUAL_FATAL(zz_policy_parse(line, &q), ZZ_OK);
  for (int64_t n = 1; n <= 300; n++)
    CU_ASSERT_EQUAL(zz_attn_keep_count(q.attn_sparsity, n), zz_attn_keep_count(p.attn_sparsity, n));
}

/* every decimal of up to 9 places prints as itself: the line fed back keeps as many keys */
static void test_sparsity_line_round_trip(void) {
  static const char *const in[] = {"0.1234567", "0.123456789", "0.000000001", "0.05", "1", "0.999999999", "2.5e-1"};
  static const char *const out[] = {"sparsity=0.1234567", "sparsity=0.123456789", "sparsity=0.000000001",
                                    "sparsity=0.05",      "sparsity=1",           "sparsity=0.999999999",
                                    "sparsity=0.25"};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    char text[64], line[256];
    zz_policy p, q;
    snprintf(text, sizeof text, "sparsity=%s", in[i]);
    CU_ASSERT_EQUAL_FATAL(zz_policy_parse(text, &p), ZZ_OK);
    zz_policy_str(&p, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, out[i]));
    CU_ASSERT_EQUAL_FATAL(zz_policy_parse(line, &q), ZZ_OK);
    CU_ASSERT_EQUAL(zz_attn_keep_units(q.attn_sparsity), zz_attn_keep_units(p.attn_sparsity));
    CU_ASSERT_EQUAL(zz_attn_keep_count(q.attn_sparsity, 81), zz_attn_keep_count(p.attn_sparsity, 81));
  }
  /* 0.1234567 of 81 keys: 10 (9.99999...); "%g" printed 0.123457, which keeps 11 */
  zz_policy p;
  CU_ASSERT_EQUAL(zz_policy_parse("sparsity=0.1234567", &p), ZZ_OK);
  CU_ASSERT_EQUAL(zz_attn_keep_count(p.attn_sparsity, 81), 10);
}

static void test_sparsity_refused(void) {
  static const char *const bad[] = {"0", "0.0", "1.5",  "-0.1", "0.1234567891", "1e-10",  "nan",   "inf",
                                    "",  ".",   "0.1x", " 0.1", "1e",           "0x1p-3", "1e400", "0.5e"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double x = -1;
    zz_status st = zz_sparsity_parse(bad[i], "--attn-sparsity ", &x);
    if (st == ZZ_OK) fprintf(stderr, "sparsity '%s' accepted as %.17g\n", bad[i], x);
    CU_ASSERT_EQUAL(st, ZZ_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "--attn-sparsity"));
  }
  double x;
  CU_ASSERT_EQUAL(zz_sparsity_parse("1.0000000001", "", &x), ZZ_ERR_INVALID_ARG); /* above 1, not "too many places" */
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "want a decimal in (0, 1]"));
  CU_ASSERT_EQUAL(zz_sparsity_parse("0.100000000000000000000000", "", &x), ZZ_OK); /* zeros change nothing */
  CU_ASSERT_EQUAL(x, 0.1);
  CU_ASSERT_EQUAL(zz_sparsity_parse("000.5", "", &x), ZZ_OK);
  CU_ASSERT_EQUAL(x, 0.5);
  /* a policy built in code must be a whole number of billionths too: its line is the run */
  zz_policy p;
  zz_policy_default(&p);
  p.attn_sparsity = 1.0 / 3;
  CU_ASSERT_EQUAL(zz_policy_check(&p), ZZ_ERR_INVALID_ARG);
  p.attn_sparsity = 0.1f; /* a float's 0.100000001490116... */
  CU_ASSERT_EQUAL(zz_policy_check(&p), ZZ_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- --layers */

static void test_layers_parse(void) {
  int b[5];
  CU_ASSERT_EQUAL(zz_opts_parse_layers("1,6", 8, 3, b), ZZ_OK);
  CU_ASSERT(b[0] == 0 && b[1] == 1 && b[2] == 6 && b[3] == 8);
  CU_ASSERT_EQUAL(zz_opts_parse_layers("4", 8, 2, b), ZZ_OK);
  CU_ASSERT(b[0] == 0 && b[1] == 4 && b[2] == 8);
  CU_ASSERT_EQUAL(zz_opts_parse_layers("", 8, 1, b), ZZ_OK);
  static const struct {
    const char *text;
    int ranks;
    const char *says;
  } bad[] = {
      {"5;", 2, "';' is left over"},
      {"5;", 3, "separated by commas"},
      {"5", 3, "separated by commas; found 1"},
      {"5,", 3, "not a number"},
      {"", 2, "not a number"},
      {" 3", 2, "not a number"},
      {"+3", 2, "not a number"},
      {"3,,4", 3, "not a number"},
      {"5,4", 3, "increasing cut points"},
      {"8", 2, "increasing"},
      {"0", 2, "increasing"},
      {"99999999999999999999", 2, "increasing"},
      {"1,2,3", 3, "',3' is left over"},
      {"3", 1, "want exactly 0 cut points for 1 rank"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    /* exactly the text's bytes: a read past its end is AddressSanitizer's to see */
    size_t n = strlen(bad[i].text) + 1;
    char *t = malloc(n);
    memcpy(t, bad[i].text, n);
    zz_status st = zz_opts_parse_layers(t, 8, bad[i].ranks, b);
    CU_ASSERT_EQUAL(st, ZZ_ERR_INVALID_ARG);
    if (st != ZZ_ERR_INVALID_ARG || !strstr(zz_error_message(), bad[i].says))
      fprintf(stderr, "--layers '%s' over %d ranks: %s (want '%s')\n", bad[i].text, bad[i].ranks,
              st == ZZ_OK ? "accepted" : zz_error_message(), bad[i].says);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), bad[i].says));
    free(t);
  }
}

/* ---------------------------------------------------------------- the options table */

/* zz_opts_defaults + zz_opts_parse of args (NULL-terminated) with stderr caught in
 * said (what the user would read); the parse's code. */
static int zz_parse_said(const char *const *args, char *said, size_t len) {
  int argc = 0;
  while (args[argc]) argc++;
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  dup2(fileno(tmp), 2);
  zz_opts o;
  zz_opts_defaults(&o);
  int r = zz_opts_parse(argc, (char **)args, &o);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(said, 1, len - 1, tmp);
  said[n] = '\0';
  fclose(tmp);
  return r;
}

static void test_option_applies_to_command(void) {
  char said[1024];
  const char *gen[] = {"zigzag", "generate", "--prompts", "p", "--out", "o", "--gen-len", "5", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(gen, said, sizeof said), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "--gen-len does not apply to generate"));
  const char *before[] = {"zigzag", "--seed", "3", "bench", NULL}; /* an option before its command */
  CU_ASSERT_EQUAL(zz_parse_said(before, said, sizeof said), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "--seed does not apply to bench"));
  const char *plan[] = {"zigzag", "plan", "--attn-threads", "2", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(plan, said, sizeof said), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "--attn-threads does not apply to plan"));
  const char *fine[] = {"zigzag", "bench", "--gen-len", "5", "--prompt-len", "9", "--json", "--threads", "2", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(fine, said, sizeof said), 0);
  const char *prof[] = {"zigzag", "profile",   "--out",    "x.json", "--profile-seconds",
                        "2",      "--cpu-isa", "portable", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(prof, said, sizeof said), 0);
  const char *unknown[] = {"zigzag", "frobnicate", "--gen-len", "5", NULL}; /* main names the command */
  CU_ASSERT_EQUAL(zz_parse_said(unknown, said, sizeof said), 0);
}

static void test_pipeline_options_need_mpirun(void) {
  char said[1024];
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  static const char *const opt[][2] = {
      {"--layers", "3"}, {"--comm", "mpi"}, {"--num-inner-iterations", "2"}, {"--peer-timeout", "9"}};
  for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
    const char *args[] = {"zigzag", "generate", opt[i][0], opt[i][1], NULL};
    CU_ASSERT_EQUAL(zz_parse_said(args, said, sizeof said), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, opt[i][0]));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "started by mpirun"));
  }
  CU_ASSERT(!zz_under_mpirun());
  CU_ASSERT_EQUAL(zz_pipe_ranks(), 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1); /* as mpirun -np 3 starts each rank */
  const char *args[] = {"zigzag", "generate", "--layers", "3,5", "--comm", "mpi", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(args, said, sizeof said), 0);
  CU_ASSERT(zz_under_mpirun());
  CU_ASSERT_EQUAL(zz_pipe_ranks(), 3);
  const char *plan[] = {"zigzag", "plan", "--layers", "3", NULL}; /* still generate and bench only */
  CU_ASSERT_EQUAL(zz_parse_said(plan, said, sizeof said), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "--layers does not apply to plan"));
  unsetenv("OMPI_COMM_WORLD_SIZE");
  /* plan plans a pipeline's groups as mpirun runs them: --num-inner-iterations
   * is taken without mpirun (it was refused as an mpirun option) */
  const char *groups[] = {"zigzag", "plan", "--ranks", "2", "--num-inner-iterations", "3", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(groups, said, sizeof said), 0);
}

static void test_bad_environment_is_an_error(void) {
  static const char *const bad[][3] = {
      {"ZZ_SEED", "abc", "ZZ_SEED=abc (--seed)"},
      {"ZZ_GPU_BATCH_SIZE", "0", "ZZ_GPU_BATCH_SIZE=0 (--gpu-batch-size)"},
      {"ZZ_DEVICE", "gpu", "ZZ_DEVICE=gpu (--device): want auto, cpu or cuda"},
      {"ZZ_CPU_ISA", "sse9", "ZZ_CPU_ISA=sse9 (--cpu-isa): want auto, portable, avx2, avx512 or amx"},
      {"ZZ_FAULT_KIND", "boom", "ZZ_FAULT_KIND=boom: want kill, stop or error"},
      {"ZZ_FAULT_KILL_AFTER_BLOCKS", "soon", "ZZ_FAULT_KILL_AFTER_BLOCKS=soon"},
      {"ZZ_FAULT_KILL_AFTER_BLOCKS", "-2", "[-1, "},
      {"ZZ_FAULT_KILL_RANK", "-1", "ZZ_FAULT_KILL_RANK=-1"},
      {"ZZ_PEER_TIMEOUT", "0", "ZZ_PEER_TIMEOUT=0"},
  };
  char said[1024];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv(bad[i][0], bad[i][1], 1);
    const char *args[] = {"zigzag", "plan", NULL}; /* a command the variable need not apply to */
    int r = zz_parse_said(args, said, sizeof said);
    unsetenv(bad[i][0]);
    CU_ASSERT_EQUAL(r, 2);
    if (r != 2 || !strstr(said, bad[i][2])) fprintf(stderr, "%s=%s: %d, said '%s'\n", bad[i][0], bad[i][1], r, said);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, bad[i][2]));
  }
  /* good values land in the options, the test hooks included */
  setenv("ZZ_FAULT_KIND", "stop", 1);
  setenv("ZZ_FAULT_KILL_AFTER_BLOCKS", "2", 1);
  setenv("ZZ_FAULT_KILL_RANK", "1", 1);
  zz_opts o;
  zz_opts_defaults(&o);
  CU_ASSERT_EQUAL(o.env_error, 0);
  CU_ASSERT_STRING_EQUAL(o.fault_kind, "stop");
  CU_ASSERT_EQUAL(o.fault_kill_after, 2);
  CU_ASSERT_EQUAL(o.fault_kill_rank, 1);
  unsetenv("ZZ_FAULT_KIND");
  unsetenv("ZZ_FAULT_KILL_AFTER_BLOCKS");
  unsetenv("ZZ_FAULT_KILL_RANK");
  zz_opts_defaults(&o);
  CU_ASSERT_EQUAL(o.fault_kill_after, -1); /* off */
  CU_ASSERT_STRING_EQUAL(o.fault_kind, "kill");
  CU_ASSERT_STRING_EQUAL(o.cpu_isa, "auto");
}

static void test_cpu_isa_option(void) {
  char said[1024];
  const char *port[] = {"zigzag", "bench", "--cpu-isa", "portable", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(port, said, sizeof said), 0);
  const char *bad[] = {"zigzag", "bench", "--cpu-isa", "neon", NULL};
  CU_ASSERT_EQUAL(zz_parse_said(bad, said, sizeof said), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "--cpu-isa neon: want auto, portable, avx2, avx512 or amx"));
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512)) { /* a name this CPU lacks: refused, naming the best it has */
    const char *lack[] = {"zigzag", "bench", "--cpu-isa", "avx512", NULL};
    CU_ASSERT_EQUAL(zz_parse_said(lack, said, sizeof said), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "this CPU lacks it"));
  }
  if (!zz_cpu_isa_supported(ZZ_CPU_ISA_AMX)) { /* no AMX, or the kernel refused its state: refused, saying which */
    const char *amx[] = {"zigzag", "bench", "--cpu-isa", "amx", NULL};
    CU_ASSERT_EQUAL(zz_parse_said(amx, said, sizeof said), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, zz_cpu_isa_why_not(ZZ_CPU_ISA_AMX)));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "--cpu-isa amx"));
  }
  zz_opts o;
  zz_opts_defaults(&o);
  o.cpu_isa = "portable";
  zz_cpu_isa isa;
  CU_ASSERT_EQUAL(zz_opts_cpu_isa(&o, &isa), ZZ_OK);
  CU_ASSERT_EQUAL(isa, ZZ_CPU_ISA_PORTABLE);
}

void zz_test_cli_register(void) {
  CU_pSuite s = CU_add_suite("cli", NULL, NULL);
  CU_add_test(s, "top-k kept count: ceil(units * n / 1e9) in integers", test_keep_count_exact);
  CU_add_test(s, "--attn-sparsity 0.1 keeps 1 key of 10, as its policy line does", test_sparsity_option_exact);
  CU_add_test(s, "a policy line's sparsity reads back to the same kept counts", test_sparsity_line_round_trip);
  CU_add_test(s, "sparsity: more than 9 places, out of (0, 1], not a decimal: refused", test_sparsity_refused);
  CU_add_test(s, "--layers: cut points read exactly, each refusal names what is wrong", test_layers_parse);
  CU_add_test(s, "an option given to a command it does not apply to is refused, naming both",
              test_option_applies_to_command);
  CU_add_test(s, "--layers, --comm, ... outside mpirun: refused, not ignored", test_pipeline_options_need_mpirun);
  CU_add_test(s, "a bad ZZ_* value is an error naming the variable (was a warning)", test_bad_environment_is_an_error);
  CU_add_test(s, "--cpu-isa / ZZ_CPU_ISA: a row of the table, checked against this CPU", test_cpu_isa_option);
}
