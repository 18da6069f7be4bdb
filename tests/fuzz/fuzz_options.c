/* fuzz_options.c — the command line: the input split at NUL bytes into up to 64
 * arguments after "zigzag", parsed as main() does (policy, tiers and ISA included),
 * and --layers as a pipeline of 1 to 4 ranks reads it. */
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
    zz_tiers t;
    zz_cpu_isa isa;
    if (zz_policy_check(&o.pol) != ZZ_OK || zz_opts_tiers(&o, &t) != ZZ_OK || zz_opts_cpu_isa(&o, &isa) != ZZ_OK)
      abort(); /* parse checked them */
  }
  /* --layers as the pipeline reads it, over 1 to 4 ranks of 8 layers: refused or
   * increasing, never read past its end (the text is argv's, NUL-terminated) */
  if (o.layers)
    for (int ranks = 1; ranks <= 4; ranks++) {
      int b[5];
      if (zz_opts_parse_layers(o.layers, 8, ranks, b) == ZZ_OK)
        for (int r = 0; r < ranks; r++)
          if (b[r] >= b[r + 1]) abort();
    }
  free(buf);
  return 0;
}
