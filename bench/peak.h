/* peak.h — the machine's own ceilings, measured where a bench runs (bench/peak.c):
 * the compute peak of each instruction family a CPU kernel may use and the
 * streaming read bandwidth, on 1 thread or on all of a given count. A kernel
 * bench reports its fraction of the right one: a FLOP-bound shape against the
 * peak of the instructions its micro-kernel could use, a GEMV (few rows of x)
 * against the read bandwidth. bench/peak_probe prints the table.
 *
 *   zz_peak p;
 *   zz_peak_measure(2, 0.1, &p);      // 2 threads, ~0.1 s per figure
 *   printf("%.0f GFLOP/s f32 FMA (%s)\n", p.f32, p.f32_isa);
 */
#ifndef ZZ_BENCH_PEAK_H
#define ZZ_BENCH_PEAK_H
#include <stddef.h>

typedef struct zz_peak {
  int threads;
  double f32;      /* GFLOP/s of vector FMA (2 per lane) */
  double bf16;     /* GFLOP/s of the bf16 dot (vdpbf16ps, 2 products per f32 lane); 0: none */
  double int8;     /* GOP/s of the u8·s8 dot into i32 (2 per product) */
  double amx_bf16; /* GFLOP/s of AMX tdpbf16ps; 0: no AMX or refused */
  double amx_int8; /* GOP/s of AMX tdpbusd; 0: no AMX or refused */
  double read_gbs; /* GB/s streaming read of a buffer far past the caches */
  const char *f32_isa, *bf16_isa, *int8_isa, *amx; /* which instructions gave each */
} zz_peak;

/* Measures every figure on `threads` threads (each pinned to nothing; one
 * stream of work per thread), each figure the best of a few runs of about
 * secs seconds. AMX is asked of the kernel with arch_prctl(ARCH_REQ_XCOMP_PERM)
 * first; where refused its figures stay 0 and amx says why. */
void zz_peak_measure(int threads, double secs, zz_peak *out);
/* Which compute figure: the zz_peak fields f32, bf16, int8, amx_bf16, amx_int8. */
typedef enum {
  ZZ_PEAK_F32,
  ZZ_PEAK_BF16,
  ZZ_PEAK_INT8,
  ZZ_PEAK_AMX_BF16,
  ZZ_PEAK_AMX_INT8,
  ZZ_PEAK_KINDS
} zz_peak_kind;
/* One compute figure of zz_peak_measure measured again, now (0 where the CPU
 * lacks it): on a shared host whose speed drifts within minutes (neighbours,
 * clocks; this project's machines read 204-303 GFLOP/s of f32 FMA across one
 * hour), a bench divides each kernel timing by this, taken right beside it,
 * rather than by a peak measured once at its start. */
double zz_peak_now(zz_peak_kind kind, int threads, double secs);
/* Only the streaming read: GB/s of `threads` threads reading 256 MiB (1 GiB past
 * 4 threads) at once, the best of 4 passes (zz_peak_measure's read_gbs). */
double zz_peak_read(int threads);
/* The CPU's model name (/proc/cpuinfo "model name", else "unknown"). */
void zz_peak_cpu_model(char *buf, size_t len);
#endif
