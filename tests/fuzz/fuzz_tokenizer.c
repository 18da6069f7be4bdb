/* fuzz_tokenizer.c — vocab.json and merges.txt from one input (split at the
 * first NUL byte): loaded, then the merges text encoded and decoded back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  const uint8_t *nul = memchr(data, 0, len);
  size_t vlen = nul ? (size_t)(nul - data) : len;
  const uint8_t *merges = nul ? nul + 1 : data + len;
  size_t mlen = len - vlen - (nul ? 1 : 0);
  char path[512];
  zz_fuzz_file("vocab.json", data, vlen, path, sizeof path);
  zz_fuzz_file("merges.txt", merges, mlen, path, sizeof path);
  zz_fuzz_tokenizer(merges, mlen);
  return 0;
}
