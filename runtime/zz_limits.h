/*
 * zz_limits.h — what this process may use of the machine: the CPUs and memory
 * left after its cgroup's limits (CPU quota, cpuset, memory limit; cgroup v1 and
 * v2), so a container, or a cluster "machine" made of cgroups (bench/cluster.sh),
 * is measured, planned and run as what it is rather than as the host under it.
 *
 *   const zz_limits *l = zz_limits_here();
 *   int threads = l->cores;        // default thread count
 *   size_t ram = l->mem;           // what --cpu-mem 0 means
 *
 * zz_host_memory_bytes() (zz_runtime.h) is l->mem; the CPU device's and CPU
 * attention's default pools take l->cores; `zigzag profile` records both and
 * bounds its measurements by l->cpu.
 */
#ifndef ZZ_LIMITS_H
#define ZZ_LIMITS_H

#include <stddef.h>

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zz_limits {
  int version;        /* cgroup version a limit came from: 1, 2 (the last one read), 0 none found */
  int host_cpus;      /* CPUs online on the host */
  size_t host_mem;    /* the host's MemTotal */
  char cpuset[128];   /* the cgroup's CPU list ("" none read) */
  int cpuset_cpus;    /* CPUs in it (for this process: also in its affinity mask); 0 none read */
  double quota_cores; /* CPU quota / period, the lowest over the cgroup and its parents; 0 none */
  double period_s;    /* that quota's period; 0 none */
  size_t mem_limit;   /* memory limit, the lowest over the cgroup and its parents; 0 none */
  /* the effective figures everything else uses */
  int cores;  /* CPUs the process can keep busy at once: the cpuset's (else the host's), at most the quota rounded up */
  double cpu; /* CPU-seconds per second it may sustain: cores, or the quota when lower */
  size_t mem; /* bytes plans may fill: MemTotal, or when lower the memory limit less an eighth (at least 64 MiB)
                 for what a plan does not count (code, MPI's buffers, allocator slack) */
} zz_limits;

/* Reads the limits of the calling process under root: root/proc/self/cgroup,
 * root/proc/self/mountinfo (where each hierarchy is mounted and from which of its
 * directories), the cgroup files (cpu.cfs_quota_us, cpu.cfs_period_us,
 * cpuset.effective_cpus, memory.limit_in_bytes; v2 cpu.max, cpuset.cpus.effective,
 * memory.max) of the process's group and its parents, root/proc/meminfo and
 * root/sys/devices/system/cpu/online. root NULL or "": this process, whose
 * affinity mask (sched_getaffinity) bounds the cpuset too; another root is a test
 * tree. A missing file means no limit of that kind; an unreadable host figure
 * falls back to sysconf. ZZ_ERR_FORMAT naming the file for a value that is not
 * a number or a CPU list. */
zz_status zz_limits_read(const char *root, zz_limits *out);

/* This process's limits, read once (the host's figures alone if reading failed). */
const zz_limits *zz_limits_here(void);

/* One line for messages: "cgroup v1: cpuset 3 (1 CPU of 8), quota 0.40 CPU per 100
 * ms, memory 1.75 GiB (limit 2.00 GiB) of 16.00 GiB" or "no cgroup limits (2 CPUs,
 * 23.54 GiB)". */
const char *zz_limits_str(const zz_limits *l, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_LIMITS_H */
