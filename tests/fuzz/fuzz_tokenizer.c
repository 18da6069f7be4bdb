/* fuzz_tokenizer.c — vocab.json, merges.txt and, after a second NUL byte,
 * tokenizer_config.json (special tokens) from one input (split at NUL bytes):
 * loaded, then the merges text encoded and decoded back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  const uint8_t *nul = memchr(data, 0, len);
  size_t vlen = nul ? (size_t)(nul - data) : len;
  const uint8_t *merges = nul ? nul + 1 : data + len;
  size_t mlen = len - vlen - (nul ? 1 : 0);
  const uint8_t *nul2 = memchr(merges, 0, mlen);
  char path[512];
  if (nul2) {
    zz_fuzz_file("tokenizer_config.json", nul2 + 1, (size_t)(merges + mlen - nul2 - 1), path, sizeof path);
    mlen = (size_t)(nul2 - merges);
  } else {
    snprintf(path, sizeof path, "%s/tokenizer_config.json", zz_fuzz_dir());
    unlink(path);
  }
  zz_fuzz_file("vocab.json", data, vlen, path, sizeof path);
  zz_fuzz_file("merges.txt", merges, mlen, path, sizeof path);
  zz_fuzz_tokenizer(merges, mlen);
  return 0;
}
