/*
 * zz_kernels.h — the compute kernels of zigzag, one public header for both backends.
 *
 * kernels/cpu is the reference implementation (OpenBLAS sgemm + a small worker
 * pool) working on float32; kernels/cuda computes the same functions on half
 * precision storage with float32 accumulation (cuBLAS + CUDA kernels). Both take
 * plain pointers and sizes: the kernels know nothing of tensors, tiers or models,
 * so the runtime can call them on whatever buffer the schedule hands it.
 *
 * Layout conventions shared by every kernel:
 *   - matrices are row major; a linear layer's weight is [out, in] as Hugging Face
 *     stores it, so y = x · Wᵀ + b;
 *   - activations of a batch are [b, s, h] (sequence-major inside a batch);
 *   - a KV cache is [b, t_max, h] per layer for K and V; a kernel that reads it gets
 *     the batch stride (elements between two sequences) explicitly;
 *   - sequences are left padded: pad[i] is the number of padding slots at the start
 *     of sequence i, which no query may attend to.
 *
 * Usage (CPU):
 *     zz_pool *pool;
 *     if (zz_pool_create(4, &pool) != 0) ...;
 *     zz_cpu_layernorm(pool, x, n, dim, gamma, beta, 1e-5f, y);
 *     zz_cpu_linear(x, n, in, w, b, out, y, 0);     (GEMMs use OpenBLAS's threads)
 *     zz_pool_destroy(pool);
 */
#ifndef ZZ_KERNELS_H
#define ZZ_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- dtypes */

typedef enum zz_dtype {
  ZZ_DTYPE_F32 = 0,
  ZZ_DTYPE_F16,
  ZZ_DTYPE_BF16,
  ZZ_DTYPE_Q4, /* 4-bit, group-packed; size via zz_dtype_nbytes */
  ZZ_DTYPE_COUNT
} zz_dtype;

/* "f32", "f16", "bf16", "q4". */
const char *zz_dtype_name(zz_dtype dt);
/* Bytes taken by n elements of dt (q4: packed nibbles plus per-group scales). */
size_t zz_dtype_nbytes(zz_dtype dt, int64_t n);

float zz_f16_to_f32(uint16_t h);
uint16_t zz_f32_to_f16(float f); /* round to nearest even, overflow to inf */
float zz_bf16_to_f32(uint16_t h);
uint16_t zz_f32_to_bf16(float f); /* round to nearest even */

/* dst[0..n) = src[0..n) converted; src_dt/dst_dt among f32, f16, bf16. */
void zz_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n);

/* ---------------------------------------------------------------- group-wise quantization */
/*
 * FlexGen's compression (§5): asymmetric min/max quantization in groups of
 * `group` contiguous elements. A tensor is a sequence of rows (a weight's output
 * rows, grouped along its input dimension; a cache row's heads, grouped along the
 * head dimension); each row of len elements is cut into ceil(len / group) groups,
 * the last one possibly shorter. A group of m elements is stored as
 *   bytes 0-1  minimum (IEEE half, little endian), rounded down
 *   bytes 2-3  step    (IEEE half), rounded up: (max - min) / (2^bits - 1)
 *   bytes 4-   m values of `bits` bits, element e of the group in byte e*bits/8
 *              at bit (e*bits) % 8 (low bits first), padded to an even byte count
 * and decodes as min + q * step; rows and groups follow each other with no gap.
 * ZZ_DTYPE_Q4 is this layout; its descriptor (bits, group) travels beside it.
 * docs/compression.md draws it byte by byte.
 */
typedef struct zz_qfmt {
  int bits;  /* 2, 4 or 8 */
  int group; /* elements per group, even, in [ZZ_QGROUP_MIN, ZZ_QGROUP_MAX] */
} zz_qfmt;
#define ZZ_QGROUP_MIN 32
#define ZZ_QGROUP_MAX 256
/* FlexGen's choice: 4 bits, groups of 64. */
#define ZZ_QFMT_DEFAULT ((zz_qfmt){.bits = 4, .group = 64})
/* 1 when f is a format this module stores. */
int zz_qfmt_valid(zz_qfmt f);
/* Bytes of one row of len elements (groups with their headers). */
size_t zz_q_row_bytes(zz_qfmt f, int64_t len);
/* Bytes of a cache row: heads rows of hd elements each in dt (Q4: format f). */
size_t zz_kv_row_bytes(zz_dtype dt, zz_qfmt f, int64_t heads, int64_t hd);
/* dst (rows × zz_q_row_bytes(f, len) bytes) = the rows of x [rows, len]. */
void zz_q_quantize(zz_qfmt f, const float *x, int64_t rows, int64_t len, void *dst);
/* y [rows, len] = the rows stored at src. */
void zz_q_dequantize(zz_qfmt f, const void *src, int64_t rows, int64_t len, float *y);
/* The half-step error bound of element e of a row (what the round trip keeps
 * every element within): step / 2 of e's group. */
float zz_q_half_step(zz_qfmt f, const void *row, int64_t len, int64_t e);
/* ---------------------------------------------------------------- rotary embeddings */

/* Host and device code share the inverse frequencies below (one formula). */
#ifdef __CUDACC__
#define ZZ_HOST_DEVICE __host__ __device__
#else
#define ZZ_HOST_DEVICE
#endif

/* Rotary position embeddings as Hugging Face computes them (modeling_rope_utils):
 * rope_type "default", "linear" (positions interpolated by factor) and "llama3"
 * (low frequencies divided by factor, a smooth ramp between the two wavelengths). */
typedef enum zz_rope_type { ZZ_ROPE_DEFAULT = 0, ZZ_ROPE_LINEAR, ZZ_ROPE_LLAMA3 } zz_rope_type;

typedef struct zz_rope {
  zz_rope_type type;
  float theta;                             /* rope_theta */
  float factor;                            /* linear, llama3 */
  float low_freq_factor, high_freq_factor; /* llama3 */
  float original_max_pos;                  /* llama3: original_max_position_embeddings */
} zz_rope;

/* The inverse frequency of rotary pair i (i < hd / 2) of a head of hd elements, in
 * float32 step by step as transformers 4.46 does: theta^-(2i/hd), then the scaling. */
ZZ_HOST_DEVICE static inline float zz_rope_inv_freq(const zz_rope *r, int64_t i, int64_t hd) {
  float inv = 1.0f / powf(r->theta, (float)(2 * i) / (float)hd);
  if (r->type == ZZ_ROPE_LINEAR) return inv / r->factor;
  if (r->type != ZZ_ROPE_LLAMA3) return inv;
  const float low_wavelen = r->original_max_pos / r->low_freq_factor;
  const float high_wavelen = r->original_max_pos / r->high_freq_factor;
  const float wavelen = 6.283185307179586f / inv;
  float scaled = wavelen > low_wavelen ? inv / r->factor : inv;
  if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) { /* medium: the ramp */
    float smooth = (r->original_max_pos / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    scaled = (1.0f - smooth) * scaled / r->factor + smooth * scaled;
  }
  return scaled;
}

/* ---------------------------------------------------------------- CPU worker pools */

/* Worker threads for the CPU kernels that parallelise (attention, layernorm); GEMMs
 * use OpenBLAS's own threads. A program may hold several pools with different
 * thread counts (the CPU device's compute pool, the CPU-attention pool). */
typedef struct zz_pool zz_pool;

#define ZZ_POOL_MAX_THREADS 1024

/* A pool of n_threads threads, the caller of zz_pool_run being one of them (so
 * n_threads - 1 are started). n_threads <= 0: the online cores (at most
 * ZZ_POOL_MAX_THREADS). Returns 0, EINVAL when n_threads > ZZ_POOL_MAX_THREADS,
 * or the errno of the allocation or pthread_create that failed (then no thread
 * is left running: a pool smaller than asked is never handed out). */
int zz_pool_create(int n_threads, zz_pool **out);
/* Joins every thread. Accepts NULL. No job may be running. */
void zz_pool_destroy(zz_pool *pool);
/* Threads that run a job, the caller included (1 for NULL). */
int zz_pool_threads(const zz_pool *pool);
/* Runs fn(arg, i) for i in [0, n_tasks) on the pool's threads and the caller, and
 * returns when all are done. pool NULL: runs them inline on the caller. Callers
 * of one pool are serialised; fn must not call zz_pool_run on the same pool. */
void zz_pool_run(zz_pool *pool, void (*fn)(void *arg, int64_t i), void *arg, int64_t n_tasks);

/* ---------------------------------------------------------------- CPU kernels (f32) */
/* Kernels that parallelise take the pool to run on first (NULL: the caller only). */

/* out[i, :] = table[ids[i], :] for i < n; table is [rows, dim]. */
void zz_cpu_embed_rows(const float *table, int64_t dim, const int32_t *ids, int64_t n, float *out);
/* x[i, :] += table[ids[i], :] (learned positions). */
void zz_cpu_add_rows(float *x, int64_t dim, const float *table, const int32_t *ids, int64_t n);
/* y[n, dim] = layernorm(x) * gamma + beta, eps inside the sqrt. In place allowed. */
void zz_cpu_layernorm(zz_pool *pool, const float *x, int64_t n, int64_t dim, const float *gamma, const float *beta,
                      float eps, float *y);
/* y[n, out] = x[n, in] · w[out, in]ᵀ (+ b[out] when b) (then ReLU when relu). */
void zz_cpu_linear(const float *x, int64_t n, int64_t in, const float *w, const float *b, int64_t out, float *y,
                   int relu);
/* The CPU device's linear, one driver for every weight dtype (kernels/cpu/linear.c):
 * w [out, in] in f32, bf16 or Q4 in its natural row-major layout, register-blocked
 * dot products along in on the pool's threads, split over output columns in tiles
 * that follow the shape alone (per-dtype micro-kernels for AVX-512, AVX-512 BF16
 * or AVX2 chosen at run time, portable C otherwise). bf16: x is rounded to bf16 once into xb
 * (zz_cpu_gemm_scratch bytes; NULL when that is 0), products accumulate in f32.
 * zz_cpu_linear_w picks: bf16 always here; f32 here for small n
 * (zz_cpu_gemm_small: decode), OpenBLAS sgemm tiles on the pool (zz_cpu_linear_pool) otherwise. */
void zz_cpu_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                 int64_t out, float *y, int relu, void *xb);
void zz_cpu_linear_w(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                     int64_t out, float *y, int relu, void *xb);
size_t zz_cpu_gemm_scratch(int64_t n, int64_t in, zz_dtype w_dt);
bool zz_cpu_gemm_small(int64_t n);
/* out[i, :] = row ids[i] of a bf16 table [rows, dim] widened to f32; add: += instead. */
void zz_cpu_rows_bf16(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, float *out, int add);
/* The CPU runs vdpbf16ps (avx512_bf16 with avx512f/bw/vl): bf16 weights at speed. */
bool zz_cpu_has_bf16(void);
/* zz_cpu_linear cut into tiles over pool's threads, each a single-threaded sgemm
 * (kernels/cpu/linear.c); call zz_cpu_blas_single() first (OpenBLAS then runs
 * every call on its caller's thread, process-wide). */
void zz_cpu_linear_pool(zz_pool *pool, const float *x, int64_t n, int64_t in, const float *w, const float *b,
                        int64_t out, float *y, int relu);
void zz_cpu_blas_single(void);
/* y[i] = a[i] + b[i]; y may alias a or b. */
void zz_cpu_add(const float *a, const float *b, int64_t n, float *y);
/* cache[i, pos + r, :] = x[i, r, :] for i < b, r < sq; the cache has batch stride
 * kv_stride elements and rows of h elements. */
void zz_cpu_kv_append(const float *x, int64_t b, int64_t sq, int64_t h, float *cache, int64_t kv_stride, int64_t pos);

/* y[n, dim] = x / sqrt(mean(x²) + eps) * gamma (RMSNorm, LLaMA). In place allowed. */
void zz_cpu_rmsnorm(zz_pool *pool, const float *x, int64_t n, int64_t dim, const float *gamma, float eps, float *y);
/* Rotary embedding in place: x [n, heads*hd], row i at position pos[i]; pair
 * (d, d + hd/2) of each head turns by pos · zz_rope_inv_freq(d) (HF's rotate_half). */
void zz_cpu_rope(float *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos, const zz_rope *rope);
/* y[i] = silu(g[i]) · u[i] (the SwiGLU MLP's gate); y may alias g or u. */
void zz_cpu_silu_mul(const float *g, const float *u, int64_t n, float *y);

/*
 * Multi-head attention of sq queries per sequence against t keys, with
 * grouped-query attention: kv_heads divides heads, and query head hh reads
 * K/V head hh / (heads / kv_heads) (kv_heads == heads: plain multi-head).
 *   q   [b, sq, heads*hd]           (scaled inside by 1/sqrt(hd))
 *   k,v [b, kv_stride/… ] : element (i, j, :) at k + i*kv_stride + j*kv_heads*hd, j < t
 *   out [b, sq, heads*hd]
 *   pad [b] left padding slots of each sequence (keys j < pad[i] are masked)
 * Query r of sequence i sits at key position q_start + r and sees keys
 * pad[i] <= j <= q_start + r (causal). A query that sees no key gets zeros.
 * scratch: zz_cpu_attention_scratch(b, heads, t) floats.
 */
void zz_cpu_attention(zz_pool *pool, const float *q, const float *k, const float *v, int64_t kv_stride, int64_t b,
                      int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads, int64_t hd,
                      const int32_t *pad, float *out, float *scratch);
size_t zz_cpu_attention_scratch(int64_t b, int64_t heads, int64_t t);
/* The same over a cache stored in kv_dt (f32 or f16): CPU attention beside the
 * f16 cache a GPU run keeps on the host. */
void zz_cpu_attention_kv(zz_pool *pool, const float *q, const void *k, const void *v, zz_dtype kv_dt, int64_t kv_stride,
                         int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads, int64_t hd,
                         const int32_t *pad, float *out, float *scratch);
/* y[n, out] = x[n, in] · w[out, in]ᵀ (+ b) (then ReLU) with w stored in format f
 * (rows grouped along in), the same driver: for few rows (decoding) 4-bit values
 * widened in registers and multiplied there (AVX2/AVX-512; the bits of
 * dequantize-then-multiply), else panels of output rows dequantized and
 * multiplied on the pool's threads; the whole f32 matrix never exists. */
void zz_cpu_linear_q(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_qfmt f, const float *b,
                     int64_t out, float *y, int relu);
/* out[i, :] = row ids[i] of a table [rows, dim] stored in format f; add: += instead. */
void zz_cpu_embed_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, float *out, int add);
/* cache rows pos.. of each sequence = x [b, sq, heads*hd] quantized per head (format f);
 * sequence i starts at byte i * seq_bytes of cache. */
void zz_cpu_kv_append_q(const float *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos);

/* Attention in full generality: a cache in f32, f16 or Q4 (rows dequantized as
 * they are read), addressed in bytes, and top-k sparsity: with keep < 1 each
 * query keeps the ceil(keep * visible) keys of highest score and reads only their
 * V rows, weighted by their probabilities under the softmax over every visible
 * key (FlexGen's sparse attention, no renormalisation). Otherwise zz_cpu_attention's
 * contract; hd <= ZZ_ATTN_MAX_HEAD_DIM. scratch: zz_cpu_attention_scratch(b, heads, t) floats. */
#define ZZ_ATTN_MAX_HEAD_DIM 1024 /* widest head zz_cpu_attention_ex widens on its stack */
typedef struct zz_attn_args {
  const float *q;    /* [b, sq, heads*hd] */
  const void *k, *v; /* row j of sequence i at byte i*seq_bytes + j*zz_kv_row_bytes(..) */
  zz_dtype kv_dt;    /* f32, f16 or Q4 */
  zz_qfmt kv_q;      /* Q4: groups along the head dimension */
  int64_t seq_bytes;
  int64_t b, sq, t, q_start, heads, hd;
  int64_t kv_heads;   /* heads of the cache, dividing heads (grouped-query) */
  const int32_t *pad; /* [b] */
  double keep;        /* fraction of the visible keys kept, (0, 1] */
  float *out;         /* [b, sq, heads*hd] */
  float *scratch;
} zz_attn_args;
void zz_cpu_attention_ex(zz_pool *pool, const zz_attn_args *a);
/* The scalar reference of zz_cpu_attention_ex (one task per query head, rows widened
 * by scalar code): the oracle of the tests, and the top-k path. zz_cpu_attention_ex
 * itself (kernels/cpu/attn.c) reads each KV head's K and V once per query row for
 * all the query heads of its group, vectorised for the ISA zz_cpu_isa_get names. */
void zz_cpu_attention_ref(zz_pool *pool, const zz_attn_args *a);
/* Vector code paths of the CPU kernels (kernels/cpu/isa.c; attention and the
 * linear follow it), chosen at run time: the best the CPU has, or the environment's
 * ZZ_CPU_ISA (auto, portable, avx2, avx512), or zz_cpu_isa_set. */
typedef enum zz_cpu_isa { ZZ_CPU_ISA_PORTABLE, ZZ_CPU_ISA_AVX2, ZZ_CPU_ISA_AVX512 } zz_cpu_isa;
zz_cpu_isa zz_cpu_isa_get(void);
/* 0, or -1 (nothing changed) when this CPU lacks isa. */
int zz_cpu_isa_set(zz_cpu_isa isa);
int zz_cpu_isa_supported(zz_cpu_isa isa);
zz_cpu_isa zz_cpu_isa_best(void);
const char *zz_cpu_isa_name(zz_cpu_isa isa);
/* name (auto, portable, avx2, avx512) → *out; -1 when it is none of those. */
int zz_cpu_isa_parse(const char *name, zz_cpu_isa *out);
/* Top-k sparsity is exact: the fraction of keys kept is a decimal of at most 9
 * places, a whole number of billionths ("units"). Every kept count (the CPU kernels
 * here, the CUDA kernel in kernels/cuda/quant.cu) and the policy line (printed and
 * read in runtime/policy.c) go through these functions, so the line a run prints
 * reproduces the run: no float rounding decides whether ceil(0.1 * 10) is 1 or 2. */
#define ZZ_KEEP_UNITS 1000000000LL /* billionths in a whole: keep = units / 1e9 */
#ifdef __CUDACC__
#define ZZ_KEEP_HD __host__ __device__
#else
#define ZZ_KEEP_HD
#endif
/* keep in (0, 1] as the nearest whole number of billionths: exactly the decimal a
 * double read from at most 9 places stood for (0 for keep <= 0 or NaN). */
static inline int64_t zz_attn_keep_units(double keep) {
  if (!(keep > 0)) return 0;
  if (keep >= 1) return ZZ_KEEP_UNITS;
  return (int64_t)llround(keep * (double)ZZ_KEEP_UNITS);
}
/* Keys a query keeps out of `visible` at `units` billionths: ceil(units * visible /
 * 1e9) in integers (visible split so nothing overflows), at least 1, at most visible. */
static inline ZZ_KEEP_HD int64_t zz_attn_keep_of(int64_t units, int64_t visible) {
  if (units >= ZZ_KEEP_UNITS) return visible;
  int64_t whole = visible / ZZ_KEEP_UNITS, rest = visible % ZZ_KEEP_UNITS;
  int64_t k = units * whole + (units * rest + ZZ_KEEP_UNITS - 1) / ZZ_KEEP_UNITS;
  return k < 1 ? 1 : (k > visible ? visible : k);
}
/* The same for a fraction keep (zz_attn_keep_units(keep) billionths). */
int64_t zz_attn_keep_count(double keep, int64_t visible);
/* The 65536 halves as floats (built on first use). */
const float *zz_f16_table(void);

/* ---------------------------------------------------------------- CUDA kernels (f16) */
/*
 * Same functions on the GPU: f16 storage ("h" = uint16_t bit patterns of IEEE
 * half), f32 accumulation. Every function is asynchronous on `stream`
 * (a cudaStream_t) and returns a cudaError_t as int (0 = success), checked by the
 * caller; the GEMMs take a cublasHandle_t already bound to the stream and return a
 * cublasStatus_t as int. Pointers are device pointers unless said otherwise.
 * Compiled only when the CUDA toolkit is found (ZZ_HAVE_CUDA).
 */
int zz_cuda_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n, void *stream);
int zz_cuda_embed_rows(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out, void *stream);
int zz_cuda_add_rows(uint16_t *x, int64_t dim, const uint16_t *table, const int32_t *ids, int64_t n, void *stream);
int zz_cuda_layernorm(const uint16_t *x, int64_t n, int64_t dim, const uint16_t *gamma, const uint16_t *beta, float eps,
                      uint16_t *y, void *stream);
/* Bias + ReLU are fused after the cuBLAS GEMM. */
int zz_cuda_linear(void *cublas, const uint16_t *x, int64_t n, int64_t in, const uint16_t *w, const uint16_t *b,
                   int64_t out, uint16_t *y, int relu, void *stream);
int zz_cuda_add(const uint16_t *a, const uint16_t *b, int64_t n, uint16_t *y, void *stream);
int zz_cuda_kv_append(const uint16_t *x, int64_t b, int64_t sq, int64_t h, uint16_t *cache, int64_t kv_stride,
                      int64_t pos, void *stream);
/* Same contract as zz_cpu_attention; pad is a device array. scratch: device
 * memory of zz_attention_scores_bytes(b, sq, t, heads) bytes (runtime/sizes.c: f32
 * scores [b, heads, sq, t] when sq > 1, none for a decode step). */
int zz_cuda_attention(void *cublas, const uint16_t *q, const uint16_t *k, const uint16_t *v, int64_t kv_stride,
                      int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads, int64_t hd,
                      const int32_t *pad, uint16_t *out, void *scratch, void *stream);
/* Compression (kernels/cuda/quant.cu): the CPU's Q4 layout byte for byte. y = x · wᵀ
 * (+ b) (ReLU) with w [out, in] Q4 in format f; rows of a Q4 table gathered (add 0)
 * or added (add 1); x [b, sq, heads*hd] quantized into rows pos.. of a Q4 cache
 * (sequence stride seq_bytes); attention over an f16 (q4 = 0) or Q4 cache with top-k
 * sparsity (keep < 1), scratch of zz_gpu_attention_scratch_bytes bytes (runtime/sizes.c:
 * 2 x f32 [b, heads, sq, t]). */
int zz_cuda_linear_q(const uint16_t *x, int64_t n, int64_t in, const void *w, zz_qfmt f, const uint16_t *b, int64_t out,
                     uint16_t *y, int relu, void *stream);
int zz_cuda_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out, int add,
                   void *stream);
int zz_cuda_kv_append_q(const uint16_t *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos, void *stream);
int zz_cuda_attention_ex(const uint16_t *q, const void *k, const void *v, int q4, zz_qfmt f, int64_t seq_bytes,
                         int64_t b, int64_t sq, int64_t t, int64_t q_start, int64_t heads, int64_t kv_heads, int64_t hd,
                         const int32_t *pad, double keep, uint16_t *out, void *scratch, void *stream);
int zz_cuda_rmsnorm(const uint16_t *x, int64_t n, int64_t dim, const uint16_t *gamma, float eps, uint16_t *y,
                    void *stream);
/* pos is a device array [n]. */
int zz_cuda_rope(uint16_t *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos, const zz_rope *rope,
                 void *stream);
int zz_cuda_silu_mul(const uint16_t *g, const uint16_t *u, int64_t n, uint16_t *y, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_KERNELS_H */
