/*
 * engine_impl.h — the engine's parts (internal to runtime/):
 *
 *   weights  (weights.c)  homes of the slice's weights on their tiers, the two
 *                         device slots offloaded layers are loaded into, the load
 *                         from the checkpoint; built once per process;
 *   group    (engine.c)   one micro-batch group: the KV cache and activation homes
 *                         and index arrays of a block of its own;
 *   schedule (schedule.c) one token step of one group over the slice, written as
 *                         FlexGen's named steps (load weight, load cache, load
 *                         hidden, compute, store cache, store hidden, sync);
 *   engine   (engine.c)   plan → arenas → bind, the lanes and the disk file.
 *
 * Every buffer comes from the memory plan's layout; nothing here computes a size.
 */
#ifndef ZZ_ENGINE_IMPL_H
#define ZZ_ENGINE_IMPL_H
#include "arch_impl.h"
#include "disk_impl.h"
#include "lanes_impl.h"
#include "zz_engine.h"

#define ZZ_MAXW ZZ_MAX_LAYER_WEIGHTS

/* I/O lanes, numbered as zz_lane minus the compute lane. */
enum { ZZ_IO_WEIGHT = 0, ZZ_IO_LOAD, ZZ_IO_STORE, ZZ_IO_N };

/* A batch's index arrays (zz_index_layout), device and host twins. */
typedef struct zz_batch_idx {
  int32_t *d_ids, *d_pos, *d_pad, *d_last; /* device [gbs*s], [gbs*s], [gbs], [gbs] */
  int32_t *ids, *pos, *pad, *last;         /* host */
} zz_batch_idx;

/* One micro-batch group: a block of its own. */
typedef struct zz_group {
  zz_tensor *k_home, *v_home; /* [cache layers * num_gb]: l * num_gb + k; [gbs, t_max, kv row] */
  zz_tensor *a_home;          /* [num_gb] hidden [gbs, s, hidden] */
  zz_batch_idx *idx;          /* [num_gb] */
  int64_t *run_k;             /* [num_gb] the batches a step computes, in order (zz_schedule_step) */
  int64_t *run_cnt;           /* [num_gb] the sequences each batch computes this step (zz_step_count, once) */
  int64_t n;                  /* sequences of the current block (0: none begun) */
  int64_t s;                  /* its padded prompt length */
  /* where the group can refill (zz_engine_can_refill), else NULL: each sequence's
   * current prompt while its cache rows hold it, a refill's donors (prefix.c) */
  int32_t *prompt;   /* [gbs * num_gb, prompt_len] */
  int64_t *prompt_n; /* [gbs * num_gb] its tokens (0: none) */
} zz_group;

typedef struct zz_weights {
  zz_tensor *home;   /* [slice layers * ZZ_MAXW] each weight's home (ndim 0: absent) */
  zz_tensor *xhome;  /* [slice layers * ZZ_MAXW * ZZ_TIER_COUNT] an expert-stacked weight's
                        experts on each tier (zz_memplan.expert_split; ndim 0: none there) */
  zz_tensor *dev;    /* [slice layers * ZZ_MAXW] where forward reads each weight on the
                        device: its GPU home, or its place in slot (layer % 2) */
  char *slot[2];     /* device slots for offloaded layers */
  int slot_layer[2]; /* slice layer each slot holds (-1: none) */
  char *stage;       /* host, block aligned: one weight read from disk */
  char *load;        /* host, block aligned: one weight read from the checkpoint; then an expert's */
  /* Mixture of experts: the experts of the layer in each slot loaded so far (a bit
   * each; cleared when the slot is refilled): an offloaded MoE layer's stacked
   * expert matrices are loaded expert by expert, once per slot fill, as the
   * router first asks for each (zz_weights_load_expert) */
  uint64_t *expert_have[2];
} zz_weights;

struct zz_engine {
  zz_device *dev;
  const zz_model *m;
  zz_policy pol;
  zz_shape shape;
  int l0, l1; /* the slice [l0, l1) of m->layers */
  int n_groups;
  bool all_rows;       /* zz_engine_opts.all_rows */
  bool prefix_sharing; /* !zz_engine_opts.no_prefix_sharing, or zz_engine_set_prefix_sharing */
  int *cache_of;       /* [l1 - l0] cache layer of the slice, -1 for layers without cache */
  int lc;              /* cache layers in the slice */
  uint64_t *tickets;   /* [(l1 - l0) * num_gb] the schedule's store tickets */
  int64_t t_max;       /* prompt_len + gen_len */
  zz_memplan plan;
  zz_arena arenas[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  void *arena_mem[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  size_t disk_base[ZZ_PURPOSE_COUNT]; /* offset of each disk arena in the offload file */
  zz_disk disk;
  bool has_disk;
  void **bound; /* [plan.n_buf] pointer each buffer was bound to (NULL on disk) */

  zz_weights w;
  zz_group *groups;                     /* [n_groups] */
  char *kv_slot[3][2], *kv_stage[3][2]; /* device slots / host disk stages: [slot][K, V] */
  char *a_slot[3], *a_stage[3];         /* device slots / host disk stages of hidden states */
  float *ca[5];                         /* CPU attention: q, k, v, out, scratch (host f32) */
  void *work, *d_logits;                /* device */
  float *logits;                        /* host [gbs * num_gb, vocab] */
  zz_lanes *lanes;
  double compute_s, wall_s;
  int64_t positions;              /* zz_engine_stats.positions */
  int64_t prefix_shared;          /* zz_engine_stats.prefix_shared */
  double attn_wait_s, attn_cpu_s; /* parts of compute_s: zz_engine_stats */
};

/* weights.c */
zz_status zz_weights_load_all(zz_engine *e, const zz_checkpoint *ck);
/* Fills w.dev once the buffers are bound: a layer's device tensors never move. */
void zz_weights_bind_device(zz_engine *e);
/* Weight lane task: slice layer jl → its device slot (jl % 2). */
zz_status zz_weights_load_slot(zz_engine *e, int jl, zz_lane lane);
/* Compute lane, as a MoE layer's router first asks for it: expert x of slice layer jl
 * (offloaded, its slot filled) from its home into the slot, unless there already;
 * w.expert_have[jl % 2] says which are. */
zz_status zz_weights_load_expert(zz_engine *e, int jl, int64_t x);

/* schedule.c */
zz_status zz_schedule_step(zz_engine *e, int group, int step, const zz_step_io *io);
/* zz_engine_refill's prompt step: sequence seq of the group alone, keys [pos, pos + len). */
zz_status zz_schedule_refill(zz_engine *e, int group, int64_t seq, int64_t len, int64_t pos, const zz_step_io *io);

/* CPU attention beside a host cache (attend_cpu.c): one (layer, batch) of a decode
 * step, zz_step.attend's context. */
typedef struct zz_attend_ctx {
  zz_engine *e;
  char *k, *v;     /* host cache of this (layer, batch) */
  zz_kv_layout kv; /* its layout: the device's compute dtype or Q4, bytes between two sequences */
  double keep;     /* top-k sparsity */
  int64_t window;  /* sliding window */
  int64_t cnt, pos;
  const int32_t *pad; /* host */
} zz_attend_ctx;
/* zz_step.attend: q, k, v of the new token (device) → out (device) */
zz_status zz_cpu_attend(void *ctx, const void *q, const void *k, const void *v, void *out);
zz_status zz_io_run(void *ctx, const void *args);

/* prefix.c: a shared prompt prefix computed once */
/* The tokens group's prompts share that its prompt step computes once (0: none,
 * or sharing off: the one rule of where it is, in prefix.c). */
int64_t zz_prefix_len(const zz_engine *e, int group, const zz_step_io *io);
/* After the prefix run: its p rows (sequence 0 of batch 0, every cache layer's K
 * and V) copied into every other sequence's rows of the prefix, in any tier. */
zz_status zz_prefix_spread(zz_engine *e, int group, int64_t p);
/* Sequence seq's prompt from now on (ids NULL: none whose rows are whole). */
void zz_prefix_note(zz_engine *e, int group, int64_t seq, const int32_t *ids, int64_t len);
/* For a refill's newcomer into seq: the most tokens (>= ZZ_PREFIX_MIN, < len)
 * another sequence's prompt starts with as ids does, and that sequence (*donor_out);
 * 0 and -1 when none, or sharing is off. */
int64_t zz_prefix_donor(const zz_engine *e, int group, int64_t seq, const int32_t *ids, int64_t len,
                        int64_t *donor_out);
/* Sequence from's p prefix rows, every cache layer's K and V, copied to sequence
 * to's rows from its padding on (the group's cache on the device). */
zz_status zz_prefix_lend(zz_engine *e, int group, int64_t from, int64_t to, int64_t p);

/* engine.c */
int64_t zz_group_batch_count(const zz_engine *e, const zz_group *g, int64_t k);
zz_cache_spec zz_engine_cache_spec(const zz_engine *e, int jl);

#endif
