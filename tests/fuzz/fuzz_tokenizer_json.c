/* fuzz_tokenizer_json.c — a tokenizer.json and a text from one input (split at
 * the first NUL byte): loaded, then the text encoded and decoded back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  const uint8_t *nul = memchr(data, 0, len);
  size_t jlen = nul ? (size_t)(nul - data) : len;
  const uint8_t *text = nul ? nul + 1 : data + len;
  char path[512];
  zz_fuzz_file("tokenizer.json", data, jlen, path, sizeof path);
  zz_fuzz_tokenizer(text, len - jlen - (nul ? 1 : 0));
  return 0;
}
