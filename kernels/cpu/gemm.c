/*
 * gemm.c — the CPU device's own linear kernel for weights in f32 or bf16:
 * y[n, out] = x[n, in] · W[out, in]ᵀ (+ b) (then ReLU), W in its natural
 * row-major layout, nothing repacked.
 *
 * Why: at decode n is the GPU batch (1..64) and OpenBLAS's sgemm packs the
 * whole of W on every call (W is its A operand in row-major x·Wᵀ), which costs
 * as much memory traffic as the multiplication streams; and OpenBLAS 0.3.21 has
 * no bf16 GEMM at all. Here W is read once per call, straight from the weight
 * arena.
 *
 * One driver, two element types. The driver splits W's rows (= output columns)
 * over the pool's threads in chunks; within a chunk it walks K in blocks of
 * ZZ_GEMM_KC_BYTES per row (a W panel of ZZ_NR rows stays in L1 while the rows
 * of x pass by; x's K block, up to ZZ_GEMM_MC rows of it, stays in L2 for all
 * panels), and a
 * micro-kernel computes the ZZ_MR × ZZ_NR tile of dot products along K with
 * vector FMAs (f32: vfmadd on zmm; bf16: vdpbf16ps, two products per lane),
 * reduced horizontally once per K block. Tails (n % MR, out % NR) run the same
 * micro-kernel on repeated rows and keep only the valid part; K tails are
 * masked loads. The AVX-512 micro-kernels are compiled with target attributes
 * and chosen at run time; a portable C micro-kernel runs everywhere else.
 *
 * bf16: x is rounded to bf16 once per call (into the caller's scratch), so each
 * product is of two bf16 numbers, accumulated in f32.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

#define ZZ_MR 4 /* rows of x per micro-tile */
#define ZZ_NR 4 /* rows of W per micro-tile */
#define ZZ_GEMM_KC_BYTES                                                       \
  4096 /* K block: bytes of one W row (4 KiB: a 4-row panel is 16 KiB of L1)   \
        */
#define ZZ_GEMM_CHUNK 64 /* W rows per pool task */
#define ZZ_GEMM_MC                                                             \
  128 /* rows of x per block: its K block (128 × 4 KiB) stays in L2 */
/* f32: this kernel up to n = ZZ_GEMM_SMALL_M rows of x (decode at GPU batches
 * up to it), OpenBLAS's sgemm above (prefill), where packing is paid once for
 * many rows. Measured with bench/cpu_gemm_bench.c (docs/cpu.md, "GEMM"). */
#define ZZ_GEMM_SMALL_M 64

/* tile[r][c] = Σ_{k<kc} x_r[k] · w_c[k] */
typedef void (*zz_gemm_micro)(const void *const xr[ZZ_MR],
                              const void *const wr[ZZ_NR], int64_t kc,
                              float tile[ZZ_MR][ZZ_NR]);

typedef struct zz_gemm_job {
  const char *x;  /* [n, in] in the element type (bf16: the rounded copy) */
  const char *w;  /* [out, in] in the element type */
  const float *b; /* [out] or NULL */
  float *y;       /* [n, out] */
  int64_t n, in, out;
  int relu;
  size_t esz; /* bytes of one element of x and w */
  int64_t kc; /* K block in elements */
  zz_gemm_micro micro;
} zz_gemm_job;

/* ---------------------------------------------------------------- portable
 * micro-kernels */

static void zz_micro_f32_c(const void *const xr[ZZ_MR],
                           const void *const wr[ZZ_NR], int64_t kc,
                           float tile[ZZ_MR][ZZ_NR]) {
  for (int r = 0; r < ZZ_MR; r++)
    for (int c = 0; c < ZZ_NR; c++)
      tile[r][c] = zz_dot(xr[r], wr[c], kc);
}

static void zz_micro_bf16_c(const void *const xr[ZZ_MR],
                            const void *const wr[ZZ_NR], int64_t kc,
                            float tile[ZZ_MR][ZZ_NR]) {
  for (int r = 0; r < ZZ_MR; r++)
    for (int c = 0; c < ZZ_NR; c++) {
      const uint16_t *a = xr[r], *b = wr[c];
      float acc[8] = {0};
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8)
        for (int u = 0; u < 8; u++)
          acc[u] += zz_bf16_to_f32(a[k + u]) * zz_bf16_to_f32(b[k + u]);
      float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; k < kc; k++)
        s += zz_bf16_to_f32(a[k]) * zz_bf16_to_f32(b[k]);
      tile[r][c] = s;
    }
}

/* ---------------------------------------------------------------- AVX-512
 * micro-kernels */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZZ_GEMM_X86 1
#include <immintrin.h>

#define ZZ_AVX512 __attribute__((target("avx512f")))
#define ZZ_AVX512BF16                                                          \
  __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))

/* The 16 sums of acc, one per accumulator, in tile order. */
ZZ_AVX512 static inline void zz_tile_reduce(__m512 acc[ZZ_MR][ZZ_NR],
                                            float tile[ZZ_MR][ZZ_NR]) {
  for (int r = 0; r < ZZ_MR; r++)
    for (int c = 0; c < ZZ_NR; c++)
      tile[r][c] = _mm512_reduce_add_ps(acc[r][c]);
}

ZZ_AVX512 static void zz_micro_f32_avx512(const void *const xr[ZZ_MR],
                                          const void *const wr[ZZ_NR],
                                          int64_t kc,
                                          float tile[ZZ_MR][ZZ_NR]) {
  const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
  const float *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
  __m512 acc[ZZ_MR][ZZ_NR];
  for (int r = 0; r < ZZ_MR; r++)
    for (int c = 0; c < ZZ_NR; c++)
      acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
#define ZZ_F32_STEP(LOADX, LOADW)                                              \
  do {                                                                         \
    __m512 a[ZZ_MR] = {LOADX(x0), LOADX(x1), LOADX(x2), LOADX(x3)};            \
    __m512 b[ZZ_NR] = {LOADW(w0), LOADW(w1), LOADW(w2), LOADW(w3)};            \
    for (int r = 0; r < ZZ_MR; r++)                                            \
      for (int c = 0; c < ZZ_NR; c++)                                          \
        acc[r][c] = _mm512_fmadd_ps(a[r], b[c], acc[r][c]);                    \
  } while (0)
#define ZZ_LD(p) _mm512_loadu_ps((p) + k)
#define ZZ_LDM(p) _mm512_maskz_loadu_ps(m, (p) + k)
  for (; k + 16 <= kc; k += 16)
    ZZ_F32_STEP(ZZ_LD, ZZ_LD);
  if (k < kc) {
    __mmask16 m = (__mmask16)((1u << (kc - k)) - 1);
    ZZ_F32_STEP(ZZ_LDM, ZZ_LDM);
  }
#undef ZZ_LD
#undef ZZ_LDM
#undef ZZ_F32_STEP
  zz_tile_reduce(acc, tile);
}

ZZ_AVX512BF16 static void zz_micro_bf16_avx512(const void *const xr[ZZ_MR],
                                               const void *const wr[ZZ_NR],
                                               int64_t kc,
                                               float tile[ZZ_MR][ZZ_NR]) {
  const uint16_t *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
  const uint16_t *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
  __m512 acc[ZZ_MR][ZZ_NR];
  for (int r = 0; r < ZZ_MR; r++)
    for (int c = 0; c < ZZ_NR; c++)
      acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  /* 32 bf16 per vector: vdpbf16ps adds the two products of each lane's pair */
#define ZZ_BF16_STEP(LOAD)                                                     \
  do {                                                                         \
    __m512bh a[ZZ_MR] = {(__m512bh)LOAD(x0), (__m512bh)LOAD(x1),               \
                         (__m512bh)LOAD(x2), (__m512bh)LOAD(x3)};              \
    __m512bh b[ZZ_NR] = {(__m512bh)LOAD(w0), (__m512bh)LOAD(w1),               \
                         (__m512bh)LOAD(w2), (__m512bh)LOAD(w3)};              \
    for (int r = 0; r < ZZ_MR; r++)                                            \
      for (int c = 0; c < ZZ_NR; c++)                                          \
        acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a[r], b[c]);                   \
  } while (0)
#define ZZ_LD(p) _mm512_loadu_si512((const void *)((p) + k))
#define ZZ_LDM(p) _mm512_maskz_loadu_epi16(m, (p) + k)
  for (; k + 32 <= kc; k += 32)
    ZZ_BF16_STEP(ZZ_LD);
  if (k < kc) {
    __mmask32 m = (__mmask32)((1ull << (kc - k)) - 1);
    ZZ_BF16_STEP(ZZ_LDM);
  }
#undef ZZ_LD
#undef ZZ_LDM
#undef ZZ_BF16_STEP
  zz_tile_reduce(acc, tile);
}

/* dst[i] = bf16(src[i]), round to nearest even (vcvtneps2bf16), as
 * zz_f32_to_bf16 */
ZZ_AVX512BF16 static void zz_round_bf16_avx512(const float *src, int64_t n,
                                               uint16_t *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)h);
  }
  for (; i < n; i++)
    dst[i] = zz_f32_to_bf16(src[i]);
}
#endif

/* ---------------------------------------------------------------- run-time
 * choice */

typedef struct zz_gemm_isa {
  zz_gemm_micro f32, bf16;
  bool f32_fast; /* f32 has a vector micro-kernel: worth using below the
                    crossover */
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst);
} zz_gemm_isa;

static void zz_round_bf16_c(const float *src, int64_t n, uint16_t *dst) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = zz_f32_to_bf16(src[i]);
}

static const zz_gemm_isa zz_isa_c = {zz_micro_f32_c, zz_micro_bf16_c, false,
                                     zz_round_bf16_c};

/* The micro-kernels for the process's ISA choice (kernels/cpu/isa.c): the
 * AVX-512 ones under avx512 (bf16's where the CPU has avx512_bf16), portable C
 * otherwise (f32 then keeps sgemm at every size: f32_fast is false). */
static zz_gemm_isa zz_gemm_isa_get(void) {
  zz_gemm_isa s = zz_isa_c;
#ifdef ZZ_GEMM_X86
  if (zz_cpu_isa_get() == ZZ_CPU_ISA_AVX512) {
    s.f32 = zz_micro_f32_avx512;
    s.f32_fast = true;
    if (zz_cpu_has_bf16()) {
      s.bf16 = zz_micro_bf16_avx512;
      s.round_bf16 = zz_round_bf16_avx512;
    }
  }
#endif
  return s;
}

/* ---------------------------------------------------------------- the driver
 */

/* y[i0.., c0..] (mr × nr valid) = tile, += when not the first K block */
static void zz_gemm_store(const zz_gemm_job *j, float tile[ZZ_MR][ZZ_NR],
                          int64_t i0, int mr, int64_t c0, int nr, bool first) {
  for (int r = 0; r < mr; r++) {
    float *yr = j->y + (i0 + r) * j->out + c0;
    for (int c = 0; c < nr; c++)
      yr[c] = tile[r][c] + (first ? 0.0f : yr[c]);
  }
}

/* One chunk of ZZ_GEMM_CHUNK output columns (rows of W), all rows of x. */
static void zz_gemm_chunk(void *arg, int64_t t) {
  const zz_gemm_job *j = arg;
  int64_t c_lo = t * ZZ_GEMM_CHUNK,
          c_hi = c_lo + ZZ_GEMM_CHUNK < j->out ? c_lo + ZZ_GEMM_CHUNK : j->out;
  size_t row = (size_t)j->in * j->esz;
  for (int64_t m0 = 0; m0 < j->n; m0 += ZZ_GEMM_MC) {
    int64_t m1 = j->n - m0 < ZZ_GEMM_MC ? j->n : m0 + ZZ_GEMM_MC;
    for (int64_t k0 = 0; k0 < j->in; k0 += j->kc) {
      int64_t kc = j->in - k0 < j->kc ? j->in - k0 : j->kc;
      bool first = k0 == 0;
      size_t off = (size_t)k0 * j->esz;
      for (int64_t c0 = c_lo; c0 < c_hi; c0 += ZZ_NR) {
        int nr = c_hi - c0 < ZZ_NR ? (int)(c_hi - c0) : ZZ_NR;
        const void *wr[ZZ_NR];
        for (int c = 0; c < ZZ_NR; c++)
          wr[c] = j->w + (size_t)(c0 + (c < nr ? c : nr - 1)) * row + off;
        for (int64_t i0 = m0; i0 < m1; i0 += ZZ_MR) {
          int mr = m1 - i0 < ZZ_MR ? (int)(m1 - i0) : ZZ_MR;
          const void *xr[ZZ_MR];
          for (int r = 0; r < ZZ_MR; r++)
            xr[r] = j->x + (size_t)(i0 + (r < mr ? r : mr - 1)) * row + off;
          float tile[ZZ_MR][ZZ_NR];
          j->micro(xr, wr, kc, tile);
          zz_gemm_store(j, tile, i0, mr, c0, nr, first);
        }
      }
    }
    zz_bias_relu_cols(j->y + m0 * j->out, m1 - m0, j->out, c_lo, c_hi - c_lo, j->b, j->relu);
  }
}

typedef struct zz_round_job {
  const float *x;
  uint16_t *xb;
  int64_t in;
  void (*round_bf16)(const float *src, int64_t n, uint16_t *dst);
} zz_round_job;

static void zz_round_row(void *arg, int64_t i) {
  const zz_round_job *j = arg;
  j->round_bf16(j->x + i * j->in, j->in, j->xb + i * j->in);
}

size_t zz_cpu_gemm_scratch(int64_t n, int64_t in, zz_dtype w_dt) {
  return w_dt == ZZ_DTYPE_BF16 ? zz_dtype_nbytes(ZZ_DTYPE_BF16, n * in) : 0;
}

void zz_cpu_gemm(zz_pool *pool, const float *x, int64_t n, int64_t in,
                 const void *w, zz_dtype w_dt, const float *b, int64_t out,
                 float *y, int relu, void *xb) {
  const zz_gemm_isa isa = zz_gemm_isa_get();
  zz_gemm_job job = {.x = (const char *)x,
                     .w = w,
                     .b = b,
                     .y = y,
                     .n = n,
                     .in = in,
                     .out = out,
                     .relu = relu,
                     .esz = sizeof(float),
                     .micro = isa.f32};
  if (w_dt == ZZ_DTYPE_BF16) {
    zz_round_job r = {x, xb, in, isa.round_bf16};
    zz_pool_run(pool, zz_round_row, &r, n);
    job.x = xb;
    job.esz = sizeof(uint16_t);
    job.micro = isa.bf16;
  }
  job.kc = (int64_t)(ZZ_GEMM_KC_BYTES / job.esz);
  zz_pool_run(pool, zz_gemm_chunk, &job,
              (out + ZZ_GEMM_CHUNK - 1) / ZZ_GEMM_CHUNK);
}

bool zz_cpu_gemm_small(int64_t n) {
  return n <= ZZ_GEMM_SMALL_M && zz_gemm_isa_get().f32_fast;
}

void zz_cpu_linear_w(zz_pool *pool, const float *x, int64_t n, int64_t in,
                     const void *w, zz_dtype w_dt, const float *b, int64_t out,
                     float *y, int relu, void *xb) {
  if (w_dt == ZZ_DTYPE_BF16 || zz_cpu_gemm_small(n))
    zz_cpu_gemm(pool, x, n, in, w, w_dt, b, out, y, relu, xb);
  else
    zz_cpu_linear_pool(pool, x, n, in, w, b, out, y, relu);
}
