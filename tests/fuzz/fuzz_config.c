/* fuzz_config.c — config.json: loaded, and a model built from what passes. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char path[512];
  zz_fuzz_file("config.json", data, len, path, sizeof path);
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
