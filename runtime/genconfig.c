/*
 * genconfig.c — the sampling defaults of a model directory's generation_config.json
 * (zz_gen_config_load, zz_seq.h). The loader and key readers are config.c's, so
 * the file is read the one way config.json is (numbers as doubles, ranges named).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "arch_impl.h"
#include "zz_seq.h"

zz_status zz_gen_config_load(const char *dir, zz_gen_config *out) {
  zz_gen_config g = {.temperature = 0, .top_p = 1, .top_k = 0, .repetition_penalty = 1};
  struct stat sb;
  if (!dir || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) { /* a preset */
    *out = g;
    return ZZ_OK;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  json_t *root = NULL;
  ZZ_CHECK(zz_json_load_hf(path, false, &root));
  if (!root) {
    *out = g;
    return ZZ_OK;
  }
  double t = 1, p = 1, rp = 1;
  int64_t k = 50, mx = 0;
  zz_status st = zz_json_bool(root, path, "do_sample", false, &g.do_sample);
  if (st == ZZ_OK) st = zz_json_real(root, path, "temperature", 1.0, 0, 100, &t);
  if (st == ZZ_OK) st = zz_json_real(root, path, "top_p", 1.0, 0, 1, &p);
  if (st == ZZ_OK) st = zz_json_int_in(root, path, "top_k", 50, 0, ZZ_MAX_VOCAB, &k);
  if (st == ZZ_OK) st = zz_json_real(root, path, "repetition_penalty", 1.0, 1e-6, 100, &rp);
  if (st == ZZ_OK) st = zz_json_int_in(root, path, "max_new_tokens", 0, 0, ZZ_MAX_POSITIONS, &mx);
  json_decref(root);
  if (st != ZZ_OK) return st;
  g.present = true;
  /* Hugging Face samples only with do_sample; without it its top_k / top_p do
   * nothing, and zigzag's own (all tokens) stay for a --temperature given alone */
  if (g.do_sample) {
    g.temperature = (float)t;
    g.top_p = p > 0 ? (float)p : 1.0f;
    g.top_k = (int)k;
  }
  g.repetition_penalty = (float)rp;
  g.max_new_tokens = (int)mx;
  *out = g;
  return ZZ_OK;
}
