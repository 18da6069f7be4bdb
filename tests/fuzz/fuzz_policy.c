/* fuzz_policy.c — the one-line policy (--policy): what parses must print as a
 * line that parses to the same line again. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char *text = malloc(len + 1);
  memcpy(text, data, len);
  text[len] = '\0';
  zz_policy p, q;
  zz_error_clear();
  zz_status st = zz_policy_parse(text, &p);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK) {
    char a[512], b[512];
    zz_policy_str(&p, a, sizeof a);
    if (zz_policy_parse(a, &q) != ZZ_OK) {
      fprintf(stderr, "printed policy '%s' does not parse: %s\n", a, zz_error_message());
      abort();
    }
    zz_policy_str(&q, b, sizeof b);
    if (zz_policy_parse(b, &q) != ZZ_OK || strcmp(b, zz_policy_str(&q, a, sizeof a)) != 0) abort();
  }
  free(text);
  return 0;
}
