/*
 * zz_opts.h — the options table of zigzag (launch/options.c, launch/help.c):
 * every option and tunable with its environment variable, default and meaning,
 * the parser (the policy read once, o->pol) and the values options name (tiers,
 * sampling, --cpu-act, --layers). What the options become is the run
 * (launch/run.c, zz_commands.h).
 */
#ifndef ZZ_OPTS_H
#define ZZ_OPTS_H

#include <stdio.h>
#include <sys/types.h>

#include "zz_runtime.h"

typedef struct zz_opts {
  const char *command; /* generate, bench, plan, profile, perplexity, tokenize, chat-template, man, completion */
  const char *model;
  bool dummy;
  const char *prompts, *out;
  int max_new_tokens;
  int max_prompt_len; /* 0: the job's longest prompt (zz_job_open) */
  float temperature, top_p;
  int top_k;
  long long seed;
  int prompt_len, gen_len; /* bench */
  bool json;
  int gpu_batch_size, num_gpu_batches;
  const char *policy;
  const char *device; /* auto, cpu, cuda */
  const char *gpu_mem;
  int threads;           /* CPU device compute threads (0: all cores) */
  int attn_threads;      /* CPU attention threads, any device (0: all cores) */
  const char *cpu_dtype; /* CPU device: dtype of weight matrices, f32 or bf16 */
  const char *cpu_act;   /* CPU device: x of 4/8-bit linears, f32 (exact) or int8 */
  bool resume, keep_order, progress, no_progress;
  bool no_prefix_sharing;    /* every sequence computes its whole prompt (zz_engine_opts) */
  int refill_blocks;         /* generate: blocks gathered at a time, slots refilled (zz_request.refill) */
  const char *text;          /* tokenize's argument */
  const char *text_file;     /* perplexity: --text FILE */
  const char *messages;      /* chat-template: --messages FILE */
  const char *tools;         /* chat-template: --tools FILE (a JSON list of tools) */
  const char *chat_kwargs;   /* chat-template: --chat-template-kwargs JSON (template variables) */
  bool no_generation_prompt; /* chat-template: add_generation_prompt false */
  int window;                /* perplexity: tokens per window (0: the model's positions - 1) */
  /* the policy flags (FlexGen's names) and the tiers */
  double percent[6]; /* --percent WG WC CG CC HG HC */
  bool cpu_cache_compute, compress_weight, compress_cache, no_overlap;
  double attn_sparsity; /* a whole number of billionths (zz_sparsity_parse) */
  const char *offload_dir, *cpu_mem, *disk_mem;
  bool policy_flags_given; /* any policy flag on the command line */
  zz_policy pol;           /* the policy the flags or --policy give, read once by zz_opts_parse */
  /* the pipeline (mpirun with more than one rank) */
  int num_inner_iterations; /* T micro-batch groups; 0 = the number of ranks */
  float peer_timeout;       /* seconds of silence after which a rank is lost */
  const char *layers;       /* cut points over the layer list, "3,5"; NULL = by cost */
  const char *comm;         /* how hidden states travel: "mpi" or "nccl" */
  /* the planner */
  const char *hw;        /* hardware file (plan); NULL: measure this machine */
  int ranks;             /* plan: pipeline ranks (0: one machine, no pipeline) */
  int max_block;         /* plan: largest block gbs x num_gb considered (0: any) */
  bool no_compression;   /* plan: do not search 4-bit weights / cache */
  float profile_seconds; /* profile: rough total seconds */
  const char *cpu_isa;   /* vector code of the CPU kernels: auto, portable, avx2, avx512, amx */
  /* fault injection for the tests (environment only) */
  long long fault_kill_after; /* ZZ_FAULT_KILL_AFTER_BLOCKS: blocks committed before the kill; -1 = off */
  int fault_kill_rank;        /* ZZ_FAULT_KILL_RANK: the rank that fails (mpirun) */
  const char *fault_kind;     /* ZZ_FAULT_KIND: kill, stop or error */
  int plan_trace;             /* ZZ_PLAN_TRACE (1): each rank says how many policy searches it ran */
  int env_error;              /* a ZZ_* variable held a bad value: the exit code zz_opts_parse returns */
  /* generation settings every line takes unless it gives its own (launch/lines.c) */
  float repetition_penalty; /* 1: off */
  int logprobs;             /* -1: off; k: each token's log-probability and the k most likely */
  unsigned gen_given;       /* ZZ_GIVEN_* bits: set on the command line, so generation_config.json's yield */
} zz_opts;

/* zz_opts.gen_given */
enum {
  ZZ_GIVEN_TEMPERATURE = 1 << 0,
  ZZ_GIVEN_TOP_K = 1 << 1,
  ZZ_GIVEN_TOP_P = 1 << 2,
  ZZ_GIVEN_MAX_NEW = 1 << 3,
  ZZ_GIVEN_REP_PENALTY = 1 << 4,
};

/* Defaults, then the ZZ_* environment variables (a bad value is named on stderr and
 * makes zz_opts_parse fail). */
void zz_opts_defaults(zz_opts *o);
/* 0: parsed; -1: --help printed; >0: exit code after an error message. */
int zz_opts_parse(int argc, char **argv, zz_opts *o);
void zz_opts_help(FILE *f);
/* One row of the options table, as launch/help.c formats it. */
typedef struct zz_opt_info {
  const char *flag, *env, *def, *help, *choices;
  unsigned cmds; /* bit c: applies to zz_opt_commands()[c] */
  bool mpirun;   /* only under mpirun */
  bool takes_value;
  char range[96]; /* "an integer in [1, 4096]", or "" */
} zz_opt_info;
bool zz_opt_row(size_t i, zz_opt_info *out);
/* The commands, NULL terminated, in the order of zz_opt_info.cmds's bits. */
const char *const *zz_opt_commands(void);
/* launch/help.c: command's usage and its options only (NULL or unknown: the whole
 * page; false when cmd names no command), `zigzag --version`, the man page
 * (roff) and the bash completion script, all made from the table. */
bool zz_opts_help_command(FILE *f, const char *cmd);
void zz_print_version(FILE *f);
void zz_print_man(FILE *f);
void zz_print_bash_completion(FILE *f);
/* --cpu-dtype and --cpu-act as a run takes them (issue #48): the one rule of the
 * run's device (zz_run_device) and of the planner's prices (zz_opts_planner). A
 * given word is kept; auto (the default) is, on a CPU device (cpu), int8
 * activations where the weights are 4/8-bit (compress_weight; held-out perplexity
 * within 0.02% of the exact path: docs/compression.md's quality table), and bf16
 * weight matrices where they are not and the checkpoint is bf16 or the weights are
 * --dummy's (f32 and f16 checkpoints run f32, the reference: f16 widens exactly).
 * Other devices run f32 and exact. */
zz_cpu_act zz_opts_cpu_act(const zz_opts *o, bool cpu, bool compress_weight);
bool zz_opts_cpu_act_auto(const zz_opts *o); /* --cpu-act auto (given or the default) */
bool zz_opts_cpu_bf16(const zz_opts *o, zz_dtype checkpoint, bool cpu, bool compress_weight);
/* --cpu-mem, --disk-mem, --offload-dir (the GPU capacity is the device's). */
zz_status zz_opts_tiers(const zz_opts *o, zz_tiers *out);
/* --layers "a,b,c": bounds[nranks + 1] of the slices of nlayers layers over nranks
 * ranks (bounds[0] = 0, bounds[nranks] = nlayers). */
zz_status zz_opts_parse_layers(const char *text, int nlayers, int nranks, int *bounds);
/* --temperature, --top-k, --top-p, --seed. */
zz_sampling zz_opts_sampling(const zz_opts *o);

#endif /* ZZ_OPTS_H */
