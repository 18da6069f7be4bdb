/*
 * xchg_impl.h — the hidden-state exchange between neighbour ranks (internal): one
 * interface, two implementations chosen by --comm.
 *
 *   mpi   slot buffers in host memory (the device's: pinned with CUDA, or malloc
 *         without a device); the payload goes with MPI_Isend / MPI_Irecv, a 0-byte
 *         message says "group stopped".
 *   nccl  slot buffers in the engine's device memory (zz_device_alloc); per message
 *         an 8-byte header over MPI (the payload's bytes, 0: group stopped), then the
 *         payload with ncclSend / ncclRecv (each in a group) on the exchange's own
 *         CUDA stream, completion seen through a CUDA event per slot. The receiver
 *         enqueues its ncclRecv only once the header says how much comes, so a
 *         stopped group never leaves an unmatched NCCL receive behind; both sides
 *         walk the items in the same order, so NCCL's in-order matching of the
 *         point-to-point operations of a pair of ranks pairs them right.
 *
 * Everything is polled: test() never blocks, and zz_xchg_wait bounds every wait
 * by the step timeout and by a fault seen anywhere (as zz_comm_wait does for MPI).
 * A slot is a receive (slots 0 .. ZZ_XCHG_RECV - 1) or a send slot (the rest).
 */
#ifndef ZZ_XCHG_IMPL_H
#define ZZ_XCHG_IMPL_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "faults_impl.h"
#include "zz_stage.h"

#define ZZ_XCHG_RECV 2 /* the item being computed + the next one in flight */
#define ZZ_XCHG_SEND 3 /* sends in flight while computing the next item */
#define ZZ_XCHG_SLOTS (ZZ_XCHG_RECV + ZZ_XCHG_SEND)
#define ZZ_GPU_ID_LEN 128

typedef enum zz_xchg_state {
  ZZ_XS_IDLE = 0, /* nothing posted (or what was posted has been collected) */
  ZZ_XS_POSTED,   /* mpi: the message; nccl: the header */
  ZZ_XS_PAYLOAD,  /* nccl: the header is done, the payload is on the stream */
  ZZ_XS_DONE      /* complete, bytes known; collected by the wait */
} zz_xchg_state;

typedef struct zz_xchg_slot {
  void *buf;       /* x->cap bytes: host memory (mpi) or device memory (nccl) */
  MPI_Request req; /* mpi: the message; nccl: the header */
  uint64_t head;   /* nccl: the header, payload bytes (0: the group stopped) */
  zz_xchg_state state;
  size_t bytes; /* a send: its size; a receive: its capacity, then what came */
  int peer;
} zz_xchg_slot;

typedef struct zz_xchg zz_xchg;

typedef struct zz_xchg_ops {
  const char *name; /* "mpi", "nccl" */
  bool on_device;   /* slot buffers are device memory */
  /* slot buffers of `bytes` each (called with every slot idle) */
  zz_status (*alloc)(zz_xchg *x, size_t bytes);
  void (*release)(zz_xchg *x);
  zz_status (*irecv)(zz_xchg *x, int slot, int src, int tag);
  zz_status (*isend)(zz_xchg *x, int slot, int dst, int tag);
  /* advances the slot without blocking: ZZ_XS_DONE when complete */
  zz_status (*test)(zz_xchg *x, int slot);
  /* after a failure: stop whatever is in flight so the process can end (mpi: free
   * the requests; nccl: ncclCommAbort). The buffers are left to the exit. */
  void (*abort)(zz_xchg *x);
  void (*destroy)(zz_xchg *x); /* clean: nothing in flight */
} zz_xchg_ops;

struct zz_xchg {
  const zz_xchg_ops *ops;
  MPI_Comm comm; /* the stage's data communicator (headers and mpi payloads) */
  zz_faults *faults;
  double timeout; /* step timeout, seconds */
  zz_device *dev; /* mpi: NULL means malloc; nccl: the GPU */
  zz_xchg_slot slot[ZZ_XCHG_SLOTS];
  size_t cap; /* bytes of each slot buffer */
  bool aborted;
  void *impl; /* nccl: communicator, stream, events */
};

/* The MPI exchange over comm; dev NULL: malloc'd buffers. */
zz_status zz_xchg_create_mpi(MPI_Comm comm, zz_faults *f, double timeout, zz_device *dev, zz_xchg **out);
/* Collective over comm: the NCCL exchange on dev's GPU. Every rank's GPU id is
 * gathered and two ranks on one GPU refused (zz_xchg_same_gpu); then rank 0's
 * ncclGetUniqueId is broadcast and the communicator made non-blocking, polled to
 * the deadline. hosts: [size] names for messages. */
zz_status zz_xchg_create_nccl(MPI_Comm comm, zz_faults *f, double timeout, zz_device *dev,
                              const char (*hosts)[ZZ_HOST_LEN], zz_xchg **out);
void zz_xchg_destroy(zz_xchg *x);

/* Every slot at least `bytes` (grown, never shrunk; only with every slot idle). */
zz_status zz_xchg_reserve(zz_xchg *x, size_t bytes);
/* Receive into slot from rank src (at most x->cap bytes), send `bytes` of slot. */
zz_status zz_xchg_irecv(zz_xchg *x, int slot, int src, int tag);
zz_status zz_xchg_isend(zz_xchg *x, int slot, size_t bytes, int dst, int tag);
bool zz_xchg_busy(const zz_xchg *x, int slot);
/* Advances a posted slot without waiting (lets the nccl receive of the next item
 * start while this one computes); ZZ_OK whether or not it completed. */
zz_status zz_xchg_poke(zz_xchg *x, int slot);
/* Waits for the slot (done, a fault anywhere, or the step timeout); a receive's
 * size in *bytes_out (may be NULL). Leaves the slot idle. */
zz_status zz_xchg_wait(zz_xchg *x, int slot, const char *what, double *waited_out, size_t *bytes_out);
/* The block ends: clean, receives still posted (for an item no rank sends, after
 * the last group stopped) are cancelled; after a failure, everything is aborted. */
zz_status zz_xchg_settle(zz_xchg *x, bool clean);

/* Cancels (receives) and frees every MPI request of the slots: after a failure. */
void zz_xchg_free_requests(zz_xchg *x);

/* Among n ranks' GPU ids ([n][ZZ_GPU_ID_LEN], "" for none), the first two ranks on
 * one GPU: ZZ_ERR_UNSUPPORTED naming both ranks, their hosts and the GPU; ZZ_OK
 * when all differ. */
zz_status zz_xchg_same_gpu(const char (*ids)[ZZ_GPU_ID_LEN], const char (*hosts)[ZZ_HOST_LEN], int n);

#endif
