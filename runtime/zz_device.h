/*
 * zz_device.h — the compute device: the CPU device (the reference) or a CUDA GPU,
 * its concurrent lanes, the ops table a backend fills (runtime/device_cpu.c,
 * runtime/device_cuda.c), and the checked zz_device_* wrappers (runtime/device.c)
 * through which everything else calls a device.
 *
 * Usage:
 *     zz_device *dev;  void *x;
 *     ZZ_CHECK(zz_device_create_cpu(0, 0, 0, &dev));  // all memory, all cores
 *     ZZ_CHECK(zz_device_alloc(dev, bytes, &x));
 *     ZZ_CHECK(zz_device_upload(dev, ZZ_LANE_COMPUTE, x, host, ZZ_DTYPE_F32, n));
 *     ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_COMPUTE));
 *     zz_device_free(dev, x);  zz_device_destroy(dev);
 */
#ifndef ZZ_DEVICE_H
#define ZZ_DEVICE_H

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  ZZ_OP_ATTENTION_SPARSE, /* zz_device_attention with keep < 1 (dt: the cache's) */
  ZZ_OP_RMSNORM,
  ZZ_OP_ROPE,
  ZZ_OP_SILU_MUL,
  ZZ_OP_MOE_ROUTE,   /* zz_device_moe_route */
  ZZ_OP_MOE_SCATTER, /* zz_device_moe_scatter, also zz_device_zero */
  ZZ_OP_COUNT
} zz_op;
const char *zz_op_name(zz_op op); /* "embed_rows", ..., "?" when out of range */

#include "zz_device_desc.h" /* what a device is (plain data), apart from the live zz_device */

/* A KV cache's layout (zz_kv_layout) and one attention call (zz_attn_args, at the
 * device's compute dtype): kernels/zz_attn.h, the one struct from the engine to
 * every backend. */

/*
 * A device backend's ops table (filled in runtime/device_cpu.c and
 * runtime/device_cuda.c). Nothing but runtime/device.c calls these: the
 * zz_device_* wrappers below check every argument first (sizes, ranges inside the
 * device's allocations, zz_device_supports: the op and dtype in the description's
 * table), so a backend may assert what they checked. Compute ops take device
 * pointers; activations are in the device's compute dtype (f32 on the CPU, f16 on
 * CUDA), weights in the dtype passed next to them; int32 index arrays (ids,
 * positions, pad) are device arrays too. Compute runs on the compute lane.
 */
typedef struct zz_device_ops {
  zz_device_kind kind; /* what it is (name, dtype, what it runs): zz_device_desc_init */
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
  zz_status (*upload)(zz_device *dev, zz_lane lane, void *dst, const void *host_src, zz_dtype src_dt, int64_t n);
  /* device (compute dtype) → host dst (dst_dt), n elements, converting */
  zz_status (*download)(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt, const void *src, int64_t n);
  zz_status (*sync)(zz_device *dev, zz_lane lane);
  /* compute; see zz_kernels.h for each contract. A weight comes as its bytes, its
   * dtype and its Q4 format (read only when the dtype is Q4: kernels/cpu/quant.c) */
  zz_status (*embed_rows)(zz_device *dev, const void *table, zz_dtype table_dt, zz_qfmt table_q, int64_t dim,
                          const int32_t *ids, int64_t n, void *out);
  zz_status (*add_rows)(zz_device *dev, void *x, int64_t dim, const void *table, zz_dtype table_dt, zz_qfmt table_q,
                        const int32_t *ids, int64_t n);
  /* gamma and beta share w_dt */
  zz_status (*layernorm)(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, const void *beta,
                         zz_dtype w_dt, float eps, void *y);
  /* b may be NULL (b_dt then unused) */
  zz_status (*linear)(zz_device *dev, const void *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, zz_qfmt w_q,
                      const void *b, zz_dtype b_dt, int64_t out, void *y, int relu);
  zz_status (*add)(zz_device *dev, const void *a, const void *b, int64_t n, void *y);
  /* a cache in any layout (the compute dtype or Q4, byte strides) */
  zz_status (*kv_append)(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache,
                         const zz_kv_layout *l, int64_t pos);
  /* over a cache in any layout; top-k when a->keep < 1 */
  zz_status (*attention)(zz_device *dev, const zz_attn_args *a);
  zz_status (*rmsnorm)(zz_device *dev, const void *x, int64_t n, int64_t dim, const void *gamma, zz_dtype w_dt,
                       float eps, void *y);
  zz_status (*rope)(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                    const zz_rope *rope);
  zz_status (*silu_mul)(zz_device *dev, const void *g, const void *u, int64_t n, void *y);
  /* mixture of experts: idx, w device arrays [n, k] (int32, f32); w [m] f32 */
  zz_status (*moe_route)(zz_device *dev, const void *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                         int32_t *idx, float *w);
  zz_status (*moe_scatter)(zz_device *dev, const void *y, const int32_t *rows, const float *w, int64_t m, int64_t dim,
                           void *out);
  /* bytes of device memory set to 0, on the compute lane */
  zz_status (*zero)(zz_device *dev, void *p, size_t bytes);
} zz_device_ops;


/* What alloc() handed out (runtime/device.c), for the wrappers' range checks. */
typedef struct zz_device_ranges zz_device_ranges;

struct zz_device {
  const zz_device_ops *ops;
  zz_device_desc desc; /* what it is: kind, dtype, capacity and reserved bytes, bf16 weights, ops it runs */
  void *impl;
  zz_pool *pool;            /* compute threads of the CPU device's kernels (NULL on CUDA) */
  zz_pool *attn_pool;       /* CPU attention beside a host cache: on every device, sized
                         on its own (LM-Offload's thread control) */
  zz_device_ranges *ranges; /* live zz_device_alloc blocks (device.c) */
  /* host bytes moved by write/upload (to the device) and read/download (from it),
   * every lane: the PCIe traffic of a GPU; added atomically (lanes are threads) */
  uint64_t bytes_to_device, bytes_from_device;
  /* host memory the compute lane reads small results back into (zz_device_host_scratch) */
  void *host_scratch;
  size_t host_scratch_bytes;
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
/* The GPU a process of a node computes on: its local rank over the GPUs visible,
 * round-robin, so ranks beyond the GPU count share them (--comm mpi; NCCL refuses
 * two ranks on one GPU on its own). 0 without CUDA or a GPU. */
int zz_device_cuda_ordinal_of(int local_rank);
/* CUDA on GPU `ordinal` when a GPU is present, else the CPU device (saying so
 * once on stderr); `threads` is used by the CPU device only. */
zz_status zz_device_create_best(int ordinal, size_t capacity, int threads, int attn_threads, zz_device **out);
/* Gives back what the device still holds, joins its threads. Accepts NULL. */
void zz_device_destroy(zz_device *dev);
/* --cpu-dtype: the dtype weight matrices (2-D weights) are held in on the CPU
 * device and every tier it loads them from: f32 (the reference) or bf16;
 * vectors, activations and the KV cache stay f32. Refused on another device. */
zz_status zz_device_set_weight_dtype(zz_device *dev, zz_dtype dt);
/* --cpu-act: what the CPU device's 4/8-bit linears multiply the weights with, x
 * in f32 (exact, the default) or quantized to int8 per group (faster, rounded:
 * docs/cpu.md "int8 activations"); int8 on another device is refused. */
zz_status zz_device_set_cpu_act(zz_device *dev, zz_cpu_act act);
/* The CPU-attention pool (never NULL on a created device). */
zz_pool *zz_device_attn_pool(zz_device *dev);
/* The CPU device's compute pool (NULL on a GPU). */
zz_pool *zz_device_compute_pool(zz_device *dev);

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
/* At least `bytes` of host memory (zz_device_host_alloc's) for the compute lane's
 * read-backs (an MoE layer's routing): kept by the device and grown only when a
 * call asks for more than any before, so a steady step allocates nothing. Valid
 * until the next call; compute lane only; freed with the device. */
zz_status zz_device_host_scratch(zz_device *dev, size_t bytes, void **out);
/* Raw byte copies host → device (write) and device → host (read) on `lane`. */
zz_status zz_device_write(zz_device *dev, zz_lane lane, void *dst, const void *host_src, size_t bytes);
zz_status zz_device_read(zz_device *dev, zz_lane lane, void *host_dst, const void *src, size_t bytes);
/* Raw byte copy device -> device on `lane` (both ranges in this device's memory). */
zz_status zz_device_copy(zz_device *dev, zz_lane lane, void *dst, const void *src, size_t bytes);
/* The GPU behind dev: its ordinal and an id unique per physical GPU (UUID and PCI
 * bus id); ZZ_ERR_UNSUPPORTED, naming the device, when it is not a GPU. */
zz_status zz_device_identity(const zz_device *dev, int *ordinal_out, char *id_out, size_t len);
/* n elements host (src_dt) → device (compute dtype), and back to dst_dt. */
zz_status zz_device_upload(zz_device *dev, zz_lane lane, void *dst, const void *host_src, zz_dtype src_dt, int64_t n);
zz_status zz_device_download(zz_device *dev, zz_lane lane, void *host_dst, zz_dtype dst_dt, const void *src, int64_t n);
zz_status zz_device_sync(zz_device *dev, zz_lane lane);

/* out[n, dim] = table[ids[i], :]; table is a weight [rows, dim] (Q4 too). */
zz_status zz_device_embed_rows(zz_device *dev, const zz_tensor *table, const int32_t *ids, int64_t n, void *out);
/* The same gather from an activation x [rows, dim] in the compute dtype (e.g. the
 * last position of each sequence of the hidden state). */
zz_status zz_device_gather_rows(zz_device *dev, const void *x, int64_t rows, int64_t dim, const int32_t *ids, int64_t n,
                                void *out);
/* x[n, dim] += table[ids[i], :]; table is a weight [rows, dim] (learned positions). */
zz_status zz_device_add_rows(zz_device *dev, void *x, const zz_tensor *table, const int32_t *ids, int64_t n);
/* y[n, dim] = layernorm(x[n, dim]) * gamma[dim] + beta[dim]; y may be x. */
zz_status zz_device_layernorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma,
                              const zz_tensor *beta, float eps, void *y);
/* y[n, out] = x[n, in] · w[out, in]ᵀ + b[out] (b NULL or ndim 0: none), ReLU when relu. */
zz_status zz_device_linear(zz_device *dev, const void *x, int64_t n, int64_t in, const zz_tensor *w, const zz_tensor *b,
                           int64_t out, void *y, int relu);
/* y[n] = a[n] + b[n]; y may alias a or b. */
zz_status zz_device_add(zz_device *dev, const void *a, const void *b, int64_t n, void *y);
/* The KV cache in any layout: the compute dtype, or Q4 (quantized as rows are
 * appended, dequantized as attention reads them); supports(ZZ_OP_KV_APPEND /
 * ZZ_OP_ATTENTION, l->dt).
 * cache[i, pos + r, :] = x[i, r, :]: x [b, sq, heads * hd], cache laid out as l. */
zz_status zz_device_kv_append(zz_device *dev, const void *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                              void *cache, const zz_kv_layout *l, int64_t pos);
/* Attention as zz_attn_args says; with a->keep < 1, top-k sparse attention
 * (zz_cpu_attention_ex), which needs supports(ZZ_OP_ATTENTION_SPARSE, a->kv.dt). */
zz_status zz_device_attention(zz_device *dev, const zz_attn_args *a);
size_t zz_device_attention_scratch(const zz_device *dev, int64_t b, int64_t sq, int64_t t, int64_t heads, bool general);
/* Whether attention over a cache stored in dt with fraction keep takes the general
 * path (a Q4 cache or top-k: keep < 1) rather than the dense kernel; it decides the
 * scratch (attention_scratch's `general`) and the CUDA device's kernel. */
bool zz_attention_general(zz_dtype dt, double keep);
/* y[n, dim] = x / sqrt(mean(x²) + eps) * gamma[dim] (RMSNorm); y may be x. */
zz_status zz_device_rmsnorm(zz_device *dev, const void *x, int64_t n, int64_t dim, const zz_tensor *gamma, float eps,
                            void *y);
/* Rotary embedding of x [n, heads * hd] in place, row i at position pos[i] (device
 * int32 [n]); hd even. */
zz_status zz_device_rope(zz_device *dev, void *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos,
                         const zz_rope *rope);
/* y[n] = silu(g[n]) * u[n]; y may alias g or u. */
zz_status zz_device_silu_mul(zz_device *dev, const void *g, const void *u, int64_t n, void *y);


#ifdef __cplusplus
}
#endif
#endif /* ZZ_DEVICE_H */
