/*
 * isa.c — which vector code paths the CPU kernels take, chosen once at run time
 * for the whole process (attention in attn.c, the linear in linear.c): the best
 * this CPU has, or the environment's ZZ_CPU_ISA (auto, portable, avx2, avx512),
 * or zz_cpu_isa_set (tests and benches; zigzag itself reads ZZ_CPU_ISA and
 * --cpu-isa through its options table, refusing a bad name or an ISA this CPU
 * lacks, and sets it here). No -march flags anywhere: each vector
 * path is compiled with target attributes and taken only where this file says so.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_cpu_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ZZ_ISA_X86 1
#else
#define ZZ_ISA_X86 0
#endif

static const char *const zz_isa_names[] = {"portable", "avx2", "avx512"};

const char *zz_cpu_isa_name(zz_cpu_isa isa) {
  return isa >= ZZ_CPU_ISA_PORTABLE && isa <= ZZ_CPU_ISA_AVX512 ? zz_isa_names[isa] : "?";
}

int zz_cpu_isa_parse(const char *name, zz_cpu_isa *out) {
  if (strcmp(name, "auto") == 0) {
    *out = zz_cpu_isa_best();
    return 0;
  }
  for (int i = ZZ_CPU_ISA_PORTABLE; i <= ZZ_CPU_ISA_AVX512; i++)
    if (strcmp(name, zz_isa_names[i]) == 0) {
      *out = (zz_cpu_isa)i;
      return 0;
    }
  return -1;
}

#if ZZ_ISA_X86
/* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c"). */
static int zz_cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

int zz_cpu_isa_supported(zz_cpu_isa isa) {
  switch (isa) {
    case ZZ_CPU_ISA_PORTABLE: return 1;
#if ZZ_ISA_X86
    case ZZ_CPU_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && zz_cpu_has_f16c();
    case ZZ_CPU_ISA_AVX512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2);
#endif
    default: return 0;
  }
}

zz_cpu_isa zz_cpu_isa_best(void) {
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512)) return ZZ_CPU_ISA_AVX512;
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2)) return ZZ_CPU_ISA_AVX2;
  return ZZ_CPU_ISA_PORTABLE;
}

static int zz_isa_current = -1; /* -1: not chosen yet (ZZ_CPU_ISA or the best) */
static pthread_once_t zz_isa_once = PTHREAD_ONCE_INIT;

static void zz_isa_from_env(void) {
  zz_cpu_isa isa = zz_cpu_isa_best();
  const char *env = getenv("ZZ_CPU_ISA");
  if (env && *env) {
    zz_cpu_isa want;
    if (zz_cpu_isa_parse(env, &want) != 0)
      fprintf(stderr, "zigzag: ZZ_CPU_ISA=%s is not one of auto, portable, avx2, avx512; using %s\n", env,
              zz_cpu_isa_name(isa));
    else if (!zz_cpu_isa_supported(want))
      fprintf(stderr, "zigzag: ZZ_CPU_ISA=%s: this CPU lacks it; using %s\n", env, zz_cpu_isa_name(isa));
    else
      isa = want;
  }
  int unset = -1;
  __atomic_compare_exchange_n(&zz_isa_current, &unset, (int)isa, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

zz_cpu_isa zz_cpu_isa_get(void) {
  pthread_once(&zz_isa_once, zz_isa_from_env);
  return (zz_cpu_isa)__atomic_load_n(&zz_isa_current, __ATOMIC_SEQ_CST);
}

int zz_cpu_isa_set(zz_cpu_isa isa) {
  if (!zz_cpu_isa_supported(isa)) return -1;
  pthread_once(&zz_isa_once, zz_isa_from_env);
  __atomic_store_n(&zz_isa_current, (int)isa, __ATOMIC_SEQ_CST);
  return 0;
}

bool zz_cpu_has_vnni(void) {
#if ZZ_ISA_X86
  __builtin_cpu_init();
  return zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool zz_cpu_has_bf16(void) {
#if ZZ_ISA_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}
