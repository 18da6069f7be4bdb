/*
 * bind.c — hwloc binding of this process (and the threads its device starts) to
 * the cores of the NUMA node nearest its GPU, or of one of the machine's nodes,
 * with disjoint core sets for the processes that share a node (zz_bind.h). The
 * planner decides whether a run binds; a pipeline's ranks agree on how a node's
 * cores are shared (stage/bind.c) and bind here.
 */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef ZZ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "zz_bind.h"
#include "zz_limits.h"

/* The NUMA node (logical index) nearest CUDA device `ordinal`, or -1 with why. */
static int gpu_numa_node(hwloc_topology_t topo, int ordinal, char *why, size_t len) {
#ifdef ZZ_HAVE_CUDA
  char busid[32];
  if (cudaDeviceGetPCIBusId(busid, (int)sizeof busid, ordinal) != cudaSuccess) {
    cudaGetLastError();
    snprintf(why, len, "GPU %d not found", ordinal);
    return -1;
  }
  hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, busid);
  hwloc_obj_t anc = pci ? hwloc_get_non_io_ancestor_obj(topo, pci) : NULL;
  if (!anc || !anc->nodeset || hwloc_bitmap_iszero(anc->nodeset)) {
    snprintf(why, len, "GPU %d (%s) has no known NUMA node", ordinal, busid);
    return -1;
  }
  int os = hwloc_bitmap_first(anc->nodeset);
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, (unsigned)os);
  snprintf(why, len, "nearest GPU %d (%s)", ordinal, busid);
  return node ? (int)node->logical_index : -1;
#else
  (void)topo;
  snprintf(why, len, "GPU %d: built without CUDA", ordinal);
  return -1;
#endif
}

/* The machine's topology, with the I/O devices that locate a GPU when there is one
 * to locate (gpu_ordinal >= 0); without, PCI discovery is skipped (it is not
 * needed, and hwloc's PCI plugin leaks at exit under LeakSanitizer). */
static zz_status zz_bind_topology(int rank, int gpu_ordinal, hwloc_topology_t *out) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return zz_error(ZZ_ERR_UNSUPPORTED, "bind: rank %d: hwloc cannot start", rank);
  enum hwloc_type_filter_e io = gpu_ordinal >= 0 ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE;
  if (hwloc_topology_set_io_types_filter(topo, io) != 0 || hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return zz_error(ZZ_ERR_UNSUPPORTED, "bind: rank %d: hwloc cannot read this machine's topology", rank);
  }
  *out = topo;
  return ZZ_OK;
}

/* The NUMA node for local rank local_rank: nearest the GPU, else spread over the
 * nodes with cores; why says which. -1: no node with cores known. */
static int zz_bind_node(hwloc_topology_t topo, int gpu_ordinal, int local_rank, char *why, size_t len) {
  /* NUMA nodes that have cores (memory-only nodes cannot run a rank) */
  int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  int with_cpus = 0;
  for (int i = 0; i < nn; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    if (o->cpuset && !hwloc_bitmap_iszero(o->cpuset)) with_cpus++;
  }
  int node = -1;
  why[0] = 0;
  if (gpu_ordinal >= 0) node = gpu_numa_node(topo, gpu_ordinal, why, len);
  if (node < 0 && with_cpus > 0) { /* spread the local ranks over the nodes with cores */
    int want = local_rank % with_cpus, seen = 0;
    for (int i = 0; i < nn && node < 0; i++) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
      if (o->cpuset && !hwloc_bitmap_iszero(o->cpuset) && seen++ == want) node = i;
    }
    char tmp[96];
    snprintf(tmp, sizeof tmp, "%s%sspread over %d NUMA node%s", why, *why ? ": " : "", with_cpus,
             with_cpus == 1 ? "" : "s");
    snprintf(why, len, "%s", tmp);
  }
  return node;
}

zz_status zz_binding_open(int gpu_ordinal, int rank, zz_binding *b) {
  hwloc_topology_t topo = NULL;
  ZZ_CHECK(zz_bind_topology(rank, gpu_ordinal, &topo));
  b->topology = topo;
  b->cpuset = NULL;
  char why[96];
  b->numa_node = zz_bind_node(topo, gpu_ordinal, b->local_rank, why, sizeof why);
  snprintf(b->note, sizeof b->note, "%s", why);
  return ZZ_OK;
}

zz_status zz_binding_apply(zz_binding *b, int k, int n, int rank) {
  hwloc_topology_t topo = b->topology;
  int node = b->numa_node;
  char why[96];
  snprintf(why, sizeof why, "%.95s", b->note); /* zz_binding_open's reason, the start of the note */
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) return zz_error(ZZ_ERR_NO_MEMORY, "bind");
  char host[64] = {0};
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
  hwloc_const_cpuset_t pool = hwloc_topology_get_topology_cpuset(topo);
  if (node >= 0) pool = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)node)->cpuset;
  int c = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pool, HWLOC_OBJ_CORE);
  if (c <= 0) {
    hwloc_bitmap_free(set);
    return zz_error(ZZ_ERR_UNSUPPORTED, "bind: rank %d: no cores on NUMA node %d", rank, node);
  }
  int lo, hi;
  if (c >= n) { /* disjoint: rank k of n gets cores [k c / n, (k+1) c / n) */
    lo = k * c / n;
    hi = (k + 1) * c / n;
  } else {
    lo = k % c;
    hi = lo + 1;
    b->shared = 1;
  }
  for (int i = lo; i < hi; i++) {
    hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(topo, pool, HWLOC_OBJ_CORE, (unsigned)i);
    if (core) hwloc_bitmap_or(set, set, core->cpuset);
  }
  b->ncores = hi - lo;
  hwloc_bitmap_list_snprintf(b->cpus, sizeof b->cpus, set);
  char extra[288] = "";
  if (b->shared) snprintf(extra, sizeof extra, "; cores shared: %d ranks on %d cores", n, c);
  /* a cgroup's quota allows fewer busy threads than the cores seen (a container,
   * a machine of bench/cluster.sh): the threads follow the quota, and the line says
   * what the process really has */
  const zz_limits *lim = zz_limits_here();
  if (lim->quota_cores > 0 || lim->cores < lim->host_cpus || lim->mem < lim->host_mem) {
    char ls[200];
    zz_limits_str(lim, ls, sizeof ls);
    if (lim->cores < b->ncores) b->ncores = lim->cores;
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "; %d core%s to use, %s", b->ncores,
             b->ncores == 1 ? "" : "s", ls);
  }
  if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "; binding refused, not bound");
  }
  snprintf(b->note, sizeof b->note, "%s%s", why, extra);
  fprintf(stderr, "zigzag: rank %d (host %s): bound to cores %s, NUMA node %d (%s)\n", rank, host, b->cpus, node,
          b->note);
  b->cpuset = set;
  return ZZ_OK;
}

zz_status zz_binding_init_local(int gpu_ordinal, zz_binding *out) {
  zz_binding b = {.numa_node = -1, .local_size = 1};
  ZZ_CHECK(zz_binding_open(gpu_ordinal, 0, &b));
  zz_status s = zz_binding_apply(&b, 0, 1, 0);
  if (s != ZZ_OK) {
    zz_binding_free(&b);
    return s;
  }
  *out = b;
  return ZZ_OK;
}

void zz_binding_free(zz_binding *b) {
  if (!b) return;
  if (b->cpuset) hwloc_bitmap_free((hwloc_bitmap_t)b->cpuset);
  if (b->topology) hwloc_topology_destroy((hwloc_topology_t)b->topology);
  b->cpuset = b->topology = NULL;
}
