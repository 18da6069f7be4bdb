/*
 * zz_cuda_kernels.h — the CUDA kernels (f16 storage, f32 accumulation;
 * kernels/cuda/), declared in plain C so the runtime calls them without CUDA headers.
 */
#ifndef ZZ_CUDA_KERNELS_H
#define ZZ_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zz_attn.h"
#include "zz_dtype.h"
#include "zz_rope.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* Attention as zz_attn_args says (kernels/zz_attn.h) over an f16 cache (kv.dt
 * f16, kv.seq_bytes even), dense: q, out f16, pad a device array; scratch device
 * memory of zz_attention_scores_bytes(b, sq, t, heads) bytes (runtime/sizes.c: f32
 * scores [b, heads, sq, t] when sq > 1, none for a decode step). */
int zz_cuda_attention(void *cublas, const zz_attn_args *a, void *stream);
/* Compression (kernels/cuda/quant.cu): the CPU's Q4 layout byte for byte. y = x · wᵀ
 * (+ b) (ReLU) with w [out, in] Q4 in format f; rows of a Q4 table gathered (add 0)
 * or added (add 1); x [b, sq, heads*hd] quantized into rows pos.. of a Q4 cache
 * (sequence stride seq_bytes); attention (zz_attn_args) over an f16 or Q4 cache with
 * top-k sparsity (keep < 1), scratch of zz_gpu_attention_scratch_bytes bytes
 * (runtime/sizes.c: 2 x f32 [b, heads, sq, t]). */
int zz_cuda_linear_q(const uint16_t *x, int64_t n, int64_t in, const void *w, zz_qfmt f, const uint16_t *b, int64_t out,
                     uint16_t *y, int relu, void *stream);
int zz_cuda_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out, int add,
                   void *stream);
int zz_cuda_kv_append_q(const uint16_t *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos, void *stream);
int zz_cuda_attention_ex(const zz_attn_args *a, void *stream);
int zz_cuda_rmsnorm(const uint16_t *x, int64_t n, int64_t dim, const uint16_t *gamma, float eps, uint16_t *y,
                    void *stream);
/* pos is a device array [n]. */
int zz_cuda_rope(uint16_t *x, int64_t n, int64_t heads, int64_t hd, const int32_t *pos, const zz_rope *rope,
                 void *stream);
int zz_cuda_silu_mul(const uint16_t *g, const uint16_t *u, int64_t n, uint16_t *y, void *stream);
/* Mixture of experts (kernels/cuda/moe.cu), kernels/cpu/moe.c's contracts; idx, w
 * device arrays [n, k] (int32, f32), k at most 32. */
int zz_cuda_moe_route(const uint16_t *logits, int64_t n, int64_t experts, int64_t k, bool renorm, int32_t *idx,
                      float *w, void *stream);
int zz_cuda_moe_scatter(const uint16_t *y, const int32_t *rows, const float *w, int64_t m, int64_t dim, uint16_t *out,
                        void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_CUDA_KERNELS_H */
