/*
 * zz_policy.h — FlexGen's policy (where weights, cache and activations live, how a
 * block is cut, compression, sparsity; runtime/policy.c), every byte size of the
 * runtime (runtime/sizes.c), and the memory plan that places each buffer on a
 * tier before anything is allocated (runtime/memplan.c). The engine, the planner
 * and the stage all size through these.
 *
 * Usage:
 *     zz_policy pol;  zz_memplan plan;  zz_shape shape = {.prompt_len = 32, .gen_len = 16};
 *     ZZ_CHECK(zz_policy_parse("gbs=8 num_gb=2 w=50,50 c=100,0 a=100,0", &pol));
 *     ZZ_CHECK(zz_memplan_build(&model, &pol, &shape, ZZ_DTYPE_F32, ZZ_DTYPE_F32, 0, &plan));
 *     ZZ_CHECK(zz_memplan_check(&plan, caps));
 *     zz_memplan_free(&plan);
 */
#ifndef ZZ_POLICY_H
#define ZZ_POLICY_H

#include "zz_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ policy */

/* FlexGen's policy: where each kind of tensor lives and how the block is cut. */
typedef struct zz_policy {
  int gpu_batch_size;   /* gbs */
  int num_gpu_batches;  /* num_gb; a block is gbs * num_gb sequences */
  double w_gpu, w_cpu;  /* percent of weights on GPU / CPU; disk takes the rest */
  double c_gpu, c_cpu;  /* percent of the KV cache */
  double a_gpu, a_cpu;  /* percent of activations */
  bool overlap;         /* run loads/stores concurrently with compute */
  bool cpu_attention;   /* decode attention on the CPU beside an offloaded cache */
  bool compress_weight; /* 4-bit group-wise */
  bool compress_cache;
  zz_qfmt wq, cq;       /* their formats; bits 0: FlexGen's (4 bits, groups of 64) */
  double attn_sparsity; /* fraction of keys kept, a whole number of billionths in
                            (0, 1] (zz_attn_keep_units); 1.0 = dense */
} zz_policy;

/* Ranges zz_policy_check enforces (and the command line documents): far beyond
 * any useful block, small enough that every size of a plan fits 64 bits. */
#define ZZ_POLICY_MAX_GBS 65536   /* gpu_batch_size in [1, 65536] */
#define ZZ_POLICY_MAX_NUM_GB 4096 /* num_gpu_batches in [1, 4096] */

/* Everything on the device, one batch of 8, overlap on. */
void zz_policy_default(zz_policy *p);
/* "gbs=8 num_gb=1 w=100,0 c=100,0 a=100,0 overlap=1 cpu_attn=0 cw=0 cc=0 sparsity=1" */
const char *zz_policy_str(const zz_policy *p, char *buf, size_t len);
zz_status zz_policy_parse(const char *text, zz_policy *out);
zz_status zz_policy_check(const zz_policy *p);
/* Top-k sparsity as text, read exactly: a decimal in (0, 1] of at most 9 places
 * ("0.1", "1", "5e-2"; what the policy line's sparsity= and --attn-sparsity take).
 * *out is units / 1e9 for the decimal's billionths units, which zz_attn_keep_units
 * gives back; what starts the errors ("--attn-sparsity "). */
zz_status zz_sparsity_parse(const char *text, const char *what, double *out);
/* The format weights / the cache are compressed in (NULL when not compressed). */
const zz_qfmt *zz_policy_wfmt(const zz_policy *p, zz_qfmt *buf);
const zz_qfmt *zz_policy_cfmt(const zz_policy *p, zz_qfmt *buf);

/* The sizes an engine is built for: every block is padded to prompt_len and
 * generates up to gen_len tokens. */
typedef struct zz_shape {
  int64_t prompt_len; /* s: longest prompt of any block */
  int64_t gen_len;    /* n: new tokens per sequence */
  /* the tokens every block's prompts start with, computed once per group
   * (runtime/prefix.c): the cost model prices the prompt step with it; the
   * memory plan does not depend on it (each sequence keeps its rows) */
  int64_t shared_prefix;
} zz_shape;

/* ================================================================ sizes */
/*
 * Every byte count of the runtime, as plain functions of dimensions and dtypes:
 * the memory plan, the engine and the planner call these and nothing else.
 */

/* Elements of a weight (0 when absent). */
int64_t zz_weight_numel(const zz_weight_spec *w);
/* Bytes of a weight stored in dt (unaligned; Q4: FlexGen's format). */
size_t zz_weight_bytes(const zz_weight_spec *w, zz_dtype dt);
/* The same with Q4 in format q: each row (the last dim) grouped on its own. */
size_t zz_weight_bytes_q(const zz_weight_spec *w, zz_dtype dt, zz_qfmt q);
/* The dtype weight w is kept in on a tier whose plain dtype is dt: Q4 for a
 * matrix when weights are compressed (q non-NULL), dt otherwise (1-D stays). */
zz_dtype zz_weight_dtype(const zz_weight_spec *w, zz_dtype dt, const zz_qfmt *q);
/* The one rule for a weight's dtype on a tier whose dtype is dt: matrices (2-D)
 * in Q4 when compressed (q), else in bf16 when bf16 (--cpu-dtype bf16), else dt;
 * vectors in dt. zz_weight_dtype is this with bf16 false. */
zz_dtype zz_weight_dtype_b(const zz_weight_spec *w, zz_dtype dt, const zz_qfmt *q, bool bf16);
/* A layer's weights back to back, each aligned to `align`, each in the dtype
 * zz_weight_dtype_b gives (dt; matrices in Q4 of format *q when q is non-NULL, else
 * in bf16 when bf16): offsets of each weight in off_out (may be NULL; absent
 * weights get SIZE_MAX), total returned. */
size_t zz_layer_weight_layout_b(const zz_layer *l, zz_dtype dt, const zz_qfmt *q, bool bf16, size_t align,
                                size_t off_out[ZZ_MAX_LAYER_WEIGHTS]);
/* Layer l's cache as a policy stores it: the compute dtype, or Q4 in the
 * policy's cache format when the cache is compressed. */
struct zz_policy;
zz_cache_spec zz_cache_spec_for(const zz_layer *l, const struct zz_policy *p, zz_dtype compute_dt);
/* One position's K (or V) row of a cache. */
size_t zz_cache_row_bytes(const zz_cache_spec *c);
/* K (or V) of one (layer, GPU batch) on the device or the CPU: [gbs, t_max, row]. */
size_t zz_cache_bytes(const zz_cache_spec *c, int64_t gbs, int64_t t_max);
/* One sequence's K (or V) rows on disk, starting on a disk block. */
size_t zz_cache_region_bytes(const zz_cache_spec *c, int64_t t_max);
/* The hidden state of sq positions of n sequences: [n, sq, hidden]. */
size_t zz_hidden_bytes(int64_t hidden, zz_dtype dt, int64_t n, int64_t sq);
/* Device scratch of a prefill attention that materialises its scores: f32
 * [b, heads, sq, t]; 0 for a decode step (sq <= 1), which needs none. The CUDA
 * device's dense attention (part of zz_gpu_attention_scratch_bytes below). */
size_t zz_attention_scores_bytes(int64_t b, int64_t sq, int64_t t, int64_t heads);
/* The CUDA device's attention scratch: the dense scores above, or with `general`
 * (the Q4 / top-k path: a Q4 cache or keep < 1) the larger of those and what
 * zz_cuda_attention_ex takes, 2 x f32 [b, heads, sq, t]. The device's
 * attention_scratch and the planner's model of a GPU both call this. */
size_t zz_gpu_attention_scratch_bytes(int64_t b, int64_t sq, int64_t t, int64_t heads, bool general);
/* A batch's index arrays in one buffer: token ids [gbs, s], positions [gbs, s],
 * padding [gbs], last rows [gbs], int32 each; offsets in off_out, total returned. */
size_t zz_index_layout(int64_t gbs, int64_t s, size_t off_out[4]);


/*
 * The memory plan: a layout of every buffer the engine will bind — one entry per
 * buffer (what it is, tier, purpose, dtype, shape, bytes, offset in its arena) —
 * for a model slice [layer_begin, layer_end), n_groups micro-batch groups, a
 * policy and a shape; and the totals per tier and purpose. Weights are placed per
 * layer (an MoE layer's experts by count, in every MoE layer alike), KV cache per (group, layer, GPU batch) tensor pair and activations per
 * (group, GPU batch), each by FlexGen's rule: an item goes to the GPU when the
 * midpoint of its cumulative share (by size) falls below the GPU percentage, else
 * to the CPU when below GPU + CPU, else to disk. The engine allocates one arena per
 * tier and purpose of exactly these totals and only binds pointers from the
 * layout; the planner uses the same numbers as its memory constraints.
 */
typedef enum zz_buf_role {
  ZZ_BUF_WEIGHT = 0, /* home of weight (a = slice layer, b = weight); an expert-stacked weight has one home
                        per tier holding experts, c = 1 + the tier (zz_expert_split) */
  ZZ_BUF_CACHE_K,    /* home of K of (a = group, b = cache layer of the slice, c = batch) */
  ZZ_BUF_CACHE_V,
  ZZ_BUF_ACT,        /* home of the hidden state of (a = group, c = batch) */
  ZZ_BUF_INDEX,      /* index arrays of (a = group, c = batch): b = 0 device, 1 host */
  ZZ_BUF_W_SLOT,     /* device slot a (0, 1) for an offloaded layer's weights */
  ZZ_BUF_W_STAGE,    /* host: one weight read from disk */
  ZZ_BUF_LOAD,       /* host: one weight read from the checkpoint */
  ZZ_BUF_KV_SLOT,    /* device slot a (0..2): b = 0 K, 1 V */
  ZZ_BUF_KV_STAGE,   /* host slot a (0..2) for disk cache: b = 0 K, 1 V */
  ZZ_BUF_ACT_SLOT,   /* device slot a (0..2) for offloaded activations */
  ZZ_BUF_ACT_STAGE,  /* host slot a (0..2) for disk activations */
  ZZ_BUF_CPU_ATTN,   /* host f32 buffers of CPU attention: a = 0 q, 1 k, 2 v, 3 out, 4 scratch */
  ZZ_BUF_WORK,       /* device workspace of the largest layer */
  ZZ_BUF_DEV_LOGITS, /* device [gbs, vocab] */
  ZZ_BUF_LOGITS,     /* host f32 [gbs * num_gb, vocab] of the group just stepped */
  ZZ_BUF_ROLE_COUNT
} zz_buf_role;

typedef struct zz_buffer {
  zz_buf_role role;
  int a, b, c; /* indices, see zz_buf_role */
  zz_tier tier;
  zz_purpose purpose;
  zz_dtype dtype;
  int ndim;
  int64_t shape[ZZ_MAX_DIMS];
  size_t bytes; /* reserved, alignment padding included */
  size_t align;
  size_t offset; /* in its (tier, purpose) arena; DISK: the arenas lie back to
                             back in the offload file in purpose order */
} zz_buffer;

/* A MoE layer's experts by count across the tiers (an expert is a unit of
 * placement): experts [0, n[GPU]) on the GPU, the next n[CPU] on the CPU, the
 * rest on disk, the same in every MoE layer. */
typedef struct zz_expert_split {
  int64_t n[ZZ_TIER_COUNT];
} zz_expert_split;

/* The policy's weight percentages over `experts` equal experts: FlexGen's rule
 * (the midpoint of each one's cumulative share) applied to the experts in order. */
zz_expert_split zz_policy_expert_split(const zz_policy *p, int64_t experts);

/* What a plan is built for. */
typedef struct zz_plan_spec {
  zz_policy policy;
  zz_shape shape;
  int layer_begin, layer_end; /* a slice of the model's layers; 0, 0: all of them */
  int n_groups;               /* micro-batch groups, each a block of its own (>= 1) */
  zz_dtype compute_dtype;     /* the device's */
  zz_dtype store_dtype;       /* weights on the CPU and disk tiers */
  bool bf16_weights;          /* 2-D weights in bf16 on every tier (zz_device_desc.bf16_weights) */
  size_t workspace;           /* the largest layer's device scratch (arch workspace) */
} zz_plan_spec;

typedef struct zz_memplan {
  zz_plan_spec spec;
  size_t bytes[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_buffer *buf; /* [n_buf], in binding order */
  int n_buf;
  zz_tier *weight_tier;               /* [slice layers] the tier of each layer's weights, an MoE layer's
                                         expert-stacked matrices aside (their experts: expert_split) */
  zz_expert_split *expert_split;      /* [slice layers] an MoE layer's experts by tier (zeros: none) */
  zz_tier *cache_tier;                /* [n_groups * cache layers * num_gb]: (g * Lc + l) * num_gb + k */
  zz_tier *act_tier;                  /* [n_groups * num_gb]: g * num_gb + k */
  bool any_offload[ZZ_PURPOSE_COUNT]; /* some weights / cache / act not on the GPU */
  bool any_disk[ZZ_PURPOSE_COUNT];
} zz_memplan;

zz_status zz_memplan_build_spec(const zz_model *m, const zz_plan_spec *spec, zz_memplan *out);
/* The whole model, one group. */
zz_status zz_memplan_build(const zz_model *m, const zz_policy *pol, const zz_shape *shape, zz_dtype compute_dt,
                           zz_dtype store_dt, size_t workspace, zz_memplan *out);
void zz_memplan_free(zz_memplan *p);
size_t zz_memplan_tier_total(const zz_memplan *p, zz_tier t);
/* Slice layer i's weights, its experts included, all on the GPU: computed from
 * their homes, never loaded into a slot. */
bool zz_memplan_layer_resident(const zz_memplan *p, int i);
/* Every cache home of group g on the GPU tier (what a refill needs: zz_engine_can_refill). */
bool zz_memplan_cache_on_device(const zz_memplan *p, const zz_model *m, int group);
/* ZZ_ERR_INFEASIBLE naming the first tier whose plan exceeds cap, with numbers. */
zz_status zz_memplan_check(const zz_memplan *p, const size_t cap[ZZ_TIER_COUNT]);
/* "weights.3.1 cpu weights f32 [768, 768] 2.25 MiB @ 0" into buf. */
const char *zz_buffer_str(const zz_buffer *b, char *buf, size_t len);
/* For a device whose memory is host RAM (the CPU device): its arena (the GPU
 * tier) and the CPU tier draw on the same RAM, so their sum must fit host_ram.
 * ZZ_ERR_INFEASIBLE naming both numbers otherwise. */
zz_status zz_memplan_check_shared(const zz_memplan *p, size_t host_ram);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_POLICY_H */
