/*
 * zz_runtime.h — the single-machine engine of zigzag.
 *
 * Everything one rank needs to generate text with a transformer whose weights and
 * KV cache may not fit on its compute device: status and error messages, tensors
 * and the memory tiers they live on (GPU, CPU, disk) with exact byte accounting,
 * the device interface (CPU reference, CUDA) behind checked zz_device_* wrappers,
 * worker pools (compute, CPU attention), model configurations and the
 * architecture table (OPT), checkpoint loading (safetensors) and dummy weights,
 * the GPT-2 byte-level BPE tokenizer, sampling, the generation engine that runs
 * the zig-zag block schedule, and the JSON Lines job files.
 *
 * Usage:
 *     zz_config cfg;  zz_model model;  zz_device *dev;  zz_engine *eng;
 *     ZZ_CHECK(zz_config_preset("opt-125m", &cfg));
 *     ZZ_CHECK(zz_model_init(&cfg, &model));
 *     ZZ_CHECK(zz_device_create_cpu(0, 0, 0, &dev));
 *     zz_policy pol;  zz_policy_default(&pol);
 *     ZZ_CHECK(zz_engine_create(dev, &model, NULL, &pol, &shape, &eng)); // NULL: dummy weights
 *     ZZ_CHECK(zz_generate(eng, &req, &res));
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
  zz_qfmt q;      /* ZZ_DTYPE_Q4: its format (bits, group); rows grouped along the last dim */
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

/* Hands out `bytes` starting on a multiple of `align` (a power of two); the offset
 * from the arena's start is set too. ZZ_ERR_NO_MEMORY names the arena when full. */
zz_status zz_arena_take(zz_arena *a, size_t bytes, size_t align, void **ptr_out, size_t *offset_out);

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

/* The ops of the device interface that compute or convert, for supports() and
 * messages. For the compute ops the dtype asked about is the weight's (activations
 * are always in the device's compute dtype); for UPLOAD and DOWNLOAD it is the
 * host side's. */
typedef enum zz_op {
  ZZ_OP_EMBED_ROWS = 0, /* also zz_device_gather_rows */
  ZZ_OP_ADD_ROWS,
  ZZ_OP_LAYERNORM,
  ZZ_OP_LINEAR,
  ZZ_OP_ADD,
  ZZ_OP_KV_APPEND,
  ZZ_OP_ATTENTION,
  ZZ_OP_UPLOAD,
  ZZ_OP_DOWNLOAD,
  ZZ_OP_ATTENTION_SPARSE, /* zz_device_attention_ex with keep < 1 (dt: the cache's) */
  ZZ_OP_RMSNORM,
  ZZ_OP_ROPE,
  ZZ_OP_SILU_MUL,
  ZZ_OP_COUNT
} zz_op;
const char *zz_op_name(zz_op op); /* "embed_rows", ..., "?" when out of range */

/*
 * A device backend's ops table. Nothing but runtime/device.c calls these: the
 * zz_device_* wrappers below check every argument first (sizes, ranges inside the
 * device's allocations, supports()), so a backend may assert what they checked.
 * Compute ops take device pointers; activations are in the device's compute dtype
 * (f32 on the CPU, f16 on CUDA), weights in the dtype passed next to them; int32
 * index arrays (ids, positions, pad) are device arrays too. Compute runs on the
 * compute lane.
 */
/* How a KV cache is stored: rows of heads × hd elements in dt (the compute dtype,
 * or Q4 grouped along hd in format q), sequence i starting at byte i * seq_bytes. */
typedef struct zz_kv_layout {
  zz_dtype dt;
  zz_qfmt q;
  int64_t seq_bytes;
} zz_kv_layout;

typedef struct zz_device_ops {
  const char *name;      /* "cpu", "cuda" */
  zz_dtype compute_dtype;
  bool memory_is_host;   /* its memory is host RAM, shared with the CPU tier (the CPU device) */
  void (*destroy)(zz_device *dev);
  zz_status (*alloc)(zz_device *dev, size_t bytes, void **out);
  void (*free)(zz_device *dev, void *ptr);
  /* host memory for the CPU tier (pinned with CUDA) */
  zz_status (*host_alloc)(zz_device *dev, size_t bytes, void **out);
  void (*host_free)(zz_device *dev, void *ptr);
  /* raw byte copies, asynchronous on `lane` */
  zz_status (*write)(zz_device *dev, zz_lane lane, void *dst, const void *host_src, size_t bytes);
  zz_status (*read)(zz_device *dev, zz_lane lane, void *host_dst, const void *src, size_t bytes);
  /* device -> device raw bytes on `lane` (hidden states handed in and out in device memory) */
  zz_status (*copy)(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes);
  /* optional, GPUs only (NULL elsewhere): the device's ordinal and an id unique per
   * physical GPU ("GPU-<uuid> at PCI <bus id>"), so ranks can tell they share one */
  zz_status (*identity)(const zz_device *dev, int *ordinal_out, char *id_out, size_t len);
  /* host src (src_dt) → device (compute dtype), n elements, converting */
  zz_status (*upload)(zz_device *dev, zz_lane lane, void *dst, const void *host_src,
                      zz_dtype src_dt, int64_t n);
  /* device (compute dtype) → host dst (dst_dt), n elements, converting */
  zz_status (*download)(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt,
                        const void *src, int64_t n);
  zz_status (*sync)(zz_device *dev, zz_lane lane);
  /* whether this device runs `op` with a weight (or host side) of dtype dt */
  bool (*supports)(const zz_device *dev, zz_op op, zz_dtype dt);
  /* compute; see zz_kernels.h for each contract */
  zz_status (*embed_rows)(zz_device *dev, const void *table, zz_dtype table_dt, int64_t dim,
                          const int32_t *ids, int64_t n, void *out);
  zz_status (*add_rows)(zz_device *dev, void *x, int64_t dim, const void *table,
                        zz_dtype table_dt, const int32_t *ids, int64_t n);
  /* gamma and beta share w_dt */
  zz_status (*layernorm)(zz_device *dev, const void *x, int64_t n, int64_t dim,
                         const void *gamma, const void *beta, zz_dtype w_dt, float eps, void *y);
  /* b may be NULL (b_dt then unused) */
  zz_status (*linear)(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w,
                      zz_dtype w_dt, const void *b, zz_dtype b_dt, int64_t out, void *y, int relu);
  zz_status (*add)(zz_device *dev, const void *a, const void *b, int64_t n, void *y);
  zz_status (*kv_append)(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t h,
                         void *cache, int64_t kv_stride, int64_t pos);
  zz_status (*attention)(zz_device *dev, const void *q, const void *k, const void *v,
                         int64_t kv_stride, int64_t b, int64_t sq, int64_t t, int64_t q_start,
                         int64_t heads, int64_t kv_heads, int64_t hd, const int32_t *pad, void *out,
                         void *scratch);
  /* scratch bytes attention needs for these sizes (0: none); general: the Q4 / top-k
   * path of attention_ex (zz_attention_general) rather than a dense cache at keep 1 */
  size_t (*attention_scratch)(const zz_device *dev, int64_t b, int64_t sq, int64_t t, int64_t heads, bool general);
  /* compression (kernels/cpu/quant.c): a Q4 weight of format q; rows_q gathers
   * (add = 0) or adds (add = 1) table rows */
  zz_status (*linear_q)(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w, zz_qfmt q,
                        const void *b, zz_dtype b_dt, int64_t out, void *y, int relu);
  zz_status (*rows_q)(zz_device *dev, const void *table, zz_qfmt q, int64_t dim, const int32_t *ids, int64_t n,
                      void *out, int add);
  /* a cache in any layout (compute dtype or Q4, byte strides), attention with top-k */
  zz_status (*kv_append_ex)(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                            void *cache, const zz_kv_layout *l, int64_t pos);
  zz_status (*attention_ex)(zz_device *dev, const void *q, const void *k, const void *v,
                            const zz_kv_layout *l, int64_t b, int64_t sq, int64_t t, int64_t q_start,
                            int64_t heads, int64_t kv_heads, int64_t hd, const int32_t *pad, double keep, void *out,
                            void *scratch);
  zz_status (*rmsnorm)(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, zz_dtype w_dt,
                       float eps, void *y);
  zz_status (*rope)(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                    const zz_rope *rope);
  zz_status (*silu_mul)(zz_device *dev, const void *g, const void *u, int64_t n, void *y);
} zz_device_ops;


/* What alloc() handed out (runtime/device.c), for the wrappers' range checks. */
typedef struct zz_device_ranges zz_device_ranges;

struct zz_device {
  const zz_device_ops *ops;
  void *impl;
  size_t capacity; /* bytes of device memory this run may use (ZZ_TIER_GPU) */
  size_t reserved; /* of which the device keeps this much for itself (cuBLAS
                      workspace, conversion staging); memory plans get the rest */
  zz_pool *pool;      /* compute threads of the CPU device's kernels (NULL on CUDA) */
  zz_pool *attn_pool; /* CPU attention beside a host cache: on every device, sized
                         on its own (LM-Offload's thread control) */
  zz_device_ranges *ranges; /* live zz_device_alloc blocks (device.c) */
  bool bf16_weights; /* CPU device, --cpu-dtype bf16: 2-D weights in bf16 (zz_device_set_bf16_weights) */
};

/* Device creation and destruction (runtime/device.c). Thread counts <= 0 mean all
 * online cores; more than ZZ_POOL_MAX_THREADS is ZZ_ERR_INVALID_ARG.
 *
 * The CPU device: its memory is its own arena of `capacity` bytes (0: what the
 * machine has), so every tier path runs without a GPU. `threads` run its kernels,
 * `attn_threads` the CPU attention of an offloaded cache. */
zz_status zz_device_create_cpu(size_t capacity, int threads, int attn_threads, zz_device **out);
/* The CUDA device (ZZ_ERR_UNSUPPORTED when built without CUDA or no GPU is
 * visible); its kernels run on the GPU, `attn_threads` CPU threads attend beside a
 * cache on the host. */
zz_status zz_device_create_cuda(int ordinal, size_t capacity, int attn_threads, zz_device **out);
/* CUDA when a GPU is present, else the CPU device (saying so once on stderr);
 * `threads` is used by the CPU device only. */
zz_status zz_device_create_best(size_t capacity, int threads, int attn_threads, zz_device **out);
/* Gives back what the device still holds, joins its threads. Accepts NULL. */
void zz_device_destroy(zz_device *dev);
/* --cpu-dtype: the dtype weight matrices (2-D weights) are held in on the CPU
 * device and every tier it loads them from: f32 (the reference) or bf16;
 * vectors, activations and the KV cache stay f32. Refused on another device. */
zz_status zz_device_set_weight_dtype(zz_device *dev, zz_dtype dt);
/* The CPU-attention pool (never NULL on a created device). */
zz_pool *zz_device_attn_pool(zz_device *dev);

/*
 * The checked entry points (runtime/device.c): every call into a device goes
 * through these. Before dispatch each one checks, in O(number of allocations):
 *   - pointers are non-NULL and sizes positive (a copy of 0 bytes is a no-op);
 *   - every device range [p, p + bytes) lies inside one block this device handed
 *     out through zz_device_alloc. Device memory is only that, on every device:
 *     zz_device_host_alloc memory is host memory, also on the CPU device where
 *     both are plain RAM, so a host pointer passed as device memory fails on a
 *     machine without a GPU exactly as it would on one;
 *   - the host side of a copy does not lie in device memory;
 *   - weights, passed as tensors, have the shape the sizes say, a dtype the device
 *     supports for the op (zz_device_supports), and tier ZZ_TIER_GPU (they are in
 *     device memory, which the range check then confirms for dtype × shape bytes).
 *     A tensor with ndim 0 is "absent" (only where an argument says it may be).
 * A failed check is ZZ_ERR_INVALID_ARG with a message naming the device, the op,
 * the argument and the numbers. Values inside device arrays (token ids, pads) are
 * not checked: they may live on the GPU.
 */
bool zz_device_supports(const zz_device *dev, zz_op op, zz_dtype dt);

zz_status zz_device_alloc(zz_device *dev, size_t bytes, void **out);
/* ptr: NULL, or a block from zz_device_alloc (anything else is a broken invariant). */
void zz_device_free(zz_device *dev, void *ptr);
zz_status zz_device_host_alloc(zz_device *dev, size_t bytes, void **out);
void zz_device_host_free(zz_device *dev, void *ptr);
/* Raw byte copies host → device (write) and device → host (read) on `lane`. */
zz_status zz_device_write(zz_device *dev, zz_lane lane, void *dst, const void *host_src, size_t bytes);
zz_status zz_device_read(zz_device *dev, zz_lane lane, void *host_dst, const void *src, size_t bytes);
/* Raw byte copy device -> device on `lane` (both ranges in this device's memory). */
zz_status zz_device_copy(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes);
/* The GPU behind dev: its ordinal and an id unique per physical GPU (UUID and PCI
 * bus id); ZZ_ERR_UNSUPPORTED, naming the device, when it is not a GPU. */
zz_status zz_device_identity(const zz_device *dev, int *ordinal_out, char *id_out, size_t len);
/* n elements host (src_dt) → device (compute dtype), and back to dst_dt. */
zz_status zz_device_upload(zz_device *dev, zz_lane lane, void *dst, const void *host_src, zz_dtype src_dt,
                           int64_t n);
zz_status zz_device_download(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt, const void *src,
                             int64_t n);
zz_status zz_device_sync(zz_device *dev, zz_lane lane);

/* out[n, dim] = table[ids[i], :]; table is a weight [rows, dim]. */
zz_status zz_device_embed_rows(zz_device *dev, const zz_tensor *table, const int32_t *ids, int64_t n, void *out);
/* The same gather from an activation x [rows, dim] in the compute dtype (e.g. the
 * last position of each sequence of the hidden state). */
zz_status zz_device_gather_rows(zz_device *dev, const void *x, int64_t rows, int64_t dim, const int32_t *ids,
                                int64_t n, void *out);
/* x[n, dim] += table[ids[i], :]; table is a weight [rows, dim] (learned positions). */
zz_status zz_device_add_rows(zz_device *dev, void *x, const zz_tensor *table, const int32_t *ids, int64_t n);
/* y[n, dim] = layernorm(x[n, dim]) * gamma[dim] + beta[dim]; y may be x. */
zz_status zz_device_layernorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma,
                              const zz_tensor *beta, float eps, void *y);
/* y[n, out] = x[n, in] · w[out, in]ᵀ + b[out] (b NULL or ndim 0: none), ReLU when relu. */
zz_status zz_device_linear(zz_device *dev, const void *x, int64_t n, int64_t in, const zz_tensor *w,
                           const zz_tensor *b, int64_t out, void *y, int relu);
/* y[n] = a[n] + b[n]; y may alias a or b. */
zz_status zz_device_add(zz_device *dev, const void *a, const void *b, int64_t n, void *y);
/* cache[i, pos + r, :] = x[i, r, :]: x [b, sq, h], cache rows of h with batch stride kv_stride. */
zz_status zz_device_kv_append(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t h, void *cache,
                              int64_t kv_stride, int64_t pos);
/* zz_cpu_attention's contract; pad [b] int32; scratch of zz_device_attention_scratch
 * bytes (may be NULL when that is 0). */
zz_status zz_device_attention(zz_device *dev, const void *q, const void *k, const void *v, int64_t kv_stride,
                              int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                              int64_t hd, const int32_t *pad, void *out, void *scratch);
size_t zz_device_attention_scratch(const zz_device *dev, int64_t b, int64_t sq, int64_t t, int64_t heads,
                                   bool general);
/* The same two over a cache of any layout (a Q4 cache is quantized as rows are
 * appended and dequantized as attention reads them), and top-k sparse attention:
 * keep in (0, 1] is the fraction of visible keys each query keeps
 * (zz_cpu_attention_ex). supports(ZZ_OP_KV_APPEND / ZZ_OP_ATTENTION, l->dt) and,
 * for keep < 1, supports(ZZ_OP_ATTENTION_SPARSE, l->dt). */
zz_status zz_device_kv_append_ex(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                                 void *cache, const zz_kv_layout *l, int64_t pos);
/* Whether attention over a cache stored in dt with fraction keep takes the general
 * path (a Q4 cache or top-k: keep < 1) rather than the dense kernel; it decides the
 * scratch (attention_scratch's `general`) and the CUDA device's kernel. */
bool zz_attention_general(zz_dtype dt, double keep);
zz_status zz_device_attention_ex(zz_device *dev, const void *q, const void *k, const void *v, const zz_kv_layout *l,
                                 int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads,
                                 int64_t hd, const int32_t *pad, double keep, void *out, void *scratch);
/* y[n, dim] = x / sqrt(mean(x²) + eps) * gamma[dim] (RMSNorm); y may be x. */
zz_status zz_device_rmsnorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma, float eps,
                            void *y);
/* Rotary embedding of x [n, heads * hd] in place, row i at position pos[i] (device
 * int32 [n]); hd even. */
zz_status zz_device_rope(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                         const zz_rope *rope);
/* y[n] = silu(g[n]) * u[n]; y may alias g or u. */
zz_status zz_device_silu_mul(zz_device *dev, const void *g, const void *u, int64_t n, void *y);

/* ================================================================ model */

#define ZZ_MAX_EOS_IDS 8 /* eos_token_id's list (Llama 3.1 lists three) */

typedef struct zz_config {
  char model_type[32];  /* config.json's model_type: picks the architecture */
  char name[64];        /* preset name or directory */
  int64_t vocab_size;
  int64_t hidden;       /* hidden_size */
  int64_t ffn;          /* intermediate (MLP) width */
  int64_t n_layers;     /* transformer layers */
  int64_t n_heads;      /* query heads */
  int64_t n_kv_heads;   /* key/value heads (== n_heads without grouped-query attention) */
  int64_t head_dim;     /* hidden / n_heads */
  int64_t max_pos;      /* max_position_embeddings */
  int64_t embed_dim;    /* token embedding width (== hidden unless projected) */
  bool pre_ln;          /* normalisation before each sublayer */
  bool final_ln;        /* a final norm before the LM head */
  bool enable_bias;
  int32_t bos, pad;
  int32_t eos_ids[ZZ_MAX_EOS_IDS]; /* every id that ends a sequence: eos_token_id of */
  int n_eos;                        /* generation_config.json, else of config.json */
  float ln_eps;
  zz_dtype dtype;       /* torch_dtype (dtype) of the checkpoint */
  zz_rope rope;         /* rotary embeddings (architectures with rotary positions) */
  bool tied_head;       /* the LM head is the token embedding (tie_word_embeddings) */
} zz_config;

/* Bounds a configuration is checked against (config.json may lie). */
#define ZZ_MAX_POSITIONS (1 << 20) /* max_position_embeddings */
#define ZZ_MAX_VOCAB (1 << 24)     /* vocab_size */

/* Whether tok is one of the configuration's end ids. */
bool zz_config_is_eos(const zz_config *c, int32_t tok);

/* Preset names of every architecture (opt-125m … opt-175b), or a Hugging Face
 * model directory's config.json (its model_type picks the architecture, which
 * reads its own fields). */
zz_status zz_config_preset(const char *name, zz_config *out);
zz_status zz_config_load(const char *dir, zz_config *out);
/* A preset name, or a directory holding config.json. */
zz_status zz_config_resolve(const char *model, zz_config *out);
/* Preset names of every architecture, NULL terminated. */
const char *const *zz_config_preset_names(void);

typedef enum zz_layer_kind {
  ZZ_LAYER_INPUT_EMBED = 0, /* token (+ position) embedding */
  ZZ_LAYER_ATTENTION,       /* self attention of one transformer layer, with its norm and residual */
  ZZ_LAYER_MLP,             /* the MLP of one transformer layer, with its norm and residual */
  ZZ_LAYER_OUTPUT_EMBED,    /* final norm, LM head */
} zz_layer_kind;

#define ZZ_MAX_LAYER_WEIGHTS 12

/* How --dummy fills a weight: values scaled like a trained checkpoint's. */
typedef enum zz_init_kind {
  ZZ_INIT_MATRIX = 0, /* N(0, 0.02²)-like */
  ZZ_INIT_BIAS,       /* small around 0 */
  ZZ_INIT_NORM_GAIN,  /* near 1 */
  ZZ_INIT_NORM_BIAS,  /* near 0, a norm's spread */
} zz_init_kind;

typedef struct zz_weight_spec {
  char name[ZZ_NAME_LEN]; /* canonical checkpoint name */
  int ndim;               /* 0: absent in this configuration (e.g. no bias) */
  int64_t shape[2];
  zz_init_kind init;      /* for --dummy */
} zz_weight_spec;

/* What an attention layer keeps per position: K and V rows of kv_heads × head_dim
 * elements of dtype each. */
typedef struct zz_cache_spec {
  int64_t kv_heads, head_dim;
  zz_dtype dtype;
  zz_qfmt q; /* dtype Q4: groups along head_dim */
} zz_cache_spec;

/* One unit of the schedule: loaded once per block, used by every GPU batch. */
typedef struct zz_layer {
  zz_layer_kind kind;
  int index; /* transformer layer for ATTENTION/MLP, -1 otherwise */
  int n_weights;
  zz_weight_spec weights[ZZ_MAX_LAYER_WEIGHTS];
  int64_t weight_numel; /* sum over weights */
  bool has_cache;       /* ATTENTION layers own a KV cache */
  zz_cache_spec cache;  /* when has_cache (dtype: set by the memory plan) */
} zz_layer;

struct zz_arch; /* an architecture's table: runtime/arch_impl.h */

typedef struct zz_model {
  zz_config cfg;
  const struct zz_arch *arch;
  int n_layers; /* entries of layers: embed, attention/MLP per transformer layer, output */
  zz_layer *layers;
} zz_model;

zz_status zz_model_init(const zz_config *cfg, zz_model *out);
void zz_model_free(zz_model *m);
/* Total weight elements of the model. */
int64_t zz_model_numel(const zz_model *m);

/* ================================================================ sizes */
/*
 * Every byte count of the runtime, as plain functions of dimensions and dtypes:
 * the memory plan, the engine and the planner call these and nothing else.
 */
#define ZZ_ALIGN 256      /* every device and host buffer starts on a multiple of this */
#define ZZ_DISK_ALIGN 4096 /* disk transfers bypass the page cache: offsets, lengths, buffers */

size_t zz_align_up(size_t x, size_t a);
size_t zz_align_down(size_t x, size_t a);
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
/* A layer's weights back to back in dt, each aligned to `align`: offsets of each
 * weight in off_out (may be NULL; absent weights get SIZE_MAX), total returned. */
size_t zz_layer_weight_layout(const zz_layer *l, zz_dtype dt, size_t align,
                              size_t off_out[ZZ_MAX_LAYER_WEIGHTS]);
/* The same with matrices in Q4 of format *q (q NULL: uncompressed). */
size_t zz_layer_weight_layout_b(const zz_layer *l, zz_dtype dt, const zz_qfmt *q, bool bf16, size_t align,
                                size_t off_out[ZZ_MAX_LAYER_WEIGHTS]);
size_t zz_layer_weight_layout_q(const zz_layer *l, zz_dtype dt, const zz_qfmt *q, size_t align,
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
/* Sizes overflowing size_t are refused: a * b, or ZZ_ERR_INVALID_ARG naming what. */
zz_status zz_mul_size(size_t a, size_t b, const char *what, size_t *out);

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

/* Deterministic random values for weight `spec`, scaled like a real checkpoint:
 * matrices with std 0.02 around 0, LN gains near 1, biases small. Element i is a
 * function of (name, i) alone: the same values for any pool (NULL: the caller's
 * thread), run and device; `pool` fills ranges in parallel. */
void zz_weights_dummy(const zz_weight_spec *spec, zz_dtype dt, void *dst, zz_pool *pool);

/* ================================================================ tokenizer */

/* Byte-pair encoding from a model directory: tokenizer.json when it has one (as
 * AutoTokenizer prefers it; LLaMA-3 byte-level, LLaMA-1/2 SentencePiece-style,
 * GPT-2 style; see docs/llama.md), else GPT-2's vocab.json + merges.txt. */
typedef struct zz_tokenizer zz_tokenizer;

zz_status zz_tokenizer_load(const char *dir, zz_tokenizer **out);
/* Whether dir holds a tokenizer.json (zz_tokenizer_load then reads it). */
bool zz_tokenizer_has_json(const char *dir);
/* The special ids a prompt's text gets (HF's add_special_tokens=True): BOS first
 * and EOS last, -1 where none; for tokenizer.json from its post-processor, or
 * add_bos_token / add_eos_token of tokenizer_config.json for the LlamaTokenizer
 * classes. False for vocab.json + merges.txt, which say nothing (OPT's BOS comes
 * from config.json). */
bool zz_tokenizer_specials(const zz_tokenizer *tok, int32_t *bos_out, int32_t *eos_out);
void zz_tokenizer_free(zz_tokenizer *tok);
int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok);
/* text (len bytes of UTF-8, need not be NUL terminated) → *ids_out (malloc'd,
 * caller frees), *n_out ids. No special tokens are added (tokenizer.json's added
 * tokens spelled in the text are found, as Hugging Face does; so are those that
 * tokenizer_config.json / special_tokens_map.json register beside vocab.json). Invalid UTF-8 is an
 * error naming the byte offset. */
zz_status zz_tokenizer_encode(const zz_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids_out, int64_t *n_out);
/* The same over the whole of a text file (an error names the file). */
zz_status zz_tokenizer_encode_file(const zz_tokenizer *tok, const char *path, int32_t **ids_out, int64_t *n_out);
/* ids → *text_out (malloc'd, NUL terminated), *len_out bytes, by the decoder
 * (tokenizer.json's, or GPT-2's byte mapping): the string Hugging Face's decode
 * gives, always UTF-8 (U+FFFD where the tokens' bytes are not; see tokenizer.c).
 * Ids out of range are an error; special tokens decode to their text. */
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

/* FNV-1a over n bytes, going on from h (ZZ_FNV_BASIS to start): the tree's one
 * byte hash (tokenizer tables, the job record's prompt and config hashes, the
 * resume id set, dummy weights' per-name streams). */
#define ZZ_FNV_BASIS 0xCBF29CE484222325ull
uint64_t zz_fnv1a(uint64_t h, const void *p, size_t n);

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
  zz_qfmt wq, cq;        /* their formats; bits 0: FlexGen's (4 bits, groups of 64) */
  double attn_sparsity;  /* fraction of keys kept, a whole number of billionths in
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

/* ================================================================ generation */

/* The sizes an engine is built for: every block is padded to prompt_len and
 * generates up to gen_len tokens. */
typedef struct zz_shape {
  int64_t prompt_len; /* s: longest prompt of any block */
  int64_t gen_len;    /* n: new tokens per sequence */
} zz_shape;

/* The disk tier's bandwidths as the engine gets them (runtime/disk.c): a file
 * under dir opened like the offload file (page cache bypassed), `bytes` written
 * in `chunk`-sized transfers and synced, then read back twice (the second
 * pass counts); bytes per second. */
zz_status zz_disk_measure(const char *dir, size_t bytes, size_t chunk, double *read_bw, double *write_bw);
/* Free bytes under dir. */
size_t zz_disk_free_bytes(const char *dir);

/* Capacities of the three tiers and where the disk tier lives. */
typedef struct zz_tiers {
  size_t cap[ZZ_TIER_COUNT]; /* GPU: 0 = the device's capacity; CPU: 0 = physical RAM;
                                DISK: 0 = free space under offload_dir */
  const char *offload_dir;   /* NULL: $TMPDIR or /tmp */
} zz_tiers;

/*
 * The memory plan: a layout of every buffer the engine will bind — one entry per
 * buffer (what it is, tier, purpose, dtype, shape, bytes, offset in its arena) —
 * for a model slice [layer_begin, layer_end), n_groups micro-batch groups, a
 * policy and a shape; and the totals per tier and purpose. Weights are placed per
 * layer, KV cache per (group, layer, GPU batch) tensor pair and activations per
 * (group, GPU batch), each by FlexGen's rule: an item goes to the GPU when the
 * midpoint of its cumulative share (by size) falls below the GPU percentage, else
 * to the CPU when below GPU + CPU, else to disk. The engine allocates one arena per
 * tier and purpose of exactly these totals and only binds pointers from the
 * layout; the planner uses the same numbers as its memory constraints.
 */
typedef enum zz_buf_role {
  ZZ_BUF_WEIGHT = 0,  /* home of weight (a = slice layer, b = weight) */
  ZZ_BUF_CACHE_K,     /* home of K of (a = group, b = cache layer of the slice, c = batch) */
  ZZ_BUF_CACHE_V,
  ZZ_BUF_ACT,         /* home of the hidden state of (a = group, c = batch) */
  ZZ_BUF_INDEX,       /* index arrays of (a = group, c = batch): b = 0 device, 1 host */
  ZZ_BUF_W_SLOT,      /* device slot a (0, 1) for an offloaded layer's weights */
  ZZ_BUF_W_STAGE,     /* host: one weight read from disk */
  ZZ_BUF_LOAD,        /* host: one weight read from the checkpoint */
  ZZ_BUF_KV_SLOT,     /* device slot a (0..2): b = 0 K, 1 V */
  ZZ_BUF_KV_STAGE,    /* host slot a (0..2) for disk cache: b = 0 K, 1 V */
  ZZ_BUF_ACT_SLOT,    /* device slot a (0..2) for offloaded activations */
  ZZ_BUF_ACT_STAGE,   /* host slot a (0..2) for disk activations */
  ZZ_BUF_CPU_ATTN,    /* host f32 buffers of CPU attention: a = 0 q, 1 k, 2 v, 3 out, 4 scratch */
  ZZ_BUF_WORK,        /* device workspace of the largest layer */
  ZZ_BUF_DEV_LOGITS,  /* device [gbs, vocab] */
  ZZ_BUF_LOGITS,      /* host f32 [gbs * num_gb, vocab] of the group just stepped */
  ZZ_BUF_ROLE_COUNT
} zz_buf_role;

typedef struct zz_buffer {
  zz_buf_role role;
  int a, b, c;            /* indices, see zz_buf_role */
  zz_tier tier;
  zz_purpose purpose;
  zz_dtype dtype;
  int ndim;
  int64_t shape[ZZ_MAX_DIMS];
  size_t bytes;           /* reserved, alignment padding included */
  size_t align;
  size_t offset;          /* in its (tier, purpose) arena; DISK: the arenas lie back to
                             back in the offload file in purpose order */
} zz_buffer;

/* What a plan is built for. */
typedef struct zz_plan_spec {
  zz_policy policy;
  zz_shape shape;
  int layer_begin, layer_end; /* a slice of the model's layers; 0, 0: all of them */
  int n_groups;               /* micro-batch groups, each a block of its own (>= 1) */
  zz_dtype compute_dtype;     /* the device's */
  zz_dtype store_dtype;       /* weights on the CPU and disk tiers */
  bool bf16_weights;          /* 2-D weights in bf16 on every tier (zz_device.bf16_weights) */
  size_t workspace;           /* the largest layer's device scratch (arch workspace) */
} zz_plan_spec;

typedef struct zz_memplan {
  zz_plan_spec spec;
  size_t bytes[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_buffer *buf;       /* [n_buf], in binding order */
  int n_buf;
  zz_tier *weight_tier; /* [slice layers] */
  zz_tier *cache_tier;  /* [n_groups * cache layers * num_gb]: (g * Lc + l) * num_gb + k */
  zz_tier *act_tier;    /* [n_groups * num_gb]: g * num_gb + k */
  bool any_offload[ZZ_PURPOSE_COUNT]; /* some weights / cache / act not on the GPU */
  bool any_disk[ZZ_PURPOSE_COUNT];
} zz_memplan;

zz_status zz_memplan_build_spec(const zz_model *m, const zz_plan_spec *spec, zz_memplan *out);
/* The whole model, one group. */
zz_status zz_memplan_build(const zz_model *m, const zz_policy *pol, const zz_shape *shape,
                           zz_dtype compute_dt, zz_dtype store_dt, size_t workspace, zz_memplan *out);
void zz_memplan_free(zz_memplan *p);
size_t zz_memplan_tier_total(const zz_memplan *p, zz_tier t);
/* ZZ_ERR_INFEASIBLE naming the first tier whose plan exceeds cap, with numbers. */
zz_status zz_memplan_check(const zz_memplan *p, const size_t cap[ZZ_TIER_COUNT]);
/* "weights.3.1 cpu weights f32 [768, 768] 2.25 MiB @ 0" into buf. */
const char *zz_buffer_str(const zz_buffer *b, char *buf, size_t len);
/* For a device whose memory is host RAM (the CPU device): its arena (the GPU
 * tier) and the CPU tier draw on the same RAM, so their sum must fit host_ram.
 * ZZ_ERR_INFEASIBLE naming both numbers otherwise. */
zz_status zz_memplan_check_shared(const zz_memplan *p, size_t host_ram);

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
} zz_engine_opts;

/* Builds the engine: plans every buffer (refusing a plan that does not fit before
 * anything is allocated), binds them, loads the slice's weights from ck (NULL:
 * dummy weights) to their tiers. */
zz_status zz_engine_create_opts(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                                const zz_engine_opts *opts, zz_engine **out);
/* The whole model, one group; tiers may be NULL (defaults). */
zz_status zz_engine_create_tiers(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                                 const zz_policy *pol, const zz_shape *shape,
                                 const zz_tiers *tiers, zz_engine **out);
zz_status zz_engine_create(zz_device *dev, const zz_model *m, const zz_checkpoint *ck,
                           const zz_policy *pol, const zz_shape *shape, zz_engine **out);
void zz_engine_destroy(zz_engine *eng);

/* Plans without building: the plan the engine would use for these options on dev,
 * checked against the tiers' capacities (ZZ_ERR_INFEASIBLE with the numbers). */
zz_status zz_engine_plan_check(const zz_device *dev, const zz_model *m, const zz_engine_opts *opts,
                               zz_memplan *out);

/* Starts a block on group g: n sequences (<= gbs * num_gb) with the given prompt
 * lengths (each <= shape.prompt_len); the block is left padded to the longest. */
zz_status zz_engine_begin_block(zz_engine *eng, int group, int64_t n, const int64_t *lens);

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
} zz_step_io;
/* One token step (0: the prompt) of group g over the slice. A slice that ends at
 * the last layer leaves the last position's logits in zz_engine_logits(). */
zz_status zz_engine_step(zz_engine *eng, int group, int step, const zz_step_io *io);
/* [n, vocab] f32 logits of the group just stepped (slices ending at the last layer). */
const float *zz_engine_logits(const zz_engine *eng);
/* Bytes of the hidden state handed in or out for group g at this step. */
size_t zz_engine_hidden_bytes(const zz_engine *eng, int group, int step);
/* The padded prompt length of group g's block (after begin_block). */
int64_t zz_engine_block_len(const zz_engine *eng, int group);

const zz_model *zz_engine_model(const zz_engine *eng);
const zz_policy *zz_engine_policy(const zz_engine *eng);
const zz_shape *zz_engine_shape(const zz_engine *eng);
int zz_engine_groups(const zz_engine *eng);

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
  uint64_t disk_read_bytes, disk_write_bytes;
  double disk_read_s;           /* time inside disk reads */
} zz_engine_stats;
void zz_engine_get_stats(const zz_engine *eng, zz_engine_stats *out);

/* ================================================================ generate */
/*
 * The token loop (runtime/generate.c): prompts of up to n_groups × gbs × num_gb
 * sequences are cut into the engine's groups; each token step runs every group
 * through the engine, samples each live sequence's next token and tracks EOS.
 */

struct zz_seq_params; /* runtime/zz_seq.h: one sequence's own settings */
struct zz_seq_out;

/* One block of prompts to generate for. */
typedef struct zz_request {
  int64_t n;                   /* prompts, at most n_groups * gbs * num_gb */
  const int32_t *const *ids;   /* ids[i]: prompt i (BOS included by the caller) */
  const int64_t *lens;         /* lens[i] >= 1, <= shape.prompt_len */
  const uint64_t *streams;     /* rng stream per prompt (NULL: its index) */
  int max_new_tokens;          /* <= shape.gen_len */
  bool ignore_eos;             /* benchmarks: always generate max_new_tokens */
  zz_sampling sampling;
  /* optional: called with each step's logits of each sequence (f32, vocab) */
  void (*on_logits)(void *ctx, int64_t seq, int step, const float *logits, int64_t vocab);
  void *ctx;
  /* optional: [n] each sequence's own settings (zz_seq.h); NULL: the ones above */
  const struct zz_seq_params *params;
  /* optional: after each token of a live sequence (tokens[0..n) so far); true ends
   * it there (a stop string); called with ctx */
  bool (*on_token)(void *ctx, int64_t seq, const int32_t *tokens, int64_t n);
} zz_request;

typedef struct zz_result {
  int32_t **tokens;  /* tokens[i]: new tokens of prompt i (ends at EOS, included) */
  int64_t *n_tokens;
  double prefill_s, decode_s; /* wall time of the two phases */
  struct zz_seq_out *out;     /* [n] why each ended, its log-probabilities (zz_seq.h); NULL unless
                                 the request had params or on_token */
} zz_result;

/* One sequence's next token at one step of the token loop: zz_sample from its
 * logits [vocab] with its own generator, then the EOS rule: *ended_out is true when
 * the token is EOS and ignore_eos is off. The token is kept in the output (EOS
 * included); zz_sequence_input gives what the sequence feeds into the next step.
 * zz_generate and the pipeline's last rank (stage/) both sample with this. */
int32_t zz_sample_sequence(const zz_config *c, const float *logits, const zz_sampling *s, bool ignore_eos,
                           zz_rng *rng, void *scratch, bool *ended_out);
/* The next step's input of a sequence whose newest token is `token`: the token
 * itself, or the pad token once the sequence has ended. */
int32_t zz_sequence_input(const zz_config *c, int32_t token, bool ended);

/* Checks a request against an engine's shape and vocabulary. */
zz_status zz_request_check(const zz_engine *eng, const zz_request *req);
/* Generates for req on an engine holding the whole model. */
zz_status zz_generate(zz_engine *eng, const zz_request *req, zz_result *res);
void zz_result_free(zz_result *res, int64_t n);

/* Held-out perplexity (runtime/perplexity.c), teacher forced: ids[0..n) (no BOS)
 * are cut into windows of the engine's gen_len tokens, each a sequence that starts
 * at BOS (the engine is built with prompt_len 1) and is fed its own next token at
 * every decoding step, so every prediction after a window's first reads the KV
 * cache as the policy stores it. */
typedef struct zz_ppl {
  double nll;      /* sum over predicted tokens of -log p(token) */
  int64_t tokens;  /* predictions made (n) */
  int64_t windows;
  double ppl;      /* exp(nll / tokens) */
  int32_t *argmax; /* [n] the top-1 prediction for each token (agreement between policies) */
} zz_ppl;
zz_status zz_perplexity(zz_engine *eng, const int32_t *ids, int64_t n, zz_ppl *out);
void zz_ppl_free(zz_ppl *r);
/* The share of positions i < n where a[i] == b[i] (0 when n is 0): top-1 or greedy
 * agreement between two runs. */
double zz_token_agreement(const int32_t *a, const int32_t *b, int64_t n);

/* ================================================================ JSON Lines jobs */

/* One prompt of a job file: {"id": …, "prompt": "text"} or {"input_ids": [..]}. */
typedef struct zz_prompt {
  char *id;        /* the id as JSON text ("7", "\"abc\""), or the line number */
  char *text;      /* NULL when input_ids was given */
  int32_t *ids;    /* NULL when prompt was given */
  int64_t n_ids;
  int64_t line;    /* 1-based line in the file */
  char *raw;       /* the line's JSON when it has keys beyond id, prompt, input_ids (its settings,
                      or an OpenAI batch request: launch/lines.c reads it), else NULL */
  bool openai;     /* an OpenAI batch request line ("custom_id", "body"...): id is its custom_id */
} zz_prompt;

typedef struct zz_prompt_reader zz_prompt_reader;
/* path "-" reads stdin. */
zz_status zz_prompt_reader_open(const char *path, zz_prompt_reader **out);
/* *got = false at end of file; a malformed line is an error naming file:line. */
zz_status zz_prompt_reader_next(zz_prompt_reader *r, zz_prompt *p, bool *got);
/* Back to the first line, so a job can check every line before it runs any; stdin
 * is kept in an unnamed temporary file as it is read, and read again from there. */
zz_status zz_prompt_reader_rewind(zz_prompt_reader *r);
void zz_prompt_reader_close(zz_prompt_reader *r);
void zz_prompt_free(zz_prompt *p);

/* A file that replaces `path` (runtime/newfile.c): written in full, then renamed
 * into place, so the old file stays whole until the new one is, and a link at path
 * is replaced, never written through. */
typedef struct zz_newfile {
  int fd;          /* the new file, open for writing */
  char path[4096]; /* where it goes */
  char tmp[4096];  /* its hidden name in path's directory ("" while unnamed, O_TMPFILE) */
} zz_newfile;
zz_status zz_newfile_create(const char *path, zz_newfile *nf);
/* Syncs it and renames it to path (the directory synced too); fd stays open. */
zz_status zz_newfile_publish(zz_newfile *nf);
/* Closes fd; an unpublished file is removed. */
void zz_newfile_discard(zz_newfile *nf);
/* The three for `len` bytes of data. */
zz_status zz_file_replace(const char *path, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_RUNTIME_H */
