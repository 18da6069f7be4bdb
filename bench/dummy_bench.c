/*
 * dummy_bench.c — how long --dummy takes to make every weight of a preset:
 * zz_weights_dummy over each weight of the model in turn into one buffer (the
 * largest weight's size), on a pool of T threads, in the store dtype. That is
 * the generator's share of `zigzag ... --dummy` getting its weights ready; the
 * rest is the copy to each home (none for the CPU tier, which is filled in
 * place; an upload for the GPU; a write for the disk). Needs no memory for the
 * whole model, so OPT-30B (60 GB in f16) runs on a small machine. CSV on stdout;
 * not a test.
 *
 *   dummy_bench [preset = opt-30b] [threads = 0: every core] [dtype = f16|f32|bf16]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "opt-30b";
  int threads = argc > 2 ? atoi(argv[2]) : 0;
  const char *dts = argc > 3 ? argv[3] : "f16";
  zz_dtype dt = strcmp(dts, "f32") == 0 ? ZZ_DTYPE_F32 : strcmp(dts, "bf16") == 0 ? ZZ_DTYPE_BF16 : ZZ_DTYPE_F16;
  zz_config cfg;
  zz_model m;
  zz_pool *pool = NULL;
  if (zz_config_preset(name, &cfg) != ZZ_OK || zz_model_init(&cfg, &m) != ZZ_OK) {
    fprintf(stderr, "dummy_bench: %s\n", zz_error_message());
    return 1;
  }
  if (zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "dummy_bench: cannot start %d threads\n", threads);
    return 1;
  }
  size_t most = 0;
  int64_t total = 0;
  for (int l = 0; l < m.n_layers; l++)
    for (int k = 0; k < m.layers[l].n_weights; k++) {
      const zz_weight_spec *w = &m.layers[l].weights[k];
      if (!w->ndim) continue;
      size_t b = zz_weight_bytes(w, dt);
      if (b > most) most = b;
      total += zz_weight_numel(w);
    }
  char *buf = malloc(most);
  if (!buf) {
    fprintf(stderr, "dummy_bench: cannot allocate %zu bytes\n", most);
    return 1;
  }
  double t0 = zz_now();
  for (int l = 0; l < m.n_layers; l++)
    for (int k = 0; k < m.layers[l].n_weights; k++)
      if (m.layers[l].weights[k].ndim) zz_weights_dummy(&m.layers[l].weights[k], dt, buf, pool);
  double s = zz_now() - t0;
  printf("preset,threads,dtype,elements,seconds,elements_per_s,bytes_per_s\n");
  printf("%s,%d,%s,%lld,%.3f,%.4g,%.4g\n", name, zz_pool_threads(pool), dts, (long long)total, s, (double)total / s,
         (double)zz_weight_bytes(&(zz_weight_spec){.ndim = 1, .shape = {total}}, dt) / s);
  free(buf);
  zz_pool_destroy(pool);
  zz_model_free(&m);
  return 0;
}
