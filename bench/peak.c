/*
 * peak.c — the machine's compute peaks and read bandwidth, measured by small
 * probes (bench/peak.h). Each compute probe is a loop of independent chains of
 * one instruction (enough chains to cover its latency on every core we know:
 * 12), so it runs at the issue rate of the units behind it; an empty asm on the
 * inputs keeps the compiler from hoisting a product out of the loop. Each
 * probe is compiled with target attributes and run only where the CPU (and for
 * AMX, the kernel) allows it, so the one binary measures any x86-64 CPU.
 */
#define _GNU_SOURCE
#include "peak.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zz_kernels.h"

static double zz_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A probe runs n iterations and returns the operations it did (2 per FMA lane). */
typedef double (*zz_probe_fn)(long n);
static volatile float zz_sink_f;
static volatile int zz_sink_i;

#define ZZ_CHAINS 12
#define ZZ_REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* ---------------------------------------------------------------- portable */

static double zz_probe_f32_c(long n) {
  float a[ZZ_CHAINS];
  for (int i = 0; i < ZZ_CHAINS; i++) a[i] = (float)i;
  float b = 0.999999f, c = 1e-6f;
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+r"(b));
    for (int i = 0; i < ZZ_CHAINS; i++) a[i] = a[i] * b + c;
  }
  float s = 0;
  for (int i = 0; i < ZZ_CHAINS; i++) s += a[i];
  zz_sink_f = s;
  return 2.0 * ZZ_CHAINS * (double)n;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZZ_PEAK_X86 1
#include <cpuid.h>
#include <immintrin.h>

/* ---------------------------------------------------------------- AVX2 / AVX-512 */

__attribute__((target("avx2,fma"))) static double zz_probe_f32_avx2(long n) {
#define D(i) __m256 a##i = _mm256_set1_ps((float)(i));
  ZZ_REP12(D)
#undef D
  __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+x"(b));
#define F(i) a##i = _mm256_fmadd_ps(a##i, b, c);
    ZZ_REP12(F)
#undef F
  }
  __m256 s = _mm256_setzero_ps();
#define S(i) s = _mm256_add_ps(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_f = _mm256_cvtss_f32(s);
  return 2.0 * 8 * ZZ_CHAINS * (double)n;
}

__attribute__((target("avx512f"))) static double zz_probe_f32_avx512(long n) {
#define D(i) __m512 a##i = _mm512_set1_ps((float)(i));
  ZZ_REP12(D)
#undef D
  __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+v"(b));
#define F(i) a##i = _mm512_fmadd_ps(a##i, b, c);
    ZZ_REP12(F)
#undef F
  }
  __m512 s = _mm512_setzero_ps();
#define S(i) s = _mm512_add_ps(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_f = _mm512_reduce_add_ps(s);
  return 2.0 * 16 * ZZ_CHAINS * (double)n;
}

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"))) static double zz_probe_bf16_avx512(long n) {
#define D(i) __m512 a##i = _mm512_set1_ps((float)(i));
  ZZ_REP12(D)
#undef D
  __m512i x = _mm512_set1_epi16(0x3f80), w = _mm512_set1_epi16(0x3c00); /* 1.0, 2^-7 */
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+v"(x));
#define F(i) a##i = _mm512_dpbf16_ps(a##i, (__m512bh)x, (__m512bh)w);
    ZZ_REP12(F)
#undef F
  }
  __m512 s = _mm512_setzero_ps();
#define S(i) s = _mm512_add_ps(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_f = _mm512_reduce_add_ps(s);
  return 2.0 * 32 * ZZ_CHAINS * (double)n;
}

__attribute__((target("avx512f,avx512vnni"))) static double zz_probe_int8_avx512(long n) {
#define D(i) __m512i a##i = _mm512_set1_epi32(i);
  ZZ_REP12(D)
#undef D
  __m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+v"(x));
#define F(i) a##i = _mm512_dpbusd_epi32(a##i, x, w);
    ZZ_REP12(F)
#undef F
  }
  __m512i s = _mm512_setzero_si512();
#define S(i) s = _mm512_add_epi32(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_i = _mm512_reduce_add_epi32(s);
  return 2.0 * 64 * ZZ_CHAINS * (double)n;
}

__attribute__((target("avx2,avxvnni"))) static double zz_probe_int8_avxvnni(long n) {
#define D(i) __m256i a##i = _mm256_set1_epi32(i);
  ZZ_REP12(D)
#undef D
  __m256i x = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-2);
  for (long it = 0; it < n; it++) {
    __asm__ volatile("" : "+x"(x));
#define F(i) a##i = _mm256_dpbusd_avx_epi32(a##i, x, w);
    ZZ_REP12(F)
#undef F
  }
  __m256i s = _mm256_setzero_si256();
#define S(i) s = _mm256_add_epi32(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_i = _mm256_extract_epi32(s, 0);
  return 2.0 * 32 * ZZ_CHAINS * (double)n;
}

/* AVX2 has no u8·s8 dot into i32: vpmaddubsw (pairs into i16), vpmaddwd by ones
 * (pairs into i32), vpaddd: three instructions per 32 products, as llama.cpp's
 * AVX2 Q4_0/Q8_0 kernels do. Each chain multiplies its own accumulator's bytes,
 * so no two chains share a product the compiler could compute once. */
__attribute__((target("avx2"))) static double zz_probe_int8_avx2(long n) {
#define D(i) __m256i a##i = _mm256_set1_epi32(i);
  ZZ_REP12(D)
#undef D
  __m256i w = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (long it = 0; it < n; it++) {
#define F(i) a##i = _mm256_add_epi32(a##i, _mm256_madd_epi16(_mm256_maddubs_epi16(a##i, w), one));
    ZZ_REP12(F)
#undef F
  }
  __m256i s = _mm256_setzero_si256();
#define S(i) s = _mm256_add_epi32(s, a##i);
  ZZ_REP12(S)
#undef S
  zz_sink_i = _mm256_extract_epi32(s, 0);
  return 2.0 * 32 * ZZ_CHAINS * (double)n;
}

/* ---------------------------------------------------------------- AMX */

/* CPUID leaf 7 subleaf sub, register EDX (reg 3) or EAX (reg 0), bit. */
static int zz_cpuid7(unsigned sub, int reg, int bit) {
  unsigned r[4];
  if (!__get_cpuid_count(7, sub, &r[0], &r[1], &r[2], &r[3])) return 0;
  return (int)(r[reg] >> bit & 1);
}

/* read by every thread's tile loads; each thread stores its result to its own stack */
static _Alignas(64) const char zz_amx_zero[1024];

__attribute__((target("amx-tile,amx-bf16"))) static double zz_probe_amx_bf16(long n) {
  zz_amx_cfg c;
  zz_amx_cfg_fill(&c, 16, 16); /* tiles 0-3 accumulate 16 × 16 i32/f32, 4-5 hold A, 6-7 B */
  _tile_loadconfig(&c);
  _tile_loadd(0, zz_amx_zero, 64);
  _tile_loadd(1, zz_amx_zero, 64);
  _tile_loadd(2, zz_amx_zero, 64);
  _tile_loadd(3, zz_amx_zero, 64);
  _tile_loadd(4, zz_amx_zero, 64);
  _tile_loadd(5, zz_amx_zero, 64);
  _tile_loadd(6, zz_amx_zero, 64);
  _tile_loadd(7, zz_amx_zero, 64);
  for (long it = 0; it < n; it++) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _Alignas(64) char c0[1024];
  _tile_stored(0, c0, 64);
  _tile_release();
  zz_sink_i = c0[0];
  return 4.0 * 2 * 16 * 16 * 32 * (double)n;
}

__attribute__((target("amx-tile,amx-int8"))) static double zz_probe_amx_int8(long n) {
  zz_amx_cfg c;
  zz_amx_cfg_fill(&c, 16, 16);
  _tile_loadconfig(&c);
  _tile_loadd(0, zz_amx_zero, 64);
  _tile_loadd(1, zz_amx_zero, 64);
  _tile_loadd(2, zz_amx_zero, 64);
  _tile_loadd(3, zz_amx_zero, 64);
  _tile_loadd(4, zz_amx_zero, 64);
  _tile_loadd(5, zz_amx_zero, 64);
  _tile_loadd(6, zz_amx_zero, 64);
  _tile_loadd(7, zz_amx_zero, 64);
  for (long it = 0; it < n; it++) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _Alignas(64) char c0[1024];
  _tile_stored(0, c0, 64);
  _tile_release();
  zz_sink_i = c0[0];
  return 4.0 * 2 * 16 * 16 * 64 * (double)n;
}

/* Streaming read of [p, p + n) floats: four vector sums, 32 floats a step. */
__attribute__((target("avx2"))) static double zz_read_avx2(const float *p, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  return _mm256_cvtss_f32(s0);
}
#endif

static double zz_read_c(const float *p, int64_t n) {
  float s[8] = {0};
  for (int64_t i = 0; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; u++) s[u] += p[i + u];
  return s[0] + s[7];
}

/* ---------------------------------------------------------------- threads */

typedef struct zz_peak_run {
  zz_probe_fn fn;
  long n;
  pthread_barrier_t *bar;
  double ops;
  /* read bandwidth: this thread's slice */
  const float *p;
  int64_t len;
  double (*read)(const float *p, int64_t n);
} zz_peak_run;

/* One thread's work: a probe's operations, or its slice read (ops: bytes). */
static void zz_peak_work(zz_peak_run *r) {
  if (r->fn) r->ops = r->fn(r->n);
  else
    zz_sink_f = (float)r->read(r->p, r->len), r->ops = (double)r->len * sizeof *r->p;
}

static void *zz_peak_thread(void *arg) {
  zz_peak_run *r = arg;
  pthread_barrier_wait(r->bar);
  zz_peak_work(r);
  pthread_barrier_wait(r->bar);
  return NULL;
}

/* Seconds of one run of every thread's work started together (the caller is
 * thread 0); ops_out: the operations of all threads. */
static double zz_peak_together(zz_peak_run *runs, int threads, double *ops_out) {
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)threads);
  pthread_t tid[ZZ_POOL_MAX_THREADS];
  for (int t = 0; t < threads; t++) runs[t].bar = &bar;
  for (int t = 1; t < threads; t++) pthread_create(&tid[t], NULL, zz_peak_thread, &runs[t]);
  pthread_barrier_wait(&bar);
  double t0 = zz_now();
  zz_peak_work(&runs[0]);
  pthread_barrier_wait(&bar);
  double dt = zz_now() - t0;
  for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
  pthread_barrier_destroy(&bar);
  double ops = 0;
  for (int t = 0; t < threads; t++) ops += runs[t].ops;
  *ops_out = ops;
  return dt;
}

/* The best operations (or bytes) a second of `reps` runs of one's work on every
 * thread at once (a read: each thread the next slice of one.len floats). */
static double zz_peak_best(zz_peak_run one, int threads, int reps) {
  zz_peak_run runs[ZZ_POOL_MAX_THREADS];
  double best = 0;
  for (int rep = 0; rep < reps; rep++) {
    for (int t = 0; t < threads; t++) {
      runs[t] = one;
      if (one.p) runs[t].p = one.p + t * one.len;
    }
    double ops, s = zz_peak_together(runs, threads, &ops);
    if (ops / s > best) best = ops / s;
  }
  return best;
}

/* G(FL)OP/s of fn on `threads` threads, iterations sized to about secs seconds,
 * the best of 3. */
static double zz_peak_rate(zz_probe_fn fn, int threads, double secs) {
  long n = 250;
  double dt;
  do { /* 1000, 4000, ... iterations until one run takes 10 ms */
    n *= 4;
    double t0 = zz_now();
    fn(n);
    dt = zz_now() - t0;
  } while (dt < 0.01);
  n = (long)((double)n * secs / dt) + 1;
  return zz_peak_best((zz_peak_run){.fn = fn, .n = n}, threads, 3) / 1e9;
}

/* GB/s reading 256 MiB (1 GiB past 4 threads), far past every cache, each
 * thread its own slice, all at once; the best of 4 passes. */
double zz_peak_read(int threads) {
  int64_t total = (int64_t)256 << 20;
  if (threads > 4) total = (int64_t)1 << 30;
  int64_t len = total / (int64_t)sizeof(float) / threads / 32 * 32;
  float *p = aligned_alloc(64, (size_t)(len * threads) * sizeof *p);
  if (!p) return 0;
  for (int64_t i = 0; i < len * threads; i++) p[i] = (float)(i & 255);
  double (*read)(const float *, int64_t) = zz_read_c;
#ifdef ZZ_PEAK_X86
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) read = zz_read_avx2;
#endif
  double best = zz_peak_best((zz_peak_run){.p = p, .len = len, .read = read}, threads, 4) / 1e9;
  free(p);
  return best;
}

/* The probe of a compute figure on this CPU, and in *isa the instructions it
 * runs; NULL where the CPU lacks them or the kernel refused AMX (*isa then says
 * which): the one choice zz_peak_measure and zz_peak_now share. */
static zz_probe_fn zz_peak_probe(zz_peak_kind kind, const char **isa) {
  static const char *const none[ZZ_PEAK_KINDS] = {"scalar C", "none (bf16 widened to f32: the f32 peak)", "none",
                                                  "none", "none"};
  zz_probe_fn fn = kind == ZZ_PEAK_F32 ? zz_probe_f32_c : NULL;
  *isa = none[kind];
#ifdef ZZ_PEAK_X86
  __builtin_cpu_init();
  bool avx2 = zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2), avx512 = zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512);
  switch (kind) {
    case ZZ_PEAK_F32:
      if (avx2) fn = zz_probe_f32_avx2, *isa = "avx2 vfmadd231ps ymm";
      if (avx512) fn = zz_probe_f32_avx512, *isa = "avx512 vfmadd231ps zmm";
      break;
    case ZZ_PEAK_BF16:
      if (zz_cpu_has_bf16()) fn = zz_probe_bf16_avx512, *isa = "avx512_bf16 vdpbf16ps zmm";
      break;
    case ZZ_PEAK_INT8:
      if (avx2) fn = zz_probe_int8_avx2, *isa = "avx2 vpmaddubsw+vpmaddwd+vpaddd";
      if (zz_cpuid7(1, 0, 4) && avx2) fn = zz_probe_int8_avxvnni, *isa = "avx_vnni vpdpbusd ymm";
      if (avx512 && __builtin_cpu_supports("avx512vnni")) fn = zz_probe_int8_avx512, *isa = "avx512_vnni vpdpbusd zmm";
      break;
    default: { /* AMX: asked of the kernel once (zz_cpu_amx_refusal) */
      const char *why = zz_cpu_amx_refusal();
      if (why) {
        *isa = why;
        break;
      }
      fn = kind == ZZ_PEAK_AMX_BF16 ? zz_probe_amx_bf16 : zz_probe_amx_int8;
      *isa = "amx tdpbf16ps / tdpbusd";
      break;
    }
  }
#endif
  return fn;
}

/* A thread count clamped to 1 .. ZZ_POOL_MAX_THREADS. */
static int zz_peak_threads(int threads) {
  return threads < 1 ? 1 : threads > ZZ_POOL_MAX_THREADS ? ZZ_POOL_MAX_THREADS : threads;
}

double zz_peak_now(zz_peak_kind kind, int threads, double secs) {
  const char *isa;
  zz_probe_fn fn = zz_peak_probe(kind, &isa);
  return fn ? zz_peak_rate(fn, zz_peak_threads(threads), secs) : 0;
}

void zz_peak_measure(int threads, double secs, zz_peak *out) {
  threads = zz_peak_threads(threads);
  memset(out, 0, sizeof *out);
  out->threads = threads;
  const char *amx_isa;
  zz_probe_fn f32 = zz_peak_probe(ZZ_PEAK_F32, &out->f32_isa), bf16 = zz_peak_probe(ZZ_PEAK_BF16, &out->bf16_isa),
              int8 = zz_peak_probe(ZZ_PEAK_INT8, &out->int8_isa), amx = zz_peak_probe(ZZ_PEAK_AMX_BF16, &amx_isa);
  out->amx = amx_isa;
  if (amx) {
    out->amx_bf16 = zz_peak_rate(amx, threads, secs);
    out->amx_int8 = zz_peak_rate(zz_peak_probe(ZZ_PEAK_AMX_INT8, &amx_isa), threads, secs);
  }
  out->f32 = zz_peak_rate(f32, threads, secs);
  out->bf16 = bf16 ? zz_peak_rate(bf16, threads, secs) : 0;
  out->int8 = int8 ? zz_peak_rate(int8, threads, secs) : 0;
  out->read_gbs = zz_peak_read(threads);
}

void zz_peak_cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *v = strchr(line, ':');
      if (v) {
        v += v[1] == ' ' ? 2 : 1;
        v[strcspn(v, "\n")] = 0;
        snprintf(buf, len, "%s", v);
      }
      break;
    }
  fclose(f);
}
