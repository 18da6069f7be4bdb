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
  zz_tokenizer *tok = NULL;
  zz_error_clear();
  zz_status st = zz_tokenizer_load(zz_fuzz_dir(), &tok);
  zz_fuzz_expect_message(st);
  if (st != ZZ_OK) return 0;
  int32_t *ids = NULL;
  int64_t n = 0;
  zz_error_clear();
  st = zz_tokenizer_encode(tok, (const char *)merges, mlen, &ids, &n);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK) {
    char *text = NULL;
    size_t tl = 0;
    st = zz_tokenizer_decode(tok, ids, n, &text, &tl);
    zz_fuzz_expect_message(st);
    free(text);
  }
  free(ids);
  zz_tokenizer_free(tok);
  return 0;
}
