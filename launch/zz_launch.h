/*
 * zz_launch.h — the command line of zigzag: the options table (every option and
 * tunable with its environment variable, default and meaning, printed by
 * `zigzag --help`), the job-file bookkeeping of `generate` (--resume, the
 * progress line, committing each finished block) and `bench`.
 *
 * Usage:
 *     zz_opts o;  zz_opts_defaults(&o);
 *     if (zz_opts_parse(argc, argv, &o) == 0) ... o.command ...
 */
#ifndef ZZ_LAUNCH_H
#define ZZ_LAUNCH_H

#include <sys/types.h>

#include "zz_planner.h" /* zz_plan, which a setup keeps */
#include "zz_runtime.h"


typedef struct zz_opts {
  const char *command; /* generate, tokenize, bench */
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
  bool resume, progress, no_progress;
  const char *text;      /* tokenize's argument */
  const char *text_file; /* perplexity: --text FILE */
  const char *messages;  /* chat-template: --messages FILE */
  int window;            /* perplexity: tokens per window (0: the model's positions - 1) */
  /* the policy flags (FlexGen's names) and the tiers */
  double percent[6]; /* --percent WG WC CG CC HG HC */
  bool cpu_cache_compute, compress_weight, compress_cache, no_overlap;
  double attn_sparsity; /* a whole number of billionths (zz_sparsity_parse) */
  const char *offload_dir, *cpu_mem, *disk_mem;
  bool policy_flags_given; /* any policy flag on the command line */
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
  const char *cpu_isa;   /* vector code of the CPU kernels: auto, portable, avx2, avx512 */
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
zz_status zz_opts_policy(const zz_opts *o, zz_policy *out);
zz_status zz_opts_device(const zz_opts *o, zz_device **out);
/* The same with CUDA device `ordinal` for --device cuda (a pipeline's local rank). */
zz_status zz_opts_device_at(const zz_opts *o, int ordinal, zz_device **out);
/* --cpu-mem, --disk-mem, --offload-dir (the GPU capacity is the device's). */
zz_status zz_opts_tiers(const zz_opts *o, zz_tiers *out);
/* Builds the engine the options describe, printing the policy and the plan's
 * bytes per tier on stderr when verbose. */
zz_status zz_opts_engine(const zz_opts *o, zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                         const zz_shape *shape, zz_engine **out);
/* The engine options for layers [layer_begin, layer_end) (0, 0: all) and groups. */
zz_status zz_opts_engine_opts(const zz_opts *o, const zz_shape *shape, int layer_begin, int layer_end, int groups,
                              zz_engine_opts *out);
/* Builds an engine from eo, printing the same line, prefixed by who ("" or "rank 1: "). */
zz_status zz_opts_engine_slice(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_engine_opts *eo,
                               const char *who, zz_engine **out);
/* --layers "a,b,c": bounds[nranks + 1] of the slices of nlayers layers over nranks
 * ranks (bounds[0] = 0, bounds[nranks] = nlayers). */
zz_status zz_opts_parse_layers(const char *text, int nlayers, int nranks, int *bounds);
/* --temperature, --top-k, --top-p, --seed. */
zz_sampling zz_opts_sampling(const zz_opts *o);

/* The setup sequence every command runs (launch/setup.c): options → model →
 * policy → device → engine, in steps a command checks its own arguments between.
 *   zz_setup s = {0};
 *   zz_setup_model(o, ZZ_SETUP_WEIGHTS, &cfg, &model, &ck, NULL);
 *   zz_setup_policy(&s, o, true, &model, &shape);  zz_setup_engine(&s, &model, ck, &shape);
 *   ... s.eng ...  zz_setup_free(&s); */
enum {
  ZZ_SETUP_WEIGHTS = 1,          /* a directory's checkpoint (none with --dummy); a preset needs --dummy */
  ZZ_SETUP_TOKENIZER = 2,        /* the directory's tokenizer, required */
  ZZ_SETUP_TOKENIZER_IF_ANY = 4, /* the tokenizer when the directory has one (vocab.json or tokenizer.json) */
};
/* config.json or the preset, the model, and what `what` asks for (ck, tok may be
 * NULL when not asked). On failure what was opened stays in the outputs for the
 * caller to free. */
zz_status zz_setup_model(const zz_opts *o, unsigned what, zz_config *cfg, zz_model *model, zz_checkpoint **ck,
                         zz_tokenizer **tok);
typedef struct zz_setup {
  zz_opts opts;    /* as the run uses them: with --hw the planner's policy, device and threads */
  char pline[256]; /* the planner's policy line (opts.policy points here when it chose) */
  zz_policy pol;   /* the policy that runs */
  zz_plan pred;    /* predicted: the plan of that policy on the --hw machine */
  bool predicted;
  zz_device *dev;
  zz_engine *eng;
  double load_s; /* seconds zz_setup_engine took to build the engine (weights loaded) */
} zz_setup;
/* s->opts from o; with plan and --hw the planner's policy when none is given
 * (zz_opts_plan_policy) and its binding applied, before any device starts; then
 * the policy. */
zz_status zz_setup_policy(zz_setup *s, const zz_opts *o, bool plan, const zz_model *m, const zz_shape *shape);
/* The device, then the engine for shape (printing the policy and the plan). */
zz_status zz_setup_engine(zz_setup *s, const zz_model *m, const zz_checkpoint *ck, const zz_shape *shape);
/* The engine and the device (NULL after). */
void zz_setup_free(zz_setup *s);

/* ids already present in an output file, for --resume; also a prompt's hash by id */
typedef struct zz_resume_set zz_resume_set;
/* Ids in the set (0 for NULL). */
int64_t zz_resume_count(const zz_resume_set *s);
bool zz_resume_has(const zz_resume_set *s, const char *id_json);
/* An empty set (NULL when out of memory); *fresh says whether id was new. */
zz_resume_set *zz_resume_new(void);
zz_status zz_resume_insert(zz_resume_set *s, const char *id_json, bool *fresh);
/* The same with a value kept beside the id (a prompt's hash), and its lookup. */
zz_status zz_resume_put(zz_resume_set *s, const char *id_json, uint64_t value, bool *fresh);
bool zz_resume_get(const zz_resume_set *s, const char *id_json, uint64_t *value_out);
/* Every id once, in no order: start with *pos = 0; NULL at the end. */
const char *zz_resume_next(const zz_resume_set *s, size_t *pos);
void zz_resume_free(zz_resume_set *s);

/* --out of a generate job (launch/jobfile.c). Nothing that was in it is lost on
 * any error or kill: --resume appends to it in place (a torn last line cut); a new
 * job over an existing file writes a new file in its directory that replaces it by
 * rename at the first commit; a path that does not exist is created with O_EXCL.
 * A symbolic link at the path is refused. Locked (flock) for the whole job; beside
 * a regular file, PATH.job.json records the job that wrote it (zz_job_record). */
typedef struct zz_output {
  const char *path; /* "-": stdout */
  FILE *f;          /* where lines go (NULL until zz_output_begin for a file being replaced) */
  FILE *old;        /* the file a new job replaces: kept whole and locked until then */
  zz_newfile nf;    /* that new file */
  mode_t mode;      /* the old file's mode, given to the new one */
  bool regular, created, resume, begun;
  long good_len; /* --resume: bytes of the complete lines */
  char *record;  /* the job record written beside it, or NULL */
} zz_output;
/* Opens and locks path, refusing a link, a directory, a file another job holds.
 * With resume reads the ids it holds (done_out; refusing a file that is not one
 * job's output); changes nothing. */
zz_status zz_output_open(zz_output *o, const char *path, bool resume, zz_resume_set **done_out);
/* Starts writing, once nothing else can refuse the job: --resume cuts a torn last
 * line; a new job over an existing file starts its new file. record (or NULL): the
 * job record, written beside the output before its first line is at the path. */
zz_status zz_output_begin(zz_output *o, const char *record);
/* Flushes and syncs a finished block's lines; the first commit of a new job over
 * an existing file puts the new file in place. */
zz_status zz_output_commit(zz_output *o);
/* A file this job created but never began writing is removed: a refused job
 * leaves no trace. */
void zz_output_close(zz_output *o);
/* PATH.job.json */
void zz_output_record_path(const char *path, char *buf, size_t len);
/* Non-empty lines of a regular file, or -1 (stdin, pipes). */
int64_t zz_count_lines(const char *path);

typedef struct zz_progress {
  bool on;
  bool tty; /* stderr is a terminal (asked once) */
  int64_t total, done, skipped, tokens;
  double t0, last;
  int64_t live;       /* tokens of the block still running (zz_progress_token) */
  int64_t max_tokens; /* prompts to run x the most new tokens a line asks: the ETA's bound before a
                         first block ends (0: unknown) */
  int64_t errors;     /* lines answered with an error */
  const char *out;    /* where the lines go, for the summary */
} zz_progress;
void zz_progress_start(zz_progress *p, const zz_opts *o, int64_t total);
void zz_progress_update(zz_progress *p, int64_t seqs, int64_t tokens);
/* One token of a running block: a terminal's line is redrawn at most twice a second. */
void zz_progress_token(zz_progress *p);
/* The progress line's end, then the one-line summary (prompts, tokens, tokens/s,
 * elapsed, the output), printed on stderr whatever it is. */
void zz_progress_finish(zz_progress *p);

/* A generate job's files and prompts (launch/job.c): the one process, or rank 0 of
 * a pipeline. The other ranks open only the model side (files = false). */
typedef struct zz_job {
  zz_opts opts; /* the options, max_prompt_len resolved */
  bool files;   /* holds the prompts, the output and the tokenizer */
  zz_config cfg;
  zz_model model;
  zz_checkpoint *ck; /* NULL with --dummy */
  zz_tokenizer *tok; /* NULL without vocab.json */
  zz_shape shape;    /* max_prompt_len, max_new_tokens */
  zz_policy pol;
  zz_prompt_reader *rd;
  zz_resume_set *done_ids; /* ids already in --out (--resume) */
  zz_resume_set *hashes;   /* every prompt's id and hash (zz_job_scan), each id once */
  int64_t todo;            /* prompts not yet in --out */
  int64_t longest;         /* tokens of the longest of those (0: none) */
  char *record;            /* the job record (PATH.job.json), JSON text */
  zz_output out;
  /* the block being gathered: [cap] each, n used */
  zz_prompt *prompts;
  int32_t **ids;
  int64_t *lens;
  uint64_t *streams; /* prompt number in the file: the sampling stream */
  int64_t n, cap;
  bool more;     /* prompts may be left */
  int64_t index; /* prompts read, skipped ones included */
  zz_progress prog;
  int64_t kill_after, committed, written; /* blocks (ZZ_FAULT_KILL_AFTER_BLOCKS), blocks, prompts */
  struct zz_job_lines *lx;                /* each line's own settings, its completions, its error (launch/job.c) */
} zz_job;

/* Resolves the model, checkpoint, shape and policy; with files also the tokenizer,
 * the prompt reader and --out (locked; with --resume its ids read). */
zz_status zz_job_open(zz_job *j, const zz_opts *o, bool files);
/* Starts writing --out (truncated unless --resume) and the progress line; blocks of
 * up to cap prompts. Called once nothing else can refuse the job. */
zz_status zz_job_start(zz_job *j, int64_t cap);
/* The next up to max_n prompts not yet in the output, as a request (n = 0: none
 * left); valid until the next gather. */
zz_status zz_job_gather(zz_job *j, int64_t max_n, zz_request *req_out);
/* Writes the gathered prompts' lines from res, flushes and syncs them. */
zz_status zz_job_commit(zz_job *j, const zz_result *res);
/* The one line of an interrupted (--resume hint) or failed job; the exit code. */
int zz_job_fail(const zz_job *j, zz_status st);
void zz_job_close(zz_job *j);
/* SIGINT / SIGTERM ask for a stop at the next safe point; a second one ends at once. */
void zz_catch_stop_signals(void);

int zz_cmd_bench(const zz_opts *o);
struct zz_plan;
struct zz_plan_bind;
/* With --hw: the options a run uses (out), the planner's policy as out->policy
 * (line, len) when none was given (saying so on stderr), its threads where none
 * are given, and the plan of the policy that runs (pred: prediction and
 * pred->bind, which the caller applies with zz_run_bind before its device starts;
 * nothing is bound here). */
zz_status zz_opts_plan_policy(const zz_opts *o, const zz_model *m, const zz_shape *shape, zz_opts *out, char *line,
                              size_t len, struct zz_plan *pred);
struct zz_pipeline_plan;
struct zz_hw;
/* `mpirun ... --hw FILE` with no policy given: the planner's split and each
 * rank's policy for its slice (zz_pipe_plan_search, as `zigzag plan --ranks
 * ranks --hw FILE` plans them) for `groups` micro-batch groups; hw_out (or
 * NULL): the hardware file it read and checked. out NULL: read and check only
 * (the ranks that receive rank 0's plan). */
zz_status zz_opts_plan_pipeline(const zz_opts *o, const zz_model *m, const zz_shape *shape, int ranks, int groups,
                                struct zz_pipeline_plan *out, struct zz_hw *hw_out);
struct zz_threads;
/* The plan's thread split th into out: each of --threads (th.gemm, 0 beside a GPU)
 * and --attn-threads that given does not set takes the plan's; whether any did.
 * out may be given. */
bool zz_opts_take_threads(zz_opts *out, const zz_opts *given, const struct zz_threads *th);
/* Applies a plan's binding (stage/bind.c, hwloc) to this process, before its
 * device starts its threads; says on stderr where, or why it is not bound (never
 * fails the run). Does nothing when b->on is false. */
void zz_run_bind(const struct zz_plan_bind *b);
/* zigzag plan / zigzag profile (launch/plan.c). */
int zz_cmd_plan(const zz_opts *o);
int zz_cmd_profile(const zz_opts *o);
/* zigzag perplexity (launch/perplexity.c). */
int zz_cmd_perplexity(const zz_opts *o);
/* bench's b prompts of s tokens: BOS, then ids drawn from a fixed seed. */
zz_status zz_bench_prompts(const zz_config *cfg, int64_t b, int s, int32_t ***ids_out, int64_t **lens_out);
void zz_bench_prompts_free(int32_t **ids, int64_t *lens, int64_t b);
/* FlexGen's throughputs for b prompts of s tokens and n new each: prefill b*s /
 * prefill_s, decode b*(n-1) / decode_s, total b*n / (prefill_s + decode_s). */
void zz_bench_rates(int64_t b, int s, int n, const zz_result *res, double rate_out[3]);

/* The pipeline (launch/pipe.c, in the zigzag executable only: it needs MPI). */
/* Ranks mpirun started (OMPI_COMM_WORLD_SIZE, PMI_SIZE); 1 when not under mpirun
 * (launch/options.c, which refuses the mpirun-only options without it). */
int zz_pipe_ranks(void);
/* Whether mpirun (or a PMI launcher) started this process, with any number of ranks. */
bool zz_under_mpirun(void);
/* --cpu-isa / ZZ_CPU_ISA: the vector code it names, refused when this CPU lacks it. */
zz_status zz_opts_cpu_isa(const zz_opts *o, zz_cpu_isa *out);
/* `generate` or `bench` over the ranks: MPI_Init_thread, binding, a slice per
 * rank, zz_stage_run with the engine adapter, MPI_Finalize. The exit code. */
int zz_cmd_pipe(const zz_opts *o);
/* Prints "zigzag: <status>: <message>" on stderr; returns the exit code (2 for a
 * bad argument, 1 otherwise). */
int zz_report_failure(zz_status st);
/* "peak memory: device X of plan Y, cpu ..., disk ..." — the measured peaks of a
 * run next to the plan they never exceed. */
void zz_report_peaks(const zz_engine *eng, FILE *f);

#endif
