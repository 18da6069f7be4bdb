/*
 * zz_cpu_kernels.h — the CPU kernels (f32 activations; weights and caches in
 * any zz_dtype), their ISA choice and the exact top-k counts (kernels/cpu/).
 */
#ifndef ZZ_CPU_KERNELS_H
#define ZZ_CPU_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zz_attn.h"
#include "zz_dtype.h"
#include "zz_pool.h"
#include "zz_rope.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * or AVX2 chosen at run time, portable C otherwise). xb: zz_cpu_gemm_scratch bytes (NULL
 * when that is 0) for x rounded to bf16 once, or packed for linear_pack.c (bf16, and f32
 * from 16 rows); products accumulate in f32. zz_cpu_linear_w picks: bf16 always here; f32
 * here where zz_cpu_gemm_own(n) (decode; on AVX2 also from 16 rows), OpenBLAS sgemm tiles
 * on the pool (zz_cpu_linear_pool) otherwise. */
void zz_cpu_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                 int64_t out, float *y, int relu, void *xb);
void zz_cpu_linear_w(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_dtype w_dt, const float *b,
                     int64_t out, float *y, int relu, void *xb);
size_t zz_cpu_gemm_scratch(int64_t n, int64_t in, zz_dtype w_dt);
bool zz_cpu_gemm_own(int64_t n);
/* Whether zz_cpu_gemm takes AMX tiles for this product (ISA amx, bf16 W, enough
 * rows, `in` a whole number of tile steps; kernels/cpu/linear_amx.c). */
bool zz_cpu_gemm_amx(int64_t n, int64_t in, zz_dtype w_dt);
/* Whether zz_cpu_gemm takes AMX's packed tiles in zmm registers for this
 * product (bf16 W on vdpbf16ps where AMX's tiles do not take it, f32 W on
 * AVX-512 FMA; enough rows, `in` a whole number of tile steps;
 * kernels/cpu/linear_amx.c, zz_dp_task and zz_fp_task). */
bool zz_cpu_gemm_tiles(int64_t n, int64_t in, zz_dtype w_dt);
/* out[i, :] = row ids[i] of a bf16 table [rows, dim] widened to f32; add: += instead. */
void zz_cpu_rows_bf16(const uint16_t *table, int64_t dim, const int32_t *ids, int64_t n, float *out, int add);
/* The CPU runs vdpbf16ps (avx512_bf16 with avx512f/bw/vl): bf16 weights at speed. */
bool zz_cpu_has_bf16(void);
/* The CPU runs vpdpbusd on zmm (avx512_vnni with avx512f/bw/vl): the int8-activation
 * GEMM's VNNI tile (kernels/cpu/linear_int8.c) where the ISA in use is avx512. */
bool zz_cpu_has_vnni(void);
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

/* Mixture of experts (kernels/cpu/moe.c). The router's choice for each of n rows
 * of logits [n, experts]: softmax in f32, the k largest probabilities into w [n, k]
 * and their experts into idx [n, k], largest first (NaN the largest, as torch.topk;
 * of equal probabilities the lower expert first), then w's row divided by its sum
 * when renorm. k <= experts. */
void zz_cpu_moe_route(zz_pool *pool, const float *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                      int32_t *idx, float *w);
/* out[rows[i], :] += w[i] * y[i, :] for i < m: one expert's output rows, weighted,
 * added into the rows that chose it (rows distinct within a call). */
void zz_cpu_moe_scatter(const float *y, const int32_t *rows, const float *w, int64_t m, int64_t dim, float *out);

/* Scratch of CPU attention (zz_attn_args.scratch): floats for b sequences of heads
 * query heads over t keys. */
size_t zz_cpu_attention_scratch(int64_t b, int64_t heads, int64_t t);
/* What the 4/8-bit linear multiplies W's values with: x as it is (f32, exact:
 * the bits of dequantize-then-multiply) or x in int8 per group (--cpu-act). */
typedef enum zz_cpu_act { ZZ_CPU_ACT_F32 = 0, ZZ_CPU_ACT_INT8 } zz_cpu_act;
/* Where ZZ_CPU_ACT_INT8 applies (the exact path elsewhere): 4-bit weights at any
 * number of rows of x; 8-bit ones at any number on a CPU with avx512_vnni (its
 * integer dot: the VNNI and AMX tiles), else up to ZZ_CPU_ACT_INT8_MAX_N8 rows.
 * Its GEMM (kernels/cpu/linear_int8.c) unpacks each W group once for a block
 * of rows of x; on a Zen 3 (AVX2, 2 threads, 4096 x 4096) 4-bit int8 was 2.9x
 * the exact path at 64 rows and 1.1x at 512 (sgemm over widened panels there);
 * 8-bit pays a sign and a widening per W row and x row there: 2.0x at 64, 0.73x
 * at 256, and on a Cascade Lake's AVX2 tile 0.41-0.77x at 256-2048; its VNNI
 * tile ran 2.2-3.2x the exact path at 256-512 rows (docs/cpu.md, "int8
 * activations"). A property of the CPU, not of the process's ISA choice: the
 * same machine takes the same path, hence the same bits, under any ZZ_CPU_ISA.
 * A build may set the limit (-D). */
#ifndef ZZ_CPU_ACT_INT8_MAX_N8
#define ZZ_CPU_ACT_INT8_MAX_N8 128
#endif
static inline int zz_cpu_act_int8_applies(int bits, int64_t n) {
  return bits == 4 || (bits == 8 && (n <= ZZ_CPU_ACT_INT8_MAX_N8 || zz_cpu_has_vnni()));
}
/* y[n, out] = x[n, in] · w[out, in]ᵀ (+ b) (then ReLU) with w stored in format f
 * (rows grouped along in), the same driver: for few rows (decoding) 4-bit values
 * widened in registers and multiplied there (AVX2/AVX-512; the bits of
 * dequantize-then-multiply), else panels of output rows dequantized and
 * multiplied on the pool's threads; the whole f32 matrix never exists.
 * act ZZ_CPU_ACT_INT8 (4 and 8 bits; --cpu-act int8): where
 * zz_cpu_act_int8_applies, x quantized per group to int8 and integer dot
 * products (kernels/cpu/linear_int8.c, docs/cpu.md "int8 activations").
 * ZZ_CPU_ACT_F32 is the exact reference. */
void zz_cpu_linear_q(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_qfmt f, zz_cpu_act act,
                     const float *b, int64_t out, float *y, int relu);
/* out[i, :] = row ids[i] of a table [rows, dim] stored in format f; add: += instead. */
void zz_cpu_embed_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, float *out, int add);
/* cache rows pos.. of each sequence = x [b, sq, heads*hd] quantized per head (format f);
 * sequence i starts at byte i * seq_bytes of cache. */
void zz_cpu_kv_append_q(const float *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos);

/* Attention as zz_attn_args says (kernels/zz_attn.h), q, out and scratch f32: a
 * cache in f32, f16 or Q4 (4-bit rows read from their nibbles in registers, within
 * a tolerance of the reference; other widths dequantized as they are read),
 * top-k by the reference's selection. hd <= ZZ_ATTN_MAX_HEAD_DIM. */
#define ZZ_ATTN_MAX_HEAD_DIM 1024 /* widest head zz_cpu_attention_ex widens on its stack */
void zz_cpu_attention_ex(zz_pool *pool, const zz_attn_args *a);
/* The scalar reference of zz_cpu_attention_ex (one task per query head, rows widened
 * by scalar code): the oracle of the tests, and the top-k path. zz_cpu_attention_ex
 * itself (kernels/cpu/attn.c) reads each KV head's K and V once per query row for
 * all the query heads of its group, vectorised for the ISA zz_cpu_isa_get names. */
void zz_cpu_attention_ref(zz_pool *pool, const zz_attn_args *a);
/* Vector code paths of the CPU kernels (kernels/cpu/isa.c; attention and the
 * linear follow it), chosen at run time: the best the CPU has, or the environment's
 * ZZ_CPU_ISA (auto, portable, avx2, avx512, amx), or zz_cpu_isa_set. Each level
 * includes the one below it: amx is avx512 (with avx512_bf16) plus AMX tiles
 * for the bf16 linear and the int8-activation one, where the kernel grants this
 * process their state. */
typedef enum zz_cpu_isa { ZZ_CPU_ISA_PORTABLE, ZZ_CPU_ISA_AVX2, ZZ_CPU_ISA_AVX512, ZZ_CPU_ISA_AMX } zz_cpu_isa;
#define ZZ_CPU_ISA_NAMES "auto, portable, avx2, avx512 or amx" /* what zz_cpu_isa_parse takes */
zz_cpu_isa zz_cpu_isa_get(void);
/* 0, or -1 (nothing changed) when this CPU lacks isa. */
int zz_cpu_isa_set(zz_cpu_isa isa);
int zz_cpu_isa_supported(zz_cpu_isa isa);
/* NULL where zz_cpu_isa_supported, else why not ("this CPU lacks it", or for
 * amx on a CPU with AMX zz_cpu_amx_refusal's reason). */
const char *zz_cpu_isa_why_not(zz_cpu_isa isa);
zz_cpu_isa zz_cpu_isa_best(void);
const char *zz_cpu_isa_name(zz_cpu_isa isa);
/* name (ZZ_CPU_ISA_NAMES) → *out; -1 when it is none of those. */
int zz_cpu_isa_parse(const char *name, zz_cpu_isa *out);
/* Why this process may not use AMX tiles (no amx-tile, amx-bf16 and amx-int8
 * in CPUID, or the kernel refused their state: the permission,
 * arch_prctl(ARCH_REQ_XCOMP_PERM), is asked once per process, the first time
 * this is called; without it the first tile instruction is SIGILL); NULL when it may. */
const char *zz_cpu_amx_refusal(void);
/* The tile configuration (ldtilecfg's 64 bytes) of the AMX kernels and probes:
 * every tile rows of 64 bytes; tiles 0, 1 (C) and 4 (A) m0 rows, 2, 3 (C) and 5
 * (A) m1 rows (0: not used), 6 and 7 (B) 16. */
typedef struct __attribute__((packed, aligned(64))) zz_amx_cfg {
  uint8_t palette, start_row, pad[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} zz_amx_cfg;
void zz_amx_cfg_fill(zz_amx_cfg *c, int m0, int m1);
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

#ifdef __cplusplus
}
#endif
#endif /* ZZ_CPU_KERNELS_H */
