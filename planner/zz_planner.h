/*
 * zz_planner.h — the planner: a machine described by a hardware file, FlexGen's
 * cost model (appendix A.3) extended with LM-Offload's terms, and the policy
 * search that solves the placement LP with GLPK for every (gbs, num_gb, CPU
 * attention, compression) and confirms each rounded answer with the engine's own
 * memory plan. It sees the runtime's types and its sizes/memory plan, never an
 * architecture's name, and has no CUDA or MPI in it.
 *
 * Usage:
 *     zz_hw hw;              zz_hw_load("planner/hw/t4-gcp.json", &hw);
 *     zz_planner_opts po;    zz_planner_opts_default(&po);   po.shape = {512, 32};
 *     zz_plan plan;          zz_plan_search(&model, &hw, &po, &plan);
 *     printf("%s\n", zz_policy_str(&plan.policy, buf, sizeof buf));
 *
 * Files: hw.c (the hardware file), cost.c (the cost model), search.c (the LP and
 * the search), pipe.c (a pipeline's split, policies and throughput), profile.c
 * (measuring this machine through the engine's paths). docs/planner.md documents
 * every field and term.
 */
#ifndef ZZ_PLANNER_H
#define ZZ_PLANNER_H

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ hardware */

#define ZZ_HW_MAX_POINTS 24

/* One measured point of a rate curve: at x (GEMM rows M, or threads) the rate y
 * (flop/s). Between points the rate is interpolated linearly in log2(x); outside
 * them it is the nearest end's. */
typedef struct zz_hw_point {
  double x, y;
} zz_hw_point;

/* A machine, as the cost model sees it. Bandwidths in bytes/s, rates in flop/s,
 * memories in bytes. Every field is documented in docs/planner.md. */
typedef struct zz_hw {
  char name[96];
  char device[8];      /* compute device: "cuda" (f16) or "cpu" (f32, memory is host RAM) */
  size_t gpu_mem;      /* device memory for the memory plan (after what the device keeps) */
  size_t gpu_reserved; /* device memory the device keeps for itself (cuBLAS workspace, staging) */
  size_t cpu_mem, disk_mem;
  int cpu_cores;                      /* cores the host gives this rank */
  double ctog_bw, gtoc_bw;            /* host → device and device → host copies */
  double disk_read_bw, disk_write_bw; /* the disk tier, page cache bypassed */
  int n_gemm;                         /* GEMM [M, K] x [K, N] on the compute device by rows M */
  zz_hw_point gemm[ZZ_HW_MAX_POINTS];
  double bmm_prefill_flops; /* attention (batched GEMM) on the device, prefill-shaped */
  double bmm_decode_flops;  /* attention on the device, one query per sequence */
  int n_cpu_attn;           /* CPU attention beside a host cache, by thread count */
  zz_hw_point cpu_attn[ZZ_HW_MAX_POINTS];
  double cpu_flops; /* host GEMM peak (information; the CPU device's rates are in gemm) */
  /* 4-bit compression, measured through the kernels the engine runs (all zero:
   * the device has no 4-bit ops or the file no rates, and the search leaves
   * compression out; see zz_hw_has_q4) */
  int n_gemm_q4; /* linear with 4-bit weights (dequantize and multiply) by rows M */
  zz_hw_point gemm_q4[ZZ_HW_MAX_POINTS];
  double bmm_prefill_q4_flops, bmm_decode_q4_flops; /* the device's attention over a 4-bit cache */
  int n_cpu_attn_q4;                                /* CPU attention over a 4-bit host cache, by thread count */
  zz_hw_point cpu_attn_q4[ZZ_HW_MAX_POINTS];
  double quant_bw; /* cache rows quantized at store: 4-bit bytes written per second */
  /* bf16 weight matrices (--cpu-dtype bf16, CPU device only; 0 points: the file
   * cannot price them and a bf16 plan is refused naming the field) */
  int n_gemm_bf16; /* linear with bf16 weights by rows M */
  zz_hw_point gemm_bf16[ZZ_HW_MAX_POINTS];
  int machines;       /* machines of a cluster (ranks at most), 1 for one box */
  double net_bw;      /* between machines, bytes/s (0: none) */
  double net_latency; /* seconds per message */
} zz_hw;

/* Reads and checks a hardware file: every required field present, numbers finite
 * and positive, points sorted. Errors name the file and the field. */
zz_status zz_hw_load(const char *path, zz_hw *out);
/* Writes hw as a hardware file (the same fields zz_hw_load reads). */
zz_status zz_hw_save(const zz_hw *hw, const char *path);
/* The checks zz_hw_load runs, on a struct (where: the file name for messages). */
zz_status zz_hw_check(const zz_hw *hw, const char *where);
/* A run (generate, bench) with a hardware file: the device it opens, --device
 * (device: "auto", "cpu" or "cuda") or under auto the file's. */
const char *zz_hw_run_device(const zz_hw *hw, const char *device);
/* Whether hw describes this machine closely enough to run its plan here: the
 * device a run computes on is the file's, and the RAM the plan may fill (the cpu
 * tier: cpu_cap, else the file's; on the cpu device also its memory: gpu_cap,
 * else the file's) is at most this machine's (MemTotal). ZZ_ERR_INVALID_ARG
 * naming the file, both numbers and what to do otherwise. where: the file name. */
zz_status zz_hw_check_here(const zz_hw *hw, const char *where, const char *device, size_t cpu_cap, size_t gpu_cap);
/* Rate of a curve at x (see zz_hw_point). */
double zz_hw_rate(const zz_hw_point *pts, int n, double x);
/* The thread count of the fastest CPU attention within max_threads (>= 1). */
int zz_hw_attn_threads(const zz_hw *hw, int max_threads);
/* LM-Offload's thread control (§4): how the host's cores are split. */
typedef struct zz_threads {
  int gemm; /* the CPU device's compute pool (--threads); 0 on a GPU, whose GEMMs are not the host's */
  int attn; /* CPU attention's pool (--attn-threads) */
  int io;   /* I/O lanes, one thread each (weight load, cache load, cache store) */
} zz_threads;
/* The split for hw: on the CPU device the GEMMs take every core and CPU
 * attention, which runs on the compute lane between them, the fastest count of
 * the profile's curve within all cores; beside a GPU the I/O lanes keep a core
 * each and CPU attention takes the fastest count within the rest. */
zz_threads zz_hw_threads(const zz_hw *hw);

/* The thread rule for a process given `cores` cores of hw's machine (<= 0: the
 * file's cpu_cores), as zz_hw_threads splits them. Everything that applies the
 * plan's threads (generate, bench, each mpirun rank over its binding's cores) asks
 * this. */
zz_threads zz_plan_threads(const zz_hw *hw, int cores);
/* A split as this process applies it: GEMM and attention threads at most the
 * cores its cgroup allows (zz_limits_here); the plan's own split is left as
 * predicted. */
zz_threads zz_plan_threads_here(const zz_threads *th);

/* How the runtime binds the process that runs a plan (stage/bind.c applies it,
 * before the device starts its threads; the planner only decides). */
typedef struct zz_plan_bind {
  bool on;         /* bind: the plan's thread split runs (no --threads / --attn-threads given) */
  int gpu_ordinal; /* inside the NUMA node nearest this GPU; -1: the CPU device's (first node with cores) */
} zz_plan_bind;
/* The binding rule for one process alone on hw's machine. */
zz_plan_bind zz_plan_binding(const zz_hw *hw, bool threads_given);

/* A nominal machine of a device ("cpu" or "cuda") for a layer split without a
 * hardware file: a 12 GB/s link and 20 TFLOPS for every rate (4-bit, and bf16 on the cpu),
 * memories unbounded. */
void zz_hw_nominal(const char *device, zz_hw *out);

/* Whether hw has every 4-bit rate the cost model needs to price compression. */
bool zz_hw_has_q4(const zz_hw *hw);

/* ================================================================ cost model */

/* The nine placement fractions (FlexGen's p): weights, cache, activations on
 * GPU, CPU, disk. */
typedef enum zz_x {
  ZZ_X_WG = 0,
  ZZ_X_WC,
  ZZ_X_WD,
  ZZ_X_CG,
  ZZ_X_CC,
  ZZ_X_CD,
  ZZ_X_HG,
  ZZ_X_HC,
  ZZ_X_HD,
  ZZ_X_COUNT
} zz_x;

/* The terms of one layer's step time. The four lanes run concurrently with
 * overlap on (the step takes the longest of everything below); the disk and the
 * two link directions are each one shared resource, so everything crossing them
 * is summed too. With overlap off the step is compute + the three I/O lanes. */
typedef enum zz_term {
  ZZ_TERM_COMPUTE = 0, /* GEMMs, attention on the device or the CPU, (de)quantization */
  ZZ_TERM_WEIGHT,      /* weight lane: disk → host → device */
  ZZ_TERM_LOAD,        /* cache-load lane: cache and hidden states in */
  ZZ_TERM_STORE,       /* cache-store lane: new cache rows and hidden states out */
  ZZ_TERM_DISK,        /* all disk reads and writes of the step */
  ZZ_TERM_LINK_IN,     /* all host → device bytes */
  ZZ_TERM_LINK_OUT,    /* all device → host bytes */
  ZZ_TERM_HOST,        /* CPU device: compute + its copies, which share the cores (0 on a GPU) */
  ZZ_TERM_COUNT
} zz_term;
const char *zz_term_name(zz_term t);

typedef enum zz_phase { ZZ_PHASE_PREFILL = 0, ZZ_PHASE_DECODE, ZZ_PHASE_COUNT } zz_phase;

/* A term as a linear function of the placement: c + sum a[v] x[v] seconds. */
typedef struct zz_lin {
  double c, a[ZZ_X_COUNT];
} zz_lin;

/* What the cost of a block depends on besides the placement. */
typedef struct zz_cost_in {
  const zz_model *m;
  const zz_hw *hw;
  zz_shape shape;
  int gbs, num_gb;
  bool overlap, cpu_attention;
  bool compress_weight, compress_cache; /* 4-bit group-wise (sizes from sizes.c) */
  zz_qfmt wq, cq;                       /* their formats (bits 0: FlexGen's, zz_policy's convention) */
  int attn_threads;                     /* CPU attention threads (0: the best the hw file allows) */
  bool bf16_weights;                    /* --cpu-dtype bf16: 2-D weights in bf16 (sizes.c), gemm_bf16 rates */
} zz_cost_in;

/* hw's device as the engine's plans see it (zz_plan_check): its kind's
 * description with capacity bytes, bf16 weights (--cpu-dtype bf16), and 4-bit ops
 * only where the file prices them. Nothing is opened. */
void zz_hw_device_desc(const zz_hw *hw, size_t capacity, bool bf16_weights, zz_device_desc *out);
/* The compute dtype of hw's device and the dtype weights are stored in off it. */
zz_dtype zz_hw_compute_dtype(const zz_hw *hw);

/* Terms of layer l in phase ph (decode: the average step, t = s + n/2 keys). */
void zz_cost_layer(const zz_cost_in *in, int l, zz_phase ph, zz_lin term[ZZ_TERM_COUNT]);
/* Value of a term at x. */
double zz_lin_eval(const zz_lin *t, const double x[ZZ_X_COUNT]);
/* Step time of a layer from its terms at x: the max over terms (overlap) or the
 * sum of the lanes. */
double zz_cost_step(const zz_lin term[ZZ_TERM_COUNT], const double x[ZZ_X_COUNT], bool overlap);

/* The prediction for one block of gbs x num_gb sequences over a slice. */
typedef struct zz_cost {
  double prefill_s, decode_s;                   /* one block, one group */
  double term_s[ZZ_PHASE_COUNT][ZZ_TERM_COUNT]; /* each term summed over layers (and decode steps) */
  double prefill_tps, decode_tps, total_tps;    /* FlexGen's definitions */
  size_t peak[ZZ_TIER_COUNT];                   /* the memory plan's bytes per tier */
  int attn_threads;                             /* CPU attention threads used */
  zz_threads threads;                           /* the host's split this prediction assumed */
} zz_cost;

/* Predicts a realised policy on layers [plan's slice): each layer's placement is
 * the one the memory plan gave it (weights per layer, cache per (layer, batch)),
 * so what is predicted is what the engine will run. layer_s (NULL, or one per
 * slice layer): each layer's seconds of the block (prefill + decode steps). */
void zz_cost_plan(const zz_cost_in *in, const zz_memplan *plan, zz_cost *out, double *layer_s);

/* ================================================================ search */

typedef struct zz_planner_opts {
  zz_shape shape;
  int layer_begin, layer_end; /* the slice to plan (0, 0: all) */
  int n_groups;               /* micro-batch groups (pipeline); 0/1: one */
  size_t cap[ZZ_TIER_COUNT];  /* 0: the hardware file's */
  bool allow_compression;     /* search cw/cc too where hw has 4-bit rates (default on; --no-compression) */
  bool force_compress_weight, force_compress_cache;
  bool no_overlap;
  bool bf16_weights;   /* --cpu-dtype bf16: plan the CPU device with bf16 weight matrices (never chosen
                                   by the planner on its own; needs the file's gemm_bf16_flops) */
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
 * for a run the binding (zz_opts_plan_policy fills it; the runtime applies it).
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

/* ================================================================ pipeline */

#define ZZ_PLAN_MAX_RANKS 64

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
 * each rank's own policy for its slice, and the pipeline's throughput. All ranks
 * share one gbs x num_gb (the hidden states that cross ranks have one shape). */
zz_status zz_pipe_plan_search(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                              zz_pipeline_plan *out);

/* The pipeline of m ranks all running the given policy pol (plan --ranks m
 * --policy P): the split by per-layer seconds under pol (as mpirun --hw FILE
 * --policy P splits), each rank's cost of pol on its slice, the throughput.
 * ZZ_ERR_INFEASIBLE naming the rank whose slice cannot hold pol. */
zz_status zz_pipe_plan_eval(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                            const zz_policy *pol, zz_pipeline_plan *out);

/* The contiguous split of n layers of costs cost[] into k stages minimising the
 * slowest stage: bounds_out[0..k] (the one split algorithm). */
zz_status zz_split_costs(const double *cost, int n, int k, int *bounds_out);

/* The split rule for a given policy: each layer's predicted seconds of one block
 * (prefill + all decode steps; the cost model, every layer costed as if the
 * policy applied to it) on hw, split by zz_split_costs into ranks slices:
 * bounds_out[ranks + 1]. Without a hardware file hw is zz_hw_nominal's machine.
 * bf16_weights: --cpu-dtype bf16. */
zz_status zz_plan_split(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                        bool bf16_weights, int ranks, int *bounds_out);

/* ================================================================ profile */

typedef struct zz_profile_opts {
  const char *offload_dir; /* where the disk test file goes (NULL: $TMPDIR or /tmp) */
  double budget_s;         /* rough total seconds (default 15) */
  int threads;             /* the CPU device's compute threads (0: all cores) */
  bool verbose;
} zz_profile_opts;

/* Measures this machine through the engine's paths (the device's copy lanes, the
 * disk tier's I/O, the device's linear and attention ops, CPU attention per
 * thread count) into hw. */
zz_status zz_profile_run(const zz_profile_opts *o, zz_hw *out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_PLANNER_H */
