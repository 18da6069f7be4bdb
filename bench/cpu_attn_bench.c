/*
 * cpu_attn_bench.c — decode attention on the CPU (zz_cpu_attention_ex, sq = 1)
 * against the memory-read ceiling, measured in one run the same way:
 *
 *   ceiling:  a vectorised streaming sum (integer adds: no float hazards on f16
 *             or Q4 bytes) over the very K and V buffers the kernel reads, split
 *             in equal contiguous chunks over the same pool (same thread count);
 *   measured: decode attention, b sequences × heads query heads over t cached
 *             tokens; bytes/s = K + V bytes of the visible rows / time.
 *   ref:      the scalar reference zz_cpu_attention_ref on the same call (speedup).
 *
 * dtype q4 is the 4-bit cache as the runtime reads it (the fused passes: nibbles
 * widened in registers); q4u the same cache through the path before them (each
 * head row dequantized onto the stack, zz_attn_args.q4_unfused), to compare.
 *
 * Each figure is the best of interleaved repetitions (ceiling, kernel, ceiling,
 * ...), so a burst from another process hits both alike. CSV on stdout; not a
 * test, never part of ctest pass/fail. ZZ_CPU_ISA picks the kernel's vector path.
 *
 *   cpu_attn_bench [threads=2] [lengths=512,1024,2048] [batches=16,64]
 *                  [dtypes=f32,f16,q4u,q4] [heads=32] [hd=64] [kv_heads=heads] [ref=1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- the ceiling */

typedef struct zz_sum_job {
  const unsigned char *buf[2]; /* K and V */
  size_t bytes;                /* of each */
  int64_t chunks;              /* per buffer */
  uint64_t part[2 * 256];      /* one result per task (kept, so the sum is not dead code) */
} zz_sum_job;

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) static uint64_t zz_sum512(const unsigned char *p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi32(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi32(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_add_epi32(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_add_epi32(a3, _mm512_loadu_si512(p + i + 192));
  }
  uint64_t s = (uint32_t)_mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)));
  for (; i < n; i++) s += p[i];
  return s;
}
__attribute__((target("avx2"))) static uint64_t zz_sum256(const unsigned char *p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi32(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
    a1 = _mm256_add_epi32(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
    a2 = _mm256_add_epi32(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
    a3 = _mm256_add_epi32(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
  }
  uint32_t lane[8];
  _mm256_storeu_si256((__m256i *)lane, _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)));
  uint64_t s = 0;
  for (int k = 0; k < 8; k++) s += lane[k];
  for (; i < n; i++) s += p[i];
  return s;
}
#endif

static uint64_t zz_sum_c(const unsigned char *p, size_t n) {
  uint64_t acc[8] = {0};
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 8; k++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * k, 8);
      acc[k] += w;
    }
  uint64_t s = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
  for (; i < n; i++) s += p[i];
  return s;
}

/* The widest vector sum the kernel's ISA choice allows (the same vector width). */
static uint64_t zz_sum(const unsigned char *p, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
  switch (zz_cpu_isa_get()) {
    case ZZ_CPU_ISA_AMX:
    case ZZ_CPU_ISA_AVX512: return zz_sum512(p, n);
    case ZZ_CPU_ISA_AVX2: return zz_sum256(p, n);
    default: break;
  }
#endif
  return zz_sum_c(p, n);
}

static void zz_sum_task(void *arg, int64_t task) {
  zz_sum_job *j = arg;
  int64_t which = task / j->chunks, c = task % j->chunks;
  size_t per = (j->bytes / (size_t)j->chunks + 63) / 64 * 64, lo = (size_t)c * per;
  size_t hi = lo + per < j->bytes ? lo + per : j->bytes;
  j->part[task] = lo < hi ? zz_sum(j->buf[which] + lo, hi - lo) : 0;
}

/* ---------------------------------------------------------------- filling */

/* A cheap deterministic pattern in [-0.5, 0.5): the caches are gigabytes. */
static float zz_pat(uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
  return (float)((x >> 40) & 0xFFFF) / 65536.0f - 0.5f;
}

/* n elements of a cache in dt (Q4: n / hd rows of hd), filled with the pattern. */
static void *zz_make_cache(zz_dtype dt, zz_qfmt f, int64_t n, int64_t hd, uint64_t seed, size_t *bytes_out) {
  size_t bytes = dt == ZZ_DTYPE_Q4 ? (size_t)(n / hd) * zz_q_row_bytes(f, hd) : zz_dtype_nbytes(dt, n);
  void *p = malloc(bytes);
  if (!p) return NULL;
  float row[1024];
  for (int64_t at = 0; at < n; at += hd) {
    for (int64_t d = 0; d < hd; d++) row[d] = zz_pat(seed + (uint64_t)(at + d));
    if (dt == ZZ_DTYPE_Q4) zz_q_quantize(f, row, 1, hd, (char *)p + (size_t)(at / hd) * zz_q_row_bytes(f, hd));
    else
      zz_convert(ZZ_DTYPE_F32, row, dt, (char *)p + zz_dtype_nbytes(dt, at), hd);
  }
  *bytes_out = bytes;
  return p;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *lengths = argc > 2 ? argv[2] : "512,1024,2048";
  const char *batches = argc > 3 ? argv[3] : "16,64";
  const char *dtypes = argc > 4 ? argv[4] : "f32,f16,q4u,q4";
  int64_t heads = argc > 5 ? atoll(argv[5]) : 32, hd = argc > 6 ? atoll(argv[6]) : 64;
  int64_t kv_heads = argc > 7 ? atoll(argv[7]) : heads;
  int with_ref = argc > 8 ? atoi(argv[8]) : 1;
  if (threads < 1 || threads > 64 || heads < 1 || hd < 1 || hd > 1024 || kv_heads < 1 || heads % kv_heads) {
    fprintf(
        stderr,
        "cpu_attn_bench: bad arguments (threads %d (1..64), heads %lld, hd %lld (1..1024), kv_heads %lld dividing heads)\n",
        threads, (long long)heads, (long long)hd, (long long)kv_heads);
    return 2;
  }
  zz_pool *pool;
  if (zz_pool_create(threads, &pool) != 0) {
    fprintf(stderr, "cpu_attn_bench: cannot start %d threads\n", threads);
    return 1;
  }
  fprintf(stderr, "cpu_attn_bench: %d threads, ISA %s, heads %lld/%lld x %lld\n", threads,
          zz_cpu_isa_name(zz_cpu_isa_get()), (long long)heads, (long long)kv_heads, (long long)hd);
  printf("dtype,b,t,heads,kv_heads,hd,kv_mib,attn_ms,attn_gb_s,ceiling_gb_s,frac_ceiling,ref_ms,speedup_vs_ref\n");
  const zz_qfmt f = ZZ_QFMT_DEFAULT;
  char *dl = strdup(dtypes), *dsave = NULL;
  for (char *dn = strtok_r(dl, ",", &dsave); dn; dn = strtok_r(NULL, ",", &dsave)) {
    zz_dtype dt = strcmp(dn, "f32") == 0                            ? ZZ_DTYPE_F32
                  : strcmp(dn, "f16") == 0                          ? ZZ_DTYPE_F16
                  : strcmp(dn, "q4") == 0 || strcmp(dn, "q4u") == 0 ? ZZ_DTYPE_Q4
                                                                    : (zz_dtype)-1;
    if ((int)dt < 0) {
      fprintf(stderr, "cpu_attn_bench: dtype '%s' is not f32, f16, q4 or q4u\n", dn);
      return 2;
    }
    char *bl = strdup(batches), *bsave = NULL;
    for (char *bn = strtok_r(bl, ",", &bsave); bn; bn = strtok_r(NULL, ",", &bsave)) {
      int64_t b = atoll(bn);
      char *tl = strdup(lengths), *tsave = NULL;
      for (char *tn = strtok_r(tl, ",", &tsave); tn; tn = strtok_r(NULL, ",", &tsave)) {
        int64_t t = atoll(tn);
        if (b < 1 || t < 1) continue;
        int64_t n_kv = b * t * kv_heads * hd;
        size_t kbytes = 0, vbytes = 0;
        void *k = zz_make_cache(dt, f, n_kv, hd, 1, &kbytes), *v = zz_make_cache(dt, f, n_kv, hd, 1u << 31, &vbytes);
        float *q = malloc((size_t)(b * heads * hd) * 4), *out = malloc((size_t)(b * heads * hd) * 4);
        float *scratch = malloc(zz_cpu_attention_scratch(b, heads, t) * sizeof(float));
        int32_t *pad = calloc((size_t)b, sizeof *pad);
        if (!k || !v || !q || !out || !scratch || !pad) {
          fprintf(stderr, "cpu_attn_bench: out of memory at b %lld t %lld %s\n", (long long)b, (long long)t, dn);
          return 1;
        }
        for (int64_t x = 0; x < b * heads * hd; x++) q[x] = zz_pat((uint64_t)x + 7);
        zz_attn_args a = {.q = q,
                          .k = k,
                          .v = v,
                          .kv = {.dt = dt, .q = f, .seq_bytes = (int64_t)(kbytes / (size_t)b)},
                          .b = b,
                          .sq = 1,
                          .t = t,
                          .q_start = t - 1,
                          .heads = heads,
                          .kv_heads = kv_heads,
                          .hd = hd,
                          .pad = pad,
                          .keep = 1,
                          .out = out,
                          .scratch = scratch,
                          .q4_unfused = strcmp(dn, "q4u") == 0};
        zz_sum_job sj = {.buf = {k, v}, .bytes = kbytes, .chunks = threads * 4};
        double best_c = 1e30, best_a = 1e30, best_r = 1e30, spent = 0;
        zz_cpu_attention_ex(pool, &a); /* warm: the pool, the pages */
        for (int rep = 0; rep < 40 && (rep < 5 || spent < 1.5); rep++) {
          double t0 = zz_now();
          zz_pool_run(pool, zz_sum_task, &sj, 2 * sj.chunks);
          double t1 = zz_now();
          zz_cpu_attention_ex(pool, &a);
          double t2 = zz_now();
          best_c = t1 - t0 < best_c ? t1 - t0 : best_c;
          best_a = t2 - t1 < best_a ? t2 - t1 : best_a;
          spent += t2 - t0;
        }
        for (int rep = 0; with_ref && rep < 2; rep++) {
          double t0 = zz_now();
          zz_cpu_attention_ref(pool, &a);
          double t1 = zz_now() - t0;
          best_r = t1 < best_r ? t1 : best_r;
        }
        uint64_t keep = 0;
        for (int64_t x = 0; x < 2 * sj.chunks; x++) keep += sj.part[x];
        double total = (double)(kbytes + vbytes);
        printf("%s,%lld,%lld,%lld,%lld,%lld,%.1f,%.3f,%.2f,%.2f,%.3f,", dn, (long long)b, (long long)t,
               (long long)heads, (long long)kv_heads, (long long)hd, total / (1 << 20), best_a * 1e3,
               total / best_a / 1e9, total / best_c / 1e9, best_c / best_a);
        if (with_ref) printf("%.3f,%.2f\n", best_r * 1e3, best_r / best_a);
        else
          printf(",\n");
        fflush(stdout);
        if (keep == 42) fprintf(stderr, " "); /* the sums are used */
        free(k), free(v), free(q), free(out), free(scratch), free(pad);
      }
      free(tl);
    }
    free(bl);
  }
  free(dl);
  zz_pool_destroy(pool);
  return 0;
}
