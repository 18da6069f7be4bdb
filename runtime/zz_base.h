/*
 * zz_base.h — what every part of zigzag shares: the status of a fallible call and
 * its message (zz_error, ZZ_CHECK, ZZ_CHECK_GOTO), the stop request of a signal,
 * ZZ_ASSERT for broken invariants, byte sizes as text, the byte hash, and the
 * memory tiers (GPU, CPU, disk) with their tensors and arenas.
 *
 * Usage:
 *     zz_status load(const char *path) {
 *       if (!ok) return zz_error(ZZ_ERR_FORMAT, "%s:%d: ...", path, line);
 *       ZZ_CHECK(next_step());
 *       return ZZ_OK;
 *     }
 *     if (load(p) != ZZ_OK) fprintf(stderr, "%s\n", zz_error_message());
 *
 * Output parameters are written only on success.
 */
#ifndef ZZ_BASE_H
#define ZZ_BASE_H

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

#define ZZ_CHECK(call)                                                                                                 \
  do {                                                                                                                 \
    zz_status zz_check_st_ = (call);                                                                                   \
    if (zz_check_st_ != ZZ_OK) return zz_check_st_;                                                                    \
  } while (0)
#define ZZ_CHECK_GOTO(call, st, label)                                                                                 \
  do {                                                                                                                 \
    (st) = (call);                                                                                                     \
    if ((st) != ZZ_OK) goto label;                                                                                     \
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
#define ZZ_ASSERT(cond)                                                                                                \
  do {                                                                                                                 \
    if (!(cond)) zz_fatal(__FILE__, __LINE__, #cond);                                                                  \
  } while (0)

/* Parses "16G", "512M", "1.5GiB", "1000" (bytes) into bytes. */
zz_status zz_parse_bytes(const char *text, size_t *out);
/* Formats bytes as "1.50 GiB" into buf. */
const char *zz_format_bytes(size_t bytes, char *buf, size_t len);
double zz_now(void); /* monotonic seconds */
/* Memory this process may use in bytes: MemTotal, or its cgroup's memory limit
 * when lower (zz_limits.h); 16 GiB when neither can be read. */
size_t zz_host_memory_bytes(void);

/* FNV-1a over n bytes, going on from h (ZZ_FNV_BASIS to start): the tree's one
 * byte hash (tokenizer tables, the job record's prompt and config hashes, the
 * resume id set, dummy weights' per-name streams). */
#define ZZ_FNV_BASIS 0xCBF29CE484222325ull
uint64_t zz_fnv1a(uint64_t h, const void *p, size_t n);

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

/* Alignment (sizes in runtime/sizes.c). */
#define ZZ_ALIGN 256       /* every device and host buffer starts on a multiple of this */
#define ZZ_DISK_ALIGN 4096 /* disk transfers bypass the page cache: offsets, lengths, buffers */

size_t zz_align_up(size_t x, size_t a);
size_t zz_align_down(size_t x, size_t a);

/*
 * An arena: one allocation per tier and purpose, carved by a bump pointer, with
 * exact accounting. The engine sizes every arena from the memory plan before a
 * block starts and allocates nothing else in the hot loop.
 */
typedef struct zz_arena {
  zz_tier tier;
  zz_purpose purpose;
  char *base;  /* NULL for DISK arenas (offsets only) */
  size_t cap;  /* bytes reserved */
  size_t used; /* bytes handed out */
  size_t peak; /* high-water mark of used */
} zz_arena;

/* Hands out `bytes` starting on a multiple of `align` (a power of two); the offset
 * from the arena's start is set too. ZZ_ERR_NO_MEMORY names the arena when full. */
zz_status zz_arena_take(zz_arena *a, size_t bytes, size_t align, void **ptr_out, size_t *offset_out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_BASE_H */
