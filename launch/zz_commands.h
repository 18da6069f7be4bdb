/*
 * zz_commands.h — the model a command opens (launch/setup.c), the run its options
 * become (launch/run.c), the commands (bench, plan, profile, perplexity, the
 * pipeline) and their reports.
 */
#ifndef ZZ_COMMANDS_H
#define ZZ_COMMANDS_H

#include "zz_opts.h"
#include "zz_planner.h" /* zz_plan, which a run keeps */

/* The model a command opens (launch/setup.c), before its run:
 *   zz_setup_model(o, ZZ_SETUP_WEIGHTS, &cfg, &model, &ck, NULL); */
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
/* A run: what the options become, once (launch/run.c). The options are read and
 * never written; what the run decides (the planner's policy, the device, the
 * threads) is here.
 *   zz_run r;
 *   zz_run_open(&r, o, true, &model, ck, &shape);  ... r.eng ...  zz_run_free(&r); */
typedef struct zz_run {
  zz_policy pol;             /* the policy that runs: the options', or with --hw and none given the planner's */
  char pline[256];           /* the planner's policy line ("" when the options gave the policy) */
  const char *device;        /* auto, cpu or cuda: --device, or with --hw under auto the file's device */
  int threads, attn_threads; /* --threads, --attn-threads, or where not given the plan's */
  zz_plan pred;              /* --hw: the plan of the policy that runs on the file's machine, and its binding */
  bool predicted;
  zz_device *dev;
  zz_engine *eng;
  double load_s; /* seconds the engine took to build (weights loaded) */
} zz_run;
/* The whole run of one process: the options' policy, device and threads (with
 * plan and --hw the planner's where none are given, and its binding applied before
 * the device starts), the device, the engine for shape (printing the policy and the
 * plan). On failure what was built stays in r for zz_run_free. */
zz_status zz_run_open(zz_run *r, const zz_opts *o, bool plan, const zz_model *m, const zz_checkpoint *ck,
                      const zz_shape *shape);
/* The engine and the device (NULL after). */
void zz_run_free(zz_run *r);
/* The steps of zz_run_open, which a pipeline's rank takes one at a time, agreeing
 * with the other ranks between them (launch/pipe.c): */
/* the options' policy, device and threads; nothing built */
void zz_run_init(zz_run *r, const zz_opts *o);
/* a planned policy as the run takes it: its printed line (r->pline), read back */
zz_status zz_run_take_policy(zz_run *r, const zz_policy *planned);
struct zz_threads;
/* a plan's thread split th: each of --threads (th.gemm, 0 beside a GPU) and
 * --attn-threads that o does not give takes the plan's; whether any did */
bool zz_run_take_threads(zz_run *r, const zz_opts *o, const struct zz_threads *th);
/* r->dev: r->device (CUDA device `ordinal` for cuda, a pipeline's local rank) with
 * r's threads, --gpu-mem, and --cpu-dtype and --cpu-act as model m's checkpoint and
 * r's policy take them (zz_opts_cpu_act) */
zz_status zz_run_device(zz_run *r, const zz_opts *o, const zz_model *m, int ordinal);
/* the engine options of layers [layer_begin, layer_end) (0, 0: all) and groups */
zz_status zz_run_engine_opts(const zz_run *r, const zz_opts *o, const zz_shape *shape, int layer_begin, int layer_end,
                             int groups, zz_engine_opts *out);
/* r->eng from eo, printing the policy and the plan's bytes per tier, prefixed by
 * who ("" or "rank 1: ") */
zz_status zz_run_engine(zz_run *r, const zz_model *m, const zz_checkpoint *ck, const zz_engine_opts *eo,
                        const char *who);

int zz_cmd_bench(const zz_opts *o);
struct zz_pipeline_plan;

/* `mpirun ... --hw FILE` with no policy given: the planner's split and each
 * rank's policy for its slice (zz_pipe_plan_search, as `zigzag plan --ranks
 * ranks --hw FILE` plans them) for `groups` micro-batch groups (0: the
 * planner's choice, out->groups); hw_out (or
 * NULL): the hardware file it read and checked. out NULL: read and check only
 * (the ranks that receive rank 0's plan). */
zz_status zz_run_plan_pipeline(const zz_opts *o, const zz_model *m, const zz_shape *shape, int ranks, int groups,
                               struct zz_pipeline_plan *out, struct zz_hw *hw_out);
struct zz_planner_opts;

/* The planner's options from the command line: the shape (--prompt-len,
 * --gen-len), the tiers' capacities, the compression and overlap given, --max-block,
 * --no-compression, --cpu-dtype and --cpu-act as the run takes them on model m and
 * hw's device (zz_opts_cpu_act; launch/plan.c). */
zz_status zz_opts_planner(const zz_opts *o, const zz_model *m, const zz_hw *hw, struct zz_planner_opts *po);
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

#endif /* ZZ_COMMANDS_H */
