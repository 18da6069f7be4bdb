/*
 * zz_kernels.h — the compute kernels of zigzag, one public header for both backends.
 *
 * kernels/cpu is the reference implementation: float32 activations, weights in
 * f32, bf16 or 4/8-bit groups, its own GEMM kernels per ISA (OpenBLAS sgemm for
 * some f32 shapes) on a small worker pool (docs/cpu.md); kernels/cuda computes
 * the same functions on half precision storage with float32 accumulation
 * (cuBLAS + CUDA kernels). Both take plain pointers and sizes: the kernels know
 * nothing of tensors, tiers or models, so the runtime can call them on whatever
 * buffer the schedule hands it.
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
 *     zz_cpu_blas_single();     (OpenBLAS on its caller's thread: the pool splits)
 *     zz_cpu_layernorm(pool, x, n, dim, gamma, beta, 1e-5f, y);
 *     zz_cpu_linear_pool(pool, x, n, in, w, b, out, y, 0);   (sgemm tiles on the pool)
 *     zz_pool_destroy(pool);
 *
 * This header only gathers the module's headers, one per concern (listed below);
 * a file that needs one concern includes that header alone.
 */
#ifndef ZZ_KERNELS_H
#define ZZ_KERNELS_H

#include "zz_dtype.h"        /* element types, group-wise quantization */
#include "zz_rope.h"         /* rotary embedding parameters */
#include "zz_pool.h"         /* CPU worker pools */
#include "zz_attn.h"         /* the keys a query sees */
#include "zz_moe_topk.h"     /* the order a router keeps its experts in */
#include "zz_cpu_kernels.h"  /* CPU kernels, ISA choice, top-k counts */
#include "zz_cuda_kernels.h" /* CUDA kernels */

#endif /* ZZ_KERNELS_H */
