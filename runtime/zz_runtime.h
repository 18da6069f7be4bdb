/*
 * zz_runtime.h — the single-machine engine of zigzag.
 *
 * Everything one rank needs to generate text with a transformer whose weights and
 * KV cache may not fit on its compute device: status and error messages, tensors
 * and the memory tiers they live on (GPU, CPU, disk) with exact byte accounting,
 * the device interface (CPU reference, CUDA), model configurations and the
 * architecture table (OPT), checkpoint loading (safetensors) and dummy weights,
 * the GPT-2 byte-level BPE tokenizer, sampling, the generation engine that runs
 * the zig-zag block schedule, and the JSON Lines job files.
 *
 * Usage:
 *     zz_config cfg;  zz_model model;  zz_device *dev;  zz_engine *eng;
 *     ZZ_CHECK(zz_config_preset("opt-125m", &cfg));
 *     ZZ_CHECK(zz_model_init(&cfg, &model));
 *     ZZ_CHECK(zz_device_create_cpu(0, 0, &dev));
 *     zz_policy pol;  zz_policy_default(&pol);
 *     ZZ_CHECK(zz_engine_create(dev, &model, NULL, &pol, &shape, &eng)); // NULL: dummy weights
 *     ZZ_CHECK(zz_engine_generate(eng, &req, &res));
 *     zz_engine_destroy(eng); zz_device_destroy(dev); zz_model_free(&model);
 *
 * Every fallible function returns a zz_status; on failure zz_error_message() says
 * what went wrong and where (file, line, tensor, byte offset). Output parameters
 * are written only on success.
 */
#ifndef ZZ_RUNTIME_H
#define ZZ_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zz_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ status */

typedef enum zz_status {
  ZZ_OK = 0,
  ZZ_ERR_INVALID_ARG, /* a caller or user passed something impossible */
  ZZ_ERR_IO,          /* open/read/write failed */
  ZZ_ERR_FORMAT,      /* a file is malformed or disagrees with the config */
  ZZ_ERR_NO_MEMORY,   /* an allocation or a tier capacity was exhausted */
  ZZ_ERR_INFEASIBLE,  /* a policy does not fit the tiers */
  ZZ_ERR_UNSUPPORTED, /* valid, but not implemented here */
  ZZ_ERR_DEVICE,      /* CUDA / cuBLAS failure */
  ZZ_ERR_MPI,         /* MPI / NCCL failure, dead rank */
  ZZ_ERR_INTERRUPTED, /* stopped at a safe point after zz_request_stop (SIGINT, SIGTERM) */
  ZZ_STATUS_COUNT
} zz_status;

const char *zz_status_str(zz_status st);
/* Records a message for the calling thread (printf format) and returns st, so
 * `return zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: ...", path, name);`. The
 * previous message may be an argument: `zz_error(st, "%s:3: %s", f, zz_error_message())`. */
zz_status zz_error(zz_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded by this thread ("" when none). */
const char *zz_error_message(void);
void zz_error_clear(void);

#define ZZ_CHECK(call)                                                                      \
  do {                                                                                     \
    zz_status zz_check_st_ = (call);                                                       \
    if (zz_check_st_ != ZZ_OK) return zz_check_st_;                                        \
  } while (0)
#define ZZ_CHECK_GOTO(call, st, label)                                                     \
  do {                                                                                     \
    (st) = (call);                                                                         \
    if ((st) != ZZ_OK) goto label;                                                         \
  } while (0)

/* Asks long operations (loading weights, generating) to stop at their next safe
 * point with ZZ_ERR_INTERRUPTED. Async-signal-safe: a SIGINT handler calls it
 * with the signal number (0 withdraws the request). zz_check_stop() is ZZ_OK, or ZZ_ERR_INTERRUPTED with
 * a message, once a stop was requested; zz_stop_requested() is the signal (0: none). */
void zz_request_stop(int sig);
int zz_stop_requested(void);
zz_status zz_check_stop(void);

/* Broken invariants only: prints where and calls the fatal hook (MPI_Abort in an
 * MPI run, abort() otherwise). */
void zz_fatal(const char *file, int line, const char *what) __attribute__((noreturn));
void zz_set_fatal_hook(void (*hook)(void));
#define ZZ_ASSERT(cond)                                                                     \
  do {                                                                                     \
    if (!(cond)) zz_fatal(__FILE__, __LINE__, #cond);                                      \
  } while (0)

/* Parses "16G", "512M", "1.5GiB", "1000" (bytes) into bytes. */
zz_status zz_parse_bytes(const char *text, size_t *out);
/* Formats bytes as "1.50 GiB" into buf. */
const char *zz_format_bytes(size_t bytes, char *buf, size_t len);
double zz_now(void); /* monotonic seconds */
/* Physical memory of this machine in bytes (16 GiB when it cannot be read). */
size_t zz_host_memory_bytes(void);

/* ================================================================ tiers and tensors */

typedef enum zz_tier {
  ZZ_TIER_GPU = 0, /* the compute device's memory (the CPU device's own arena without a GPU) */
  ZZ_TIER_CPU,     /* host memory, pinned when there is a GPU */
  ZZ_TIER_DISK,    /* files under --offload-dir */
  ZZ_TIER_COUNT
} zz_tier;
const char *zz_tier_name(zz_tier t); /* "gpu", "cpu", "disk" */

/* What a tier's bytes are used for; the run reports peaks per tier and purpose. */
typedef enum zz_purpose {
  ZZ_PURPOSE_WEIGHTS = 0,
  ZZ_PURPOSE_CACHE,
  ZZ_PURPOSE_ACT,
  ZZ_PURPOSE_STAGING,
  ZZ_PURPOSE_WORKSPACE,
  ZZ_PURPOSE_COUNT
} zz_purpose;
const char *zz_purpose_name(zz_purpose p);

#define ZZ_MAX_DIMS 4
#define ZZ_NAME_LEN 128

typedef struct zz_tensor {
  char name[ZZ_NAME_LEN]; /* checkpoint name, e.g. "model.decoder.layers.0.fc1.weight" */
  zz_dtype dtype;
  int ndim;
  int64_t shape[ZZ_MAX_DIMS]; /* row major, outermost first; contiguous */
  zz_tier tier;
  void *data;     /* GPU: device pointer; CPU: host pointer; DISK: NULL */
  int64_t offset; /* DISK: byte offset in the tier's file */
  size_t nbytes;
} zz_tensor;

/* "[768, 3072]" into buf. */
const char *zz_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);

/*
 * An arena: one allocation per tier and purpose, carved by a bump pointer, with
 * exact accounting. The engine sizes every arena from the memory plan before a
 * block starts and allocates nothing else in the hot loop.
 */
typedef struct zz_arena {
  zz_tier tier;
  zz_purpose purpose;
  char *base;    /* NULL for DISK arenas (offsets only) */
  size_t cap;    /* bytes reserved */
  size_t used;   /* bytes handed out */
  size_t peak;   /* high-water mark of used */
} zz_arena;

/* Hands out `bytes` aligned to 256; ZZ_ERR_NO_MEMORY names the arena when full. */
zz_status zz_arena_take(zz_arena *a, size_t bytes, void **ptr_out, size_t *offset_out);

/* ================================================================ devices */

typedef struct zz_device zz_device;

/* Concurrent lanes of the zig-zag schedule (CUDA streams, or CPU I/O threads). */
typedef enum zz_lane {
  ZZ_LANE_COMPUTE = 0,
  ZZ_LANE_LOAD_WEIGHT,
  ZZ_LANE_LOAD_CACHE,
  ZZ_LANE_STORE_CACHE,
  ZZ_LANE_COUNT
} zz_lane;

/*
 * The device interface. All compute ops take device pointers to data of the
 * device's compute dtype (f32 on the CPU, f16 on CUDA) and run on the compute lane;
 * int32 index arrays (ids, positions, pad) are device arrays too.
 */
typedef struct zz_device_ops {
  const char *name;      /* "cpu", "cuda" */
  zz_dtype compute_dtype;
  void (*destroy)(zz_device *dev);
  zz_status (*alloc)(zz_device *dev, size_t bytes, void **out);
  void (*free)(zz_device *dev, void *ptr);
  /* host memory for the CPU tier (pinned with CUDA) */
  zz_status (*host_alloc)(zz_device *dev, size_t bytes, void **out);
  void (*host_free)(zz_device *dev, void *ptr);
  /* raw byte copies, asynchronous on `lane` */
  zz_status (*write)(zz_device *dev, zz_lane lane, void *dst, const void *host_src, size_t bytes);
  zz_status (*read)(zz_device *dev, zz_lane lane, void *host_dst, const void *src, size_t bytes);
  /* host src (src_dt) → device (compute dtype), n elements, converting */
  zz_status (*upload)(zz_device *dev, zz_lane lane, void *dst, const void *host_src,
                      zz_dtype src_dt, int64_t n);
  /* device (compute dtype) → host dst (dst_dt), n elements, converting */
  zz_status (*download)(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt,
                        const void *src, int64_t n);
  zz_status (*sync)(zz_device *dev, zz_lane lane);
  /* compute; see zz_kernels.h for each contract */
  zz_status (*embed_rows)(zz_device *dev, const void *table, int64_t dim, const int32_t *ids,
                          int64_t n, void *out);
  zz_status (*add_rows)(zz_device *dev, void *x, int64_t dim, const void *table,
                        const int32_t *ids, int64_t n);
  zz_status (*layernorm)(zz_device *dev, const void *x, int64_t n, int64_t dim,
                         const void *gamma, const void *beta, float eps, void *y);
  zz_status (*linear)(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w,
                      const void *b, int64_t out, void *y, int relu);
  zz_status (*add)(zz_device *dev, const void *a, const void *b, int64_t n, void *y);
  zz_status (*kv_append)(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t h,
                         void *cache, int64_t kv_stride, int64_t pos);
  zz_status (*attention)(zz_device *dev, const void *q, const void *k, const void *v,
                         int64_t kv_stride, int64_t b, int64_t sq, int64_t t, int64_t q_start,
                         int64_t heads, int64_t hd, const int32_t *pad, void *out, void *scratch);
  /* scratch bytes attention needs for these sizes */
  size_t (*attention_scratch)(zz_device *dev, int64_t b, int64_t sq, int64_t t, int64_t heads);
} zz_device_ops;

struct zz_device {
  const zz_device_ops *ops;
  void *impl;
  size_t capacity; /* bytes of device memory this run may use (ZZ_TIER_GPU) */
  size_t reserved; /* of which the device keeps this much for itself (cuBLAS
                      workspace, conversion staging); memory plans get the rest */
};

/* The CPU device: its memory is its own arena of `capacity` bytes (0: what the
 * machine has), so every tier path runs without a GPU. threads <= 0: all cores. */
zz_status zz_device_create_cpu(size_t capacity, int threads, zz_device **out);
/* The CUDA device (ZZ_ERR_UNSUPPORTED when built without CUDA or no GPU is visible). */
zz_status zz_device_create_cuda(int ordinal, size_t capacity, zz_device **out);
/* CUDA when a GPU is present, else the CPU device (saying so once on stderr). */
zz_status zz_device_create_best(size_t capacity, int threads, zz_device **out);
void zz_device_destroy(zz_device *dev);

/* ================================================================ model */

typedef struct zz_config {
  char model_type[32];  /* "opt" */
  char name[64];        /* preset name or directory */
  int64_t vocab_size;
  int64_t hidden;       /* hidden_size */
  int64_t ffn;          /* ffn_dim */
  int64_t n_layers;     /* num_hidden_layers */
  int64_t n_heads;      /* num_attention_heads */
  int64_t max_pos;      /* max_position_embeddings */
  int64_t embed_dim;    /* word_embed_proj_dim (== hidden unless project_in/out) */
  bool pre_ln;          /* do_layer_norm_before */
  bool final_ln;        /* a final layer norm exists (pre-LN models) */
  bool enable_bias;
  int32_t bos, eos, pad;
  float ln_eps;
  zz_dtype dtype;       /* torch_dtype of the checkpoint */
} zz_config;

/* Bounds a configuration is checked against (config.json may lie). */
#define ZZ_MAX_POSITIONS (1 << 20) /* max_position_embeddings */
#define ZZ_MAX_VOCAB (1 << 24)     /* vocab_size */

/* opt-125m, opt-350m, opt-1.3b, opt-2.7b, opt-6.7b, opt-13b, opt-30b, opt-66b, opt-175b */
zz_status zz_config_preset(const char *name, zz_config *out);
/* DIR/config.json of a Hugging Face model directory. */
zz_status zz_config_load(const char *dir, zz_config *out);
/* A preset name, or a directory holding config.json. */
zz_status zz_config_resolve(const char *model, zz_config *out);
/* Preset names, NULL terminated. */
const char *const *zz_config_preset_names(void);

typedef enum zz_layer_kind {
  ZZ_LAYER_INPUT_EMBED = 0, /* token + position embedding (and project_in) */
  ZZ_LAYER_ATTENTION,       /* self attention of one transformer layer, with its LN and residual */
  ZZ_LAYER_MLP,             /* the MLP of one transformer layer, with its LN and residual */
  ZZ_LAYER_OUTPUT_EMBED,    /* final LN, project_out, LM head */
} zz_layer_kind;

#define ZZ_MAX_LAYER_WEIGHTS 12

typedef struct zz_weight_spec {
  char name[ZZ_NAME_LEN]; /* canonical checkpoint name ("model.decoder....") */
  int ndim;               /* 0: absent in this configuration (e.g. no bias) */
  int64_t shape[2];
} zz_weight_spec;

/* One unit of the schedule: loaded once per block, used by every GPU batch. */
typedef struct zz_layer {
  zz_layer_kind kind;
  int index; /* transformer layer for ATTENTION/MLP, -1 otherwise */
  int n_weights;
  zz_weight_spec weights[ZZ_MAX_LAYER_WEIGHTS];
  int64_t weight_numel; /* sum over weights */
  bool has_cache;       /* ATTENTION layers own a KV cache */
} zz_layer;

/* What one layer computes for one GPU batch at one step. All pointers are device
 * pointers of the compute dtype unless typed otherwise. */
typedef struct zz_step {
  int64_t b;                 /* sequences in the GPU batch */
  int64_t sq;                /* new tokens per sequence (prompt length in prefill, 1 after) */
  int64_t pos;               /* key position of the first new token */
  const int32_t *ids;        /* [b, sq] token ids (INPUT_EMBED) */
  const int32_t *positions;  /* [b, sq] learned-position ids, offset included */
  const int32_t *pad;        /* [b] left padding slots */
  const int32_t *last;       /* [b] row of each sequence's last token in hidden: i*sq + sq-1 */
  void *hidden;              /* [b, sq, hidden] in and out */
  void *k, *v;               /* this layer's cache [b, t_max, hidden] (ATTENTION) */
  int64_t kv_stride;         /* t_max * hidden */
  void *logits;              /* [b, vocab] of the last position (OUTPUT_EMBED) */
  void *work;                /* workspace of arch->workspace_bytes */
  /* CPU attention: when set, an ATTENTION layer hands its new q, k, v ([b, sq,
   * hidden] each, device) to attend(), which appends k, v to a cache living on the
   * host and writes the attention output ([b, sq, hidden], device) to out; k and v
   * above are then unused. */
  zz_status (*attend)(void *ctx, const void *q, const void *k, const void *v, void *out);
  void *attend_ctx;
} zz_step;

struct zz_model;
/* An architecture: its layer list and weight shapes, and the math of each layer. */
typedef struct zz_arch {
  const char *model_type;
  zz_status (*build)(struct zz_model *m);
  /* bytes of workspace `forward` needs for b sequences of sq new tokens, t keys */
  size_t (*workspace_bytes)(const struct zz_model *m, const zz_device *dev, int64_t b,
                            int64_t sq, int64_t t);
  /* w[i]: device copy of layer->weights[i] (NULL where the spec is absent, ndim 0) */
  zz_status (*forward)(zz_device *dev, const struct zz_model *m, const zz_layer *layer,
                       void *const *w, const zz_step *step);
} zz_arch;

typedef struct zz_model {
  zz_config cfg;
  const zz_arch *arch;
  int n_layers; /* 2 * cfg.n_layers + 2 */
  zz_layer *layers;
} zz_model;

zz_status zz_model_init(const zz_config *cfg, zz_model *out);
void zz_model_free(zz_model *m);
/* Total weight elements of the model. */
int64_t zz_model_numel(const zz_model *m);

/* ================================================================ checkpoints */

/* An opened checkpoint: the safetensors headers of every shard, checked against
 * each file's size; the data stays on disk until read. */
typedef struct zz_checkpoint zz_checkpoint;

/* DIR/model.safetensors or DIR/model.safetensors.index.json and its shards. */
zz_status zz_checkpoint_open(const char *dir, zz_checkpoint **out);
void zz_checkpoint_close(zz_checkpoint *ck);
/* Number of tensors, and tensor i's entry (name as in the file). */
int64_t zz_checkpoint_count(const zz_checkpoint *ck);
/* Looks a tensor up by canonical name, accepting the file's name with or without
 * the "model." prefix; checks dtype is known and shape equals ndim/shape. */
zz_status zz_checkpoint_check(const zz_checkpoint *ck, const char *name, int ndim,
                              const int64_t *shape);
/* Reads a tensor converted to dst_dt into dst (numel elements). */
zz_status zz_checkpoint_read(const zz_checkpoint *ck, const char *name, zz_dtype dst_dt,
                             void *dst, int64_t numel);
/* Checks every weight of the model exists with the right shape (tied lm_head may
 * be absent). */
zz_status zz_checkpoint_check_model(const zz_checkpoint *ck, const zz_model *m);

/* Deterministic random values for weight `spec` (seeded by its name), scaled like
 * a real checkpoint: matrices N(0, 0.02²)-like, LN gains near 1, biases small. */
void zz_weights_dummy(const zz_weight_spec *spec, zz_dtype dt, void *dst);

/* ================================================================ tokenizer */

/* GPT-2 byte-level BPE (vocab.json + merges.txt). */
typedef struct zz_tokenizer zz_tokenizer;

zz_status zz_tokenizer_load(const char *dir, zz_tokenizer **out);
void zz_tokenizer_free(zz_tokenizer *tok);
int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok);
/* text (len bytes of UTF-8, need not be NUL terminated) → *ids_out (malloc'd,
 * caller frees), *n_out ids. No special tokens are added. Invalid UTF-8 is an
 * error naming the byte offset. */
zz_status zz_tokenizer_encode(const zz_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids_out, int64_t *n_out);
/* ids → *text_out (malloc'd, NUL terminated), *len_out bytes. Ids out of range are
 * an error; special tokens decode to their text. */
zz_status zz_tokenizer_decode(const zz_tokenizer *tok, const int32_t *ids, int64_t n,
                              char **text_out, size_t *len_out);

/* ================================================================ sampling */

typedef struct zz_sampling {
  float temperature; /* 0: greedy */
  int top_k;         /* 0: off */
  float top_p;       /* 1: off */
  uint64_t seed;
} zz_sampling;

typedef struct zz_rng {
  uint64_t s[4];
} zz_rng;

/* Seeds a generator for one sequence: the same (seed, stream) gives the same
 * draws whatever batch the sequence runs in. */
void zz_rng_seed(zz_rng *r, uint64_t seed, uint64_t stream);
uint64_t zz_rng_next(zz_rng *r);
double zz_rng_uniform(zz_rng *r); /* [0, 1) */

/* Picks a token from logits[vocab]. scratch: 2 * vocab floats + vocab int32. */
int32_t zz_sample(const float *logits, int64_t vocab, const zz_sampling *s, zz_rng *rng,
                  void *scratch);
size_t zz_sample_scratch_bytes(int64_t vocab);
int32_t zz_argmax(const float *x, int64_t n);

/* ================================================================ policy */

/* FlexGen's policy: where each kind of tensor lives and how the block is cut. */
typedef struct zz_policy {
  int gpu_batch_size;    /* gbs */
  int num_gpu_batches;   /* num_gb; a block is gbs * num_gb sequences */
  double w_gpu, w_cpu;   /* percent of weights on GPU / CPU; disk takes the rest */
  double c_gpu, c_cpu;   /* percent of the KV cache */
  double a_gpu, a_cpu;   /* percent of activations */
  bool overlap;          /* run loads/stores concurrently with compute */
  bool cpu_attention;    /* decode attention on the CPU beside an offloaded cache */
  bool compress_weight;  /* 4-bit group-wise */
  bool compress_cache;
  double attn_sparsity;  /* 1.0 = dense */
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

/* ================================================================ generation */

/* The sizes an engine is built for: every block is padded to prompt_len and
 * generates up to gen_len tokens. */
typedef struct zz_shape {
  int64_t prompt_len; /* s: longest prompt of any block */
  int64_t gen_len;    /* n: new tokens per sequence */
} zz_shape;

/* Capacities of the three tiers and where the disk tier lives. */
typedef struct zz_tiers {
  size_t cap[ZZ_TIER_COUNT]; /* GPU: 0 = the device's capacity; CPU: 0 = physical RAM;
                                DISK: 0 = free space under offload_dir */
  const char *offload_dir;   /* NULL: $TMPDIR or /tmp */
} zz_tiers;

/*
 * The memory plan: exact bytes per tier and purpose for a model, policy and shape,
 * and where each tensor lives. Weights are placed per layer, KV cache per (layer,
 * GPU batch) tensor pair and activations per GPU batch, each by FlexGen's rule: an
 * item goes to the GPU when the midpoint of its cumulative share (by size) falls
 * below the GPU percentage, else to the CPU when below GPU + CPU, else to disk.
 * The engine sizes its arenas from this plan and allocates nothing else; the
 * planner uses the same numbers as its memory constraints.
 */
typedef struct zz_memplan {
  size_t bytes[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_tier *weight_tier; /* [n_layers] */
  zz_tier *cache_tier;  /* [n_transformer_layers * num_gb] index l * num_gb + k */
  zz_tier *act_tier;    /* [num_gb] */
  bool any_offload[ZZ_PURPOSE_COUNT]; /* some weights / cache / act not on the GPU */
  bool any_disk[ZZ_PURPOSE_COUNT];
  size_t max_layer_bytes;     /* largest non-GPU layer in compute dtype */
  size_t max_layer_store;     /* same, storage dtype, rounded for disk I/O */
  size_t load_buf;            /* host buffer for one tensor while loading weights */
} zz_memplan;

/* workspace: the largest layer's scratch on the device (arch->workspace_bytes). */
zz_status zz_memplan_build(const zz_model *m, const zz_policy *pol, const zz_shape *shape,
                           zz_dtype compute_dt, zz_dtype store_dt, size_t workspace, zz_memplan *out);
void zz_memplan_free(zz_memplan *p);
size_t zz_memplan_tier_total(const zz_memplan *p, zz_tier t);
/* ZZ_ERR_INFEASIBLE naming the first tier whose plan exceeds cap, with numbers. */
zz_status zz_memplan_check(const zz_memplan *p, const size_t cap[ZZ_TIER_COUNT]);
/* For a device whose memory is host RAM (the CPU device): its arena (the GPU
 * tier) and the CPU tier draw on the same RAM, so their sum must fit host_ram.
 * ZZ_ERR_INFEASIBLE naming both numbers otherwise. */
zz_status zz_memplan_check_shared(const zz_memplan *p, size_t host_ram);

typedef struct zz_engine zz_engine;

/* Builds the engine: places every tensor by the memory plan (refusing a plan that
 * does not fit before anything is allocated), loads weights from ck (NULL: dummy
 * weights) to their tiers. tiers may be NULL (defaults). */
zz_status zz_engine_create_tiers(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                                 const zz_policy *pol, const zz_shape *shape,
                                 const zz_tiers *tiers, zz_engine **out);
zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                           const zz_policy *pol, const zz_shape *shape, zz_engine **out);
void zz_engine_destroy(zz_engine *eng);

/* One block of prompts to generate for. */
typedef struct zz_request {
  int64_t n;                   /* prompts, at most gbs * num_gb */
  const int32_t *const *ids;   /* ids[i]: prompt i (BOS included by the caller) */
  const int64_t *lens;         /* lens[i] >= 1, <= shape.prompt_len */
  const uint64_t *streams;     /* rng stream per prompt (NULL: its index) */
  int max_new_tokens;          /* <= shape.gen_len */
  bool ignore_eos;             /* benchmarks: always generate max_new_tokens */
  zz_sampling sampling;
  /* optional: called with each step's logits of each sequence (f32, vocab) */
  void (*on_logits)(void *ctx, int64_t seq, int step, const float *logits, int64_t vocab);
  void *ctx;
} zz_request;

typedef struct zz_result {
  int32_t **tokens;  /* tokens[i]: new tokens of prompt i (ends at EOS, included) */
  int64_t *n_tokens;
  double prefill_s, decode_s; /* wall time of the two phases */
} zz_result;

zz_status zz_engine_generate(zz_engine *eng, const zz_request *req, zz_result *res);
void zz_result_free(zz_result *res, int64_t n);

/* Peak bytes per tier and purpose measured so far; never above the plan. */
void zz_engine_peaks(const zz_engine *eng, size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT]);
const zz_memplan *zz_engine_plan(const zz_engine *eng);

/* Time each lane of the schedule spent busy, and disk traffic, since create. */
typedef struct zz_engine_stats {
  double busy_s[ZZ_LANE_COUNT]; /* compute, weight load, cache load, cache store */
  double wall_s;                /* wall time inside zz_engine_generate */
  uint64_t disk_read_bytes, disk_write_bytes;
  double disk_read_s;           /* time inside disk reads */
} zz_engine_stats;
void zz_engine_get_stats(const zz_engine *eng, zz_engine_stats *out);

/* ================================================================ JSON Lines jobs */

/* One prompt of a job file: {"id": …, "prompt": "text"} or {"input_ids": [..]}. */
typedef struct zz_prompt {
  char *id;        /* the id as JSON text ("7", "\"abc\""), or the line number */
  char *text;      /* NULL when input_ids was given */
  int32_t *ids;    /* NULL when prompt was given */
  int64_t n_ids;
  int64_t line;    /* 1-based line in the file */
} zz_prompt;

typedef struct zz_prompt_reader zz_prompt_reader;
/* path "-" reads stdin. */
zz_status zz_prompt_reader_open(const char *path, zz_prompt_reader **out);
/* *got = false at end of file; a malformed line is an error naming file:line. */
zz_status zz_prompt_reader_next(zz_prompt_reader *r, zz_prompt *p, bool *got);
void zz_prompt_reader_close(zz_prompt_reader *r);
void zz_prompt_free(zz_prompt *p);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_RUNTIME_H */
