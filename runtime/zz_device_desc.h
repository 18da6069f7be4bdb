/*
 * zz_device_desc.h — what a device is, apart from the live device that runs work
 * (ggml keeps its device description apart from the backend in the same way):
 * its kind, compute dtype, memory, weight dtype, what it runs, alignment and the
 * CPU kernels' vector code. Plain data: the planner and the size functions
 * describe a device from a hardware file or a name without opening one; a live
 * zz_device carries its own (zz_device_describe), and every field of a device
 * outside runtime/device*.c is read through it.
 *
 * Usage:
 *     zz_device_desc d;
 *     zz_device_desc_init(ZZ_DEVICE_CUDA, 16ull << 30, &d);      // a T4 that is not here
 *     size_t s = zz_device_desc_attention_scratch(&d, b, sq, t, heads, false);
 *     const zz_device_desc *live = zz_device_describe(dev);     // an opened device's
 *
 * Included by zz_runtime.h (after zz_op and zz_dtype), which remains the umbrella.
 */
#ifndef ZZ_DEVICE_DESC_H
#define ZZ_DEVICE_DESC_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zz_device_kind { ZZ_DEVICE_CPU = 0, ZZ_DEVICE_CUDA, ZZ_DEVICE_KIND_COUNT } zz_device_kind;

typedef struct zz_device_desc {
  zz_device_kind kind;
  const char *name;               /* "cpu", "cuda" (static storage) */
  zz_dtype compute_dtype;         /* activations and caches: f32 on the CPU, f16 on CUDA */
  bool memory_is_host;            /* its memory is host RAM, shared with the CPU tier (the CPU device) */
  size_t host_memory;             /* RAM of the machine it is in, which such memory shares with the CPU tier
                                     (0: this machine's, MemTotal; a plan for another machine gives its own) */
  size_t capacity;                /* bytes of device memory a run may use (ZZ_TIER_GPU) */
  size_t reserved;                /* of which the device keeps this much for itself (cuBLAS workspace,
                                     conversion staging, exchange buffers); memory plans get the rest */
  bool bf16_weights;              /* CPU device, --cpu-dtype bf16: 2-D weights in bf16 */
  zz_cpu_act cpu_act;             /* CPU device, --cpu-act: x of its 4/8-bit linears in f32 (exact) or int8 */
  uint32_t supports[ZZ_OP_COUNT]; /* bit dt set: the device runs op with a weight (or host side) of dtype dt */
  size_t align;                   /* every buffer's start (ZZ_ALIGN) */
  zz_cpu_isa isa;                 /* vector code of the CPU kernels (CPU attention beside any device) */
} zz_device_desc;

/* The description of a device of `kind` with `capacity` bytes (0: unknown until
 * opened), what its backend's kernels run included; nothing is opened. */
void zz_device_desc_init(zz_device_kind kind, size_t capacity, zz_device_desc *out);
/* "cpu" or "cuda" → the kind; ZZ_ERR_INVALID_ARG naming the text otherwise. */
zz_status zz_device_kind_parse(const char *name, zz_device_kind *out);
/* Whether the device runs op with a weight (for UPLOAD / DOWNLOAD the host side) of dtype dt. */
bool zz_device_desc_supports(const zz_device_desc *d, zz_op op, zz_dtype dt);
/* Drops every 4-bit op (a machine described without 4-bit rates prices none). */
void zz_device_desc_drop_q4(zz_device_desc *d);
/* Scratch bytes attention needs on this device for these sizes (0: none); general:
 * the Q4 / top-k path (zz_attention_general) rather than a dense cache at keep 1. */
size_t zz_device_desc_attention_scratch(const zz_device_desc *d, int64_t b, int64_t sq, int64_t t, int64_t heads,
                                        bool general);
/* Device memory memory plans may use: capacity less what the device keeps. */
size_t zz_device_desc_usable(const zz_device_desc *d);
/* The RAM a device whose memory is host RAM shares with the cpu tier: the
 * machine's (machine_ram), or the cpu tier's cap (--cpu-mem, 0: none) when lower.
 * The one rule both the planner's LP row and the engine's check apply. */
size_t zz_shared_ram_bytes(size_t machine_ram, size_t cpu_cap);

/* An opened device's description (runtime/device.c): read, never written, outside
 * runtime/device*.c. */
const zz_device_desc *zz_device_describe(const zz_device *dev);
/* Counts bytes the caller took with zz_device_alloc for itself (the NCCL exchange
 * buffers) as kept by the device, so memory plans leave room for them; unreserve
 * gives them back (at most what is reserved). */
void zz_device_reserve(zz_device *dev, size_t bytes);
void zz_device_unreserve(zz_device *dev, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_DEVICE_DESC_H */
