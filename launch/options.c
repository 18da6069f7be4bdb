/*
 * options.c — one table of every option and tunable: its flag, environment
 * variable, default and meaning. Environment variables set defaults; flags
 * override them; `zigzag --help` prints the table.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zz_launch.h"

typedef enum { ZZ_OPT_STR, ZZ_OPT_INT, ZZ_OPT_LL, ZZ_OPT_FLOAT, ZZ_OPT_FLAG, ZZ_OPT_PERCENT } zz_opt_type;

typedef struct zz_opt_def {
  const char *flag;   /* without the leading "--" */
  const char *env;    /* environment variable that sets the default */
  zz_opt_type type;
  size_t offset;      /* into zz_opts */
  const char *def;    /* default, as text (NULL: none) */
  const char *help;
  bool policy; /* part of the policy: conflicts with --policy */
} zz_opt_def;

#define ZZ_O(f) offsetof(zz_opts, f)
#define ZZ_STR_(x) #x
#define ZZ_STR(x) ZZ_STR_(x)

static const zz_opt_def zz_opt_table[] = {
    {"model", "ZZ_MODEL", ZZ_OPT_STR, ZZ_O(model), "opt-125m",
     "model directory (config.json, *.safetensors, vocab.json, merges.txt) or preset name", false},
    {"dummy", NULL, ZZ_OPT_FLAG, ZZ_O(dummy), NULL, "use deterministic random weights (presets need it)", false},
    {"prompts", NULL, ZZ_OPT_STR, ZZ_O(prompts), NULL,
     "generate: JSON Lines input, one {\"prompt\": text} or {\"input_ids\": [...]} (+ \"id\") per line; - is stdin", false},
    {"out", NULL, ZZ_OPT_STR, ZZ_O(out), NULL, "generate: JSON Lines output, one line per prompt; - is stdout", false},
    {"max-new-tokens", NULL, ZZ_OPT_INT, ZZ_O(max_new_tokens), "32", "generate: new tokens per prompt at most", false},
    {"max-prompt-len", "ZZ_MAX_PROMPT_LEN", ZZ_OPT_INT, ZZ_O(max_prompt_len), "0",
     "generate: longest prompt in tokens (sizes the KV cache); 0 = positions left after max-new-tokens", false},
    {"temperature", NULL, ZZ_OPT_FLOAT, ZZ_O(temperature), "0", "sampling temperature; 0 = greedy", false},
    {"top-k", NULL, ZZ_OPT_INT, ZZ_O(top_k), "0", "sample among the k most likely tokens; 0 = all", false},
    {"top-p", NULL, ZZ_OPT_FLOAT, ZZ_O(top_p), "1", "nucleus sampling mass; 1 = off", false},
    {"seed", "ZZ_SEED", ZZ_OPT_LL, ZZ_O(seed), "0", "sampling seed (each prompt draws from its own stream)", false},
    {"resume", NULL, ZZ_OPT_FLAG, ZZ_O(resume), NULL,
     "generate: keep the lines already in --out and skip their prompts (by id)", false},
    {"progress", NULL, ZZ_OPT_FLAG, ZZ_O(progress), NULL, "print the progress line even when stderr is not a terminal", false},
    {"no-progress", NULL, ZZ_OPT_FLAG, ZZ_O(no_progress), NULL, "never print the progress line", false},
    {"prompt-len", NULL, ZZ_OPT_INT, ZZ_O(prompt_len), "512", "bench: prompt length s", false},
    {"gen-len", NULL, ZZ_OPT_INT, ZZ_O(gen_len), "32", "bench: generated tokens n", false},
    {"json", NULL, ZZ_OPT_FLAG, ZZ_O(json), NULL, "bench: print one JSON object", false},
    {"gpu-batch-size", "ZZ_GPU_BATCH_SIZE", ZZ_OPT_INT, ZZ_O(gpu_batch_size), "8", "sequences per GPU batch (gbs)", true},
    {"num-gpu-batches", "ZZ_NUM_GPU_BATCHES", ZZ_OPT_INT, ZZ_O(num_gpu_batches), "1",
     "GPU batches per block (a block is gbs x num-gpu-batches sequences)", true},
    {"percent", "ZZ_PERCENT", ZZ_OPT_PERCENT, ZZ_O(percent), "100 0 100 0 100 0",
     "percent of weights, KV cache and activations on GPU and CPU; disk takes the rest", true},
    {"cpu-cache-compute", NULL, ZZ_OPT_FLAG, ZZ_O(cpu_cache_compute), NULL,
     "run decode attention on the CPU beside a KV cache that is not on the GPU", true},
    {"compress-weight", NULL, ZZ_OPT_FLAG, ZZ_O(compress_weight), NULL, "store weights in 4 bits (group 64)", true},
    {"compress-cache", NULL, ZZ_OPT_FLAG, ZZ_O(compress_cache), NULL, "store the KV cache in 4 bits (group 64)", true},
    {"attn-sparsity", NULL, ZZ_OPT_FLOAT, ZZ_O(attn_sparsity), "1", "fraction of attention kept; 1 = dense", true},
    {"no-overlap", NULL, ZZ_OPT_FLAG, ZZ_O(no_overlap), NULL, "run loads, stores and compute one after another", true},
    {"policy", "ZZ_POLICY", ZZ_OPT_STR, ZZ_O(policy), NULL,
     "the whole policy as the one line zigzag prints (instead of the policy flags)", false},
    {"offload-dir", "ZZ_OFFLOAD_DIR", ZZ_OPT_STR, ZZ_O(offload_dir), NULL,
     "directory of the disk tier's file (default $TMPDIR or /tmp)", false},
    {"device", "ZZ_DEVICE", ZZ_OPT_STR, ZZ_O(device), "auto", "compute device: auto (CUDA if present), cpu, cuda", false},
    {"gpu-mem", "ZZ_GPU_MEM", ZZ_OPT_STR, ZZ_O(gpu_mem), "0",
     "device memory this run may use, e.g. 16G; 0 = all the device has", false},
    {"cpu-mem", "ZZ_CPU_MEM", ZZ_OPT_STR, ZZ_O(cpu_mem), "0", "host memory for the CPU tier; 0 = physical RAM", false},
    {"disk-mem", "ZZ_DISK_MEM", ZZ_OPT_STR, ZZ_O(disk_mem), "0", "disk tier capacity; 0 = free space of --offload-dir", false},
    {"threads", "ZZ_THREADS", ZZ_OPT_INT, ZZ_O(threads), "0",
     "CPU device compute threads, 0 to " ZZ_STR(ZZ_POOL_MAX_THREADS) "; 0 = all cores", false},
    {"attn-threads", "ZZ_ATTN_THREADS", ZZ_OPT_INT, ZZ_O(attn_threads), "0",
     "CPU attention threads (beside a cache off the device; any device), 0 to " ZZ_STR(ZZ_POOL_MAX_THREADS)
     "; 0 = all cores", false},
};
#define ZZ_N_OPTS (sizeof zz_opt_table / sizeof zz_opt_table[0])

static int zz_opt_set(const zz_opt_def *d, const char *v, zz_opts *o, const char *origin) {
  char *base = (char *)o + d->offset, *end = NULL;
  switch (d->type) {
    case ZZ_OPT_STR: *(const char **)base = v; return 0;
    case ZZ_OPT_FLAG: *(bool *)base = true; return 0;
    case ZZ_OPT_INT: {
      long x = strtol(v, &end, 10);
      if (end == v || *end || x < 0 || x > 1000000000) break;
      *(int *)base = (int)x;
      return 0;
    }
    case ZZ_OPT_LL: {
      long long x = strtoll(v, &end, 10);
      if (end == v || *end) break;
      *(long long *)base = x;
      return 0;
    }
    case ZZ_OPT_FLOAT: {
      float x = strtof(v, &end);
      if (end == v || *end || x < 0) break;
      *(float *)base = x;
      return 0;
    }
    case ZZ_OPT_PERCENT: { /* six numbers separated by spaces or commas */
      double *p = (double *)base;
      const char *c = v;
      int k = 0;
      for (; k < 6; k++) {
        while (*c == ' ' || *c == ',') c++;
        double x = strtod(c, &end);
        if (end == c || x < 0 || x > 100) break;
        p[k] = x;
        c = end;
      }
      while (*c == ' ' || *c == ',') c++;
      if (k < 6 || *c) break;
      return 0;
    }
  }
  if (d->type == ZZ_OPT_PERCENT)
    fprintf(stderr, "zigzag: %s --%s: '%s' is not six percentages (WG WC CG CC HG HC)\n", origin, d->flag, v);
  else
    fprintf(stderr, "zigzag: %s --%s: '%s' is not a valid value\n", origin, d->flag, v);
  return 2;
}

void zz_opts_defaults(zz_opts *o) {
  memset(o, 0, sizeof *o);
  o->command = "";
  for (size_t i = 0; i < ZZ_N_OPTS; i++) {
    const zz_opt_def *d = &zz_opt_table[i];
    const char *env = d->env ? getenv(d->env) : NULL;
    if (env && *env && zz_opt_set(d, env, o, d->env) == 0) continue;
    if (d->def) zz_opt_set(d, d->def, o, "default");
  }
}

void zz_opts_help(FILE *f) {
  fprintf(f,
          "zigzag — high-throughput batch generation with offloading\n\n"
          "usage:\n"
          "  zigzag generate --model DIR|PRESET [--dummy] --prompts FILE|- --out FILE|- [--max-new-tokens N]\n"
          "  zigzag tokenize --model DIR TEXT\n"
          "  zigzag bench    --model PRESET --dummy [--prompt-len S] [--gen-len N] [--json]\n\n"
          "options (environment variable in brackets sets the default):\n");
  for (size_t i = 0; i < ZZ_N_OPTS; i++) {
    const zz_opt_def *d = &zz_opt_table[i];
    char left[64];
    snprintf(left, sizeof left, "--%s%s", d->flag,
             d->type == ZZ_OPT_FLAG ? "" : d->type == ZZ_OPT_PERCENT ? " WG WC CG CC HG HC" : " X");
    fprintf(f, "  %-24s %s", left, d->help);
    if (d->def) fprintf(f, " (default %s)", d->def);
    if (d->env) fprintf(f, " [%s]", d->env);
    fprintf(f, "\n");
  }
  fprintf(f, "\nother tunables: OPENBLAS_NUM_THREADS (GEMM threads of the CPU device)\n"
             "  ZZ_FAULT_KILL_AFTER_BLOCKS=N (testing: generate commits N blocks, half-writes a line, SIGKILLs itself)\n"
             "presets:");
  for (const char *const *p = zz_config_preset_names(); *p; p++) fprintf(f, " %s", *p);
  fprintf(f, "\n");
}

int zz_opts_parse(int argc, char **argv, zz_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
      zz_opts_help(stdout);
      return -1;
    }
    if (strncmp(a, "--", 2) != 0 || strcmp(a, "-") == 0) {
      if (!*o->command)
        o->command = a;
      else if (!o->text)
        o->text = a;
      else {
        fprintf(stderr, "zigzag: unexpected argument '%s'\n", a);
        return 2;
      }
      continue;
    }
    const char *name = a + 2, *val = NULL;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const zz_opt_def *d = NULL;
    for (size_t k = 0; k < ZZ_N_OPTS; k++)
      if (strlen(zz_opt_table[k].flag) == len && strncmp(zz_opt_table[k].flag, name, len) == 0)
        d = &zz_opt_table[k];
    if (!d) {
      fprintf(stderr, "zigzag: unknown option '%s' (see zigzag --help)\n", a);
      return 2;
    }
    if (d->policy) o->policy_flags_given = true;
    if (d->type == ZZ_OPT_PERCENT && !eq) {
      /* --percent 20 80 0 100 100 0: six separate arguments */
      char joined[256] = "";
      int k = 0;
      for (; k < 6 && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0; k++) {
        strncat(joined, argv[++i], sizeof joined - strlen(joined) - 2);
        strcat(joined, " ");
      }
      int r = zz_opt_set(d, joined, o, "option");
      if (r) return r;
      continue;
    }
    if (d->type == ZZ_OPT_FLAG) {
      if (eq) {
        fprintf(stderr, "zigzag: --%s takes no value\n", d->flag);
        return 2;
      }
    } else if (eq) {
      val = eq + 1;
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      fprintf(stderr, "zigzag: --%s needs a value\n", d->flag);
      return 2;
    }
    int r = zz_opt_set(d, val ? val : "", o, "option");
    if (r) return r;
  }
  if (!*o->command) {
    zz_opts_help(stderr);
    return 2;
  }
  if (o->max_new_tokens < 1) {
    fprintf(stderr, "zigzag: --max-new-tokens must be at least 1\n");
    return 2;
  }
  if (o->threads > ZZ_POOL_MAX_THREADS || o->attn_threads > ZZ_POOL_MAX_THREADS) {
    fprintf(stderr, "zigzag: --threads and --attn-threads take 0 (all cores) to %d\n", ZZ_POOL_MAX_THREADS);
    return 2;
  }
  if (o->top_p > 1) {
    fprintf(stderr, "zigzag: --top-p must be in (0, 1]\n");
    return 2;
  }
  return 0;
}

zz_status zz_opts_policy(const zz_opts *o, zz_policy *out) {
  if (o->policy) {
    if (o->policy_flags_given)
      return zz_error(ZZ_ERR_INVALID_ARG, "give either --policy or the policy flags (--percent, --gpu-batch-size, ...), not both");
    return zz_policy_parse(o->policy, out);
  }
  zz_policy p;
  zz_policy_default(&p);
  p.gpu_batch_size = o->gpu_batch_size;
  p.num_gpu_batches = o->num_gpu_batches;
  p.w_gpu = o->percent[0];
  p.w_cpu = o->percent[1];
  p.c_gpu = o->percent[2];
  p.c_cpu = o->percent[3];
  p.a_gpu = o->percent[4];
  p.a_cpu = o->percent[5];
  p.cpu_attention = o->cpu_cache_compute;
  p.compress_weight = o->compress_weight;
  p.compress_cache = o->compress_cache;
  p.attn_sparsity = o->attn_sparsity;
  p.overlap = !o->no_overlap;
  ZZ_CHECK(zz_policy_check(&p));
  *out = p;
  return ZZ_OK;
}

zz_status zz_opts_tiers(const zz_opts *o, zz_tiers *out) {
  zz_tiers t = {.offload_dir = o->offload_dir};
  ZZ_CHECK(zz_parse_bytes(o->cpu_mem, &t.cap[ZZ_TIER_CPU]));
  ZZ_CHECK(zz_parse_bytes(o->disk_mem, &t.cap[ZZ_TIER_DISK]));
  *out = t;
  return ZZ_OK;
}

zz_status zz_opts_engine(const zz_opts *o, zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                         const zz_shape *shape, zz_engine **out) {
  zz_policy pol;
  zz_tiers tiers;
  ZZ_CHECK(zz_opts_policy(o, &pol));
  ZZ_CHECK(zz_opts_tiers(o, &tiers));
  ZZ_CHECK(zz_engine_create_tiers(dev, m, ck, &pol, shape, &tiers, out));
  char pb[256], g[32], c[32], d[32];
  const zz_memplan *p = zz_engine_plan(*out);
  fprintf(stderr, "zigzag: policy %s; plan: device (%s) %s, cpu %s, disk %s\n", zz_policy_str(&pol, pb, sizeof pb),
          dev->ops->name, zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_GPU), g, sizeof g),
          zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_CPU), c, sizeof c),
          zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_DISK), d, sizeof d));
  return ZZ_OK;
}

zz_status zz_opts_device(const zz_opts *o, zz_device **out) {
  size_t cap = 0;
  ZZ_CHECK(zz_parse_bytes(o->gpu_mem, &cap));
  if (strcmp(o->device, "cpu") == 0) return zz_device_create_cpu(cap, o->threads, o->attn_threads, out);
  if (strcmp(o->device, "cuda") == 0) return zz_device_create_cuda(0, cap, o->attn_threads, out);
  if (strcmp(o->device, "auto") == 0) return zz_device_create_best(cap, o->threads, o->attn_threads, out);
  return zz_error(ZZ_ERR_INVALID_ARG, "--device %s: want auto, cpu or cuda", o->device);
}

int zz_report_failure(zz_status st) {
  fprintf(stderr, "zigzag: %s: %s\n", zz_status_str(st), zz_error_message());
  return st == ZZ_ERR_INVALID_ARG ? 2 : 1;
}

void zz_report_peaks(const zz_engine *eng, FILE *f) {
  size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_engine_peaks(eng, peak);
  const zz_memplan *plan = zz_engine_plan(eng);
  fprintf(f, "zigzag: peak memory");
  for (int t = 0; t < ZZ_TIER_COUNT; t++) {
    size_t sum = 0;
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) sum += peak[t][p];
    char a[32], b[32];
    fprintf(f, "%s %s %s of %s planned", t ? "," : ":", t == ZZ_TIER_GPU ? "device" : zz_tier_name((zz_tier)t),
            zz_format_bytes(sum, a, sizeof a), zz_format_bytes(zz_memplan_tier_total(plan, (zz_tier)t), b, sizeof b));
  }
  fprintf(f, "\n");
}
