/* fuzz_tokenizer_json.c — a tokenizer.json and a text from one input (split at
 * the first NUL byte): loaded, then the text encoded and decoded back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  const uint8_t *nul = memchr(data, 0, len);
  size_t jlen = nul ? (size_t)(nul - data) : len;
  const uint8_t *text = nul ? nul + 1 : data + len;
  size_t tlen = len - jlen - (nul ? 1 : 0);
  char path[512];
  zz_fuzz_file("tokenizer.json", data, jlen, path, sizeof path);
  zz_tokenizer *tok = NULL;
  zz_error_clear();
  zz_status st = zz_tokenizer_load(zz_fuzz_dir(), &tok);
  zz_fuzz_expect_message(st);
  if (st != ZZ_OK) return 0;
  int32_t *ids = NULL;
  int64_t n = 0;
  zz_error_clear();
  st = zz_tokenizer_encode(tok, (const char *)text, tlen, &ids, &n);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK) {
    char *out = NULL;
    size_t ol = 0;
    st = zz_tokenizer_decode(tok, ids, n, &out, &ol);
    zz_fuzz_expect_message(st);
    free(out);
  }
  free(ids);
  zz_tokenizer_free(tok);
  return 0;
}
