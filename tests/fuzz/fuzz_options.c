/* fuzz_options.c — the command line: the input split at NUL bytes into up to 64
 * arguments after "zigzag", parsed as main() does (policy and tiers included). */
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* --help and refusals print: both streams to /dev/null. libFuzzer keeps the
   * stderr it took at start, and the sanitizers write to fd 2, so findings are
   * still reported */
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, STDOUT_FILENO);
  FILE *quiet = fopen("/dev/null", "w");
  if (quiet) stderr = quiet;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char *buf = malloc(len + 1);
  memcpy(buf, data, len);
  buf[len] = '\0';
  char *argv[66];
  int argc = 0;
  argv[argc++] = "zigzag";
  for (size_t i = 0; i <= len && argc < 65;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;
  zz_opts o;
  zz_opts_defaults(&o);
  if (zz_opts_parse(argc, argv, &o) == 0) {
    zz_policy p;
    zz_tiers t;
    if (zz_opts_policy(&o, &p) != ZZ_OK || zz_opts_tiers(&o, &t) != ZZ_OK) abort(); /* parse checked both */
  }
  free(buf);
  return 0;
}
