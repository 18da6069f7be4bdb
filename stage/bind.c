/*
 * bind.c — the ranks of a pipeline bound with hwloc (runtime/bind.c): the ranks
 * that share a machine tell each other the NUMA node each chose (nearest its GPU,
 * or spread over the nodes), and the ranks on one node take disjoint core sets.
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm_impl.h"
#include "zz_stage.h"

zz_status zz_binding_init(MPI_Comm comm, int gpu_ordinal, zz_binding *out) {
  zz_binding b = {.numa_node = -1};
  zz_status s = ZZ_OK;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);

  /* The ranks of this machine. MPI_Comm_split_type has no non-blocking form (MPI
   * 3.1); it runs once at start, before anything can have failed. */
  MPI_Comm local = MPI_COMM_NULL;
  ZZ_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
               "bind: rank %d: MPI_Comm_split_type", rank);
  MPI_Comm_rank(local, &b.local_rank);
  MPI_Comm_size(local, &b.local_size);
  int *nodes = calloc((size_t)b.local_size, sizeof *nodes);
  if (!nodes) {
    s = zz_error(ZZ_ERR_NO_MEMORY, "bind");
    goto done;
  }
  if ((s = zz_binding_open(gpu_ordinal, rank, &b)) != ZZ_OK) goto done;
  int node = b.numa_node;

  /* who else on this machine goes to the same node */
  MPI_Request req;
  s = zz_mpi_status(MPI_Iallgather(&node, 1, MPI_INT, nodes, 1, MPI_INT, local, &req),
                    "bind: rank %d: exchanging NUMA nodes", rank);
  if (s != ZZ_OK) goto done;
  double t0 = zz_now();
  int spins = 0, fin = 0;
  while (!fin) {
    MPI_Test(&req, &fin, MPI_STATUS_IGNORE);
    if (!fin && zz_now() - t0 > 60) {
      s = zz_error(ZZ_ERR_MPI, "bind: rank %d: the local ranks did not answer in 60 s", rank);
      goto done;
    }
    if (!fin) zz_comm_backoff(&spins);
  }
  int k = 0, n = 0;
  for (int i = 0; i < b.local_size; i++) {
    if (nodes[i] != node) continue;
    if (i < b.local_rank) k++;
    n++;
  }
  s = zz_binding_apply(&b, k, n, rank);
  if (s == ZZ_OK) *out = b;
done:
  if (s != ZZ_OK) zz_binding_free(&b);
  free(nodes);
  MPI_Comm_free(&local);
  return s;
}
