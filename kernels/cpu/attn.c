/*
 * attn.c — attention on the CPU: the scalar reference and the fast decode kernel.
 *
 * Two kernels share one contract (zz_attn_args, kernels/zz_attn.h):
 *
 *  - zz_cpu_attention_ref: one task per (sequence, query head), every K/V row
 *    widened to f32 through scalar code (f16 by a table, Q4 by zz_q_dequantize).
 *    It is the oracle the tests hold the fast kernel to, and it serves top-k
 *    sparsity (keep < 1), which needs a selection over the scores anyway.
 *
 *  - the fast kernel (every dense call): one task per (sequence, KV head). The
 *    task reads its K rows once and its V rows once for all the query heads of
 *    that KV group (grouped-query attention reads the cache once) and every query
 *    row. Rows are read with vector loads chosen at run time (AVX-512, AVX2, or
 *    plain C: zz_cpu_isa_set / ZZ_CPU_ISA); f16 is widened by F16C / AVX-512
 *    conversions in registers. A 4-bit cache takes fused passes (section "Q4
 *    cache, fused"): q · k and p · v straight from the packed nibbles and each
 *    group's lo and step, the nibbles widened in registers (AVX2, also under
 *    AVX-512; a portable C twin), tolerance-checked against the reference; other
 *    widths (2, 8 bits), or zz_attn_args.q4_unfused, dequantize a head row onto
 *    the stack and take the f32 primitives (the reference's bits).
 *
 * Softmax: two passes over the scores, not an online (running max) softmax. The
 * K pass writes every score into the scratch the device already sizes
 * (zz_cpu_attention_scratch), the max/exp/sum runs over that small array in
 * cache, and the V pass reads each V row once with final probabilities. This
 * exponentiates each score once and never rescales the output accumulators
 * (an online softmax would rescale hd floats whenever the max grows); the cache
 * is still read exactly once for K and once for V, which is what bounds decode.
 *
 * Memory order: row kk of sequence i's cache holds every KV head (row_bytes =
 * kv_heads * head_bytes). A task per (sequence, KV head) would read head_bytes
 * out of every row_bytes, each in another page, which the hardware prefetcher
 * does not follow (measured: about half the bandwidth; software prefetching the
 * next rows did not recover it). So a task takes a block of KV heads, the whole
 * row when the batch alone gives each pool thread ZZ_ATTN_TASKS_PER_THREAD tasks
 * (decode at gbs 16 or 64: each task then streams one contiguous region per
 * pass), and fewer heads per task as the batch shrinks, down to one.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* Mul and add stay apart (GCC would fuse the intrinsics into FMAs where the target
 * has them, clang within one expression): every path computes the reference's bits. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZZ_ATTN_X86 1
#else
#define ZZ_ATTN_X86 0
#endif

/* ================================================================ the reference */

typedef struct zz_attn_job {
  zz_attn_args a;
  const float *lut; /* f16 → f32 */
  size_t row_bytes; /* one position's K (or V) row of the cache */
} zz_attn_job;

/* KV head hh's part of cache row kk of sequence i as f32: a pointer into an f32
 * cache, or widened (f16) / dequantized (Q4) into buf. */
static const float *zz_kv_head(const zz_attn_job *j, const void *base, int64_t i, int64_t kk, int64_t hh, float *buf) {
  const zz_attn_args *a = &j->a;
  const char *row = (const char *)base + (size_t)(i * a->kv.seq_bytes) + (size_t)kk * j->row_bytes;
  switch (a->kv.dt) {
    case ZZ_DTYPE_F32: return (const float *)row + hh * a->hd;
    case ZZ_DTYPE_F16: {
      const uint16_t *h = (const uint16_t *)row + hh * a->hd;
      for (int64_t d = 0; d < a->hd; d++) buf[d] = j->lut[h[d]];
      return buf;
    }
    default: zz_q_dequantize(a->kv.q, row + (size_t)hh * zz_q_row_bytes(a->kv.q, a->hd), 1, a->hd, buf); return buf;
  }
}

int64_t zz_attn_keep_count(double keep, int64_t visible) { return zz_attn_keep_of(zz_attn_keep_units(keep), visible); }

/* The m-th largest of x[0..n) (1 <= m <= n); x is reordered. */
static float zz_mth_largest(float *x, int64_t n, int64_t m) {
  int64_t lo = 0, hi = n - 1, want = m - 1;
  while (lo < hi) {
    float pivot = x[lo + (hi - lo) / 2];
    int64_t a = lo, b = hi;
    while (a <= b) {
      while (x[a] > pivot) a++;
      while (x[b] < pivot) b--;
      if (a <= b) {
        float t = x[a];
        x[a++] = x[b];
        x[b--] = t;
      }
    }
    if (want <= b) hi = b;
    else if (want >= a)
      lo = a;
    else
      return x[want];
  }
  return x[want];
}

/* One (sequence, head) pair: every query row of that head, scores in scratch. */
static void zz_attn_task(void *arg, int64_t task) {
  const zz_attn_job *j = arg;
  const zz_attn_args *a = &j->a;
  int64_t i = task / a->heads, hh = task % a->heads;
  int64_t h = a->heads * a->hd;
  int64_t kvh = hh / (a->heads / a->kv_heads); /* the K/V head query head hh reads (grouped-query) */
  float *scores = (float *)a->scratch + 2 * task * a->t, *sel = scores + a->t;
  float buf[ZZ_ATTN_MAX_HEAD_DIM];
  const float scale = 1.0f / sqrtf((float)a->hd);
  for (int64_t r = 0; r < a->sq; r++) {
    const float *q = (const float *)a->q + (i * a->sq + r) * h + hh * a->hd;
    float *o = (float *)a->out + (i * a->sq + r) * h + hh * a->hd;
    int64_t hi = a->q_start + r, lo = zz_attn_first_key(a->pad[i], hi, a->window); /* visible keys */
    if (hi >= a->t) hi = a->t - 1;
    memset(o, 0, (size_t)a->hd * sizeof(float));
    if (hi < lo) continue;
    float mx = -INFINITY;
    for (int64_t kk = lo; kk <= hi; kk++) {
      float s = zz_dot(q, zz_kv_head(j, a->k, i, kk, kvh, buf), a->hd) * scale;
      scores[kk] = s;
      if (s > mx) mx = s;
    }
    double sum = 0;
    for (int64_t kk = lo; kk <= hi; kk++) {
      scores[kk] = expf(scores[kk] - mx);
      sum += scores[kk];
    }
    float inv = (float)(1.0 / sum);
    /* top-k: the kept keys are those whose score reaches the m-th largest; ties
     * at the threshold are taken in key order until m are kept */
    int64_t n_vis = hi - lo + 1, m = zz_attn_keep_count(a->keep, n_vis), ties = 0;
    float thr = 0;
    if (m < n_vis) {
      memcpy(sel, scores + lo, (size_t)n_vis * sizeof(float));
      thr = zz_mth_largest(sel, n_vis, m);
      int64_t above = 0;
      for (int64_t kk = lo; kk <= hi; kk++) above += scores[kk] > thr;
      ties = m - above;
    }
    for (int64_t kk = lo; kk <= hi; kk++) {
      if (m < n_vis) {
        if (scores[kk] < thr) continue;
        if (scores[kk] == thr && ties-- <= 0) continue;
      }
      float p = scores[kk] * inv;
      const float *vr = zz_kv_head(j, a->v, i, kk, kvh, buf);
      for (int64_t d = 0; d < a->hd; d++) o[d] += p * vr[d];
    }
  }
}

void zz_cpu_attention_ref(zz_pool *pool, const zz_attn_args *a) {
  zz_attn_job job = {.a = *a,
                     .lut = a->kv.dt == ZZ_DTYPE_F16 ? zz_f16_table() : NULL,
                     .row_bytes = zz_kv_row_bytes(a->kv.dt, a->kv.q, a->kv_heads, a->hd)};
  zz_pool_run(pool, zz_attn_task, &job, a->b * a->heads);
}

/* ================================================================ the fast kernel */

/* Tasks per pool thread the head blocks aim at (so that uneven tasks even out). */
#define ZZ_ATTN_TASKS_PER_THREAD 4

enum { ZZ_KV_F32, ZZ_KV_F16, ZZ_KV_Q };

typedef struct zz_fattn_job zz_fattn_job;
/* K pass over one task's ng KV heads (query heads nq = ng * group, consecutive):
 * sc[kk*nq + jj] = (q_jj · K_kk,head(jj)) * scale for kk in [lo, hi], jj < nq,
 * head(jj) = jj / group; q [nq, hd]; kb the task's first head inside row 0 (heads
 * head_bytes apart, rows row_bytes apart). */
typedef void zz_kpass_fn(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng, int64_t lo, int64_t hi,
                         float *sc);
/* V pass: o_jj += Σ_kk p[kk*nq + jj] · V_kk,head(jj) for kk in [lo, hi]; o [nq, hd]. */
typedef void zz_vpass_fn(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng, int64_t lo, int64_t hi,
                         float *o);

struct zz_fattn_job {
  zz_attn_args a;
  size_t row_bytes;  /* one position's K (or V) row: every KV head */
  size_t head_bytes; /* one KV head's part of a row */
  int64_t group;     /* query heads per KV head */
  int64_t block;     /* KV heads per task (the last block of a sequence may be smaller) */
  int64_t blocks;    /* tasks per sequence: ceil(kv_heads / block) */
  float scale;       /* 1/sqrt(hd) */
  int mode;          /* ZZ_KV_F32 / F16 / Q */
  size_t q4_gbytes;  /* fused Q4 passes: bytes of one full group (header and nibbles) */
  int64_t q4_ngh;    /* fused Q4 passes: groups per head, ceil(hd / group) */
  zz_kpass_fn *kpass;
  zz_vpass_fn *vpass;
  void (*softmax)(float *s, int64_t nq, int64_t lo, int64_t hi); /* in place over sc[kk*nq + jj] */
};

#define ZZ_INLINE static inline __attribute__((always_inline))

/* Head g of row kk as f32 or f16 data: a Q4 head dequantized into buf; with widen
 * (primitives that take f32 rows only), an f16 head widened into buf by the table. */
ZZ_INLINE const void *zz_attn_row(const zz_fattn_job *jb, const char *base, int64_t kk, int64_t g, float *buf, int mode,
                                  int widen) {
  const char *row = base + (size_t)kk * jb->row_bytes + (size_t)g * jb->head_bytes;
  if (mode == ZZ_KV_Q) {
    zz_q_dequantize(jb->a.kv.q, row, 1, jb->a.hd, buf);
    return buf;
  }
  if (widen && mode == ZZ_KV_F16) {
    const float *lut = zz_f16_table();
    for (int64_t d = 0; d < jb->a.hd; d++) buf[d] = lut[((const uint16_t *)row)[d]];
    return buf;
  }
  return row;
}

/* The loops of both passes, instantiated once per ISA: isa names it, attr is its
 * target attribute, and its row primitives are
 *   DOT(q, row, hd, f16)      q · row over hd elements (row in f16 or f32)
 *   DOT4(q, rows, hd, f16, s) s[u] = DOT(q + u*hd, rows[u]) for u < 4, the four
 *                             dependency chains side by side (one alone waits on
 *                             its adds: hd/8 of them in a row)
 *   AXPY(o, p, row, hd, f16)  o += p · row
 * WIDEN is 1 when they take f32 rows only. Six functions come out, one per pass and
 * cache type (mode a constant in each, so its branches fold). */
#define ZZ_ATTN_PASSES(isa, attr, DOT, DOT4, AXPY, WIDEN)                                                              \
  attr ZZ_INLINE void zz_kpass_##isa(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng, int64_t lo,   \
                                     int64_t hi, float *sc, int mode) {                                                \
    const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G;                                                           \
    const int f16 = mode == ZZ_KV_F16 && !(WIDEN);                                                                     \
    float buf[ZZ_ATTN_MAX_HEAD_DIM], s4[4];                                                                            \
    for (int64_t kk = lo; kk <= hi; kk++) {                                                                            \
      int64_t jj = 0;                                                                                                  \
      if (!(WIDEN) && mode != ZZ_KV_Q) /* rows in place: four queries' dots side by side */                            \
        for (const char *row = kb + (size_t)kk * jb->row_bytes; jj + 4 <= nq; jj += 4) {                               \
          const void *rows[4];                                                                                         \
          for (int u = 0; u < 4; u++) rows[u] = row + (size_t)((jj + u) / G) * jb->head_bytes;                         \
          DOT4(q + jj * hd, rows, hd, f16, s4);                                                                        \
          for (int u = 0; u < 4; u++) sc[kk * nq + jj + u] = s4[u] * jb->scale;                                        \
        }                                                                                                              \
      for (int64_t g = jj / G; g < ng; g++) {                                                                          \
        const void *row = zz_attn_row(jb, kb, kk, g, buf, mode, WIDEN);                                                \
        for (int64_t j = jj > g * G ? jj : g * G; j < (g + 1) * G; j++)                                                \
          sc[kk * nq + j] = DOT(q + j * hd, row, hd, f16) * jb->scale;                                                 \
      }                                                                                                                \
    }                                                                                                                  \
  }                                                                                                                    \
  attr ZZ_INLINE void zz_vpass_##isa(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng, int64_t lo,   \
                                     int64_t hi, float *o, int mode) {                                                 \
    const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G;                                                           \
    const int f16 = mode == ZZ_KV_F16 && !(WIDEN);                                                                     \
    float buf[ZZ_ATTN_MAX_HEAD_DIM];                                                                                   \
    for (int64_t kk = lo; kk <= hi; kk++)                                                                              \
      for (int64_t g = 0; g < ng; g++) {                                                                               \
        const void *row = zz_attn_row(jb, vb, kk, g, buf, mode, WIDEN);                                                \
        for (int64_t jj = g * G; jj < (g + 1) * G; jj++) AXPY(o + jj * hd, p[kk * nq + jj], row, hd, f16);             \
      }                                                                                                                \
  }                                                                                                                    \
  ZZ_ATTN_MODES(isa, attr, zz_kpass_##isa, zz_vpass_##isa)

/* One function per pass and cache type, so that mode is a constant inside each. */
#define ZZ_ATTN_MODE(isa, attr, kbody, vbody, mode, name)                                                              \
  attr static void zz_kpass_##isa##_##name(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng,         \
                                           int64_t lo, int64_t hi, float *sc) {                                        \
    kbody(jb, q, kb, ng, lo, hi, sc, mode);                                                                            \
  }                                                                                                                    \
  attr static void zz_vpass_##isa##_##name(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng,         \
                                           int64_t lo, int64_t hi, float *o) {                                         \
    vbody(jb, p, vb, ng, lo, hi, o, mode);                                                                             \
  }
#define ZZ_ATTN_MODES(isa, attr, kbody, vbody)                                                                         \
  ZZ_ATTN_MODE(isa, attr, kbody, vbody, ZZ_KV_F32, f32)                                                                \
  ZZ_ATTN_MODE(isa, attr, kbody, vbody, ZZ_KV_F16, f16)                                                                \
  ZZ_ATTN_MODE(isa, attr, kbody, vbody, ZZ_KV_Q, q)

/* ---------------------------------------------------------------- portable */

ZZ_INLINE float zz_c_dot(const float *q, const void *row, int64_t hd, int f16) {
  (void)f16; /* rows come widened */
  return zz_dot(q, row, hd);
}

ZZ_INLINE void zz_c_axpy(float *o, float p, const void *row, int64_t hd, int f16) {
  (void)f16;
  const float *r = row;
  for (int64_t d = 0; d < hd; d++) o[d] += p * r[d];
}

ZZ_INLINE void zz_c_dot4(const float *q, const void *const *rows, int64_t hd, int f16, float *out) {
  for (int u = 0; u < 4; u++) out[u] = zz_c_dot(q + u * hd, rows[u], hd, f16);
}

ZZ_ATTN_PASSES(c, , zz_c_dot, zz_c_dot4, zz_c_axpy, 1)

#if ZZ_ATTN_X86
/* ---------------------------------------------------------------- AVX2 + F16C + FMA */

#define ZZ_AVX2 __attribute__((target("avx2,fma,f16c")))

ZZ_AVX2 ZZ_INLINE __m256 zz256_ld(const void *row, int64_t d, int f16) {
  if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d)));
  return _mm256_loadu_ps((const float *)row + d);
}

/* Element d of a row (the tail past the last full vector). */
ZZ_INLINE float zz_row_at(const void *row, int64_t d, int f16) {
  return f16 ? zz_f16_to_f32(((const uint16_t *)row)[d]) : ((const float *)row)[d];
}

/* q · row in zz_dot's order exactly (eight running sums, lane u over d = u mod 8,
 * combined pairwise, then the tail), unfused: the same bits as the reference. */
ZZ_AVX2 ZZ_INLINE float zz256_dot(const float *q, const void *row, int64_t hd, int f16) {
  __m256 acc = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + d), zz256_ld(row, d, f16)));
  /* ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) by two horizontal adds */
  __m256 h = _mm256_hadd_ps(acc, acc);
  h = _mm256_hadd_ps(h, h);
  float sum = _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  for (; d < hd; d++) sum += q[d] * zz_row_at(row, d, f16);
  return sum;
}

/* zz256_dot for q + u*hd against rows[u], u < 4, each in zz_dot's order. */
ZZ_AVX2 ZZ_INLINE void zz256_dot4(const float *q, const void *const *rows, int64_t hd, int f16, float *out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(q + d), zz256_ld(rows[0], d, f16)));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(q + hd + d), zz256_ld(rows[1], d, f16)));
    a2 = _mm256_add_ps(a2, _mm256_mul_ps(_mm256_loadu_ps(q + 2 * hd + d), zz256_ld(rows[2], d, f16)));
    a3 = _mm256_add_ps(a3, _mm256_mul_ps(_mm256_loadu_ps(q + 3 * hd + d), zz256_ld(rows[3], d, f16)));
  }
  const __m256 acc[4] = {a0, a1, a2, a3};
  for (int u = 0; u < 4; u++) {
    __m256 h = _mm256_hadd_ps(acc[u], acc[u]);
    h = _mm256_hadd_ps(h, h);
    float sum = _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int64_t e = d; e < hd; e++) sum += q[u * hd + e] * zz_row_at(rows[u], e, f16);
    out[u] = sum;
  }
}

ZZ_AVX2 ZZ_INLINE void zz256_axpy(float *o, float p, const void *row, int64_t hd, int f16) {
  const int64_t full = hd & ~(int64_t)7;
  const __m256 pv = _mm256_set1_ps(p);
  int64_t d = 0;
  for (; d < full; d += 8)
    _mm256_storeu_ps(o + d, _mm256_add_ps(_mm256_loadu_ps(o + d), _mm256_mul_ps(pv, zz256_ld(row, d, f16))));
  for (; d < hd; d++) o[d] += p * zz_row_at(row, d, f16);
}

ZZ_ATTN_PASSES(avx2, ZZ_AVX2, zz256_dot, zz256_dot4, zz256_axpy, 0)

/* ---------------------------------------------------------------- AVX-512 */

#define ZZ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/* 16 elements of a row from element d; m masks the tail (f16 widened in registers). */
ZZ_AVX512 ZZ_INLINE __m512 zz512_ld(const void *row, int64_t d, __mmask16 m, int f16) {
  if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + d));
  return _mm512_maskz_loadu_ps(m, (const float *)row + d);
}

ZZ_AVX512 ZZ_INLINE void zz512_axpy(float *o, float p, const void *row, int64_t hd, int f16) {
  const int64_t full = hd & ~(int64_t)15;
  const __mmask16 all = 0xFFFF, tail = (__mmask16)((1u << (hd & 15)) - 1);
  const __m512 pv = _mm512_set1_ps(p);
  int64_t d = 0;
  for (; d < full; d += 16)
    _mm512_storeu_ps(o + d, _mm512_add_ps(_mm512_loadu_ps(o + d), _mm512_mul_ps(pv, zz512_ld(row, d, all, f16))));
  if (d < hd)
    _mm512_mask_storeu_ps(
        o + d, tail, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, o + d), _mm512_mul_ps(pv, zz512_ld(row, d, tail, f16))));
}

ZZ_ATTN_PASSES(avx512, ZZ_AVX512, zz256_dot, zz256_dot4, zz512_axpy, 0)

/* ---------------------------------------------------------------- AVX-512, f16 cache, FMA
 *
 * The f16 cache serves only the CUDA device's --cpu-cache-compute (its compute
 * dtype is f16), never the CPU device's golden path, so these passes need not keep
 * the reference's bits: they fuse multiply and add and sum in another order, and
 * tests/test_runtime_attn.c holds them to the reference within a stated tolerance.
 * Widening an f16 row halves the bytes per instruction, which the f32-exact
 * primitives cannot afford (they stay instruction-bound near 16 GB/s):
 *   K pass: 16 keys at a time per query head; each key's dot is a chain of hd/16
 *           FMAs into its own vector, and the 16 vectors are reduced together by a
 *           transpose-add tree (4 levels, 15 adds and 30 shuffles for 16 scores,
 *           instead of 16 separate horizontal sums).
 *   V pass: 16 keys at a time per query head, the head's output row held in
 *           registers (hd <= 128: at most 8 vectors) across those keys, one FMA per
 *           16 elements of a V row widened once.
 * Heads up to ZZ_ATTN_F16_FMA_HD; wider ones take the generic passes. */

#define ZZ_ATTN_F16_FMA_HD 128
#define ZZ_KB 16 /* keys per step */
#ifndef ZZ_KBV
#define ZZ_KBV 8
#endif

/* r[p] = Σ lanes of v[i] with p = 4(i mod 4) + i/4: the tree leaves a 4×4 transpose,
 * so callers put key u's sums in v[zz_kslot(u)] and get r[u]. */
#define zz_kslot(u) (((u)&3) * 4 + ((u) >> 2))
ZZ_AVX512 ZZ_INLINE __m512 zz512_reduce16(const __m512 *v) {
  __m512 c[8], d[4], e[2];
  for (int i = 0; i < 8; i++) /* 128-bit lanes: [v2i, v2i, v2i+1, v2i+1] */
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; i++) /* lane L: v[4i + L] */
    d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; i++) /* lane L, elements 0-1: v[8i + L]; 2-3: v[8i + 4 + L] */
    e[i] = _mm512_add_ps(_mm512_shuffle_ps(d[2 * i], d[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(d[2 * i], d[2 * i + 1], 0xEE));
  /* lane L, element m: v[4m + L] */
  return _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], 0x88), _mm512_shuffle_ps(e[0], e[1], 0xDD));
}

/* The K pass for nc = ceil(hd/16) vectors per head (a constant in each instance):
 * per key, 16 query heads at a time, their dots reduced together into 16 scores that
 * are consecutive in the key-major scores; each row is read front to back. */
ZZ_AVX512 ZZ_INLINE void zz_kpass_f16fma(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng, int64_t lo,
                                         int64_t hi, float *sc, const int nc) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G;
  const __mmask16 all = 0xFFFF, tail = (hd & 15) ? (__mmask16)((1u << (hd & 15)) - 1) : all;
  const __m512 scale = _mm512_set1_ps(jb->scale);
  for (int64_t kk = lo; kk <= hi; kk++) {
    const char *row = kb + (size_t)kk * jb->row_bytes;
    for (int64_t j0 = 0; j0 < nq; j0 += ZZ_KB) {
      const int64_t n = nq - j0 < ZZ_KB ? nq - j0 : ZZ_KB; /* query heads past nq repeat the last one */
      __m512 acc[ZZ_KB];
      for (int u = 0; u < ZZ_KB; u++) {
        const int64_t j = j0 + (u < n ? u : n - 1);
        const uint16_t *r = (const uint16_t *)(row + (size_t)(j / G) * jb->head_bytes);
        const float *qj = q + j * hd;
        __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(nc == 1 ? tail : all, qj),
                                 _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(nc == 1 ? tail : all, r)));
        for (int c = 1; c < nc; c++) {
          const __mmask16 m = c == nc - 1 ? tail : all;
          s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qj + 16 * c),
                              _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r + 16 * c)), s);
        }
        acc[zz_kslot(u)] = s;
      }
      _mm512_mask_storeu_ps(sc + kk * nq + j0, (__mmask16)((1u << n) - 1), _mm512_mul_ps(zz512_reduce16(acc), scale));
    }
  }
}

/* The V pass for nc vectors per head: o_j += Σ_kk p[kk*nq + j] · V_kk, the output
 * row in registers across 16 keys (two accumulators per vector: shorter chains). */
ZZ_AVX512 ZZ_INLINE void zz_vpass_f16fma(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng, int64_t lo,
                                         int64_t hi, float *o, const int nc) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G;
  const __mmask16 all = 0xFFFF, tail = (hd & 15) ? (__mmask16)((1u << (hd & 15)) - 1) : all;
  for (int64_t k0 = lo; k0 <= hi; k0 += ZZ_KBV) {
    const int64_t n = hi - k0 + 1 < ZZ_KBV ? hi - k0 + 1 : ZZ_KBV;
    for (int64_t g = 0; g < ng; g++) {
      const char *v0 = vb + (size_t)k0 * jb->row_bytes + (size_t)g * jb->head_bytes;
      for (int64_t j = g * G; j < (g + 1) * G; j++) {
        __m512 a0[ZZ_ATTN_F16_FMA_HD / 16], a1[ZZ_ATTN_F16_FMA_HD / 16];
        for (int c = 0; c < nc; c++)
          a0[c] = _mm512_maskz_loadu_ps(c == nc - 1 ? tail : all, o + j * hd + 16 * c), a1[c] = _mm512_setzero_ps();
        const float *pj = p + k0 * nq + j;
        int64_t u = 0;
        for (; u + 2 <= n; u += 2) {
          const uint16_t *r0 = (const uint16_t *)(v0 + (size_t)u * jb->row_bytes);
          const uint16_t *r1 = (const uint16_t *)(v0 + (size_t)(u + 1) * jb->row_bytes);
          const __m512 p0 = _mm512_set1_ps(pj[u * nq]), p1 = _mm512_set1_ps(pj[(u + 1) * nq]);
          for (int c = 0; c < nc; c++) {
            const __mmask16 m = c == nc - 1 ? tail : all;
            a0[c] = _mm512_fmadd_ps(p0, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r0 + 16 * c)), a0[c]);
            a1[c] = _mm512_fmadd_ps(p1, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r1 + 16 * c)), a1[c]);
          }
        }
        if (u < n) {
          const uint16_t *r0 = (const uint16_t *)(v0 + (size_t)u * jb->row_bytes);
          const __m512 p0 = _mm512_set1_ps(pj[u * nq]);
          for (int c = 0; c < nc; c++)
            a0[c] = _mm512_fmadd_ps(
                p0, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(c == nc - 1 ? tail : all, r0 + 16 * c)), a0[c]);
        }
        for (int c = 0; c < nc; c++)
          _mm512_mask_storeu_ps(o + j * hd + 16 * c, c == nc - 1 ? tail : all, _mm512_add_ps(a0[c], a1[c]));
      }
    }
  }
}

/* e^x for x <= 0 (scores minus their max), within a few ulps: x = n ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor series to r^7 (error < 1e-8 relative), times 2^n
 * by vscalefps; below -87.3 (e^x under FLT_MIN) it gives e^-87.3 instead of a
 * subnormal or 0, a difference under 1e-37. NaN stays NaN. */
ZZ_AVX512 ZZ_INLINE __m512 zz512_exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x); /* ln2 in two parts */
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 e = _mm512_set1_ps(1.0f / 5040);
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 720));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 120));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 24));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f / 6));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(0.5f));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f));
  e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

/* The softmax of the f16 FMA path: zz_attn_softmax's three sweeps, 16 queries per
 * vector, with zz512_exp and the sum in float (not the reference's bits). */
ZZ_AVX512 static void zz_attn_softmax_f16fma(float *s, int64_t nq, int64_t lo, int64_t hi) {
  for (int64_t j0 = 0; j0 < nq; j0 += 16) {
    const __mmask16 m = nq - j0 < 16 ? (__mmask16)((1u << (nq - j0)) - 1) : (__mmask16)0xFFFF;
    __m512 mx = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    for (int64_t kk = lo; kk <= hi; kk++) mx = _mm512_max_ps(mx, _mm512_maskz_loadu_ps(m, s + kk * nq + j0));
    for (int64_t kk = lo; kk <= hi; kk++) {
      const __m512 e = zz512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + kk * nq + j0), mx));
      _mm512_mask_storeu_ps(s + kk * nq + j0, m, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    for (int64_t kk = lo; kk <= hi; kk++)
      _mm512_mask_storeu_ps(s + kk * nq + j0, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + kk * nq + j0), inv));
  }
}

/* One instance per vector count, so the loops over c unroll and the rows stay in registers. */
#define ZZ_F16FMA(nc)                                                                                                  \
  ZZ_AVX512 static void zz_kpass_f16fma_##nc(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng,       \
                                             int64_t lo, int64_t hi, float *sc) {                                      \
    zz_kpass_f16fma(jb, q, kb, ng, lo, hi, sc, nc);                                                                    \
  }                                                                                                                    \
  ZZ_AVX512 static void zz_vpass_f16fma_##nc(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng,       \
                                             int64_t lo, int64_t hi, float *o) {                                       \
    zz_vpass_f16fma(jb, p, vb, ng, lo, hi, o, nc);                                                                     \
  }
ZZ_F16FMA(1)
ZZ_F16FMA(2)
ZZ_F16FMA(3)
ZZ_F16FMA(4)
ZZ_F16FMA(5)
ZZ_F16FMA(6)
ZZ_F16FMA(7)
ZZ_F16FMA(8)
static zz_kpass_fn *const zz_kpass_f16fma_nc[] = {zz_kpass_f16fma_1, zz_kpass_f16fma_2, zz_kpass_f16fma_3,
                                                  zz_kpass_f16fma_4, zz_kpass_f16fma_5, zz_kpass_f16fma_6,
                                                  zz_kpass_f16fma_7, zz_kpass_f16fma_8};
static zz_vpass_fn *const zz_vpass_f16fma_nc[] = {zz_vpass_f16fma_1, zz_vpass_f16fma_2, zz_vpass_f16fma_3,
                                                  zz_vpass_f16fma_4, zz_vpass_f16fma_5, zz_vpass_f16fma_6,
                                                  zz_vpass_f16fma_7, zz_vpass_f16fma_8};

#endif /* ZZ_ATTN_X86 */

/* ---------------------------------------------------------------- Q4 cache, fused
 *
 * A 4-bit group stores x_e = lo + n_e · step (n_e a nibble; lo, step halves), or
 * x_e = mid + (n_e - 8) · step with mid = lo + 8 · step, so per group a dot with q
 * splits into
 *     q · x = step · Σ_e q_e n_e  +  lo · Σ_e q_e
 * and the V pass's o += p · x into o_e += (p · step) · (n_e - 8) per element plus
 * p · mid per group (summed over the keys apart, added to o once at the end). The
 * V pass centres its nibbles (the portable one per key, the AVX2 one once per
 * block of ZZ_Q4_KBLOCK keys counted from the first visible key): with n_e >= 0
 * its sum over keys of p · step · n_e grows to about the value range and cancels
 * against Σ p · lo, which lost digits on long caches (3.5e-5 of a row's largest
 * output at t 1100; 3.8e-6 centred). The K pass needs no centring (q has both
 * signs). Σ_e q_e per query head and group is computed once per call; the nibbles are widened to
 * floats in registers and multiplied there, so no row is dequantized into memory,
 * and each (key row, KV head) is unpacked once for up to four of its query heads
 * at a time (all of them for G <= 4). Not the reference's bits (the sum is
 * regrouped, the multiply-adds fused): the tests hold these passes to
 * ZZ_ATTN_Q4_TOL of zz_cpu_attention_ref. Every query head's result comes from the
 * same operations in the same order whatever block, sweep or task it falls in, so
 * the tokens of a run do not depend on the batch, the policy or the threads.
 *
 * AVX2 (also under AVX-512): 16 elements (8 bytes) a step: a zero-extending load
 * puts byte b in lane b, whose low nibble is element 2b and high nibble element
 * 2b + 1; q is permuted once per call into that order (per 16 elements of a group
 * the 8 even, then the 8 odd ones) and the V pass accumulates o in it, permuting
 * back at the end. A group's elements past its last multiple of 16 (groups not a
 * multiple of 16, a last partial group) take scalar code. The portable passes
 * widen one group's nibbles (not dequantized: n_e only) into a small array once
 * per (row, KV head) and run the same split over it.
 *
 * Query heads go in sweeps whose per-call constants fit the stack (permuted q,
 * group sums); a sweep re-reads only the KV heads of its own query heads. */

#define ZZ_Q4_QBUF 4096 /* floats of permuted queries per sweep (hd <= 1024: >= 4 heads) */
#define ZZ_Q4_SBUF 512  /* (query head, group) constants per sweep (>= 16 heads; AVX2 K: 8 floats each) */
#define ZZ_Q4_KBLOCK 8  /* keys per block of the AVX2 passes (rows read while in L1) */

/* Query heads per sweep. */
static int64_t zz_q4_sweep(const zz_fattn_job *jb, int64_t nq) {
  int64_t n = ZZ_Q4_QBUF / jb->a.hd, m = ZZ_Q4_SBUF / jb->q4_ngh;
  if (m < n) n = m;
  return n < nq ? n : nq;
}

/* qs[(j - j0) * ngh + gi] = Σ of query head j's elements over group gi, j in [j0, j1). */
static void zz_q4_qsum(const zz_fattn_job *jb, const float *q, int64_t j0, int64_t j1, float *qs) {
  const int64_t hd = jb->a.hd, grp = jb->a.kv.q.group;
  for (int64_t j = j0; j < j1; j++)
    for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
      const int64_t m = hd - e0 < grp ? hd - e0 : grp;
      float s = 0;
      for (int64_t e = 0; e < m; e++) s += q[j * hd + e0 + e];
      qs[(j - j0) * jb->q4_ngh + gi] = s;
    }
}

/* A group's step and its value at nibble c, lo + c · step (c = 8: the middle, for
 * centred nibbles; 0: lo), from the halves in front of its nibbles. */
ZZ_INLINE void zz_q4_hdr(const unsigned char *gp, const float *tab, const int c, float *mid, float *step) {
  uint16_t h[2];
  memcpy(h, gp, 4);
  *step = tab[h[1]], *mid = c ? tab[h[0]] + (float)c * *step : tab[h[0]];
}

/* Nibble e of a group's data d less c (8: centred), as a float. */
ZZ_INLINE float zz_q4_nib(const unsigned char *d, int64_t e, const int c) {
  return (float)((int)((d[e >> 1] >> ((e & 1) * 4)) & 15) - c);
}

/* One head's hd elements between natural and nibble order (inv: back): per group,
 * each full 16 elements as their 8 even then 8 odd ones, the rest in place. */
static void zz_q4_perm(const float *x, float *y, int64_t hd, int64_t grp, int inv) {
  for (int64_t e0 = 0; e0 < hd; e0 += grp) {
    const int64_t m = hd - e0 < grp ? hd - e0 : grp, full = m & ~(int64_t)15;
    for (int64_t u = e0; u < e0 + full; u += 16)
      for (int64_t i = 0; i < 16; i++) {
        const int64_t nat = u + (i < 8 ? 2 * i : 2 * (i - 8) + 1), perm = u + i;
        if (inv) y[nat] = x[perm];
        else
          y[perm] = x[nat];
      }
    for (int64_t e = e0 + full; e < e0 + m; e++) y[e] = x[e];
  }
}

/* Query heads [ja, jb) of a sweep from jA all read KV head g; ja, jb clipped to it. */
#define ZZ_Q4_HEAD_RANGE(G, g, jA, jB, ja, jb)                                                                         \
  const int64_t ja = (g) * (G) > (jA) ? (g) * (G) : (jA), jb = ((g) + 1) * (G) < (jB) ? ((g) + 1) * (G) : (jB)

static void zz_kpass_q4_c(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng, int64_t lo, int64_t hi,
                          float *sc) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G, grp = jb->a.kv.q.group, ngh = jb->q4_ngh;
  const int64_t nsub = zz_q4_sweep(jb, nq);
  const float *tab = zz_f16_table();
  float qs[ZZ_Q4_SBUF], n[ZZ_QGROUP_MAX];
  for (int64_t jA = 0; jA < nq; jA += nsub) {
    const int64_t jB = nq - jA < nsub ? nq : jA + nsub;
    zz_q4_qsum(jb, q, jA, jB, qs);
    for (int64_t kk = lo; kk <= hi; kk++) {
      float *s = sc + kk * nq;
      for (int64_t j = jA; j < jB; j++) s[j] = 0;
      for (int64_t g = jA / G; g <= (jB - 1) / G; g++) {
        const unsigned char *hp = (const unsigned char *)kb + (size_t)kk * jb->row_bytes + (size_t)g * jb->head_bytes;
        ZZ_Q4_HEAD_RANGE(G, g, jA, jB, ja, jz);
        for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
          const int64_t m = hd - e0 < grp ? hd - e0 : grp;
          const unsigned char *gp = hp + (size_t)gi * jb->q4_gbytes;
          float mn, step;
          zz_q4_hdr(gp, tab, 0, &mn, &step);
          for (int64_t e = 0; e < m; e++) n[e] = zz_q4_nib(gp + 4, e, 0);
          for (int64_t j = ja; j < jz; j++) s[j] += step * zz_dot(q + j * hd + e0, n, m) + mn * qs[(j - jA) * ngh + gi];
        }
      }
      for (int64_t j = jA; j < jB; j++) s[j] *= jb->scale;
    }
  }
}

/* lt[(j - jA) * ngh + gi]: Σ_kk p · mid of query head j and group gi, added to o at the end. */
static void zz_q4_add_lo(const zz_fattn_job *jb, const float *lt, int64_t jA, int64_t jB, float *o) {
  const int64_t hd = jb->a.hd, grp = jb->a.kv.q.group;
  for (int64_t j = jA; j < jB; j++)
    for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp)
      for (int64_t e = e0; e < e0 + grp && e < hd; e++) o[j * hd + e] += lt[(j - jA) * jb->q4_ngh + gi];
}

static void zz_vpass_q4_c(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng, int64_t lo, int64_t hi,
                          float *o) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G, grp = jb->a.kv.q.group, ngh = jb->q4_ngh;
  const int64_t nsub = zz_q4_sweep(jb, nq);
  const float *tab = zz_f16_table();
  float lt[ZZ_Q4_SBUF], n[ZZ_QGROUP_MAX];
  for (int64_t jA = 0; jA < nq; jA += nsub) {
    const int64_t jB = nq - jA < nsub ? nq : jA + nsub;
    for (int64_t x = 0; x < (jB - jA) * ngh; x++) lt[x] = 0;
    for (int64_t kk = lo; kk <= hi; kk++)
      for (int64_t g = jA / G; g <= (jB - 1) / G; g++) {
        const unsigned char *hp = (const unsigned char *)vb + (size_t)kk * jb->row_bytes + (size_t)g * jb->head_bytes;
        ZZ_Q4_HEAD_RANGE(G, g, jA, jB, ja, jz);
        for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
          const int64_t m = hd - e0 < grp ? hd - e0 : grp;
          const unsigned char *gp = hp + (size_t)gi * jb->q4_gbytes;
          float mn, step;
          zz_q4_hdr(gp, tab, 8, &mn, &step);
          for (int64_t e = 0; e < m; e++) n[e] = zz_q4_nib(gp + 4, e, 8);
          for (int64_t j = ja; j < jz; j++) {
            const float pj = p[kk * nq + j], ps = pj * step;
            float *oj = o + j * hd + e0;
            for (int64_t e = 0; e < m; e++) oj[e] += ps * n[e];
            lt[(j - jA) * ngh + gi] += pj * mn;
          }
        }
      }
    zz_q4_add_lo(jb, lt, jA, jB, o);
  }
}

#if ZZ_ATTN_X86
/* 16 elements' nibbles (8 bytes at d) as floats: elements 0, 2, .., 14 in *ev, 1,
 * 3, .., 15 in *od (byte b zero-extended into lane b: the low nibble masked, the
 * high one shifted down). */
ZZ_AVX2 ZZ_INLINE void zz256_nib16u(const unsigned char *d, __m256 *ev, __m256 *od) {
  const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)d));
  *ev = _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(15)));
  *od = _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 4));
}

/* The same centred, n - 8 (8 bytes at d) as floats: elements 0, 2, ..,
 * 14 in *ev, 1, 3, .., 15 in *od. n ^ 8 read as a signed 4-bit number is n - 8:
 * the bytes, flipped so, are sign-extended; the high nibble is then an arithmetic
 * shift away, the low one two. */
ZZ_AVX2 ZZ_INLINE void zz256_nib16(const unsigned char *d, __m256 *ev, __m256 *od) {
  const __m128i b = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)d), _mm_set1_epi8((char)0x88));
  const __m256i w = _mm256_cvtepi8_epi32(b);
  *ev = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(w, 28), 28));
  *od = _mm256_cvtepi32_ps(_mm256_srai_epi32(w, 4));
}

/* Query heads per tile of the AVX2 passes: a divisor of G (a tile never spans two
 * KV heads), at most 4; the tile takes 4 / QT keys. */
static int zz_q4_tile_q(int64_t G) { return G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1; }

/* The lo coefficients of the AVX2 K pass: per query head j in [j0, j1) and group
 * gi, 8 lanes (at qv + ((j - j0) * ngh + gi) * 8) whose sum is Σ of the group's
 * elements of q, lane-wise as the group's vectors of permuted q add up (the
 * scalar tail into lane 0), so the lo term joins the score's vector sum. */
static void zz_q4_qsum8(const zz_fattn_job *jb, const float *qp, int64_t j0, int64_t j1, float *qv) {
  const int64_t hd = jb->a.hd, grp = jb->a.kv.q.group;
  for (int64_t j = j0; j < j1; j++)
    for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
      const int64_t m = hd - e0 < grp ? hd - e0 : grp, full = m & ~(int64_t)15;
      const float *x = qp + (j - j0) * hd + e0;
      float *v = qv + ((j - j0) * jb->q4_ngh + gi) * 8;
      for (int l = 0; l < 8; l++) v[l] = 0;
      for (int64_t e = 0; e < full; e += 16)
        for (int l = 0; l < 8; l++) v[l] += x[e + l] + x[e + 8 + l];
      for (int64_t e = full; e < m; e++) v[0] += x[e];
    }
}

/* Scores of a tile: KT keys kk0 .. kk0 + KT - 1 × QT query heads j0 .., all of KV
 * head g (KT · QT <= 4, constants in each instance), into the key-major scores sc.
 * qp, qv: the sweep's permuted queries and lo coefficients (zz_q4_qsum8), from
 * query head jA. Every (key, query head) pair has its own accumulator and total
 * and takes the same operations whatever tile it falls in; the widened nibbles of
 * a key serve the tile's QT query heads. Per group, total += step · acc + lo ·
 * coefficients (two vector multiply-adds: no scalar work but a tail's); the four
 * totals are reduced together (a horizontal-add tree: each pair's lanes in
 * zz_dot's order). */
ZZ_AVX2 ZZ_INLINE void zz_q4_ktile_avx2(const zz_fattn_job *jb, const char *kb, int64_t kk0, int64_t g, const float *qp,
                                        const float *qv, int64_t jA, int64_t j0, float *sc, int64_t nq, const int KT,
                                        const int QT) {
  const int64_t hd = jb->a.hd, grp = jb->a.kv.q.group, ngh = jb->q4_ngh;
  const unsigned char *hp[4];
  const float *qj[4];
  __m256 tot[4];
  float rest[4];
  for (int k = 0; k < KT; k++)
    hp[k] = (const unsigned char *)kb + (size_t)(kk0 + k) * jb->row_bytes + (size_t)g * jb->head_bytes;
  for (int u = 0; u < QT; u++) qj[u] = qp + (j0 + u - jA) * hd;
  for (int x = 0; x < KT * QT; x++) tot[x] = _mm256_setzero_ps(), rest[x] = 0;
  for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
    const int64_t m = hd - e0 < grp ? hd - e0 : grp, full = m & ~(int64_t)15;
    const size_t goff = (size_t)gi * jb->q4_gbytes;
    __m256 acc[4];
    for (int x = 0; x < KT * QT; x++) acc[x] = _mm256_setzero_ps();
    for (int64_t e = 0; e < full; e += 16)
      for (int k = 0; k < KT; k++) {
        __m256 ne, no;
        zz256_nib16u(hp[k] + goff + 4 + e / 2, &ne, &no);
        for (int u = 0; u < QT; u++) {
          acc[k * QT + u] = _mm256_fmadd_ps(_mm256_loadu_ps(qj[u] + e0 + e), ne, acc[k * QT + u]);
          acc[k * QT + u] = _mm256_fmadd_ps(_mm256_loadu_ps(qj[u] + e0 + e + 8), no, acc[k * QT + u]);
        }
      }
    for (int k = 0; k < KT; k++) {
      int32_t h;
      memcpy(&h, hp[k] + goff, 4); /* lo, step as halves: widened by F16C, the table's values */
      const __m128 ls = _mm_cvtph_ps(_mm_cvtsi32_si128(h));
      const __m256 lov = _mm256_broadcastss_ps(ls), sv = _mm256_broadcastss_ps(_mm_movehdup_ps(ls));
      for (int u = 0; u < QT; u++) {
        tot[k * QT + u] = _mm256_fmadd_ps(acc[k * QT + u], sv, tot[k * QT + u]);
        tot[k * QT + u] = _mm256_fmadd_ps(_mm256_loadu_ps(qv + ((j0 + u - jA) * ngh + gi) * 8), lov, tot[k * QT + u]);
      }
      if (full < m) /* a tail past the last 16: scalar */
        for (int u = 0; u < QT; u++) {
          float t = 0;
          for (int64_t e = full; e < m; e++) t += qj[u][e0 + e] * zz_q4_nib(hp[k] + goff + 4, e, 0);
          rest[k * QT + u] += _mm_cvtss_f32(_mm_movehdup_ps(ls)) * t;
        }
    }
  }
  float s[4];
  if (KT * QT == 4) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(tot[0], tot[1]), _mm256_hadd_ps(tot[2], tot[3]));
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  } else
    for (int x = 0; x < KT * QT; x++) {
      __m256 h = _mm256_hadd_ps(tot[x], tot[x]);
      h = _mm256_hadd_ps(h, h);
      s[x] = _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    }
  for (int k = 0; k < KT; k++)
    for (int u = 0; u < QT; u++) sc[(kk0 + k) * nq + j0 + u] = (s[k * QT + u] + rest[k * QT + u]) * jb->scale;
}

/* Keys k0 .. k1 of query heads j0 .. j0 + QT - 1 (KV head g): tiles of 4 / QT
 * keys, then the rest one key at a time. */
ZZ_AVX2 ZZ_INLINE void zz_q4_krange_avx2(const zz_fattn_job *jb, const char *kb, int64_t k0, int64_t k1, int64_t g,
                                         const float *qp, const float *qv, int64_t jA, int64_t j0, float *sc,
                                         int64_t nq, const int QT) {
  int64_t kk = k0;
  for (; kk + 4 / QT <= k1 + 1; kk += 4 / QT) zz_q4_ktile_avx2(jb, kb, kk, g, qp, qv, jA, j0, sc, nq, 4 / QT, QT);
  for (; kk <= k1; kk++) zz_q4_ktile_avx2(jb, kb, kk, g, qp, qv, jA, j0, sc, nq, 1, QT);
}

ZZ_AVX2 static void zz_kpass_q4_avx2(const zz_fattn_job *jb, const float *q, const char *kb, int64_t ng, int64_t lo,
                                     int64_t hi, float *sc) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G, grp = jb->a.kv.q.group;
  const int64_t QT = zz_q4_tile_q(G), nsub = zz_q4_sweep(jb, nq) / QT * QT; /* >= 4 >= QT */
  float qp[ZZ_Q4_QBUF], qv[8 * ZZ_Q4_SBUF];
  for (int64_t jA = 0; jA < nq; jA += nsub) {
    const int64_t jB = nq - jA < nsub ? nq : jA + nsub;
    for (int64_t j = jA; j < jB; j++) zz_q4_perm(q + j * hd, qp + (j - jA) * hd, hd, grp, 0);
    zz_q4_qsum8(jb, qp, jA, jB, qv);
    /* key blocks outermost: the tiles of one block read its rows front to back */
    for (int64_t k0 = lo; k0 <= hi; k0 += ZZ_Q4_KBLOCK) {
      const int64_t k1 = hi - k0 < ZZ_Q4_KBLOCK ? hi : k0 + ZZ_Q4_KBLOCK - 1;
      for (int64_t j0 = jA; j0 < jB; j0 += QT) switch (QT) {
          case 4: zz_q4_krange_avx2(jb, kb, k0, k1, j0 / G, qp, qv, jA, j0, sc, nq, 4); break;
          case 2: zz_q4_krange_avx2(jb, kb, k0, k1, j0 / G, qp, qv, jA, j0, sc, nq, 2); break;
          default: zz_q4_krange_avx2(jb, kb, k0, k1, j0 / G, qp, qv, jA, j0, sc, nq, 1); break;
        }
    }
  }
}

/* NU units of 16 elements from e (of a group whose nibbles start doff bytes into
 * each key's head hp[k]) for QT query heads (outputs at o + u * hd, in nibble
 * order), over the nk keys of a block: Σ_k ps_k,u · n_k in registers (2 · NU · QT
 * <= 8 vectors: enough independent multiply-add chains to hide their latency),
 * from uncentred nibbles (three operations fewer than centred ones), centred once
 * per block by c8[u] = -8 · Σ_k ps_k,u and added to o. Over a block of at most
 * ZZ_Q4_KBLOCK keys the uncentred sum stays small; the blocks start at the first
 * visible key, so a query's result does not depend on the batch or its padding. */
ZZ_AVX2 ZZ_INLINE void zz_q4_vunits_avx2(const unsigned char *const *hp, int64_t nk, size_t doff, int64_t e,
                                         const float *ps, const float *c8, float *o, int64_t hd, const int QT,
                                         const int NU) {
  __m256 acc[8];
  for (int x = 0; x < 2 * NU * QT; x++) acc[x] = _mm256_setzero_ps();
  for (int64_t k = 0; k < nk; k++)
    for (int c = 0; c < NU; c++) {
      __m256 nv[2];
      zz256_nib16u(hp[k] + doff + (e + 16 * c) / 2, &nv[0], &nv[1]);
      for (int u = 0; u < QT; u++) {
        const __m256 pv = _mm256_broadcast_ss(ps + k * QT + u);
        for (int h = 0; h < 2; h++) acc[(c * QT + u) * 2 + h] = _mm256_fmadd_ps(nv[h], pv, acc[(c * QT + u) * 2 + h]);
      }
    }
  for (int c = 0; c < NU; c++)
    for (int u = 0; u < QT; u++)
      for (int h = 0; h < 2; h++) {
        float *oe = o + u * hd + e + 16 * c + 8 * h;
        const __m256 blk = _mm256_add_ps(acc[(c * QT + u) * 2 + h], _mm256_set1_ps(c8[u]));
        _mm256_storeu_ps(oe, _mm256_add_ps(_mm256_loadu_ps(oe), blk));
      }
}

/* A tile of the V pass: o_u += Σ_k p_k,u · V_k for the nk <= ZZ_Q4_KBLOCK keys kk0 ..
 * and QT query heads j0 .., all of KV head g (o in nibble order, query head j at
 * o + j * hd). Per 16 elements the tile's outputs stay in registers across its keys;
 * per element the sum over keys runs in key order whatever the tiles, so the result
 * does not depend on them. Σ_k p · mid per group goes into lt (the sweep's, from
 * query head jA); p: the key-major probabilities. */
ZZ_AVX2 ZZ_INLINE void zz_q4_vtile_avx2(const zz_fattn_job *jb, const char *vb, int64_t kk0, int64_t nk, int64_t g,
                                        const float *p, int64_t nq, int64_t jA, int64_t j0, float *o, float *lt,
                                        const int QT) {
  const int64_t hd = jb->a.hd, grp = jb->a.kv.q.group, ngh = jb->q4_ngh;
  const float *tab = zz_f16_table();
  const unsigned char *hp[ZZ_Q4_KBLOCK];
  float ps[ZZ_Q4_KBLOCK * 4];
  for (int64_t k = 0; k < nk; k++)
    hp[k] = (const unsigned char *)vb + (size_t)(kk0 + k) * jb->row_bytes + (size_t)g * jb->head_bytes;
  for (int64_t gi = 0, e0 = 0; e0 < hd; gi++, e0 += grp) {
    const int64_t m = hd - e0 < grp ? hd - e0 : grp, full = m & ~(int64_t)15;
    const size_t goff = (size_t)gi * jb->q4_gbytes;
    float c8[4] = {0, 0, 0, 0};
    for (int64_t k = 0; k < nk; k++) {
      float mid, step;
      zz_q4_hdr(hp[k] + goff, tab, 8, &mid, &step);
      for (int u = 0; u < QT; u++) {
        const float pk = p[(kk0 + k) * nq + j0 + u];
        ps[k * QT + u] = pk * step;
        c8[u] += ps[k * QT + u];
        lt[(j0 + u - jA) * ngh + gi] += pk * mid;
      }
    }
    for (int u = 0; u < QT; u++) c8[u] *= -8;
    int64_t e = 0;
    for (; e + 64 / QT <= full; e += 64 / QT)
      zz_q4_vunits_avx2(hp, nk, goff + 4, e, ps, c8, o + j0 * hd + e0, hd, QT, 4 / QT);
    for (; e < full; e += 16) zz_q4_vunits_avx2(hp, nk, goff + 4, e, ps, c8, o + j0 * hd + e0, hd, QT, 1);
    for (int64_t k = 0; k < nk; k++)
      for (int u = 0; u < QT; u++)
        for (int64_t e = full; e < m; e++)
          o[(j0 + u) * hd + e0 + e] += ps[k * QT + u] * zz_q4_nib(hp[k] + goff + 4, e, 8);
  }
}

ZZ_AVX2 static void zz_vpass_q4_avx2(const zz_fattn_job *jb, const float *p, const char *vb, int64_t ng, int64_t lo,
                                     int64_t hi, float *o) {
  const int64_t hd = jb->a.hd, G = jb->group, nq = ng * G, grp = jb->a.kv.q.group;
  const int QT = zz_q4_tile_q(G);
  const int64_t nsub = zz_q4_sweep(jb, nq) / QT * QT;
  float lt[ZZ_Q4_SBUF], tmp[ZZ_ATTN_MAX_HEAD_DIM];
  for (int64_t jA = 0; jA < nq; jA += nsub) {
    const int64_t jB = nq - jA < nsub ? nq : jA + nsub;
    for (int64_t x = 0; x < (jB - jA) * jb->q4_ngh; x++) lt[x] = 0;
    for (int64_t j = jA; j < jB; j++) { /* o into nibble order */
      memcpy(tmp, o + j * hd, (size_t)hd * sizeof(float));
      zz_q4_perm(tmp, o + j * hd, hd, grp, 0);
    }
    for (int64_t k0 = lo; k0 <= hi; k0 += ZZ_Q4_KBLOCK) {
      const int64_t nk = hi - k0 + 1 < ZZ_Q4_KBLOCK ? hi - k0 + 1 : ZZ_Q4_KBLOCK;
      for (int64_t j0 = jA; j0 < jB; j0 += QT) switch (QT) {
          case 4: zz_q4_vtile_avx2(jb, vb, k0, nk, j0 / G, p, nq, jA, j0, o, lt, 4); break;
          case 2: zz_q4_vtile_avx2(jb, vb, k0, nk, j0 / G, p, nq, jA, j0, o, lt, 2); break;
          default: zz_q4_vtile_avx2(jb, vb, k0, nk, j0 / G, p, nq, jA, j0, o, lt, 1); break;
        }
    }
    for (int64_t j = jA; j < jB; j++) { /* and back */
      memcpy(tmp, o + j * hd, (size_t)hd * sizeof(float));
      zz_q4_perm(tmp, o + j * hd, hd, grp, 1);
    }
    zz_q4_add_lo(jb, lt, jA, jB, o);
  }
}
#endif /* ZZ_ATTN_X86 */

/* ---------------------------------------------------------------- the task */

/* Softmax of each of nq queries over its scores s[kk*nq + jj], kk in [lo, hi], in
 * place: exp(s - max) / Σ exp(s - max). The queries go side by side, ZZ_ATTN_COLS
 * at a time, so every loop walks the key-major scores contiguously; per element the
 * arithmetic is the reference's (expf, the sum in double in key order, one 1/sum). */
#define ZZ_ATTN_COLS 64
static void zz_attn_softmax(float *s, int64_t nq, int64_t lo, int64_t hi) {
  for (int64_t j0 = 0; j0 < nq; j0 += ZZ_ATTN_COLS) {
    const int64_t m = nq - j0 < ZZ_ATTN_COLS ? nq - j0 : ZZ_ATTN_COLS;
    float mx[ZZ_ATTN_COLS], inv[ZZ_ATTN_COLS];
    double sum[ZZ_ATTN_COLS];
    for (int64_t j = 0; j < m; j++) mx[j] = -INFINITY, sum[j] = 0;
    for (int64_t kk = lo; kk <= hi; kk++) {
      const float *r = s + kk * nq + j0;
      for (int64_t j = 0; j < m; j++) mx[j] = r[j] > mx[j] ? r[j] : mx[j];
    }
    for (int64_t kk = lo; kk <= hi; kk++) {
      float *r = s + kk * nq + j0;
      for (int64_t j = 0; j < m; j++) {
        r[j] = expf(r[j] - mx[j]);
        sum[j] += r[j];
      }
    }
    for (int64_t j = 0; j < m; j++) inv[j] = (float)(1.0 / sum[j]);
    for (int64_t kk = lo; kk <= hi; kk++) {
      float *r = s + kk * nq + j0;
      for (int64_t j = 0; j < m; j++) r[j] *= inv[j];
    }
  }
}

/* One (sequence i, block of KV heads) task: KV heads g0 .. g0 + ng - 1 and their
 * query heads g0*group .. (g0 + ng)*group - 1 (consecutive), every query row.
 * Scores key-major, sc[kk*nq + jj] for the block's query head jj: the K pass writes
 * and the V pass reads nq consecutive floats per key (query-major rows t floats
 * apart would alias in L1 sets for t a multiple of 1024); nq*t floats, inside the
 * 2t per query head that zz_cpu_attention_scratch gives. */
static void zz_fattn_task(void *arg, int64_t task) {
  const zz_fattn_job *jb = arg;
  const zz_attn_args *a = &jb->a;
  const int64_t i = task / jb->blocks, g0 = task % jb->blocks * jb->block, t = a->t;
  const int64_t ng = a->kv_heads - g0 < jb->block ? a->kv_heads - g0 : jb->block, nq = ng * jb->group;
  const int64_t h = a->heads * a->hd, qh0 = g0 * jb->group; /* first query head */
  float *sc = (float *)a->scratch + 2 * (i * a->heads + qh0) * t;
  const char *kb = (const char *)a->k + (size_t)(i * a->kv.seq_bytes) + (size_t)g0 * jb->head_bytes;
  const char *vb = (const char *)a->v + (size_t)(i * a->kv.seq_bytes) + (size_t)g0 * jb->head_bytes;
  for (int64_t r = 0; r < a->sq; r++) {
    const float *q = (const float *)a->q + (i * a->sq + r) * h + qh0 * a->hd; /* [nq, hd] */
    float *o = (float *)a->out + (i * a->sq + r) * h + qh0 * a->hd;           /* [nq, hd] */
    int64_t hi = a->q_start + r;                                              /* last visible key (causal) */
    const int64_t lo = zz_attn_first_key(a->pad[i], hi, a->window);
    if (hi >= t) hi = t - 1;
    memset(o, 0, (size_t)(nq * a->hd) * sizeof(float));
    if (hi < lo) continue; /* sees no key: zeros */
    jb->kpass(jb, q, kb, ng, lo, hi, sc);
    jb->softmax(sc, nq, lo, hi);
    jb->vpass(jb, sc, vb, ng, lo, hi, o);
  }
}

/* KV heads per task: whole rows (every head: each row read front to back, the
 * friendliest order for memory) when the batch alone gives every pool thread
 * ZZ_ATTN_TASKS_PER_THREAD tasks; otherwise rows split into that many blocks
 * per sequence (down to one KV head per task). */
static int64_t zz_attn_block(const zz_attn_args *a, int threads) {
  int64_t want = (int64_t)threads * ZZ_ATTN_TASKS_PER_THREAD;
  int64_t blocks = (want + a->b - 1) / a->b;
  if (blocks > a->kv_heads) blocks = a->kv_heads;
  return (a->kv_heads + blocks - 1) / blocks;
}

void zz_cpu_attention_ex(zz_pool *pool, const zz_attn_args *a) {
  if (a->keep < 1) { /* top-k: the reference's selection */
    zz_cpu_attention_ref(pool, a);
    return;
  }
  zz_fattn_job jb = {
      .a = *a,
      .row_bytes = zz_kv_row_bytes(a->kv.dt, a->kv.q, a->kv_heads, a->hd),
      .head_bytes = zz_kv_row_bytes(a->kv.dt, a->kv.q, 1, a->hd),
      .group = a->heads / a->kv_heads,
      .block = zz_attn_block(a, pool ? zz_pool_threads(pool) : 1),
      .scale = 1.0f / sqrtf((float)a->hd),
      .mode = a->kv.dt == ZZ_DTYPE_F32   ? ZZ_KV_F32
              : a->kv.dt == ZZ_DTYPE_F16 ? ZZ_KV_F16
                                         : ZZ_KV_Q,
  };
  jb.blocks = (a->kv_heads + jb.block - 1) / jb.block;
  static zz_kpass_fn *const kc[] = {zz_kpass_c_f32, zz_kpass_c_f16, zz_kpass_c_q};
  static zz_vpass_fn *const vc[] = {zz_vpass_c_f32, zz_vpass_c_f16, zz_vpass_c_q};
  jb.kpass = kc[jb.mode], jb.vpass = vc[jb.mode], jb.softmax = zz_attn_softmax;
#if ZZ_ATTN_X86
  static zz_kpass_fn *const k2[] = {zz_kpass_avx2_f32, zz_kpass_avx2_f16, zz_kpass_avx2_q};
  static zz_vpass_fn *const v2[] = {zz_vpass_avx2_f32, zz_vpass_avx2_f16, zz_vpass_avx2_q};
  static zz_kpass_fn *const k5[] = {zz_kpass_avx512_f32, zz_kpass_avx512_f16, zz_kpass_avx512_q};
  static zz_vpass_fn *const v5[] = {zz_vpass_avx512_f32, zz_vpass_avx512_f16, zz_vpass_avx512_q};
  switch (zz_cpu_isa_get()) {
    case ZZ_CPU_ISA_AMX:
    case ZZ_CPU_ISA_AVX512:
      jb.kpass = k5[jb.mode], jb.vpass = v5[jb.mode];
      if (jb.mode == ZZ_KV_F16 && a->hd <= ZZ_ATTN_F16_FMA_HD) /* tolerance-checked, not the reference's bits */
        jb.kpass = zz_kpass_f16fma_nc[(a->hd + 15) / 16 - 1], jb.vpass = zz_vpass_f16fma_nc[(a->hd + 15) / 16 - 1],
        jb.softmax = zz_attn_softmax_f16fma;
      break;
    case ZZ_CPU_ISA_AVX2: jb.kpass = k2[jb.mode], jb.vpass = v2[jb.mode]; break;
    default: break;
  }
#endif
  if (jb.mode == ZZ_KV_Q && a->kv.q.bits == 4 && !a->q4_unfused) { /* tolerance-checked, not the reference's bits */
    jb.q4_gbytes = zz_q_row_bytes(a->kv.q, a->kv.q.group);
    jb.q4_ngh = (a->hd + a->kv.q.group - 1) / a->kv.q.group;
    jb.kpass = zz_kpass_q4_c, jb.vpass = zz_vpass_q4_c;
#if ZZ_ATTN_X86
    if (zz_cpu_isa_get() >= ZZ_CPU_ISA_AVX2) jb.kpass = zz_kpass_q4_avx2, jb.vpass = zz_vpass_q4_avx2;
#endif
  }
  zz_pool_run(pool, zz_fattn_task, &jb, a->b * jb.blocks);
}

/* ================================================================ entry points */

size_t zz_cpu_attention_scratch(int64_t b, int64_t heads, int64_t t) {
  /* per query head 2t floats: its scores, and (top-k, the reference) their copy for
   * the selection; the fast kernel keeps a KV group's scores in its heads' share */
  return (size_t)(2 * b * heads * t);
}
