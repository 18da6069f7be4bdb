/* fuzz_config.c — config.json and generation_config.json: loaded, and a model
 * built from what passes. The input up to its first NUL byte is config.json; what
 * follows the NUL, where there is one, is generation_config.json (read after
 * config.json passes: its end ids are checked against config.json's vocab_size). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char path[512];
  const uint8_t *nul = memchr(data, 0, len);
  size_t cfg_len = nul ? (size_t)(nul - data) : len;
  zz_fuzz_file("config.json", data, cfg_len, path, sizeof path);
  snprintf(path, sizeof path, "%s/generation_config.json", zz_fuzz_dir());
  unlink(path);
  if (nul) zz_fuzz_file("generation_config.json", nul + 1, len - cfg_len - 1, path, sizeof path);
  zz_config c;
  zz_error_clear();
  zz_status st = zz_config_load(zz_fuzz_dir(), &c);
  if (st == ZZ_OK) {
    zz_model m;
    st = zz_model_init(&c, &m);
    if (st == ZZ_OK) {
      (void)zz_model_numel(&m);
      zz_model_free(&m);
    }
  }
  zz_fuzz_expect_message(st);
  return 0;
}
