/*
 * offload_bench.c — the offloading engine on this machine, as figures measured
 * in one run (FlexGen §6, Table 5 style):
 *   - tokens/s (prefill, decode, total) of the full engine under a policy that
 *     forces weights and cache onto the CPU tier and disk;
 *   - the busy fraction of each lane (compute, weight load, cache load, cache
 *     store) over the timed block;
 *   - achieved disk read bandwidth (bytes read / time inside reads) as a fraction
 *     of the disk's sequential O_DIRECT read bandwidth measured here first;
 *   - the ablation: no overlap, one GPU batch per block, no CPU attention, each
 *     as a ratio of its total throughput to the full engine's.
 * Output: CSV on stdout, a summary on stderr. Never part of ctest.
 *
 *   offload_bench MODEL PROMPT_LEN GEN_LEN GBS NUM_GB "WG WC CG CC HG HC" OFFLOAD_DIR
 *   e.g. offload_bench opt-1.3b 64 8 4 4 "0 50 0 50 100 0" /var/tmp
 */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

/* Sequential O_DIRECT read bandwidth of a fresh 1 GiB file under dir. */
static double zz_disk_ceiling(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/zz-disk-ceiling-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  unlink(path);
  int fl = fcntl(fd, F_GETFL);
  if (fcntl(fd, F_SETFL, fl | O_DIRECT) != 0) fprintf(stderr, "offload_bench: no O_DIRECT under %s\n", dir);
  size_t block = 8 << 20, total = (size_t)1 << 30;
  void *buf = NULL;
  if (posix_memalign(&buf, 4096, block) != 0) return 0;
  memset(buf, 0x5a, block);
  for (size_t off = 0; off < total; off += block)
    if (pwrite(fd, buf, block, (off_t)off) != (ssize_t)block) return 0;
  fsync(fd);
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = zz_now();
    for (size_t off = 0; off < total; off += block)
      if (pread(fd, buf, block, (off_t)off) != (ssize_t)block) return 0;
    double bw = (double)total / (zz_now() - t0);
    if (bw > best) best = bw;
  }
  free(buf);
  close(fd);
  return best;
}

typedef struct zz_run {
  const char *name;
  double prefill, decode, total;
  double busy[ZZ_LANE_COUNT];
  double disk_bw;
} zz_run;

static int zz_bench_one(const zz_model *m, zz_device *dev, const zz_policy *pol, const zz_shape *shape, const char *dir,
                        zz_run *out) {
  zz_tiers tiers = {.offload_dir = dir};
  zz_engine *eng = NULL;
  if (zz_engine_create_tiers(dev, m, NULL, pol, shape, &tiers, &eng) != ZZ_OK) {
    fprintf(stderr, "offload_bench: %s: %s\n", out->name, zz_error_message());
    return -1;
  }
  int64_t b = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches, s = shape->prompt_len;
  zz_bench_timing tm;
  int rc = -1;
  if (zz_bench_block(eng, b, s, shape->gen_len, &tm) == ZZ_OK) {
    const zz_engine_stats *s0 = &tm.before, *s1 = &tm.after;
    double n = (double)shape->gen_len, wall = s1->wall_s - s0->wall_s;
    out->prefill = (double)(b * s) / tm.prefill_s;
    out->decode = (double)b * (n - 1) / tm.decode_s;
    out->total = (double)b * n / (tm.prefill_s + tm.decode_s);
    for (int l = 0; l < ZZ_LANE_COUNT; l++) out->busy[l] = (s1->busy_s[l] - s0->busy_s[l]) / wall;
    double rs = s1->disk_read_s - s0->disk_read_s;
    out->disk_bw = rs > 0 ? (double)(s1->disk_read_bytes - s0->disk_read_bytes) / rs : 0;
    rc = 0;
  }
  if (rc) fprintf(stderr, "offload_bench: %s: %s\n", out->name, zz_error_message());
  zz_engine_destroy(eng);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: offload_bench MODEL PROMPT_LEN GEN_LEN GBS NUM_GB \"WG WC CG CC HG HC\" OFFLOAD_DIR\n");
    return 2;
  }
  zz_config cfg;
  zz_model m;
  zz_device *dev;
  if (zz_config_resolve(argv[1], &cfg) || zz_model_init(&cfg, &m) || zz_device_create_cpu(0, 0, 0, &dev)) {
    fprintf(stderr, "offload_bench: %s\n", zz_error_message());
    return 1;
  }
  zz_shape shape = {.prompt_len = atoll(argv[2]), .gen_len = atoll(argv[3])};
  char text[256];
  double pc[6];
  if (sscanf(argv[6], "%lf %lf %lf %lf %lf %lf", &pc[0], &pc[1], &pc[2], &pc[3], &pc[4], &pc[5]) != 6) return 2;
  snprintf(text, sizeof text, "gbs=%s num_gb=%s w=%g,%g c=%g,%g a=%g,%g overlap=1 cpu_attn=1", argv[4], argv[5], pc[0],
           pc[1], pc[2], pc[3], pc[4], pc[5]);
  zz_policy full;
  if (zz_policy_parse(text, &full) != ZZ_OK) {
    fprintf(stderr, "offload_bench: %s\n", zz_error_message());
    return 2;
  }
  const char *dir = argv[7];
  double ceiling = zz_disk_ceiling(dir);
  fprintf(stderr, "offload_bench: %s, s=%lld n=%lld, disk sequential read ceiling %.0f MiB/s\n", cfg.name,
          (long long)shape.prompt_len, (long long)shape.gen_len, ceiling / (1 << 20));

  zz_run runs[4] = {
      {.name = "full"}, {.name = "no_overlap"}, {.name = "one_batch_per_block"}, {.name = "no_cpu_attention"}};
  zz_policy pols[4] = {full, full, full, full};
  pols[1].overlap = false;
  pols[2].num_gpu_batches = 1;
  pols[3].cpu_attention = false;
  printf("model,config,policy,prefill_tok_s,decode_tok_s,total_tok_s,ratio_to_full,busy_compute,busy_weight_load,"
         "busy_cache_load,busy_cache_store,disk_read_mib_s,disk_frac_of_seq_read\n");
  for (int i = 0; i < 4; i++) {
    char pb[256];
    zz_policy_str(&pols[i], pb, sizeof pb);
    fprintf(stderr, "offload_bench: running %s (%s)\n", runs[i].name, pb);
    if (zz_bench_one(&m, dev, &pols[i], &shape, dir, &runs[i]) != 0) continue;
    printf("%s,%s,\"%s\",%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3f\n", cfg.name, runs[i].name, pb,
           runs[i].prefill, runs[i].decode, runs[i].total, runs[i].total / runs[0].total, runs[i].busy[0],
           runs[i].busy[1], runs[i].busy[2], runs[i].busy[3], runs[i].disk_bw / (1 << 20),
           ceiling > 0 ? runs[i].disk_bw / ceiling : 0);
    fflush(stdout);
  }
  zz_device_destroy(dev);
  zz_model_free(&m);
  return 0;
}
