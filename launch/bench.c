/*
 * bench.c — `zigzag bench`: throughput as FlexGen defines it, for b = gbs x num_gb
 * prompts of length s and n new tokens each (EOS ignored, so every sequence runs
 * n steps): prefill b*s/t_prefill, decode b*(n-1)/t_decode, total b*n/(t_prefill +
 * t_decode). Weights are loaded, and a short warm-up block run, before the clock
 * starts.
 */
#include <stdlib.h>
#include <string.h>

#include "zz_launch.h"
#include "zz_planner.h"

zz_status zz_bench_prompts(const zz_config *cfg, int64_t b, int s, int32_t ***ids_out, int64_t **lens_out) {
  int32_t **ids = calloc((size_t)b, sizeof *ids);
  int64_t *lens = calloc((size_t)b, sizeof *lens);
  if (!ids || !lens) {
    zz_bench_prompts_free(ids, lens, b);
    return zz_error(ZZ_ERR_NO_MEMORY, "bench: out of memory");
  }
  zz_rng rng;
  zz_rng_seed(&rng, 1234, 0);
  for (int64_t i = 0; i < b; i++) {
    if (!(ids[i] = malloc((size_t)s * sizeof **ids))) {
      zz_bench_prompts_free(ids, lens, b);
      return zz_error(ZZ_ERR_NO_MEMORY, "bench: out of memory");
    }
    lens[i] = s;
    ids[i][0] = cfg->bos;
    for (int64_t j = 1; j < s; j++) ids[i][j] = 4 + (int32_t)(zz_rng_next(&rng) % (uint64_t)(cfg->vocab_size - 4));
  }
  *ids_out = ids;
  *lens_out = lens;
  return ZZ_OK;
}

void zz_bench_prompts_free(int32_t **ids, int64_t *lens, int64_t b) {
  if (ids)
    for (int64_t i = 0; i < b; i++) free(ids[i]);
  free(ids);
  free(lens);
}

void zz_bench_rates(int64_t b, int s, int n, const zz_result *res, double rate_out[3]) {
  double bb = (double)b;
  rate_out[0] = bb * s / res->prefill_s;
  rate_out[1] = bb * (n - 1) / res->decode_s;
  rate_out[2] = bb * n / (res->prefill_s + res->decode_s);
}

int zz_cmd_bench(const zz_opts *o) {
  zz_config cfg;
  zz_model model = {0};
  zz_checkpoint *ck = NULL;
  zz_run run = {0};
  int32_t **ids = NULL;
  int64_t *lens = NULL, b = 0;
  zz_result res = {0}, warm = {0};
  zz_status st;
  int rc = 1;
  ZZ_CHECK_GOTO(zz_setup_model(o, ZZ_SETUP_WEIGHTS, &cfg, &model, &ck, NULL), st, fail);
  if (o->gen_len < 2) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "bench: --gen-len must be at least 2 (decode throughput needs a decode step)");
    goto fail;
  }
  zz_shape shape = {.prompt_len = o->prompt_len, .gen_len = o->gen_len};
  /* --hw: plan when no policy is given, and predict the run's throughput */
  ZZ_CHECK_GOTO(zz_run_open(&run, o, true, &model, ck, &shape), st, fail);
  const zz_policy *pol = &run.pol;
  const zz_plan *pred = &run.pred;
  bool have_pred = run.predicted;
  zz_device *dev = run.dev;
  zz_engine *eng = run.eng;
  double t_load = run.load_s;

  b = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches;
  ZZ_CHECK_GOTO(zz_bench_prompts(&cfg, b, o->prompt_len, &ids, &lens), st, fail);
  zz_request req = {
      .n = b, .ids = (const int32_t *const *)ids, .lens = lens, .max_new_tokens = o->gen_len, .ignore_eos = true};
  int64_t warm_len = 1;
  zz_request wreq = {
      .n = 1, .ids = (const int32_t *const *)ids, .lens = &warm_len, .max_new_tokens = 2, .ignore_eos = true};
  ZZ_CHECK_GOTO(zz_generate(eng, &wreq, &warm), st, fail);
  zz_result_free(&warm, 1);
  zz_engine_stats s0, s1;
  zz_engine_get_stats(eng, &s0);
  ZZ_CHECK_GOTO(zz_generate(eng, &req, &res), st, fail);
  zz_engine_get_stats(eng, &s1);
  double wall = s1.wall_s - s0.wall_s, busy[ZZ_LANE_COUNT];
  for (int l = 0; l < ZZ_LANE_COUNT; l++) busy[l] = wall > 0 ? (s1.busy_s[l] - s0.busy_s[l]) / wall : 0;
  uint64_t rd = s1.disk_read_bytes - s0.disk_read_bytes;
  /* where compute's time went beside a host cache, and the bytes that crossed
   * to and from the device per generated token (PCIe on a GPU); a device whose
   * memory is host RAM (the CPU device) counts copies within RAM there, which
   * cross no bus, so its per-token transfer figure is not reported */
  double attn_wait = wall > 0 ? (s1.attn_wait_s - s0.attn_wait_s) / wall : 0;
  double attn_cpu = wall > 0 ? (s1.attn_cpu_s - s0.attn_cpu_s) / wall : 0;
  uint64_t to_dev = s1.bytes_to_device - s0.bytes_to_device, from_dev = s1.bytes_from_device - s0.bytes_from_device;
  double per_tok = (double)(to_dev + from_dev) / ((double)b * o->gen_len);
  bool bus = !zz_device_describe(dev)->memory_is_host;
  double rd_s = s1.disk_read_s - s0.disk_read_s, rd_bw = rd_s > 0 ? (double)rd / rd_s : 0;

  double rate[3];
  zz_bench_rates(b, o->prompt_len, o->gen_len, &res, rate);
  double prefill = rate[0], decode = rate[1], total = rate[2];
  size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT], tier[ZZ_TIER_COUNT] = {0};
  zz_engine_peaks(eng, peak);
  for (int t = 0; t < ZZ_TIER_COUNT; t++)
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) tier[t] += peak[t][p];
  char pbuf[256];
  zz_policy_str(pol, pbuf, sizeof pbuf);
  if (o->json) {
    printf("{\"model\": \"%s\", \"device\": \"%s\", \"prompt_len\": %d, \"gen_len\": %d, \"batch\": %lld, "
           "\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"total_tok_s\": %.3f, "
           "\"prefill_s\": %.4f, \"decode_s\": %.4f, \"load_s\": %.3f, "
           "\"peak_bytes\": {\"gpu\": %zu, \"cpu\": %zu, \"disk\": %zu}, \"policy\": \"%s\", "
           "\"busy\": {\"compute\": %.3f, \"weight_load\": %.3f, \"cache_load\": %.3f, \"cache_store\": %.3f}, "
           "\"compute_parts\": {\"attn_wait\": %.3f, \"attn_cpu\": %.3f}, \"bytes_to_device\": %llu, "
           "\"bytes_from_device\": %llu, "
           "\"disk_read_bytes\": %llu, \"disk_read_bw\": %.0f, \"warmup\": \"excluded\"",
           cfg.name, zz_device_describe(dev)->name, o->prompt_len, o->gen_len, (long long)b, prefill, decode, total,
           res.prefill_s, res.decode_s, t_load, tier[ZZ_TIER_GPU], tier[ZZ_TIER_CPU], tier[ZZ_TIER_DISK], pbuf,
           busy[ZZ_LANE_COMPUTE], busy[ZZ_LANE_LOAD_WEIGHT], busy[ZZ_LANE_LOAD_CACHE], busy[ZZ_LANE_STORE_CACHE],
           attn_wait, attn_cpu, (unsigned long long)to_dev, (unsigned long long)from_dev, (unsigned long long)rd,
           rd_bw);
    if (bus) printf(", \"transfer_bytes_per_token\": %.0f", per_tok);
    if (have_pred)
      printf(", \"predicted\": {\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"total_tok_s\": %.3f}",
             pred->cost.prefill_tps, pred->cost.decode_tps, pred->cost.total_tps);
    printf("}\n");
  } else {
    printf(
        "zigzag bench: %s on %s, %lld prompts x %d tokens, %d new tokens each (warm-up excluded, weights loaded in %.1f s)\n",
        cfg.name, zz_device_describe(dev)->name, (long long)b, o->prompt_len, o->gen_len, t_load);
    printf("  policy     %s\n", pbuf);
    printf("  prefill    %10.1f tok/s  (%.3f s)\n", prefill, res.prefill_s);
    printf("  decode     %10.1f tok/s  (%.3f s)\n", decode, res.decode_s);
    printf("  total      %10.1f tok/s\n", total);
    if (have_pred)
      printf("  predicted  prefill %.1f, decode %.1f, total %.1f tok/s (cost model, --hw %s): measured / predicted "
             "%.2f total\n",
             pred->cost.prefill_tps, pred->cost.decode_tps, pred->cost.total_tps, o->hw, total / pred->cost.total_tps);
    printf("  busy       compute %.0f%%, weight load %.0f%%, cache load %.0f%%, cache store %.0f%% of %.2f s\n",
           100 * busy[ZZ_LANE_COMPUTE], 100 * busy[ZZ_LANE_LOAD_WEIGHT], 100 * busy[ZZ_LANE_LOAD_CACHE],
           100 * busy[ZZ_LANE_STORE_CACHE], wall);
    if (attn_wait + attn_cpu > 0)
      printf("  of compute waiting for q, k, v %.0f%%, CPU attention %.0f%%\n", 100 * attn_wait, 100 * attn_cpu);
    if (bus)
      printf("  transfers  %.1f MiB to the device, %.1f MiB from it: %.2f MiB per generated token\n",
             (double)to_dev / (1 << 20), (double)from_dev / (1 << 20), per_tok / (1 << 20));
    else
      printf("  copies     %.1f MiB into the device's buffers, %.1f MiB out of them (host RAM: no bus crossed)\n",
             (double)to_dev / (1 << 20), (double)from_dev / (1 << 20));
    if (rd) printf("  disk read  %.1f MiB at %.1f MiB/s\n", (double)rd / (1 << 20), rd_bw / (1 << 20));
    fflush(stdout);
    zz_report_peaks(eng, stdout);
  }
  rc = 0;
  goto done;
fail:
  rc = zz_report_failure(st);
done:
  zz_result_free(&res, b);
  zz_bench_prompts_free(ids, lens, b);
  zz_run_free(&run);
  zz_checkpoint_close(ck);
  zz_model_free(&model);
  return rc;
}
