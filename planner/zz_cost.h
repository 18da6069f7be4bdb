/*
 * zz_cost.h — FlexGen's cost model (appendix A.3) with LM-Offload's terms
 * (planner/cost.c): one layer's time for a policy on a machine.
 */
#ifndef ZZ_COST_H
#define ZZ_COST_H

#include "zz_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  zz_cpu_act cpu_act; /* --cpu-act: compressed weights' linears at gemm_q4_int8 where int8 applies (the kernel's
                         rule, zz_cpu_act_int8_applies), else at gemm_q4 */
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
 * slice layer): each layer's seconds of the block, its prefill and its decode
 * steps apart (a pipeline's split weighs each phase's slowest stage). */
void zz_cost_plan(const zz_cost_in *in, const zz_memplan *plan, zz_cost *out, double (*layer_s)[ZZ_PHASE_COUNT]);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_COST_H */
