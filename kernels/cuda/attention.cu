/*
 * attention.cu — masked multi-head attention over a left-padded KV cache, f16 storage,
 * f32 scores and softmax.
 *
 * Contract: zz_attn_args (kernels/zz_attn.h), as the CPU's, over an f16 cache:
 *   q   [b, sq, heads*hd]                 pre-projection queries, scaled here by 1/sqrt(hd)
 *   k,v element (i, j, :) at k + i*kv_stride + j*kv_heads*hd (kv_stride = seq_bytes / 2),
 *       keys j < t; query head h reads K/V head h / (heads / kv_heads) (grouped-query)
 *   pad [b] (device) left padding of each sequence
 *   out [b, sq, heads*hd]
 * Query r of sequence i sits at key position q_start + r and sees keys
 * zz_attn_first_key(pad[i], q_start + r, window) <= j <= min(q_start + r, t - 1); a
 * query that sees no key gets zeros.
 *
 * Two paths:
 *
 * Prefill (sq > 1). Per sequence i and member g of a query-head group (G = heads /
 * kv_heads query heads share a K/V head), two cublasGemmStridedBatchedEx calls
 * batched over the K/V heads: query head kvh*G + g sits at (kvh*G + g)*hd in its row
 * (stride G*hd over kvh), K/V head kvh at kvh*hd in a row of kv_heads*hd (stride hd).
 * The sequences cannot join that batch (their stride is sq*heads*hd for q but
 * kv_stride for k and v), so the host loops over them: 2*b*G GEMM calls plus one
 * softmax launch (2*b without grouping).
 *   1. S[i, h] (f32 [sq, t], row major) = (Q_ih · K_ihᵀ) / sqrt(hd):
 *      column major that is Sᵀ [t, sq] = op_T(K as [hd, t], ld heads*hd) · (Q as
 *      [hd, sq], ld heads*hd), f16 inputs, f32 output and accumulation.
 *   2. one block per score row: masked softmax in f32, probabilities written back as
 *      f16 *into the same row*, over its first half (row R's floats start at byte
 *      4*R*t; its halves at half index 2*R*t, so P has leading dimension 2t). That
 *      keeps scratch at b*heads*sq*t floats; the kernel reads each chunk before any
 *      thread overwrites it (see zz_attn_softmax_kernel).
 *   3. O[i, h] [sq, hd] = P [sq, t] · V_ih [t, hd]: column major Oᵀ [hd, sq] (ld
 *      heads*hd) = (V as [hd, t], ld heads*hd) · (P as [t, sq], ld 2t).
 * Masked probabilities are exact zeros, but the GEMM still multiplies them with every
 * row j < t of V, so those rows must hold finite numbers (0 · NaN = NaN). The engine
 * appends the pad tokens' keys and values like any other, so they do.
 *
 * Decode (sq == 1). One fused kernel, one block per (sequence, head), one pass over
 * the visible keys: each warp walks keys j = lo + warp, lo + warp + W, ... with the
 * head's hd elements spread over its lanes, reduces the dot product with shuffles
 * and keeps an online softmax (running max m, running sum l, running weighted sum
 * of V rows); the W warps' partial states are merged through shared memory at the
 * end. K and V are each read once, and no scratch is needed. hd <= 256.
 */
#include "zz_cuda_impl.h"

namespace {

/* ---------------------------------------------------------------- prefill: softmax */

/* s: scores [b*heads*sq, t] f32 (row R = ((i*heads + h)*sq + r)), rewritten in place
 * as probabilities P: row R's t halves over the first 2t bytes of its own floats.
 * pad [b]. grid = b*heads*sq blocks; blockDim a multiple of 32.
 *
 * In place is safe because of the order of the last pass: chunk c reads floats
 * [2cB, 2cB + 2B) of the row (B = blockDim.x) into registers, the block meets at a
 * barrier, then chunk c writes halves [2cB, 2cB + 2B), which cover floats
 * [cB, cB + B) — all read by chunks <= c already, and never read again. */
__global__ void zz_attn_softmax_kernel(float *s, int64_t heads, int64_t sq, int64_t t, int64_t q_start, int64_t window,
                                       const int32_t *__restrict__ pad) {
  __shared__ float shm[32];
  const int64_t R = blockIdx.x;
  const int64_t i = R / (heads * sq), r = R % sq;
  float *row = s + R * t;
  __half *prow = (__half *)row;
  const int64_t lo = zz_attn_first_key(pad[i], q_start + r, window);
  const int64_t hi = q_start + r < t - 1 ? q_start + r : t - 1;

  float mx = -INFINITY;
  for (int64_t j = lo + threadIdx.x; j <= hi; j += blockDim.x) mx = fmaxf(mx, row[j]);
  mx = zz_block_max(mx, shm);
  float sum = 0.0f;
  for (int64_t j = lo + threadIdx.x; j <= hi; j += blockDim.x) sum += __expf(row[j] - mx);
  sum = zz_block_sum(sum, shm);                     /* ends with a barrier: every read above is done */
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f; /* lo > hi: no key, all zeros */

  for (int64_t base = 0; base < t; base += 2 * (int64_t)blockDim.x) {
    const int64_t j0 = base + 2 * (int64_t)threadIdx.x, j1 = j0 + 1;
    const float p0 = (j0 >= lo && j0 <= hi) ? __expf(row[j0] - mx) * inv : 0.0f;
    const float p1 = (j1 >= lo && j1 <= hi) ? __expf(row[j1] - mx) * inv : 0.0f;
    __syncthreads();
    if (j1 < t) *(__half2 *)(prow + j0) = __floats2half2_rn(p0, p1);
    else if (j0 < t)
      prow[j0] = __float2half_rn(p0);
  }
}

/* a's queries against its f16 cache, scores in a->scratch (checked by the caller). */
int zz_attention_prefill(cublasHandle_t blas, const zz_attn_args *a, cudaStream_t st) {
  const __half *q = (const __half *)a->q, *k = (const __half *)a->k, *v = (const __half *)a->v;
  const int64_t kv_stride = a->kv.seq_bytes / 2; /* in halves */
  const int64_t b = a->b, sq = a->sq, t = a->t, heads = a->heads, kv_heads = a->kv_heads, hd = a->hd;
  __half *out = (__half *)a->out;
  float *scores = (float *)a->scratch;
  const int64_t row = heads * hd;      /* elements between two positions of q, out */
  const int64_t kvrow = kv_heads * hd; /* ... of k, v */
  const int64_t G = heads / kv_heads;  /* query heads per K/V head */
  if (!zz_cu_fits_int(t) || !zz_cu_fits_int(sq) || !zz_cu_fits_int(hd) || !zz_cu_fits_int(row) ||
      !zz_cu_fits_int(2 * t) || !zz_cu_fits_int(heads) || !zz_cu_fits_int(b * heads * sq))
    return -(int)CUBLAS_STATUS_INVALID_VALUE;
  const float scale = 1.0f / sqrtf((float)hd), one = 1.0f, zero = 0.0f;

  for (int64_t i = 0; i < b; i++)
    for (int64_t g = 0; g < G; g++) {
      ZZ_CUBLAS_TRY(cublasGemmStridedBatchedEx(
          blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)t, (int)sq, (int)hd, &scale, k + i * kv_stride, CUDA_R_16F, (int)kvrow,
          (long long)hd,                                                        /* K_i,kvh, per K/V head +hd */
          q + i * sq * row + g * hd, CUDA_R_16F, (int)row, (long long)(G * hd), /* Q_i,kvh*G+g */
          &zero, scores + (i * heads + g) * sq * t, CUDA_R_32F, (int)t, (long long)(G * sq * t), (int)kv_heads,
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }

  int threads = 64;
  while (threads < 512 && (int64_t)threads * 4 < t) threads *= 2;
  zz_attn_softmax_kernel<<<(unsigned)(b * heads * sq), threads, 0, st>>>(scores, heads, sq, t, a->q_start, a->window,
                                                                         a->pad);
  ZZ_CU_LAUNCHED();

  const __half *probs = (const __half *)scores; /* [b*heads*sq, 2t] halves, first t used */
  for (int64_t i = 0; i < b; i++)
    for (int64_t g = 0; g < G; g++) {
      ZZ_CUBLAS_TRY(cublasGemmStridedBatchedEx(
          blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)hd, (int)sq, (int)t, &one, v + i * kv_stride, CUDA_R_16F, (int)kvrow,
          (long long)hd,                                                                               /* V_i,kvh */
          probs + (i * heads + g) * sq * 2 * t, CUDA_R_16F, (int)(2 * t), (long long)(G * sq * 2 * t), /* P */
          &zero, out + i * sq * row + g * hd, CUDA_R_16F, (int)row, (long long)(G * hd),               /* O */
          (int)kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  return 0;
}

/* ---------------------------------------------------------------- decode */

const int kDecodeWarps = 4;
const int kDecodeThreads = 32 * kDecodeWarps;
const int kMaxHd = 256;

/* VEC halves moved per load: 2 (half2) when hd, the strides and the pointers allow. */
template <int VEC>
struct zz_hvec;
template <>
struct zz_hvec<1> {
  static __device__ __forceinline__ void load(const __half *p, float *f) { f[0] = __half2float(*p); }
};
template <>
struct zz_hvec<2> {
  static __device__ __forceinline__ void load(const __half *p, float *f) {
    const float2 x = __half22float2(*(const __half2 *)p);
    f[0] = x.x;
    f[1] = x.y;
  }
};

/* q [b, heads*hd], k/v (i, j, :) at i*kv_stride + j*kv_heads*hd, pad [b], out
 * [b, heads*hd]. grid = b*heads blocks of kDecodeThreads. Lane l of a warp owns the
 * VEC-element groups g = l + 32*n (n < NI) of the head, i.e. elements [g*VEC, g*VEC +
 * VEC) when below hd; NI*VEC*32 >= hd. */
template <int VEC, int NI>
__global__ void __launch_bounds__(kDecodeThreads)
    zz_attn_decode_kernel(const __half *__restrict__ q, const __half *__restrict__ k, const __half *__restrict__ v,
                          int64_t kv_stride, int64_t t, int64_t q_start, int64_t window, int heads, int kv_heads,
                          int hd, const int32_t *__restrict__ pad, float scale, __half *__restrict__ out) {
  __shared__ float sm_m[kDecodeWarps], sm_l[kDecodeWarps];
  __shared__ float sm_acc[kDecodeWarps][kMaxHd];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t i = blockIdx.x / heads, h = blockIdx.x % heads;
  const int64_t row = (int64_t)heads * hd, kvrow = (int64_t)kv_heads * hd;
  const __half *qh = q + i * row + h * hd;
  const __half *kh = k + i * kv_stride + h / (heads / kv_heads) * hd;
  const __half *vh = v + i * kv_stride + h / (heads / kv_heads) * hd;
  const int E = NI * VEC;

  float qf[E], acc[E];
#pragma unroll
  for (int n = 0; n < NI; n++) {
    const int d = (lane + 32 * n) * VEC;
    if (d < hd) {
      zz_hvec<VEC>::load(qh + d, qf + n * VEC);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; e++) qf[n * VEC + e] = 0.0f;
    }
  }
#pragma unroll
  for (int e = 0; e < E; e++) {
    qf[e] *= scale;
    acc[e] = 0.0f;
  }

  const int64_t lo = zz_attn_first_key(pad[i], q_start, window);
  const int64_t hi = q_start < t - 1 ? q_start : t - 1;
  float m = -INFINITY, l = 0.0f;
  /* Two keys per iteration (j and j + W), so that four row loads are in flight
   * before the first shuffle waits on one. */
  for (int64_t j = lo + warp; j <= hi; j += 2 * kDecodeWarps) {
    const int64_t j1 = j + kDecodeWarps;
    const bool has1 = j1 <= hi; /* uniform over the warp */
    float k0[E], v0[E], k1[E], v1[E];
#pragma unroll
    for (int n = 0; n < NI; n++) {
      const int d = (lane + 32 * n) * VEC;
#pragma unroll
      for (int e = 0; e < VEC; e++) k0[n * VEC + e] = v0[n * VEC + e] = k1[n * VEC + e] = v1[n * VEC + e] = 0.0f;
      if (d < hd) {
        zz_hvec<VEC>::load(kh + j * kvrow + d, k0 + n * VEC);
        zz_hvec<VEC>::load(vh + j * kvrow + d, v0 + n * VEC);
        if (has1) {
          zz_hvec<VEC>::load(kh + j1 * kvrow + d, k1 + n * VEC);
          zz_hvec<VEC>::load(vh + j1 * kvrow + d, v1 + n * VEC);
        }
      }
    }
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int e = 0; e < E; e++) {
      s0 += qf[e] * k0[e];
      s1 += qf[e] * k1[e];
    }
    s0 = zz_warp_sum(s0);
    s1 = zz_warp_sum(s1);

    float mn = fmaxf(m, s0);
    float c = __expf(m - mn), p = __expf(s0 - mn); /* m = -inf at first: c = 0 */
    l = l * c + p;
#pragma unroll
    for (int e = 0; e < E; e++) acc[e] = acc[e] * c + p * v0[e];
    m = mn;
    if (has1) {
      mn = fmaxf(m, s1);
      c = __expf(m - mn);
      p = __expf(s1 - mn);
      l = l * c + p;
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = acc[e] * c + p * v1[e];
      m = mn;
    }
  }

  /* Merge the warps: out = Σ_w e^(m_w - M) acc_w / Σ_w e^(m_w - M) l_w. */
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int n = 0; n < NI; n++) {
    const int d = (lane + 32 * n) * VEC;
#pragma unroll
    for (int e = 0; e < VEC; e++)
      if (d + e < hd) sm_acc[warp][d + e] = acc[n * VEC + e];
  }
  __syncthreads();
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kDecodeWarps; w++) M = fmaxf(M, sm_m[w]);
  __half *oh = out + i * row + h * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f, L = 0.0f;
    if (M != -INFINITY) { /* else no key is visible: zeros */
#pragma unroll
      for (int w = 0; w < kDecodeWarps; w++) {
        const float f = __expf(sm_m[w] - M); /* a warp that saw no key: e^-inf = 0 */
        L += f * sm_l[w];
        o += f * sm_acc[w][d];
      }
    }
    oh[d] = __float2half_rn(L > 0.0f ? o / L : 0.0f);
  }
}

/* One decode kernel's launch for a (sq == 1), VEC and NI chosen by zz_attention_decode. */
template <int VEC, int NI>
int zz_attn_decode_launch(const zz_attn_args *a, cudaStream_t st) {
  zz_attn_decode_kernel<VEC, NI><<<(unsigned)(a->b * a->heads), kDecodeThreads, 0, st>>>(
      (const __half *)a->q, (const __half *)a->k, (const __half *)a->v, a->kv.seq_bytes / 2 /* in halves */, a->t,
      a->q_start, a->window, (int)a->heads, (int)a->kv_heads, (int)a->hd, a->pad, 1.0f / sqrtf((float)a->hd),
      (__half *)a->out);
  ZZ_CU_LAUNCHED();
  return 0;
}

int zz_attention_decode(const zz_attn_args *a, cudaStream_t st) {
  const int64_t hd = a->hd;
  if (hd > kMaxHd || !zz_cu_fits_int(a->heads) || !zz_cu_fits_int(a->b * a->heads)) return (int)cudaErrorNotSupported;
  const uintptr_t bits = (uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->out;
  const bool pairs = hd % 2 == 0 && (a->kv.seq_bytes / 2) % 2 == 0 && (bits & 3) == 0;
  if (pairs) {
    switch ((hd + 63) / 64) {
      case 1: return zz_attn_decode_launch<2, 1>(a, st);
      case 2: return zz_attn_decode_launch<2, 2>(a, st);
      case 3: return zz_attn_decode_launch<2, 3>(a, st);
      default: return zz_attn_decode_launch<2, 4>(a, st);
    }
  }
  switch ((hd + 31) / 32) {
    case 1: return zz_attn_decode_launch<1, 1>(a, st);
    case 2: return zz_attn_decode_launch<1, 2>(a, st);
    case 3: return zz_attn_decode_launch<1, 3>(a, st);
    case 4: return zz_attn_decode_launch<1, 4>(a, st);
    case 5: return zz_attn_decode_launch<1, 5>(a, st);
    case 6: return zz_attn_decode_launch<1, 6>(a, st);
    case 7: return zz_attn_decode_launch<1, 7>(a, st);
    default: return zz_attn_decode_launch<1, 8>(a, st);
  }
}

} // namespace

extern "C" int zz_cuda_attention(void *cublas, const zz_attn_args *a, void *stream) {
  const int64_t b = a->b, sq = a->sq, t = a->t, heads = a->heads, kv_heads = a->kv_heads, hd = a->hd;
  if (b < 0 || sq < 0 || t < 0 || a->q_start < 0 || a->window < 0 || heads < 0 || hd < 0 || a->kv.seq_bytes < 0 ||
      a->kv.seq_bytes % 2 != 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return (int)cudaErrorInvalidValue;
  if (b == 0 || sq == 0 || heads == 0 || hd == 0) return 0;
  cudaStream_t st = zz_cu_stream(stream);
  if (t == 0) { /* no key at all: every query sees none */
    ZZ_CU_TRY(cudaMemsetAsync(a->out, 0, (size_t)(b * sq * heads * hd) * 2, st));
    return 0;
  }
  if (sq == 1) return zz_attention_decode(a, st);
  if (!a->scratch) return (int)cudaErrorInvalidValue;
  return zz_attention_prefill((cublasHandle_t)cublas, a, st);
}
