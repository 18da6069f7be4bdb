/*
 * quant.cu — the CUDA twins of kernels/cpu/quant.c: group-wise Q4 weights and
 * caches (the layout of zz_kernels.h, byte for byte the same as the CPU's, so the
 * compressed bytes cross PCIe as they are and are dequantized here just before
 * use), and attention over a Q4 or f16 cache with top-k sparsity.
 *
 * These are reference-grade kernels: each dequantizes the elements it reads on
 * the fly (no f16 copy of a whole matrix or cache is made), one block per output
 * row (linear) or per (sequence, head, query) (attention). They are checked
 * against the CPU by tests/test_backend_ops.c on a machine with a GPU; speed is
 * the next step (a tiled dequantize-into-shared-memory GEMM for prefill).
 */
#include "zz_cuda_impl.h"

/* ---------------------------------------------------------------- the format */

__host__ __device__ static inline int64_t zz_cq_row_bytes(zz_qfmt f, int64_t len) {
  int64_t full = len / f.group, rest = len % f.group;
  return full * zz_q_group_nbytes(f.bits, f.group) + (rest ? zz_q_group_nbytes(f.bits, rest) : 0);
}

/* Element e of a quantized row of len elements starting at row. */
__device__ static inline float zz_cq_elem(zz_qfmt f, const unsigned char *row, int64_t e) {
  const unsigned char *g = row + (e / f.group) * zz_q_group_nbytes(f.bits, f.group);
  float lo = __half2float(__ushort_as_half(*(const unsigned short *)g));
  float step = __half2float(__ushort_as_half(*(const unsigned short *)(g + 2)));
  int64_t bit = (e % f.group) * f.bits;
  unsigned q = (g[4 + bit / 8] >> (bit % 8)) & ((1u << f.bits) - 1);
  return lo + (float)q * step;
}

/* The largest half <= x and the smallest half >= x, as zz_f16_down/up on the CPU. */
__device__ static inline unsigned short zz_cq_down(float x) {
  unsigned short h = __half_as_ushort(__float2half_rn(x));
  if (__half2float(__ushort_as_half(h)) <= x) return h;
  if (h == 0) return 0x8001;
  return (h & 0x8000) ? (unsigned short)(h + 1) : (unsigned short)(h - 1);
}

__device__ static inline unsigned short zz_cq_up(float x) {
  unsigned short h = __half_as_ushort(__float2half_rn(x));
  if (__half2float(__ushort_as_half(h)) >= x) return h;
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? (unsigned short)(h - 1) : (unsigned short)(h + 1);
}

/* ---------------------------------------------------------------- linear */

/* y[i, o] = x[i, :] · w[o, :] (+ b[o]) (ReLU): block o, threads over the row. */
__global__ void zz_cq_linear_kernel(const __half *x, int64_t n, int64_t in, const unsigned char *w, zz_qfmt f,
                                    int64_t row_bytes, const __half *b, int64_t out, __half *y, int relu) {
  __shared__ float shm[32];
  int64_t o = blockIdx.x;
  const unsigned char *row = w + o * row_bytes;
  for (int64_t i = 0; i < n; i++) {
    float acc = 0;
    for (int64_t e = threadIdx.x; e < in; e += blockDim.x) acc += __half2float(x[i * in + e]) * zz_cq_elem(f, row, e);
    acc = zz_block_sum(acc, shm);
    if (threadIdx.x == 0) {
      if (b) acc += __half2float(b[o]);
      if (relu && acc < 0) acc = 0;
      y[i * out + o] = __float2half(acc);
    }
    __syncthreads();
  }
}

extern "C" int zz_cuda_linear_q(const uint16_t *x, int64_t n, int64_t in, const void *w, zz_qfmt f, const uint16_t *b,
                                int64_t out, uint16_t *y, int relu, void *stream) {
  if (!zz_cu_fits_int(out)) return (int)cudaErrorInvalidValue;
  zz_cq_linear_kernel<<<(unsigned)out, 256, 0, zz_cu_stream(stream)>>>(
      (const __half *)x, n, in, (const unsigned char *)w, f, zz_cq_row_bytes(f, in), (const __half *)b, out,
      (__half *)y, relu);
  ZZ_CU_LAUNCHED();
  return 0;
}

/* ---------------------------------------------------------------- rows */

__global__ void zz_cq_rows_kernel(const unsigned char *table, zz_qfmt f, int64_t row_bytes, int64_t dim,
                                  const int32_t *ids, int64_t n, __half *out, int add) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * dim; k += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = k / dim, e = k % dim;
    float v = zz_cq_elem(f, table + (int64_t)ids[i] * row_bytes, e);
    out[k] = __float2half(add ? __half2float(out[k]) + v : v);
  }
}

extern "C" int zz_cuda_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, uint16_t *out,
                              int add, void *stream) {
  zz_cq_rows_kernel<<<zz_cu_blocks(n * dim, 256), 256, 0, zz_cu_stream(stream)>>>(
      (const unsigned char *)table, f, zz_cq_row_bytes(f, dim), dim, ids, n, (__half *)out, add);
  ZZ_CU_LAUNCHED();
  return 0;
}

/* ---------------------------------------------------------------- cache append */

/* One thread per group: x [b, sq, heads * hd] → rows pos.. of each sequence. */
__global__ void zz_cq_append_kernel(const __half *x, int64_t b, int64_t sq, int64_t heads, int64_t hd,
                                    unsigned char *cache, zz_qfmt f, int64_t seq_bytes, int64_t pos) {
  int64_t gph = (hd + f.group - 1) / f.group, head_bytes = zz_cq_row_bytes(f, hd), total = b * sq * heads * gph;
  const int levels = (1 << f.bits) - 1;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
    int64_t g = k % gph, hh = (k / gph) % heads, r = (k / gph / heads) % sq, i = k / gph / heads / sq;
    int64_t at = g * f.group, m = hd - at < f.group ? hd - at : f.group;
    const __half *src = x + ((i * sq + r) * heads + hh) * hd + at;
    unsigned char *dst = cache + i * seq_bytes + (pos + r) * heads * head_bytes + hh * head_bytes +
                         g * zz_q_group_nbytes(f.bits, f.group);
    float mn = __half2float(src[0]), mx = mn;
    for (int64_t e = 1; e < m; e++) {
      float v = __half2float(src[e]);
      mn = fminf(mn, v);
      mx = fmaxf(mx, v);
    }
    unsigned short hmin = zz_cq_down(mn);
    float lo = __half2float(__ushort_as_half(hmin));
    unsigned short hstep = mx > lo ? zz_cq_up(__fdiv_rn(__fsub_rn(mx, lo), (float)levels)) : 0;
    float step = __half2float(__ushort_as_half(hstep)), inv = step > 0 ? __fdiv_rn(1.0f, step) : 0;
    *(unsigned short *)dst = hmin;
    *(unsigned short *)(dst + 2) = hstep;
    int64_t nb = zz_q_group_nbytes(f.bits, m) - 4;
    for (int64_t j = 0; j < nb; j++) dst[4 + j] = 0;
    for (int64_t e = 0; e < m; e++) {
      int q = __float2int_rn(__fmul_rn(__fsub_rn(__half2float(src[e]), lo), inv));
      q = q < 0 ? 0 : (q > levels ? levels : q);
      int64_t bit = e * f.bits;
      dst[4 + bit / 8] |= (unsigned char)(q << (bit % 8));
    }
  }
}

extern "C" int zz_cuda_kv_append_q(const uint16_t *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache,
                                   zz_qfmt f, int64_t seq_bytes, int64_t pos, void *stream) {
  int64_t groups = b * sq * heads * ((hd + f.group - 1) / f.group);
  zz_cq_append_kernel<<<zz_cu_blocks(groups, 128), 128, 0, zz_cu_stream(stream)>>>(
      (const __half *)x, b, sq, heads, hd, (unsigned char *)cache, f, seq_bytes, pos);
  ZZ_CU_LAUNCHED();
  return 0;
}

/* ---------------------------------------------------------------- attention */

/* Element d of K/V head hh of cache row kk of sequence i, f16 or Q4. */
__device__ static inline float zz_cq_kv(const unsigned char *base, int q4, zz_qfmt f, int64_t seq_bytes,
                                        int64_t row_bytes, int64_t head_bytes, int64_t i, int64_t kk, int64_t hh,
                                        int64_t hd, int64_t d) {
  const unsigned char *row = base + i * seq_bytes + kk * row_bytes;
  if (q4) return zz_cq_elem(f, row + hh * head_bytes, d);
  return __half2float(((const __half *)row)[hh * hd + d]);
}

/* Block (i, hh, r): query head hh reads K/V head hh / (heads / kv_heads); scores of the visible keys in scratch, softmax, top-k by
 * counting (ties at the threshold taken in key order, as the CPU does), then the
 * output from the kept V rows with their dense probabilities. */
__global__ void zz_cq_attn_kernel(const __half *q, const unsigned char *k, const unsigned char *v, int q4, zz_qfmt f,
                                  int64_t seq_bytes, int64_t sq, int64_t t, int64_t q_start, int64_t window,
                                  int64_t heads, int64_t kv_heads, int64_t hd, const int32_t *pad, int64_t keep_units,
                                  __half *out, float *scratch) {
  __shared__ float shm[32];
  int64_t blk = blockIdx.x, r = blk % sq, hh = (blk / sq) % heads, i = blk / sq / heads;
  int64_t h = heads * hd, kvh = hh / (heads / kv_heads);
  int64_t head_bytes = q4 ? zz_cq_row_bytes(f, hd) : hd * 2, row_bytes = kv_heads * head_bytes;
  float *s = scratch + blk * 2 * t, *kept = s + t;
  const __half *qr = q + (i * sq + r) * h + hh * hd;
  __half *o = out + (i * sq + r) * h + hh * hd;
  int64_t hi = q_start + r, lo = zz_attn_first_key(pad[i], hi, window);
  if (hi >= t) hi = t - 1;
  if (hi < lo) {
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) o[d] = __float2half(0.0f);
    return;
  }
  const float scale = rsqrtf((float)hd);
  float mx = -INFINITY;
  for (int64_t kk = lo + threadIdx.x; kk <= hi; kk += blockDim.x) {
    float acc = 0;
    for (int64_t d = 0; d < hd; d++)
      acc += __half2float(qr[d]) * zz_cq_kv(k, q4, f, seq_bytes, row_bytes, head_bytes, i, kk, kvh, hd, d);
    s[kk] = acc * scale;
    mx = fmaxf(mx, s[kk]);
  }
  mx = zz_block_max(mx, shm);
  __syncthreads();
  float sum = 0;
  for (int64_t kk = lo + threadIdx.x; kk <= hi; kk += blockDim.x) {
    s[kk] = expf(s[kk] - mx);
    sum += s[kk];
  }
  sum = zz_block_sum(sum, shm);
  __syncthreads();
  int64_t nv = hi - lo + 1, m = zz_attn_keep_of(keep_units, nv); /* the CPU's count, in integers */
  for (int64_t kk = lo + threadIdx.x; kk <= hi; kk += blockDim.x) {
    if (m == nv) {
      kept[kk] = 1;
      continue;
    }
    /* kk is kept when fewer than m keys beat it, counting equal keys before it */
    int64_t better = 0;
    for (int64_t j = lo; j <= hi; j++) better += s[j] > s[kk] || (s[j] == s[kk] && j < kk);
    kept[kk] = better < m ? 1.0f : 0.0f;
  }
  __syncthreads();
  float inv = 1.0f / sum;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0;
    for (int64_t kk = lo; kk <= hi; kk++)
      if (kept[kk] != 0) acc += s[kk] * inv * zz_cq_kv(v, q4, f, seq_bytes, row_bytes, head_bytes, i, kk, kvh, hd, d);
    o[d] = __float2half(acc);
  }
}

extern "C" int zz_cuda_attention_ex(const zz_attn_args *a, void *stream) {
  int64_t blocks = a->b * a->heads * a->sq;
  if (!zz_cu_fits_int(blocks)) return (int)cudaErrorInvalidValue;
  zz_cq_attn_kernel<<<(unsigned)blocks, 128, 0, zz_cu_stream(stream)>>>(
      (const __half *)a->q, (const unsigned char *)a->k, (const unsigned char *)a->v, a->kv.dt == ZZ_DTYPE_Q4, a->kv.q,
      a->kv.seq_bytes, a->sq, a->t, a->q_start, a->window, a->heads, a->kv_heads, a->hd, a->pad,
      zz_attn_keep_units(a->keep), (__half *)a->out, (float *)a->scratch);
  ZZ_CU_LAUNCHED();
  return 0;
}
