/*
 * zz_engine.h — the offloading engine of one rank: the tiers' capacities, the disk
 * tier's measurement, and the engine that binds a memory plan, loads a slice of
 * the model's weights and runs one token step of one micro-batch group in the
 * zig-zag order (runtime/engine.c, runtime/weights.c, runtime/schedule.c).
 *
 * Usage:
 *     zz_engine *eng;
 *     ZZ_CHECK(zz_engine_create(dev, &model, ck, &pol, &shape, &eng));  // ck NULL: dummy
 *     ZZ_CHECK(zz_engine_begin_block(eng, 0, n, lens));
 *     for (int step = 0; step < shape.gen_len; step++) {
 *       ZZ_CHECK(zz_engine_step(eng, 0, step, &io));
 *       use(zz_engine_logits(eng));
 *     }
 *     zz_engine_destroy(eng);
 */
#ifndef ZZ_ENGINE_H
#define ZZ_ENGINE_H

#include "zz_device.h"
#include "zz_policy.h"
#include "zz_weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What zz_disk_measure measures. */
#define ZZ_DISK_MAX_SIZES 16
typedef struct zz_disk_probe {
  size_t bytes, chunk; /* the file; the write and the alone reads in chunk-sized transfers */
  /* Further read passes beside work (busy NULL: none): busy(busy_arg) runs over
   * and over (at least once, begun before the first read) on a thread of its
   * own while busy_bytes of the file (0: all) are
   * read again, one pass per transfer size sizes[i] (the engine reads one
   * tensor a call, so its transfers are its tensors' sizes). Under a CPU quota a
   * read issued after the period's quota is spent waits for the next period, so
   * these are the rates the engine's reads get beside its compute (issue #24:
   * 0.78 of the alone rate inside a 0.4-CPU machine), lower for smaller reads. */
  zz_status (*busy)(void *busy_arg);
  void *busy_arg;
  size_t busy_bytes;
  const size_t *sizes;
  int n_sizes; /* at most ZZ_DISK_MAX_SIZES */
} zz_disk_probe;
typedef struct zz_disk_rates {
  double read_bw, write_bw;               /* alone, bytes per second */
  double read_busy_bw[ZZ_DISK_MAX_SIZES]; /* beside busy, at probe->sizes[i] */
} zz_disk_rates;
/* The disk tier's bandwidths as the engine gets them (runtime/disk.c): a file
 * under dir opened like the offload file (page cache bypassed), written and
 * synced, then read back twice (the second pass counts), then read beside
 * probe->busy at each size where given. */
zz_status zz_disk_measure(const char *dir, const zz_disk_probe *probe, zz_disk_rates *out);
/* Free bytes under dir. */
size_t zz_disk_free_bytes(const char *dir);

/* Capacities of the three tiers and where the disk tier lives. */
typedef struct zz_tiers {
  size_t cap[ZZ_TIER_COUNT]; /* GPU: 0 = the device's capacity; CPU: 0 = physical RAM;
                                DISK: 0 = free space under offload_dir */
  const char *offload_dir;   /* NULL: $TMPDIR or /tmp */
} zz_tiers;

/*
 * The engine of one rank: the weights of a slice of layers, built once, serving
 * n_groups micro-batch groups, each with its own KV cache and activations; the
 * schedule runs one token step of one group over the slice in the zig-zag order
 * (runtime/schedule.c). A slice that starts at layer 0 embeds token ids, else its
 * hidden state comes from the caller; a slice that ends at the last layer gives
 * logits, else it hands its hidden state out. The token loop, EOS and sampling
 * live in the generate module (zz_generate), which launch/ and stage/ call.
 */
typedef struct zz_engine zz_engine;

typedef struct zz_engine_opts {
  zz_policy policy;
  zz_shape shape;
  zz_tiers tiers;
  int layer_begin, layer_end; /* 0, 0: the whole model */
  int n_groups;               /* 0 or 1: one group */
  /* true: a prompt step computes every row of the last transformer layer; false
   * (every command today: the engine gives only the last position's logits): only
   * each sequence's last row, which is all the output embedding reads */
  bool all_rows;
  /* false (the default): the tokens a group's prompts start with are computed
   * once in the prompt step and copied to each sequence's cache (runtime/prefix.c);
   * true: every sequence computes its whole prompt (--no-prefix-sharing) */
  bool no_prefix_sharing;
} zz_engine_opts;

/* Builds the engine: plans every buffer (refusing a plan that does not fit before
 * anything is allocated), binds them, loads the slice's weights from ck (NULL:
 * dummy weights) to their tiers. */
zz_status zz_engine_create_opts(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_engine_opts *opts,
                                zz_engine **out);
/* The whole model, one group; tiers may be NULL (defaults). */
zz_status zz_engine_create_tiers(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol,
                                 const zz_shape *shape, const zz_tiers *tiers, zz_engine **out);
zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck, const zz_policy *pol,
                           const zz_shape *shape, zz_engine **out);
void zz_engine_destroy(zz_engine *eng);

/* Plans without building: the plan the engine would use for these options on dev,
 * checked against the tiers' capacities (ZZ_ERR_INFEASIBLE with the numbers). */
zz_status zz_engine_plan_check(const zz_device_desc *dev, const zz_model *m, const zz_engine_opts *opts,
                               zz_memplan *out);

/* Starts a block on group g: n sequences (<= gbs * num_gb) with the given prompt
 * lengths (each <= shape.prompt_len); the block is left padded to the longest. */
zz_status zz_engine_begin_block(zz_engine *eng, int group, int64_t n, const int64_t *lens);

/* Turns shared-prefix computation on or off for the blocks begun after (the
 * opposite of zz_engine_opts.no_prefix_sharing; benches compare both). */
void zz_engine_set_prefix_sharing(zz_engine *eng, bool on);
/* How many tokens the n prompts ids all start with, at most `most` (0 when n < 2). */
int64_t zz_prefix_common(const int32_t *const *ids, int64_t n, int64_t most);
/* Prompts sharing fewer tokens than this are not worth a run of their own (it
 * passes over every layer's weights once more). */
#define ZZ_PREFIX_MIN 16
/* The prefix a prompt step computes once for these n prompts, the shortest of
 * them `shortest` tokens long: their common prefix less the shortest's last token
 * (each sequence's last row gives its logits), 0 below ZZ_PREFIX_MIN. Where
 * sharing is on (runtime/prefix.c); benches and the planner count with it. */
int64_t zz_prefix_shared(const int32_t *const *ids, int64_t n, int64_t shortest);

/* What one token step of a group takes and gives (host memory). */
typedef struct zz_step_io {
  const int32_t *const *prompts; /* step 0, slice from layer 0: prompt i's ids (lens of begin_block) */
  const int32_t *tokens;         /* step > 0, slice from layer 0: [n] each sequence's newest token */
  const void *hidden_in;         /* slice not from layer 0: [n, sq, hidden] compute dtype */
  void *hidden_out;              /* slice not to the last layer: [n, sq, hidden] compute dtype */
  /* false: hidden_in / hidden_out are host memory (copied to and from the device);
   * true: they are the engine's device memory (zz_device_alloc), copied on the device
   * (NCCL exchanges). Either way the step has finished with both when it returns. */
  bool hidden_on_device;
  /* step > 0: [n] true for a sequence that has ended (NULL: none has); a GPU batch
   * whose sequences have all ended is not computed (its logits are left as they were) */
  const bool *ended;
} zz_step_io;
/* One token step (0: the prompt) of group g over the slice. A slice that ends at
 * the last layer leaves the last position's logits in zz_engine_logits(). */
zz_status zz_engine_step(zz_engine *eng, int group, int step, const zz_step_io *io);
/* Refill (continuous batching): sequence seq of group g's block, whose sequence has
 * ended, takes a new prompt of len tokens. Its prompt step runs now, alone (the
 * slice's weights read once more when they are offloaded), into the sequence's own
 * cache rows at key positions [at - len, at), where at is the key position step
 * `step` writes, left padded to at - len; from step `step` on the group decodes it
 * beside the others, exactly as if it had begun the block (padding changes no
 * token). io holds what a prompt step of one sequence takes and gives: a slice from
 * layer 0 reads the prompt's ids in io->prompts[0]; a later slice reads
 * io->hidden_in, [1, len, hidden] (zz_engine_refill_bytes); a slice that does not
 * end the model writes io->hidden_out, the same shape; one that does leaves the
 * first token's logits in zz_engine_logits() at row seq. Needs the group's cache on
 * the device tier (zz_engine_can_refill), on every slice of a pipeline.
 * zz_engine_refill_room: the most new tokens such a prompt can make when it joins
 * before step `step` (0: it cannot: longer than at, or no refill here). */
bool zz_engine_can_refill(const zz_engine *eng, int group);
int64_t zz_engine_refill_room(const zz_engine *eng, int group, int step, int64_t len);
/* The rule of zz_engine_refill_room for an engine of this shape whose group's block
 * is padded to s (the planner's schedule asks it too, planner/workload.c). */
int64_t zz_refill_room(const zz_shape *shape, int64_t s, int step, int64_t len);
/* Sequences of a GPU batch of cnt a decode step computes: up to its last one still
 * running (ended: the batch's [cnt]); those after it have ended and nothing reads
 * their rows again (a refill writes a slot's rows afresh). */
int64_t zz_step_rows(const bool *ended, int64_t cnt);
zz_status zz_engine_refill(zz_engine *eng, int group, int64_t seq, int64_t len, int step, const zz_step_io *io);
size_t zz_engine_refill_bytes(const zz_engine *eng, int64_t len);
/* [n, vocab] f32 logits of the group just stepped (slices ending at the last layer). */
const float *zz_engine_logits(const zz_engine *eng);
/* Bytes of the hidden state handed in or out for group g at this step. */
size_t zz_engine_hidden_bytes(const zz_engine *eng, int group, int step);

const zz_model *zz_engine_model(const zz_engine *eng);
const zz_policy *zz_engine_policy(const zz_engine *eng);
const zz_shape *zz_engine_shape(const zz_engine *eng);
int zz_engine_groups(const zz_engine *eng);
/* The slice [*begin_out, *end_out) of the model's layers the engine holds. */
void zz_engine_slice(const zz_engine *eng, int *begin_out, int *end_out);
/* The token loop's own wall time, counted into zz_engine_stats.wall_s. */
void zz_engine_add_wall(zz_engine *eng, double seconds);

/* Peak bytes per tier and purpose measured so far; never above the plan. */
void zz_engine_peaks(const zz_engine *eng, size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]);
const zz_memplan *zz_engine_plan(const zz_engine *eng);
/* Where buffer i of the plan was bound: host or device pointer (NULL on disk) and
 * the byte offset in its arena, as the engine took it from its arena. */
void zz_engine_binding(const zz_engine *eng, int i, void **ptr_out, size_t *offset_out, size_t *bytes_out);

/* Time each lane of the schedule spent busy, and disk traffic, since create. */
typedef struct zz_engine_stats {
  double busy_s[ZZ_LANE_COUNT]; /* compute, weight load, cache load, cache store */
  double wall_s;                /* wall time inside zz_generate */
  int64_t positions;            /* token positions computed: a step's rows of each batch it ran (padding included) */
  int64_t prefix_shared;        /* prompt positions not computed: a shared prefix's, in all but one sequence */
  uint64_t disk_read_bytes, disk_write_bytes;
  double disk_read_s; /* time inside disk reads */
  /* of busy_s[compute], with CPU attention beside a host cache: waiting for the
   * device's q, k, v (its queued kernels and their download), and the CPU's
   * attention with its cache append */
  double attn_wait_s, attn_cpu_s;
  uint64_t bytes_to_device, bytes_from_device; /* the device's counters (struct zz_device) */
} zz_engine_stats;
void zz_engine_get_stats(const zz_engine *eng, zz_engine_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_ENGINE_H */
