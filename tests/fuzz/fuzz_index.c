/* fuzz_index.c — model.safetensors.index.json beside the three shards of the
 * tiny-opt-postln fixture: opened and checked against that model. */
#include "fuzz_util.h"

static zz_model zz_m;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  zz_config cfg;
  if (zz_config_load(ZZ_FIXTURES_DIR "/tiny-opt-postln", &cfg) != ZZ_OK || zz_model_init(&cfg, &zz_m) != ZZ_OK) abort();
  for (int i = 1; i <= 3; i++) {
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/tiny-opt-postln/model-0000%d-of-00003.safetensors", ZZ_FIXTURES_DIR, i);
    snprintf(dst, sizeof dst, "%s/model-0000%d-of-00003.safetensors", zz_fuzz_dir(), i);
    if (symlink(src, dst) != 0) abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  zz_checkpoint *ck;
  zz_status st = zz_fuzz_checkpoint("model.safetensors.index.json", data, len, &zz_m, &ck);
  zz_fuzz_expect_message(st);
  zz_checkpoint_close(ck);
  return 0;
}
