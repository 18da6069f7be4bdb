/* fuzz_safetensors.c — a model.safetensors file (header and data) is opened,
 * checked against the tiny-opt model and, when it passes, every weight read. */
#include "fuzz_util.h"

static zz_model zz_m;
static float *zz_dst;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  zz_config cfg;
  if (zz_config_load(ZZ_FIXTURES_DIR "/tiny-opt", &cfg) != ZZ_OK || zz_model_init(&cfg, &zz_m) != ZZ_OK) abort();
  zz_dst = malloc((size_t)(cfg.vocab_size * cfg.ffn + 4096) * sizeof(float));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  zz_checkpoint *ck;
  zz_status st = zz_fuzz_checkpoint("model.safetensors", data, len, &zz_m, &ck);
  for (int l = 0; st == ZZ_OK && l < zz_m.n_layers; l++)
    for (int w = 0; st == ZZ_OK && w < zz_m.layers[l].n_weights; w++) {
      const zz_weight_spec *s = &zz_m.layers[l].weights[w];
      if (s->ndim)
        st = zz_checkpoint_read(ck, s->name, ZZ_DTYPE_F32, zz_dst, s->shape[0] * (s->ndim > 1 ? s->shape[1] : 1));
    }
  zz_fuzz_expect_message(st);
  zz_checkpoint_close(ck);
  return 0;
}
