/*
 * xchg.c — the hidden-state exchange: what both implementations share (slots,
 * bounded waits, the end of a block), the MPI implementation, the --comm choice
 * and its refusals, and the check that no two ranks share a GPU. The NCCL
 * implementation is xchg_nccl.c (built with NCCL only).
 */
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "xchg_impl.h"

/* ================================================================ --comm */

static const char *const zz_comm_names[ZZ_STAGE_COMM_COUNT] = {"mpi", "nccl"};

zz_status zz_stage_comm_parse(const char *name, zz_stage_comm *out) {
  for (int i = 0; i < ZZ_STAGE_COMM_COUNT; i++)
    if (name && strcmp(name, zz_comm_names[i]) == 0) {
      *out = (zz_stage_comm)i;
      return ZZ_OK;
    }
  return zz_error(ZZ_ERR_INVALID_ARG, "--comm %s: want mpi or nccl", name ? name : "(none)");
}

const char *zz_stage_comm_name(zz_stage_comm comm) {
  return (unsigned)comm < ZZ_STAGE_COMM_COUNT ? zz_comm_names[comm] : "?";
}

zz_status zz_stage_comm_check(zz_stage_comm comm, const zz_device *dev) {
  if (comm == ZZ_STAGE_COMM_MPI) return ZZ_OK;
#ifndef ZZ_HAVE_NCCL
  (void)dev;
  return zz_error(ZZ_ERR_UNSUPPORTED, "--comm nccl: this zigzag was built without NCCL (nccl.h and libnccl were "
                                      "not found at configure time, or CUDA was off); use --comm mpi");
#else
  if (!dev || zz_device_describe(dev)->kind != ZZ_DEVICE_CUDA) /* a GPU, with an identity to compare */
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "--comm nccl: this rank computes on the %s device; NCCL moves GPU memory "
                    "(use --device cuda with one GPU per rank, or --comm mpi)",
                    dev ? zz_device_describe(dev)->name : "no");
  return ZZ_OK;
#endif
}

/* ================================================================ two ranks, one GPU */

zz_status zz_xchg_same_gpu(const char (*ids)[ZZ_GPU_ID_LEN], const char (*hosts)[ZZ_HOST_LEN], int n) {
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      if (ids[a][0] && strncmp(ids[a], ids[b], ZZ_GPU_ID_LEN) == 0)
        return zz_error(ZZ_ERR_UNSUPPORTED,
                        "--comm nccl: rank %d (host %s) and rank %d (host %s) both compute on %.*s; "
                        "NCCL cannot put two ranks on one GPU (give each rank its own GPU: --device cuda takes "
                        "the local rank's, or set CUDA_VISIBLE_DEVICES per rank), or use --comm mpi",
                        a, hosts[a], b, hosts[b], ZZ_GPU_ID_LEN, ids[a]);
  return ZZ_OK;
}

/* ================================================================ shared */

zz_status zz_xchg_reserve(zz_xchg *x, size_t bytes) {
  if (bytes <= x->cap) return ZZ_OK;
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++)
    if (x->slot[k].state != ZZ_XS_IDLE)
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: internal: exchange buffers grown while slot %d is busy", k);
  x->ops->release(x);
  x->cap = 0;
  zz_status s = x->ops->alloc(x, bytes);
  if (s != ZZ_OK) {
    x->ops->release(x);
    return zz_error(s, "stage: %s exchange buffers of %zu bytes: %s", x->ops->name, bytes, zz_error_message());
  }
  x->cap = bytes;
  return ZZ_OK;
}

static zz_status zz_xchg_take(zz_xchg *x, int slot, bool send) {
  if (slot < 0 || slot >= ZZ_XCHG_SLOTS || (slot < ZZ_XCHG_RECV) == send || x->slot[slot].state != ZZ_XS_IDLE)
    return zz_error(ZZ_ERR_MPI, "stage: internal: exchange slot %d is not a free %s slot", slot,
                    send ? "send" : "receive");
  return ZZ_OK;
}

zz_status zz_xchg_irecv(zz_xchg *x, int slot, int src, int tag) {
  ZZ_CHECK(zz_xchg_take(x, slot, false));
  zz_xchg_slot *s = &x->slot[slot];
  s->bytes = x->cap;
  s->peer = src;
  ZZ_CHECK(x->ops->irecv(x, slot, src, tag));
  s->state = ZZ_XS_POSTED;
  return ZZ_OK;
}

zz_status zz_xchg_isend(zz_xchg *x, int slot, size_t bytes, int dst, int tag) {
  ZZ_CHECK(zz_xchg_take(x, slot, true));
  zz_xchg_slot *s = &x->slot[slot];
  if (bytes > x->cap || bytes > (size_t)INT32_MAX)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: a message of %zu bytes, the exchange buffers hold %zu", bytes, x->cap);
  s->bytes = bytes;
  s->peer = dst;
  ZZ_CHECK(x->ops->isend(x, slot, dst, tag));
  s->state = ZZ_XS_POSTED;
  return ZZ_OK;
}

bool zz_xchg_busy(const zz_xchg *x, int slot) { return x->slot[slot].state != ZZ_XS_IDLE; }

zz_status zz_xchg_poke(zz_xchg *x, int slot) {
  zz_xchg_state st = x->slot[slot].state;
  return st == ZZ_XS_POSTED || st == ZZ_XS_PAYLOAD ? x->ops->test(x, slot) : ZZ_OK;
}

zz_status zz_xchg_wait(zz_xchg *x, int slot, const char *what, double *waited_out, size_t *bytes_out) {
  zz_xchg_slot *s = &x->slot[slot];
  double t0 = zz_now();
  int spins = 0;
  zz_status st = ZZ_OK;
  while (s->state != ZZ_XS_IDLE && s->state != ZZ_XS_DONE) {
    if ((st = x->ops->test(x, slot)) != ZZ_OK) break;
    if (s->state == ZZ_XS_DONE) break;
    if ((st = zz_faults_check(x->faults)) != ZZ_OK) break;
    if (zz_now() - t0 > x->timeout) {
      st = zz_error(ZZ_ERR_MPI, "%s (rank %d, %s): nothing after %.0f s (step timeout)", what, s->peer, x->ops->name,
                    x->timeout);
      break;
    }
    zz_comm_backoff(&spins);
  }
  if (waited_out) *waited_out += zz_now() - t0;
  if (st != ZZ_OK) return st;
  if (bytes_out) *bytes_out = s->bytes;
  s->state = ZZ_XS_IDLE;
  return ZZ_OK;
}

zz_status zz_xchg_settle(zz_xchg *x, bool clean) {
  if (!clean) {
    x->ops->abort(x);
    x->aborted = true;
    for (int k = 0; k < ZZ_XCHG_SLOTS; k++) x->slot[k].state = ZZ_XS_IDLE;
    return ZZ_OK;
  }
  zz_status st = ZZ_OK;
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) {
    zz_xchg_slot *s = &x->slot[k];
    if (s->state == ZZ_XS_POSTED && k < ZZ_XCHG_RECV && s->req != MPI_REQUEST_NULL) {
      /* a receive (or an nccl header) for an item nobody sends: the last group stopped */
      MPI_Cancel(&s->req);
      MPI_Wait(&s->req, MPI_STATUS_IGNORE);
      s->state = ZZ_XS_IDLE;
    } else if (s->state == ZZ_XS_DONE) {
      s->state = ZZ_XS_IDLE;
    } else if (s->state != ZZ_XS_IDLE && st == ZZ_OK) {
      st = zz_xchg_wait(x, k,
                        k < ZZ_XCHG_RECV ? "stage: a receive still in flight at the end of the block"
                                         : "stage: a send still in flight at the end of the block",
                        NULL, NULL);
    }
  }
  return st;
}

void zz_xchg_destroy(zz_xchg *x) {
  if (!x) return;
  if (x->aborted) { /* in-flight transfers may still write into the buffers: the process is ending */
    free(x);
    return;
  }
  x->ops->release(x);
  x->ops->destroy(x);
}

/* ================================================================ mpi */

static zz_status zz_mpi_alloc(zz_xchg *x, size_t bytes) {
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) {
    if (x->dev) ZZ_CHECK(zz_device_host_alloc(x->dev, bytes, &x->slot[k].buf));
    else if (!(x->slot[k].buf = malloc(bytes ? bytes : 1)))
      return zz_error(ZZ_ERR_NO_MEMORY, "out of host memory");
  }
  return ZZ_OK;
}

static void zz_mpi_release(zz_xchg *x) {
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) {
    if (x->dev) zz_device_host_free(x->dev, x->slot[k].buf);
    else
      free(x->slot[k].buf);
    x->slot[k].buf = NULL;
  }
}

static zz_status zz_mpi_irecv(zz_xchg *x, int slot, int src, int tag) {
  zz_xchg_slot *s = &x->slot[slot];
  int rc = MPI_Irecv(s->buf, (int)x->cap, MPI_BYTE, src, tag, x->comm, &s->req);
  return zz_mpi_status(rc, "stage: posting the receive of exchange slot %d (rank %d)", slot, src);
}

static zz_status zz_mpi_isend(zz_xchg *x, int slot, int dst, int tag) {
  zz_xchg_slot *s = &x->slot[slot];
  int rc = MPI_Isend(s->buf, (int)s->bytes, MPI_BYTE, dst, tag, x->comm, &s->req);
  return zz_mpi_status(rc, "stage: sending of exchange slot %d (rank %d)", slot, dst);
}

static zz_status zz_mpi_test(zz_xchg *x, int slot) {
  zz_xchg_slot *s = &x->slot[slot];
  MPI_Status status;
  int done = 0;
  int rc = MPI_Test(&s->req, &done, &status);
  ZZ_MPI_CHECK(rc, "stage: waiting of exchange slot %d (rank %d)", slot, s->peer);
  if (!done) return ZZ_OK;
  if (slot < ZZ_XCHG_RECV) {
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    s->bytes = (size_t)got;
  }
  s->state = ZZ_XS_DONE;
  return ZZ_OK;
}

void zz_xchg_free_requests(zz_xchg *x) {
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) {
    zz_xchg_slot *s = &x->slot[k];
    if (s->req == MPI_REQUEST_NULL) continue;
    if (k < ZZ_XCHG_RECV) MPI_Cancel(&s->req);
    MPI_Request_free(&s->req);
  }
}

static void zz_mpi_destroy(zz_xchg *x) { free(x); }

static const zz_xchg_ops zz_xchg_mpi_ops = {
    .name = "mpi",
    .on_device = false,
    .alloc = zz_mpi_alloc,
    .release = zz_mpi_release,
    .irecv = zz_mpi_irecv,
    .isend = zz_mpi_isend,
    .test = zz_mpi_test,
    .abort = zz_xchg_free_requests,
    .destroy = zz_mpi_destroy,
};

zz_status zz_xchg_create_mpi(MPI_Comm comm, zz_faults *f, double timeout, zz_device *dev, zz_xchg **out) {
  zz_xchg *x = calloc(1, sizeof *x);
  if (!x) return zz_error(ZZ_ERR_NO_MEMORY, "stage: exchange");
  *x = (zz_xchg){.ops = &zz_xchg_mpi_ops, .comm = comm, .faults = f, .timeout = timeout, .dev = dev};
  for (int k = 0; k < ZZ_XCHG_SLOTS; k++) x->slot[k].req = MPI_REQUEST_NULL;
  *out = x;
  return ZZ_OK;
}

#ifndef ZZ_HAVE_NCCL
zz_status zz_xchg_create_nccl(MPI_Comm comm, zz_faults *f, double timeout, zz_device *dev,
                              const char (*hosts)[ZZ_HOST_LEN], zz_xchg **out) {
  (void)comm, (void)f, (void)timeout, (void)hosts, (void)out;
  return zz_stage_comm_check(ZZ_STAGE_COMM_NCCL, dev);
}
#endif
