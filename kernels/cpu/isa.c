/*
 * isa.c — which vector code paths the CPU kernels take, chosen once at run time
 * for the whole process (attention in attn.c, the linear in linear.c): the best
 * this CPU has, or the environment's ZZ_CPU_ISA (ZZ_CPU_ISA_NAMES),
 * or zz_cpu_isa_set (tests and benches; zigzag itself reads ZZ_CPU_ISA and
 * --cpu-isa through its options table, refusing a bad name or an ISA this CPU
 * lacks, and sets it here). No -march flags anywhere: each vector
 * path is compiled with target attributes and taken only where this file says so.
 */
#define _GNU_SOURCE /* syscall (arch_prctl has no libc wrapper) */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_cpu_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ZZ_ISA_X86 1
#else
#define ZZ_ISA_X86 0
#endif

static const char *const zz_isa_names[] = {"portable", "avx2", "avx512", "amx"};

const char *zz_cpu_isa_name(zz_cpu_isa isa) {
  return isa >= ZZ_CPU_ISA_PORTABLE && isa <= ZZ_CPU_ISA_AMX ? zz_isa_names[isa] : "?";
}

int zz_cpu_isa_parse(const char *name, zz_cpu_isa *out) {
  if (strcmp(name, "auto") == 0) {
    *out = zz_cpu_isa_best();
    return 0;
  }
  for (int i = ZZ_CPU_ISA_PORTABLE; i <= ZZ_CPU_ISA_AMX; i++)
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

/* CPUID leaf 7 subleaf 0, EDX bit. */
static int zz_cpuid7_edx(int bit) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> bit & 1);
}

#define ZZ_ARCH_REQ_XCOMP_PERM 0x1023 /* arch_prctl: ask for an XSAVE feature's state (Linux 5.16) */
#define ZZ_XFEATURE_XTILEDATA 18      /* the AMX tiles' data */
#endif

static const char *zz_amx_why = "not asked";
static char zz_amx_why_buf[160];
static pthread_once_t zz_amx_once = PTHREAD_ONCE_INIT;
static void zz_amx_ask(void) {
#if ZZ_ISA_X86
  /* EDX bits 22, 24, 25: amx-bf16, amx-tile, amx-int8 */
  if (!zz_cpuid7_edx(24) || !zz_cpuid7_edx(22) || !zz_cpuid7_edx(25)) {
    zz_amx_why = "the CPU has no AMX (amx-tile, amx-bf16, amx-int8)";
    return;
  }
  if (syscall(SYS_arch_prctl, ZZ_ARCH_REQ_XCOMP_PERM, ZZ_XFEATURE_XTILEDATA) != 0) {
    snprintf(zz_amx_why_buf, sizeof zz_amx_why_buf, "the kernel refused the AMX tiles' state (arch_prctl: %s)",
             strerror(errno));
    zz_amx_why = zz_amx_why_buf;
    return;
  }
  zz_amx_why = NULL;
#else
  zz_amx_why = "not an x86-64 CPU";
#endif
}
const char *zz_cpu_amx_refusal(void) {
  pthread_once(&zz_amx_once, zz_amx_ask);
  return zz_amx_why;
}
void zz_amx_cfg_fill(zz_amx_cfg *c, int m0, int m1) {
  memset(c, 0, sizeof *c);
  c->palette = 1;
  const int rows[8] = {m0, m0, m1, m1, m0, m1, 16, 16};
  for (int t = 0; t < 8; t++)
    if (rows[t]) c->rows[t] = (uint8_t)rows[t], c->colsb[t] = 64;
}

int zz_cpu_isa_supported(zz_cpu_isa isa) {
  switch (isa) {
    case ZZ_CPU_ISA_PORTABLE: return 1;
#if ZZ_ISA_X86
    case ZZ_CPU_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && zz_cpu_has_f16c();
    case ZZ_CPU_ISA_AVX512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && zz_cpu_isa_supported(ZZ_CPU_ISA_AVX2);
    case ZZ_CPU_ISA_AMX: return zz_cpu_has_bf16() && zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512) && !zz_cpu_amx_refusal();
#endif
    default: return 0;
  }
}

const char *zz_cpu_isa_why_not(zz_cpu_isa isa) {
  if (zz_cpu_isa_supported(isa)) return NULL;
  if (isa == ZZ_CPU_ISA_AMX && zz_cpu_isa_supported(ZZ_CPU_ISA_AVX512) && zz_cpu_has_bf16())
    return zz_cpu_amx_refusal();
  return "this CPU lacks it";
}
zz_cpu_isa zz_cpu_isa_best(void) {
  if (zz_cpu_isa_supported(ZZ_CPU_ISA_AMX)) return ZZ_CPU_ISA_AMX;
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
      fprintf(stderr, "zigzag: ZZ_CPU_ISA=%s is not one of " ZZ_CPU_ISA_NAMES "; using %s\n", env,
              zz_cpu_isa_name(isa));
    else if (!zz_cpu_isa_supported(want))
      fprintf(stderr, "zigzag: ZZ_CPU_ISA=%s: %s; using %s\n", env, zz_cpu_isa_why_not(want), zz_cpu_isa_name(isa));
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
