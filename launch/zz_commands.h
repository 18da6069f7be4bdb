/*
 * zz_commands.h — the setup sequence every command runs (launch/setup.c), the
 * commands (bench, plan, profile, perplexity, the pipeline) and their reports.
 */
#ifndef ZZ_COMMANDS_H
#define ZZ_COMMANDS_H

#include "zz_opts.h"
#include "zz_planner.h" /* zz_plan, which a setup keeps */

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
 * ranks --hw FILE` plans them) for `groups` micro-batch groups (0: the
 * planner's choice, out->groups); hw_out (or
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

#endif /* ZZ_COMMANDS_H */
