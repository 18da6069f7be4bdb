/*
 * xchg_nccl.c — the NCCL exchange (--comm nccl): hidden states stay in GPU memory.
 *
 * Slot buffers are the engine's device memory (zz_device_alloc, counted in the
 * device's reserved bytes by zz_device_reserve, so memory plans leave room for
 * them). Each message: an 8-byte header over MPI on the stage's data communicator
 * (the payload's bytes; 0 = the group stopped, which sends no payload), and the
 * payload by ncclSend / ncclRecv, each in its own group, on the exchange's own
 * non-blocking stream; a CUDA event recorded
 * after it tells when it is complete. The receiver enqueues ncclRecv only when the
 * header has arrived (so a stopped group leaves no NCCL receive waiting), and the
 * stage pokes the next item's slot before computing, so its payload moves while
 * this rank computes. The communicator is non-blocking (ncclConfig_t.blocking = 0):
 * its creation and every launch are polled with ncclCommGetAsyncError against a
 * deadline, and a fault or a deadline ends it with ncclCommAbort.
 *
 * Never run: the machine this was written on has no GPU (docs/pipeline.md says how
 * a session with two GPUs checks it).
 */
#ifdef ZZ_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "xchg_impl.h"

typedef struct zz_nccl {
  ncclComm_t comm;
  bool comm_made;
  cudaStream_t stream;           /* the exchange's own */
  cudaEvent_t ev[ZZ_XCHG_SLOTS]; /* recorded after each slot's payload */
  int ordinal;
  double deadline_s; /* start-up and launches */
} zz_nccl;

static zz_nccl *zz_nccl_of(zz_xchg *x) { return (zz_nccl *)x->impl; }

static zz_status zz_cuda_fail(cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  return zz_error(ZZ_ERR_DEVICE, "stage: nccl exchange: %s: %s", what, cudaGetErrorString(e));
}

static zz_status zz_nccl_fail(zz_nccl *n, ncclResult_t r, const char *what) {
  const char *last = n && n->comm_made ? ncclGetLastError(n->comm) : NULL;
  return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: %s: %s%s%s", what, ncclGetErrorString(r),
                  last && *last ? ": " : "", last ? last : "");
}

/* The communicator's pending work (creation, a launch) polled until it is done,
 * fails, a fault is seen anywhere, or the deadline passes. */
static zz_status zz_nccl_settle(zz_xchg *x, const char *what) {
  zz_nccl *n = zz_nccl_of(x);
  double t0 = zz_now();
  int spins = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
    if (r != ncclSuccess) return zz_nccl_fail(n, r, what);
    if (state == ncclSuccess) return ZZ_OK;
    if (state != ncclInProgress) return zz_nccl_fail(n, state, what);
    ZZ_CHECK(zz_faults_check(x->faults));
    if (zz_now() - t0 > n->deadline_s)
      return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: %s: not done after %.0f s", what, n->deadline_s);
    zz_comm_backoff(&spins);
  }
}

static zz_status zz_nccl_enter(zz_nccl *n) {
  cudaError_t e = cudaSetDevice(n->ordinal);
  return e == cudaSuccess ? ZZ_OK : zz_cuda_fail(e, "cudaSetDevice");
}

/* ================================================================ buffers */

static zz_status zz_nccl_alloc(zz_xchg *x, size_t bytes) {
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) ZZ_CHECK(zz_device_alloc(x->dev, bytes, &x->slot[k].buf));
  zz_device_reserve(x->dev, (size_t)ZZ_XCHG_SLOTS * bytes);
  return ZZ_OK;
}

static void zz_nccl_release(zz_xchg *x) {
  size_t held = 0;
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) {
    if (x->slot[k].buf) held += x->cap;
    zz_device_free(x->dev, x->slot[k].buf);
    x->slot[k].buf = NULL;
  }
  zz_device_unreserve(x->dev, held);
}

/* ================================================================ transfers */

/* One payload on the stream, then the slot's event. */
static zz_status zz_nccl_payload(zz_xchg *x, int slot, bool send) {
  zz_nccl *n = zz_nccl_of(x);
  zz_xchg_slot *s = &x->slot[slot];
  ZZ_CHECK(zz_nccl_enter(n));
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess)
    r = send ? ncclSend(s->buf, s->bytes, ncclUint8, s->peer, n->comm, n->stream)
             : ncclRecv(s->buf, s->bytes, ncclUint8, s->peer, n->comm, n->stream);
  ncclResult_t r2 = ncclGroupEnd();
  if (r == ncclSuccess) r = r2;
  if (r != ncclSuccess && r != ncclInProgress) return zz_nccl_fail(n, r, send ? "ncclSend" : "ncclRecv");
  ZZ_CHECK(zz_nccl_settle(x, send ? "launching ncclSend" : "launching ncclRecv"));
  cudaError_t e = cudaEventRecord(n->ev[slot], n->stream);
  return e == cudaSuccess ? ZZ_OK : zz_cuda_fail(e, "cudaEventRecord");
}

static zz_status zz_nccl_irecv(zz_xchg *x, int slot, int src, int tag) {
  zz_xchg_slot *s = &x->slot[slot];
  s->head = 0;
  if (MPI_Irecv(&s->head, 1, MPI_UINT64_T, src, tag, x->comm, &s->req) != MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: posting the header receive from rank %d", src);
  return ZZ_OK;
}

static zz_status zz_nccl_isend(zz_xchg *x, int slot, int dst, int tag) {
  zz_xchg_slot *s = &x->slot[slot];
  s->head = s->bytes;
  if (MPI_Isend(&s->head, 1, MPI_UINT64_T, dst, tag, x->comm, &s->req) != MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: sending the header to rank %d", dst);
  return s->bytes ? zz_nccl_payload(x, slot, true) : ZZ_OK;
}

/* ZZ_OK and *done = 1 when the slot's event has fired; a failed communicator is an
 * error even while the event waits. */
static zz_status zz_nccl_event(zz_xchg *x, int slot, int *done) {
  zz_nccl *n = zz_nccl_of(x);
  cudaError_t e = cudaEventQuery(n->ev[slot]);
  if (e == cudaSuccess) {
    *done = 1;
    return ZZ_OK;
  }
  if (e != cudaErrorNotReady) return zz_cuda_fail(e, "cudaEventQuery");
  (void)cudaGetLastError(); /* cudaErrorNotReady is not an error */
  *done = 0;
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
  if (r != ncclSuccess) return zz_nccl_fail(n, r, "ncclCommGetAsyncError");
  if (state != ncclSuccess && state != ncclInProgress) return zz_nccl_fail(n, state, "a transfer failed");
  return ZZ_OK;
}

static zz_status zz_nccl_test(zz_xchg *x, int slot) {
  zz_xchg_slot *s = &x->slot[slot];
  int done = 0;
  if (s->req != MPI_REQUEST_NULL) {
    MPI_Status status;
    if (MPI_Test(&s->req, &done, &status) != MPI_SUCCESS)
      return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: header of slot %d (rank %d)", slot, s->peer);
    if (!done) return ZZ_OK;
    if (slot < ZZ_XCHG_RECV) { /* the header says what comes */
      if (s->head > x->cap)
        return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: rank %d announces %llu bytes, the buffers hold %zu", s->peer,
                        (unsigned long long)s->head, x->cap);
      s->bytes = (size_t)s->head;
      if (s->bytes) {
        ZZ_CHECK(zz_nccl_payload(x, slot, false));
        s->state = ZZ_XS_PAYLOAD;
      }
    }
  }
  if (s->bytes) ZZ_CHECK(zz_nccl_event(x, slot, &done));
  if (done) s->state = ZZ_XS_DONE;
  return ZZ_OK;
}

/* ================================================================ end */

static void zz_nccl_abort(zz_xchg *x) {
  zz_nccl *n = zz_nccl_of(x);
  zz_xchg_free_requests(x);
  /* kernels waiting on a peer that will never come are ended; nothing else frees them */
  if (n->comm_made) (void)ncclCommAbort(n->comm);
  n->comm_made = false;
}

static void zz_nccl_destroy(zz_xchg *x) {
  zz_nccl *n = zz_nccl_of(x);
  if (n) {
    (void)zz_nccl_enter(n);
    if (n->comm_made) {
      /* flush, bounded; a communicator that does not finish is aborted */
      ncclResult_t r = ncclCommFinalize(n->comm);
      if ((r == ncclSuccess || r == ncclInProgress) && zz_nccl_settle(x, "ncclCommFinalize") == ZZ_OK)
        (void)ncclCommDestroy(n->comm);
      else
        (void)ncclCommAbort(n->comm);
    }
    for (int k = 0; k < ZZ_XCHG_SLOTS; k++)
      if (n->ev[k]) (void)cudaEventDestroy(n->ev[k]);
    if (n->stream) (void)cudaStreamDestroy(n->stream);
    (void)cudaGetLastError();
    free(n);
  }
  free(x);
}

static const zz_xchg_ops zz_xchg_nccl_ops = {
    .name = "nccl",
    .on_device = true,
    .alloc = zz_nccl_alloc,
    .release = zz_nccl_release,
    .irecv = zz_nccl_irecv,
    .isend = zz_nccl_isend,
    .test = zz_nccl_test,
    .abort = zz_nccl_abort,
    .destroy = zz_nccl_destroy,
};

/* ================================================================ start-up */

typedef struct zz_gpu_msg {
  int32_t status;         /* zz_status of this rank's identity */
  char id[ZZ_GPU_ID_LEN]; /* its GPU, or the reason it has none */
} zz_gpu_msg;

typedef struct zz_uid_msg {
  int32_t status; /* rank 0's ncclGetUniqueId */
  ncclUniqueId uid;
} zz_uid_msg;

/* Every rank's GPU, gathered: a rank without one, or two ranks on one GPU, refuse
 * the exchange on every rank with the same message. */
static zz_status zz_nccl_gpus(zz_xchg *x, const char (*hosts)[ZZ_HOST_LEN], double deadline) {
  zz_nccl *n = zz_nccl_of(x);
  int rank = 0, size = 0;
  MPI_Comm_rank(x->comm, &rank);
  MPI_Comm_size(x->comm, &size);
  zz_gpu_msg me = {0};
  me.status = (int32_t)zz_device_identity(x->dev, &n->ordinal, me.id, sizeof me.id);
  if (me.status != ZZ_OK) snprintf(me.id, sizeof me.id, "%s", zz_error_message());
  zz_gpu_msg *all = calloc((size_t)size, sizeof *all);
  char(*ids)[ZZ_GPU_ID_LEN] = calloc((size_t)size, sizeof *ids);
  if (!all || !ids) {
    free(all);
    free(ids);
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: nccl exchange: GPU ids");
  }
  MPI_Request req;
  zz_status s = MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, x->comm, &req) ==
                        MPI_SUCCESS
                    ? zz_comm_wait(x->faults, &req, NULL, deadline, "stage: nccl exchange: gathering GPU ids", rank,
                                   NULL)
                    : zz_error(ZZ_ERR_MPI, "stage: nccl exchange: gathering GPU ids");
  if (s != ZZ_OK) return s; /* all stays: MPI may still write into it; the process is ending */
  for (int r = 0; r < size && s == ZZ_OK; r++) {
    all[r].id[ZZ_GPU_ID_LEN - 1] = '\0';
    if (all[r].status != ZZ_OK)
      s = zz_error(ZZ_ERR_UNSUPPORTED, "--comm nccl: rank %d (host %s) has no GPU: %s", r, hosts[r], all[r].id);
    memcpy(ids[r], all[r].id, ZZ_GPU_ID_LEN);
  }
  if (s == ZZ_OK) s = zz_xchg_same_gpu((const char(*)[ZZ_GPU_ID_LEN])ids, hosts, size);
  free(all);
  free(ids);
  return s;
}

/* Rank 0's unique id to every rank, then the non-blocking communicator. */
static zz_status zz_nccl_comm(zz_xchg *x, double deadline) {
  zz_nccl *n = zz_nccl_of(x);
  int rank = 0, size = 0;
  MPI_Comm_rank(x->comm, &rank);
  MPI_Comm_size(x->comm, &size);
  zz_uid_msg m = {0};
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&m.uid);
    m.status = r == ncclSuccess ? ZZ_OK : ZZ_ERR_MPI;
  }
  MPI_Request req;
  if (MPI_Ibcast(&m, (int)sizeof m, MPI_BYTE, 0, x->comm, &req) != MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: nccl exchange: broadcasting the unique id");
  ZZ_CHECK(
      zz_comm_wait(x->faults, &req, NULL, deadline, "stage: nccl exchange: waiting for rank 0's unique id", 0, NULL));
  if (m.status != ZZ_OK) return zz_error(ZZ_ERR_MPI, "--comm nccl: ncclGetUniqueId failed on rank 0");
  ZZ_CHECK(zz_nccl_enter(n));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0; /* every wait on the communicator is ours, and bounded */
  ncclResult_t r = ncclCommInitRankConfig(&n->comm, size, m.uid, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) return zz_nccl_fail(n, r, "ncclCommInitRankConfig");
  n->comm_made = true;
  return zz_nccl_settle(x, "creating the communicator (every rank must join)");
}

zz_status zz_xchg_create_nccl(MPI_Comm comm, zz_faults *f, double timeout, zz_device *dev,
                              const char (*hosts)[ZZ_HOST_LEN], zz_xchg **out) {
  ZZ_CHECK(zz_stage_comm_check(ZZ_STAGE_COMM_NCCL, dev));
  zz_xchg *x = calloc(1, sizeof *x);
  zz_nccl *n = calloc(1, sizeof *n);
  if (!x || !n) {
    free(x);
    free(n);
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: nccl exchange");
  }
  *x = (zz_xchg){.ops = &zz_xchg_nccl_ops, .comm = comm, .faults = f, .timeout = timeout, .dev = dev, .impl = n};
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) x->slot[k].req = MPI_REQUEST_NULL;
  /* start-up: every rank is there within seconds, unless one is gone */
  n->deadline_s = timeout < 60 ? timeout : 60;
  zz_status s = zz_nccl_gpus(x, hosts, n->deadline_s);
  if (s == ZZ_OK) s = zz_nccl_enter(n);
  cudaError_t e = cudaSuccess;
  if (s == ZZ_OK && (e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking)) != cudaSuccess)
    s = zz_cuda_fail(e, "creating its stream");
  for (int k = 0; k < ZZ_XCHG_SLOTS && s == ZZ_OK; k++)
    if ((e = cudaEventCreateWithFlags(&n->ev[k], cudaEventDisableTiming)) != cudaSuccess)
      s = zz_cuda_fail(e, "creating its events");
  if (s == ZZ_OK) s = zz_nccl_comm(x, n->deadline_s);
  if (s != ZZ_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", zz_error_message());
    if (n->comm_made) (void)ncclCommAbort(n->comm);
    n->comm_made = false;
    zz_nccl_destroy(x);
    return zz_error(s, "%s", msg);
  }
  *out = x;
  return ZZ_OK;
}

#endif /* ZZ_HAVE_NCCL */
