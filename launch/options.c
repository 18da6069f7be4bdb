/*
 * options.c — one table of every option and tunable: its flag, environment
 * variable, default and meaning. Environment variables set defaults; flags
 * override them; `zigzag --help` prints the table.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zz_launch.h"

/* SIZE: text kept as given ("16G"), checked by zz_parse_bytes at parse time */
/* SPARSITY: a decimal of at most 9 places read exactly (zz_sparsity_parse) into a double;
 * CHOICE: one of the row's words, kept as text */
typedef enum {
  ZZ_OPT_STR,
  ZZ_OPT_INT,
  ZZ_OPT_LL,
  ZZ_OPT_FLOAT,
  ZZ_OPT_FLAG,
  ZZ_OPT_PERCENT,
  ZZ_OPT_SIZE,
  ZZ_OPT_SPARSITY,
  ZZ_OPT_CHOICE
} zz_opt_type;

/* The commands an option applies to (bits): given to another, it is refused, naming
 * the option and the command. MPIRUN: only in a pipeline started by mpirun. */
enum {
  ZZ_CMD_GENERATE = 1 << 0,
  ZZ_CMD_BENCH = 1 << 1,
  ZZ_CMD_PLAN = 1 << 2,
  ZZ_CMD_PROFILE = 1 << 3,
  ZZ_CMD_PERPLEXITY = 1 << 4,
  ZZ_CMD_TOKENIZE = 1 << 5,
  ZZ_CMD_CHAT_TEMPLATE = 1 << 6,
  ZZ_CMD_MPIRUN = 1 << 7,
};
static const char *const zz_cmd_names[] = {"generate",   "bench",    "plan",          "profile",
                                           "perplexity", "tokenize", "chat-template", NULL};
#define ZZ_N_CMDS (sizeof zz_cmd_names / sizeof zz_cmd_names[0] - 1)

typedef struct zz_opt_def {
  const char *flag; /* without the leading "--"; NULL: an environment variable only (testing hooks) */
  const char *env;  /* environment variable that sets the default */
  zz_opt_type type;
  size_t offset;   /* into zz_opts */
  const char *def; /* default, as text (NULL: none) */
  const char *help;
  bool policy; /* part of the policy: conflicts with --policy */
  /* numbers: the accepted range [lo, hi] ((lo, hi] when lo_open), checked at
   * parse time and printed by --help; NaN and infinities are never accepted */
  double lo, hi;
  bool lo_open;
  unsigned cmds;       /* ZZ_CMD_* bits: the commands it applies to */
  const char *choices; /* CHOICE: the words accepted, separated by spaces */
} zz_opt_def;

#define ZZ_O(f) offsetof(zz_opts, f)
#define ZZ_STR_(x) #x
#define ZZ_STR(x) ZZ_STR_(x)

/* short names for the table's command column only */
#define G ZZ_CMD_GENERATE
#define B ZZ_CMD_BENCH
#define P ZZ_CMD_PLAN
#define F ZZ_CMD_PROFILE
#define X ZZ_CMD_PERPLEXITY
#define T ZZ_CMD_TOKENIZE
#define ZZ_RUN (G | B | X)     /* the commands that run the model */
#define ZZ_POL (G | B | P | X) /* the commands that take a policy (plan predicts it) */
#define ZZ_PIPE (G | B | ZZ_CMD_MPIRUN)

static const zz_opt_def zz_opt_table[] = {
    {"model", "ZZ_MODEL", ZZ_OPT_STR, ZZ_O(model), "opt-125m",
     "model directory (config.json, *.safetensors, vocab.json, merges.txt) or preset name", false, 0, 0, false,
     G | B | P | X | T | ZZ_CMD_CHAT_TEMPLATE, NULL},
    {"messages", NULL, ZZ_OPT_STR, ZZ_O(messages), NULL,
     "chat-template: a JSON file holding the messages, [{\"role\": ..., \"content\": ...}, ...]", false, 0, 0, false,
     ZZ_CMD_CHAT_TEMPLATE, NULL},
    {"tools", NULL, ZZ_OPT_STR, ZZ_O(tools), NULL,
     "chat-template: a JSON file holding the tools, [{\"type\": \"function\", \"function\": {...}}, ...]", false, 0, 0,
     false, ZZ_CMD_CHAT_TEMPLATE, NULL},
    {"chat-template-kwargs", NULL, ZZ_OPT_STR, ZZ_O(chat_kwargs), NULL,
     "chat-template: more template variables as a JSON object, e.g. '{\"enable_thinking\": false}'", false, 0, 0, false,
     ZZ_CMD_CHAT_TEMPLATE, NULL},
    {"no-generation-prompt", NULL, ZZ_OPT_FLAG, ZZ_O(no_generation_prompt), NULL,
     "chat-template: render with add_generation_prompt false", false, 0, 0, false, ZZ_CMD_CHAT_TEMPLATE, NULL},
    {"dummy", NULL, ZZ_OPT_FLAG, ZZ_O(dummy), NULL, "use deterministic random weights (presets need it)", false, 0, 0,
     false, G | B, NULL},
    {"prompts", NULL, ZZ_OPT_STR, ZZ_O(prompts), NULL,
     "generate: JSON Lines input, one {\"prompt\": text} or {\"input_ids\": [...]} (+ \"id\", settings) or an OpenAI batch "
     "request per line; - is stdin (plan: predicts the whole file as generate runs it)",
     false, 0, 0, false, G | P, NULL},
    {"out", NULL, ZZ_OPT_STR, ZZ_O(out), NULL, "generate: JSON Lines output, one line per prompt; - is stdout", false,
     0, 0, false, G | F, NULL},
    {"max-new-tokens", NULL, ZZ_OPT_INT, ZZ_O(max_new_tokens), "32", "generate: new tokens per prompt at most", false,
     1, ZZ_MAX_POSITIONS, false, G | P, NULL},
    {"max-prompt-len", "ZZ_MAX_PROMPT_LEN", ZZ_OPT_INT, ZZ_O(max_prompt_len), "0",
     "generate: longest prompt in tokens (sizes the KV cache); 0 = the job's longest prompt", false, 0,
     ZZ_MAX_POSITIONS, false, G, NULL},
    {"temperature", NULL, ZZ_OPT_FLOAT, ZZ_O(temperature), "0", "sampling temperature; 0 = greedy", false, 0, 100,
     false, G, NULL},
    {"top-k", NULL, ZZ_OPT_INT, ZZ_O(top_k), "0", "sample among the k most likely tokens; 0 = all", false, 0,
     ZZ_MAX_VOCAB, false, G, NULL},
    {"top-p", NULL, ZZ_OPT_FLOAT, ZZ_O(top_p), "1", "nucleus sampling mass; 1 = off", false, 0, 1, true, G, NULL},
    {"seed", "ZZ_SEED", ZZ_OPT_LL, ZZ_O(seed), "0", "sampling seed (each prompt draws from its own stream)", false, 0,
     1e18, false, G, NULL},
    {"repetition-penalty", NULL, ZZ_OPT_FLOAT, ZZ_O(repetition_penalty), "1",
     "Hugging Face's repetition penalty over prompt and output tokens; 1 = off", false, 0, 100, true, G, NULL},
    {"logprobs", NULL, ZZ_OPT_INT, ZZ_O(logprobs), "-1",
     "every output line carries each token's log-probability and the K most likely; -1 = off", false, -1, 20, false, G,
     NULL},
    {"resume", NULL, ZZ_OPT_FLAG, ZZ_O(resume), NULL,
     "generate: keep the lines already in --out and skip their prompts (by id)", false, 0, 0, false, G, NULL},
    {"keep-order", NULL, ZZ_OPT_FLAG, ZZ_O(keep_order), NULL,
     "generate: blocks in file order, lines written in it (default: blocks of prompts of similar length and "
     "max tokens, lines in the order their blocks finish)",
     false, 0, 0, false, G | P, NULL},
    {"no-prefix-sharing", NULL, ZZ_OPT_FLAG, ZZ_O(no_prefix_sharing), NULL,
     "compute each prompt whole (default: the tokens a group's prompts start with are computed once and copied to "
     "each sequence's cache)",
     false, 0, 0, false, G | B | P, NULL},
    {"refill-blocks", "ZZ_REFILL_BLOCKS", ZZ_OPT_INT, ZZ_O(refill_blocks), "8",
     "generate: prompts gathered this many blocks at a time; a sequence that ends hands its slot to the next "
     "waiting prompt (continuous batching), and lines are committed once per gathering; 1 = block by block "
     "(plan --prompts predicts the run so)",
     false, 1, 4096, false, G | P, NULL},
    {"progress", NULL, ZZ_OPT_FLAG, ZZ_O(progress), NULL, "print the progress line even when stderr is not a terminal",
     false, 0, 0, false, G, NULL},
    {"no-progress", NULL, ZZ_OPT_FLAG, ZZ_O(no_progress), NULL, "never print the progress line", false, 0, 0, false, G,
     NULL},
    {"prompt-len", NULL, ZZ_OPT_INT, ZZ_O(prompt_len), "512", "bench: prompt length s", false, 1, ZZ_MAX_POSITIONS,
     false, B | P, NULL},
    {"gen-len", NULL, ZZ_OPT_INT, ZZ_O(gen_len), "32", "bench: generated tokens n", false, 1, ZZ_MAX_POSITIONS, false,
     B | P, NULL},
    {"json", NULL, ZZ_OPT_FLAG, ZZ_O(json), NULL, "bench: print one JSON object", false, 0, 0, false, B | P, NULL},
    {"text", NULL, ZZ_OPT_STR, ZZ_O(text_file), NULL, "perplexity: the text file to score", false, 0, 0, false, X,
     NULL},
    {"window", NULL, ZZ_OPT_INT, ZZ_O(window), "0",
     "perplexity: tokens per window, each scored from BOS; 0 = the model's positions - 1", false, 0, ZZ_MAX_POSITIONS,
     false, X, NULL},
    {"gpu-batch-size", "ZZ_GPU_BATCH_SIZE", ZZ_OPT_INT, ZZ_O(gpu_batch_size), "8", "sequences per GPU batch (gbs)",
     true, 1, ZZ_POLICY_MAX_GBS, false, ZZ_POL, NULL},
    {"num-gpu-batches", "ZZ_NUM_GPU_BATCHES", ZZ_OPT_INT, ZZ_O(num_gpu_batches), "1",
     "GPU batches per block (a block is gbs x num-gpu-batches sequences)", true, 1, ZZ_POLICY_MAX_NUM_GB, false, ZZ_POL,
     NULL},
    {"percent", "ZZ_PERCENT", ZZ_OPT_PERCENT, ZZ_O(percent), "100 0 100 0 100 0",
     "percent of weights, KV cache and activations on GPU and CPU; disk takes the rest", true, 0, 100, false, ZZ_POL,
     NULL},
    {"cpu-cache-compute", NULL, ZZ_OPT_FLAG, ZZ_O(cpu_cache_compute), NULL,
     "run decode attention on the CPU beside a KV cache that is not on the GPU", true, 0, 0, false, ZZ_POL, NULL},
    {"compress-weight", NULL, ZZ_OPT_FLAG, ZZ_O(compress_weight), NULL,
     "store weights in 4 bits (group 64); --policy cw=BITS/GROUP for another format", true, 0, 0, false, ZZ_POL, NULL},
    {"compress-cache", NULL, ZZ_OPT_FLAG, ZZ_O(compress_cache), NULL,
     "store the KV cache in 4 bits (group 64 along the head dim); --policy cc=BITS/GROUP for another", true, 0, 0,
     false, ZZ_POL, NULL},
    {"attn-sparsity", NULL, ZZ_OPT_SPARSITY, ZZ_O(attn_sparsity), "1",
     "decoding keeps the top ceil(s * len) keys per query and reads only their V rows; 1 = dense", true, 0, 1, true,
     ZZ_POL, NULL},
    {"no-overlap", NULL, ZZ_OPT_FLAG, ZZ_O(no_overlap), NULL, "run loads, stores and compute one after another", true,
     0, 0, false, ZZ_POL, NULL},
    {"policy", "ZZ_POLICY", ZZ_OPT_STR, ZZ_O(policy), NULL,
     "the whole policy as the one line zigzag prints (instead of the policy flags)", false, 0, 0, false, ZZ_POL, NULL},
    {"offload-dir", "ZZ_OFFLOAD_DIR", ZZ_OPT_STR, ZZ_O(offload_dir), NULL,
     "directory of the disk tier's file (default $TMPDIR or /tmp)", false, 0, 0, false, ZZ_RUN | P | F, NULL},
    {"device", "ZZ_DEVICE", ZZ_OPT_CHOICE, ZZ_O(device), "auto", "compute device: auto (CUDA if present), cpu, cuda",
     false, 0, 0, false, ZZ_RUN, "auto cpu cuda"},
    {"gpu-mem", "ZZ_GPU_MEM", ZZ_OPT_SIZE, ZZ_O(gpu_mem), "0",
     "device memory this run may use, e.g. 16G; 0 = all the device has", false, 0, 0, false, ZZ_POL, NULL},
    {"cpu-mem", "ZZ_CPU_MEM", ZZ_OPT_SIZE, ZZ_O(cpu_mem), "0",
     "host memory for the CPU tier; 0 = the RAM this process may use (MemTotal, or its cgroup's memory limit)", false,
     0, 0, false, ZZ_POL, NULL},
    {"disk-mem", "ZZ_DISK_MEM", ZZ_OPT_SIZE, ZZ_O(disk_mem), "0", "disk tier capacity; 0 = free space of --offload-dir",
     false, 0, 0, false, ZZ_POL, NULL},
    {"threads", "ZZ_THREADS", ZZ_OPT_INT, ZZ_O(threads), "0",
     "CPU compute threads; 0 = the CPUs this process may use (its cgroup's cpuset and quota)", false, 0,
     ZZ_POOL_MAX_THREADS, false, ZZ_RUN | P | F, NULL},
    {"attn-threads", "ZZ_ATTN_THREADS", ZZ_OPT_INT, ZZ_O(attn_threads), "0",
     "CPU attention threads (beside a cache off the device; any device); 0 = all cores", false, 0, ZZ_POOL_MAX_THREADS,
     false, ZZ_RUN, NULL},
    {"cpu-dtype", "ZZ_CPU_DTYPE", ZZ_OPT_CHOICE, ZZ_O(cpu_dtype), "auto",
     "cpu device: dtype of weight matrices, f32 (the reference), bf16 (half the bytes; avx512_bf16 kernels where the "
     "CPU has them) or auto: the checkpoint's (bf16 stays bf16; f32 and f16 run f32), bf16 under --dummy, f32 beside "
     "4/8-bit weights; vectors, activations and the KV cache stay f32",
     false, 0, 0, false, ZZ_POL, "auto f32 bf16"},
    {"cpu-act", "ZZ_CPU_ACT", ZZ_OPT_CHOICE, ZZ_O(cpu_act), "auto",
     "cpu device: activations of the 4/8-bit linears (--compress-weight), exact (f32, the reference), int8 (per "
     "group, integer dot products; faster, perturbs the output: docs/compression.md) or auto: int8 where the weights "
     "are 4/8-bit (held-out perplexity within 0.02% of exact), exact elsewhere; plan prices it",
     false, 0, 0, false, ZZ_RUN | P, "auto exact f32 int8"},
    {"num-inner-iterations", "ZZ_NUM_INNER_ITERATIONS", ZZ_OPT_INT, ZZ_O(num_inner_iterations), "0",
     "mpirun: micro-batch groups T per block (FlexGen's name), each gbs x num-gpu-batches prompts; 0 = the planner's "
     "choice (--hw, no policy), else the number of ranks; plan plans with it as the run runs",
     false, 0, 1024, false, ZZ_PIPE | P, NULL},
    {"peer-timeout", "ZZ_PEER_TIMEOUT", ZZ_OPT_FLOAT, ZZ_O(peer_timeout), "5",
     "mpirun: seconds a silent rank is given before every rank stops", false, 0, 86400, true, ZZ_PIPE, NULL},
    {"layers", "ZZ_LAYERS", ZZ_OPT_STR, ZZ_O(layers), NULL,
     "mpirun: m-1 cut points over the layer list (0 = input embedding, 2i+1 and 2i+2 = attention and MLP of "
     "transformer layer i, 2L+1 = output embedding): rank r runs [cut r-1, cut r); default: split by predicted cost",
     false, 0, 0, false, ZZ_PIPE, NULL},
    {"comm", "ZZ_COMM", ZZ_OPT_CHOICE, ZZ_O(comm), "mpi",
     "mpirun: how hidden states travel between ranks: mpi (pinned host buffers, MPI_Isend/Irecv overlapped with "
     "compute) or nccl (GPU buffers, ncclSend/Recv on their own stream; an NCCL build and one GPU per rank)",
     false, 0, 0, false, ZZ_PIPE, "mpi nccl"},
    {"hw", "ZZ_HW", ZZ_OPT_STR, ZZ_O(hw), NULL,
     "plan: hardware file (planner/hw/*.json, or zigzag profile's); default: measure this machine", false, 0, 0, false,
     G | B | P, NULL},
    {"ranks", NULL, ZZ_OPT_INT, ZZ_O(ranks), "0",
     "plan: pipeline ranks to plan for (one machine each); 0 = no pipeline", false, 0, 64, false, P, NULL},
    {"profile-seconds", "ZZ_PROFILE_SECONDS", ZZ_OPT_FLOAT, ZZ_O(profile_seconds), "15",
     "profile: rough seconds all measurements take together", false, 0, 3600, true, P | F, NULL},
    {"max-block", NULL, ZZ_OPT_INT, ZZ_O(max_block), "0",
     "plan: largest block (gbs x num-gpu-batches sequences) to consider, e.g. the prompts there are; 0 = any", false, 0,
     ZZ_POLICY_MAX_GBS, false, G | B | P, NULL},
    {"no-compression", NULL, ZZ_OPT_FLAG, ZZ_O(no_compression), NULL,
     "plan: leave 4-bit weights and cache out of the search (tried by default where the hardware file has 4-bit rates)",
     false, 0, 0, false, G | B | P, NULL},
    {"cpu-isa", "ZZ_CPU_ISA", ZZ_OPT_CHOICE, ZZ_O(cpu_isa), "auto",
     "vector code of the CPU kernels (attention, linear): auto (the best this CPU has), portable, avx2, avx512, amx "
     "(avx512 and AMX tiles for the bf16 and int8 linears)",
     false, 0, 0, false, ZZ_RUN | P | F, "auto portable avx2 avx512 amx"},
    {NULL, "ZZ_FAULT_KILL_AFTER_BLOCKS", ZZ_OPT_LL, ZZ_O(fault_kill_after), "-1",
     "testing: generate commits N blocks, half-writes a line, SIGKILLs itself; -1 = off", false, -1, 1e18, false, G | B,
     NULL},
    {NULL, "ZZ_FAULT_KILL_RANK", ZZ_OPT_INT, ZZ_O(fault_kill_rank), "0",
     "testing, mpirun: the rank ZZ_FAULT_KILL_AFTER_BLOCKS fails (R > 0 dies in block N)", false, 0, 1 << 20, false,
     ZZ_PIPE, NULL},
    {NULL, "ZZ_FAULT_KIND", ZZ_OPT_CHOICE, ZZ_O(fault_kind), "kill",
     "testing, mpirun: how rank R fails in block N: kill (SIGKILL), stop (SIGSTOP) or error", false, 0, 0, false,
     ZZ_PIPE, "kill stop error"},
    {NULL, "ZZ_PLAN_TRACE", ZZ_OPT_INT, ZZ_O(plan_trace), "0",
     "testing, mpirun: 1 = each rank says how many policy searches it ran (rank 0 plans, the others get its plan)",
     false, 0, 1, false, ZZ_PIPE, NULL},
};
#undef G
#undef B
#undef P
#undef F
#undef X
#undef T
#define ZZ_N_OPTS (sizeof zz_opt_table / sizeof zz_opt_table[0])

/* "[1, 4096]", "(0, 1]" or "a size such as 16G" into buf: the range --help prints
 * and every refusal names. */
static const char *zz_opt_range(const zz_opt_def *d, char *buf, size_t len) {
  switch (d->type) {
    case ZZ_OPT_INT:
    case ZZ_OPT_LL: snprintf(buf, len, "an integer in [%.0f, %.0f]", d->lo, d->hi); break;
    case ZZ_OPT_FLOAT: snprintf(buf, len, "a number in %c%g, %g]", d->lo_open ? '(' : '[', d->lo, d->hi); break;
    case ZZ_OPT_PERCENT: snprintf(buf, len, "six numbers in [%g, %g]", d->lo, d->hi); break;
    case ZZ_OPT_SIZE: snprintf(buf, len, "a size such as 16G, 512M or 1000 (bytes)"); break;
    case ZZ_OPT_SPARSITY: snprintf(buf, len, "a decimal in (0, 1] of at most 9 places"); break;
    case ZZ_OPT_CHOICE: { /* "auto, cpu or cuda" */
      size_t n = 0, words = 1;
      for (const char *c = d->choices; *c; c++) words += *c == ' ';
      buf[0] = '\0';
      const char *c = d->choices;
      for (size_t w = 0; w < words && n < len; w++) {
        size_t k = strcspn(c, " ");
        n += (size_t)snprintf(buf + n, len - n, "%s%.*s", w == 0 ? "" : w + 1 == words ? " or " : ", ", (int)k, c);
        c += k + (c[k] == ' ');
      }
      break;
    }
    default: snprintf(buf, len, "text"); break;
  }
  return buf;
}

/* Whether v is one of the space-separated words of choices. */
static bool zz_opt_choice(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *c = choices; *c;) {
    size_t k = strcspn(c, " ");
    if (k == n && n && strncmp(c, v, n) == 0) return true;
    c += k + (c[k] == ' ');
  }
  return false;
}

/* What a refusal names, by where value v came from (origin: "option", "default" or
 * the variable): "option --seed 'x'", "option --device gpu", "ZZ_DEVICE=gpu (--device)",
 * "ZZ_FAULT_KIND=boom". */
static const char *zz_opt_name(const zz_opt_def *d, const char *origin, const char *v, char *buf, size_t len) {
  bool env = d->env && strcmp(origin, d->env) == 0;
  if (env && d->flag) snprintf(buf, len, "%s=%.200s (--%s)", d->env, v, d->flag);
  else if (env || !d->flag)
    snprintf(buf, len, "%s=%.200s", d->env, v);
  else
    snprintf(buf, len, d->type == ZZ_OPT_CHOICE ? "%s --%s %.200s" : "%s --%s '%.200s'", origin, d->flag, v);
  return buf;
}

static bool zz_in_range(const zz_opt_def *d, double x) {
  return isfinite(x) && (d->lo_open ? x > d->lo : x >= d->lo) && x <= d->hi;
}

/* Sets option d from text v; 0 on success, else prints a message naming the
 * option, the value and the accepted range, and returns 2 (the exit code). */
static int zz_opt_set(const zz_opt_def *d, const char *v, zz_opts *o, const char *origin) {
  char *base = (char *)o + d->offset, *end = NULL;
  errno = 0;
  switch (d->type) {
    case ZZ_OPT_STR: *(const char **)base = v; return 0;
    case ZZ_OPT_CHOICE:
      if (!zz_opt_choice(d->choices, v)) break;
      *(const char **)base = v;
      return 0;
    case ZZ_OPT_FLAG: *(bool *)base = true; return 0;
    case ZZ_OPT_SIZE: {
      size_t bytes;
      if (zz_parse_bytes(v, &bytes) != ZZ_OK) break;
      *(const char **)base = v;
      return 0;
    }
    case ZZ_OPT_INT: {
      long long x = strtoll(v, &end, 10);
      if (end == v || *end || errno || !zz_in_range(d, (double)x)) break;
      *(int *)base = (int)x;
      return 0;
    }
    case ZZ_OPT_LL: {
      long long x = strtoll(v, &end, 10);
      if (end == v || *end || errno || !zz_in_range(d, (double)x)) break;
      *(long long *)base = x;
      return 0;
    }
    case ZZ_OPT_SPARSITY: {
      double x;
      if (zz_sparsity_parse(v, "", &x) != ZZ_OK) {
        zz_error_clear();
        break;
      }
      *(double *)base = x;
      return 0;
    }
    case ZZ_OPT_FLOAT: {
      double x = strtod(v, &end);
      if (end == v || *end || !zz_in_range(d, x)) break;
      *(float *)base = (float)x;
      return 0;
    }
    case ZZ_OPT_PERCENT: { /* six numbers separated by spaces or commas */
      double p[6];
      const char *c = v;
      int k = 0;
      for (; k < 6; k++) {
        while (*c == ' ' || *c == ',') c++;
        double x = strtod(c, &end);
        if (end == c || !zz_in_range(d, x)) break;
        p[k] = x;
        c = end;
      }
      while (*c == ' ' || *c == ',') c++;
      if (k < 6 || *c) break;
      memcpy(base, p, sizeof p);
      return 0;
    }
  }
  char range[96], name[320];
  zz_opt_name(d, origin, v, name, sizeof name);
  if (d->type == ZZ_OPT_PERCENT)
    fprintf(stderr, "zigzag: %s: not six percentages (WG WC CG CC HG HC), each in [%g, %g]\n", name, d->lo, d->hi);
  else if (d->type == ZZ_OPT_CHOICE)
    fprintf(stderr, "zigzag: %s: want %s\n", name, zz_opt_range(d, range, sizeof range));
  else
    fprintf(stderr, "zigzag: %s: out of range or not a number; want %s\n", name, zz_opt_range(d, range, sizeof range));
  return 2;
}

void zz_opts_defaults(zz_opts *o) {
  memset(o, 0, sizeof *o);
  o->command = "";
  for (size_t i = 0; i < ZZ_N_OPTS; i++) {
    const zz_opt_def *d = &zz_opt_table[i];
    const char *env = d->env ? getenv(d->env) : NULL;
    if (d->def) zz_opt_set(d, d->def, o, "default");
    /* a bad value is an error (zz_opts_parse returns it), not a default in disguise */
    if (env && *env && zz_opt_set(d, env, o, d->env) != 0) o->env_error = 2;
  }
}

/* mpirun's world size (Open MPI's variable, or a PMI launcher's); 0 when this
 * process was not started by mpirun. */
static int zz_mpirun_size(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v) > 1 ? atoi(v) : 1;
  }
  return 0;
}

int zz_pipe_ranks(void) {
  int n = zz_mpirun_size();
  return n > 1 ? n : 1;
}

bool zz_under_mpirun(void) { return zz_mpirun_size() > 0; }

zz_status zz_opts_cpu_isa(const zz_opts *o, zz_cpu_isa *out) {
  const char *name = o->cpu_isa ? o->cpu_isa : "auto";
  zz_cpu_isa isa;
  if (zz_cpu_isa_parse(name, &isa) != 0)
    return zz_error(ZZ_ERR_INVALID_ARG, "--cpu-isa %s (ZZ_CPU_ISA): want " ZZ_CPU_ISA_NAMES, name);
  if (!zz_cpu_isa_supported(isa))
    return zz_error(ZZ_ERR_INVALID_ARG, "--cpu-isa %s (ZZ_CPU_ISA): %s (the best it has: %s)", name,
                    zz_cpu_isa_why_not(isa), zz_cpu_isa_name(zz_cpu_isa_best()));
  *out = isa;
  return ZZ_OK;
}

/* An option given on the command line applies to the command, or is refused naming
 * both (a value silently ignored is a run the user did not ask for). */
static int zz_opts_check_command(const zz_opts *o, const bool *given) {
  unsigned bit = 0;
  for (size_t c = 0; c < ZZ_N_CMDS; c++)
    if (strcmp(o->command, zz_cmd_names[c]) == 0) bit = 1u << c;
  if (!bit) return 0; /* an unknown command: main names it */
  for (size_t i = 0; i < ZZ_N_OPTS; i++) {
    const zz_opt_def *d = &zz_opt_table[i];
    if (!given[i]) continue;
    if (!(d->cmds & bit)) {
      char list[160];
      size_t n = 0;
      list[0] = '\0';
      for (size_t c = 0; c < ZZ_N_CMDS && n < sizeof list; c++)
        if (d->cmds & (1u << c))
          n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", zz_cmd_names[c]);
      fprintf(stderr, "zigzag %s: --%s does not apply to %s (it is an option of %s%s; see zigzag --help)\n", o->command,
              d->flag, o->command, list, d->cmds & ZZ_CMD_MPIRUN ? " under mpirun" : "");
      return 2;
    }
    if ((d->cmds & ZZ_CMD_MPIRUN) && bit != ZZ_CMD_PLAN && !zz_under_mpirun()) { /* plan plans a pipeline, runs none */
      fprintf(stderr,
              "zigzag %s: --%s applies to a pipeline started by mpirun (mpirun -np M zigzag %s ...); this "
              "process was not\n",
              o->command, d->flag, o->command);
      return 2;
    }
  }
  return 0;
}

void zz_opts_help(FILE *f) {
  fprintf(
      f,
      "zigzag — high-throughput batch generation with offloading\n\n"
      "usage:\n"
      "  zigzag generate --model DIR|PRESET [--dummy] --prompts FILE|- --out FILE|- [--max-new-tokens N]\n"
      "  zigzag tokenize --model DIR [--] TEXT   (after --, a TEXT that starts with - is text)\n"
      "  zigzag bench    --model PRESET --dummy [--prompt-len S] [--gen-len N] [--json]\n"
      "  zigzag plan     --model M [--prompt-len S] [--gen-len N] [--hw FILE] [--gpu-mem X --cpu-mem X --disk-mem X]\n"
      "                  [--ranks m] [--json]   (the policy the planner chooses, predicted throughput)\n"
      "  zigzag plan     --model M --prompts FILE [--max-new-tokens N] [--hw FILE] ...   (a whole job predicted)\n"
      "  zigzag profile  [--out FILE]   (measure this machine: a hardware file for plan --hw)\n"
      "  zigzag perplexity --model DIR --text FILE [--window N] [policy flags]\n"
      "  zigzag chat-template --model DIR --messages FILE [--tools FILE] [--chat-template-kwargs JSON]\n"
      "                      [--no-generation-prompt]   (the text the model's chat template renders)\n"
      "  zigzag CMD --help   (that command's options only);  zigzag --version\n"
      "  mpirun -np M zigzag generate|bench ...   (a pipeline of M ranks, each a slice of the layers)\n\n"
      "options (environment variable in brackets sets the default; a bad value there is an error; an\n"
      "option given to a command it does not apply to, in braces, is refused):\n");
  for (size_t i = 0; i < ZZ_N_OPTS; i++) {
    const zz_opt_def *d = &zz_opt_table[i];
    char left[64];
    const char *arg = d->type == ZZ_OPT_FLAG ? "" : d->type == ZZ_OPT_PERCENT ? " WG WC CG CC HG HC" : " X";
    if (d->flag) snprintf(left, sizeof left, "--%s%s", d->flag, arg);
    else
      snprintf(left, sizeof left, "%s=%s", d->env, arg + 1);
    fprintf(f, "  %-24s %s", left, d->help);
    if (d->type != ZZ_OPT_STR && d->type != ZZ_OPT_FLAG) {
      char range[96];
      fprintf(f, "; %s", zz_opt_range(d, range, sizeof range));
    }
    if (d->def) fprintf(f, " (default %s)", d->def);
    if (d->env && d->flag) fprintf(f, " [%s]", d->env);
    if ((d->cmds & ((1u << ZZ_N_CMDS) - 1)) != (1u << ZZ_N_CMDS) - 1) {
      fprintf(f, " {");
      for (size_t c = 0, n = 0; c < ZZ_N_CMDS; c++)
        if (d->cmds & (1u << c)) fprintf(f, "%s%s", n++ ? " " : "", zz_cmd_names[c]);
      fprintf(f, "%s}", d->cmds & ZZ_CMD_MPIRUN ? ", under mpirun" : "");
    }
    fprintf(f, "\n");
  }
  fprintf(
      f,
      "\nother tunables: OPENBLAS_NUM_THREADS (OpenBLAS threads outside the CPU device, whose GEMMs run single-threaded on --threads)\n"
      "presets:");
  for (const char *const *p = zz_config_preset_names(); *p; p++) fprintf(f, " %s", *p);
  fprintf(f, "\n");
}

/* One row of the table for launch/help.c (per-command help, the man page, the
 * bash completion), which formats what this table holds. */
bool zz_opt_row(size_t i, zz_opt_info *out) {
  if (i >= ZZ_N_OPTS) return false;
  const zz_opt_def *d = &zz_opt_table[i];
  *out = (zz_opt_info){.flag = d->flag,
                       .env = d->env,
                       .def = d->def,
                       .help = d->help,
                       .cmds = d->cmds,
                       .mpirun = (d->cmds & ZZ_CMD_MPIRUN) != 0,
                       .takes_value = d->type != ZZ_OPT_FLAG,
                       .choices = d->choices};
  if (d->type != ZZ_OPT_STR && d->type != ZZ_OPT_FLAG) zz_opt_range(d, out->range, sizeof out->range);
  return true;
}

const char *const *zz_opt_commands(void) { return zz_cmd_names; }

/* The policy the flags or the --policy line give (both: refused). */
static zz_status zz_opts_read_policy(const zz_opts *o, zz_policy *out) {
  if (o->policy) {
    if (o->policy_flags_given)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "give either --policy or the policy flags (--percent, --gpu-batch-size, ...), not both");
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

int zz_opts_parse(int argc, char **argv, zz_opts *o) {
  bool given[ZZ_N_OPTS] = {0};
  bool options = true; /* false after "--": the rest are the command and its text (POSIX) */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (options && strcmp(a, "--") == 0) {
      options = false;
      continue;
    }
    if (options && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || (strcmp(a, "help") == 0 && !*o->command))) {
      /* "zigzag CMD --help", "zigzag help CMD", "zigzag --help CMD": that command's page */
      const char *cmd = *o->command ? o->command : NULL;
      for (int k = i + 1; !cmd && k < argc; k++)
        if (strncmp(argv[k], "-", 1) != 0) cmd = argv[k];
      return zz_opts_help_command(stdout, cmd) ? -1 : 2;
    }
    if (options &&
        (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0 || (strcmp(a, "version") == 0 && !*o->command))) {
      zz_print_version(stdout);
      return -1;
    }
    if (!options || strncmp(a, "--", 2) != 0 || strcmp(a, "-") == 0) {
      if (!*o->command) o->command = a;
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
      if (zz_opt_table[k].flag && strlen(zz_opt_table[k].flag) == len && strncmp(zz_opt_table[k].flag, name, len) == 0)
        d = &zz_opt_table[k];
    if (!d) {
      fprintf(stderr, "zigzag: unknown option '%s' (see zigzag --help)\n", a);
      return 2;
    }
    given[d - zz_opt_table] = true;
    if (d->policy) o->policy_flags_given = true;
    o->gen_given |= d->offset == ZZ_O(temperature)          ? ZZ_GIVEN_TEMPERATURE
                    : d->offset == ZZ_O(top_k)              ? ZZ_GIVEN_TOP_K
                    : d->offset == ZZ_O(top_p)              ? ZZ_GIVEN_TOP_P
                    : d->offset == ZZ_O(max_new_tokens)     ? ZZ_GIVEN_MAX_NEW
                    : d->offset == ZZ_O(repetition_penalty) ? ZZ_GIVEN_REP_PENALTY
                                                            : 0u;
    if (d->type == ZZ_OPT_PERCENT && !eq) {
      /* --percent 20 80 0 100 100 0: up to six separate arguments, joined with
       * spaces into a buffer sized for them (any length is refused cleanly) */
      size_t need = 1;
      int k = 0;
      for (; k < 6 && i + 1 + k < argc && strncmp(argv[i + 1 + k], "--", 2) != 0; k++)
        need += strlen(argv[i + 1 + k]) + 1;
      char *joined = malloc(need);
      if (!joined) {
        fprintf(stderr, "zigzag: out of memory\n");
        return 1;
      }
      joined[0] = '\0';
      for (int j = 0; j < k; j++) {
        strcat(joined, argv[++i]);
        strcat(joined, " ");
      }
      /* the parsed numbers are kept, not the text: joined can go */
      int r = zz_opt_set(d, joined, o, "option");
      free(joined);
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
  if (o->env_error) return o->env_error; /* zz_opts_defaults named the variable */
  int r = zz_opts_check_command(o, given);
  if (r) return r;
  zz_cpu_isa isa;
  if (zz_opts_cpu_isa(o, &isa) != ZZ_OK) return zz_report_failure(ZZ_ERR_INVALID_ARG);
  /* the policy (flags or --policy line) and the tier sizes are whole only now:
   * the policy is read here, once (a run takes o->pol, or the planner's) */
  zz_tiers tiers;
  zz_status st = zz_opts_read_policy(o, &o->pol);
  if (st == ZZ_OK) st = zz_opts_tiers(o, &tiers);
  if (st != ZZ_OK) return zz_report_failure(st);
  return 0;
}

zz_status zz_opts_tiers(const zz_opts *o, zz_tiers *out) {
  zz_tiers t = {.offload_dir = o->offload_dir};
  ZZ_CHECK(zz_parse_bytes(o->cpu_mem, &t.cap[ZZ_TIER_CPU]));
  ZZ_CHECK(zz_parse_bytes(o->disk_mem, &t.cap[ZZ_TIER_DISK]));
  *out = t;
  return ZZ_OK;
}

zz_sampling zz_opts_sampling(const zz_opts *o) {
  return (zz_sampling){.temperature = o->temperature, .top_k = o->top_k, .top_p = o->top_p, .seed = (uint64_t)o->seed};
}

/* An option's word, its row's default "auto" where none was given. */
static bool zz_opts_word_is(const char *given, const char *word) { return strcmp(given ? given : "auto", word) == 0; }

bool zz_opts_cpu_act_auto(const zz_opts *o) { return zz_opts_word_is(o->cpu_act, "auto"); }

zz_cpu_act zz_opts_cpu_act(const zz_opts *o, bool cpu, bool compress_weight) {
  bool i8 = zz_opts_word_is(o->cpu_act, "int8") || (cpu && compress_weight && zz_opts_cpu_act_auto(o));
  return i8 ? ZZ_CPU_ACT_INT8 : ZZ_CPU_ACT_F32;
}

bool zz_opts_cpu_bf16(const zz_opts *o, zz_dtype checkpoint, bool cpu, bool compress_weight) {
  if (!zz_opts_word_is(o->cpu_dtype, "auto")) return zz_opts_word_is(o->cpu_dtype, "bf16");
  return cpu && !compress_weight && (o->dummy || checkpoint == ZZ_DTYPE_BF16);
}

/* --layers "a,b,c": exactly nranks - 1 strictly increasing cut points inside the
 * layer list, digits and commas only (strtol's spaces and signs are refused), read
 * without stepping past the text's end. */
zz_status zz_opts_parse_layers(const char *text, int nlayers, int nranks, int *bounds) {
  const char *c = text;
  bounds[0] = 0;
  bounds[nranks] = nlayers;
  for (int r = 1; r < nranks; r++) {
    if (r > 1 && *c++ != ',')
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "--layers %.200s: want %d cut points for %d ranks, separated by commas; "
                      "found %d",
                      text, nranks - 1, nranks, r - 1);
    if (*c < '0' || *c > '9')
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "--layers %.200s: cut point %d is not a number (want %d comma-separated "
                      "integers for %d ranks)",
                      text, r, nranks - 1, nranks);
    char *end = NULL;
    errno = 0;
    long v = strtol(c, &end, 10);
    if (errno || v <= bounds[r - 1] || v >= nlayers)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "--layers %.200s: want %d increasing cut points in 1..%d (the layer list: 0 "
                      "input embedding, 2i+1 and 2i+2 attention and MLP of transformer layer i, %d output "
                      "embedding)",
                      text, nranks - 1, nlayers - 1, nlayers - 1);
    bounds[r] = (int)v;
    c = end;
  }
  if (*c)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--layers %.200s: want exactly %d cut point%s for %d rank%s; '%.40s' is left over", text,
                    nranks - 1, nranks == 2 ? "" : "s", nranks, nranks == 1 ? "" : "s", c);
  return ZZ_OK;
}

int zz_report_failure(zz_status st) {
  fprintf(stderr, "zigzag: %s: %s\n", zz_status_str(st), zz_error_message());
  return st == ZZ_ERR_INVALID_ARG ? 2 : 1;
}
