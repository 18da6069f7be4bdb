/* fuzz_tokenizer_json.c — a tokenizer.json, a text and optionally a
 * tokenizer_config.json from one input (split at NUL bytes: tokenizer.json NUL text
 * [NUL tokenizer_config.json]): loaded, then the text encoded and decoded back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  const uint8_t *nul = memchr(data, 0, len);
  size_t jlen = nul ? (size_t)(nul - data) : len;
  const uint8_t *text = nul ? nul + 1 : data + len;
  size_t tlen = len - jlen - (nul ? 1 : 0);
  const uint8_t *nul2 = memchr(text, 0, tlen);
  char path[512];
  zz_fuzz_file("tokenizer.json", data, jlen, path, sizeof path);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", zz_fuzz_dir());
  unlink(path);
  if (nul2) {
    zz_fuzz_file("tokenizer_config.json", nul2 + 1, tlen - (size_t)(nul2 - text) - 1, path, sizeof path);
    tlen = (size_t)(nul2 - text);
  }
  zz_fuzz_tokenizer(text, tlen);
  return 0;
}
