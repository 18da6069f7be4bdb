/*
 * compress_bench.c — what 4-bit compression buys on this machine, as ratios
 * measured in one run: the same policy without and with compression of weights
 * and cache (and each alone), dummy weights:
 *   - total tokens/s (FlexGen's definition: b·n / (prefill + decode)) and its ratio
 *     to the uncompressed run;
 *   - bytes moved per generated token: disk reads + writes (measured by the
 *     engine), and what the weight lane moves per token step by the plan (every
 *     offloaded layer's home bytes, compressed or not);
 *   - each lane's busy fraction.
 * Output: CSV on stdout, progress on stderr. Never part of ctest.
 *
 *   compress_bench MODEL PROMPT_LEN GEN_LEN GBS NUM_GB "WG WC CG CC HG HC" CPU_ATTN OFFLOAD_DIR [RUNS]
 *   e.g. compress_bench opt-1.3b 32 8 4 1 "0 0 100 0 100 0" 0 /var/tmp      (weights on disk)
 * RUNS: which of uncompressed, weights, cache, both to run, as "1111" (default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct zz_cb {
  const char *name, *extra;
  double total, disk_bytes_per_tok, wlane_bytes_per_tok, busy[ZZ_LANE_COUNT], load_s;
} zz_cb;

static int zz_cb_run(const zz_model *m, zz_device *dev, const char *policy, const zz_shape *shape, const char *dir,
                     zz_cb *out) {
  zz_policy pol;
  if (zz_policy_parse(policy, &pol) != ZZ_OK) {
    fprintf(stderr, "compress_bench: %s\n", zz_error_message());
    return -1;
  }
  zz_tiers tiers = {.offload_dir = dir};
  zz_engine *eng = NULL;
  double t0 = zz_now();
  if (zz_engine_create_tiers(dev, m, NULL, &pol, shape, &tiers, &eng) != ZZ_OK) {
    fprintf(stderr, "compress_bench: %s: %s\n", out->name, zz_error_message());
    return -1;
  }
  out->load_s = zz_now() - t0;
  /* the weight lane moves every offloaded layer's home bytes once per token step */
  const zz_memplan *plan = zz_engine_plan(eng);
  size_t wbytes = 0;
  for (int i = 0; i < plan->n_buf; i++)
    if (plan->buf[i].role == ZZ_BUF_WEIGHT && plan->buf[i].tier != ZZ_TIER_GPU) wbytes += plan->buf[i].bytes;
  int64_t b = (int64_t)pol.gpu_batch_size * pol.num_gpu_batches;
  zz_bench_timing tm;
  int rc = -1;
  if (zz_bench_block(eng, b, shape->prompt_len, shape->gen_len, &tm) == ZZ_OK) {
    const zz_engine_stats *s0 = &tm.before, *s1 = &tm.after;
    double n = (double)shape->gen_len, wall = s1->wall_s - s0->wall_s, toks = (double)b * n;
    out->total = toks / (tm.prefill_s + tm.decode_s);
    out->disk_bytes_per_tok = (double)(s1->disk_read_bytes - s0->disk_read_bytes + s1->disk_write_bytes -
                                       s0->disk_write_bytes) /
                              toks;
    out->wlane_bytes_per_tok = (double)wbytes * n / toks; /* n token steps, each moving wbytes */
    for (int l = 0; l < ZZ_LANE_COUNT; l++) out->busy[l] = (s1->busy_s[l] - s0->busy_s[l]) / wall;
    rc = 0;
  }
  if (rc) fprintf(stderr, "compress_bench: %s: %s\n", out->name, zz_error_message());
  zz_engine_destroy(eng);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 9 && argc != 10) {
    fprintf(
        stderr,
        "usage: compress_bench MODEL PROMPT_LEN GEN_LEN GBS NUM_GB \"WG WC CG CC HG HC\" CPU_ATTN OFFLOAD_DIR [RUNS]\n");
    return 2;
  }
  zz_config cfg;
  zz_model m;
  zz_device *dev;
  if (zz_config_resolve(argv[1], &cfg) || zz_model_init(&cfg, &m) || zz_device_create_cpu(0, 0, 0, &dev)) {
    fprintf(stderr, "compress_bench: %s\n", zz_error_message());
    return 1;
  }
  zz_shape shape = {.prompt_len = atoll(argv[2]), .gen_len = atoll(argv[3])};
  double pc[6];
  if (sscanf(argv[6], "%lf %lf %lf %lf %lf %lf", &pc[0], &pc[1], &pc[2], &pc[3], &pc[4], &pc[5]) != 6) return 2;
  char base[256];
  snprintf(base, sizeof base, "gbs=%s num_gb=%s w=%g,%g c=%g,%g a=%g,%g overlap=1 cpu_attn=%s", argv[4], argv[5], pc[0],
           pc[1], pc[2], pc[3], pc[4], pc[5], argv[7]);
  zz_cb runs[4] = {{.name = "uncompressed", .extra = ""},
                   {.name = "weights_4bit", .extra = "cw=1"},
                   {.name = "cache_4bit", .extra = "cc=1"},
                   {.name = "both_4bit", .extra = "cw=1 cc=1"}};
  printf("model,config,policy,total_tok_s,ratio_to_uncompressed,disk_bytes_per_token,weight_lane_bytes_per_token,"
         "busy_compute,busy_weight_load,busy_cache_load,busy_cache_store,load_s\n");
  const char *which = argc == 10 ? argv[9] : "1111";
  for (int i = 0; i < 4; i++) {
    if ((int)strlen(which) <= i || which[i] != '1') continue;
    char policy[320];
    snprintf(policy, sizeof policy, "%s %s", base, runs[i].extra);
    fprintf(stderr, "compress_bench: %s: %s\n", runs[i].name, policy);
    if (zz_cb_run(&m, dev, policy, &shape, argv[8], &runs[i]) != 0) continue;
    printf("%s,%s,\"%s\",%.3f,%.3f,%.0f,%.0f,%.3f,%.3f,%.3f,%.3f,%.1f\n", cfg.name, runs[i].name, policy, runs[i].total,
           runs[0].total > 0 ? runs[i].total / runs[0].total : 0, runs[i].disk_bytes_per_tok,
           runs[i].wlane_bytes_per_tok, runs[i].busy[0], runs[i].busy[1], runs[i].busy[2], runs[i].busy[3],
           runs[i].load_s);
    fflush(stdout);
  }
  zz_device_destroy(dev);
  zz_model_free(&m);
  return 0;
}
