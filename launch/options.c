/*
 * options.c — one table of every option and tunable: its flag, environment
 * variable, default and meaning. Environment variables set defaults; flags
 * override them; `zigzag --help` prints the table.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zz_launch.h"

typedef enum { ZZ_OPT_STR, ZZ_OPT_INT, ZZ_OPT_LL, ZZ_OPT_FLOAT, ZZ_OPT_FLAG } zz_opt_type;

typedef struct zz_opt_def {
  const char *flag;   /* without the leading "--" */
  const char *env;    /* environment variable that sets the default */
  zz_opt_type type;
  size_t offset;      /* into zz_opts */
  const char *def;    /* default, as text (NULL: none) */
  const char *help;
} zz_opt_def;

#define ZZ_O(f) offsetof(zz_opts, f)

static const zz_opt_def zz_opt_table[] = {
    {"model", "ZZ_MODEL", ZZ_OPT_STR, ZZ_O(model), "opt-125m",
     "model directory (config.json, *.safetensors, vocab.json, merges.txt) or preset name"},
    {"dummy", NULL, ZZ_OPT_FLAG, ZZ_O(dummy), NULL, "use deterministic random weights (presets need it)"},
    {"prompts", NULL, ZZ_OPT_STR, ZZ_O(prompts), NULL,
     "generate: JSON Lines input, one {\"prompt\": text} or {\"input_ids\": [...]} (+ \"id\") per line; - is stdin"},
    {"out", NULL, ZZ_OPT_STR, ZZ_O(out), NULL, "generate: JSON Lines output, one line per prompt; - is stdout"},
    {"max-new-tokens", NULL, ZZ_OPT_INT, ZZ_O(max_new_tokens), "32", "generate: new tokens per prompt at most"},
    {"max-prompt-len", "ZZ_MAX_PROMPT_LEN", ZZ_OPT_INT, ZZ_O(max_prompt_len), "0",
     "generate: longest prompt in tokens (sizes the KV cache); 0 = positions left after max-new-tokens"},
    {"temperature", NULL, ZZ_OPT_FLOAT, ZZ_O(temperature), "0", "sampling temperature; 0 = greedy"},
    {"top-k", NULL, ZZ_OPT_INT, ZZ_O(top_k), "0", "sample among the k most likely tokens; 0 = all"},
    {"top-p", NULL, ZZ_OPT_FLOAT, ZZ_O(top_p), "1", "nucleus sampling mass; 1 = off"},
    {"seed", "ZZ_SEED", ZZ_OPT_LL, ZZ_O(seed), "0", "sampling seed (each prompt draws from its own stream)"},
    {"resume", NULL, ZZ_OPT_FLAG, ZZ_O(resume), NULL,
     "generate: keep the lines already in --out and skip their prompts (by id)"},
    {"progress", NULL, ZZ_OPT_FLAG, ZZ_O(progress), NULL, "print the progress line even when stderr is not a terminal"},
    {"no-progress", NULL, ZZ_OPT_FLAG, ZZ_O(no_progress), NULL, "never print the progress line"},
    {"prompt-len", NULL, ZZ_OPT_INT, ZZ_O(prompt_len), "512", "bench: prompt length s"},
    {"gen-len", NULL, ZZ_OPT_INT, ZZ_O(gen_len), "32", "bench: generated tokens n"},
    {"json", NULL, ZZ_OPT_FLAG, ZZ_O(json), NULL, "bench: print one JSON object"},
    {"gpu-batch-size", "ZZ_GPU_BATCH_SIZE", ZZ_OPT_INT, ZZ_O(gpu_batch_size), "8", "sequences per GPU batch (gbs)"},
    {"num-gpu-batches", "ZZ_NUM_GPU_BATCHES", ZZ_OPT_INT, ZZ_O(num_gpu_batches), "1",
     "GPU batches per block (a block is gbs x num-gpu-batches sequences)"},
    {"policy", "ZZ_POLICY", ZZ_OPT_STR, ZZ_O(policy), NULL,
     "the whole policy as the one line zigzag prints (overrides the policy flags)"},
    {"device", "ZZ_DEVICE", ZZ_OPT_STR, ZZ_O(device), "auto", "compute device: auto (CUDA if present), cpu, cuda"},
    {"gpu-mem", "ZZ_GPU_MEM", ZZ_OPT_STR, ZZ_O(gpu_mem), "0",
     "device memory this run may use, e.g. 16G; 0 = all the device has"},
    {"threads", "ZZ_THREADS", ZZ_OPT_INT, ZZ_O(threads), "0", "CPU compute threads; 0 = all cores"},
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
  }
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
    snprintf(left, sizeof left, "--%s%s", d->flag, d->type == ZZ_OPT_FLAG ? "" : " X");
    fprintf(f, "  %-22s %s", left, d->help);
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
  if (o->top_p > 1) {
    fprintf(stderr, "zigzag: --top-p must be in (0, 1]\n");
    return 2;
  }
  return 0;
}

zz_status zz_opts_policy(const zz_opts *o, zz_policy *out) {
  if (o->policy) return zz_policy_parse(o->policy, out);
  zz_policy p;
  zz_policy_default(&p);
  p.gpu_batch_size = o->gpu_batch_size;
  p.num_gpu_batches = o->num_gpu_batches;
  ZZ_CHECK(zz_policy_check(&p));
  *out = p;
  return ZZ_OK;
}

zz_status zz_opts_device(const zz_opts *o, zz_device **out) {
  size_t cap = 0;
  ZZ_CHECK(zz_parse_bytes(o->gpu_mem, &cap));
  if (strcmp(o->device, "cpu") == 0) return zz_device_create_cpu(cap, o->threads, out);
  if (strcmp(o->device, "cuda") == 0) return zz_device_create_cuda(0, cap, out);
  if (strcmp(o->device, "auto") == 0) return zz_device_create_best(cap, o->threads, out);
  return zz_error(ZZ_ERR_INVALID_ARG, "--device %s: want auto, cpu or cuda", o->device);
}
