/*
 * zz_search.h — the policy search (planner/search.c: the placement LP with
 * GLPK, each rounded answer confirmed by the memory plan) and a pipeline's split,
 * policies and throughput (planner/pipe.c).
 */
#ifndef ZZ_SEARCH_H
#define ZZ_SEARCH_H

#include "zz_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ search */

typedef struct zz_planner_opts {
  zz_shape shape;
  int layer_begin, layer_end; /* the slice to plan (0, 0: all) */
  int n_groups;               /* micro-batch groups T (pipeline); 0: a pipeline search chooses T
                                 (zz_pipe_groups for a given policy), a single plan one */
  size_t cap[ZZ_TIER_COUNT];  /* 0: the hardware file's */
  bool allow_compression;     /* search cw/cc too where hw has 4-bit rates (default on; --no-compression) */
  bool force_compress_weight, force_compress_cache;
  bool no_overlap;
  bool bf16_weights;   /* --cpu-dtype bf16: plan the CPU device with bf16 weight matrices (never chosen
                                   by the planner on its own; needs the file's gemm_bf16_flops) */
  zz_cpu_act cpu_act;  /* --cpu-act: int8 plans the CPU device's 4-bit linears with int8 x (never chosen
                          by the planner; needs the file's gemm_q4_int8_flops; the search then tries
                          compressed weights only, as the engine runs int8 with nothing else) */
  bool int8_auto;      /* --cpu-act auto: compressed weights the plan has (given or chosen) priced with int8 x,
                          as the run's CPU device takes them; nothing forced */
  const int *gbs_list; /* NULL: the default list */
  int n_gbs;
  const int *num_gb_list; /* NULL: the default list */
  int n_num_gb;
  int max_gbs;   /* 0: no bound besides memory */
  int max_block; /* largest gbs x num_gb (the prompts there are); 0: no bound */
  bool verbose;
  bool progress; /* a pipeline search says on stderr, every few seconds, how far it is */
} zz_planner_opts;

void zz_planner_opts_default(zz_planner_opts *o);
/* The capacity of each tier a plan gets: o's overrides, else the file's. */
void zz_planner_caps(const zz_hw *hw, const zz_planner_opts *o, size_t cap[ZZ_TIER_COUNT]);

/* The planner's answer for one process or one rank's slice: the policy, its
 * prediction (cost.threads: the thread split it assumed, zz_plan_threads), and
 * for a run the binding (a run fills it, launch/run.c; the runtime applies it).
 * A pipeline's plan adds the layer cuts (zz_pipeline_plan). Plain data: a
 * pipeline broadcasts it from rank 0. */
typedef struct zz_plan {
  zz_policy policy;
  zz_cost cost;
  zz_plan_bind bind;    /* how the process that runs it binds (zeros: not bound) */
  double lp_objective;  /* the relaxed LP's seconds per sequence of this (gbs, num_gb) */
  double x[ZZ_X_COUNT]; /* the LP's fractions before rounding */
  int candidates;       /* (gbs, num_gb, cpu attention, ...) tried */
  int feasible;         /* of which confirmed by the memory plan */
  double search_s;      /* wall time of the search */
} zz_plan;

/* The engine's memory plan for a policy on hw (the engine's own check: the same
 * spec zz_engine_plan_check builds, against hw's capacities). ZZ_ERR_INFEASIBLE
 * names the short tier and by how much. */
zz_status zz_plan_check(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                        zz_memplan *out);

/* Solves the placement LP for one (gbs, num_gb, flags): x_out the fractions,
 * *obj_out the relaxed seconds per sequence. ZZ_ERR_INFEASIBLE when no placement
 * fits. cap: the per-tier bytes the LP may use. */
zz_status zz_plan_lp(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_cost_in *in,
                     const size_t cap[ZZ_TIER_COUNT], double x_out[ZZ_X_COUNT], double *obj_out);

/* The best policy for m on hw. ZZ_ERR_INFEASIBLE when nothing fits, naming the
 * tier that is short and by how much for the smallest block. */
zz_status zz_plan_search(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, zz_plan *out);

/* Policy searches (zz_plan_search, zz_pipe_plan_search) this process has run: a
 * pipeline plans once, on rank 0 (ZZ_PLAN_TRACE makes each rank say its count). */
int zz_planner_searches(void);

/* Evaluates a given policy (cost and peaks) the same way. */
zz_status zz_plan_eval(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                       zz_plan *out);

/* ================================================================ a workload */

/* A batch file as the engine runs it: n sequences in run order, each its prompt
 * tokens and the new tokens it asks (each ends there: EOS is not foreseen). Without
 * refill: blocks of gbs x num_gb consecutive ones, GPU batches of gbs within a block.
 * With refill (zz_request.refill, where the plan keeps every cache on the device as
 * the engine needs): requests of `per_request` sequences (0: all; zigzag generate
 * gathers --refill-blocks blocks), each run through the runtime's slot schedule
 * (zz_slots, runtime/slots.c). */
typedef struct zz_workload {
  int64_t n;
  const int64_t *prompt_len; /* [n] */
  const int64_t *max_new;    /* [n] */
  bool refill;
  int64_t per_request;
  /* a group's shared prefix computed once at its prompt step (runtime/prefix.c's
   * rule, zz_prefix_shared) where the engine shares prefixes: ids (NULL, or [n] each
   * sequence's tokens) gives each group's exactly; without them, common[n_common],
   * the tokens every prompt starts with, is the prefix every group shares */
  bool share_prefix;
  const int32_t *const *ids;
  const int32_t *common;
  int64_t n_common;
  /* a newcomer (refill) computes only what follows the prefix it shares with its
   * group's block, as the runtime does where it shares prefixes (zz_engine_refill
   * copies the rows of the longest prefix another slot's prompt shares with it,
   * runtime/prefix.c; counted here against the block's first prompt, the same
   * where the block's prompts share one prefix, as a system prompt's) */
  bool refill_shares_prefix;
} zz_workload;

/* The prediction for a workload (planner/workload.c). */
typedef struct zz_workload_cost {
  /* seconds: the prompt steps of blocks (a fresh block of a refill request too), the
   * newcomers' prompt steps alone (refill), the decode steps; first_s: of the prompt
   * steps, the first of each request's groups (what zz_result.prefill_s spans) */
  double prefill_s, refill_s, decode_s, first_s;
  int64_t blocks;   /* blocks begun (a refill request's fresh blocks included) */
  int64_t refilled; /* sequences that took an ended one's slot */
  bool refill;      /* priced with refill (asked, and the plan's caches are on the device) */
  /* positions the engine computes (zz_result's pos_computed, summed): each block's
   * prompts padded to its longest (its shared prefix once), newcomers' prompts, then
   * each decode step's GPU batches up to their last running sequence; the useful
   * ones (prompt + new tokens less one each, less shared_pos); the prompt positions a
   * shared prefix took off (zz_engine_stats.prefix_shared) */
  int64_t prefill_pos, decode_pos, useful_pos, shared_pos;
} zz_workload_cost;

/* Predicts w under pol on hw: the engine's memory plan for w's longest prompt and
 * most new tokens (o's shape is not read; its capacities and device options are),
 * each block priced at its own padded prompt length and each GPU batch at its own
 * most new tokens; with refill each turn of the slot schedule at its own rows and
 * keys. ZZ_ERR_INFEASIBLE where the plan does not fit. */
zz_status zz_plan_workload(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                           const zz_workload *w, zz_workload_cost *out);

/* ================================================================ pipeline */

#define ZZ_PLAN_MAX_RANKS 64
#define ZZ_PLAN_MAX_GROUPS 1024 /* --num-inner-iterations' bound too */

/* The groups T of an m-rank pipeline that no search chose: the user's
 * (--num-inner-iterations) where given (> 0), else m (the least with no decode
 * bubble). A pipeline search starts from it and tries more (zz_pipe_plan_search);
 * a run that plans takes the plan's T, one that does not takes this. */
int zz_pipe_groups(int ranks, int given);

/* A pipeline's plan: the layer cuts and each rank's zz_plan. Computed once, on
 * rank 0, and broadcast as bytes (it holds no pointers). */
typedef struct zz_pipeline_plan {
  int ranks, groups;                 /* m ranks, T micro-batch groups */
  int bounds[ZZ_PLAN_MAX_RANKS + 1]; /* rank r holds layers [bounds[r], bounds[r+1]) */
  zz_plan rank[ZZ_PLAN_MAX_RANKS];   /* each rank's policy and cost for its slice */
  double prefill_s, decode_s;        /* one block of T groups through the pipeline */
  double prefill_tps, decode_tps, total_tps;
  double bubble; /* fraction of rank-time idle */
  double net_s;  /* per token step, the slowest hop's transfer */
} zz_pipeline_plan;

/* Plans an m-rank pipeline on hw (one machine per rank): the layer split balanced
 * by predicted per-layer time (zz_split_costs, fed by the cost model),
 * each rank's own policy for its slice, the groups T (o->n_groups when > 0, else
 * searched: m, 2m, 3m, ... within --max-block; out->groups) and the pipeline's
 * throughput. All ranks share one gbs x num_gb (the hidden states that cross
 * ranks have one shape). */
zz_status zz_pipe_plan_search(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                              zz_pipeline_plan *out);

/* The pipeline of m ranks all running the given policy pol (plan --ranks m
 * --policy P): the split by per-layer seconds under pol (as mpirun --hw FILE
 * --policy P splits), each rank's cost of pol on its slice, the throughput.
 * ZZ_ERR_INFEASIBLE naming the rank whose slice cannot hold pol. */
zz_status zz_pipe_plan_eval(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                            const zz_policy *pol, zz_pipeline_plan *out);

/* The contiguous split of n layers into k stages (the one split algorithm):
 * cost[l] is layer l's seconds per phase (prefill, decode), and the split
 * minimises w[prefill] x the slowest stage's prefill + w[decode] x the slowest
 * stage's decode, each phase of a pipeline waiting on its own slowest stage (a
 * stage heavy in one phase only, the LM head's in decode, is balanced by giving
 * it less of the other layers). bounds_out[0..k]. With w = {1, 0} and decode
 * costs 0, the min-max split of one cost. */
zz_status zz_split_costs(const double (*cost)[ZZ_PHASE_COUNT], int n, int k, const double w[ZZ_PHASE_COUNT],
                         int *bounds_out);

/* The split rule for a given policy: each layer's predicted seconds of one block
 * per phase (prefill, all decode steps; the cost model, every layer costed as if
 * the policy applied to it) on hw, split by zz_split_costs into ranks slices for
 * a pipeline of groups T: bounds_out[ranks + 1]. Without a hardware file hw is
 * zz_hw_nominal's machine. run: the run's device options the cost model
 * prices (its bf16_weights and cpu_act, --cpu-dtype and --cpu-act; its other
 * fields are not read; NULL: neither). */
zz_status zz_plan_split(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                        const zz_planner_opts *run, int ranks, int groups, int *bounds_out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_SEARCH_H */
