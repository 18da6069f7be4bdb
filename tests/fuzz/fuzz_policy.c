/* fuzz_policy.c — the one-line policy (--policy): what parses must print as a
 * line that parses to the same line again, keeping as many top-k keys. */
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
    /* the printed line keeps as many keys as the policy it came from (issue #21 item 4) */
    static const int64_t n[] = {1, 2, 3, 7, 10, 81, 1000, 999999937, 4000000000LL};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
      if (zz_attn_keep_count(p.attn_sparsity, n[i]) != zz_attn_keep_count(q.attn_sparsity, n[i])) abort();
    zz_policy_str(&q, b, sizeof b);
    if (zz_policy_parse(b, &q) != ZZ_OK || strcmp(b, zz_policy_str(&q, a, sizeof a)) != 0) abort();
  }
  free(text);
  return 0;
}
