/*
 * zz_bind.h — binding this process, and the threads its device starts, to the
 * cores of one NUMA node with hwloc (runtime/bind.c): the node nearest a GPU, or
 * the machine's nodes with cores shared out among the processes on it. The planner
 * decides whether a run binds (zz_plan_binding); a process alone binds with
 * zz_binding_init_local before its device starts; a pipeline's ranks choose their
 * nodes here and share a node's cores out collectively (stage/bind.c).
 *
 *   zz_binding b;
 *   if (zz_binding_init_local(gpu, &b) == ZZ_OK) zz_binding_free(&b);  // still bound
 */
#ifndef ZZ_BIND_H
#define ZZ_BIND_H

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where hwloc bound this process (a pipeline's rank). */
typedef struct zz_binding {
  int numa_node;  /* logical index of the NUMA node bound to, -1 when unknown */
  int ncores;     /* cores in the cpuset, at most the cgroup's quota rounded up (threads for GEMM, CPU attention) */
  int shared;     /* 1 when this rank's cores are shared with other local ranks */
  int local_rank; /* rank among the ranks of this machine */
  int local_size; /* ranks on this machine */
  char cpus[128]; /* the cpuset as a list of PUs, "0-3,8-11" */
  char note[384]; /* why it bound there ("nearest GPU 0000:3b:00.0", "spread: ...") */
  void *cpuset;   /* hwloc_bitmap_t, owned: the cores bound to */
  void *topology; /* hwloc_topology_t, owned */
} zz_binding;

/* This machine's topology and the NUMA node for the process that is local rank
 * b->local_rank of the b->local_size on it: the node nearest CUDA device
 * gpu_ordinal (when >= 0 and found), else the machine's nodes with cores in turn.
 * Nothing is bound yet; rank names the process in messages. On failure b holds
 * nothing to free. */
zz_status zz_binding_open(int gpu_ordinal, int rank, zz_binding *b);
/* Binds the process to the k-th of n disjoint core sets of b's node (shared, and
 * said so, when the node has fewer than n cores), b->ncores at most its cgroup's
 * quota; prints `zigzag: rank R (host H): bound to cores ..., NUMA node ... (why)`. */
zz_status zz_binding_apply(zz_binding *b, int k, int n, int rank);
/* Both, for a process alone on its machine: the whole node nearest the GPU (or
 * the first node with cores). */
zz_status zz_binding_init_local(int gpu_ordinal, zz_binding *out);
/* The handles (the process stays bound). */
void zz_binding_free(zz_binding *b);

#ifdef __cplusplus
}
#endif

#endif /* ZZ_BIND_H */
